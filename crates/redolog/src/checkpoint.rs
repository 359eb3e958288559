//! Checkpoints: the caller's promise that everything before an LSN is persistent
//! elsewhere, stored in two alternating slots (docs/DESIGN.md §1.8, INV-7, INV-15).

use crate::core::{PoisonOnPanic, Shared};
use crate::error::{Error, Result};
use crate::failpoint::failpoint;
use crate::format::{CheckpointSlot, CHECKPOINT_SLOT_OFFSETS};
use crate::lsn::Lsn;
use crate::sync::atomic::Ordering;
use crate::writer::IoFailure;

/// The coordinator's state: the last checkpoint written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckpointState {
    pub(crate) number: u64,
    pub(crate) lsn: Lsn,
}

impl Shared {
    /// Records a checkpoint at `lsn`. Checkpoints only move forward: an `lsn` at or
    /// before the current one is a no-op.
    pub(crate) fn checkpoint(&self, lsn: Lsn) -> Result<()> {
        let end = self.reserved_end();
        if lsn > end {
            return Err(Error::LsnOutOfRange { lsn, end });
        }
        if !lsn.is_data_position() {
            return Err(Error::InvalidLsn { lsn, reason: "it points into a block header or trailer" });
        }
        self.check_poison()?;
        let mut state = self.checkpoint_state.lock();
        if lsn <= state.lsn {
            return Ok(());
        }
        self.write_checkpoint(&mut state, lsn, 0)
    }

    /// Writes checkpoint `state.number + 1` into its slot and syncs it; then lets the
    /// writer use the space before `lsn`. Takes the coordinator's guard: one
    /// checkpoint at a time.
    pub(crate) fn write_checkpoint(&self, state: &mut CheckpointState, lsn: Lsn, flags: u32) -> Result<()> {
        let number = state.number + 1;
        let slot = CheckpointSlot { log_id: self.log_id, number, lsn: lsn.0, durable_lsn: self.synced().0, flags };
        let offset = CHECKPOINT_SLOT_OFFSETS[CheckpointSlot::slot_index(number)];
        let (file, path) = (&self.files.handles[0], &self.files.paths[0]);
        let failure = |op, source| IoFailure { op, path: path.clone(), source };
        // A panic between the write and its sync leaves the slot's state unknown.
        let _guard = PoisonOnPanic { shared: self, op: "checkpoint" };
        // INV-15: this slot held checkpoint `number - 2`; the other slot keeps
        // `number - 1` intact, so a torn write here loses only this checkpoint.
        failpoint("checkpoint.write")
            .and_then(|()| file.write_all_at(&[&slot.encode()], offset))
            .map_err(|source| self.poison(failure("write", source)))?;
        // Until this returns, a crash recovers from checkpoint `number - 1`, whose
        // log is intact because the writer never passed its limit (INV-7).
        failpoint("checkpoint.sync")
            .and_then(|()| file.sync_data())
            .map_err(|source| self.poison(failure("fdatasync", source)))?;
        state.number = number;
        state.lsn = lsn;
        self.checkpoint_lsn.store(lsn.0, Ordering::SeqCst);
        // SeqCst: the writer re-checks the limit in its file-space predicate.
        self.file_limit_block.store(lsn.block().0 + self.layout.ring_blocks, Ordering::SeqCst);
        self.space_events.notify_all();
        self.metrics.checkpoints.add(1);
        Ok(())
    }
}
