//! Goal: KV-8 (docs/RAFT.md, "A cluster of processes") — a node refuses an
//! append or a snapshot whose vote is not committed, which only a leader's
//! is and which openraft takes on trust (a debug build panics its Raft
//! core: "Expect the Leader vote to be committed"), and goes on taking
//! writes; and a node whose Raft core stops exits, naming why, instead of
//! serving HTTP without Raft.
//! Method: one `redolog-kv` process that leads its term; the single call
//! and the stream each sent a request with the vote `<term>-N2`, not
//! committed; a write afterwards. The negative control,
//! `--unsafe-stray-votes`, hands the request to openraft: its core stops,
//! and the process must exit non-zero with "Raft stopped" on its standard
//! error.

mod common;

use std::time::Duration;

use redolog_kv::TypeConfig;
use redolog_raft::openraft_0_10::openraft;
use serde_json::{json, Value};

use common::Nodes;

type Append = openraft::raft::AppendEntriesRequest<TypeConfig>;

/// An append whose vote names node 2 in the node's own term, not committed.
async fn stray_append(http: &reqwest::Client, nodes: &Nodes) -> Append {
    let term = common::metrics(http, &nodes.addrs[&1]).await["term"].as_u64().expect("a term");
    Append { vote: openraft::Vote::new(term, 2), prev_log_id: None, leader_commit: None, entries: vec![] }
}

fn framed(request: &Append) -> Vec<u8> {
    let mut body = Vec::new();
    common::frame(&mut body, &rmp_serde::to_vec_named(request).expect("MessagePack"));
    body
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_vote_is_refused_and_the_node_writes_on() {
    let mut nodes = Nodes::start(1, &[]).await;
    let (http, addr) = (http(), nodes.addrs[&1]);
    let request = stray_append(&http, &nodes).await;

    let cluster = (common::CLUSTER_HEADER, nodes.identity(1));
    let single = http.post(format!("http://{addr}/raft/append")).header(cluster.0, &cluster.1).json(&request);
    let single = single.send().await.expect("answered");
    let status = single.status();
    let answer: Value = single.json().await.expect("a JSON answer");
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{answer}\n{}", nodes.report());
    assert!(answer["error"].as_str().is_some_and(|error| error.contains("not committed")), "{answer}");

    let streamed = http.post(format!("http://{addr}/raft/stream")).header(cluster.0, &cluster.1).body(framed(&request));
    let streamed = streamed.send().await.expect("answered");
    let bytes = streamed.bytes().await.expect("the whole response");
    let answers = common::unframe(&bytes);
    let [answer] = &answers[..] else { panic!("one answer: {answers:?}") };
    let refused = &answer["Err"]["Refused"];
    assert_eq!(refused["index"], 0, "{answer}");
    assert!(refused["reason"].as_str().is_some_and(|reason| reason.contains("not committed")), "{answer}");

    let write = json!({"op": "set", "key": "k", "value": "v"});
    let written = http.post(format!("http://{addr}/api/write")).json(&write).send().await.expect("answered");
    let status = written.status();
    let text = written.text().await.unwrap_or_default();
    assert!(status.is_success(), "a write after the stray votes: {status} {text}\n{}", nodes.report());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_raft_stops_exits_naming_why() {
    let mut nodes = Nodes::start(1, &["--unsafe-stray-votes"]).await;
    let (http, addr) = (http(), nodes.addrs[&1]);
    let request = stray_append(&http, &nodes).await;
    // Answered or not: the core may stop before it answers.
    let cluster = (common::CLUSTER_HEADER, nodes.identity(1));
    let _ = http.post(format!("http://{addr}/raft/append")).header(cluster.0, cluster.1).json(&request).send().await;
    let exit = nodes.exited(1, Duration::from_secs(10)).await;
    let report = nodes.report();
    assert!(exit.is_some_and(|exit| !exit.success()), "the node did not exit with an error: {exit:?}\n{report}");
    assert!(report.contains("Raft stopped"), "{report}");
}
