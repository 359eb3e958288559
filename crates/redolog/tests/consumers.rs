//! Goal: a consumer's groups stay readable until it advances past them, across
//! checkpoints, wraps, crashes and restarts (docs/DESIGN.md §1.16, INV-32); a
//! consumer that stops advancing makes the writer wait, visibly, and dropping
//! it releases the writer at once.
//! Method: a workload that creates, advances and drops consumers among commits
//! and checkpoints on `CrashStorage`; every crash image of every prefix is
//! reopened and every consumer's groups are read back from its position and
//! compared with what was appended. Threads check the waits on real files.

mod common;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use common::GroupImage;
use redolog::storage::{CrashMode, CrashState, CrashStorage};
use redolog::{Config, Durability, Error, Log, Lsn};

const DIR: &str = "/log";

/// What happened to a consumer, in trace positions (storage operations done
/// when the call returned), for the crash images to be checked against.
#[derive(Clone, Debug)]
enum Event {
    /// Created (or advanced) to this LSN.
    At(Lsn),
    /// Dropped.
    Dropped,
}

#[derive(Default)]
struct Oracle {
    appended: Vec<GroupImage>,
    /// (operations done, consumer, event).
    events: Vec<(usize, &'static str, Event)>,
    /// (operations started, consumer, event) of each call, for the images
    /// taken while it was in flight.
    started: Vec<(usize, &'static str, Event)>,
}

impl Oracle {
    fn record(&mut self, storage: &CrashStorage, before: usize, name: &'static str, event: Event) {
        self.started.push((before, name, event.clone()));
        self.events.push((storage.op_count(), name, event));
    }

    /// What a crash after `ops` operations may leave for `name`: the states
    /// the consumer had from the last call that completed by then through every
    /// call that had started. `None` stands for "no such consumer".
    fn allowed(&self, ops: usize, name: &str) -> Vec<Option<Lsn>> {
        let of = |event: &Event| match event {
            Event::At(lsn) => Some(*lsn),
            Event::Dropped => None,
        };
        let completed: Vec<Option<Lsn>> =
            self.events.iter().filter(|(at, who, _)| *at <= ops && *who == name).map(|(_, _, e)| of(e)).collect();
        let mut allowed = vec![completed.last().copied().unwrap_or(None)];
        allowed.extend(
            self.started
                .iter()
                .zip(&self.events)
                .filter(|((start, who, _), (done, _, _))| *who == name && *start <= ops && *done > ops)
                .map(|((_, _, event), _)| of(event)),
        );
        allowed
    }
}

/// Group sizes across block and file boundaries (as crash_states.rs).
fn group_records(index: usize) -> Vec<Vec<u8>> {
    let size = [1usize, 40, 497, 520, 1300, 3000, 6000][index % 7];
    let records = 1 + index % 3;
    (0..records).map(|record| vec![(index * 7 + record) as u8; size / records + 1]).collect()
}

/// The end of the last group appended before `index` (at most `index - 1`)
/// that is durable: a group boundary a consumer may advance to.
fn durable_boundary(oracle: &Oracle, log: &Log, index: usize) -> Option<Lsn> {
    let durable = log.durable_lsn();
    oracle.appended[..index].iter().rev().map(|(end, _)| *end).find(|end| *end <= durable)
}

/// Commits groups, checkpointing at the durable end every 4 (ahead of the
/// consumers), advancing consumer "a" every 4 to the end of a group 2 or 3
/// before, creating "b" after 12 and advancing it twice, far behind, and
/// dropping "a" after 44; 52 groups wrap the 64 KiB log.
fn run_workload(log: &Log, storage: &CrashStorage, oracle: &mut Oracle) {
    let before = storage.op_count();
    let mut a = Some(log.create_consumer("a").expect("create a"));
    oracle.record(storage, before, "a", Event::At(a.as_ref().expect("a").lsn()));
    let mut b = None;
    for index in 0..52 {
        let records = group_records(index);
        let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let end = log.append_group(&slices).expect("append");
        oracle.appended.push((end, records));
        log.wait(end, [Durability::Synced, Durability::Written][index % 2]).expect("wait");
        if index % 4 == 3 {
            log.checkpoint(log.durable_lsn()).expect("checkpoint");
            let before = storage.op_count();
            if let Some(consumer) = a.as_mut() {
                let to = durable_boundary(oracle, log, index - 2).expect("a durable group");
                consumer.advance(to).expect("advance a");
                oracle.record(storage, before, "a", Event::At(consumer.lsn()));
            }
        }
        if index == 12 {
            let before = storage.op_count();
            let consumer = log.create_consumer("b").expect("create b");
            oracle.record(storage, before, "b", Event::At(consumer.lsn()));
            b = Some(consumer);
        }
        if index == 44 {
            drop(a.take());
            let before = storage.op_count();
            log.drop_consumer("a").expect("drop a");
            oracle.record(storage, before, "a", Event::Dropped);
        }
        // "b" lags by up to 28 groups (about 46 KB of the 62 KB the writer may
        // run ahead): the writer laps the checkpoint's space, not b's.
        if index == 36 || index == 48 {
            let consumer = b.as_mut().expect("b");
            let before = storage.op_count();
            let to = durable_boundary(oracle, log, index - 15).expect("a durable group");
            consumer.advance(to).expect("advance b");
            oracle.record(storage, before, "b", Event::At(consumer.lsn()));
        }
    }
}

/// Reopens one crash image and checks every consumer it keeps.
fn check_image(oracle: &Oracle, ops: usize, state: &CrashState, mode: CrashMode) {
    let context = format!("crash after {ops} operations, {mode:?}");
    let (log, recovery) = Log::open_with_storage(Path::new(DIR), common::small_log(), state.crash(mode).to_storage())
        .unwrap_or_else(|error| panic!("{context}: reopen: {error}"));
    let checkpoint = recovery.checkpoint_lsn();
    let recovered = common::group_images(recovery, &context);
    let end = common::assert_recovered_prefix(&context, checkpoint, &recovered, &oracle.appended);
    let kept = log.consumers();
    for name in ["a", "b"] {
        let found = kept.iter().find(|info| info.name == name).map(|info| info.lsn);
        let allowed = oracle.allowed(ops, name);
        assert!(allowed.contains(&found), "{context}: consumer {name} is at {found:?}, allowed {allowed:?}");
        let Some(from) = found else { continue };
        // INV-32: every group from the consumer's position on reads back.
        let expected: Vec<&GroupImage> =
            oracle.appended.iter().filter(|(group_end, _)| *group_end > from && *group_end <= end).collect();
        let mut reader = log.read_from(from).unwrap_or_else(|error| panic!("{context}: read_from({from}): {error}"));
        for (want_end, want_records) in expected {
            let group = reader
                .try_next()
                .unwrap_or_else(|error| panic!("{context}: consumer {name} at {from}: {error}"))
                .unwrap_or_else(|| panic!("{context}: consumer {name} at {from}: the log ends before {want_end}"));
            let records: Vec<Vec<u8>> = group.records().map(<[u8]>::to_vec).collect();
            assert_eq!((group.end_lsn(), &records), (*want_end, want_records), "{context}: consumer {name}");
        }
    }
}

#[test]
fn crash_states_keep_every_consumers_groups() {
    let storage = CrashStorage::new();
    let mut oracle = Oracle::default();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    run_workload(&log, &storage, &mut oracle);
    log.close().expect("close");
    let appended: usize = oracle.appended.iter().map(|(_, records)| records.iter().map(Vec::len).sum::<usize>()).sum();
    assert!(appended > 64 * 1024, "the workload wraps the 64 KiB log ({appended} bytes)");
    let mut images = 0;
    storage.replay(|ops, state| {
        let mut modes = vec![CrashMode::DropUnsynced];
        if state.unsynced_writes() > 0 {
            modes.extend([CrashMode::KeepAll, CrashMode::Random(ops as u64)]);
        }
        for mode in modes {
            check_image(&oracle, ops, state, mode);
            images += 1;
        }
    });
    eprintln!("{} operations, {images} crash images checked", storage.op_count());
}

/// A log of 64 KiB and the record that fills it fastest.
fn full_log_setup() -> (tempfile::TempDir, Config, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    (dir, common::small_log(), vec![7u8; 3000])
}

/// Lets the rest of `commit_until_blocked`'s commits through, checkpointing
/// and advancing `consumer` after each.
fn finish(blocked: &mpsc::Receiver<redolog::Result<Lsn>>, log: &Log, mut consumer: Option<&mut redolog::Consumer>) {
    while let Ok(result) = blocked.recv_timeout(Duration::from_secs(2)) {
        result.expect("commit");
        if let Some(consumer) = consumer.as_mut() {
            consumer.advance(log.durable_lsn()).expect("advance");
        }
        log.checkpoint(log.durable_lsn()).expect("checkpoint");
    }
}

/// Reads every durable group from `from`; returns how many.
fn read_all(log: &Log, from: Lsn) -> usize {
    let mut reader = log.read_from(from).expect("read_from");
    let mut groups = 0;
    while reader.try_next().expect("group").is_some() {
        groups += 1;
    }
    groups
}

/// Closes the log if the test panics, so a commit blocked on a consumer
/// returns and the thread scope can end.
struct CloseOnPanic<'a>(&'a Log);

impl Drop for CloseOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.close();
        }
    }
}

/// Commits on another thread until one does not return within 300 ms: the
/// log is full. Returns the channel the blocked commit reports on.
fn commit_until_blocked<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    log: &'s Log,
    record: &'s [u8],
) -> mpsc::Receiver<redolog::Result<Lsn>> {
    let (sender, receiver) = mpsc::channel();
    scope.spawn(move || {
        for _ in 0..100 {
            let result = log.commit(record, Durability::Synced);
            let failed = result.is_err();
            if sender.send(result).is_err() || failed {
                return;
            }
        }
    });
    let mut last = None;
    loop {
        match receiver.recv_timeout(Duration::from_millis(300)) {
            Ok(result) => last = Some(result.expect("commit")),
            Err(mpsc::RecvTimeoutError::Timeout) => break,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("100 commits of 3000 B fit a 64 KiB log ({last:?})"),
        }
        // Checkpoints keep up: only the consumer holds the space.
        log.checkpoint(log.durable_lsn()).expect("checkpoint");
    }
    receiver
}

#[test]
fn a_consumer_holds_the_writer_until_it_advances() {
    let (dir, config, record) = full_log_setup();
    let (log, _) = Log::open(dir.path(), config).expect("open");
    let mut consumer = log.create_consumer("slow").expect("create");
    let start = consumer.lsn();
    std::thread::scope(|scope| {
        let _unblock = CloseOnPanic(&log);
        let blocked = commit_until_blocked(scope, &log, &record);
        // Everything from the consumer's position still reads back.
        let readable = read_all(&log, start);
        assert!(readable > 10, "{readable} groups readable from {start}");
        consumer.advance(log.durable_lsn()).expect("advance");
        let unblocked =
            blocked.recv_timeout(Duration::from_secs(10)).expect("the commit returns once the consumer advanced");
        unblocked.expect("commit");
        let waits = log.metrics().log_on_consumer;
        assert!(waits.waits >= 1, "the writer's wait counted as a consumer wait: {waits:?}");
        assert_eq!(log.metrics().log_on_file_space.waits, 0, "checkpoints kept up: no checkpoint wait");
        // The rest of the commits, with the consumer following.
        finish(&blocked, &log, Some(&mut consumer));
    });
    assert_eq!(log.metrics().timeouts_with_work(), 0, "no lost wake-up");
}

#[test]
fn a_checkpoint_past_a_consumers_space_waits_for_it() {
    let (dir, config, record) = full_log_setup();
    let (log, _) = Log::open(dir.path(), config).expect("open");
    let mut consumer = log.create_consumer("slow").expect("create");
    std::thread::scope(|scope| {
        let _unblock = CloseOnPanic(&log);
        let blocked = commit_until_blocked(scope, &log, &record);
        // The blocked commit's group lies past what the writer may write: a
        // checkpoint there needs the consumer's space (and loops on nothing).
        let end = log.end_lsn();
        let log = &log;
        let (sender, receiver) = mpsc::channel();
        scope.spawn(move || sender.send(log.checkpoint(end)));
        assert!(receiver.recv_timeout(Duration::from_millis(300)).is_err(), "the checkpoint waits for the consumer");
        consumer.advance(log.durable_lsn()).expect("advance");
        receiver.recv_timeout(Duration::from_secs(10)).expect("the checkpoint returns").expect("checkpoint");
        assert!(log.durable_lsn() >= end, "the checkpoint made its LSN durable (WAL rule)");
        blocked.recv_timeout(Duration::from_secs(10)).expect("released").expect("commit");
        finish(&blocked, log, Some(&mut consumer));
    });
}

#[test]
fn dropping_a_stuck_consumer_releases_the_writer() {
    let (dir, config, record) = full_log_setup();
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let mut stuck = log.create_consumer("stuck").expect("create");
    std::thread::scope(|scope| {
        let _unblock = CloseOnPanic(&log);
        let blocked = commit_until_blocked(scope, &log, &record);
        log.drop_consumer("stuck").expect("drop");
        blocked.recv_timeout(Duration::from_secs(10)).expect("released").expect("commit");
        finish(&blocked, &log, None);
    });
    assert!(matches!(stuck.advance(log.durable_lsn()), Err(Error::UnknownConsumer { name }) if name == "stuck"));
    drop(stuck);
    log.close().expect("close");
    let (log, _) = Log::open(dir.path(), config).expect("reopen");
    assert!(log.consumers().is_empty(), "the drop was durable");
}

#[test]
fn a_consumer_holds_from_the_first_append_after_a_restart() {
    let (dir, config, record) = full_log_setup();
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let mut consumer = log.create_consumer("archive").expect("create");
    let end = log.commit(b"first", Durability::Synced).expect("commit");
    consumer.advance(end).expect("advance");
    drop(consumer);
    log.simulate_crash();
    let (log, _) = Log::open(dir.path(), config).expect("reopen after a crash");
    let listed = log.consumers();
    assert_eq!((listed.len(), listed[0].name.as_str(), listed[0].lsn), (1, "archive", end));
    // Nobody attached yet: the hold is there from the first append.
    std::thread::scope(|scope| {
        let _unblock = CloseOnPanic(&log);
        let blocked = commit_until_blocked(scope, &log, &record);
        let mut consumer = log.consumer("archive").expect("attach");
        let groups = read_all(&log, consumer.lsn());
        assert!(groups > 10, "the consumer reads every group since its position ({groups})");
        consumer.advance(log.durable_lsn()).expect("advance");
        blocked.recv_timeout(Duration::from_secs(10)).expect("released").expect("commit");
        finish(&blocked, &log, Some(&mut consumer));
    });
}

#[test]
fn bad_consumer_calls_are_typed_errors() {
    let (dir, config, _) = full_log_setup();
    // "not durable yet" stays so until the wait: no flush syncs it.
    let config = config.with_flush_interval(Config::FLUSH_INTERVAL_MAX);
    let (log, _) = Log::open(dir.path(), config).expect("open");
    assert!(matches!(log.create_consumer(""), Err(Error::InvalidConsumerName { reason: "it is empty", .. })));
    assert!(matches!(log.create_consumer("seventeen-bytes-x"), Err(Error::InvalidConsumerName { .. })));
    let mut consumers: Vec<_> =
        (0..7).map(|index| log.create_consumer(&format!("c{index}")).expect("create")).collect();
    assert!(matches!(log.create_consumer("c7"), Err(Error::TooManyConsumers { limit: 7 })));
    assert!(matches!(log.create_consumer("c0"), Err(Error::ConsumerExists { .. })));
    let end = log.append(b"not durable yet").expect("append");
    let past = consumers[0].advance(end);
    assert!(matches!(past, Err(Error::LsnOutOfRange { lsn, .. }) if lsn == end), "{past:?}");
    assert!(matches!(consumers[0].advance(Lsn::from_u64(8192 + 1)), Err(Error::InvalidLsn { .. })));
    log.wait(end, Durability::Synced).expect("wait");
    let before = consumers[0].lsn();
    consumers[0].advance(end).expect("advance");
    consumers[0].advance(before).expect("going back is a no-op");
    assert_eq!(consumers[0].lsn(), end);
    consumers.clear();
    // A handle from before its consumer was dropped and created again moves
    // nothing, and its drop leaves the new handle attached.
    let mut old = log.consumer("c1").expect("attach");
    log.drop_consumer("c1").expect("drop");
    let new = log.create_consumer("c1").expect("create again");
    assert!(matches!(old.advance(end), Err(Error::UnknownConsumer { .. })));
    drop(old);
    assert!(matches!(log.consumer("c1"), Err(Error::ConsumerBusy { .. })));
    assert_eq!(new.lsn(), log.consumers().iter().find(|info| info.name == "c1").expect("c1").lsn);
    drop(new);
    log.close().expect("close");
    assert!(matches!(log.create_consumer("late"), Err(Error::Closed)));
}

/// A consumer advances only to synced positions (`Consumer::advance`).
/// With every commit `Written`, only the writer's unsynced bound (INV-8)
/// makes the log sync; a consumer (and checkpoint) that follows the durable
/// LSN must still let 200 commits of 3 KB through the 64 KiB log, never
/// leaving the writer at a limit that only a sync would move.
#[test]
fn written_commits_pass_a_consumer_that_follows_the_durable_log() {
    let (dir, config, record) = full_log_setup();
    let (log, _) = Log::open(dir.path(), config).expect("open");
    let mut consumer = log.create_consumer("follower").expect("create");
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _unblock = CloseOnPanic(&log);
        scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                consumer.advance(log.durable_lsn()).expect("advance");
                log.checkpoint(log.durable_lsn()).expect("checkpoint");
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let (sender, receiver) = mpsc::channel();
        let (log, record) = (&log, &record);
        scope.spawn(move || {
            // 200 × 3 KB: the 64 KiB log wraps nine times.
            for _ in 0..200 {
                log.commit(record, Durability::Written).expect("commit");
            }
            sender.send(()).expect("report");
        });
        let finished = receiver.recv_timeout(Duration::from_secs(20));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(finished.is_ok(), "the writer waited for a consumer that waited for a sync");
    });
}
