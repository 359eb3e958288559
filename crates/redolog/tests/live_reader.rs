//! Goal: `Log::read_from` on a log being written returns exactly the groups,
//! boundaries and bytes recovery returns, never a group that is not durable,
//! and a typed error — never other bytes — where a checkpoint let the log
//! reuse the space (docs/DESIGN.md §4.1, INV-23..INV-25).
//! Method: a proptest of random workloads on a small log that wraps, with a
//! reader following along, compared with recovery after a crash; 16 appending
//! threads and 2 tailing readers on files, compared with recovery at the end;
//! readers racing a checkpointer that wraps the log; and the API's edges.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use redolog::storage::MemStorage;
use redolog::{Config, Durability, Error, Group, Log, Lsn, Pipeline};

fn durability() -> impl Strategy<Value = Durability> {
    prop_oneof![Just(Durability::Buffered), Just(Durability::Written), Just(Durability::Synced)]
}

#[derive(Clone, Debug)]
struct Step {
    records: Vec<Vec<u8>>,
    durability: Durability,
    read_after: bool,
}

fn step() -> impl Strategy<Value = Step> {
    let record = prop_oneof![
        8 => prop::collection::vec(any::<u8>(), 0..700),
        1 => prop::collection::vec(any::<u8>(), 700..6000),
    ];
    (prop::collection::vec(record, 0..4), durability(), prop::bool::weighted(0.3))
        .prop_map(|(records, durability, read_after)| Step { records, durability, read_after })
}

/// Reads every group the reader has now; asserts each is durable.
fn drain(log: &Log, reader: &mut redolog::LogReader<'_>, out: &mut Vec<Group>) {
    while let Some(group) = reader.try_next().expect("read") {
        assert!(group.end_lsn() <= log.durable_lsn(), "INV-23: group {:?} read before it was durable", group.end_lsn());
        out.push(group);
    }
}

fn reader_agrees_with_recovery(steps: &[Step]) -> Result<(), TestCaseError> {
    let storage = MemStorage::new();
    let dir = Path::new("/log");
    let config = common::config(64, 8192).with_pipeline(Pipeline::GroupCommit);
    let (log, _) = Log::open_with_storage(dir, config.clone(), storage.clone()).expect("open");
    let mut reader = log.read_from(log.end_lsn()).expect("reader");
    let mut read = Vec::new();
    let mut appended = Vec::new();
    for step in steps {
        let slices: Vec<&[u8]> = step.records.iter().map(Vec::as_slice).collect();
        let start = log.end_lsn();
        let end = log.append_group(&slices).expect("append_group");
        log.wait(end, step.durability).expect("wait");
        appended.push((start, end, step.records.clone()));
        if step.read_after {
            drain(&log, &mut reader, &mut read);
        }
        // The log holds 256 blocks: read, then checkpoint what was read, as a
        // replica that applied it would, before the log fills.
        if end.as_u64() - reader.position().as_u64() > 48 << 10 || log.end_lsn().as_u64() % 7 == 0 {
            drain(&log, &mut reader, &mut read);
            if reader.position() > Lsn::from_u64(0) {
                log.checkpoint(reader.position()).expect("checkpoint");
            }
        }
    }
    let end = log.end_lsn();
    log.wait(end, Durability::Synced).expect("sync all");
    drain(&log, &mut reader, &mut read);
    prop_assert_eq!(reader.position(), end);
    // The reader returned exactly what was appended: boundaries and bytes.
    prop_assert_eq!(read.len(), appended.len());
    for (group, (start, end, records)) in read.iter().zip(&appended) {
        prop_assert_eq!((group.start_lsn(), group.end_lsn()), (*start, *end));
        prop_assert!(group.records().eq(records.iter().map(Vec::as_slice)), "group at {:?} differs", start);
    }
    drop(reader);
    log.simulate_crash();
    let (_, recovery) = Log::open_with_storage(dir, config, storage).expect("reopen");
    let from = recovery.start_lsn();
    let recovered = common::collect(recovery);
    let suffix: Vec<&Group> = read.iter().filter(|group| group.start_lsn() >= from).collect();
    prop_assert_eq!(recovered.len(), suffix.len());
    for (recovered, read) in recovered.iter().zip(suffix) {
        prop_assert_eq!(recovered, read);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reader_and_recovery_agree(steps in prop::collection::vec(step(), 0..150)) {
        reader_agrees_with_recovery(&steps)?;
    }
}

/// Reads with `next_timeout` until the log is closed.
fn tail(log: &Log, from: Lsn) -> Vec<Group> {
    let mut reader = log.read_from(from).expect("reader");
    let mut groups = Vec::new();
    loop {
        match reader.next_timeout(Duration::from_millis(50)) {
            Ok(Some(group)) => groups.push(group),
            Ok(None) => {}
            Err(Error::Closed) => return groups,
            Err(error) => panic!("tailing reader: {error}"),
        }
    }
}

#[test]
fn tailing_readers_see_what_recovery_sees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::default().with_capacity_bytes(64 << 20);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let start = log.end_lsn();
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| tail(&log, start));
        let second = scope.spawn(|| tail(&log, start));
        let appenders: Vec<_> = (0..16u8)
            .map(|thread| {
                let log = &log;
                scope.spawn(move || {
                    for index in 0..400u32 {
                        let record = [thread, (index % 251) as u8].repeat(1 + (index as usize * 37) % 300);
                        let durability = if index % 3 == 0 { Durability::Buffered } else { Durability::Synced };
                        log.commit(&record, durability).expect("commit");
                    }
                })
            })
            .collect();
        for appender in appenders {
            appender.join().expect("appender");
        }
        log.close().expect("close");
        (first.join().expect("first reader"), second.join().expect("second reader"))
    });
    drop(log);
    let (_, recovery) = Log::open(dir.path(), config).expect("reopen");
    assert_eq!(recovery.start_lsn(), start);
    let recovered = common::collect(recovery);
    assert_eq!(recovered.len(), 16 * 400);
    assert!(first == recovered, "the first tailing reader differs from recovery");
    assert!(second == recovered, "the second tailing reader differs from recovery");
}

/// Readers starting behind a checkpointer that keeps wrapping the log get,
/// for each position, the group appended there or `Error::Reused`.
#[test]
fn reads_racing_a_checkpoint_get_the_groups_or_reused() {
    let storage = MemStorage::new();
    let config = common::config(32, 8192).with_pipeline(Pipeline::GroupCommit);
    let (log, _) = Log::open_with_storage(Path::new("/log"), config, storage).expect("open");
    let appended = parking_lot::Mutex::new(HashMap::<u64, (Lsn, Vec<u8>)>::new());
    let starts = parking_lot::Mutex::new(vec![log.end_lsn()]);
    let done = AtomicBool::new(false);
    let (mut groups, mut reused, mut reused_mid_read) = (0u64, 0u64, 0u64);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for index in 0..30_000u32 {
                let record = vec![(index % 251) as u8; 1 + (index as usize * 53) % 900];
                let start = log.end_lsn();
                let end = log.commit(&record, Durability::Written).expect("commit");
                appended.lock().insert(start.as_u64(), (end, record));
                starts.lock().push(end);
                // A checkpoint every few groups, just behind: the 64 KiB log
                // wraps every ~150 groups.
                if index % 8 == 7 {
                    log.checkpoint(end).expect("checkpoint");
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut round = 0usize;
        while !done.load(Ordering::SeqCst) {
            round += 1;
            // Start about a lap behind the writer (the 64 KiB log holds ~140
            // of these groups), where it overtakes the reader.
            let from = {
                let starts = starts.lock();
                starts[starts.len().saturating_sub(100 + (round * 7919) % 80)]
            };
            let mut reader = match log.read_from(from) {
                Ok(reader) => reader,
                Err(Error::Reused { lsn, oldest }) => {
                    assert_eq!(lsn, from);
                    assert!(oldest > lsn, "reused {lsn} but the oldest readable LSN {oldest} is not after it");
                    reused += 1;
                    continue;
                }
                Err(error) => panic!("read_from({from}): {error}"),
            };
            for _ in 0..40 {
                match reader.try_next() {
                    Ok(Some(group)) => {
                        let expected = appended.lock().get(&group.start_lsn().as_u64()).cloned();
                        let (end, record) = expected.expect("a group the reader returned was appended there");
                        assert_eq!(group.end_lsn(), end, "the group at {:?} ends elsewhere", group.start_lsn());
                        assert_eq!(group.records().next(), Some(record.as_slice()), "the group at {:?} differs", end);
                        groups += 1;
                        std::thread::yield_now();
                    }
                    Ok(None) => break,
                    Err(Error::Reused { .. }) => {
                        reused_mid_read += 1;
                        break;
                    }
                    Err(error) => panic!("reader from {from}: {error}"),
                }
            }
        }
    });
    eprintln!("{groups} groups read, {reused} starts reused, {reused_mid_read} reused while reading");
    assert!(groups > 0 && reused + reused_mid_read > 0, "the race was not exercised");
}

fn small() -> (tempfile::TempDir, Log) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).expect("open");
    (dir, log)
}

#[test]
fn a_position_inside_a_group_is_refused() {
    let (_dir, log) = small();
    let start = log.end_lsn();
    let end = log.commit(&[7u8; 2000], Durability::Synced).expect("commit");
    // Inside the group's record, in its first and in a later block.
    for inside in [start.as_u64() + 9, start.as_u64() + 600, end.as_u64() - 1] {
        let lsn = Lsn::from_u64(inside);
        match log.read_from(lsn).map(|mut reader| reader.try_next()) {
            Err(Error::InvalidLsn { .. }) | Ok(Err(Error::InvalidLsn { .. })) => {}
            other => panic!("read_from({lsn}) inside a group: {other:?}"),
        }
    }
    // A block header; past the end.
    let header = Lsn::from_u64(start.as_u64() / 512 * 512 + 512 + 3);
    assert!(matches!(log.read_from(header), Err(Error::InvalidLsn { .. })));
    let past = Lsn::from_u64(end.as_u64() + 1);
    assert!(matches!(log.read_from(past), Err(Error::LsnOutOfRange { .. })));
    // The boundaries are accepted.
    assert_eq!(log.read_from(start).expect("start").count(), 1);
    assert_eq!(log.read_from(end).expect("end").count(), 0);
}

#[test]
fn a_group_is_returned_only_once_durable() {
    let (_dir, log) = small();
    let start = log.end_lsn();
    let end = log.append(b"buffered").expect("append");
    let mut reader = log.read_from(start).expect("reader");
    if log.durable_lsn() < end {
        // The timer may sync it any time; until then the reader has nothing.
        let read = reader.try_next().expect("read");
        assert!(read.is_none() || log.durable_lsn() >= end, "INV-23: returned before durable");
    }
    log.wait(end, Durability::Synced).expect("sync");
    let group = reader.next_timeout(Duration::from_secs(5)).expect("read").expect("a group");
    assert_eq!((group.start_lsn(), group.end_lsn()), (start, end));
    assert!(reader.try_next().expect("read").is_none());
    assert!(reader.next_timeout(Duration::from_millis(20)).expect("read").is_none(), "timed out: None");
}

#[test]
fn a_tailing_reader_wakes_when_another_thread_commits() {
    let (_dir, log) = small();
    let start = log.end_lsn();
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut reader = log.read_from(start).expect("reader");
            reader.next_timeout(Duration::from_secs(30)).expect("read")
        });
        std::thread::sleep(Duration::from_millis(20));
        let end = log.commit(b"wake up", Durability::Synced).expect("commit");
        let group = reader.join().expect("reader thread").expect("a group before the timeout");
        assert_eq!(group.end_lsn(), end);
    });
}

#[test]
fn a_reader_of_a_poisoned_log_reads_what_was_synced_then_reports_the_poison() {
    use redolog::storage::{FaultKind, FaultyStorage};
    let (dir, memory) = (Path::new("/log"), MemStorage::new());
    let config = common::config(256, 8192).with_pipeline(Pipeline::GroupCommit);
    // Reopening a cleanly closed log does no I/O: the 3rd fdatasync is the
    // workload's.
    Log::open_with_storage(dir, config.clone(), memory.clone()).expect("create").0.close().expect("close");
    let storage = FaultyStorage::new(memory, FaultKind::Sync, 3, true);
    let (log, _) = Log::open_with_storage(dir, config, storage).expect("open");
    let start = log.end_lsn();
    let mut synced = 0;
    while log.commit(b"x", Durability::Synced).is_ok() {
        synced += 1;
    }
    let mut reader = log.read_from(start).expect("reader");
    let mut read = 0;
    let error = loop {
        match reader.next_timeout(Duration::from_secs(5)) {
            Ok(Some(_)) => read += 1,
            Ok(None) => panic!("a poisoned log must not leave the reader waiting"),
            Err(error) => break error,
        }
    };
    assert_eq!(read, synced, "the reader returns exactly the synced groups");
    assert!(matches!(error, Error::Poisoned { .. }), "{error}");
}

#[test]
fn reading_after_reopen_returns_the_recovered_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::default().with_capacity_bytes(1 << 20);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    for index in 0..50u32 {
        log.append_group(&[&index.to_le_bytes(), &[1; 700]]).expect("append");
    }
    log.close().expect("close");
    drop(log);
    let (log, recovery) = Log::open(dir.path(), config).expect("reopen");
    let from = recovery.start_lsn();
    let recovered = common::collect(recovery);
    let read: Vec<Group> = log.read_from(from).expect("reader").map(|group| group.expect("read")).collect();
    assert_eq!(read.len(), 50);
    assert!(read == recovered);
}
