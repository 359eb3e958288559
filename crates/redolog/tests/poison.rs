//! Goal: a failed write or fdatasync poisons the log (INV-6): the failing call and
//! every concurrent and later call return an error, `durable_lsn` freezes, fsync is
//! never retried, and no commit is acknowledged as Synced past the last fdatasync
//! that returned Ok (INV-5). PostgreSQL's 2018 fsync lesson.
//! Method: 16 threads commit through `FaultyStorage`, which fails the k-th
//! fdatasync (or write) once; every Ok is recorded and checked against the frozen
//! durable LSN; then more calls must fail without touching the storage, and the
//! surviving bytes must recover (MemStorage keeps every write). Under both
//! pipelines: with dedicated log threads the failing call is the log thread's.

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier};

use parking_lot::Mutex;
use redolog::storage::{FaultKind, FaultyStorage, MemStorage};
use redolog::{Durability, Error, Log, Lsn, Pipeline};

const THREADS: usize = 16;
const COMMITS_PER_THREAD: usize = 200;

/// Runs the workload until the fault hits; returns every acknowledged end LSN.
fn commit_until_poisoned(log: &Arc<Log>) -> Vec<Lsn> {
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (log, acknowledged, start) = (log.clone(), acknowledged.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for index in 0..COMMITS_PER_THREAD {
                    let record = format!("thread {thread} commit {index}");
                    match log.commit(record.as_bytes(), Durability::Synced) {
                        Ok(end) => acknowledged.lock().push(end),
                        Err(Error::Poisoned { .. } | Error::Io { .. }) => return,
                        Err(other) => panic!("unexpected error {other}"),
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    let acknowledged = acknowledged.lock().clone();
    acknowledged
}

fn check_poisoning(kind: FaultKind, nth: u64, pipeline: Pipeline) {
    let memory = MemStorage::new();
    let dir = Path::new("/log");
    let config = common::config(2048, 64 << 10).with_pipeline(pipeline);
    // Create the log without faults. Reopening a cleanly closed log writes
    // nothing, and fdatasyncs what it recovered (INV-45): count the
    // operations of kind `kind` of an equal open, so that the k-th operation
    // is the workload's k-th.
    let (log, _) = Log::open_with_storage(dir, config.clone(), memory.clone()).expect("create");
    log.close().expect("close");
    let counting = FaultyStorage::new(memory.clone(), kind, u64::MAX, false);
    let (log, _) = Log::open_with_storage(dir, config.clone(), counting.clone()).expect("count");
    let of_open = counting.attempted();
    log.close().expect("close");
    let storage = FaultyStorage::new(memory.clone(), kind, of_open + nth, false);
    let (log, _) = Log::open_with_storage(dir, config.clone(), storage.clone()).expect("open");
    let log = Arc::new(log);
    let acknowledged = commit_until_poisoned(&log);
    assert_eq!(storage.injected(), 1, "{kind:?} #{nth}: the fault was injected once");

    // INV-5 / INV-6: nothing acknowledged past the frozen durable LSN.
    let durable = log.durable_lsn();
    let last_ack = acknowledged.iter().copied().max().unwrap_or_default();
    assert!(last_ack <= durable, "{kind:?} #{nth}: acknowledged {last_ack} past the durable LSN {durable}");

    // Every later call fails with Poisoned and touches no storage: no retry.
    let attempted = storage.attempted();
    let end = log.end_lsn();
    assert!(matches!(log.append(b"late"), Err(Error::Poisoned { .. })));
    assert!(matches!(log.commit(b"late", Durability::Written), Err(Error::Poisoned { .. })));
    assert!(matches!(log.wait(end, Durability::Synced), Err(Error::Poisoned { .. })));
    assert!(matches!(log.checkpoint(durable), Err(Error::Poisoned { .. })));
    assert!(matches!(log.close(), Err(Error::Poisoned { .. })));
    assert_eq!(storage.attempted(), attempted, "{kind:?} #{nth}: a {kind:?} was retried after the failure");
    assert_eq!(log.durable_lsn(), durable, "durable_lsn froze");
    drop(log);

    // With the fault gone, the log reopens and holds every acknowledged commit.
    let (_, recovery) = Log::open_with_storage(dir, config, memory).expect("reopen after the fault");
    let recovered: Vec<Lsn> = common::collect(recovery).iter().map(|group| group.end_lsn()).collect();
    for lsn in &acknowledged {
        assert!(recovered.binary_search(lsn).is_ok(), "{kind:?} #{nth}: acknowledged {lsn} lost");
    }
}

#[test]
fn a_failed_fdatasync_poisons_and_is_never_retried() {
    for nth in [1, 2, 5, 20, 60] {
        check_poisoning(FaultKind::Sync, nth, Pipeline::GroupCommit);
        check_poisoning(FaultKind::Sync, nth, Pipeline::Dedicated);
    }
}

#[test]
fn a_failed_write_poisons() {
    for nth in [1, 2, 10, 40, 150] {
        check_poisoning(FaultKind::Write, nth, Pipeline::GroupCommit);
        check_poisoning(FaultKind::Write, nth, Pipeline::Dedicated);
    }
}

#[test]
fn a_waiter_for_lsn_already_synced_still_succeeds_before_the_fault() {
    let memory = MemStorage::new();
    let storage = FaultyStorage::new(memory, FaultKind::Sync, 1_000_000, false);
    let (log, _) = Log::open_with_storage(Path::new("/log"), common::config(256, 64 << 10), storage).expect("open");
    let end = log.commit(b"durable", Durability::Synced).expect("commit");
    assert!(log.durable_lsn() >= end);
    log.wait(end, Durability::Synced).expect("already synced: no I/O needed");
}
