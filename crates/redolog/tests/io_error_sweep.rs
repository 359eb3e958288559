//! Goal: an I/O error at any point of a log's life — creation, commits,
//! checkpoints, close — loses nothing acknowledged and acknowledges nothing
//! unsynced; after the first failed write or sync every call fails and fsync is
//! never retried; a read error during recovery fails the recovery instead of
//! ending the log early, and a write or sync error while recovery repairs a torn
//! tail fails the open and leaves a state the next recovery handles
//! (docs/RELIABILITY.md E1, E2, E4–E9; INV-5, INV-6).
//! Method: SQLite's k-th-I/O-error sweep. For every k until the workload runs
//! clean, `FaultyStorage` fails the k-th write (EIO, ENOSPC, or a short write
//! that lands half its bytes), fdatasync or directory fsync, once or from then
//! on, over a `CrashStorage` (a failed operation has no
//! effect, so a failed fdatasync leaves its data unsynced: the "lying retry" of
//! E2 would lose it). After the fault the test checks the poisoning rule, then
//! crashes (power loss: only what was synced survives; process crash: all that
//! was written, a short write's half included), reopens without faults and
//! checks that every Synced (and, after a process crash, Written)
//! acknowledgement is recovered in a byte-exact prefix. Recovery: every k-th
//! read of a recovery fails once; every k-th write, fdatasync and directory
//! fsync of a recovery that erases a torn tail fails, then that recovery is
//! crashed and the log reopened.

mod common;

use std::path::Path;

use redolog::storage::{CrashMode, CrashStorage, FaultKind, FaultyStorage};
use redolog::{Durability, Error, Log, Lsn};

const DIR: &str = "/log";

/// What one run under a fault did.
struct Run {
    /// Groups appended (one record each), in order.
    appended: Vec<common::GroupImage>,
    /// Largest end LSN acknowledged Synced.
    synced: Lsn,
    /// Largest end LSN acknowledged Written or Synced.
    written: Lsn,
    injected: u64,
}

/// Creates a log and commits 24 records (Synced and Written, a checkpoint every
/// 6) on `storage` until the first error; then checks that the log stays
/// poisoned and never retries the failed operation. The committer waits in
/// turn on the thread path, through a future and through a callback (issue 17:
/// the async waiters' writes and syncs run on log threads, which must poison
/// and stop the same way).
fn run(storage: &FaultyStorage<CrashStorage>, kind: FaultKind, context: &str) -> Run {
    let mut run = Run { appended: Vec::new(), synced: Lsn::from_u64(0), written: Lsn::from_u64(0), injected: 0 };
    let log = match Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()) {
        Ok((log, _)) => log,
        Err(error) => {
            assert!(matches!(error, Error::Io { .. }), "{context}: creation failed with {error}");
            run.injected = storage.injected();
            return run;
        }
    };
    let mut failed = false;
    for index in 0..24 {
        let bytes = common::sized_record(index);
        let durability = if index % 2 == 0 { Durability::Synced } else { Durability::Written };
        let result = log.append(&bytes).and_then(|end| {
            run.appended.push((end, vec![bytes.clone()]));
            wait_in_turn(&log, index, end, durability).map(|()| end)
        });
        let result =
            result
                .and_then(|end| if index % 6 == 5 { log.checkpoint(log.durable_lsn()).map(|()| end) } else { Ok(end) });
        match result {
            Ok(end) => {
                run.written = end;
                if durability == Durability::Synced {
                    run.synced = end;
                }
            }
            Err(error) => {
                assert!(matches!(error, Error::Poisoned { .. } | Error::Io { .. }), "{context}: {error}");
                if kind == FaultKind::NoSpace {
                    assert!(error.to_string().contains("No space left"), "{context}: ENOSPC lost in {error}");
                }
                failed = true;
                break;
            }
        }
    }
    if !failed && storage.injected() > 0 {
        // The fault hit a log thread's own write or sync after the last call
        // returned: futures turn the dedicated mode on, whose flusher syncs
        // Written commits too. It must poison the log all the same: the next
        // Synced commit fails (it waits until the flusher has seen the fault).
        assert!(log.commit(b"after a background fault", Durability::Synced).is_err(), "{context}: fault swallowed");
        failed = true;
    }
    // A fault must surface: swallowing it (retrying the fdatasync, say) would
    // acknowledge data the kernel may have dropped (E2).
    assert_eq!(failed, storage.injected() > 0, "{context}: a fault was injected but every call succeeded");
    if failed {
        // INV-6: poisoned for good; nothing touches the storage again.
        let attempts = storage.attempted();
        let durable = log.durable_lsn();
        assert!(log.commit(b"after the fault", Durability::Synced).is_err(), "{context}: a commit after the fault");
        assert!(log.wait(durable, Durability::Synced).is_err(), "{context}: a wait after the fault");
        assert!(
            common::block_on(log.wait_async(durable, Durability::Synced)).is_err(),
            "{context}: a future after the fault"
        );
        let (sender, receiver) = std::sync::mpsc::channel();
        log.on_durable(durable, Durability::Synced, move |result| sender.send(result).expect("send"));
        assert!(receiver.recv().expect("callback ran").is_err(), "{context}: a callback after the fault");
        assert!(log.checkpoint(durable).is_err(), "{context}: a checkpoint after the fault");
        assert_eq!(log.durable_lsn(), durable, "{context}: durable LSN moved after the fault");
        assert_eq!(storage.attempted(), attempts, "{context}: {kind:?} retried after the fault");
        assert!(run.synced <= durable, "{context}: acknowledged {:?} past durable {durable:?}", run.synced);
    }
    drop(log);
    run.injected = storage.injected();
    run
}

/// Waits for `end` on the thread path, through a future or through a callback,
/// by turns.
fn wait_in_turn(log: &Log, index: usize, end: Lsn, durability: Durability) -> redolog::Result<()> {
    match index % 3 {
        0 => log.wait(end, durability),
        1 => common::block_on(log.wait_async(end, durability)),
        _ => {
            let (sender, receiver) = std::sync::mpsc::channel();
            log.on_durable(end, durability, move |result| sender.send(result).expect("send"));
            receiver.recv().expect("the callback runs exactly once")
        }
    }
}

/// Power loss or a process crash, then a fault-free reopen: every Synced ack
/// (after a process crash, every Written ack) is there, in a byte-exact prefix
/// of what was appended.
fn check_recovery(crash: &CrashStorage, run: &Run, context: &str) {
    for (mode, acked) in [(CrashMode::DropUnsynced, run.synced), (CrashMode::KeepAll, run.written)] {
        common::assert_crash_recovers(
            crash,
            mode,
            (Path::new(DIR), &common::small_log()),
            &run.appended,
            acked,
            context,
        );
    }
}

#[test]
fn failing_the_kth_write_or_sync_never_loses_an_acknowledged_commit() {
    let mut faults = 0;
    for kind in [FaultKind::Write, FaultKind::NoSpace, FaultKind::ShortWrite, FaultKind::Sync, FaultKind::SyncDir] {
        for persistent in [false, true] {
            for nth in 1.. {
                let context = format!("{kind:?} #{nth} fails{}", if persistent { " from then on" } else { " once" });
                let crash = CrashStorage::new();
                let storage = FaultyStorage::new(crash.clone(), kind, nth, persistent);
                let run = run(&storage, kind, &context);
                if run.injected == 0 {
                    assert!(nth > 1, "{context}: the workload does no {kind:?}");
                    break;
                }
                faults += run.injected;
                check_recovery(&crash, &run, &context);
            }
        }
    }
    eprintln!("{faults} faults injected");
}

#[test]
fn a_read_error_during_recovery_fails_it_instead_of_ending_the_log() {
    let crash = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), crash.clone()).expect("create");
    for index in 0..12 {
        log.commit(&common::sized_record(index), Durability::Synced).expect("commit");
    }
    log.simulate_crash(); // a crash: recovery has to scan
    let image = crash.state().crash(CrashMode::DropUnsynced);
    let (_, full) = Log::open_with_storage(Path::new(DIR), common::small_log(), image.to_storage()).expect("reopen");
    let full = full.count();
    assert_eq!(full, 12);
    for nth in 1.. {
        let storage = FaultyStorage::new(image.to_storage(), FaultKind::Read, nth, false);
        let outcome = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone())
            .map(|(_, recovery)| recovery.collect::<Result<Vec<_>, _>>());
        if storage.injected() == 0 {
            assert_eq!(outcome.expect("open").expect("recovery").len(), full);
            assert!(nth > 1, "recovery reads nothing");
            break;
        }
        // The failed read surfaces as an error, from `open` or from the groups;
        // never as a shorter log.
        match outcome {
            Err(Error::Io { .. }) | Ok(Err(Error::Io { .. })) => {}
            Ok(Ok(groups)) => panic!("read #{nth} failed, recovery returned {} of {full} groups", groups.len()),
            Err(other) | Ok(Err(other)) => panic!("read #{nth} failed with {other}, not an I/O error"),
        }
    }
}

/// E9: a crash leaves a torn tail; recovery erases it (writes, fdatasync). Each
/// of those operations fails in turn: the open must fail with the I/O error,
/// and after that failed recovery is itself crashed (power loss or process
/// crash), a fault-free reopen must still find every Synced group.
#[test]
fn a_write_or_sync_error_while_recovery_repairs_fails_it_and_the_next_recovery_is_sound() {
    let crash = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), crash.clone()).expect("create");
    let mut appended = Vec::new();
    let mut synced = Lsn::from_u64(0);
    for index in 0..16 {
        let bytes = common::sized_record(index);
        let end = log.append(&bytes).expect("append");
        appended.push((end, vec![bytes]));
        let durability = if index < 10 { Durability::Synced } else { Durability::Written };
        log.wait(end, durability).expect("wait");
        if durability == Durability::Synced {
            synced = end;
        }
    }
    log.simulate_crash();
    let mut faults = 0;
    // Crash images whose tails are torn: a random subset of the unsynced sectors.
    for seed in 0..8 {
        let image = crash.state().crash(CrashMode::Random(seed));
        for kind in [FaultKind::Write, FaultKind::ShortWrite, FaultKind::Sync, FaultKind::SyncDir] {
            for nth in 1.. {
                let context = format!("torn image {seed}, recovery's {kind:?} #{nth} fails");
                let recording = image.to_recording();
                let storage = FaultyStorage::new(recording.clone(), kind, nth, false);
                let outcome = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone())
                    .map(|(log, recovery)| (log, common::group_images(recovery, &context)));
                if storage.injected() == 0 {
                    outcome.unwrap_or_else(|error| panic!("{context}: fault-free open failed: {error}"));
                    break;
                }
                faults += 1;
                match outcome {
                    Err(Error::Io { .. }) => {}
                    Err(other) => panic!("{context}: failed with {other}, not the I/O error"),
                    Ok(_) => panic!("{context}: the open succeeded over a failed repair"),
                }
                for mode in [CrashMode::DropUnsynced, CrashMode::KeepAll] {
                    let place = (Path::new(DIR), &common::small_log());
                    common::assert_crash_recovers(&recording, mode, place, &appended, synced, &context);
                }
            }
        }
    }
    assert!(faults > 0, "no recovery repaired anything");
    eprintln!("{faults} faults injected into recoveries");
}
