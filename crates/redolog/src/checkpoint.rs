//! Checkpoints: the caller's promise that everything before an LSN is persistent
//! elsewhere, stored in two alternating slots ([DESIGN §1.8](crate::docs::design#18-checkpoints-and-file-space), INV-7, INV-15),
//! and the consumers the slots keep with it (§1.16, INV-32).

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, IoFailure, Result};
use crate::failpoint::failpoint;
use crate::format::{
    consumer_name_problem, CheckpointSlot, ConsumerTable, Geometry, KeyTable, CHECKPOINT_SLOT_OFFSETS, CONSUMERS_MAX,
};
use crate::lsn::{BlockNo, Lsn};
use crate::metrics::MetricsRecorder;
use crate::owner::Owner;
use crate::pipeline::{PoisonOnPanic, Port, Stages};
use crate::storage::StorageFile;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The last checkpoint slot written, and who holds a consumer's handle.
#[derive(Debug)]
struct Last {
    number: u64,
    lsn: Lsn,
    /// The consumers the last slot records (INV-32).
    consumers: ConsumerTable,
    /// Consumers with a live handle, one per name, each with the token its
    /// handle holds: a handle from before a drop and re-creation of its name
    /// no longer matches.
    attached: Vec<(String, u64)>,
    /// The next handle's token.
    next_token: u64,
    /// The clean-shutdown slot was written: nothing may write another.
    closed: bool,
    /// Blocks in the ring of files: the file limit is a lap past the floor.
    /// A resize lowers it before a shrink and sets the new files' at its
    /// switch ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    ring_blocks: u64,
    /// File 0, which holds the slots, and its path.
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    /// The file limits the checkpoints in flight set out to reach: each
    /// waits for a sync no further than the limit it read (INV-42), so a
    /// shrink never lowers the limit below one of them.
    reach: Vec<u64>,
}

impl Last {
    /// Records a handle of `name`; returns its token.
    fn attach(&mut self, name: &str) -> u64 {
        self.next_token += 1;
        self.attached.push((name.to_owned(), self.next_token));
        self.next_token
    }

    /// The oldest position the log holds: the checkpoint or a consumer's.
    fn floor(&self) -> Lsn {
        self.consumers.floor().map_or(self.lsn, |held| self.lsn.min(Lsn(held)))
    }

    /// The file limit (INV-7): a lap past the floor, and never below the
    /// reach of a checkpoint in flight (INV-42).
    fn limit(&self) -> u64 {
        let lap = self.floor().block().0 + self.ring_blocks;
        self.reach.iter().copied().fold(lap, u64::max)
    }
}

/// A checkpoint in flight's hold on the file limit it waits to reach
/// (INV-42), given back when dropped. Giving it back never lowers the limit
/// (only a holder of the I/O gate may, [DESIGN §1.18](crate::docs::design#118-online-resize)): a shrink
/// waiting for it is woken, and settles the limit itself.
struct Reach<'a, W> {
    checkpoints: &'a Checkpoints,
    stages: &'a Stages<W>,
    limit: u64,
}

impl<W> Drop for Reach<'_, W> {
    fn drop(&mut self) {
        let mut last = self.checkpoints.last.lock();
        if let Some(index) = last.reach.iter().position(|limit| *limit == self.limit) {
            last.reach.swap_remove(index);
        }
        drop(last);
        self.checkpoints.changed(self.stages);
    }
}

/// The checkpoint coordinator: one checkpoint at a time, first in the lock
/// order (pipeline/mod.rs). It owns the checkpoint slots in file 0 and the
/// file limit the writer may not pass (INV-7).
pub(crate) struct Checkpoints {
    /// Held while a checkpoint is written: the coordinator.
    last: Mutex<Last>,
    /// `last.lsn`, readable without the lock (metrics).
    lsn: AtomicU64,
    /// `last.floor()`, readable without the lock: the oldest LSN the writer
    /// keeps (the live reader's `Reused { oldest }`).
    floor: AtomicU64,
    /// The first block the writer may not write (INV-7).
    file_limit_block: crossbeam_utils::CachePadded<AtomicU64>,
    log_id: u128,
    /// An encrypted log's session epoch and key table, which every slot
    /// repeats (INV-29, INV-31); 0 and empty otherwise.
    session: (u32, KeyTable),
    /// How many data bytes the log's blocks hold: which LSNs are positions.
    geometry: Geometry,
    /// Counts the changes a shrink waits for (a slot written, a reach given
    /// back): its wait's predicate ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    changes: AtomicU64,
    /// The write gate (INV-43): no slot once the directory's lock is released.
    owner: Arc<Owner>,
}

/// The checkpoint coordinator held for a resize's switch ([DESIGN](crate::docs::design)
/// §1.18): no checkpoint or consumer change runs meanwhile.
pub(crate) struct SwitchSlots<'a> {
    checkpoints: &'a Checkpoints,
    last: parking_lot::MutexGuard<'a, Last>,
}

impl Checkpoints {
    /// The coordinator of a log whose last checkpoint is `number` at `lsn`
    /// and keeps `consumers`.
    pub(crate) fn new(
        (number, lsn, consumers): (u64, Lsn, ConsumerTable),
        (ring_blocks, geometry): (u64, Geometry),
        (log_id, session): (u128, (u32, KeyTable)),
        (file, path): (Arc<dyn StorageFile>, PathBuf),
        owner: Arc<Owner>,
    ) -> Self {
        let last = Last {
            number,
            lsn,
            consumers,
            attached: Vec::new(),
            next_token: 0,
            closed: false,
            ring_blocks,
            file,
            path,
            reach: Vec::new(),
        };
        let floor = last.floor();
        Checkpoints {
            last: Mutex::new(last),
            lsn: AtomicU64::new(lsn.0),
            floor: AtomicU64::new(floor.0),
            file_limit_block: crossbeam_utils::CachePadded::new(AtomicU64::new(floor.block().0 + ring_blocks)),
            log_id,
            session,
            geometry,
            changes: AtomicU64::new(0),
            owner,
        }
    }

    /// Counts the changes a shrink waits for (a slot, a reach given back).
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// A change a shrink may wait for: counted, and the file-space waiters
    /// woken.
    fn changed<W>(&self, stages: &Stages<W>) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        stages.space_freed();
    }

    /// The log's id ([FORMAT §2](crate::docs::format#2-file-header-offset-0-one-512-byte-block)).
    pub(crate) fn log_id(&self) -> u128 {
        self.log_id
    }

    /// The last checkpoint's LSN.
    pub(crate) fn lsn(&self) -> Lsn {
        Lsn(self.lsn.load(Ordering::SeqCst))
    }

    /// The oldest LSN the log keeps: the last checkpoint or, if older, a
    /// consumer's position (INV-32).
    pub(crate) fn floor(&self) -> Lsn {
        Lsn(self.floor.load(Ordering::SeqCst))
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
        if !lsn.is_data_position(self.geometry) {
            return Err(Error::InvalidLsn { lsn, reason: "it points into a block header or trailer" });
        }
        stages.check()?;
        // A closed log syncs nothing more (INV-43): its checkpoints are
        // `Closed`, never a wait.
        if self.owner.is_released() || self.last.lock().closed {
            return Err(Error::Closed);
        }
        if lsn <= self.lsn() {
            return Ok(());
        }
        self.make_durable(lsn, (stages, port), metrics)?;
        let mut last = self.last.lock();
        if lsn <= last.lsn {
            return Ok(());
        }
        let consumers = last.consumers.clone();
        self.write(&mut last, (lsn, 0, consumers), stages, metrics)
    }

    /// The WAL rule (INV-18): returns once the log is durable up to `lsn`. If
    /// the writer cannot reach `lsn` because the log is full (`lsn` lies past
    /// the file limit), checkpoints at what is durable first, which frees the
    /// space, and goes on: waiting for `lsn` alone would wait for a checkpoint
    /// only this thread would write. Waits outside the coordinator's mutex,
    /// holding the limit it waits to reach (INV-42): a shrink that lowered it
    /// meanwhile would leave the wait waiting for this very checkpoint.
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
            let mut last = self.last.lock();
            // Under the coordinator: a shrink lowers the limit under it too.
            let limit = self.file_limit();
            let reachable = limit.data_start();
            if lsn <= reachable || (synced <= last.lsn && synced < reachable) {
                // `lsn`, or, with nothing durable past the last checkpoint,
                // what the writer can reach, to checkpoint there next.
                last.reach.push(limit.0);
                drop(last);
                let _reach = Reach { checkpoints: self, stages, limit: limit.0 };
                stages.wait_synced(port, lsn.min(reachable))?;
            } else if synced > last.lsn {
                let consumers = last.consumers.clone();
                self.write(&mut last, (synced, 0, consumers), stages, metrics)?;
            } else {
                // A checkpoint at what is durable freed nothing: a consumer
                // holds the space (§1.16). Wait for it, or for close.
                drop(last);
                stages.wait_space_freed(limit, || self.file_limit() > limit);
                stages.check()?;
                if stages.is_shutdown() && self.file_limit() <= limit {
                    return Err(Error::Closed);
                }
            }
        }
    }

    /// Rewrites the last checkpoint with `flags` (the clean-shutdown mark).
    pub(crate) fn rewrite_last<W>(&self, flags: u32, stages: &Stages<W>, metrics: &MetricsRecorder) -> Result<()> {
        let mut last = self.last.lock();
        let (lsn, consumers) = (last.lsn, last.consumers.clone());
        self.write(&mut last, (lsn, flags, consumers), stages, metrics)?;
        last.closed |= flags & crate::format::CHECKPOINT_CLEAN_SHUTDOWN != 0;
        Ok(())
    }

    /// The consumers the log keeps, with their positions.
    pub(crate) fn consumers(&self) -> Vec<(String, Lsn)> {
        self.last.lock().consumers.entries().iter().map(|(name, lsn)| (name.clone(), Lsn(*lsn))).collect()
    }

    /// Adds consumer `name` at the last checkpoint and attaches to it;
    /// returns its position (§1.16: never below the floor).
    pub(crate) fn create_consumer<W>(
        &self,
        name: &str,
        stages: &Stages<W>,
        metrics: &MetricsRecorder,
    ) -> Result<(Lsn, u64)> {
        if let Some(reason) = consumer_name_problem(name) {
            return Err(Error::InvalidConsumerName { name: name.to_owned(), reason });
        }
        let mut last = self.last.lock();
        Self::check_open(&last, stages)?;
        if last.consumers.get(name).is_some() {
            return Err(Error::ConsumerExists { name: name.to_owned() });
        }
        let mut consumers = last.consumers.clone();
        if !consumers.insert(name, last.lsn.0) {
            return Err(Error::TooManyConsumers { limit: CONSUMERS_MAX });
        }
        let lsn = last.lsn;
        self.write(&mut last, (lsn, 0, consumers), stages, metrics)?;
        Ok((lsn, last.attach(name)))
    }

    /// Attaches to consumer `name`; returns its position.
    pub(crate) fn attach_consumer(&self, name: &str) -> Result<(Lsn, u64)> {
        let mut last = self.last.lock();
        let Some(lsn) = last.consumers.get(name) else {
            return Err(Error::UnknownConsumer { name: name.to_owned() });
        };
        if last.attached.iter().any(|(attached, _)| attached == name) {
            return Err(Error::ConsumerBusy { name: name.to_owned() });
        }
        Ok((Lsn(lsn), last.attach(name)))
    }

    /// The handle of consumer `name` holding `token` was dropped.
    pub(crate) fn detach_consumer(&self, name: &str, token: u64) {
        self.last.lock().attached.retain(|attached| *attached != (name.to_owned(), token));
    }

    /// Moves consumer `name` to `lsn`, which must be durable; a position at
    /// or before its own is a no-op. Returns its position.
    pub(crate) fn advance_consumer<W>(
        &self,
        (name, token): (&str, u64),
        lsn: Lsn,
        stages: &Stages<W>,
        metrics: &MetricsRecorder,
    ) -> Result<Lsn> {
        if !lsn.is_data_position(self.geometry) {
            return Err(Error::InvalidLsn { lsn, reason: "it points into a block header or trailer" });
        }
        let synced = stages.synced();
        if lsn > synced {
            return Err(Error::LsnOutOfRange { lsn, end: synced });
        }
        let mut last = self.last.lock();
        Self::check_open(&last, stages)?;
        let held = last.attached.iter().any(|attached| *attached == (name.to_owned(), token));
        let Some(at) = last.consumers.get(name).filter(|_| held) else {
            return Err(Error::UnknownConsumer { name: name.to_owned() });
        };
        if lsn.0 <= at {
            return Ok(Lsn(at));
        }
        let mut consumers = last.consumers.clone();
        consumers.set(name, lsn.0);
        let checkpoint = last.lsn;
        self.write(&mut last, (checkpoint, 0, consumers), stages, metrics)?;
        Ok(lsn)
    }

    /// Removes consumer `name`, attached or not: its space is the writer's
    /// again at once.
    pub(crate) fn drop_consumer<W>(&self, name: &str, stages: &Stages<W>, metrics: &MetricsRecorder) -> Result<()> {
        let mut last = self.last.lock();
        Self::check_open(&last, stages)?;
        let mut consumers = last.consumers.clone();
        if !consumers.remove(name) {
            return Err(Error::UnknownConsumer { name: name.to_owned() });
        }
        let checkpoint = last.lsn;
        self.write(&mut last, (checkpoint, 0, consumers), stages, metrics)?;
        last.attached.retain(|(attached, _)| attached != name);
        Ok(())
    }

    /// Whether the writer's limit is a consumer's, not the checkpoint's: its
    /// file-space waits count as consumer waits (`log_on_consumer_*`).
    pub(crate) fn held_by_consumer(&self) -> bool {
        self.floor() < self.lsn()
    }

    /// Consumer changes write slots: not on a poisoned log, nor once the
    /// clean-shutdown slot is written (under the coordinator, so none can
    /// follow it and clear the mark).
    fn check_open<W>(last: &Last, stages: &Stages<W>) -> Result<()> {
        stages.check()?;
        if last.closed || stages.is_shutdown() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Writes checkpoint `last.number + 1` at `lsn` with `flags` and
    /// `consumers` into its slot and syncs it; then lets the writer use the
    /// space before the new floor. The caller holds the coordinator.
    fn write<W>(
        &self,
        last: &mut Last,
        (lsn, flags, consumers): (Lsn, u32, ConsumerTable),
        stages: &Stages<W>,
        metrics: &MetricsRecorder,
    ) -> Result<()> {
        // Nothing follows the clean-shutdown slot (it would clear the mark).
        if last.closed {
            return Err(Error::Closed);
        }
        let number = last.number + 1;
        let slot = self.slot(number, (lsn, flags, consumers), 0, stages);
        // INV-15: this slot held checkpoint `number - 2`; the other slot keeps
        // `number - 1` intact, so a torn write here loses only this checkpoint.
        // Until the sync returns, a crash recovers from checkpoint
        // `number - 1`, whose log is intact because the writer never passed
        // its limit (INV-7).
        put_slot((&last.file, &last.path), &slot, (stages, &self.owner), ["checkpoint.write", "checkpoint.sync"])?;
        let floor_before = last.floor();
        // A slot written for a consumer is not a checkpoint in the metrics.
        let checkpointed = slot.consumers == last.consumers;
        (last.number, last.lsn, last.consumers) = (number, lsn, slot.consumers);
        let floor = last.floor();
        // §1.16: the floor never moves back, so the writer's limit only grows.
        assert!(floor >= floor_before, "INV-32: the floor moved back from {floor_before} to {floor}");
        self.lsn.store(lsn.0, Ordering::SeqCst);
        self.floor.store(floor.0, Ordering::SeqCst);
        // SeqCst: the writer re-checks the limit in its file-space predicate.
        // Only raised here: a lower limit waits for the I/O gate (a shrink).
        self.file_limit_block.fetch_max(last.limit(), Ordering::SeqCst);
        self.changed(stages);
        if checkpointed {
            metrics.checkpoints.add(1);
        }
        Ok(())
    }

    /// Slot `number`: the log's id and session, the durable LSN now.
    fn slot<W>(
        &self,
        number: u64,
        (lsn, flags, consumers): (Lsn, u32, ConsumerTable),
        resize_file_bytes: u64,
        stages: &Stages<W>,
    ) -> CheckpointSlot {
        // INV-18, where the checkpoint meets the sync stage.
        assert!(lsn <= stages.synced(), "INV-18: checkpoint {lsn} past the durable log {}", stages.synced());
        CheckpointSlot {
            log_id: self.log_id,
            number,
            lsn: lsn.0,
            durable_lsn: stages.synced().0,
            flags,
            epoch: self.session.0,
            keys: self.session.1,
            consumers,
            resize_file_bytes,
        }
    }

    /// A shrinking resize's first state ([DESIGN §1.18](crate::docs::design#118-online-resize)): the file
    /// limit becomes a lap of `ring_blocks` past the floor, if that is
    /// smaller, but never below what a checkpoint in flight waits to reach
    /// (INV-42). Called again as the shrink waits, so the limit settles on
    /// the new lap once those checkpoints are done. The caller holds the I/O
    /// gate exclusively, so no write pass is between reading the limit and
    /// writing.
    pub(crate) fn lower_ring(&self, ring_blocks: u64) {
        let mut last = self.last.lock();
        last.ring_blocks = last.ring_blocks.min(ring_blocks);
        self.file_limit_block.store(last.limit(), Ordering::SeqCst);
    }

    /// Whether the file limit is a lap of the ring past the floor, and no
    /// checkpoint in flight waits to reach further (INV-42): a shrink may
    /// switch to files of that ring once the written log fits it too.
    pub(crate) fn limit_is_the_lap(&self) -> bool {
        let last = self.last.lock();
        self.file_limit().0 == last.floor().block().0 + last.ring_blocks && last.limit() == self.file_limit().0
    }

    /// The coordinator, held for a resize's switch (§1.18).
    pub(crate) fn hold_for_switch<W>(&self, stages: &Stages<W>) -> Result<SwitchSlots<'_>> {
        let last = self.last.lock();
        Self::check_open(&last, stages)?;
        Ok(SwitchSlots { checkpoints: self, last })
    }
}

impl SwitchSlots<'_> {
    /// The switch (§1.18, INV-34): writes slot `n + 2` (the checkpoint and
    /// consumers as they are) into the new files' `redo.0000` and syncs it;
    /// the caller has synced the new files' blocks. Then the commit point:
    /// slot `n + 1`, naming `file_bytes`, into the old `redo.0000`, synced.
    /// Slot `n + 2` has the larger number, so the new file's next
    /// checkpoint (`n + 3`) goes to its other slot (INV-15). Then later
    /// slots go to the new file, and the file limit is a lap of the new
    /// ring past the floor.
    pub(crate) fn switch<W>(
        mut self,
        new: (&Arc<dyn StorageFile>, &PathBuf),
        (file_bytes, ring_blocks): (u64, u64),
        stages: &Stages<W>,
    ) -> Result<()> {
        let checkpoints = self.checkpoints;
        let last = &mut *self.last;
        let state = (last.lsn, 0, last.consumers.clone());
        let fresh = checkpoints.slot(last.number + 2, state.clone(), 0, stages);
        let gate = (stages, &*checkpoints.owner);
        put_slot(new, &fresh, gate, ["resize.slot_write", "resize.slot_sync"])?;
        let commit = checkpoints.slot(last.number + 1, state, file_bytes, stages);
        put_slot((&last.file, &last.path), &commit, gate, ["resize.commit_write", "resize.commit_sync"])?;
        last.number += 2;
        (last.file, last.path) = (new.0.clone(), new.1.clone());
        last.ring_blocks = ring_blocks;
        // A shrink switches only once no checkpoint in flight reaches past
        // the new lap (INV-42, `limit_is_the_lap`); a grow's reach lies
        // within the old lap, inside the new one.
        debug_assert!(last.limit() == last.floor().block().0 + ring_blocks, "INV-42: a reach past the new ring");
        checkpoints.file_limit_block.store(last.limit(), Ordering::SeqCst);
        checkpoints.changed(stages);
        Ok(())
    }
}

/// Writes `slot` into its place in `file` and syncs it, holding the write
/// gate (`Closed` once the directory's lock is released, INV-43); a failure
/// poisons the log (INV-6). `[write, sync]` name the failpoints.
fn put_slot<W>(
    (file, path): (&Arc<dyn StorageFile>, &PathBuf),
    slot: &CheckpointSlot,
    (stages, owner): (&Stages<W>, &Owner),
    [write_fp, sync_fp]: [&'static str; 2],
) -> Result<()> {
    let _owned = owner.enter()?;
    // INV-6: nothing is written after a failure — a slot written on top of
    // a failed one (a close's clean-shutdown mark after a checkpoint's
    // fdatasync failed) would claim what the failure left unknown.
    stages.check()?;
    let offset = CHECKPOINT_SLOT_OFFSETS[CheckpointSlot::slot_index(slot.number)];
    let failure = |op, source| IoFailure { op, path: path.clone(), source };
    // A panic between the write and its sync leaves the slot's state unknown.
    let _guard = PoisonOnPanic { stages, op: "checkpoint" };
    failpoint(write_fp)
        .and_then(|()| file.write_all_at(&[&slot.encode()], offset))
        .map_err(|source| stages.poison(failure("write", source)))?;
    failpoint(sync_fp).and_then(|()| file.sync_data()).map_err(|source| stages.poison(failure("fdatasync", source)))
}
