//! Goal: the service's `Client` gathers concurrent writes into batches,
//! gives each write its own answer, follows the leader a follower names,
//! and reports a failure as the kind of error it is; `/api/writes` answers
//! a malformed batch with `400`.
//! Method: three `redolog-kv` processes on loopback (killed on every path),
//! a client pointed at a follower, 300 concurrent writes.

mod common;

use redolog_kv::{Client, ClientError, Command, Request, Session};
use serde_json::Value;

use common::Nodes;

fn set(key: &str, value: &str) -> Command {
    Command { request: Request::Set { key: key.into(), value: value.into() }, session: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_batches_concurrent_writes_and_follows_the_leader() {
    const WRITES: usize = 300;
    let nodes = Nodes::start(3, &[]).await;
    let leader = nodes.leader().await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let client = Client::new(nodes.addrs[&follower].to_string());
    let tasks: Vec<_> = (0..WRITES)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move { client.write(set(&format!("k{n}"), &format!("v{n}"))).await })
        })
        .collect();
    let mut indexes = Vec::new();
    for task in tasks {
        let written = task.await.expect("task").expect("every write is applied");
        assert_eq!(written.node, leader, "the leader answers, not the follower asked first");
        assert!(written.response.applied);
        indexes.push(written.log_index);
    }
    indexes.sort_unstable();
    indexes.dedup();
    assert_eq!(indexes.len(), WRITES, "each write has its own log position");
    let stats = client.stats();
    // Each write went once to the follower, which refused it, and once to
    // the leader; with at most IN_FLIGHT batches on their way, the rest
    // queued and went together.
    assert!(stats.requests < WRITES as u64 / 4, "{stats:?}: writes went one per request");
    let http = reqwest::Client::new();
    for n in [0, WRITES / 2, WRITES - 1] {
        let read: Value = http
            .get(format!("http://{}/api/read", nodes.addrs[&leader]))
            .query(&[("key", format!("k{n}"))])
            .send()
            .await
            .expect("read")
            .json()
            .await
            .expect("json");
        assert_eq!(read["value"], format!("v{n}"));
    }

    // A session's retry is answered by its first application.
    let numbered = Command { session: Some(Session { client: 7, seq: 1 }), ..set("s", "1") };
    let first = client.write(numbered.clone()).await.expect("first");
    let again = client.write(numbered).await.expect("again");
    assert!(again.response.replayed && !first.response.replayed);
    let stale = Command { session: Some(Session { client: 7, seq: 0 }), ..set("s", "0") };
    let error = client.write(stale).await.expect_err("an earlier number is stale");
    assert!(matches!(error, ClientError::Stale { .. }) && !error.may_have_applied(), "{error}");

    // A malformed batch is refused, naming what is missing.
    let refused = http
        .post(format!("http://{}/api/writes", nodes.addrs[&leader]))
        .body(r#"[{"op": "set", "key": "a"}]"#)
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status(), 400);
    let body = refused.text().await.expect("body");
    assert!(body.contains("missing field `value`"), "{body}");
}

#[tokio::test]
async fn a_client_without_a_node_says_nothing_was_applied() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let client = Client::new(unused.to_string());
    let error = client.write(set("a", "1")).await.expect_err("no node listens there");
    assert!(matches!(error, ClientError::Network { .. }), "{error}");
    assert!(!error.may_have_applied(), "a refused connection applied nothing: {error}");
    assert!(error.to_string().contains(&unused.to_string()), "the error names the node: {error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_moves_on_from_a_dead_node() {
    let nodes = Nodes::start(3, &[]).await;
    let leader = nodes.leader().await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let others = nodes.addrs.values().map(ToString::to_string);
    let client = Client::with_fallbacks(dead.to_string(), others);
    let error = client.write(set("a", "1")).await.expect_err("the first node is dead");
    assert!(matches!(error, ClientError::Network { .. }) && !error.may_have_applied(), "{error}");
    let written = client.write(set("a", "2")).await.expect("the next node known, then the leader it names");
    assert_eq!(written.node, leader);
}
