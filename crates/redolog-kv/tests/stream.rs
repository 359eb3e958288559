//! Goal: KV-5's last clause (docs/RAFT.md, "A cluster of processes") — a
//! node reading a replication stream (`/raft/stream`) answers every request
//! before a malformed frame, then refuses that frame in band, naming its
//! index, and ends the response: nothing after it is read, and the answers
//! before it are not lost to a reset stream.
//! Method: one `redolog-kv` process; a body of a request, a frame that is
//! MessagePack but not a request, and another request, posted at once; the
//! response's frames decoded by hand (a 4-byte big-endian length, then
//! MessagePack).

mod common;

use redolog_kv::TypeConfig;
use redolog_raft::openraft_0_10::openraft;
use serde_json::json;

use common::{frame, unframe, Nodes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_frame_is_refused_after_the_answers_before_it() {
    let nodes = Nodes::start(1, &[]).await;
    let request = openraft::raft::AppendEntriesRequest::<TypeConfig> {
        // An older term than the node's own: refused as stale, an answer all the same.
        vote: openraft::Vote::new_committed(0, 2),
        prev_log_id: None,
        leader_commit: None,
        entries: vec![],
    };
    let request = rmp_serde::to_vec_named(&request).expect("MessagePack");
    let mut body = Vec::new();
    frame(&mut body, &request);
    frame(&mut body, &rmp_serde::to_vec_named(&json!({"not": "a request"})).expect("MessagePack"));
    frame(&mut body, &request);
    let response = reqwest::Client::new()
        .post(format!("http://{}/raft/stream", nodes.addrs[&1]))
        .header(common::CLUSTER_HEADER, nodes.identity(1))
        .body(body)
        .send()
        .await
        .expect("the node answers");
    assert!(response.status().is_success(), "{}", response.status());
    let bytes = tokio::time::timeout(std::time::Duration::from_secs(10), response.bytes())
        .await
        .expect("the response ends after the refusal")
        .expect("the whole response, not a reset");
    let answers = unframe(&bytes);
    assert_eq!(answers.len(), 2, "one answer, then the refusal, nothing after: {answers:?}");
    assert!(answers[0].get("Ok").is_some(), "the request before the bad frame is answered: {}", answers[0]);
    let refused = &answers[1]["Err"]["Refused"];
    assert_eq!(refused["index"], 1, "{}", answers[1]);
    assert!(refused["reason"].as_str().is_some_and(|reason| reason.contains("frame 1")), "{}", answers[1]);
}
