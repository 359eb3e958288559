//! Goal: `Log::resize` changes the capacity while committers, readers and
//! checkpoints run, growing and shrinking, and a crash at any point leaves a
//! log that opens at the old or the new capacity with every acknowledged
//! group (docs/DESIGN.md §1.18, INV-34, INV-35).
//! Method: every crash image of every storage operation of a grow and a
//! shrink with a committer running (`CrashStorage`); threads that commit,
//! read and checkpoint through several resizes. The failpoint runs are `tests/resize_faults.rs`
//! (failpoints are global to a test process: the other tests' resizes would
//! hit them); the SIGKILL loop is `tests/crash_kill.rs` (`resize_kill_loop`).
//!
//! Random images per state: 10 by default; `REDOLOG_CRASH_SEEDS=50 cargo test
//! --release -p redolog --test resize` explores more (docs/RELIABILITY.md).

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::GroupImage;
use parking_lot::Mutex;
use redolog::storage::{CrashMode, CrashStorage, MemStorage, Storage};
use redolog::{Config, Durability, Error, Log, Lsn};

const DIR: &str = "/log";

/// Four files of `blocks` log blocks each: the capacities the tests resize between.
fn capacity(blocks: u64) -> u64 {
    common::config(blocks, 8192).capacity_bytes
}

/// The log's last checkpoint.
fn checkpoint_of(log: &Log) -> Lsn {
    Lsn::from_u64(log.metrics().lsns.log_lsn_last_checkpoint)
}

fn random_images_per_state() -> u64 {
    std::env::var("REDOLOG_CRASH_SEEDS").map_or(10, |seeds| seeds.parse().expect("REDOLOG_CRASH_SEEDS is a number"))
}

fn records(index: usize) -> Vec<Vec<u8>> {
    let sizes: [usize; 5] = [1, 300, 497, 1300, 2500];
    vec![vec![(index % 251) as u8; sizes[index % sizes.len()]]]
}

/// What was appended and acknowledged, in trace positions (as `crash_states`).
#[derive(Default)]
struct Oracle {
    appended: Vec<GroupImage>,
    /// (operations done, end LSN) per `Synced` acknowledgement.
    acks: Vec<(usize, Lsn)>,
    /// (operations done, checkpoint LSN) per checkpoint.
    checkpoints: Vec<(usize, Lsn)>,
}

impl Oracle {
    fn commit(this: &Mutex<Oracle>, log: &Log, storage: &CrashStorage, index: usize) {
        let group = records(index);
        let slices: Vec<&[u8]> = group.iter().map(Vec::as_slice).collect();
        let end = log.append_group(&slices).expect("append");
        this.lock().appended.push((end, group));
        log.wait(end, Durability::Synced).expect("wait");
        let ops = storage.op_count();
        this.lock().acks.push((ops, end));
    }
}

/// Commits `count` groups from another thread while `during` runs here.
fn with_committer(
    log: &Arc<Log>,
    storage: &CrashStorage,
    oracle: &Arc<Mutex<Oracle>>,
    (first, count): (usize, usize),
    during: impl FnOnce(),
) {
    let committer = {
        let (log, storage, oracle) = (log.clone(), storage.clone(), oracle.clone());
        std::thread::spawn(move || {
            for index in first..first + count {
                Oracle::commit(&oracle, &log, &storage, index);
            }
        })
    };
    during();
    committer.join().expect("committer");
}

fn checkpoint_at_durable(log: &Log, storage: &CrashStorage, oracle: &Mutex<Oracle>) {
    let lsn = log.durable_lsn();
    log.checkpoint(lsn).expect("checkpoint");
    oracle.lock().checkpoints.push((storage.op_count(), lsn));
}

/// INV-34 over every storage operation of a grow and of a shrink, each with
/// a committer running: every crash image opens, at one of the capacities,
/// with no resize files left, a byte-exact prefix of the groups after its
/// checkpoint and every acknowledged one.
#[test]
fn every_crash_state_of_a_resize_opens_old_or_new_with_every_ack() {
    let storage = CrashStorage::new();
    let oracle = Arc::new(Mutex::new(Oracle::default()));
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    let log = Arc::new(log);
    for index in 0..30 {
        Oracle::commit(&oracle, &log, &storage, index);
    }
    checkpoint_at_durable(&log, &storage, &oracle);
    let capacities = [capacity(32), capacity(96), capacity(48)];
    with_committer(&log, &storage, &oracle, (30, 40), || log.resize(capacities[1]).expect("grow"));
    assert_eq!(log.capacity_bytes(), capacities[1]);
    for index in 70..100 {
        Oracle::commit(&oracle, &log, &storage, index);
    }
    checkpoint_at_durable(&log, &storage, &oracle);
    with_committer(&log, &storage, &oracle, (100, 40), || log.resize(capacities[2]).expect("shrink"));
    assert_eq!(log.capacity_bytes(), capacities[2]);
    for index in 140..150 {
        Oracle::commit(&oracle, &log, &storage, index);
    }
    Arc::try_unwrap(log).expect("one handle").close().expect("close");
    let mut oracle = Arc::try_unwrap(oracle).map_err(|_| ()).expect("one oracle").into_inner();
    oracle.appended.sort_by_key(|(end, _)| *end);
    let seeds = random_images_per_state();
    let mut images = 0;
    storage.replay(|ops, state| {
        let mut modes = vec![CrashMode::DropUnsynced];
        if state.unsynced_writes() > 0 {
            modes.push(CrashMode::KeepAll);
            modes.extend((0..seeds).map(|seed| CrashMode::Random(ops as u64 * 1000 + seed)));
        }
        for mode in modes {
            let context = format!("crash after {ops} operations, {mode:?}");
            let image = state.crash(mode).to_storage();
            check_image(&context, image, &oracle, ops, &capacities);
            images += 1;
        }
    });
    eprintln!("{} operations, {images} crash images checked", storage.op_count());
}

fn check_image(context: &str, image: MemStorage, oracle: &Oracle, ops: usize, capacities: &[u64]) {
    let (log, recovery) = Log::open_with_storage(Path::new(DIR), common::small_log(), image.clone())
        .unwrap_or_else(|error| panic!("{context}: reopen: {error}"));
    let checkpoint = recovery.checkpoint_lsn();
    let groups = common::group_images(recovery, context);
    let end = common::assert_recovered_prefix(context, checkpoint, &groups, &oracle.appended);
    let acked = oracle.acks.iter().filter(|(at, _)| *at <= ops).map(|(_, end)| *end).max().unwrap_or(Lsn::from_u64(0));
    assert!(end >= acked, "{context}: acknowledged up to {acked:?}, recovered to {end:?}");
    let checkpointed = oracle.checkpoints.iter().filter(|(at, _)| *at <= ops).map(|(_, lsn)| *lsn).max();
    if let Some(checkpointed) = checkpointed {
        assert!(
            checkpoint >= checkpointed,
            "{context}: checkpoint {checkpointed:?} completed, recovery used {checkpoint:?}"
        );
    }
    assert!(capacities.contains(&log.capacity_bytes()), "{context}: capacity {}", log.capacity_bytes());
    drop(log);
    let names = image.list_dir(Path::new(DIR)).expect("list");
    assert!(!names.iter().any(|name| name.ends_with(".resize")), "{context}: resize files left: {names:?}");
}

/// Committers, a live reader and a checkpointer run while the log grows and
/// shrinks four times: every commit succeeds, the reader sees every group
/// once, in order, and the reopened log holds every group after its
/// checkpoint.
#[test]
fn resizes_under_commits_readers_and_checkpoints_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::small_log().with_pipeline(redolog::Pipeline::Auto);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("create");
    let log = Arc::new(log);
    let start = log.end_lsn();
    let stop = Arc::new(AtomicBool::new(false));
    let committers: Vec<_> = (0..3).map(|thread| spawn_committer(&log, &stop, thread)).collect();
    let checkpointer = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                log.checkpoint(log.durable_lsn()).expect("checkpoint");
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let reader = spawn_reader(&log, &stop);
    for capacity_bytes in [capacity(128), capacity(40), capacity(64), capacity(32)] {
        std::thread::sleep(Duration::from_millis(50));
        log.resize(capacity_bytes).expect("resize");
        assert_eq!(log.capacity_bytes(), capacity_bytes);
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let mut committed: Vec<(Lsn, Vec<u8>)> = Vec::new();
    for committer in committers {
        committed.extend(committer.join().expect("committer"));
    }
    checkpointer.join().expect("checkpointer");
    let durable = log.durable_lsn();
    let seen = reader.join().expect("reader");
    committed.sort();
    assert!(committed.len() > 100, "{} commits", committed.len());
    let last_seen = seen.last().map_or(start, |last| last.0);
    let seen_until: Vec<_> = committed.iter().filter(|(end, _)| *end <= last_seen).cloned().collect();
    assert_eq!(seen, seen_until, "the reader saw every group once, in order");
    assert!(seen.len() + 64 > committed.len(), "the reader fell behind: {} of {}", seen.len(), committed.len());
    log.drop_consumer("reader").expect("drop consumer");
    let checkpoint = checkpoint_of(&log);
    Arc::try_unwrap(log).expect("one handle").close().expect("close");
    let (log, recovery) = Log::open(dir.path(), config).expect("reopen");
    assert_eq!(log.capacity_bytes(), capacity(32));
    let recovered: Vec<(Lsn, Vec<u8>)> = recovery
        .map(|group| group.expect("group"))
        .map(|group| (group.end_lsn(), group.records().next().expect("record").to_vec()))
        .collect();
    let expected: Vec<_> = committed.iter().filter(|(end, _)| *end > checkpoint && *end <= durable).cloned().collect();
    assert_eq!(recovered, expected);
}

/// A thread committing `Synced` until `stop`; returns its groups.
fn spawn_committer(log: &Arc<Log>, stop: &Arc<AtomicBool>, thread: usize) -> JoinHandle<Vec<(Lsn, Vec<u8>)>> {
    let (log, stop) = (log.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut ends = Vec::new();
        let mut index = 0;
        while !stop.load(Ordering::Relaxed) {
            let record = format!("{thread}:{index}:{}", "x".repeat(index % 700)).into_bytes();
            ends.push((log.commit(&record, Durability::Synced).expect("commit"), record));
            index += 1;
        }
        ends
    })
}

/// A live reader holding a consumer (so checkpoints never pass it) until
/// `stop`; returns the groups it read.
fn spawn_reader(log: &Arc<Log>, stop: &Arc<AtomicBool>) -> JoinHandle<Vec<(Lsn, Vec<u8>)>> {
    let mut consumer = log.create_consumer("reader").expect("consumer");
    let (log, stop) = (log.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut reader = log.read_from(consumer.lsn()).expect("read_from");
        loop {
            match reader.next_timeout(Duration::from_millis(20)).expect("read") {
                Some(group) => {
                    seen.push((group.end_lsn(), group.records().next().expect("record").to_vec()));
                    if seen.len() % 16 == 0 {
                        consumer.advance(group.end_lsn()).expect("advance");
                    }
                }
                None if stop.load(Ordering::Relaxed) => break,
                None => {}
            }
        }
        seen
    })
}

/// A shrink waits for the written log to fit the new size: it returns only
/// once a checkpoint lets it, and a second resize meanwhile is `ResizeBusy`.
#[test]
fn a_shrink_waits_for_a_checkpoint_and_a_second_resize_is_busy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::small_log().with_capacity_bytes(capacity(128))).expect("create");
    let log = Arc::new(log);
    // 100 KB of log after the checkpoint: more than a ring of four 32-block files (64 KiB).
    for index in 0..100 {
        log.commit(&vec![index as u8; 1000], Durability::Synced).expect("commit");
    }
    let shrink = {
        let log = log.clone();
        std::thread::spawn(move || log.resize(capacity(32)))
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(!shrink.is_finished(), "the shrink returned before the log fit");
    assert!(matches!(log.resize(capacity(64)), Err(Error::ResizeBusy { .. })));
    log.checkpoint(log.durable_lsn()).expect("checkpoint");
    shrink.join().expect("shrink thread").expect("shrink");
    assert_eq!(log.capacity_bytes(), capacity(32));
    let lsn = log.commit(b"after", Durability::Synced).expect("commit");
    assert!(lsn > checkpoint_of(&log));
}

/// Bad capacities are refused before anything changes; a closed log is Closed.
#[test]
fn a_capacity_out_of_range_or_a_closed_log_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::small_log()).expect("create");
    let before = log.capacity_bytes();
    let Err(Error::InvalidConfig { field, .. }) = log.resize(1000) else { panic!("tiny capacity accepted") };
    assert_eq!(field, "Config::capacity_bytes");
    assert!(matches!(log.resize(Config::CAPACITY_BYTES_MAX + 1), Err(Error::InvalidConfig { .. })));
    assert_eq!(log.capacity_bytes(), before);
    log.resize(before).expect("the same size is a no-op");
    log.close().expect("close");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
        .collect();
    assert!(!names.iter().any(|name| name.ends_with(".resize")), "{names:?}");
}

/// Reading from below the oldest block the new files hold is `Reused`,
/// not corruption, before and after a reopen.
#[test]
fn reading_below_what_a_resize_copied_is_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::small_log()).expect("create");
    let first = log.end_lsn();
    for index in 0..20 {
        log.commit(&vec![index as u8; 400], Durability::Synced).expect("commit");
    }
    let checkpoint = checkpoint_of(&log);
    log.checkpoint(log.durable_lsn()).expect("checkpoint");
    assert!(log.read_from(first).is_ok(), "below the checkpoint but not reused yet");
    log.resize(capacity(128)).expect("grow");
    assert!(matches!(log.read_from(first).map(|_| ()), Err(Error::Reused { .. })), "checkpoint was {checkpoint:?}");
    let tail = log.read_from(checkpoint_of(&log)).expect("read_from the checkpoint").count();
    assert_eq!(tail, 0);
    log.close().expect("close");
    let (log, _) = Log::open(dir.path(), common::small_log()).expect("reopen");
    assert!(matches!(log.read_from(first).map(|_| ()), Err(Error::Reused { .. })));
}
