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

use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, EntryPayload, RaftLogReader, SnapshotPolicy};

use common::{Machine, Router, Store};

const CHILD_ENV: &str = "REDOLOG_RAFT_KILL_DIR";
const NODES: u64 = 3;

/// Big enough for every round's writes: no snapshots, so nothing is purged
/// (the tests' state machine keeps its snapshots in memory only).
fn config() -> redolog::Config {
    redolog::Config { capacity_bytes: 16 << 20, ..redolog::Config::default() }
}

fn open(dir: &Path, id: u64) -> Store {
    Store::open(dir.join(format!("node-{id}")), config()).expect("open a store")
}

/// The child: run the cluster and write until killed.
#[test]
#[ignore = "the child of kill_cluster; does nothing unless started by it"]
fn kill_cluster_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let first_key: u64 = std::env::var("REDOLOG_RAFT_FIRST_KEY").expect("first key").parse().expect("a number");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let dir = Path::new(&dir);
        let config = Config {
            heartbeat_interval: 50,
            election_timeout_min: 150,
            election_timeout_max: 300,
            snapshot_policy: SnapshotPolicy::Never,
            ..Config::default()
        };
        let config = Arc::new(config.validate().expect("config"));
        let router = Router::default();
        let mut fresh = false;
        for id in 1..=NODES {
            let mut store = open(dir, id);
            fresh |= store.get_log_state().await.expect("state").last_log_id.is_none() && id == 1;
            let node = openraft::Raft::new(id, config.clone(), router.clone(), store, Machine::default())
                .await
                .expect("start a node");
            router.set(id, Some(node));
        }
        let first = router.get(1).expect("node 1");
        if fresh {
            let members: BTreeMap<u64, BasicNode> = (1..=NODES).map(|id| (id, BasicNode::default())).collect();
            first.initialize(members).await.expect("initialize");
        }
        let mut key = first_key;
        loop {
            let leader = first
                .wait(Some(Duration::from_secs(30)))
                .metrics(|metrics| metrics.current_leader.is_some(), "a leader")
                .await
                .expect("a leader within 30 s")
                .current_leader
                .and_then(|id| router.get(id))
                .expect("the leader runs");
            if leader.client_write(format!("key{key}")).await.is_ok() {
                println!("acked {key}");
                key += 1;
                // Every 50 writes a node (maybe the leader) calls an
                // election: terms move, votes are saved, and kills land
                // mid-election too, so the vote check has something to see.
                if key % 50 == 0 {
                    let node = router.get(1 + key / 50 % NODES).expect("the node runs");
                    let _ = node.trigger().elect().await;
                }
            }
        }
    });
}

/// Runs one child until killed; returns the keys it acknowledged.
fn run_child(dir: &Path, first_key: u64, delay: Duration) -> Vec<u64> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["kill_cluster_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
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
fn read_stores(dir: &Path) -> Vec<(u64, BTreeSet<u64>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let mut stores = Vec::new();
        for id in 1..=NODES {
            let mut store = open(dir, id);
            let term = store.read_vote().await.expect("vote").map_or(0, |vote| vote.leader_id().term);
            let last = store.get_log_state().await.expect("state").last_log_id.map_or(0, |id| id.index);
            let entries = store.try_get_log_entries(0..=last).await.expect("entries");
            let keys = entries
                .into_iter()
                .filter_map(|entry| match entry.payload {
                    EntryPayload::Normal(data) => data.strip_prefix("key").map(|key| key.parse().expect("a key")),
                    _ => None,
                })
                .collect();
            stores.push((term, keys));
        }
        stores
    })
}

fn kill_rounds(rounds: u64) {
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    eprintln!("kill_cluster: seed {seed}, {rounds} rounds");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked_ever = Vec::new();
    let mut terms = vec![0; NODES as usize];
    let mut next_key = 0;
    for round in 0..rounds {
        let delay = Duration::from_millis(rng.u64(50..500));
        let acked = run_child(dir.path(), next_key, delay);
        next_key = acked.last().map_or(next_key, |key| key + 1);
        acked_ever.extend(acked);
        let stores = read_stores(dir.path());
        for (node, (term, _)) in stores.iter().enumerate() {
            assert!(*term >= terms[node], "round {round}: node {}'s vote went back to term {term}", node + 1);
            terms[node] = *term;
        }
        for key in &acked_ever {
            let holders = stores.iter().filter(|(_, keys)| keys.contains(key)).count();
            assert!(holders * 2 > NODES as usize, "round {round}: acknowledged key{key} is on {holders} store(s)");
        }
    }
    eprintln!("kill_cluster: {} acknowledged writes over {rounds} kills, 0 lost; terms {terms:?}", acked_ever.len());
}

#[test]
fn sigkill_never_loses_an_acknowledged_raft_write() {
    let rounds = std::env::var("REDOLOG_RAFT_KILL_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(5);
    kill_rounds(rounds);
}
