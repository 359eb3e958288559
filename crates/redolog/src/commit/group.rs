//! Durable group commit without extra threads (docs/DESIGN.md §1.5).
//!
//! A thread that needs LSN `L` written or synced runs one loop:
//!
//! ```text
//!   synced/written >= L ─────────────────────────────► done (no lock taken)
//!   written < L and the write role is free ──────────► Writer: write all that is
//!        ready, repeat while parked threads' demand is uncovered (bounded), release
//!   written > synced, Synced, the sync role is free ─► Syncer: fdatasync up to
//!        `written`, repeat while demand remains (bounded), release
//!   otherwise ───────────────────────────────────────► register demand, spin, park
//!        on the slot of L until covered, poisoned, or kicked
//! ```
//!
//! Who moves a thread: into a role only itself (`try_take`); out of a park the role
//! holder whose pass covered `L` (it wakes exactly the tokens `<= ` its new value),
//! a releaser that kicks it as successor (INV-11), or the poisoner. The write and
//! sync roles are separate, so the next group is written while the previous one's
//! fdatasync is in flight. A leader releases its role in `Drop`; a leader that
//! panics poisons the log first, so every waiter wakes to an error and nobody
//! retries the operation that panicked.

use std::time::Instant;

use parking_lot::MutexGuard;

use crate::core::Shared;
use crate::error::{Error, Result};
use crate::lsn::{BlockNo, Lsn};
use crate::metrics::WaitCounters;
use crate::sync::atomic::{fence, Ordering};
use crate::wait::{Spin, Waited};
use crate::writer::Writer;

/// Passes a leader makes while other threads' demand stays uncovered, before it
/// hands the role to a parked successor. The leader's own commit is already
/// covered after its first pass, so this bounds the latency it lends to others;
/// continuing beats a hand-off because the leader is already running and the next
/// fdatasync can start at once.
const LEADER_ROUNDS_MAX: u32 = 4;

/// What a sync pass achieved for its caller.
enum SyncPass {
    /// `target` is synced, or the pass ended and the caller re-checks.
    Done,
    /// `target` is not written and the syncer could not write it.
    NeedsWrite,
}

/// Holds the write role; releases it and kicks a successor when dropped.
pub(super) struct WriteLeader<'a> {
    pub(super) shared: &'a Shared,
    pub(super) writer: Option<MutexGuard<'a, Writer>>,
}

impl Drop for WriteLeader<'_> {
    fn drop(&mut self) {
        // Before the release: a successor must see the poison, not redo the write.
        self.shared.poison_if_panicking("write");
        if let Some(writer) = self.writer.take() {
            self.shared.write_role.release(writer);
        }
        self.shared.kick_write_successor();
    }
}

/// Holds the sync role; releases it and kicks a successor when dropped.
pub(super) struct SyncLeader<'a> {
    pub(super) shared: &'a Shared,
    pub(super) role: Option<MutexGuard<'a, ()>>,
}

impl Drop for SyncLeader<'_> {
    fn drop(&mut self) {
        // Before the release: a successor must not retry the fdatasync (INV-6).
        self.shared.poison_if_panicking("fdatasync");
        if let Some(role) = self.role.take() {
            self.shared.sync_role.release(role);
        }
        self.shared.kick_sync_successor();
    }
}

impl Shared {
    /// Waits until `target` is written; may become the writer. `site` counts the
    /// wait (log_on_write or log_on_buffer_space).
    pub(crate) fn wait_written_for(&self, target: Lsn, site: &WaitCounters) -> Result<()> {
        let mut waited = Waited::default();
        let mut had_to_wait = false;
        let result = loop {
            if let Err(error) = self.check_poison() {
                break Err(error);
            }
            if self.written() >= target {
                break Ok(());
            }
            if let Some(writer) = self.users_lead().then(|| self.write_role.try_take()).flatten() {
                if let Err(error) = self.lead_writes(WriteLeader { shared: self, writer: Some(writer) }, target) {
                    break Err(error);
                }
                continue;
            }
            had_to_wait = true;
            // SeqCst: the releaser reads demand after clearing the role (INV-11).
            self.write_demand.fetch_max(target.0, Ordering::SeqCst);
            waited += self.write_events.wait(target.0, self.spin_for(&self.write_pass), || {
                self.is_poisoned() || self.written() >= target || (!self.write_role.is_held() && self.users_lead())
            });
        };
        site.record(had_to_wait, waited);
        result
    }

    /// Waits until `target` is synced; may become the syncer (and write first).
    pub(crate) fn wait_synced(&self, target: Lsn) -> Result<()> {
        let mut waited = Waited::default();
        let mut had_to_wait = false;
        let result = loop {
            if let Err(error) = self.check_poison() {
                break Err(error);
            }
            if self.synced() >= target {
                break Ok(());
            }
            if let Some(role) = self.users_lead().then(|| self.sync_role.try_take()).flatten() {
                match self.lead_syncs(SyncLeader { shared: self, role: Some(role) }, target) {
                    Ok(SyncPass::Done) => continue,
                    // Our bytes are not written and we could not write them while
                    // syncing (appenders still copying, the writer busy, no file
                    // space): go through the write role, then sync.
                    Ok(SyncPass::NeedsWrite) => match self.wait_written_for(target, &self.metrics.on_write) {
                        Ok(()) => continue,
                        Err(error) => break Err(error),
                    },
                    Err(error) => break Err(error),
                }
            }
            had_to_wait = true;
            // SeqCst: the releaser reads demand after clearing the role (INV-11).
            self.sync_demand.fetch_max(target.0, Ordering::SeqCst);
            waited += self.sync_events.wait(target.0, self.spin_for(&self.sync_pass), || {
                self.is_poisoned() || self.synced() >= target || (!self.sync_role.is_held() && self.users_lead())
            });
        };
        self.metrics.on_flush.record(had_to_wait, waited);
        result
    }

    /// The write role's loop: write everything ready, at least up to `target`, and
    /// keep going (bounded) while parked threads need more.
    fn lead_writes(&self, mut leader: WriteLeader<'_>, target: Lsn) -> Result<()> {
        let mut rounds = 0;
        loop {
            self.check_poison()?;
            let written = self.written();
            let demand = Lsn(self.write_demand.load(Ordering::SeqCst));
            if written >= target && (demand <= written || rounds >= LEADER_ROUNDS_MAX) {
                return Ok(());
            }
            let ready = self.ready();
            if ready <= written {
                if written >= target {
                    // Only others' demand is left, and its bytes are not copied
                    // yet. Waiting for them here could wait for our own: an
                    // appender short of ring space leads writes before it copies
                    // its group, and its group may be the next to become ready
                    // (stress_faults found that self-deadlock). Hand over: the
                    // release kicks the thread with the demand (INV-11), which
                    // leads once the bytes are ready.
                    return Ok(());
                }
                // Appenders before `target` are still copying; `target` lies
                // before our own reservation, if we have one (`wait_ring_space`).
                let waited =
                    self.ready_events.wait(written.0 + 1, Spin::NONE, || self.is_poisoned() || self.ready() > written);
                self.metrics.on_ready.record(true, waited);
                continue;
            }
            let upto = self.writable_end(written, ready);
            if upto <= written {
                self.wait_for_writable(written)?;
                continue;
            }
            let writer = leader.writer.as_mut().expect("a WriteLeader holds the role until dropped");
            self.write_range(writer, written, upto)?;
            rounds += 1;
        }
    }

    /// How far the writer may write now: up to `ready`, bounded by the checkpoint
    /// (INV-7) and the unsynced bound (INV-8).
    pub(super) fn writable_end(&self, written: Lsn, ready: Lsn) -> Lsn {
        let file_end = self.file_limit().data_start();
        let unsynced_end = BlockNo(self.synced().block().0 + self.unsynced_blocks + 1).data_start();
        ready.min(file_end).min(unsynced_end).max(written)
    }

    /// The writer cannot write at all: wait for a checkpoint (INV-7) or sync what
    /// is written (INV-8). Called holding the write role and never the sync role.
    pub(super) fn wait_for_writable(&self, written: Lsn) -> Result<()> {
        let limit = self.file_limit();
        if limit.data_start() <= written {
            let waited = self.space_events.wait(limit.0, Spin::NONE, || {
                self.is_poisoned() || self.shutdown.load(Ordering::SeqCst) || self.file_limit() > limit
            });
            self.metrics.on_file_space.record(true, waited);
            if self.shutdown.load(Ordering::SeqCst) && self.file_limit() <= limit {
                return Err(Error::Closed);
            }
            return Ok(());
        }
        // INV-8: sync what is written before writing further. Waiting for the
        // sync role while holding the write role is the allowed lock order; the
        // syncer only ever tries the write role.
        self.wait_synced(written)
    }

    /// Writes `[written, upto)`, publishes `written`, wakes the covered waiters.
    /// Returns when the write started and finished (the clock reads serve the pass
    /// timings of both roles).
    pub(super) fn write_range(&self, writer: &mut Writer, written: Lsn, upto: Lsn) -> Result<(Instant, Instant)> {
        let started = Instant::now();
        let synced = self.synced();
        let done = writer
            .write(&self.ring, &self.layout, &self.files, (written, upto), synced)
            .map_err(|failure| self.poison(failure))?;
        self.metrics.writes.add(done.calls);
        self.metrics.bytes_written.add(done.bytes);
        // INV-4. SeqCst: waiters check `written` in predicates after counting
        // themselves in (INV-10); it also hands ring space back to appenders.
        self.written.store(upto.0, Ordering::SeqCst);
        // The dedicated flusher, if it waits for this (one load otherwise).
        self.flusher_event.notify_all();
        let finished = Instant::now();
        self.write_pass.record(finished - started);
        self.write_events.notify_range_delegated(written.0, upto.0);
        self.tick(finished);
        Ok((started, finished))
    }

    /// Before a sync: write everything ready, if the write role is free. Never
    /// waits (the caller holds the sync role, INV-8's lock order). Returns when
    /// the write started and finished, if it wrote.
    fn write_ready_if_free(&self) -> Result<Option<(Instant, Instant)>> {
        let written = self.written();
        let ready = self.ready();
        if ready <= written {
            return Ok(None);
        }
        let Some(writer) = self.write_role.try_take() else { return Ok(None) };
        let mut leader = WriteLeader { shared: self, writer: Some(writer) };
        // Re-read under the role: another writer may have finished meanwhile.
        let written = self.written();
        let upto = self.writable_end(written, self.ready());
        if upto <= written {
            return Ok(None);
        }
        let writer = leader.writer.as_mut().expect("a WriteLeader holds the role until dropped");
        self.write_range(writer, written, upto).map(Some)
    }

    /// The sync role's loop: write what is ready, fdatasync up to `written`, and
    /// repeat (bounded) while parked threads need more.
    fn lead_syncs(&self, _leader: SyncLeader<'_>, target: Lsn) -> Result<SyncPass> {
        let mut rounds = 0;
        loop {
            self.check_poison()?;
            let synced = self.synced();
            let demand = Lsn(self.sync_demand.load(Ordering::SeqCst));
            if synced >= target && (demand <= synced || rounds >= LEADER_ROUNDS_MAX) {
                return Ok(SyncPass::Done);
            }
            let wrote_at = self.write_ready_if_free()?;
            let written = self.written();
            if written <= synced {
                return Ok(if synced >= target { SyncPass::Done } else { SyncPass::NeedsWrite });
            }
            let (pass_started, sync_started) = wrote_at.unwrap_or_else(|| {
                let now = Instant::now();
                (now, now)
            });
            self.sync_written((synced, written), pass_started, sync_started)?;
            rounds += 1;
        }
    }

    /// fdatasyncs `[synced, written)`, publishes `synced`, wakes the covered
    /// waiters. The pass began at `pass_started` (before its write, if any); the
    /// sync at `sync_started`. The caller holds the sync role.
    pub(super) fn sync_written(
        &self,
        (synced, written): (Lsn, Lsn),
        pass_started: Instant,
        sync_started: Instant,
    ) -> Result<()> {
        let fsyncs = self
            .files
            .sync_range(&self.layout, (synced, written), sync_started, |elapsed| {
                self.metrics.fsync_us.record_us(elapsed.as_micros() as u64);
            })
            .map_err(|failure| self.poison(failure))?;
        self.metrics.fsyncs.add(fsyncs.calls);
        // INV-5: only after every fdatasync covering [synced, written) returned Ok.
        self.synced.store(written.0, Ordering::SeqCst);
        self.sync_pass.record(fsyncs.finished - pass_started);
        self.sync_events.notify_range_delegated(synced.0, written.0);
        Ok(())
    }

    /// INV-11: after the write role was released, wake the thread with the
    /// largest uncovered write demand if nobody holds the role.
    fn kick_write_successor(&self) {
        fence(Ordering::SeqCst); // R1: the role's release before the demand
        let written = self.written().0;
        let demand = self.write_demand.load(Ordering::SeqCst);
        if demand > written && !self.write_role.is_held() {
            self.write_events.kick(demand, written);
        }
        // INV-17: a log writer waiting to take the role over.
        if self.dedicated_active() {
            self.pipeline_events.notify_all();
        }
    }

    /// INV-11 for the sync role: the successor writes and syncs for everybody.
    fn kick_sync_successor(&self) {
        fence(Ordering::SeqCst); // R1
        let synced = self.synced().0;
        let demand = self.sync_demand.load(Ordering::SeqCst);
        if demand > synced && !self.sync_role.is_held() {
            self.sync_events.kick(demand, synced);
        }
        if self.dedicated_active() {
            self.pipeline_events.notify_all();
        }
    }

    /// `wait` for the public API: validates, counts, times.
    pub(crate) fn wait_durable(&self, lsn: Lsn, durability: crate::Durability) -> Result<()> {
        let end = self.reserved_end();
        if lsn > end {
            return Err(Error::LsnOutOfRange { lsn, end });
        }
        if durability == crate::Durability::Buffered {
            return self.check_poison();
        }
        self.metrics.write_requests.add(1);
        // The fast path (already covered) records 0 µs without reading the clock.
        let covered = match durability {
            crate::Durability::Written => self.written() >= lsn,
            _ => self.synced() >= lsn,
        };
        if covered {
            self.metrics.commit_wait_us.record_us(0);
            return self.check_poison();
        }
        let started = Instant::now();
        let result = match durability {
            crate::Durability::Written => self.wait_written_for(lsn, &self.metrics.on_write),
            _ => self.wait_synced(lsn),
        };
        let waited = started.elapsed();
        self.metrics.commit_wait_us.record_us(waited.as_micros() as u64);
        self.metrics.commit_wait_ns.add(waited.as_nanos() as u64);
        if durability == crate::Durability::Synced {
            self.metrics.commit_sync_wait_ns.add(waited.as_nanos() as u64);
        }
        result
    }
}
