//! Goal: KV-9 (docs/RAFT.md, "A cluster of processes") — a node hands
//! openraft Raft's RPCs only from its own cluster. A leader of another
//! cluster (a test cluster pointed at this one's address, a cluster
//! redeployed on the same host while an old node still runs) sends
//! committed votes, which KV-8 lets through: one with a higher term deposes
//! the node's leader.
//! Method: two one-node clusters, A and B. B is sent an append carrying a
//! committed vote five terms ahead, by single call, by stream, as a vote
//! request and as a snapshot, naming A's identity or none: each is `403`
//! and B still leads its term and takes writes. The same append naming B's
//! own identity then deposes B — the refused request was one that would
//! have. In a three-node cluster, the nodes initialized through node 1 keep
//! node 1's identity, on disk, across a restart; a node whose identity file
//! is gone does not start. An init sent to a node outside its members
//! leaves it without an identity.

mod common;

use std::time::Duration;

use redolog_kv::TypeConfig;
use redolog_raft::openraft_0_10::openraft;
use serde_json::{json, Value};

use common::Nodes;

type Append = openraft::raft::AppendEntriesRequest<TypeConfig>;
type VoteRequest = openraft::raft::VoteRequest<TypeConfig>;

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client")
}

async fn term(http: &reqwest::Client, nodes: &Nodes, id: u64) -> u64 {
    common::metrics(http, &nodes.addrs[&id]).await["term"].as_u64().expect("a term")
}

/// POSTs `body` to node `id`'s `path` naming `cluster` (or none); the
/// status and the body's text.
async fn post(
    http: &reqwest::Client,
    nodes: &Nodes,
    id: u64,
    path: &str,
    cluster: Option<&str>,
    body: reqwest::Body,
) -> (reqwest::StatusCode, String) {
    let mut request = http.post(format!("http://{}{path}", nodes.addrs[&id])).body(body);
    request = request.header("content-type", "application/json");
    if let Some(cluster) = cluster {
        request = request.header(common::CLUSTER_HEADER, cluster);
    }
    let response = request.send().await.expect("answered");
    (response.status(), response.text().await.unwrap_or_default())
}

/// An append from node 9 leading five terms ahead: a committed vote.
fn deposing(term: u64) -> Append {
    Append { vote: openraft::Vote::new_committed(term + 5, 9), prev_log_id: None, leader_commit: None, entries: vec![] }
}

fn json_body<T: serde::Serialize>(message: &T) -> reqwest::Body {
    serde_json::to_vec(message).expect("JSON").into()
}

fn framed(request: &Append) -> reqwest::Body {
    let mut body = Vec::new();
    common::frame(&mut body, &rmp_serde::to_vec_named(request).expect("MessagePack"));
    body.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clusters_leader_is_refused_and_the_same_request_from_its_own_deposes() {
    let a = Nodes::start(1, &[]).await;
    let mut b = Nodes::start(1, &[]).await;
    let (http, theirs, ours) = (http(), a.identity(1), b.identity(1));
    assert_ne!(theirs, ours, "two clusters drew one identity");
    let before = term(&http, &b, 1).await;
    let append = deposing(before);

    for cluster in [Some(theirs.as_str()), None] {
        let calls = [
            ("/raft/append", json_body(&append)),
            ("/raft/vote", json_body(&VoteRequest::new(openraft::Vote::new(before + 5, 9), None))),
            ("/raft/stream", framed(&append)),
            // Refused before its body is read: any body.
            ("/raft/snapshot", json_body(&json!({}))),
        ];
        for (path, body) in calls {
            let (status, said) = post(&http, &b, 1, path, cluster, body).await;
            assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "{path} naming {cluster:?}: {said}\n{}", b.report());
            assert!(said.contains("another cluster"), "{path}: {said}");
            assert!(!said.contains(&ours), "the refusal gave away the node's identity: {said}");
        }
    }
    let (status, said) = post(&http, &b, 1, "/raft/append", Some("not an identity"), json_body(&append)).await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{said}");

    let metrics = common::metrics(&http, &b.addrs[&1]).await;
    assert_eq!((metrics["state"].as_str(), metrics["term"].as_u64()), (Some("Leader"), Some(before)), "{metrics}");
    let write = json!({"op": "set", "key": "k", "value": "v"});
    let written = http.post(format!("http://{}/api/write", b.addrs[&1])).json(&write).send().await.expect("answered");
    assert!(written.status().is_success(), "a write after the refusals: {}\n{}", written.status(), b.report());

    // The control: naming B's own identity, the same append deposes B.
    let (status, said) = post(&http, &b, 1, "/raft/append", Some(&ours), json_body(&append)).await;
    assert!(status.is_success(), "{status} {said}");
    // B follows node 9 in that term; alone in its cluster, it may have
    // elected itself again since, in a later one. Its metrics are published
    // after it answers: wait for them (5 s at most).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let metrics: Value = common::metrics(&http, &b.addrs[&1]).await;
        if metrics["term"].as_u64().is_some_and(|after| after >= before + 5) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the request would not have deposed B: {metrics}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_keep_the_identity_of_the_node_that_initialized_them() {
    let mut a = Nodes::start(3, &[]).await;
    let b = Nodes::start(1, &[]).await;
    let (http, ours, theirs) = (http(), a.identity(1), b.identity(1));
    for id in [2, 3] {
        assert_eq!(a.identity(id), ours, "node {id} did not take node 1's identity");
    }
    let append = deposing(term(&http, &a, 2).await);
    let (status, said) = post(&http, &a, 2, "/raft/append", Some(&theirs), json_body(&append)).await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "{said}");

    a.kill(2);
    a.spawn(2).await;
    a.settled().await;
    assert_eq!(a.identity(2), ours);
    let (status, said) = post(&http, &a, 2, "/raft/append", Some(&theirs), json_body(&append)).await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "after a restart: {said}\n{}", a.report());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_identity_does_not_start() {
    let mut a = Nodes::start(1, &[]).await;
    a.kill(1);
    std::fs::remove_file(a.dir(1).join("cluster-id")).expect("remove the identity");
    a.launch(1);
    let exit = a.exited(1, Duration::from_secs(20)).await;
    let report = a.report();
    assert!(exit.is_some_and(|exit| !exit.success()), "the node did not exit with an error: {exit:?}\n{report}");
    assert!(report.contains("no cluster identity") && report.contains("cluster-id"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_sent_to_a_node_outside_its_members_leaves_it_without_an_identity() {
    let nodes = Nodes::spawned(2, &[]).await;
    let http = http();
    let init = |members: Value| {
        let http = http.clone();
        let addr = nodes.addrs[&2];
        async move {
            let response = http.post(format!("http://{addr}/cluster/init")).json(&json!({"members": members})).send();
            let response = response.await.expect("answered");
            (response.status(), response.text().await.unwrap_or_default())
        }
    };
    let (status, said) = init(json!({"1": nodes.addrs[&1].to_string()})).await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{said}");
    assert!(said.contains("not among the members"), "{said}");
    assert!(!nodes.dir(2).join("cluster-id").exists(), "the refused init left node 2 an identity");

    let (status, said) = init(json!({"2": nodes.addrs[&2].to_string()})).await;
    assert!(status.is_success(), "{status} {said}");
    assert_eq!(nodes.identity(2).len(), 32);
}
