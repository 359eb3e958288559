//! Three openraft nodes in one process, each with its own redolog log store:
//! elect a leader, write keys through it, kill a follower, write more, restart
//! the follower from its log directory and watch it catch up.
//!
//! ```sh
//! cargo run -p redolog-raft --example raft_kv
//! ```
//!
//! The network is in-process (a map from node id to its `Raft`); a node that
//! is down is unreachable. The state machine is the tests' in-memory one
//! (`tests/common/mod.rs`): the applied `key=value` strings.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, Raft};

use common::{Machine, TypeConfig};

type Node = Raft<TypeConfig>;
type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The in-process network: every running node by id.
#[derive(Clone, Default)]
struct Router(Arc<Mutex<BTreeMap<u64, Node>>>);

impl Router {
    fn get(&self, id: u64) -> Option<Node> {
        self.0.lock().expect("router").get(&id).cloned()
    }

    fn set(&self, id: u64, node: Option<Node>) {
        let mut nodes = self.0.lock().expect("router");
        match node {
            Some(node) => nodes.insert(id, node),
            None => nodes.remove(&id),
        };
    }
}

/// One node's connection to `target`.
struct Connection {
    router: Router,
    target: u64,
}

impl Connection {
    /// The target, or the error a dead link gives (openraft's error type, as
    /// large as openraft makes it).
    #[allow(clippy::result_large_err)]
    fn target<E: std::error::Error>(&self) -> Result<Node, RPCError<u64, BasicNode, E>> {
        self.router.get(self.target).ok_or_else(|| {
            let down = std::io::Error::new(std::io::ErrorKind::NotConnected, format!("node {} is down", self.target));
            RPCError::Network(NetworkError::new(&down))
        })
    }
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection {
        Connection { router: self.clone(), target }
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.target()?;
        target.append_entries(rpc).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        let target = self.target()?;
        target.install_snapshot(rpc).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.target()?;
        target.vote(rpc).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }
}

/// Starts node `id` on its log directory (recovering what is there).
async fn start(id: u64, dir: &Path, router: &Router, config: &Arc<Config>) -> Result<(Node, Machine), Failure> {
    let mut store = common::open(&dir.join(format!("node-{id}")));
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

    let applied: BTreeSet<Vec<String>> = nodes.values().map(|(_, machine)| machine.applied()).collect();
    let [data] = applied.into_iter().collect::<Vec<_>>().try_into().map_err(|_| "the nodes differ")?;
    let keys = data.iter().filter(|entry| entry.starts_with("key")).count();
    println!("all 3 nodes applied the same {keys} writes");
    for (_, (node, _)) in nodes {
        node.shutdown().await?;
    }
    Ok(())
}
