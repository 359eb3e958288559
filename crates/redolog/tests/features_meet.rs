//! Where the log's features meet: one test per bug that checks of the public
//! API written outside the project found where two features meet (issue
//! "where the log's features meet"), each failing without its fix. The
//! seeded simulation of the whole API (`tests/simulation.rs`) pins the same
//! scenarios by seed.

mod common;

use std::path::Path;

use common::GroupImage;
use redolog::storage::{CrashImage, CrashMode, CrashStorage, MemStorage};
use redolog::{Config, Durability, Log, LogEnd, Lsn, Pipeline};

const DIR: &str = "/log";

/// A log of four 32-block files, a 64 KiB ring and group commit: a group
/// fits the ring whole, so the writer can sync part of it and stop at the
/// file limit.
fn ring_log() -> Config {
    common::config(32, 64 << 10).with_pipeline(Pipeline::GroupCommit)
}

/// Recovers `storage` and returns its groups; panics with `context` on an error.
fn recover(storage: MemStorage, context: &str) -> (LogEnd, Vec<GroupImage>) {
    let (log, recovery) = Log::open_with_storage(Path::new(DIR), ring_log(), storage)
        .unwrap_or_else(|error| panic!("{context}: open: {error}"));
    let end = recovery.end();
    let groups = common::group_images(recovery, context);
    log.simulate_crash();
    (end, groups)
}

/// A process crash while a group that never completes is synced in part,
/// after a slot recorded that sync: the writer wrote and synced the group up
/// to the file limit in several passes (it waits there for a checkpoint),
/// each block claiming the sync before it, and a consumer's
/// creation wrote a slot whose `durable_lsn` lies inside it. Returns the
/// image and the groups recovery must return.
fn torn_group_synced_in_part() -> (CrashImage, Vec<GroupImage>) {
    let storage = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), ring_log(), storage.clone()).expect("create");
    let limit = log.checkpoint_lsn().as_u64() + log.usable_bytes();
    let mut appended = Vec::new();
    while log.end_lsn().as_u64() < limit - 40_000 {
        let record = vec![appended.len() as u8; 1000];
        let end = log.commit(&record, Durability::Synced).expect("commit");
        appended.push((end, vec![record]));
    }
    // Longer than the unsynced bound (a quarter of the files' ring): the
    // writer syncs inside it more than once, so its later blocks claim more.
    let torn = log.append(&[0xEE; 45_000]).expect("the group past the file limit");
    assert!(torn.as_u64() > limit, "the group runs past the file limit");
    // Synced up to the file limit, inside the group.
    log.wait(Lsn::from_u64(limit - 600), Durability::Synced).expect("sync to the file limit");
    drop(log.create_consumer("slot").expect("a slot written with the group synced in part"));
    assert!(log.durable_lsn() > appended.last().expect("groups").0, "the slot claims part of the torn group");
    log.simulate_crash();
    (storage.state().crash(CrashMode::KeepAll), appended)
}

/// Bug 1: a crash during or right after a recovery that cut a torn tail
/// holding synced bytes left a log that never opened again ("the log ends
/// before its durable end"): the repair erased bytes the checkpoint slot
/// still said were durable. Now the slot's claim is lowered before the
/// erase and restored after it (INV-41), and a crash at every point of that
/// recovery — with nothing, everything or a random part of its unsynced
/// writes kept — leaves a log that opens with the same groups, twice.
#[test]
fn a_crash_anywhere_in_a_recovery_that_cuts_synced_bytes_leaves_a_log_that_opens() {
    let (image, appended) = torn_group_synced_in_part();
    let (end, expected) = recover(image.to_storage(), "the first recovery");
    assert!(matches!(end, LogEnd::TornTail { .. }), "the tail is torn: {end:?}");
    assert_eq!(expected, appended, "recovery returns every group before the torn one");
    // The recovery, recorded, then a crash at once (no close, no slot).
    let recording = image.to_recording();
    let (log, _) = Log::open_with_storage(Path::new(DIR), ring_log(), recording.clone()).expect("recovery");
    log.simulate_crash();
    let mut states = 0;
    recording.replay(|ops, state| {
        for mode in [CrashMode::DropUnsynced, CrashMode::KeepAll, CrashMode::Random(ops as u64)] {
            let context = format!("a crash after {ops} operations of the recovery, {mode:?}");
            let storage = state.crash(mode).to_storage();
            let (_, groups) = recover(storage.clone(), &context);
            assert_eq!(groups, expected, "{context}");
            let (_, again) = recover(storage, &format!("{context}, opened again"));
            assert_eq!(again, expected, "{context}, opened again");
            states += 1;
        }
    });
    assert!(states > 12, "the recovery wrote its slots and the erase: {states} crash states");
}

/// Storage whose fdatasyncs take `delay_ms` while it is nonzero (holding a
/// sync pass open long enough for another thread to act meanwhile), and
/// whose next fdatasync fails when `fail_next_sync` is set.
#[derive(Clone, Debug, Default)]
struct SlowSync<S = MemStorage> {
    inner: S,
    delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    fail_next_sync: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Debug)]
struct SlowSyncFile {
    inner: std::sync::Arc<dyn redolog::storage::StorageFile>,
    delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    fail_next_sync: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl<S: redolog::storage::Storage> redolog::storage::Storage for SlowSync<S> {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list_dir(dir)
    }
    fn open_file(
        &self,
        path: &Path,
        create: bool,
    ) -> std::io::Result<std::sync::Arc<dyn redolog::storage::StorageFile>> {
        let inner = self.inner.open_file(path, create)?;
        let (delay_ms, fail_next_sync) = (self.delay_ms.clone(), self.fail_next_sync.clone());
        Ok(std::sync::Arc::new(SlowSyncFile { inner, delay_ms, fail_next_sync }))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

impl redolog::storage::StorageFile for SlowSyncFile {
    fn size(&self) -> std::io::Result<u64> {
        self.inner.size()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(bufs, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        if self.fail_next_sync.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("the next fdatasync fails"));
        }
        let delay = self.delay_ms.load(std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(delay));
        self.inner.sync_data()
    }
}

/// Runs `calls` on threads of their own; panics naming `what` if they have
/// not all returned within `limit` (the threads are left behind).
fn all_return_within<T: Send + 'static>(
    limit: std::time::Duration,
    what: &str,
    calls: Vec<Box<dyn FnOnce() -> T + Send>>,
) -> Vec<T> {
    let (sender, receiver) = std::sync::mpsc::channel();
    let count = calls.len();
    for (index, call) in calls.into_iter().enumerate() {
        let sender = sender.clone();
        std::thread::spawn(move || sender.send((index, call())));
    }
    let deadline = std::time::Instant::now() + limit;
    let mut results: Vec<Option<T>> = (0..count).map(|_| None).collect();
    for _ in 0..count {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let (index, result) =
            receiver.recv_timeout(left).unwrap_or_else(|_| panic!("{what}: not every call returned in {limit:?}"));
        results[index] = Some(result);
    }
    results.into_iter().map(|result| result.expect("every call sent its result")).collect()
}

/// Bug 2: a checkpoint at the end of ~1 MB of `Buffered` groups and a shrink
/// begun while the checkpoint's sync was in flight deadlocked: the shrink
/// lowered the writer's limit below what the checkpoint waited to sync, and
/// waited for a checkpoint that only that wait would bring. A checkpoint in
/// flight now holds the limit it set out to reach, and the shrink waits for
/// it (DESIGN.md §1.18, INV-42).
#[test]
fn a_checkpoint_and_a_shrink_begun_during_its_sync_both_return() {
    let storage = SlowSync::<MemStorage>::default();
    let config = Config::default().with_capacity_bytes(2 << 20);
    let (log, _) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("create");
    let log = std::sync::Arc::new(log);
    let mut end = log.end_lsn();
    while end.as_u64() < (1 << 20) {
        end = log.append(&[5u8; 1000]).expect("append");
    }
    storage.delay_ms.store(300, std::sync::atomic::Ordering::SeqCst);
    let (checkpointer, resizer) = (log.clone(), log.clone());
    let results = all_return_within(
        std::time::Duration::from_secs(20),
        "a checkpoint beside a shrink",
        vec![
            Box::new(move || checkpointer.checkpoint(end)),
            Box::new(move || {
                // During the checkpoint's first sync (300 ms).
                std::thread::sleep(std::time::Duration::from_millis(50));
                resizer.resize(1 << 20)
            }),
        ],
    );
    storage.delay_ms.store(0, std::sync::atomic::Ordering::SeqCst);
    for result in results {
        result.expect("checkpoint and resize succeed");
    }
    assert_eq!((log.checkpoint_lsn(), log.capacity_bytes()), (end, 1 << 20));
    log.close().expect("close");
    let (_, recovery) = Log::open_with_storage(Path::new(DIR), config, storage).expect("reopen");
    assert_eq!((recovery.checkpoint_lsn(), recovery.count()), (end, 0));
}

/// Bug 3: an archiver started just before the last `Log` handle was dropped
/// archived nothing (`stop()` gave the archive's start while the log went on
/// past it): its thread began with a weak handle, found the log gone and
/// returned. The archiver now holds the log from `start` on, so as the
/// log's only holder it closes it and archives to its end, as documented.
#[test]
fn an_archiver_started_just_before_the_last_handle_is_dropped_archives_to_the_end() {
    for round in 0..10 {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (log, _) = Log::open(dir.path().join("redo"), common::archive_log()).expect("open");
        let log = std::sync::Arc::new(log);
        let mut end = log.end_lsn();
        for index in 0..40u8 {
            end = log.append(&[index; 300]).expect("append");
        }
        let archiver = redolog::archive::Archiver::start(&log, dir.path().join("archive")).expect("start");
        drop(log);
        assert_eq!(archiver.stop().expect("stop"), end, "round {round}: the archive ends where the log does");
        let archive = redolog::archive::Archive::open(dir.path().join("archive")).expect("the archive");
        let groups = archive.read_from(archive.start_lsn()).expect("read").count();
        assert_eq!(groups, 40, "round {round}: every group archived");
    }
}

/// Bug 4: a closed log still wrote. `checkpoint()` after `close()` returned
/// `Ok` and wrote a slot after the directory's lock was released; with a
/// second opener in between, the reopen started at that stray checkpoint
/// and lost acknowledged records. `set_pipeline` after close returned `Ok`.
/// Every write of the files now passes one gate, the directory's lock
/// (INV-43): after close, no call of the public API touches the storage.
#[test]
fn a_closed_log_writes_nothing_whatever_is_called() {
    let storage = CrashStorage::new();
    let config = common::small_log().with_pipeline(Pipeline::GroupCommit);
    let (log, _) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("create");
    let end = log.commit(b"acknowledged", Durability::Synced).expect("commit");
    drop(log.create_consumer("reader").expect("consumer"));
    let mut consumer = log.consumer("reader").expect("attach");
    log.close().expect("close");
    let ops = storage.op_count();
    // A second owner opens the directory and goes on.
    let (second, _) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("reopen");
    let second_end = second.commit(b"the second owner's", Durability::Synced).expect("commit");
    let second_ops = storage.op_count();
    assert!(matches!(log.checkpoint(end), Err(redolog::Error::Closed)), "checkpoint after close");
    // Found by the simulation: a refused append moved the closed log's end,
    // and a checkpoint there waited for bytes nobody would write.
    let closed_end = log.end_lsn();
    assert!(matches!(log.append(b"refused"), Err(redolog::Error::Closed)));
    assert_eq!(log.end_lsn(), closed_end, "a refused append leaves a closed log's end");
    assert!(matches!(log.checkpoint(log.end_lsn()), Err(redolog::Error::Closed)), "a checkpoint at a closed log's end");
    assert!(matches!(log.set_pipeline(Pipeline::Dedicated), Err(redolog::Error::Closed)), "set_pipeline after close");
    assert!(matches!(log.append(b"late"), Err(redolog::Error::Closed)), "append after close");
    assert!(matches!(log.resize(1 << 20), Err(redolog::Error::Closed)), "resize after close");
    assert!(matches!(log.create_consumer("late"), Err(redolog::Error::Closed)), "create_consumer after close");
    assert!(matches!(log.drop_consumer("reader"), Err(redolog::Error::Closed)), "drop_consumer after close");
    assert!(matches!(consumer.advance(end), Err(redolog::Error::Closed)), "a consumer's advance after close");
    log.wait(end, Durability::Synced).expect("what close synced stays synced");
    log.close().expect("closing twice is harmless");
    drop(consumer);
    drop(log);
    assert_eq!(storage.op_count(), second_ops, "the closed log touched the storage after close");
    assert!(second_ops > ops, "the second owner wrote");
    second.close().expect("close the second owner");
    let (_, recovery) = Log::open_with_storage(Path::new(DIR), config, storage).expect("open again");
    assert_eq!(recovery.end(), LogEnd::CleanShutdown);
    let records: Vec<Vec<u8>> =
        common::group_images(recovery, "the reopen").into_iter().flat_map(|(_, records)| records).collect();
    assert_eq!(records, [b"acknowledged".to_vec(), b"the second owner's".to_vec()], "ends at {second_end}");
}

/// Bug 5a: `read_from` at an LSN inside a group gave `Ok(None)` at some
/// LSNs and `Corruption` at others; the documented answer is `InvalidLsn`.
/// Every LSN of a stretch of groups across blocks is tried: a boundary
/// reads its group (or, at the end, nothing yet), any other LSN is
/// `InvalidLsn`.
#[test]
fn read_from_inside_a_group_is_invalid_lsn_at_every_lsn() {
    // The appended group stays unsynced until the wait: no flush syncs it.
    let config = ring_log().with_flush_interval(Config::FLUSH_INTERVAL_MAX);
    let (log, _) = Log::open_with_storage(Path::new(DIR), config, MemStorage::new()).expect("create");
    let first = log.end_lsn();
    let mut starts = vec![first];
    for (index, size) in [1usize, 40, 497, 520, 1300, 3, 900].into_iter().enumerate() {
        let end = log.commit(&vec![index as u8; size], Durability::Synced).expect("commit");
        starts.push(end);
    }
    // A group appended but not durable: a reader inside it finds nothing
    // yet, and `InvalidLsn` once the group is durable.
    log.append(&[9u8; 700]).expect("append");
    let synced_end = *starts.last().expect("starts");
    let mut outcomes = std::collections::BTreeMap::new();
    let mut waiting = Vec::new();
    for lsn in first.as_u64()..log.end_lsn().as_u64() {
        let lsn = Lsn::from_u64(lsn);
        let mut reader = match log.read_from(lsn) {
            Err(redolog::Error::InvalidLsn { .. }) => {
                *outcomes.entry("in a block header or trailer").or_insert(0) += 1;
                continue;
            }
            other => other.expect("a reader"),
        };
        let outcome = reader.try_next();
        let kind = match (&outcome, starts.contains(&lsn)) {
            (Ok(Some(group)), true) if group.start_lsn() == lsn => "boundary",
            (Ok(None), true) if lsn == synced_end => "boundary",
            (Ok(None), false) if lsn > synced_end => {
                waiting.push(reader);
                "not durable yet"
            }
            (Err(redolog::Error::InvalidLsn { .. }), false) => "inside a group",
            _ => panic!("read_from({lsn}): {outcome:?} (a boundary: {})", starts.contains(&lsn)),
        };
        *outcomes.entry(kind).or_insert(0) += 1;
    }
    log.wait(log.end_lsn(), Durability::Synced).expect("sync the last group");
    for mut reader in waiting {
        let outcome = reader.try_next();
        assert!(matches!(outcome, Err(redolog::Error::InvalidLsn { .. })), "{reader:?}: {outcome:?}");
    }
    assert_eq!(outcomes["boundary"], starts.len(), "every boundary read: {outcomes:?}");
    assert!(outcomes["inside a group"] > 3000 && outcomes["not durable yet"] > 600, "{outcomes:?}");
}

/// Bug 5b: a full log hung with no error, log line, metric or bound. Now a
/// checkpoint is wanted before the log is full (`checkpoint_wanted`, at 3/4
/// of the usable bytes); the episode is counted and logged once when the
/// log is full; and with `Config::log_full_timeout` an append gives up with
/// `LogFull` before it takes LSNs, naming the checkpoint, the bytes needed
/// and a consumer holding the space (INV-44).
#[test]
fn a_full_log_is_wanted_counted_and_bounded() {
    // Without a bound: a commit waits for the checkpoint, as before, but
    // the episode is counted.
    let (log, _) = Log::open_with_storage(Path::new(DIR), ring_log(), MemStorage::new()).expect("create");
    let log = std::sync::Arc::new(log);
    let mut wanted_before_full = false;
    let mut last = log.end_lsn();
    while log.space().free_bytes() >= 2000 {
        last = log.commit(&[3u8; 900], Durability::Synced).expect("commit");
        wanted_before_full |= log.checkpoint_wanted();
    }
    assert!(wanted_before_full, "a checkpoint was wanted before the log was full");
    let waiter = log.clone();
    // Larger than what is left.
    let blocked = std::thread::spawn(move || waiter.commit(&[3u8; 3000], Durability::Synced));
    while log.metrics().log_full_episodes == 0 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(!blocked.is_finished(), "the commit waits for a checkpoint");
    log.checkpoint(last).expect("checkpoint");
    blocked.join().expect("the commit's thread").expect("the commit, after the checkpoint");
    let metrics = log.metrics();
    assert_eq!(
        (metrics.log_full_episodes, metrics.log_full_refusals, metrics.log_checkpoint_wanted_episodes),
        (1, 0, 1)
    );

    // With a bound: the append that would pass the writer's limit waits
    // that long, then is refused, having reserved nothing.
    let timeout = std::time::Duration::from_millis(200);
    let config = ring_log().with_log_full_timeout(timeout);
    let (log, _) = Log::open_with_storage(Path::new(DIR), config, MemStorage::new()).expect("create");
    let checkpoint = log.checkpoint_lsn();
    let mut last = checkpoint;
    let refused = loop {
        match log.commit(&[3u8; 900], Durability::Synced) {
            Ok(end) => last = end,
            Err(error) => break error,
        }
    };
    let redolog::Error::LogFull { checkpoint_lsn, needed_bytes, held_by, waited } = refused else {
        panic!("a commit on a full log: {refused:?}");
    };
    assert_eq!((checkpoint_lsn, held_by), (checkpoint, None));
    assert!(needed_bytes > 0 && waited >= timeout, "{needed_bytes} bytes needed, waited {waited:?}");
    assert_eq!(log.end_lsn(), last, "a refused append reserves nothing");
    let metrics = log.metrics();
    assert_eq!((metrics.log_full_episodes, metrics.log_full_refusals), (1, 1), "one episode, one refusal");
    // A checkpoint frees the space.
    log.checkpoint(last).expect("checkpoint");
    assert!(log.space().free_bytes() > 0 && !log.checkpoint_wanted());
    log.commit(&[4u8; 900], Durability::Synced).expect("a commit after the checkpoint");
    // A consumer that holds the space is named.
    let _held = log.create_consumer("replica").expect("consumer");
    let refused = loop {
        match log.commit(&[5u8; 900], Durability::Synced) {
            Ok(end) => log.checkpoint(end).expect("checkpoint past the consumer"),
            Err(error) => break error,
        }
    };
    assert!(matches!(&refused, redolog::Error::LogFull { held_by: Some(name), .. } if name == "replica"), "{refused}");
    assert_eq!(log.metrics().log_full_episodes, 2);
}

/// Found by the simulation: a recovery returned groups a process crash had
/// left written but not synced (in the page cache), and the log went on
/// after them; a power loss then lost those groups — which the engine had
/// replayed, and may have flushed pages from — and with them the commits
/// acknowledged after them. Open now syncs the files it recovered from
/// before it returns (PostgreSQL syncs its data directory after a crash
/// for the same reason), so what recovery returns is durable (INV-45).
#[test]
fn what_a_recovery_returns_survives_a_power_loss_after_it() {
    let storage = CrashStorage::new();
    let config = common::small_log().with_pipeline(Pipeline::GroupCommit);
    let (log, _) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("create");
    let mut synced = Vec::new();
    // Up to near the end of the first file (its blocks end at LSN 16384)...
    while log.end_lsn().as_u64() < 14_000 {
        let record = format!("synced {}", synced.len()).into_bytes();
        log.commit(&record, Durability::Synced).expect("commit");
        synced.push(record);
    }
    // ... then a group across it: the next session syncs the second file,
    // which it writes, and not the first.
    let written = vec![7u8; 4000];
    log.commit(&written, Durability::Written).expect("commit");
    log.simulate_crash();
    // The process restarts on the same disk: the page cache still holds
    // the written group.
    let (log, recovery) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("recover");
    let replayed: Vec<Vec<u8>> =
        common::group_images(recovery, "the recovery").into_iter().flat_map(|(_, records)| records).collect();
    let mut expected = synced.clone();
    expected.push(written.clone());
    assert_eq!(replayed, expected, "recovery returns the synced groups and the written one");
    log.commit(b"acknowledged after the recovery", Durability::Synced).expect("commit");
    log.simulate_crash();
    // Power is lost: only what was synced stays.
    let image = storage.state().crash(CrashMode::DropUnsynced);
    let (_, recovery) =
        Log::open_with_storage(Path::new(DIR), config, image.to_storage()).expect("open after the power loss");
    let records: Vec<Vec<u8>> =
        common::group_images(recovery, "after the power loss").into_iter().flat_map(|(_, records)| records).collect();
    expected.push(b"acknowledged after the recovery".to_vec());
    assert_eq!(records, expected, "every group recovery returned, and every commit after it");
}

/// Found by the simulation: a checkpoint slot whose fdatasync failed stayed
/// in the page cache; after a restart recovery started from it, and a power
/// loss then took the log back to the checkpoint before — behind one a
/// recovery had started from, the writer's limit a lap past it meanwhile.
/// Open now syncs `redo.0000` with the files it recovered (INV-45).
#[test]
fn the_checkpoint_a_recovery_starts_from_is_durable() {
    let storage =
        SlowSync { inner: CrashStorage::new(), delay_ms: Default::default(), fail_next_sync: Default::default() };
    let config = common::small_log().with_pipeline(Pipeline::GroupCommit);
    let (log, _) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("create");
    // Into the third file: the log recovered after the checkpoint lies
    // beyond `redo.0000`, which holds the slots.
    for index in 0..30u8 {
        log.commit(&[index; 1000], Durability::Synced).expect("commit");
    }
    // The slot is written; its fdatasync fails: the log is poisoned, and
    // the slot lives in the page cache.
    let checkpoint = log.durable_lsn();
    storage.fail_next_sync.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(log.checkpoint(checkpoint).is_err(), "the checkpoint's sync fails");
    log.simulate_crash();
    // A restart on the same disk: recovery starts from that slot.
    let (log, recovery) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("restart");
    assert_eq!(recovery.checkpoint_lsn(), checkpoint, "recovery starts from the slot in the page cache");
    log.simulate_crash();
    let image = storage.inner.state().crash(CrashMode::DropUnsynced);
    let (_, recovery) =
        Log::open_with_storage(Path::new(DIR), config, image.to_storage()).expect("open after a power loss");
    assert_eq!(recovery.checkpoint_lsn(), checkpoint, "a power loss never takes the log back past it");
}

/// Found by the simulation: a checkpoint inside the last group — a full
/// log's checkpoint first checkpoints at what is durable, inside a group —
/// when that group ends at a block's last data byte. Recovery looked for
/// the next group start after the checkpoint, found none (the next block
/// was never written: nothing follows), and took the group for one a crash
/// cut off: a cleanly closed log then refused to open ("closed cleanly at
/// … but its groups end at …"), and a crashed one ended at the checkpoint.
/// Recovery now reads that group from its start, in the blocks before the
/// checkpoint, to see where it ends.
#[test]
fn a_checkpoint_inside_a_last_group_that_ends_at_a_block_end_recovers() {
    for close in [true, false] {
        let storage = MemStorage::new();
        let config = ring_log().with_pipeline(Pipeline::GroupCommit);
        let (log, _) = Log::open_with_storage(Path::new(DIR), config.clone(), storage.clone()).expect("create");
        log.commit(b"before", Durability::Synced).expect("commit");
        let start = log.end_lsn();
        // A group of header 8 + record length 4 + body that ends exactly at
        // the last data byte of the fifth block after the one it starts in.
        let data_end = 508;
        let to_end = 5 * 492 + (data_end - start.as_u64() % 512);
        let end = log.commit(&vec![9u8; to_end as usize - 12], Durability::Synced).expect("commit");
        assert_eq!(end.as_u64() % 512, 16, "the group ends at a block's end: {end}");
        let inside = Lsn::from_u64((start.as_u64() / 512 + 2) * 512 + 16);
        log.checkpoint(inside).expect("a checkpoint inside the group");
        if close {
            log.close().expect("close");
        } else {
            log.simulate_crash();
        }
        drop(log);
        let (log, recovery) = Log::open_with_storage(Path::new(DIR), config, storage).expect("reopen");
        let expected = if close { LogEnd::CleanShutdown } else { LogEnd::Unclosed };
        assert_eq!((recovery.end(), recovery.count()), (expected, 0), "closed: {close}");
        assert_eq!(log.end_lsn(), end, "the log goes on after the group, closed: {close}");
    }
}

/// The same group seen by a new archive: its consumer starts at the
/// checkpoint inside the group, and the archive at the next group boundary
/// — the group's end, which no block records when the group ends at a
/// block's last data byte and nothing follows. It waited 10 s for one and
/// gave up (`InvalidLsn`).
#[test]
fn a_new_archive_at_a_checkpoint_inside_a_last_group_that_ends_at_a_block_end_starts_at_its_end() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (log, _) = Log::open(dir.path().join("redo"), common::archive_log()).expect("create");
    let log = std::sync::Arc::new(log);
    let start = log.end_lsn();
    let to_end = 5 * 492 + (508 - start.as_u64() % 512);
    let end = log.commit(&vec![9u8; to_end as usize - 12], Durability::Synced).expect("commit");
    assert_eq!(end.as_u64() % 512, 16, "the group ends at a block's end: {end}");
    log.checkpoint(Lsn::from_u64((start.as_u64() / 512 + 2) * 512 + 16)).expect("a checkpoint inside the group");
    let started = std::time::Instant::now();
    let archiver = redolog::archive::Archiver::start(&log, dir.path().join("archive")).expect("start");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "the archive starts at once");
    log.close().expect("close");
    assert_eq!(archiver.stop().expect("stop"), end);
}

/// Found by the simulation (seed 2545): a checkpoint at the durable LSN
/// inside a group the writer had synced in part (it waited at the file
/// limit), then a crash. Recovery resumes at the checkpoint, so this
/// session's history begins inside the torn group; a reader from before
/// it (a consumer's replica, the resumed archiver) read the torn group's
/// head, found it running past the session's start, and waited for it for
/// ever (the archiver never moved, and its close archived nothing), or,
/// once new groups ran past its claimed end, reported corruption. Now a
/// group read from before the session's start that does not end by it is
/// torn, and the reader goes on at the session's start (INV-46).
#[test]
fn a_reader_from_before_a_recovery_that_resumed_inside_a_torn_group_goes_on_after_it() {
    for mode in [CrashMode::KeepAll, CrashMode::DropUnsynced] {
        let storage = CrashStorage::new();
        let (log, _) = Log::open_with_storage(Path::new(DIR), ring_log(), storage.clone()).expect("create");
        // Holds the log from the torn group's start on, as a replica would.
        let mut replica = log.create_consumer("replica").expect("consumer");
        let limit = log.checkpoint_lsn().as_u64() + log.usable_bytes();
        let mut torn_start = log.end_lsn();
        while log.end_lsn().as_u64() < limit - 40_000 {
            torn_start = log.commit(&[7u8; 1000], Durability::Synced).expect("commit");
        }
        replica.advance(torn_start).expect("the replica read up to the torn group");
        drop(replica);
        let torn = log.append(&[0xEE; 45_000]).expect("the group past the file limit");
        assert!(torn.as_u64() > limit, "the group runs past the file limit");
        log.wait(Lsn::from_u64(limit - 600), Durability::Synced).expect("sync to the file limit");
        let inside = log.durable_lsn();
        assert!(inside > torn_start && inside < torn, "durable inside the torn group");
        log.checkpoint(inside).expect("a checkpoint at the durable LSN, inside the group");
        log.simulate_crash();
        let image = storage.state().crash(mode).to_storage();
        let (log, _) = Log::open_with_storage(Path::new(DIR), ring_log(), image).expect("reopen");
        assert_eq!(log.end_lsn(), inside, "{mode:?}: the session starts at the checkpoint");
        let mut reader = log.read_from(torn_start).expect("the torn group's start is a boundary");
        assert!(reader.try_next().expect("read").is_none(), "{mode:?}: nothing after the torn group yet");
        assert_eq!(reader.position(), inside, "{mode:?}: the reader goes on at the session's start");
        let end = log.commit(b"after", Durability::Synced).expect("commit after the recovery");
        let group = reader.try_next().expect("read").expect("the session's first group");
        assert_eq!((group.start_lsn(), group.end_lsn()), (inside, end), "{mode:?}");
        assert_eq!(group.records().collect::<Vec<_>>(), vec![&b"after"[..]], "{mode:?}");
        // A reader from before it that starts after this session's groups:
        // it never reads them as the torn group's bytes.
        let end = log.commit(&[5u8; 8000], Durability::Synced).expect("a group past the torn one's claimed end");
        assert!(end > torn, "{mode:?}: this session's groups run past the torn group's claimed end");
        let mut late = log.read_from(torn_start).expect("read from the torn group's start");
        let ends: Vec<_> = std::iter::from_fn(|| late.try_next().expect("read")).map(|group| group.end_lsn()).collect();
        assert_eq!(ends, vec![group.end_lsn(), end], "{mode:?}: the session's groups, from its start");
        log.close().expect("close");
    }
}

/// The same crash seen by an archiver that had archived up to the torn
/// group: resumed, it waited for the torn group for ever (seed 2545: its
/// close "archived to 104692" a log that ended at 106512). Now it records
/// the torn span as an entry of no records, so the archive's entries still
/// follow each other without a gap, and archives the new session's groups.
#[test]
fn an_archiver_resumed_after_a_recovery_inside_a_torn_group_records_the_span_and_goes_on() {
    use std::sync::Arc;
    let storage = CrashStorage::new();
    let archive_dir = Path::new("/archive");
    let log = Arc::new(Log::open_with_storage(Path::new(DIR), ring_log(), storage.clone()).expect("create").0);
    let archiver = redolog::archive::Archiver::start(&log, archive_dir).expect("start");
    let limit = log.checkpoint_lsn().as_u64() + log.usable_bytes();
    let mut groups = Vec::new();
    while log.end_lsn().as_u64() < limit - 40_000 {
        let end = log.commit(&[7u8; 1000], Durability::Synced).expect("commit");
        groups.push((end, vec![vec![7u8; 1000]]));
    }
    let torn_start = log.end_lsn();
    archiver.wait(torn_start).expect("archived up to the torn group");
    let torn = log.append(&[0xEE; 45_000]).expect("the group past the file limit");
    assert!(torn.as_u64() > limit, "the group runs past the file limit");
    log.wait(Lsn::from_u64(limit - 600), Durability::Synced).expect("sync to the file limit");
    let inside = log.durable_lsn();
    log.checkpoint(inside).expect("a checkpoint at the durable LSN, inside the group");
    let image = storage.state().crash(CrashMode::DropUnsynced).to_storage();
    drop(archiver);
    Arc::into_inner(log).expect("the archiver released the log").simulate_crash();

    let log = Arc::new(Log::open_with_storage(Path::new(DIR), ring_log(), image.clone()).expect("reopen").0);
    assert_eq!(log.end_lsn(), inside, "the session starts at the checkpoint");
    let archiver = redolog::archive::Archiver::start(&log, archive_dir).expect("resume");
    let end = log.commit(b"after", Durability::Synced).expect("commit after the recovery");
    groups.push((end, vec![b"after".to_vec()]));
    archiver.wait(end).expect("the archive follows the new session");
    log.close().expect("close");
    assert_eq!(archiver.stop().expect("stop"), end, "the archive reaches the log's end");
    assert_eq!(common::archived_in(Path::new("/"), image.clone()), groups, "the archive's groups are the log's");
    let archive = redolog::archive::Archive::open_with_storage(archive_dir, image).expect("open the archive");
    let summary = archive.verify().expect("verify");
    assert_eq!((summary.torn_spans, summary.end), (1, end), "one torn span, [{torn_start}, {inside})");
}
