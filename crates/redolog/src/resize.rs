//! Online resize: a second set of files, the live log copied into it while
//! the writer goes on, one synced slot write to switch ([DESIGN §1.18](crate::docs::design#118-online-resize),
//! INV-34, INV-35).

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::core::Core;
use crate::error::{Error, IoFailure, Result};
use crate::failpoint::failpoint;
use crate::format::{read_block_header, BlockState, BLOCK_BYTES, FILE_COUNT};
use crate::layout::{file_path, resize_file_name, Layout};
use crate::lsn::BlockNo;
use crate::recovery::{files_of, finish_resize_renames, read_header, write_new_file};
use crate::storage::Storage;
use crate::writer::{last_data_block, Files};

/// Blocks copied per read and write (128 KiB).
const COPY_BLOCKS: u64 = 256;

/// Copy passes that chase the writer before the switch copies the rest
/// with the writer held: a pass ends at the frontier it started from, so
/// each one copies what the writer wrote during the last.
const CHASE_PASSES_MAX: usize = 8;

/// A chase pass this short goes straight to the switch.
const CHASE_DONE_BLOCKS: u64 = 2 * COPY_BLOCKS;

/// Resizes the log of `core` to `capacity_bytes` (rounded down to four
/// files of a multiple of 4 KiB, as at creation). Returns once the new
/// files are the log and carry their final names.
pub(crate) fn resize(core: &Core, storage: &Arc<dyn Storage>, capacity_bytes: u64) -> Result<()> {
    let config = Config { capacity_bytes, ..core.config.clone() };
    config.validate()?;
    let dir = core.files().dir();
    let Some(_busy) = core.resizing.try_lock() else {
        return Err(Error::ResizeBusy { dir });
    };
    core.stages.check()?;
    // INV-43: the resize writes files in the directory; close waits for it
    // (its waits end at shutdown) before it releases the lock.
    let _owned = core.owner.enter()?;
    if core.stages.is_shutdown() {
        return Err(Error::Closed);
    }
    let old = core.files();
    let layout = Layout::new(config.file_bytes());
    if layout == old.layout {
        return Ok(());
    }
    let header = read_header(&old.handles[0], &old.paths[0], 0)?;
    let unsynced_bytes_max =
        header.unsynced_bytes_max.min(Config::unsynced_bytes_max(layout.ring_blocks * BLOCK_BYTES as u64));
    if layout.ring_blocks < old.layout.ring_blocks {
        bound(core, &layout, unsynced_bytes_max)?;
    }
    let result =
        build_and_switch(core, storage, (&old, &layout), crate::format::FileHeader { unsynced_bytes_max, ..header });
    if let Err(error) = result {
        // Before the commit the old files are the log: the new ones go (a
        // failure to remove them leaves them to the next open, INV-34).
        // A poisoned log may have committed: the next open decides.
        if !core.stages.is_poisoned() {
            for index in 0..FILE_COUNT as usize {
                let _ = failpoint("resize.settle_remove")
                    .and_then(|()| storage.remove_file(&dir.join(resize_file_name(index))));
            }
        }
        return Err(error);
    }
    core.appender.set_capacity(layout.group_bytes_max(old.seal.geometry()));
    // State 5: the final names. A failure leaves the log running on files
    // whose names a later resize would write over: poison it (the next open
    // finishes the renames, INV-34).
    let renamed = finish_resize_renames(&dir, storage, [true; FILE_COUNT as usize]).map_err(|error| match error {
        Error::Io { op, path, source } => core.stages.poison(IoFailure { op, path, source }),
        other => other,
    });
    // Closing the old files' handles frees their blocks (on tmpfs, their
    // pages): at the lowest priority too. A reader still on them keeps them
    // until it switches.
    std::thread::scope(|scope| {
        scope.spawn(move || {
            crate::log_threads::renice_this_thread(19).ok();
            drop(old);
        });
    });
    renamed
}

/// States 2 to 4 (§1.18): the new files, the copy, the switch.
fn build_and_switch(
    core: &Core,
    storage: &Arc<dyn Storage>,
    (old, layout): (&Arc<Files>, &Layout),
    header: crate::format::FileHeader,
) -> Result<()> {
    // States 2 and 3 on a thread at the lowest priority: the zero-filling
    // and the copy use the CPU the committers and log threads leave. The
    // switch runs here: a thread holding the gate must not wait for CPU.
    let (new, next) = std::thread::scope(|scope| {
        let prepare = scope.spawn(|| {
            crate::log_threads::renice_this_thread(19).ok();
            prepare(core, storage, (old, layout), header)
        });
        prepare.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })?;
    switch(core, (old, &new), next, &old.dir())
}

/// States 2 and 3: the new files, and the copy chasing the writer. Returns
/// the files and the first block not copied yet.
fn prepare(
    core: &Core,
    storage: &Arc<dyn Storage>,
    (old, layout): (&Arc<Files>, &Layout),
    header: crate::format::FileHeader,
) -> Result<(Arc<Files>, BlockNo)> {
    let dir = old.dir();
    // State 2: the new files hold the log from the floor's block on.
    let floor = core.checkpoints.floor();
    let new_header = crate::format::FileHeader { file_bytes: layout.file_bytes, oldest_lsn: floor.0, ..header };
    let mode = storage.permissions(&old.paths[0]).map_err(|source| Error::io("stat", &old.paths[0], source))?;
    let mut handles = Vec::new();
    for index in 0..FILE_COUNT as usize {
        let path = dir.join(resize_file_name(index));
        let names = ["resize.open", "resize.write", "resize.sync"];
        handles.push(write_new_file(storage, &path, (&new_header, index, None), mode, names)?);
    }
    failpoint("resize.sync_dir")
        .and_then(|()| storage.sync_dir(&dir))
        .map_err(|source| Error::io("fsync directory", &dir, source))?;
    // The files under their final names: the renames give them those.
    let paths = (0..FILE_COUNT as usize).map(|index| file_path(&dir, index)).collect();
    let mut new = files_of(handles, paths, &new_header);
    new.opener = old.opener.clone();
    let new = Arc::new(new);
    // State 3: copy while the writer writes on.
    let mut next = floor.block();
    for _ in 0..CHASE_PASSES_MAX {
        if core.stages.is_shutdown() {
            return Err(Error::Closed);
        }
        // Blocks below the one holding `written` are final.
        let end = core.stages.written().block();
        copy(old, &new, (next, end), &dir)?;
        let copied = end.0.saturating_sub(next.0);
        next = next.max(end);
        if copied <= CHASE_DONE_BLOCKS {
            break;
        }
    }
    Ok((new, next))
}

/// State 1 (§1.18), for a shrink: lower the limits to the new ring's, under
/// the I/O gate, then wait until the written log fits a lap of the new ring
/// past the floor and the limit is that lap: a checkpoint in flight holds
/// the limit it waits to reach until it is written (INV-42). (A grow would
/// lower nothing: its limits only rise, at the switch.)
fn bound(core: &Core, layout: &Layout, unsynced_bytes_max: u64) -> Result<()> {
    {
        let gate = core.files_exclusive();
        let geometry = gate.seal.geometry();
        core.appender.set_capacity(core.appender.capacity().min(layout.group_bytes_max(geometry)));
        core.stages.lower_unsynced_blocks(unsynced_bytes_max / BLOCK_BYTES as u64);
        core.checkpoints.lower_ring(layout.ring_blocks);
    }
    let stages = &core.stages;
    let fits = || {
        let floor_block = core.checkpoints.floor().block();
        let last = last_data_block(stages.written().max(core.write_intent()));
        last.0 < floor_block.0 + layout.ring_blocks
    };
    loop {
        stages.check()?;
        if fits() && !core.checkpoints.limit_is_the_lap() {
            // The checkpoints that held the limit are done: settle it on the
            // new lap (under the gate; a pass may have written up to the
            // held limit meanwhile, so look again).
            let _gate = core.files_exclusive();
            core.checkpoints.lower_ring(layout.ring_blocks);
        }
        if fits() && core.checkpoints.limit_is_the_lap() {
            return Ok(());
        }
        if stages.is_shutdown() {
            return Err(Error::Closed);
        }
        // Only a slot (a checkpoint, a consumer's advance) moves the floor,
        // and a checkpoint in flight gives its reach back when it ends:
        // each counts a change and wakes this wait.
        let (limit, changes) = (core.checkpoints.file_limit(), core.checkpoints.changes());
        stages.wait_space_freed(limit, || core.checkpoints.changes() != changes || stages.is_shutdown());
    }
}

/// Copies blocks `[first, end)` from `old` to their places in `new`, in
/// increasing order; a block that does not read back as itself (the writer
/// reused it: it lies below the floor) is written as zeros (INV-35).
fn copy(old: &Files, new: &Files, (first, end): (BlockNo, BlockNo), dir: &Path) -> Result<()> {
    let mut buffer = vec![0u8; COPY_BLOCKS as usize * BLOCK_BYTES];
    let mut block = first.0;
    while block < end.0 {
        let Some(run) = old.layout.runs(BlockNo(block), (end.0 - block).min(COPY_BLOCKS)).next() else { break };
        let bytes = &mut buffer[..run.count as usize * BLOCK_BYTES];
        old.handles[run.file_index]
            .read_exact_at(bytes, run.offset)
            .map_err(|source| Error::io("read", &old.paths[run.file_index], source))?;
        for (index, image) in bytes.chunks_exact_mut(BLOCK_BYTES).enumerate() {
            if !matches!(read_block_header(image, old.seal, BlockNo(block + index as u64)), BlockState::Valid(_)) {
                image.fill(0);
            }
        }
        let mut at = 0;
        for target in new.layout.runs(BlockNo(block), run.count) {
            let len = target.count as usize * BLOCK_BYTES;
            let path = dir.join(resize_file_name(target.file_index));
            failpoint("resize.copy")
                .and_then(|()| new.handles[target.file_index].write_all_at(&[&bytes[at..at + len]], target.offset))
                .map_err(|source| Error::io("write", &path, source))?;
            at += len;
        }
        block += run.count;
    }
    Ok(())
}

/// State 4 (§1.18): with the I/O gate held exclusively (no write or sync
/// pass runs) and then the checkpoint coordinator, copies the rest up to
/// `written`, syncs the new files, commits, and switches the core to them.
fn switch(core: &Core, (old, new): (&Files, &Arc<Files>), next: BlockNo, dir: &Path) -> Result<()> {
    let mut gate = core.files_exclusive();
    let slots = core.checkpoints.hold_for_switch(&core.stages)?;
    let written = core.stages.written();
    let end = BlockNo(last_data_block(written).0 + 1);
    copy(old, new, (next, end), dir)?;
    for (index, handle) in new.handles.iter().enumerate() {
        let path = dir.join(resize_file_name(index));
        failpoint("resize.copy_sync")
            .and_then(|()| handle.sync_data())
            .map_err(|source| Error::io("fdatasync", &path, source))?;
    }
    slots.switch((&new.handles[0], &new.paths[0]), (new.layout.file_bytes, new.layout.ring_blocks), &core.stages)?;
    core.switch_files(&mut gate, new.clone());
    Ok(())
}
