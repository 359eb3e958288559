//! Finding the end of the log, deciding torn tail versus corruption, and erasing a
//! torn tail ([DESIGN §4](crate::docs::design#4-recovery), INV-12–INV-14).

use std::sync::Arc;

use crate::encryption::block::{seal_block, BlockCipher};
use crate::error::{Error, Result};
use crate::failpoint::failpoint;
use crate::format::{
    BlockState, CheckpointSlot, BLOCK_BYTES, BLOCK_HEADER_BYTES, CHECKPOINT_CLEAN_SHUTDOWN, CHECKPOINT_TAIL_CUT,
};
use crate::lsn::{BlockNo, Lsn};
use crate::recovery::reader::{BlockReader, GroupReader, Step, StreamEnd};
use crate::writer::{last_data_block, Files};

/// How the log ended, as found by recovery.
///
/// ```
/// use redolog::{Config, Durability, Log, LogEnd};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
/// assert_eq!(recovery.end(), LogEnd::Created);
/// log.commit(b"x", Durability::Synced).unwrap();
/// log.close().unwrap();
/// let (_, recovery) = Log::open(dir.path(), Config::default()).unwrap();
/// assert_eq!(recovery.end(), LogEnd::CleanShutdown);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogEnd {
    /// The log was created by this `open`.
    Created,
    /// The log was closed cleanly and ends where the close left it.
    CleanShutdown,
    /// The process stopped without `close` — a crash, a kill, an exit — and
    /// nothing was cut off: the log ends at a complete group and nothing of
    /// the current lap lies past it.
    Unclosed,
    /// Bytes past the last complete group — a group cut off by a crash, or blocks
    /// written but never synced — were erased before the log reopened.
    TornTail {
        /// The LSN the log now ends at (the end of the last complete group).
        truncated_at: crate::Lsn,
        /// Blocks rewritten or zeroed.
        blocks_erased: u64,
    },
}

/// What the scan found.
pub(crate) struct ScanResult {
    /// Where recovered groups start (the first group start at or after the checkpoint).
    pub(crate) start: Lsn,
    /// End of the last complete group.
    pub(crate) end: Lsn,
    pub(crate) log_end: LogEnd,
    /// The block holding `end`, as the log must continue it.
    pub(crate) last_block: Vec<u8>,
    /// What erasing the torn tail writes, if the log ends in one: applied by
    /// `repair`, a separate step the opener takes (inspection does not).
    pub(crate) repair: Option<Repair>,
    /// An encrypted log's key ids named by the blocks from the checkpoint's
    /// to the end.
    pub(crate) key_ids: Vec<u32>,
    /// The durable frontier the log was checked against (INV-13): what the
    /// slot and the blocks say was synced. Past `end` when the torn tail
    /// holds synced bytes of a group that never completed: erasing it then
    /// needs the slot's claim lowered first (INV-41).
    pub(crate) frontier: Lsn,
}

/// Where recovered groups start.
struct Start {
    lsn: Lsn,
    /// The group holding the checkpoint never completed: the log continues at the
    /// checkpoint itself, and the stream of that group ends here.
    torn_group_end: Option<Lsn>,
    /// An encrypted log's key ids of the blocks read to find the start.
    key_ids: Vec<u32>,
    /// The largest `synced_block` of the blocks walked to find the start: a
    /// group holding the checkpoint that never completed may hold synced
    /// bytes, and the blocks of its stream say so (INV-41).
    max_synced_block: BlockNo,
}

/// Finds the first group start at or after the checkpoint LSN ([FORMAT §7](crate::docs::format#7-reading-rules-summary-designmd-4-has-the-argument)
/// step 2), with the key ids of the blocks it read.
fn find_start(files: &Arc<Files>, checkpoint: Lsn) -> Result<Start> {
    let mut blocks = BlockReader::new(files.clone());
    let mut max_synced_block = BlockNo(0);
    let (lsn, torn_group_end) = find_start_in(files, (&mut blocks, &mut max_synced_block), checkpoint)?;
    Ok(Start { lsn, torn_group_end, key_ids: blocks.key_ids, max_synced_block })
}

/// `find_start`, reading with `blocks`: the start, and where the stream of
/// a group holding the checkpoint that never completed ends; the largest
/// `synced_block` of the blocks it walks goes to `claimed`.
fn find_start_in(
    files: &Arc<Files>,
    (blocks, claimed): (&mut BlockReader, &mut BlockNo),
    checkpoint: Lsn,
) -> Result<(Lsn, Option<Lsn>)> {
    let at_checkpoint = (checkpoint, None);
    // Nothing durable at the checkpoint: the log continues there. If data after it
    // had been synced, the durable-frontier check reports the damage. But a
    // checkpoint inside a block means that block held synced data: no crash can
    // leave it invalid, so it is damage (found by the mutated_log fuzzer, which
    // reached the `unreachable!` in `erase_tail` this way).
    let state = blocks.checked_state(checkpoint.block())?;
    let BlockState::Valid(header) = state else {
        if checkpoint.offset_in_block() > BLOCK_HEADER_BYTES {
            let reason = format!("{} block holds the checkpoint", describe(state));
            return Err(blocks.corruption(checkpoint, reason));
        }
        return Ok(at_checkpoint);
    };
    *claimed = (*claimed).max(header.synced_block());
    let offset = checkpoint.offset_in_block();
    if header.first_group > offset {
        return Ok((Lsn(checkpoint.block().start().0 + header.first_group as u64), None));
    }
    // Walk the groups from the block's first one (or, if none starts in it, from
    // the first later block where one starts) up to the checkpoint.
    let mut first = Lsn(checkpoint.block().start().0 + header.first_group as u64);
    if header.first_group == 0 {
        let mut block = checkpoint.block();
        loop {
            block = BlockNo(block.0 + 1);
            let state = blocks.checked_state(block)?;
            if let BlockState::Valid(header) = state {
                *claimed = (*claimed).max(header.synced_block());
            }
            match state {
                BlockState::Valid(header) if header.first_group != 0 => {
                    return Ok((Lsn(block.start().0 + header.first_group as u64), None));
                }
                BlockState::Valid(header) if header.data_len == files.seal.geometry().data_bytes() => {}
                // The group holding the checkpoint ends in a partial or missing block.
                BlockState::Valid(header) => {
                    let stream_end = Lsn(block.data_start().0 + header.data_len as u64);
                    return Ok((checkpoint, Some(stream_end)));
                }
                // Nothing follows a full block. The group holding the
                // checkpoint was cut off there, or ended at that block's
                // last data byte (then the next block, where the next
                // group would start, was never written): its header says
                // which (found by the simulation of the whole API).
                _ => match group_ending_at(files, checkpoint, block.data_start())? {
                    Some(end) => return Ok((end, None)),
                    None => return Ok((checkpoint, Some(block.data_start()))),
                },
            }
        }
    }
    let mut groups = GroupReader::new(BlockReader::new(files.clone()), first, false);
    let found = loop {
        if groups.position() >= checkpoint {
            break (first, None);
        }
        match groups.next_step()? {
            Step::Group(group) => first = group.end_lsn(),
            Step::End { at, .. } => break (checkpoint, Some(at.max(checkpoint))),
            // Before the checkpoint the blocks were synced (INV-13): damage
            // there is corruption.
            Step::Damaged(damage) => return Err(damage.into_corruption()),
        }
    };
    blocks.key_ids.extend(groups.blocks.key_ids);
    Ok(found)
}

/// Whether the group holding `checkpoint` (which lies inside it) ends
/// exactly at `end`: read from its start, in the blocks before the
/// checkpoint's. They are intact when it does: the writer wrote no further
/// than `end`, less than a lap past them. `None` when it does not, or the
/// blocks do not tell.
fn group_ending_at(files: &Arc<Files>, checkpoint: Lsn, end: Lsn) -> Result<Option<Lsn>> {
    let mut blocks = BlockReader::new(files.clone());
    let mut block = checkpoint.block();
    let oldest = BlockNo(end.block().0.saturating_sub(files.layout.ring_blocks)).max(files.oldest);
    // Back to the nearest block where a group starts before the checkpoint.
    let first = loop {
        if block <= oldest {
            return Ok(None);
        }
        block = BlockNo(block.0 - 1);
        match blocks.checked_state(block)? {
            BlockState::Valid(header) if header.first_group != 0 => {
                break Lsn(block.start().0 + header.first_group as u64);
            }
            BlockState::Valid(_) => {}
            _ => return Ok(None),
        }
    };
    let mut groups = GroupReader::new(blocks, first, false);
    loop {
        match groups.next_step()? {
            Step::Group(group) if group.end_lsn() > checkpoint => {
                return Ok((group.end_lsn() == end).then_some(end));
            }
            Step::Group(_) => {}
            Step::End { .. } | Step::Damaged(_) => return Ok(None),
        }
    }
}

/// Scans from the checkpoint to the end and decides how the log ended. Reads
/// only: a torn tail comes back as the `Repair` that would erase it.
pub(crate) fn scan(files: &Arc<Files>, checkpoint: &CheckpointSlot, unsynced_blocks: u64) -> Result<ScanResult> {
    let checkpoint_lsn = Lsn(checkpoint.lsn);
    let start = find_start(files, checkpoint_lsn)?;
    let mut groups = GroupReader::new(BlockReader::new(files.clone()), start.lsn, false);
    let (end, stream_end, why) = match start.torn_group_end {
        Some(stream_end) => (start.lsn, stream_end, StreamEnd::PartialBlock),
        None => loop {
            match groups.next_step()? {
                Step::Group(_) => {}
                Step::End { group_start, at, why } => break (group_start, at, why),
                // Damage inside valid blocks is not how a crash ends the
                // stream (no crash writes a valid CRC over wrong bytes):
                // corruption, wherever it lies.
                Step::Damaged(damage) => return Err(damage.into_corruption()),
            }
        },
    };
    // Past the stream: valid blocks of this lap, up to the unsynced bound beyond
    // the last one found and never into the checkpoint's part of the ring.
    let ring_limit = checkpoint_lsn.block().0 + files.layout.ring_blocks;
    let mut blocks = groups.blocks;
    let mut max_synced_block = groups.max_synced_block.max(start.max_synced_block);
    // The last block holding stream data: a stream that ends after a block's
    // last data byte ends at offset 16 of the next block, which holds nothing
    // of it. With the log full up to its checkpoint, that next block shares
    // its ring slot with the checkpoint's block, and erasing it destroyed the
    // log just recovered (found by stress_faults).
    let mut last_current = Some(last_data_block(stream_end)).filter(|_| stream_end > end);
    let mut probe = stream_end.block().0 + u64::from(why == StreamEnd::PartialBlock);
    let mut horizon = probe + unsynced_blocks + 1;
    while probe < horizon.min(ring_limit) {
        // An encrypted block's `synced_back` is trusted once its tag
        // verified: a forged one must not move the durable frontier.
        if let BlockState::Valid(header) = blocks.checked_state(BlockNo(probe))? {
            max_synced_block = max_synced_block.max(header.synced_block());
            last_current = Some(BlockNo(probe));
            horizon = probe + unsynced_blocks + 1;
        }
        probe += 1;
    }
    // INV-13: the durable frontier. Everything below it was synced once; the valid
    // stream must reach it. INV-41: while a recovery cuts the tail at the
    // slot's `durable_lsn`, the blocks past it are the tail being erased,
    // some zeroed and some not: what they say was synced is void.
    let claimed = if checkpoint.flags & CHECKPOINT_TAIL_CUT != 0 { Lsn(0) } else { max_synced_block.data_start() };
    let frontier = Lsn(checkpoint.durable_lsn).max(claimed);
    if stream_end < frontier {
        let reason = match why {
            StreamEnd::NotValid(state) => format!("{} block before the durable end {frontier}", describe(state)),
            _ => format!("the log ends before its durable end {frontier}"),
        };
        return Err(blocks.corruption(stream_end, reason));
    }
    // A clean shutdown at `durable_lsn` closed every group below it, complete
    // and synced: no crash can leave the last complete group ending before it
    // (a changed length field can; found by the encrypted log's tamper test).
    if checkpoint.flags & CHECKPOINT_CLEAN_SHUTDOWN != 0 && end.0 < checkpoint.durable_lsn {
        let reason = format!("the log was closed cleanly at {} but its groups end at {end}", checkpoint.durable_lsn);
        return Err(blocks.corruption(end, reason));
    }
    let clean_shutdown = checkpoint.flags & CHECKPOINT_CLEAN_SHUTDOWN != 0 && checkpoint.durable_lsn == end.0;
    let needs_erase = stream_end > end || last_current.is_some_and(|block| block > end.block());
    let (log_end, last_block, repair) = if needs_erase {
        let erase = Erase { end, last_current, restart_group: start.torn_group_end.is_some() };
        let (repair, last_block) = plan_erase(&mut blocks, &erase)?;
        (LogEnd::TornTail { truncated_at: end, blocks_erased: repair.blocks() }, last_block, Some(repair))
    } else {
        let log_end = if clean_shutdown { LogEnd::CleanShutdown } else { LogEnd::Unclosed };
        (log_end, continuation_block(&mut blocks, end)?, None)
    };
    // Every block opened, those past the end included: a crash between the
    // next session's slot and the repair must not lose the ids of the
    // blocks the repair has not erased yet (INV-31).
    let mut key_ids = std::mem::take(&mut blocks.key_ids);
    key_ids.extend(&start.key_ids);
    key_ids.sort_unstable();
    key_ids.dedup();
    Ok(ScanResult { start: start.lsn, end, log_end, last_block, repair, key_ids, frontier })
}

fn describe(state: BlockState) -> &'static str {
    match state {
        BlockState::Valid(_) => "valid",
        BlockState::Unused => "an unwritten (all-zero)",
        BlockState::Misplaced(_) => "a misplaced or stale",
        BlockState::Bad => "a checksum-failing",
    }
}

/// What to erase past the end.
struct Erase {
    end: Lsn,
    last_current: Option<BlockNo>,
    /// The log continues inside the block of a torn group: `first_group` must
    /// point at `end`, where the next group will start.
    restart_group: bool,
}

/// INV-14: erasing a torn tail rewrites the block holding `end` without the
/// bytes past it, zeroes every later block up to `last_current`, and syncs.
/// Idempotent: a crash in the middle leaves a state from which recovery finds
/// the same end and plans the same erase.
pub(crate) struct Repair {
    /// The block holding `end`, to rewrite without the bytes past it.
    rewrite: Option<Rewrite>,
    /// Blocks `[first, last)` to zero.
    zero: (u64, u64),
    /// The first block of the erase (for the files to sync).
    first: BlockNo,
}

/// The block holding the end of a torn log, in clear (an encrypted log's
/// opened): sealed only when the repair is applied, under the cipher of the
/// session that applies it (INV-29: never under the crashed session's key,
/// whose nonce for this block and length may already be spent).
struct Rewrite {
    block: BlockNo,
    image: Vec<u8>,
    data_len: usize,
    synced_back: u32,
}

impl Repair {
    /// Blocks rewritten or zeroed.
    pub(crate) fn blocks(&self) -> u64 {
        u64::from(self.rewrite.is_some()) + (self.zero.1 - self.zero.0)
    }
}

/// Plans the erase of the torn tail past `erase.end`: returns the `Repair` and
/// the block the log continues in. Reads only.
fn plan_erase(blocks: &mut BlockReader, erase: &Erase) -> Result<(Repair, Vec<u8>)> {
    let end = erase.end;
    let mut last_block = continuation_block(blocks, end)?;
    let mut rewrite = None;
    let first_zeroed = if end.offset_in_block() > BLOCK_HEADER_BYTES {
        // Valid: the groups before `end` were read from it, or `end` is the
        // checkpoint, whose block `find_start` checked. Bad input must still
        // never panic.
        let state = blocks.state(end.block())?;
        let BlockState::Valid(header) = state else {
            return Err(blocks.corruption(end, format!("{} block holds the end of the log", describe(state))));
        };
        let mut image = match blocks.opened(end.block())? {
            Ok(image) => image.to_vec(),
            Err(reason) => return Err(blocks.corruption(end, reason)),
        };
        let data_len = end.offset_in_block() - BLOCK_HEADER_BYTES;
        image[BLOCK_HEADER_BYTES + data_len..].fill(0);
        if erase.restart_group {
            crate::buffer::set_first_group_in(&mut image, end.offset_in_block() as u16);
        }
        last_block[..end.offset_in_block()].copy_from_slice(&image[..end.offset_in_block()]);
        rewrite = Some(Rewrite { block: end.block(), image, data_len, synced_back: header.synced_back });
        end.block().0 + 1
    } else {
        end.block().0
    };
    let last = erase.last_current.map_or(first_zeroed, |block| block.0 + 1).max(first_zeroed);
    Ok((Repair { rewrite, zero: (first_zeroed, last), first: end.block() }, last_block))
}

/// Applies `repair`: writes the rewritten block (sealed with `cipher`, the
/// opening session's, in an encrypted log) and the zeros, then syncs every
/// file they touched — the erase must be durable before any new append reuses
/// these blocks, else a crash could resurrect the stale bytes behind new ones.
pub(crate) fn repair(files: &Files, repair: &Repair, cipher: Option<&BlockCipher>) -> Result<()> {
    debug_assert_eq!(files.encrypted, cipher.is_some(), "an encrypted log is repaired under its new session");
    if let Some(rewrite) = &repair.rewrite {
        let mut image = rewrite.image.clone();
        seal_block(&mut image, (files.seal, cipher), rewrite.block, rewrite.data_len, rewrite.synced_back);
        write_blocks(files, rewrite.block, &image)?;
    }
    let (mut block, last) = repair.zero;
    let zeros = vec![0u8; BLOCK_BYTES * 256];
    while block < last {
        let count = (last - block).min(256);
        write_blocks(files, BlockNo(block), &zeros[..count as usize * BLOCK_BYTES])?;
        block += count;
    }
    let last_touched = BlockNo(last.max(repair.first.0 + 1) - 1);
    for file_index in files.layout.files_between(repair.first, last_touched) {
        failpoint("repair.sync")
            .and_then(|()| files.handles[file_index].sync_data())
            .map_err(|source| Error::io("fdatasync", files.paths[file_index].clone(), source))?;
    }
    Ok(())
}

/// Writes consecutive block images starting at `first`, split at file boundaries.
fn write_blocks(files: &Files, first: BlockNo, images: &[u8]) -> Result<()> {
    let mut done = 0usize;
    for run in files.layout.runs(first, (images.len() / BLOCK_BYTES) as u64) {
        let len = run.count as usize * BLOCK_BYTES;
        let file = &files.handles[run.file_index];
        failpoint("repair.write")
            .and_then(|()| file.write_all_at(&[&images[done..done + len]], run.offset))
            .map_err(|source| Error::io("write", files.paths[run.file_index].clone(), source))?;
        done += len;
    }
    Ok(())
}

/// The block the log continues in at `end`: its valid prefix (in clear: the
/// ring holds an encrypted log's blocks in clear until the writer seals
/// them), with `first_group` pointing at `end` if no earlier group starts in
/// it (INV-9 for the first new group); an empty block if nothing valid
/// precedes `end` in it.
fn continuation_block(blocks: &mut BlockReader, end: Lsn) -> Result<Vec<u8>> {
    let mut image = vec![0u8; BLOCK_BYTES];
    let used = end.offset_in_block();
    let first_group = match blocks.state(end.block())? {
        BlockState::Valid(header) if used > BLOCK_HEADER_BYTES => {
            match blocks.opened(end.block())? {
                Ok(opened) => image[..used].copy_from_slice(&opened[..used]),
                Err(reason) => return Err(blocks.corruption(end, reason)),
            }
            header.first_group
        }
        _ => 0,
    };
    if first_group == 0 || first_group > used {
        crate::buffer::set_first_group_in(&mut image, used as u16);
    }
    Ok(image)
}
