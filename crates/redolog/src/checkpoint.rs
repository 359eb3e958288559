//! Checkpoints: the caller's promise that everything before an LSN is persistent
//! elsewhere, stored in two alternating slots (docs/DESIGN.md §1.8, INV-7, INV-15).

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, IoFailure, Result};
use crate::failpoint::failpoint;
use crate::format::{CheckpointSlot, KeyTable, CHECKPOINT_SLOT_OFFSETS};
use crate::lsn::{BlockNo, Lsn};
use crate::metrics::MetricsRecorder;
use crate::pipeline::{PoisonOnPanic, Port, Stages};
use crate::storage::StorageFile;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The last checkpoint written.
#[derive(Clone, Copy, Debug)]
struct Last {
    number: u64,
    lsn: Lsn,
}

/// The checkpoint coordinator: one checkpoint at a time, first in the lock
/// order (pipeline/mod.rs). It owns the checkpoint slots in file 0 and the
/// file limit the writer may not pass (INV-7).
pub(crate) struct Checkpoints {
    /// Held while a checkpoint is written: the coordinator.
    last: Mutex<Last>,
    /// `last.lsn`, readable without the lock (metrics).
    lsn: AtomicU64,
    /// The first block the writer may not write (INV-7).
    file_limit_block: crossbeam_utils::CachePadded<AtomicU64>,
    /// Blocks in the ring of files: the file limit is a lap past the checkpoint.
    ring_blocks: u64,
    log_id: u128,
    /// An encrypted log's session epoch and key table, which every slot
    /// repeats (INV-29, INV-31); 0 and empty otherwise.
    session: (u32, KeyTable),
    /// File 0, which holds the slots, and its path.
    file: Arc<dyn StorageFile>,
    path: PathBuf,
}

impl Checkpoints {
    /// The coordinator of a log whose last checkpoint is `number` at `lsn`.
    pub(crate) fn new(
        (number, lsn): (u64, Lsn),
        ring_blocks: u64,
        (log_id, session): (u128, (u32, KeyTable)),
        (file, path): (Arc<dyn StorageFile>, PathBuf),
    ) -> Self {
        Checkpoints {
            last: Mutex::new(Last { number, lsn }),
            lsn: AtomicU64::new(lsn.0),
            file_limit_block: crossbeam_utils::CachePadded::new(AtomicU64::new(lsn.block().0 + ring_blocks)),
            ring_blocks,
            log_id,
            session,
            file,
            path,
        }
    }

    /// The last checkpoint's LSN.
    pub(crate) fn lsn(&self) -> Lsn {
        Lsn(self.lsn.load(Ordering::SeqCst))
    }

    /// The first block the writer may not write yet (INV-7).
    pub(crate) fn file_limit(&self) -> BlockNo {
        BlockNo(self.file_limit_block.load(Ordering::SeqCst))
    }

    /// Records a checkpoint at `lsn`. Checkpoints only move forward: an `lsn` at
    /// or before the current one is a no-op. `reserved_end` bounds `lsn`.
    ///
    /// The WAL rule (INV-18): the log is made durable up to `lsn` first, so a
    /// crash can never leave a checkpoint pointing past the synced log. One
    /// sync covers it; a checkpoint at or below the durable LSN costs none.
    pub(crate) fn checkpoint<W, P: Port<Writer = W>>(
        &self,
        lsn: Lsn,
        reserved_end: Lsn,
        (stages, port): (&Stages<W>, &P),
        metrics: &MetricsRecorder,
    ) -> Result<()> {
        if lsn > reserved_end {
            return Err(Error::LsnOutOfRange { lsn, end: reserved_end });
        }
        if !lsn.is_data_position() {
            return Err(Error::InvalidLsn { lsn, reason: "it points into a block header or trailer" });
        }
        stages.check()?;
        if lsn <= self.lsn() {
            return Ok(());
        }
        self.make_durable(lsn, (stages, port), metrics)?;
        let mut last = self.last.lock();
        if lsn <= last.lsn {
            return Ok(());
        }
        self.write(&mut last, lsn, 0, stages, metrics)
    }

    /// The WAL rule (INV-18): returns once the log is durable up to `lsn`. If
    /// the writer cannot reach `lsn` because the log is full (`lsn` lies past
    /// the file limit), checkpoints at what is durable first, which frees the
    /// space, and goes on: waiting for `lsn` alone would wait for a checkpoint
    /// only this thread would write. Waits outside the coordinator's mutex.
    fn make_durable<W, P: Port<Writer = W>>(
        &self,
        lsn: Lsn,
        (stages, port): (&Stages<W>, &P),
        metrics: &MetricsRecorder,
    ) -> Result<()> {
        loop {
            let synced = stages.synced();
            if lsn <= synced {
                return Ok(());
            }
            let reachable = self.file_limit().data_start();
            if lsn <= reachable {
                return stages.wait_synced(port, lsn);
            }
            if synced > self.lsn() {
                let mut last = self.last.lock();
                if synced > last.lsn {
                    self.write(&mut last, synced, 0, stages, metrics)?;
                }
            } else {
                // Nothing durable past the last checkpoint: sync what the
                // writer can reach, then checkpoint there.
                stages.wait_synced(port, reachable)?;
            }
        }
    }

    /// Rewrites the last checkpoint with `flags` (the clean-shutdown mark).
    pub(crate) fn rewrite_last<W>(&self, flags: u32, stages: &Stages<W>, metrics: &MetricsRecorder) -> Result<()> {
        let mut last = self.last.lock();
        let lsn = last.lsn;
        self.write(&mut last, lsn, flags, stages, metrics)
    }

    /// Writes checkpoint `last.number + 1` into its slot and syncs it; then lets
    /// the writer use the space before `lsn`. The caller holds the coordinator.
    fn write<W>(
        &self,
        last: &mut Last,
        lsn: Lsn,
        flags: u32,
        stages: &Stages<W>,
        metrics: &MetricsRecorder,
    ) -> Result<()> {
        // INV-18, where the checkpoint meets the sync stage.
        assert!(lsn <= stages.synced(), "INV-18: checkpoint {lsn} past the durable log {}", stages.synced());
        let number = last.number + 1;
        let slot = CheckpointSlot {
            log_id: self.log_id,
            number,
            lsn: lsn.0,
            durable_lsn: stages.synced().0,
            flags,
            epoch: self.session.0,
            keys: self.session.1,
        };
        let offset = CHECKPOINT_SLOT_OFFSETS[CheckpointSlot::slot_index(number)];
        let failure = |op, source| IoFailure { op, path: self.path.clone(), source };
        // A panic between the write and its sync leaves the slot's state unknown.
        let _guard = PoisonOnPanic { stages, op: "checkpoint" };
        // INV-15: this slot held checkpoint `number - 2`; the other slot keeps
        // `number - 1` intact, so a torn write here loses only this checkpoint.
        failpoint("checkpoint.write")
            .and_then(|()| self.file.write_all_at(&[&slot.encode()], offset))
            .map_err(|source| stages.poison(failure("write", source)))?;
        // Until this returns, a crash recovers from checkpoint `number - 1`, whose
        // log is intact because the writer never passed its limit (INV-7).
        failpoint("checkpoint.sync")
            .and_then(|()| self.file.sync_data())
            .map_err(|source| stages.poison(failure("fdatasync", source)))?;
        *last = Last { number, lsn };
        self.lsn.store(lsn.0, Ordering::SeqCst);
        // SeqCst: the writer re-checks the limit in its file-space predicate.
        self.file_limit_block.store(lsn.block().0 + self.ring_blocks, Ordering::SeqCst);
        stages.space_freed();
        metrics.checkpoints.add(1);
        Ok(())
    }
}
