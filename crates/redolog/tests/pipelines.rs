//! Goal: both pipelines keep every promise, and switching between them under load
//! loses neither a wake-up nor an acknowledgement (INV-17); the dedicated log
//! threads notice work through events, never a timer; `Auto` gives a reason
//! for its choice.
//! Method: 64 threads commit while another thread flips the pipeline every few
//! hundred microseconds; every acknowledged group must be recovered byte-exact and
//! no wait may end by its safety-net timeout with its condition already true.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redolog::{Durability, Log, Lsn, Pipeline};

fn record(thread: usize, index: usize) -> Vec<u8> {
    let mut bytes = format!("thread {thread} commit {index} ").into_bytes();
    bytes.resize(24 + (thread * 5 + index * 11) % 100, b'a' + (index % 26) as u8);
    bytes
}

/// A record index for the settling commits, distinct per pipeline.
fn acknowledged_len_marker(pipeline: Pipeline) -> usize {
    1_000_000 + pipeline as usize
}

#[test]
// One scenario from start to check: the committers, the flipper, the settling
// commits and the recovery that checks them share their state.
#[allow(clippy::too_many_lines)]
fn flipping_the_pipeline_under_64_committers_loses_nothing() {
    const THREADS: usize = 64;
    const RUN_FOR: Duration = Duration::from_millis(1500);
    let dir = tempfile::tempdir().expect("tempdir");
    // 64 MiB: room for everything without a checkpoint, so all of it recovers.
    let config = common::config(32 << 10, 64 << 10).with_pipeline(Pipeline::GroupCommit);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let log = Arc::new(log);
    let done = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (log, done) = (log.clone(), done.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            let order = [Pipeline::Dedicated, Pipeline::GroupCommit, Pipeline::Auto, Pipeline::Dedicated];
            while !done.load(Ordering::SeqCst) {
                log.set_pipeline(order[flips as usize % order.len()]).expect("set_pipeline");
                flips += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
            flips
        })
    };
    let started = Instant::now();
    let committers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for index in 0.. {
                    if started.elapsed() > RUN_FOR {
                        break;
                    }
                    let durability = if index % 5 == 4 { Durability::Written } else { Durability::Synced };
                    let bytes = record(thread, index);
                    let end = log.commit(&bytes, durability).expect("commit");
                    if durability == Durability::Synced {
                        assert!(log.durable_lsn() >= end, "acknowledged {end} before it was synced");
                    }
                    acknowledged.push((end, bytes));
                }
                acknowledged
            })
        })
        .collect();
    let mut acknowledged: Vec<(Lsn, Vec<u8>)> =
        committers.into_iter().flat_map(|thread| thread.join().expect("committer")).collect();
    done.store(true, Ordering::SeqCst);
    let flips = flipper.join().expect("flipper");
    // Settle in each fixed pipeline (the log threads idle in group commit must
    // wake for dedicated) and commit there; a lost wake-up hangs, so a watchdog
    // turns it into a failure.
    for pipeline in [Pipeline::GroupCommit, Pipeline::Dedicated, Pipeline::GroupCommit, Pipeline::Dedicated] {
        log.set_pipeline(pipeline).expect("set_pipeline");
        let (sender, receiver) = std::sync::mpsc::channel();
        let committer = {
            let log = log.clone();
            std::thread::spawn(move || {
                let bytes = record(THREADS, acknowledged_len_marker(pipeline));
                let end = log.commit(&bytes, Durability::Synced).expect("commit");
                let _ = sender.send((end, bytes));
            })
        };
        let settled = receiver.recv_timeout(Duration::from_secs(10));
        let (end, bytes) = settled.unwrap_or_else(|_| panic!("a commit under {pipeline:?} hung: lost wake-up"));
        committer.join().expect("committer");
        acknowledged.push((end, bytes));
    }
    let metrics = log.metrics();
    assert_eq!(metrics.timeouts_with_work(), 0, "lost wake-up:\n{metrics:#}");
    assert!(flips >= 20, "only {flips} flips: the test did not exercise switching");
    assert!(acknowledged.len() > 10 * THREADS, "only {} commits", acknowledged.len());
    assert!(metrics.log_pipeline_switches >= 10, "{metrics:#}");
    log.close().expect("close");
    drop(log);

    acknowledged.sort();
    let (_log, groups, _) = common::reopen(dir.path(), &config);
    assert_eq!(groups.len(), acknowledged.len(), "recovered group count");
    for (group, (end, bytes)) in groups.iter().zip(&acknowledged) {
        assert_eq!(group.end_lsn(), *end);
        assert_eq!(group.records().next(), Some(bytes.as_slice()), "group ending at {end}");
    }
}

#[test]
fn dedicated_threads_sync_buffered_commits_without_a_timer() {
    // The timer would take an hour: only the log threads' events can sync this.
    let interval = Duration::from_secs(3600);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(256, 64 << 10).with_pipeline(Pipeline::Dedicated).with_flush_interval(interval);
    let (log, _) = Log::open(dir.path(), config).expect("open");
    let wait_durable = |end: Lsn, what: &str| {
        let started = Instant::now();
        while log.durable_lsn() < end {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}: nothing synced {end}");
            std::thread::yield_now();
        }
    };
    // Lone commits: each one's write is the writer's first after an idle look,
    // so the writer syncs it itself (INV-37) and the flusher may stay parked.
    for round in 0..50 {
        let end = log.commit(format!("buffered {round}").as_bytes(), Durability::Buffered).expect("commit");
        wait_durable(end, &format!("round {round}"));
        if round % 10 == 0 {
            // Let both threads go idle (park) before the next commit.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // A wait is counted when it ends: the writer's ended on each round's event.
    let metrics = log.metrics();
    assert!(metrics.log_writer.waits > 0, "the writer never waited for work:\n{metrics:#}");

    // Bursts: four threads commit without waiting, so a write finds more ready
    // behind it; the writer hands that to the flusher, whose event (not the
    // timer) must sync it. Bounded: a write with work behind it comes within a
    // few bursts on any scheduler.
    let started = Instant::now();
    let mut bursts = 0;
    while log.metrics().log_flusher.no_waits == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "the flusher never synced in {bursts} bursts");
        let ends: Vec<Lsn> = std::thread::scope(|scope| {
            let committers: Vec<_> = (0..4)
                .map(|thread| {
                    let log = &log;
                    scope.spawn(move || {
                        (0..200)
                            .map(|index| log.commit(&record(thread, index), Durability::Buffered).expect("commit"))
                            .max()
                            .expect("commits")
                    })
                })
                .collect();
            committers.into_iter().map(|committer| committer.join().expect("committer")).collect()
        });
        wait_durable(ends.into_iter().max().expect("ends"), &format!("burst {bursts}"));
        bursts += 1;
    }
    let metrics = log.metrics();
    assert_eq!(metrics.log_writer.timeouts_with_work + metrics.log_flusher.timeouts_with_work, 0, "{metrics:#}");

    // The contrast: group commit leaves Buffered groups to the timer.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(256, 64 << 10).with_pipeline(Pipeline::GroupCommit).with_flush_interval(interval);
    let (log, _) = Log::open(dir.path(), config).expect("open");
    let end = log.commit(b"buffered", Durability::Buffered).expect("commit");
    std::thread::sleep(Duration::from_millis(50));
    assert!(log.durable_lsn() < end, "group commit synced without anyone waiting");
}

#[test]
fn each_pipeline_reports_itself_and_auto_follows_its_rule_table() {
    for (pipeline, expected) in [
        (Pipeline::GroupCommit, Pipeline::GroupCommit),
        (Pipeline::Dedicated, Pipeline::Dedicated),
        (Pipeline::Auto, Pipeline::GroupCommit),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = Log::open(dir.path(), common::config(256, 64 << 10).with_pipeline(pipeline)).expect("open");
        assert_eq!(log.active_pipeline(), expected, "{pipeline:?} at open");
        log.commit(b"x", Durability::Synced).expect("commit");
    }
    // Auto under load on real files: whatever it chose, a reason was given,
    // and the 16 committers finished (a switch lost nobody).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::config(4096, 1 << 20)).expect("open");
    let log = Arc::new(log);
    let started = Instant::now();
    let threads: Vec<_> = (0..16)
        .map(|thread| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut index = 0;
                while started.elapsed() < Duration::from_millis(600) {
                    log.commit(&record(thread, index), Durability::Synced).expect("commit");
                    if index % 64 == 0 {
                        // Pages "flushed": keeps the small log from filling.
                        log.checkpoint(log.durable_lsn()).expect("checkpoint");
                    }
                    index += 1;
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("committer");
    }
    let metrics = log.metrics();
    assert_ne!(metrics.pipeline_reason, "not evaluated yet", "Auto never evaluated in 600 ms\n{metrics:#}");
    assert_eq!(metrics.timeouts_with_work(), 0, "{metrics:#}");
}
