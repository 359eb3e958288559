//! Goal: damage at the end of the log costs exactly the groups it touched, and
//! damage anywhere else is reported, never skipped over (docs/RELIABILITY.md C7,
//! B9, B10; FORMAT.md §7).
//! - C7: the log is cut at every byte offset of its last two groups (everything
//!   from the offset on is zero, as if the OS lost it). After a crash with those
//!   groups unsynced, open recovers exactly the groups whose bytes all lie in
//!   blocks before the first damaged block, and reports a torn tail; after a
//!   clean close (so the groups were synced) every cut is reported as
//!   corruption naming the LSN.
//! - B9: zeroed blocks in the middle of synced data, followed by valid blocks,
//!   are corruption, not the end of the log.
//! - B10: a record whose payload is itself a serialized log (valid blocks of
//!   this very log, CRCs and all) is returned as that record's bytes; when the
//!   block holding the group's start is destroyed, none of the embedded blocks
//!   is taken for log.

mod common;

use std::path::Path;

use common::GroupImage;
use redolog::storage::{CrashImage, CrashMode, CrashStorage};
use redolog::{Config, Durability, Error, Log, LogEnd};

const DIR: &str = "/log";
const BLOCK: usize = 512;
const BLOCK_HEADER: u64 = 16;

/// The file and offset of the byte at `lsn` (FORMAT.md §4).
fn byte_place(config: &Config, lsn: u64) -> (std::path::PathBuf, usize) {
    let (path, block_offset) = common::place(Path::new(DIR), config, lsn / BLOCK as u64);
    (path, block_offset as usize + (lsn % BLOCK as u64) as usize)
}

/// A log with one small synced group, then `tail` groups committed with
/// `durability`; returns its image (closed or crashed) and the groups.
fn log_with_tail(tail: &[Vec<u8>], durability: Durability, close: bool) -> (CrashImage, Vec<GroupImage>) {
    let storage = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
    let mut groups = vec![(log.commit(b"head", Durability::Synced).expect("commit"), vec![b"head".to_vec()])];
    for record in tail {
        groups.push((log.commit(record, durability).expect("commit"), vec![record.clone()]));
    }
    if close {
        log.close().expect("close");
    }
    let image = storage.state().crash(CrashMode::KeepAll);
    drop(log);
    (image, groups)
}

/// Zeroes every log byte from LSN `cut` to `end`; returns the first block
/// whose bytes changed, if any did.
fn cut_at(image: &mut CrashImage, cut: u64, end: u64) -> Option<u64> {
    let mut first_changed = None;
    for lsn in cut..end {
        let (path, offset) = byte_place(&common::small_log(), lsn);
        let byte = &mut image.files.get_mut(&path).expect("log file")[offset];
        if *byte != 0 {
            *byte = 0;
            first_changed.get_or_insert(lsn / BLOCK as u64);
        }
    }
    first_changed
}

/// The groups that survive damage starting in block `first_changed`: those
/// whose bytes all precede it.
fn surviving(groups: &[GroupImage], first_changed: Option<u64>) -> Vec<GroupImage> {
    match first_changed {
        None => groups.to_vec(),
        Some(block) => {
            groups.iter().filter(|(end, _)| end.as_u64() <= block * BLOCK as u64 + BLOCK_HEADER).cloned().collect()
        }
    }
}

fn open(image: &CrashImage) -> redolog::Result<(LogEnd, Vec<GroupImage>)> {
    let (_log, recovery) = Log::open_with_storage(Path::new(DIR), common::small_log(), image.to_storage())?;
    let end = recovery.end();
    Ok((end, common::group_images(recovery, "reopen")))
}

/// The last two groups: one across a block boundary, one inside a block.
fn tail() -> Vec<Vec<u8>> {
    vec![vec![0xa1; 700], vec![0xb2; 150]]
}

#[test]
fn cutting_unsynced_groups_at_any_byte_keeps_every_whole_group_before_the_cut() {
    let (image, groups) = log_with_tail(&tail(), Durability::Written, false);
    // From the start of the block where the tail begins (its header included)
    // to the end of the block where it ends.
    let (start, end) = (groups[0].0.as_u64() / BLOCK as u64 * BLOCK as u64, groups[2].0.as_u64());
    let block_end = end.div_ceil(BLOCK as u64) * BLOCK as u64;
    let mut cuts = 0;
    for cut in start..block_end {
        let mut damaged = image.clone();
        let context = format!("cut at LSN {cut}");
        let first_changed = cut_at(&mut damaged, cut, block_end);
        let expected = surviving(&groups, first_changed);
        let (log_end, recovered) = open(&damaged).unwrap_or_else(|error| panic!("{context}: {error}"));
        assert_eq!(recovered, expected, "{context}");
        // Where a valid block follows the end it is erased (a torn tail); where
        // only zeros or a damaged block follow, the log simply ends (a damaged
        // block is rewritten by the next append before anything after it).
        let recovered_end = expected.last().map_or(groups[0].0, |(end, _)| *end);
        match log_end {
            LogEnd::Unclosed => {}
            LogEnd::TornTail { truncated_at, .. } => assert!(truncated_at <= recovered_end, "{context}"),
            other => panic!("{context}: {other:?} after a crash"),
        }
        cuts += 1;
    }
    // Two blocks in clear; an encrypted log's 32 bytes a group make it three.
    assert!(cuts == 2 * BLOCK || cuts == 3 * BLOCK, "the tail spans two or three blocks ({cuts} cuts)");
}

#[test]
fn cutting_synced_groups_at_any_byte_is_corruption() {
    let (image, groups) = log_with_tail(&tail(), Durability::Synced, true);
    let (start, end) = (groups[0].0.as_u64(), groups[2].0.as_u64());
    for cut in start..end {
        let mut damaged = image.clone();
        let Some(first_changed) = cut_at(&mut damaged, cut, end) else { continue };
        match open(&damaged) {
            Err(Error::Corruption { lsn, .. }) => {
                assert_eq!(
                    lsn.as_u64() / BLOCK as u64,
                    first_changed,
                    "cut at LSN {cut}: corruption reported at {lsn:?}"
                )
            }
            Err(other) => panic!("cut at LSN {cut}: expected corruption, got {other}"),
            Ok((_, recovered)) => panic!("cut at LSN {cut}: synced groups lost silently ({} left)", recovered.len()),
        }
    }
}

#[test]
fn zeroed_blocks_in_the_middle_of_synced_data_are_corruption() {
    let records: Vec<Vec<u8>> = (0..6u8).map(|index| vec![index; 600]).collect();
    for close in [true, false] {
        let (image, groups) = log_with_tail(&records, Durability::Synced, close);
        let first = groups[1].0.as_u64() / BLOCK as u64 + 1;
        for zeroed in 1..=2u64 {
            let mut damaged = image.clone();
            cut_at(&mut damaged, first * BLOCK as u64, (first + zeroed) * BLOCK as u64);
            let context = format!("{zeroed} zero blocks from block {first}, close {close}");
            match open(&damaged) {
                Err(Error::Corruption { lsn, reason, .. }) => {
                    assert_eq!(lsn.as_u64() / BLOCK as u64, first, "{context}: {reason}");
                }
                Err(other) => panic!("{context}: expected corruption, got {other}"),
                Ok((end, recovered)) => panic!("{context}: read as the end ({end:?}, {} groups)", recovered.len()),
            }
        }
    }
}

#[test]
fn a_payload_holding_a_serialized_log_is_never_read_as_log() {
    // A first log; its blocks (real headers, real CRCs, same geometry) become
    // the payload of a group in a second log, after a spacer that makes the
    // group start mid-block.
    let (source, _) = log_with_tail(&[vec![0x77; 2000]], Durability::Synced, true);
    let (path, offset) = common::place(Path::new(DIR), &common::small_log(), 16);
    let embedded = source.files[&path][offset as usize..offset as usize + 6 * BLOCK].to_vec();
    let tail = [vec![0x55; 1000], embedded, b"after".to_vec()];
    let (image, groups) = log_with_tail(&tail, Durability::Written, false);
    let (_, recovered) = open(&image).expect("open");
    assert_eq!(recovered, groups, "the embedded log is just bytes of its record");

    // Destroy the block where the embedding group starts (its header with it):
    // recovery must stop there, not resynchronise on an embedded block.
    let group_start = groups[1].0.as_u64();
    let block_end = (group_start / BLOCK as u64 + 1) * BLOCK as u64;
    for cut in [group_start / BLOCK as u64 * BLOCK as u64, group_start, group_start + 3] {
        let mut damaged = image.clone();
        let expected = surviving(&groups, cut_at(&mut damaged, cut, block_end));
        let (_, recovered) = open(&damaged).expect("an unsynced tail is cut, not corrupt");
        assert!(expected.len() < 3, "cut at {cut} left the embedding group whole");
        assert_eq!(recovered, expected, "cut at {cut}: only the groups before the damage");
    }
}

/// Found by the `mutated_log` fuzzer (it panicked in recovery): a checkpoint
/// inside a block means the block held synced data, so that block damaged is
/// corruption at the checkpoint — whatever the rest of the log holds.
#[test]
fn a_damaged_block_holding_the_checkpoint_is_corruption() {
    for close in [true, false] {
        let storage = CrashStorage::new();
        let (log, _) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
        let end = log.commit(&[7u8; 100], Durability::Synced).expect("commit");
        log.checkpoint(end).expect("checkpoint");
        if close {
            log.close().expect("close");
        }
        let mut image = storage.state().crash(CrashMode::KeepAll);
        drop(log);
        let (path, offset) = byte_place(&common::small_log(), end.as_u64() - 50);
        image.files.get_mut(&path).expect("log file")[offset] ^= 0x40;
        match open(&image) {
            Err(Error::Corruption { lsn, reason, .. }) => {
                assert_eq!(lsn, end, "close {close}: {reason}");
                assert!(reason.contains("checkpoint"), "close {close}: {reason}");
            }
            Err(other) => panic!("close {close}: expected corruption, got {other}"),
            Ok(_) => panic!("close {close}: opened over a damaged checkpoint block"),
        }
    }
}
