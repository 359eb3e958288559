//! Three openraft nodes in one process, each with its own redolog log store:
//! elect a leader, write keys through it, kill a follower, write more, restart
//! the follower from its log directory and watch it catch up.
//!
//! ```sh
//! cargo run -p redolog-raft --example raft_kv
//! ```
//!
//! The network and the state machine are the crate's in-process ones
//! (`redolog_raft::openraft_0_9::in_process`): a map from node id to its `Raft`, where a node
//! that is down is unreachable, and an in-memory map of `key=value` writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, Raft};

use redolog_raft::openraft_0_9::in_process::{Machine, Node, Router, Store};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Starts node `id` on its log directory (recovering what is there).
async fn start(id: u64, dir: &Path, router: &Router, config: &Arc<Config>) -> Result<(Node, Machine), Failure> {
    let config_1mib = redolog::Config::default().with_capacity_bytes(1 << 20);
    let mut store = Store::open(dir.join(format!("node-{id}")), config_1mib)?;
    if let Some(last) = store.get_log_state().await?.last_log_id {
        println!("node {id} recovered its log up to index {} from its redolog store", last.index);
    }
    let machine = Machine::default();
    let node = Raft::new(id, config.clone(), router.clone(), store, machine.clone()).await?;
    router.set(id, Some(node.clone()));
    Ok((node, machine))
}

/// Writes `key=value` for each key through `leader`.
async fn write(leader: &Node, keys: std::ops::Range<u32>) -> Result<(), Failure> {
    for key in keys {
        leader.client_write(format!("key{key}=value{key}")).await?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let config = Arc::new(
        Config { heartbeat_interval: 100, election_timeout_min: 300, election_timeout_max: 600, ..Config::default() }
            .validate()?,
    );
    let router = Router::default();
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start(id, dir.path(), &router, &config).await?);
    }
    let members: BTreeMap<u64, BasicNode> = (1..=3).map(|id| (id, BasicNode::default())).collect();
    nodes[&1].0.initialize(members).await?;
    let timeout = Some(Duration::from_secs(10));
    let metrics = nodes[&1].0.wait(timeout).metrics(|m| m.current_leader.is_some(), "a leader").await?;
    let leader_id = metrics.current_leader.ok_or("no leader")?;
    println!("3 nodes, one redolog log each in {}; node {leader_id} leads", dir.path().display());

    let started = Instant::now();
    write(&nodes[&leader_id].0, 0..200).await?;
    println!("wrote 200 keys through the leader in {:?}", started.elapsed());

    let follower = (1..=3).find(|&id| id != leader_id).ok_or("no follower")?;
    let (node, _) = nodes.remove(&follower).ok_or("no such node")?;
    router.set(follower, None);
    node.shutdown().await?;
    drop(node); // the last handle: its log store closes
    println!("killed node {follower}");

    write(&nodes[&leader_id].0, 200..400).await?;
    println!("wrote 200 more keys with node {follower} down");

    nodes.insert(follower, start(follower, dir.path(), &router, &config).await?);
    let leader_log = nodes[&leader_id].0.metrics().borrow().last_log_index;
    let caught_up = nodes[&follower].0.wait(timeout).applied_index_at_least(leader_log, "catch up").await?;
    println!(
        "node {follower} caught up to log index {} from the leader",
        caught_up.last_applied.map_or(0, |id| id.index)
    );

    let applied: BTreeSet<BTreeMap<String, String>> = nodes.values().map(|(_, machine)| machine.data()).collect();
    let [data] = applied.into_iter().collect::<Vec<_>>().try_into().map_err(|_| "the nodes differ")?;
    println!("all 3 nodes applied the same {} keys", data.len());
    for (_, (node, _)) in nodes {
        node.shutdown().await?;
    }
    Ok(())
}
