//! Goal: SIGKILL a process running a three-node openraft cluster on redolog
//! log stores at random moments while it writes through the leader; after
//! every kill no write openraft acknowledged is missing (a committed entry is
//! on a majority of the stores), no store's vote goes back, and the cluster
//! restarted from the stores elects a leader and commits again.
//! Method: the child (this test binary, re-run with `REDOLOG_RAFT_KILL_DIR`)
//! opens the three stores, starts the nodes on an in-process network,
//! initializes the cluster on the first round, and writes `key<n>` through the
//! leader, printing `acked <n>` after each acknowledged write; every 50 writes
//! one node calls an election, so terms and votes move. The parent
//! kills it 50–500 ms after its first acknowledgement, reopens the stores and
//! checks. 5 rounds in `cargo test`; more with `REDOLOG_RAFT_KILL_ROUNDS=100
//! cargo test --release -p redolog-raft --test kill_cluster`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{v0_10, v0_9, Line};

const CHILD_ENV: &str = "REDOLOG_RAFT_KILL_DIR";
const LINE_ENV: &str = "REDOLOG_RAFT_KILL_LINE";
const NODES: u64 = 3;

/// Big enough for every round's writes: no snapshots, so nothing is purged
/// (the tests' state machine keeps its snapshots in memory only).
fn config() -> redolog::Config {
    redolog::Config::default().with_capacity_bytes(16 << 20)
}

fn open<S: Line>(dir: &Path, id: u64) -> S {
    S::open_with(&dir.join(format!("node-{id}")), config()).expect("open a store")
}

/// A line's three-node cluster as the child runs it.
trait Cluster: Sized {
    /// Opens the stores in `dir`, starts the nodes (heartbeats every 50 ms,
    /// elections after 150–300 ms, no snapshots) and initializes the cluster
    /// if node 1's store is empty.
    async fn start(dir: &Path) -> Self;
    /// Writes `key<key>` through the leader; true once acknowledged.
    async fn write(&self, key: u64) -> bool;
    /// Node `id` calls an election.
    async fn elect(&self, id: u64);
}

/// The cluster on one line: the code is the same text on both lines, over
/// each line's own types (`$line` the test's module for it, `$openraft` the
/// line's crate); only calling an election differs (`$elect`: 0.10 takes
/// whether to pre-vote).
macro_rules! cluster_on {
    ($line:ident, $openraft:path, |$node:ident| $elect:expr) => {
        impl Cluster for $line::Router {
            async fn start(dir: &Path) -> Self {
                use openraft::{BasicNode, Config, SnapshotPolicy};
                use $openraft as openraft;
                let config = Config {
                    heartbeat_interval: 50,
                    election_timeout_min: 150,
                    election_timeout_max: 300,
                    snapshot_policy: SnapshotPolicy::Never,
                    ..Config::default()
                };
                let config = Arc::new(config.validate().expect("config"));
                let router = $line::Router::default();
                let mut fresh = false;
                for id in 1..=NODES {
                    let mut store: $line::Store = open(dir, id);
                    fresh |= id == 1 && store.state().await.1.is_none();
                    let node = $line::Node::new(id, config.clone(), router.clone(), store, $line::Machine::default())
                        .await
                        .expect("start a node");
                    router.set(id, Some(node));
                }
                if fresh {
                    let members: BTreeMap<u64, BasicNode> = (1..=NODES).map(|id| (id, BasicNode::default())).collect();
                    router.get(1).expect("node 1").initialize(members).await.expect("initialize");
                }
                router
            }

            async fn write(&self, key: u64) -> bool {
                let metrics = self
                    .get(1)
                    .expect("node 1")
                    .wait(Some(Duration::from_secs(30)))
                    .metrics(|metrics| metrics.current_leader.is_some(), "a leader")
                    .await
                    .expect("a leader within 30 s");
                let leader = metrics.current_leader.and_then(|id| self.get(id)).expect("the leader runs");
                leader.client_write(format!("key{key}")).await.is_ok()
            }

            async fn elect(&self, id: u64) {
                let $node = self.get(id).expect("the node runs");
                let _ = $elect.await;
            }
        }
    };
}

cluster_on!(v0_9, openraft, |node| node.trigger().elect());
cluster_on!(v0_10, redolog_raft::openraft_0_10::openraft, |node| node.trigger().elect(false));

/// The child: run the cluster and write until killed.
#[test]
#[ignore = "the child of kill_cluster; does nothing unless started by it"]
fn kill_cluster_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let first_key: u64 = std::env::var("REDOLOG_RAFT_FIRST_KEY").expect("first key").parse().expect("a number");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    match std::env::var(LINE_ENV).as_deref() {
        Ok("0.10") => runtime.block_on(write_until_killed::<v0_10::Router>(Path::new(&dir), first_key)),
        _ => runtime.block_on(write_until_killed::<v0_9::Router>(Path::new(&dir), first_key)),
    }
}

async fn write_until_killed<C: Cluster>(dir: &Path, first_key: u64) {
    let cluster = C::start(dir).await;
    let mut key = first_key;
    loop {
        if cluster.write(key).await {
            println!("acked {key}");
            key += 1;
            // Every 50 writes a node (maybe the leader) calls an
            // election: terms move, votes are saved, and kills land
            // mid-election too, so the vote check has something to see.
            if key % 50 == 0 {
                cluster.elect(1 + key / 50 % NODES).await;
            }
        }
    }
}

/// Runs one child until killed; returns the keys it acknowledged.
fn run_child(line: &str, dir: &Path, first_key: u64, delay: Duration) -> Vec<u64> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["kill_cluster_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(LINE_ENV, line)
        .env("REDOLOG_RAFT_FIRST_KEY", first_key.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let (first_ack, first_ack_seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(key) = line.strip_prefix("acked ") {
                if acked.is_empty() {
                    let _ = first_ack.send(());
                }
                acked.push(key.parse::<u64>().expect("child output"));
            }
        }
        acked
    });
    // The restarted cluster must elect a leader and commit (it converges).
    let converged = first_ack_seen.recv_timeout(Duration::from_secs(60)).is_ok();
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL: nothing is closed or flushed
    child.wait().expect("reap the child");
    let acked = reader.join().expect("reader");
    assert!(converged, "the cluster restarted from its stores committed nothing within 60 s");
    acked
}

/// What the stores hold: per store, its vote's term and its entries' keys.
fn read_stores<S: Line>(dir: &Path) -> Vec<(u64, BTreeSet<u64>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let mut stores = Vec::new();
        for id in 1..=NODES {
            let mut store: S = open(dir, id);
            let term = store.vote().await.map_or(0, |(term, _, _)| term);
            let last = store.state().await.1.map_or(0, |(_, index)| index);
            let keys = store
                .entries(0..=last)
                .await
                .into_iter()
                .filter_map(|(_, payload)| payload?.strip_prefix("key").map(|key| key.parse().expect("a key")))
                .collect();
            stores.push((term, keys));
        }
        stores
    })
}

fn kill_rounds<S: Line>(line: &str, rounds: u64) {
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    eprintln!("kill_cluster on openraft {line}: seed {seed}, {rounds} rounds");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked_ever = Vec::new();
    let mut terms = vec![0; NODES as usize];
    let mut next_key = 0;
    for round in 0..rounds {
        let delay = Duration::from_millis(rng.u64(50..500));
        let acked = run_child(line, dir.path(), next_key, delay);
        next_key = acked.last().map_or(next_key, |key| key + 1);
        acked_ever.extend(acked);
        let stores = read_stores::<S>(dir.path());
        for (node, (term, _)) in stores.iter().enumerate() {
            assert!(*term >= terms[node], "round {round}: node {}'s vote went back to term {term}", node + 1);
            terms[node] = *term;
        }
        for key in &acked_ever {
            let holders = stores.iter().filter(|(_, keys)| keys.contains(key)).count();
            assert!(holders * 2 > NODES as usize, "round {round}: acknowledged key{key} is on {holders} store(s)");
        }
    }
    eprintln!(
        "kill_cluster on openraft {line}: {} acknowledged writes over {rounds} kills, 0 lost; terms {terms:?}",
        acked_ever.len()
    );
}

fn rounds() -> u64 {
    std::env::var("REDOLOG_RAFT_KILL_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(5)
}

#[test]
fn sigkill_never_loses_an_acknowledged_raft_write_0_9() {
    kill_rounds::<v0_9::Store>("0.9", rounds());
}

#[test]
fn sigkill_never_loses_an_acknowledged_raft_write_0_10() {
    kill_rounds::<v0_10::Store>("0.10", rounds());
}
