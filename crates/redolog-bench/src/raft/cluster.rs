//! `redolog-bench bench --workload raft`, `--placement in-process` (the sweep
//! and its table are `sweep`'s): N client tasks write through the leader of
//! a three-node openraft cluster in this process (redolog-raft's in-process
//! network and key-value state machine), each node's log store in its own
//! directory on `--device`. The stores: `redolog-raft` and, built with
//! `--features peers`, a RocksDB log store and a `raft-log` log store — same
//! cluster, same network, same state machine, interleaved rounds — on each
//! openraft line of `--openraft` (0.9 and 0.10 by default). Reported:
//! writes/s (median of the rounds), p50/p99 write latency, CPU and fsyncs
//! per write (the whole process: three nodes and the clients).
//!
//! On 0.10 the cluster runs openraft's defaults for batching, which is how
//! its docs recommend batching client writes: the core takes up to
//! `api_batch_capacity` (4096) queued client writes as one batch and merges
//! up to `max_append_entries` queued appends into one storage call; each
//! client here has one write outstanding, so 256 clients give the core up
//! to 256 writes to batch.
//!
//! Each client overwrites its own key (`c<client>=<payload>`), so the state
//! machine stays small; openraft's default snapshot policy (every 5000
//! entries) runs, so each store also purges as a long-lived node does.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorage;

use super::stores::{with_store, with_store_0_10, OnStore, OnStore010, Point};
use super::{openraft010, ClusterOptions, OpenraftLine, RaftTypes, RaftTypes010};
use crate::harness::machine::process_cpu_time;
use crate::harness::stats::new_histogram;
use crate::harness::{sync_hook, BoxError};

/// Nodes in the cluster.
const NODES: u64 = 3;

/// openraft's timing for a loaded 2-core machine: heartbeats every 100 ms and
/// elections only after a second of silence, so a busy node is not deposed
/// mid-point. The same on both lines; everything else is the line's default.
fn raft_config() -> Result<Arc<openraft::Config>, BoxError> {
    let config = openraft::Config {
        heartbeat_interval: 100,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        ..openraft::Config::default()
    };
    Ok(Arc::new(config.validate()?))
}

fn raft_config_0_10() -> Result<Arc<openraft010::Config>, BoxError> {
    let config = openraft010::Config {
        heartbeat_interval: 100,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        ..openraft010::Config::default()
    };
    Ok(Arc::new(config.validate()?))
}

/// One point: a fresh cluster in `dir`, `clients` client tasks.
struct ClusterPoint<'a> {
    dir: &'a Path,
    clients: usize,
    options: &'a ClusterOptions,
}

impl OnStore for ClusterPoint<'_> {
    type Output = Point;

    async fn run<S, F>(self, open: F) -> Result<Point, BoxError>
    where
        S: RaftLogStorage<RaftTypes> + Clone,
        F: Fn(&Path) -> Result<S, BoxError>,
    {
        cluster_point(open, self.dir, self.clients, self.options).await
    }
}

impl OnStore010 for ClusterPoint<'_> {
    type Output = Point;

    async fn run<S, F>(self, open: F) -> Result<Point, BoxError>
    where
        S: openraft010::storage::RaftLogStorage<RaftTypes010> + Clone,
        F: Fn(&Path) -> Result<S, BoxError>,
    {
        cluster_point_0_10(open, self.dir, self.clients, self.options).await
    }
}

/// Defines `$name`, a cluster point on one openraft line (`$openraft` its
/// crate, `$cluster` its `in_process` module, `$types` its type config,
/// `$config` its timing): starts the cluster on stores from `open`, writes
/// through its leader from `clients` tasks for `--time` seconds, and shuts
/// it down. The same text on both lines, over each line's types.
macro_rules! cluster_point {
    ($name:ident, $openraft:ident, $cluster:path, $types:ty, $config:ident) => {
        async fn $name<S, F>(open: F, dir: &Path, clients: usize, options: &ClusterOptions) -> Result<Point, BoxError>
        where
            S: $openraft::storage::RaftLogStorage<$types>,
            F: Fn(&Path) -> Result<S, BoxError>,
        {
            use $cluster as cluster;
            let config = $config()?;
            let router = cluster::Router::default();
            let mut nodes = Vec::new();
            for id in 1..=NODES {
                let store = open(&dir.join(format!("node-{id}")))?;
                let node =
                    cluster::Node::new(id, config.clone(), router.clone(), store, cluster::Machine::default()).await?;
                router.set(id, Some(node.clone()));
                nodes.push(node);
            }
            let members: BTreeMap<u64, $openraft::BasicNode> =
                (1..=NODES).map(|id| (id, $openraft::BasicNode::default())).collect();
            nodes[0].initialize(members).await?;
            // A node may name a leader before that leader takes writes (seen
            // on 0.10): wait until one node is leader in its own eyes and has
            // committed a write.
            let deadline = Instant::now() + Duration::from_secs(10);
            let (leader_id, leader) = loop {
                let metrics = nodes[0]
                    .wait(Some(Duration::from_secs(10)))
                    .metrics(|m| m.current_leader.is_some(), "a leader")
                    .await?;
                let id = metrics.current_leader.ok_or("no leader")?;
                let leader = router.get(id).ok_or("the leader is not running")?;
                let own = leader.wait(Some(Duration::from_secs(2)));
                if own.metrics(|m| m.state == $openraft::ServerState::Leader, "leader").await.is_ok()
                    && leader.client_write("warm-up".to_string()).await.is_ok()
                {
                    break (id, leader);
                }
                if Instant::now() > deadline {
                    return Err("no node took a write within 10 s".into());
                }
            };
            let point = drive(clients, options, &dir.join(format!("node-{leader_id}")), move |command| {
                let leader = leader.clone();
                async move { leader.client_write(command).await.is_ok() }
            })
            .await?;
            for (id, node) in (1..=NODES).zip(nodes) {
                router.set(id, None);
                node.shutdown().await?;
            }
            Ok(point)
        }
    };
}

cluster_point!(cluster_point, openraft, redolog_raft::openraft_0_9::in_process, RaftTypes, raft_config);
cluster_point!(
    cluster_point_0_10,
    openraft010,
    redolog_raft::openraft_0_10::in_process,
    RaftTypes010,
    raft_config_0_10
);

/// `clients` tasks, each writing its own key with `write` (true once
/// acknowledged) for `--time` seconds; the point they measured.
/// `leader` is the leader's store directory, whose fdatasyncs the point
/// counts apart.
pub(super) async fn drive<W, R>(
    clients: usize,
    options: &ClusterOptions,
    leader: &Path,
    write: W,
) -> Result<Point, BoxError>
where
    W: Fn(String) -> R + Clone + Send + 'static,
    R: Future<Output = bool> + Send,
{
    let payload = "x".repeat(options.record_bytes);
    let (fsyncs, by_fd, cpu) = (sync_hook::calls(), sync_hook::by_fd(), process_cpu_time());
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(options.run.seconds);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (write, command) = (write.clone(), format!("c{client}={payload}"));
        tasks.push(tokio::spawn(async move {
            let mut latency_us = new_histogram();
            let (mut writes, mut failed) = (0, 0);
            while Instant::now() < deadline {
                let call = Instant::now();
                if write(command.clone()).await {
                    latency_us.saturating_record(call.elapsed().as_micros().max(1) as u64);
                    writes += 1;
                } else {
                    failed += 1;
                }
            }
            (writes, failed, latency_us)
        }));
    }
    let mut point = Point {
        calls: 0,
        entries: 0,
        failed: 0,
        elapsed: Duration::ZERO,
        latency_us: new_histogram(),
        cpu: Duration::ZERO,
        fsyncs: 0,
        store_fsyncs: 0,
    };
    for task in tasks {
        let (writes, failed, latency_us) = task.await?;
        point.calls += writes;
        point.entries += writes;
        point.failed += failed;
        point.latency_us.add(&latency_us)?;
    }
    point.elapsed = started.elapsed();
    point.cpu = process_cpu_time() - cpu;
    point.fsyncs = sync_hook::calls() - fsyncs;
    point.store_fsyncs = sync_hook::calls_under(leader, &by_fd);
    Ok(point)
}

/// One in-process point on openraft `line`: a fresh cluster on the store
/// `name` in `dir`, `clients` client tasks.
pub fn in_process_point(
    runtime: &tokio::runtime::Runtime,
    line: OpenraftLine,
    name: &str,
    dir: &Path,
    clients: usize,
    options: &ClusterOptions,
) -> Result<Point, BoxError> {
    let point = ClusterPoint { dir, clients, options };
    // Room for openraft's default snapshot interval many times over.
    match line {
        OpenraftLine::V0_9 => runtime.block_on(with_store(name, 64 << 20, point)),
        OpenraftLine::V0_10 => runtime.block_on(with_store_0_10(name, 64 << 20, point)),
    }
}
