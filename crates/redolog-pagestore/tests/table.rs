//! Goal: sysbench-shaped statements (insert, update of `c`, `k = k + 1`,
//! delete) from several threads at durability 1, with a cleaner flushing
//! the oldest dirty pages meanwhile; after a crash the reopened store holds
//! every acknowledged row with its value, the secondary index agrees with
//! the rows, and every page read verifies its checksum.
//! Method: each thread owns the ids `≡ thread (mod THREADS)`, so the oracle
//! of each id is that thread's last acknowledged statement.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use redolog_pagestore::{Options, Outcome, PageStore, Row, C_BYTES};

mod common;
use common::row;

const THREADS: u64 = 4;
const PRELOADED: u64 = 400;

fn options() -> Options {
    common::options(32 << 20, 1 << 20, 32 << 20)
}

/// One thread's statements; returns its ids' acknowledged rows.
fn work(store: &PageStore, thread: u64, seed: u64) -> BTreeMap<u64, Option<Row>> {
    let mut rng = common::xorshift(seed);
    let table = store.table(0);
    let mut acked: BTreeMap<u64, Option<Row>> =
        (0..PRELOADED).filter(|id| id % THREADS == thread).map(|id| (id, Some(row(id, id % 50, 0)))).collect();
    let mut next_new = PRELOADED + thread;
    for _ in 0..250 {
        let owned: Vec<u64> = acked.keys().copied().collect();
        let id = owned[(rng() % owned.len() as u64) as usize];
        let (outcome, end) = match rng() % 4 {
            0 => {
                let new = row(next_new, rng() % 50, 1);
                next_new += THREADS;
                let done = table.insert(&new).expect("insert");
                acked.insert(new.id, Some(new));
                done
            }
            1 => {
                let c = (rng() % 250) as u8 + 2;
                let done = table.update_c(id, &[c; C_BYTES]).expect("update c");
                if let Some(Some(row)) = acked.get_mut(&id) {
                    row.c = [c; C_BYTES];
                }
                done
            }
            2 => {
                let done = table.increment_k(id).expect("k + 1");
                if let Some(Some(row)) = acked.get_mut(&id) {
                    row.k += 1;
                }
                done
            }
            _ => {
                let done = table.delete(id).expect("delete");
                acked.insert(id, None);
                done
            }
        };
        let existed = outcome == Outcome::Done;
        assert!(existed || outcome == Outcome::NotApplicable);
        store.commit_wait(end, 1).expect("durable");
    }
    acked
}

fn check(dir: &Path, expected: &BTreeMap<u64, Option<Row>>) {
    let (store, replayed) = PageStore::open(dir, options()).expect("reopen");
    assert!(replayed.groups > 0, "the crash left work for the replay: {replayed:?}");
    let (rows, entries) = store.table(0).scan().expect("scan");
    let expected_rows: Vec<Row> = expected.values().flatten().cloned().collect();
    assert_eq!(rows.len(), expected_rows.len());
    assert_eq!(rows, expected_rows, "every acknowledged row, with its value, and no other");
    let mut from_rows: Vec<(u64, u64)> = rows.iter().map(|row| (row.k, row.id)).collect();
    from_rows.sort_unstable();
    assert_eq!(entries, from_rows, "the secondary index agrees with the rows");
}

#[test]
fn acknowledged_statements_survive_a_crash_with_both_indexes_agreeing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut store, _) = PageStore::open(dir.path(), options()).expect("open");
    store.create_table().expect("table");
    for id in 0..PRELOADED {
        let (outcome, end) = store.table(0).insert(&row(id, id % 50, 0)).expect("load");
        assert_eq!(outcome, Outcome::Done);
        store.commit_wait(end, 1).expect("durable");
    }
    let done = AtomicBool::new(false);
    let expected = std::thread::scope(|scope| {
        // The cleaner: the oldest dirty pages, the WAL rule first (PS-1).
        let cleaner = scope.spawn(|| {
            let mut flushed = 0;
            while !done.load(Ordering::Relaxed) {
                for (_, no) in store.pool().flush_list().into_iter().take(4) {
                    flushed += usize::from(store.pool().flush_page(store.log(), no).expect("flush"));
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            flushed
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                scope.spawn({
                    let store = &store;
                    move || work(store, thread, 0x9E37_79B9 * (thread + 1))
                })
            })
            .collect();
        let mut expected = BTreeMap::new();
        for worker in workers {
            expected.extend(worker.join().expect("worker"));
        }
        done.store(true, Ordering::Relaxed);
        assert!(cleaner.join().expect("cleaner") > 0, "the cleaner wrote pages before the crash");
        expected
    });
    store.pool().data().sync().expect("sync");
    store.into_log().expect("the engine is ours alone").simulate_crash();
    check(dir.path(), &expected);
    // Reopened once more: the first open checkpointed after its replay.
    let (store, replayed) = PageStore::open(dir.path(), options()).expect("reopen again");
    assert_eq!(replayed.groups, 0, "{replayed:?}");
    assert_eq!(store.table(0).scan().expect("scan").0.len(), expected.values().flatten().count());
}

/// A log far smaller than the work and no page cleaner or checkpointer: the
/// free check alone must make room — one coordinator flushing and
/// checkpointing, the other threads waiting on its event — without
/// stalling, and the rows must survive a crash after it. (With the cleaners
/// running, whether a statement ever reached the free check depended on the
/// cleaners losing a race.)
/// How long the statements of the free-check test may take in all (they
/// take seconds in a debug build).
const STALL_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

#[test]
fn a_small_log_fills_and_the_free_check_makes_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = options();
    options.log.capacity_bytes = 1 << 20;
    options.io_capacity = 1;
    let (mut store, _) = PageStore::open_without_background(dir.path(), options.clone()).expect("open");
    store.create_table().expect("table");
    for id in 0..PRELOADED {
        store.table(0).insert(&row(id, id % 50, 0)).expect("load");
    }
    // Threads of their own, not scoped, and a bound on the wait: a free
    // check that makes no room leaves the statements waiting for log space
    // for ever, and the test must fail then, not hang.
    let store = std::sync::Arc::new(store);
    let (done, finished) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                for round in 0..2500u64 {
                    let id = (round * 13 + thread) % PRELOADED;
                    let c = [(round % 200) as u8 + thread as u8; C_BYTES];
                    let (outcome, _) = store.table(0).update_c(id - id % THREADS + thread, &c).expect("update");
                    assert_eq!(outcome, Outcome::Done);
                }
                let _ = done.send(thread);
            })
        })
        .collect();
    drop(done);
    let deadline = std::time::Instant::now() + STALL_BOUND;
    for _ in 0..THREADS {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(left) {
            panic!("the statements stalled for {STALL_BOUND:?}: the free check made no room ({:?})", store.stats());
        }
    }
    for worker in workers {
        worker.join().expect("a statement thread failed");
    }
    let Ok(store) = std::sync::Arc::try_unwrap(store) else { unreachable!("every statement thread has ended") };
    let stats = store.stats();
    assert!(stats.free_check_waits > 0 && stats.checkpoints > 0, "{stats:?}");
    assert!(stats.checkpoint_age < options.log.capacity_bytes, "{stats:?}");
    store.log().wait(store.log().end_lsn(), redolog::Durability::Synced).expect("durable");
    let expected: Vec<Row> = store.table(0).scan().expect("scan").0;
    store.into_log().expect("the engine is ours alone").simulate_crash();
    let (store, _) = PageStore::open(dir.path(), options).expect("reopen");
    assert_eq!(store.table(0).scan().expect("scan").0, expected);
    eprintln!("free check: {stats:?}");
}

/// A pool far smaller than the table: loading it leaves every page dirty,
/// the page cleaners' LRU flush writes the least recently used, and the
/// rows survive a crash.
#[test]
fn a_pool_smaller_than_the_table_is_flushed_from_its_lru() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = options();
    options.buffer_pool_instances = 1;
    options.buffer_pool_bytes = 16 * redolog_pagestore::PAGE_BYTES as u64;
    let (mut store, _) = PageStore::open(dir.path(), options.clone()).expect("open");
    store.create_table().expect("table");
    // ~2,000 rows of 213 bytes: some 30 leaves, more than the 16 frames.
    for id in 0..2_000 {
        store.table(0).insert(&row(id, id % 50, 0)).expect("load");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.stats().lru_pages_flushed == 0 {
        assert!(std::time::Instant::now() < deadline, "no LRU flush in 10 s: {:?}", store.stats());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    store.log().wait(store.log().end_lsn(), redolog::Durability::Synced).expect("durable");
    let expected: Vec<Row> = store.table(0).scan().expect("scan").0;
    assert_eq!(expected.len(), 2_000);
    store.into_log().expect("the engine is ours alone").simulate_crash();
    let (store, _) = PageStore::open(dir.path(), options).expect("reopen");
    assert_eq!(store.table(0).scan().expect("scan").0, expected);
}
