//! `redolog bench --workload raft`: N client tasks write through the leader of
//! a three-node openraft cluster in this process (redolog-raft's in-process
//! network and key-value state machine), each node's log store in its own
//! directory on `--device`. The stores: `redolog-raft` and, built with
//! `--features peers`, a RocksDB log store and a `raft-log` log store — same
//! cluster, same network, same state machine, interleaved rounds. Reported:
//! writes/s (median of the rounds), p50/p99 write latency, CPU and fsyncs
//! per write (the whole process: three nodes and the clients).
//!
//! Each client overwrites its own key (`c<client>=<payload>`), so the state
//! machine stays small; openraft's default snapshot policy (every 5000
//! entries) runs, so each store also purges as a long-lived node does.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::storage::RaftLogStorage;
use openraft::BasicNode;
use redolog_raft::in_process::{Machine, Node, Router};

use super::machine::process_cpu_time;
use super::raft_store::{stores, RaftTypes};
use super::report::median;
use super::runner::new_histogram;
use super::{sync_hook, BenchOptions, BoxError};

/// Nodes in the cluster.
const NODES: u64 = 3;

/// What one point measured.
struct Point {
    writes: u64,
    failed: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    cpu: Duration,
    fsyncs: u64,
}

/// openraft's timing for a loaded 2-core machine: heartbeats every 100 ms and
/// elections only after a second of silence, so a busy node is not deposed
/// mid-point.
fn raft_config() -> Result<Arc<openraft::Config>, BoxError> {
    let config = openraft::Config {
        heartbeat_interval: 100,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        ..openraft::Config::default()
    };
    Ok(Arc::new(config.validate()?))
}

/// Starts the cluster on stores from `open`, writes through its leader from
/// `clients` tasks for `--time` seconds, and shuts it down.
async fn cluster_point<S, F>(open: F, dir: &Path, clients: usize, options: &BenchOptions) -> Result<Point, BoxError>
where
    S: RaftLogStorage<RaftTypes>,
    F: Fn(&Path) -> Result<S, BoxError>,
{
    let config = raft_config()?;
    let router = Router::default();
    let mut nodes = Vec::new();
    for id in 1..=NODES {
        let store = open(&dir.join(format!("node-{id}")))?;
        let node = Node::new(id, config.clone(), router.clone(), store, Machine::default()).await?;
        router.set(id, Some(node.clone()));
        nodes.push(node);
    }
    let members: BTreeMap<u64, BasicNode> = (1..=NODES).map(|id| (id, BasicNode::default())).collect();
    nodes[0].initialize(members).await?;
    let metrics =
        nodes[0].wait(Some(Duration::from_secs(10))).metrics(|m| m.current_leader.is_some(), "a leader").await?;
    let leader = metrics.current_leader.and_then(|id| router.get(id)).ok_or("no leader")?;
    leader.client_write("warm-up".to_string()).await?;

    let payload = "x".repeat(options.record_bytes);
    let (fsyncs, cpu) = (sync_hook::calls(), process_cpu_time());
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(options.seconds);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (leader, command) = (leader.clone(), format!("c{client}={payload}"));
        tasks.push(tokio::spawn(async move {
            let mut latency_us = new_histogram();
            let (mut writes, mut failed) = (0, 0);
            while Instant::now() < deadline {
                let call = Instant::now();
                match leader.client_write(command.clone()).await {
                    Ok(_) => {
                        latency_us.saturating_record(call.elapsed().as_micros().max(1) as u64);
                        writes += 1;
                    }
                    Err(_) => failed += 1,
                }
            }
            (writes, failed, latency_us)
        }));
    }
    let mut point = Point {
        writes: 0,
        failed: 0,
        elapsed: Duration::ZERO,
        latency_us: new_histogram(),
        cpu: Duration::ZERO,
        fsyncs: 0,
    };
    for task in tasks {
        let (writes, failed, latency_us) = task.await?;
        point.writes += writes;
        point.failed += failed;
        point.latency_us.add(&latency_us)?;
    }
    point.elapsed = started.elapsed();
    point.cpu = process_cpu_time() - cpu;
    point.fsyncs = sync_hook::calls() - fsyncs;
    for (id, node) in (1..=NODES).zip(nodes) {
        router.set(id, None);
        node.shutdown().await?;
    }
    Ok(point)
}

async fn point(store: &str, dir: &Path, clients: usize, options: &BenchOptions) -> Result<Point, BoxError> {
    match store {
        "redolog-raft" => {
            // Room for openraft's default snapshot interval many times over.
            let config = redolog::Config { capacity_bytes: 64 << 20, ..redolog::Config::default() };
            let open = |dir: &Path| Ok(redolog_raft::in_process::Store::open(dir, config.clone())?);
            cluster_point(open, dir, clients, options).await
        }
        #[cfg(feature = "peers")]
        "rocksdb-raft" => cluster_point(super::raft_rocksdb::RocksDbLogStore::open, dir, clients, options).await,
        #[cfg(feature = "peers")]
        "raft-log" => cluster_point(super::raft_log_store::RaftLogStore::open, dir, clients, options).await,
        #[cfg(feature = "peers")]
        "raft-log-nowait" => {
            cluster_point(super::raft_log_store::RaftLogStore::open_without_batch_wait, dir, clients, options).await
        }
        other => Err(format!("no store {other} in this build").into()),
    }
}

/// Runs the cluster benchmark at each `--threads` count (clients) and prints
/// the table.
pub fn run(options: &BenchOptions) -> Result<(), BoxError> {
    if let Some(flag) = super::log_only_flag(options).or_else(|| super::output_flag(options)) {
        return Err(format!(
            "{flag} does not apply to --workload raft (it takes --tasks, --time, --rounds, --record-bytes, \
             --device, --dir, --stores and --report-interval)"
        )
        .into());
    }
    let workdir = options.device.work_dir(options.dir.as_deref(), "redolog-bench-raft-")?;
    println!(
        "redolog bench --workload raft: 3 nodes in one process, {} on device {}, {}-byte payloads",
        workdir.path().display(),
        options.device,
        options.record_bytes
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let names: Vec<&str> = match options.stores.as_slice() {
        [] => stores(),
        chosen => {
            let known = stores();
            chosen
                .iter()
                .map(|name| known.iter().copied().find(|known| known == name))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("--stores {}: this build has {}", chosen.join(","), known.join(",")))?
        }
    };
    let mut results: Vec<(usize, &str, Vec<Point>)> = Vec::new();
    for &clients in &options.threads {
        for name in &names {
            results.push((clients, name, Vec::new()));
        }
    }
    for round in 0..options.rounds {
        for &clients in &options.threads {
            let mut order = names.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            for name in order {
                let dir = workdir.path().join(format!("{name}-{clients}-{round}"));
                let measured = runtime.block_on(point(name, &dir, clients, options))?;
                std::fs::remove_dir_all(&dir)?;
                if options.report_interval > 0 {
                    println!(
                        "[ round {} ] {name} {clients} clients: {:.0} writes/s",
                        round + 1,
                        measured.writes as f64 / measured.elapsed.as_secs_f64()
                    );
                }
                let slot = results.iter_mut().find(|(c, n, _)| *c == clients && *n == name).ok_or("no slot")?;
                slot.2.push(measured);
            }
        }
    }
    print_table(&results);
    Ok(())
}

fn print_table(results: &[(usize, &str, Vec<Point>)]) {
    println!(
        "\n{:<14} {:>8} {:>12} {:>9} {:>9} {:>13} {:>12} {:>7}",
        "store", "clients", "writes/s", "p50 µs", "p99 µs", "cpu µs/write", "fsync/write", "failed"
    );
    for (clients, name, points) in results {
        let rate = median(points.iter().map(|p| p.writes as f64 / p.elapsed.as_secs_f64()).collect());
        let mut latency = new_histogram();
        for point in points {
            let _ = latency.add(&point.latency_us);
        }
        let writes: u64 = points.iter().map(|p| p.writes).sum();
        let cpu: f64 = points.iter().map(|p| p.cpu.as_secs_f64()).sum();
        let fsyncs: u64 = points.iter().map(|p| p.fsyncs).sum();
        let failed: u64 = points.iter().map(|p| p.failed).sum();
        println!(
            "{:<14} {:>8} {:>12.0} {:>9} {:>9} {:>13.1} {:>12.3} {:>7}",
            name,
            clients,
            rate,
            latency.value_at_quantile(0.5),
            latency.value_at_quantile(0.99),
            cpu * 1e6 / writes.max(1) as f64,
            fsyncs as f64 / writes.max(1) as f64,
            failed,
        );
    }
}
