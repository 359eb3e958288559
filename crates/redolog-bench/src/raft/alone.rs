//! `redolog-bench raft-store`: an openraft log store alone, no cluster — what a
//! Raft node's log costs per append. Each point opens a fresh store and, for
//! `--time` seconds, appends batches of `--entries` entries through
//! openraft's `blocking_append` (the flush callback awaited before the next
//! call, as openraft's own test helper drives a store), in interleaved rounds:
//! `redolog-raft` against, built with `--features peers`, a RocksDB log store
//! written the way openraft's RocksDB example is (entries and the vote in one
//! database, a WriteBatch per append, `flush_wal(true)` before the callback).

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, StorageError};

use super::stores::{self, with_store, OnStore, Point, Summary};
use super::{RaftStoreOptions, RaftTypes};
use crate::harness::machine::process_cpu_time;
use crate::harness::rounds::interleave;
use crate::harness::stats::new_histogram;
use crate::harness::{sync_hook, BoxError};

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
        calls: appends,
        entries: next - 1,
        failed: 0,
        elapsed: started.elapsed(),
        latency_us,
        cpu: process_cpu_time() - cpu,
        fsyncs: sync_hook::calls() - fsyncs,
        store_fsyncs: sync_hook::calls() - fsyncs,
    })
}

/// One point: a fresh store in `dir`, appends of `batch` entries.
struct AlonePoint<'a> {
    dir: &'a std::path::Path,
    batch: usize,
    options: &'a RaftStoreOptions,
}

impl OnStore for AlonePoint<'_> {
    type Output = Point;

    async fn run<S, F>(self, open: F) -> Result<Point, BoxError>
    where
        S: RaftLogStorage<RaftTypes> + Clone,
        F: Fn(&std::path::Path) -> Result<S, BoxError>,
    {
        drive(open(self.dir)?, self.batch, self.options).await
    }
}

/// Runs the benchmark and prints the table.
pub fn run(options: &RaftStoreOptions) -> Result<(), BoxError> {
    let workdir = options.device.work_dir(options.dir.as_deref(), "redolog-raft-store-")?;
    println!(
        "redolog-bench raft-store: {} on device {}, {} append(s) in flight",
        workdir.path().display(),
        options.device,
        options.in_flight.max(1)
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let names = stores::names();
    let measured = interleave(
        options.rounds,
        &options.entries,
        &names,
        |_, _| true,
        |visit| {
            let (name, batch, round) = (*visit.system, visit.count, visit.round);
            let dir = workdir.path().join(format!("{name}-{batch}-{round}"));
            let point = AlonePoint { dir: &dir, batch, options };
            // Unconstrained: Tokio's cooperative budget would make a ready flush
            // callback look pending and hold it in the in-flight queue.
            let measured = runtime.block_on(tokio::task::unconstrained(with_store(name, 1 << 30, point)))?;
            std::fs::remove_dir_all(&dir)?;
            Ok(measured)
        },
    )?;
    println!(
        "\n{:<14} {:>8} {:>12} {:>12} {:>9} {:>9} {:>11} {:>12}",
        "store", "entries", "appends/s", "entries/s", "p50 µs", "p99 µs", "fsync/app", "cpu µs/ent"
    );
    for (batch, name, summary) in Summary::table(&measured, &options.entries, &names) {
        println!(
            "{:<14} {:>8} {:>12.0} {:>12.0} {:>9} {:>9} {:>11.2} {:>12.2}",
            name,
            batch,
            summary.calls_per_sec,
            summary.entries_per_sec,
            summary.p50_us,
            summary.p99_us,
            summary.fsyncs_per_call,
            summary.cpu_us_per_entry,
        );
    }
    Ok(())
}
