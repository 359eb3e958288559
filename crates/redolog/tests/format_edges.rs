//! Goal: every edge of the format (docs/FORMAT.md) round-trips through real files:
//! the worked example byte for byte, groups spanning blocks and files, empty
//! records and groups, a record that fills a block exactly, the largest group
//! accepted, groups larger than the ring or the log, many laps of the file ring,
//! a torn tail (truncated, never resurrected) and mid-log corruption (an error
//! naming file, offset and LSN). Invariants: INV-12, INV-13, INV-14, INV-7.

mod common;

use redolog::{Durability, Error, Log, LogEnd, Lsn};

/// The worked example of docs/FORMAT.md §8, checked against the bytes on disk.
#[test]
fn worked_example_matches_format_md() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(64, 64 << 10);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    assert_eq!(log.end_lsn(), Lsn::from_u64(8208), "a new log starts at block 16, offset 16");
    assert_eq!(log.append_group(&[b"hello", b""]).expect("append"), Lsn::from_u64(8229));
    assert_eq!(log.append(&[0xAB; 480]).expect("append"), Lsn::from_u64(8741));
    log.close().expect("close");

    let (path, offset) = common::place(dir.path(), &config, 16);
    assert_eq!((path.file_name().expect("name").to_str(), offset), (Some("redo.0000"), 20480));
    let block = common::peek(&path, offset, 512);
    let expected_head: &[u8] = &[
        0x10, 0, 0, 0, 0xec, 0x01, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, // header
        0x0d, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0, 0, 0, 0, // group 1
        0xe4, 0x01, 0, 0, 1, 0, 0, 0, 0xe0, 0x01, 0, 0, // group 2 headers
    ];
    assert_eq!(&block[..49], expected_head);
    assert!(block[49..508].iter().all(|&byte| byte == 0xAB));
    // The CRC covers the log id (file header bytes 24..40), then bytes 0..508.
    let log_id = &common::peek(&path, 24, 16);
    let crc = crc32c::crc32c_append(crc32c::crc32c(log_id), &block[..508]);
    assert_eq!(block[508..], crc.to_le_bytes());

    let (path, offset) = common::place(dir.path(), &config, 17);
    let block = common::peek(&path, offset, 512);
    // first_group = 37: written by group 2, which ends in this block (FORMAT.md §5).
    assert_eq!(&block[..8], &[0x11, 0, 0, 0, 21, 0, 37, 0]);
    assert!(block[16..37].iter().all(|&byte| byte == 0xAB));
    assert!(block[37..508].iter().all(|&byte| byte == 0));
}

#[test]
fn groups_spanning_blocks_and_files_recover_byte_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 64 blocks per file: the first file holds 48 blocks of log (~23 KiB).
    let config = common::config(64, 64 << 10);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let big: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let groups: Vec<Vec<Vec<u8>>> = vec![
        vec![b"before".to_vec()],
        vec![big.clone(), b"tail of a group that crossed a file".to_vec()],
        vec![big[..1000].to_vec(); 30], // 30 records, ~30 KiB, across the next file boundary
    ];
    for group in &groups {
        let slices: Vec<&[u8]> = group.iter().map(Vec::as_slice).collect();
        log.commit_group_synced(&slices);
    }
    assert!(log.end_lsn().as_u64() / 512 > 16 + 2 * 48, "the groups reached the third file");
    drop(log);
    let (_, recovered, end) = common::reopen(dir.path(), &config);
    assert_eq!(end, LogEnd::CleanShutdown);
    assert_eq!(common::records(&recovered), groups);
}

#[test]
fn empty_records_and_empty_groups_are_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(64, 64 << 10);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let empty_group = log.append_group(&[]).expect("empty group");
    assert_eq!(empty_group, Lsn::from_u64(8208 + 8), "an empty group is just its 8-byte header");
    log.append(b"").expect("empty record");
    log.append_group(&[b"", b"x", b""]).expect("mixed");
    log.close().expect("close");
    let (_, recovered, _) = common::reopen(dir.path(), &config);
    let expected: Vec<Vec<Vec<u8>>> = vec![vec![], vec![vec![]], vec![vec![], b"x".to_vec(), vec![]]];
    assert_eq!(common::records(&recovered), expected);
}

#[test]
fn record_filling_exactly_one_block_ends_at_the_next_block_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(64, 64 << 10);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    // 8 (group header) + 4 (record header) + 480 = 492 = one block's data.
    let end = log.commit(&[7u8; 480], Durability::Synced).expect("commit");
    assert_eq!(end, Lsn::from_u64(17 * 512 + 16), "written as offset 16 of the next block (FORMAT.md §4)");
    let next = log.commit(b"next", Durability::Synced).expect("commit");
    assert_eq!(next, Lsn::from_u64(17 * 512 + 16 + 8 + 4 + 4));
    drop(log);
    let (_, recovered, _) = common::reopen(dir.path(), &config);
    assert_eq!(common::records(&recovered), vec![vec![vec![7u8; 480]], vec![b"next".to_vec()]]);
    assert_eq!(recovered[0].end_lsn(), end);
}

#[test]
fn largest_group_is_accepted_and_one_byte_more_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(64, 64 << 10).with_group_bytes_max(10_000);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let largest = vec![1u8; 10_000 - 8 - 4];
    log.commit(&largest, Durability::Synced).expect("a group of exactly group_bytes_max");
    let end = log.end_lsn();
    match log.append(&[1u8; 10_000 - 8 - 4 + 1]) {
        Err(Error::GroupTooLarge { bytes: 10_001, limit: 10_000, limit_name }) => {
            assert!(limit_name.contains("group_bytes_max"), "{limit_name}");
        }
        other => panic!("expected GroupTooLarge, got {other:?}"),
    }
    assert_eq!(log.end_lsn(), end, "a rejected group reserves nothing");
    log.commit(b"still usable", Durability::Synced).expect("the log is not poisoned");
    drop(log);
    let (_, recovered, _) = common::reopen(dir.path(), &config);
    assert_eq!(common::records(&recovered), vec![vec![largest], vec![b"still usable".to_vec()]]);
}

#[test]
fn group_larger_than_the_ring_streams_through_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The smallest ring: 8 blocks (4 KiB); the group is ten times that.
    let config = common::config(256, 4096);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let big: Vec<u8> = (0..40_000u32).map(|i| (i % 256) as u8).collect();
    log.commit(b"small", Durability::Written).expect("small");
    log.commit(&big, Durability::Synced).expect("big");
    log.commit(b"after", Durability::Synced).expect("after");
    drop(log);
    let (_, recovered, _) = common::reopen(dir.path(), &config);
    assert_eq!(common::records(&recovered), vec![vec![b"small".to_vec()], vec![big], vec![b"after".to_vec()]]);
}

#[test]
fn group_larger_than_the_log_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(32, 64 << 10).with_group_bytes_max(1 << 30);
    let (log, _) = Log::open(dir.path(), config).expect("open");
    match log.append(&vec![0u8; 200_000]) {
        Err(Error::GroupTooLarge { bytes, limit, limit_name }) => {
            assert!(bytes > limit, "{bytes} <= {limit}");
            // The limit is the files' usable space less the blocks' framing,
            // and the message says so (it once called it "the log capacity",
            // a number below `capacity_bytes()` and `usable_bytes()` both).
            assert!(limit < log.usable_bytes() && log.usable_bytes() < log.capacity_bytes(), "{limit}");
            assert!(limit_name.contains("largest group the log's files hold"), "{limit_name}");
        }
        other => panic!("expected GroupTooLarge, got {other:?}"),
    }
    log.commit(b"fine", Durability::Synced).expect("the log is still usable");
}

/// Many laps of the file ring with checkpoints: recovery returns exactly the
/// groups after the last checkpoint and never a block of an earlier lap.
#[test]
fn ring_wraps_many_laps_and_recovers_from_the_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(32, 8192); // 4 × 32 blocks: ~63 KiB of log
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let mut since_checkpoint = Vec::new();
    for index in 0..2_000u32 {
        let record = format!("lap record {index} ").repeat(1 + (index % 23) as usize).into_bytes();
        let end = log.commit(&record, Durability::Synced).expect("commit");
        since_checkpoint.push(vec![record]);
        if index % 50 == 49 {
            // The engine flushed its pages up to `end`.
            log.checkpoint(end).expect("checkpoint");
            since_checkpoint.clear();
        }
    }
    assert!(log.end_lsn().as_u64() > 5 * 4 * 32 * 512, "at least five laps: {}", log.end_lsn());
    // Crash without close: recovery must start at the last checkpoint.
    log.simulate_crash();
    let (_, recovered, end) = common::reopen(dir.path(), &config);
    assert_eq!(end, LogEnd::Unclosed);
    assert_eq!(common::records(&recovered), since_checkpoint);
}

/// A crash left the last group half on disk: recovery truncates it (INV-14), and
/// after new appends it never comes back.
#[test]
fn torn_tail_is_truncated_and_never_resurrected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(64, 64 << 10);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    log.commit(b"kept", Durability::Synced).expect("commit");
    let kept_end = log.end_lsn();
    let torn = vec![9u8; 2000]; // spans blocks 16..20
    log.commit(&torn, Durability::Written).expect("written, never synced");
    let torn_end = log.end_lsn();
    log.simulate_crash(); // crash: no close, no checkpoint
                          // The OS lost the last block of the torn group (it never reached the disk).
    let (path, offset) = common::place(dir.path(), &config, torn_end.as_u64() / 512);
    common::patch(&path, offset, &[0u8; 512]);

    let (log, recovered, end) = common::reopen(dir.path(), &config);
    assert_eq!(common::records(&recovered), vec![vec![b"kept".to_vec()]]);
    match end {
        LogEnd::TornTail { truncated_at, blocks_erased } => {
            assert_eq!(truncated_at, kept_end);
            assert!(blocks_erased >= 1, "{blocks_erased}");
        }
        other => panic!("expected a torn tail, got {other:?}"),
    }
    log.commit(b"new", Durability::Synced).expect("commit after recovery");
    log.simulate_crash();
    let (_, recovered, _) = common::reopen(dir.path(), &config);
    assert_eq!(common::records(&recovered), vec![vec![b"kept".to_vec()], vec![b"new".to_vec()]]);
}

/// Damage to durable data in the middle of the log is an error naming file,
/// offset and LSN (INV-13), never a silent truncation.
#[test]
fn mid_log_corruption_is_an_error_naming_file_offset_and_lsn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(64, 64 << 10);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    for index in 0..3u8 {
        log.commit(&[index; 3000], Durability::Synced).expect("commit");
    }
    log.close().expect("close");
    let (path, offset) = common::place(dir.path(), &config, 20);
    let mut byte = common::peek(&path, offset + 100, 1);
    byte[0] ^= 0x10;
    common::patch(&path, offset + 100, &byte);

    match Log::open(dir.path(), config.clone()) {
        Err(Error::Corruption { path: named, offset: at, lsn, reason }) => {
            assert_eq!(named, path, "{reason}");
            assert_eq!(lsn.as_u64() / 512, 20, "{reason}");
            assert_eq!(at, offset + lsn.as_u64() % 512, "the offset is that of the LSN: {reason}");
        }
        Err(other) => panic!("expected Corruption, got {other}"),
        Ok(_) => panic!("opened a log with a corrupt block in the middle"),
    }
    // The reader reports and never writes: the damage is still there to inspect.
    assert!(matches!(Log::open(dir.path(), config), Err(Error::Corruption { .. })));
}

trait CommitGroup {
    fn commit_group_synced(&self, records: &[&[u8]]);
}

impl CommitGroup for Log {
    fn commit_group_synced(&self, records: &[&[u8]]) {
        let end = self.append_group(records).expect("append_group");
        self.wait(end, Durability::Synced).expect("wait");
    }
}
