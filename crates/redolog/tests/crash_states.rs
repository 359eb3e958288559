//! Goal: whatever state a crash leaves, reopening succeeds and recovers a
//! byte-exact prefix of what was appended after the checkpoint, in LSN order, with
//! no holes, duplicates or fabricated data, holding every group acknowledged as
//! Synced (and, after a process crash, as Written); recovering twice gives the
//! same groups as once (docs/RELIABILITY.md C1–C11; ../shared/reliability-matrix.md).
//! Method: ALICE-style crash-state exploration. Workloads run on `CrashStorage`,
//! which records every storage operation. For every prefix of the trace — from
//! the log's creation through commits of all three durabilities, groups across
//! block and file boundaries, checkpoints and ring wrap-around, to the close —
//! the test builds the crash images that prefix can leave: only what was synced,
//! everything, and random ones (per file a prefix or a reordered subset of the
//! unsynced sectors, zeros or garbage where a file grew, a prefix of the
//! unsynced renames), reopens each and checks the invariant. Then it crashes
//! during recovery itself, and checks that a truncated torn tail never comes back
//! once new groups are appended over it.
//!
//! Random images per state: 10 by default; `REDOLOG_CRASH_SEEDS=50 cargo test
//! --release -p redolog --test crash_states` explores more (figures in
//! docs/RELIABILITY.md).

mod common;

use common::GroupImage;
use redolog::storage::{CrashImage, CrashMode, CrashState, CrashStorage, MemStorage};
use redolog::{Durability, Log, LogEnd, Lsn};
use std::path::Path;

const DIR: &str = "/log";

fn random_images_per_state() -> u64 {
    std::env::var("REDOLOG_CRASH_SEEDS").map_or(10, |seeds| seeds.parse().expect("REDOLOG_CRASH_SEEDS is a number"))
}

/// What the workload appended and when it was acknowledged, in trace positions:
/// `acked_at` is the number of storage operations done when `wait` returned.
#[derive(Clone, Debug, Default)]
struct Oracle {
    /// Every appended group, in order.
    appended: Vec<GroupImage>,
    /// (operations done, end LSN, durability) per acknowledgement.
    acks: Vec<(usize, Lsn, Durability)>,
    /// (operations done, checkpoint LSN) per completed checkpoint.
    checkpoints: Vec<(usize, Lsn)>,
}

impl Oracle {
    /// Appends `records` as one group, waits for `durability`, and records
    /// both; returns the group's end.
    fn commit(&mut self, log: &Log, storage: &CrashStorage, records: Vec<Vec<u8>>, durability: Durability) -> Lsn {
        let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let end = log.append_group(&slices).expect("append");
        self.appended.push((end, records));
        log.wait(end, durability).expect("wait");
        self.acks.push((storage.op_count(), end, durability));
        end
    }

    /// The largest end LSN acknowledged with at least `durability` within the
    /// first `ops` operations.
    fn acked(&self, ops: usize, covered: &[Durability]) -> Lsn {
        self.acks
            .iter()
            .filter(|(at, _, durability)| *at <= ops && covered.contains(durability))
            .map(|(_, end, _)| *end)
            .max()
            .unwrap_or(Lsn::from_u64(0))
    }
}

/// The checkpoint and groups of a recovery, panicking on an error.
fn recover(storage: MemStorage) -> (Lsn, Vec<GroupImage>) {
    let (log, recovery) =
        Log::open_with_storage(Path::new(DIR), common::small_log(), storage).expect("reopen after a crash");
    let checkpoint = recovery.checkpoint_lsn();
    let groups = common::group_images(recovery, "reopen after a crash");
    drop(log);
    (checkpoint, groups)
}

/// Checks one crash image left after `ops` operations; returns the recovered
/// groups.
fn check_image(oracle: &Oracle, ops: usize, image: &CrashImage, mode: CrashMode) -> Vec<GroupImage> {
    let context = format!("crash after {ops} operations, {mode:?}");
    let storage = image.to_storage();
    let (checkpoint, groups) = recover(storage.clone());
    let recovered_end = common::assert_recovered_prefix(&context, checkpoint, &groups, &oracle.appended);
    let synced = oracle.acked(ops, &[Durability::Synced]);
    assert!(recovered_end >= synced, "{context}: acknowledged Synced up to {synced:?}, recovered to {recovered_end:?}");
    if mode == CrashMode::KeepAll {
        let written = oracle.acked(ops, &[Durability::Synced, Durability::Written]);
        assert!(
            recovered_end >= written,
            "{context}: acknowledged Written up to {written:?}, recovered to {recovered_end:?}"
        );
    }
    // The checkpoint never goes back past one that completed.
    let checkpointed = oracle.checkpoints.iter().filter(|(at, _)| *at <= ops).map(|(_, lsn)| *lsn).max();
    if let Some(checkpointed) = checkpointed {
        assert!(
            checkpoint >= checkpointed,
            "{context}: checkpoint {checkpointed:?} completed, recovery used {checkpoint:?}"
        );
    }
    // Idempotent: the first recovery repaired and closed; a second finds the same.
    let (again_checkpoint, again) = recover(storage);
    assert_eq!((again_checkpoint, &again), (checkpoint, &groups), "{context}: a second recovery differs");
    groups
}

/// Every crash image of every state the trace passed through; returns how many
/// images were checked.
fn explore(storage: &CrashStorage, oracle: &Oracle) -> u64 {
    let seeds = random_images_per_state();
    let mut images = 0;
    storage.replay(|ops, state: &CrashState| {
        let mut modes = vec![CrashMode::DropUnsynced];
        if state.unsynced_writes() > 0 {
            modes.push(CrashMode::KeepAll);
            modes.extend((0..seeds).map(|seed| CrashMode::Random(ops as u64 * 1000 + seed)));
        }
        for mode in modes {
            check_image(oracle, ops, &state.crash(mode), mode);
            images += 1;
        }
    });
    images
}

/// Group sizes that land groups across block (512 B) and file (32 blocks)
/// boundaries: tiny, a block's payload and a little more, many blocks.
fn group_records(index: usize) -> Vec<Vec<u8>> {
    let sizes: [usize; 7] = [1, 40, 497, 520, 1300, 3000, 6000];
    let size = sizes[index % sizes.len()];
    let records = 1 + index % 3;
    (0..records).map(|record| vec![(index * 7 + record) as u8; size / records + 1]).collect()
}

/// Runs `commits` groups on `log`, cycling the durabilities, checkpointing what
/// is durable every 8 groups (the ring wraps several times).
fn run_workload(log: &Log, storage: &CrashStorage, oracle: &mut Oracle, commits: usize) {
    for index in 0..commits {
        let durability = [Durability::Synced, Durability::Written, Durability::Buffered][index % 3];
        oracle.commit(log, storage, group_records(index), durability);
        if index % 8 == 7 {
            let lsn = log.durable_lsn();
            log.checkpoint(lsn).expect("checkpoint");
            oracle.checkpoints.push((storage.op_count(), lsn));
        }
    }
}

#[test]
fn every_crash_state_of_a_workload_recovers_a_prefix_with_every_ack() {
    let storage = CrashStorage::new();
    let mut oracle = Oracle::default();
    let (log, recovery) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    assert_eq!(recovery.count(), 0);
    run_workload(&log, &storage, &mut oracle, 100);
    log.close().expect("close");
    let appended: usize = oracle.appended.iter().map(|(_, records)| records.iter().map(Vec::len).sum::<usize>()).sum();
    assert!(appended > 2 * 64 * 1024, "the workload wraps the 64 KiB ring twice ({appended} bytes)");
    let images = explore(&storage, &oracle);
    eprintln!("{} operations, {images} crash images checked", storage.op_count());
}

/// The WAL rule (INV-18): an engine appends with `Buffered` or `Written`,
/// flushes its pages and checkpoints at the end of its last group — ahead of
/// the durable log. Before the fix, a power loss that kept only what was synced
/// left a checkpoint over unwritten (all-zero) blocks, and the log refused to
/// open ("an unwritten (all-zero) block holds the checkpoint"). Checkpoints
/// here land ahead of, at and behind the durable LSN, under all three
/// durabilities, at mid-block and block-boundary LSNs; every crash image of
/// every prefix must open and recover a prefix.
#[test]
fn checkpoints_ahead_of_the_durable_log_leave_a_log_that_opens() {
    let storage = CrashStorage::new();
    let mut oracle = Oracle::default();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    let mut block_boundaries = 0;
    for index in 0..36 {
        // Every fourth group fills its last block exactly (8 bytes of group
        // header and 4 of record header), so it ends on a block boundary.
        let records = if index % 4 == 1 {
            let data_bytes = common::block_data_bytes(&common::small_log());
            let room = 16 + data_bytes - log.end_lsn().as_u64() % 512;
            let overhead = common::ONE_RECORD_OVERHEAD;
            let len = if room >= overhead { room - overhead } else { room + data_bytes - overhead };
            vec![vec![index as u8; len as usize]]
        } else {
            group_records(index)
        };
        let durability = [Durability::Buffered, Durability::Written, Durability::Synced][index % 3];
        let end = oracle.commit(&log, &storage, records, durability);
        let lsn = match index % 3 {
            0 => end,                          // ahead of the durable log (Buffered)
            1 => oracle.appended[index - 1].0, // the previous group's end
            _ => log.durable_lsn(),            // at it
        };
        block_boundaries += usize::from(lsn.as_u64() % 512 == 16);
        let durable_before = log.durable_lsn();
        log.checkpoint(lsn).expect("checkpoint");
        assert!(log.durable_lsn() >= lsn, "INV-18: checkpoint {lsn} returned with the log durable to {durable_before}");
        oracle.checkpoints.push((storage.op_count(), lsn));
    }
    drop(log);
    assert!(block_boundaries > 0, "some checkpoints fall on a block boundary");
    let images = explore(&storage, &oracle);
    eprintln!("{} operations, {images} crash images checked", storage.op_count());
}

/// Crash images of the workload's trace that end in a torn tail, for the
/// recovery tests: random crashes in states with unsynced writes.
fn torn_images(count: usize) -> (Oracle, Vec<CrashImage>) {
    let storage = CrashStorage::new();
    let mut oracle = Oracle::default();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    run_workload(&log, &storage, &mut oracle, 40);
    drop(log);
    // States after the log exists with unsynced writes, spread over the trace.
    let mut candidates = Vec::new();
    storage.replay(|ops, state| {
        if ops > 30 && state.unsynced_writes() > 0 {
            candidates.push(ops);
        }
    });
    let chosen: Vec<usize> = (0..count).map(|index| candidates[index * candidates.len() / count]).collect();
    let mut images = Vec::new();
    let mut torn = 0;
    storage.replay(|ops, state| {
        if chosen.contains(&ops) {
            // The first seed that tears the tail, if one of a few does.
            let image = (0..8)
                .map(|seed| state.crash(CrashMode::Random(ops as u64 * 8 + seed)))
                .find(|image| matches!(open_end(image), LogEnd::TornTail { .. }));
            torn += usize::from(image.is_some());
            images.push(image.unwrap_or_else(|| state.crash(CrashMode::Random(ops as u64))));
        }
    });
    assert!(torn >= count / 2, "only {torn} of {count} images have a torn tail");
    (oracle, images)
}

/// How a recovery of `image` reports the log's end.
fn open_end(image: &CrashImage) -> LogEnd {
    let (_, recovery) =
        Log::open_with_storage(Path::new(DIR), common::small_log(), image.to_storage()).expect("reopen");
    recovery.end()
}

#[test]
fn a_crash_during_recovery_recovers_the_same_groups() {
    let (oracle, images) = torn_images(12);
    let mut states = 0;
    for image in images {
        // The uninterrupted recovery, for reference (it also checks the invariant).
        let expected = recover(image.to_storage());
        // Recovery (repair of the torn tail, its sync) and close, recorded.
        let recording = image.to_recording();
        drop(Log::open_with_storage(Path::new(DIR), common::small_log(), recording.clone()).expect("recovery"));
        recording.replay(|ops, state| {
            for mode in [CrashMode::DropUnsynced, CrashMode::KeepAll, CrashMode::Random(ops as u64)] {
                let again = recover(state.crash(mode).to_storage());
                assert_eq!(again, expected, "crash after {ops} operations of recovery, {mode:?}");
                states += 1;
            }
        });
        check_image(&oracle, 0, &image, CrashMode::DropUnsynced);
    }
    eprintln!("{states} crash images during recovery checked");
}

#[test]
fn a_truncated_torn_tail_never_comes_back() {
    let (oracle, images) = torn_images(8);
    let mut checked = 0;
    for image in images {
        // Recover (the torn tail is erased), append new groups over it with
        // Synced, and crash at every point of that.
        let recording = image.to_recording();
        let (log, recovery) =
            Log::open_with_storage(Path::new(DIR), common::small_log(), recording.clone()).expect("recovery");
        let checkpoint = recovery.checkpoint_lsn();
        let recovered: Vec<Lsn> = recovery.map(|group| group.expect("group").end_lsn()).collect();
        let mut after = Oracle {
            appended: oracle
                .appended
                .iter()
                .filter(|(end, _)| *end > checkpoint)
                .take(recovered.len())
                .cloned()
                .collect(),
            ..Oracle::default()
        };
        let expected: Vec<Lsn> = after.appended.iter().map(|(end, _)| *end).collect();
        assert_eq!(recovered, expected, "recovery returned other groups than appended");
        for index in 0..6 {
            let records = vec![format!("after recovery {index}").into_bytes(); 1 + index % 2];
            let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
            let end = log.append_group(&slices).expect("append");
            log.wait(end, Durability::Synced).expect("sync");
            after.appended.push((end, records));
            after.acks.push((recording.op_count(), end, Durability::Synced));
        }
        drop(log);
        // `after` lists the recovered groups, then the new ones: any stale
        // group of the torn tail showing up is a mismatch.
        checked += explore(&recording, &after);
    }
    eprintln!("{checked} crash images after recovery checked");
}

/// Found by `stress_faults`: a crash while the writer stands at the file limit
/// (the log full up to its checkpoint) with a group cut there. The stream then
/// ends at the first data position of the block after the last one written,
/// which shares its ring slot with the checkpoint's block, and recovery's
/// erase zeroed that block, destroying the start of the log it had just
/// recovered.
#[test]
fn a_crash_with_the_log_full_up_to_its_checkpoint_recovers() {
    let storage = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    let mut oracle = Oracle::default();
    let head = log.commit(b"head", Durability::Synced).expect("commit");
    oracle.appended.push((head, vec![b"head".to_vec()]));
    oracle.acks.push((storage.op_count(), head, Durability::Synced));
    log.checkpoint(head).expect("checkpoint");
    let log = std::sync::Arc::new(log);
    // Groups of 3001 bytes until the writer stops at the file limit; the
    // thread then stays blocked for good (nobody checkpoints).
    let filler = {
        let log = log.clone();
        std::thread::spawn(move || {
            for index in 0u8.. {
                let end = log.append(&vec![index; 3001]).expect("append");
                log.wait(end, Durability::Written).expect("wait");
            }
        })
    };
    // The file limit: the checkpoint's block one ring later (FORMAT.md §4).
    let ring_blocks = 4 * 32;
    let limit = Lsn::from_u64((head.as_u64() / 512 + ring_blocks) * 512 + 16);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while log.metrics().lsns.log_lsn_last_write < limit.as_u64() {
        assert!(std::time::Instant::now() < deadline, "the writer never reached the file limit {limit:?}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(log.metrics().lsns.log_lsn_last_write, limit.as_u64(), "written past the file limit");
    let image_modes = [CrashMode::KeepAll, CrashMode::DropUnsynced, CrashMode::Random(1), CrashMode::Random(2)];
    let state = storage.state();
    let images: Vec<(CrashMode, CrashImage)> = image_modes.iter().map(|&mode| (mode, state.crash(mode))).collect();
    drop(filler); // detached: it stays blocked in `wait`
                  // What the filler appended, rebuilt (it cannot report while blocked); a
                  // few more than it did: recovery must return a prefix of them.
    let mut end = head;
    for index in 0..40 {
        let record = vec![index; 3001];
        end = Lsn::from_u64(redolog_next_end(end.as_u64(), 3001));
        oracle.appended.push((end, vec![record]));
    }
    for (mode, image) in images {
        check_image(&oracle, storage.op_count(), &image, mode);
    }
}

/// The end LSN of a one-record group of `len` bytes appended at `start`
/// (FORMAT.md §4, §6: 8-byte group header, 4-byte record length; 492 data
/// bytes per 512-byte block, 460 in an encrypted log).
fn redolog_next_end(start: u64, len: u64) -> u64 {
    let data = common::block_data_bytes(&common::small_log());
    let sn = (start / 512) * data + start % 512 - 16 + common::ONE_RECORD_OVERHEAD + len;
    (sn / data) * 512 + sn % data + 16
}
