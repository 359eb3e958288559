//! `redolog raft-store`: an openraft log store alone, no cluster — what a
//! Raft node's log costs per append. Each point opens a fresh store and, for
//! `--time` seconds, appends batches of `--entries` entries through
//! openraft's `blocking_append` (the flush callback awaited before the next
//! call, as openraft's own test helper drives a store), in interleaved rounds:
//! `redolog-raft` against, built with `--features peers`, a RocksDB log store
//! written the way openraft's RocksDB example is (entries and the vote in one
//! database, a WriteBatch per append, `flush_wal(true)` before the callback).

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::path::PathBuf;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, StorageError};

use super::machine::process_cpu_time;
use super::report::median;
use super::runner::new_histogram;
use super::{sync_hook, BoxError, Device};

/// The benchmark's Raft types: the in-process cluster's (string commands,
/// openraft's defaults otherwise).
pub use redolog_raft::in_process::TypeConfig as RaftTypes;

/// Options of `redolog raft-store`.
#[derive(Clone, Debug, Args)]
pub struct RaftStoreOptions {
    /// Entries per append call.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    pub entries: Vec<usize>,
    /// Appends kept outstanding: 1 awaits each flush before the next append,
    /// as openraft 0.9's core does; more submit the next appends first, as
    /// openraft 0.10's core does (it does not wait for the flush).
    #[arg(long, default_value_t = 1)]
    pub in_flight: usize,
    /// Payload bytes per entry.
    #[arg(long, default_value_t = 128)]
    pub entry_bytes: usize,
    /// Seconds per point.
    #[arg(long = "time", default_value_t = 2)]
    pub seconds: u64,
    /// Rounds; the stores' order alternates from round to round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Device profile, as for `bench`: disk, tmpfs or sim:<latency>.
    #[arg(long, default_value = "disk")]
    pub device: Device,
    /// Directory for the stores with --device disk.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// What one point measured.
struct Point {
    appends: u64,
    entries: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    cpu: Duration,
    fsyncs: u64,
}

fn entries(first: u64, count: usize, payload: &str) -> Vec<Entry<RaftTypes>> {
    (first..first + count as u64)
        .map(|index| Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(payload.to_string()),
        })
        .collect()
}

/// An append in flight: its submission time and the future that completes
/// when its flush callback fires.
type InFlight = (Instant, Pin<Box<dyn Future<Output = Result<(), StorageError<u64>>>>>);

/// Appends batches of `batch` entries to `store` for `seconds`, keeping
/// `--in-flight` appends outstanding: each is submitted (polled once, so the
/// appends reach the store in index order) before the oldest is awaited.
async fn drive<S: RaftLogStorage<RaftTypes> + Clone>(
    store: S,
    batch: usize,
    options: &RaftStoreOptions,
) -> Result<Point, BoxError> {
    let payload = "p".repeat(options.entry_bytes);
    let mut latency_us = new_histogram();
    let (fsyncs, cpu) = (sync_hook::calls(), process_cpu_time());
    let started = Instant::now();
    let mut next = 1;
    let mut appends = 0;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    loop {
        let submitting = started.elapsed() < Duration::from_secs(options.seconds);
        if submitting && in_flight.len() < options.in_flight.max(1) {
            let (mut clone, entries) = (store.clone(), entries(next, batch, &payload));
            let mut append: Pin<Box<dyn Future<Output = _>>> =
                Box::pin(async move { clone.blocking_append(entries).await });
            let submitted = Instant::now();
            // The first poll runs the store's `append` (and finishes the
            // future if the store flushed inside it).
            if let Poll::Ready(result) = poll_fn(|context| Poll::Ready(append.as_mut().poll(context))).await {
                result?;
                latency_us.saturating_record(submitted.elapsed().as_micros().max(1) as u64);
            } else {
                in_flight.push_back((submitted, append));
            }
            next += batch as u64;
            appends += 1;
            continue;
        }
        let Some((submitted, append)) = in_flight.pop_front() else { break };
        append.await?;
        latency_us.saturating_record(submitted.elapsed().as_micros().max(1) as u64);
    }
    Ok(Point {
        appends,
        entries: next - 1,
        elapsed: started.elapsed(),
        latency_us,
        cpu: process_cpu_time() - cpu,
        fsyncs: sync_hook::calls() - fsyncs,
    })
}

/// The stores of this build, by name (the cluster benchmark's too).
pub(super) fn stores() -> Vec<&'static str> {
    let mut names = vec!["redolog-raft"];
    if cfg!(feature = "peers") {
        names.extend(["rocksdb-raft", "raft-log", "raft-log-nowait"]);
    }
    names
}

async fn point(
    store: &str,
    dir: &std::path::Path,
    batch: usize,
    options: &RaftStoreOptions,
) -> Result<Point, BoxError> {
    match store {
        "redolog-raft" => {
            let config = redolog::Config { capacity_bytes: 1 << 30, ..redolog::Config::default() };
            drive(redolog_raft::RedologLogStore::<RaftTypes>::open(dir, config)?, batch, options).await
        }
        #[cfg(feature = "peers")]
        "rocksdb-raft" => drive(super::raft_rocksdb::RocksDbLogStore::open(dir)?, batch, options).await,
        #[cfg(feature = "peers")]
        "raft-log" => drive(super::raft_log_store::RaftLogStore::open(dir)?, batch, options).await,
        #[cfg(feature = "peers")]
        "raft-log-nowait" => {
            drive(super::raft_log_store::RaftLogStore::open_without_batch_wait(dir)?, batch, options).await
        }
        other => Err(format!("no store {other} in this build").into()),
    }
}

/// Runs the benchmark and prints the table.
pub fn run(options: &RaftStoreOptions) -> Result<(), BoxError> {
    let workdir = options.device.work_dir(options.dir.as_deref(), "redolog-raft-store-")?;
    println!(
        "redolog raft-store: {} on device {}, {} append(s) in flight",
        workdir.path().display(),
        options.device,
        options.in_flight.max(1)
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let names = stores();
    let mut results: Vec<(usize, &str, Vec<Point>)> = Vec::new();
    for &batch in &options.entries {
        for name in &names {
            results.push((batch, name, Vec::new()));
        }
    }
    for round in 0..options.rounds {
        for &batch in &options.entries {
            let mut order = names.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            for name in order {
                let dir = workdir.path().join(format!("{name}-{batch}-{round}"));
                // Unconstrained: Tokio's cooperative budget would make a ready flush
                // callback look pending and hold it in the in-flight queue.
                let measured = runtime.block_on(tokio::task::unconstrained(point(name, &dir, batch, options)))?;
                std::fs::remove_dir_all(&dir)?;
                let slot = results.iter_mut().find(|(b, n, _)| *b == batch && *n == name).ok_or("no slot")?;
                slot.2.push(measured);
            }
        }
        println!("round {}/{} done", round + 1, options.rounds);
    }
    print_table(&results);
    Ok(())
}

fn print_table(results: &[(usize, &str, Vec<Point>)]) {
    println!(
        "\n{:<14} {:>8} {:>12} {:>12} {:>9} {:>9} {:>11} {:>12}",
        "store", "entries", "appends/s", "entries/s", "p50 µs", "p99 µs", "fsync/app", "cpu µs/ent"
    );
    for (batch, name, points) in results {
        let per_s =
            |f: fn(&Point) -> u64| median(points.iter().map(|p| f(p) as f64 / p.elapsed.as_secs_f64()).collect());
        let mut latency = new_histogram();
        for point in points {
            let _ = latency.add(&point.latency_us);
        }
        let entries: u64 = points.iter().map(|p| p.entries).sum();
        let appends: u64 = points.iter().map(|p| p.appends).sum();
        let cpu: f64 = points.iter().map(|p| p.cpu.as_secs_f64()).sum();
        let fsyncs: u64 = points.iter().map(|p| p.fsyncs).sum();
        println!(
            "{:<14} {:>8} {:>12.0} {:>12.0} {:>9} {:>9} {:>11.2} {:>12.2}",
            name,
            batch,
            per_s(|p| p.appends),
            per_s(|p| p.entries),
            latency.value_at_quantile(0.5),
            latency.value_at_quantile(0.99),
            fsyncs as f64 / appends.max(1) as f64,
            cpu * 1e6 / entries.max(1) as f64,
        );
    }
}
