//! Durable group commit without extra threads ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline)).
//!
//! A thread that needs LSN `L` written or synced runs one loop, the same for
//! both stages:
//!
//! ```text
//!   done >= L ───────────────────────────────────────► return (no lock taken)
//!   committers lead and the stage's role is free ────► lead: passes until L is
//!        done, then more (bounded) while parked threads' demand is uncovered
//!   otherwise ───────────────────────────────────────► register demand, spin,
//!        park on the slot of L until covered, poisoned, or kicked
//! ```
//!
//! A write pass writes everything ready; a sync pass first writes what is ready
//! if the write role is free (never waiting for it: the lock order), then
//! fdatasyncs up to `written`. Who moves a thread: into a role only itself
//! (`try_lead`); out of a park the role holder whose pass covered `L` (it wakes
//! exactly the tokens `<=` its new value), a releaser that kicks it as
//! successor (INV-11), or the poisoner. The two roles are separate, so the next
//! group is written while the previous one's fdatasync is in flight.

use super::stage::Stage;
use super::{Leader, Port, Site, Stages};
use crate::clock::Moment;
use crate::error::{Error, Result};
use crate::lsn::{BlockNo, Lsn};
use crate::wait::{Spin, Waited};

/// Passes a leader makes while other threads' demand stays uncovered, before it
/// hands the role to a parked successor. The leader's own commit is already
/// covered after its first pass, so this bounds the latency it lends to others;
/// continuing beats a hand-off because the leader is already running and the next
/// fdatasync can start at once.
const LEADER_ROUNDS_MAX: u32 = 4;

/// What a leader's pass achieved.
enum Pass {
    /// The stage moved forward.
    Moved,
    /// Nothing moved; look again (the pass waited for something).
    Again,
    /// Stop leading: the caller re-checks its own target.
    Stop,
    /// A sync pass found its target not written and could not write it.
    NeedsWrite,
}

impl<W> Stages<W> {
    /// Waits until `target` is written; may lead the write stage. `site` is
    /// `Write` (a commit) or `BufferSpace` (an appender freeing ring space).
    pub(crate) fn wait_written<P: Port<Writer = W>>(&self, port: &P, target: Lsn, site: Site) -> Result<()> {
        self.wait_for(port, &self.write, target, site, "write", |mut leader| {
            self.lead(&mut leader, target, |leader, written| self.write_pass(port, leader, written, target)).map(|_| ())
        })
    }

    /// Waits until `target` is synced; may lead the sync stage (and write first).
    pub(crate) fn wait_synced<P: Port<Writer = W>>(&self, port: &P, target: Lsn) -> Result<()> {
        self.wait_for(port, &self.sync, target, Site::Flush, "fdatasync", |mut leader| {
            let pass = self.lead(&mut leader, target, |leader, synced| self.sync_pass(port, leader, synced, target));
            drop(leader); // the sync role goes before we may wait for the write role
            match pass? {
                // Our bytes are not written and we could not write them while
                // syncing (appenders still copying, the writer busy, no file
                // space): go through the write role, then sync.
                Pass::NeedsWrite => self.wait_written(port, target, Site::Write),
                Pass::Moved | Pass::Again | Pass::Stop => Ok(()),
            }
        })
    }

    /// The one wait loop of both stages: return once `stage` covers `target`;
    /// lead when committers lead and the role is free; else park.
    fn wait_for<P: Port<Writer = W>, T>(
        &self,
        port: &P,
        stage: &Stage<T>,
        target: Lsn,
        site: Site,
        op: &'static str,
        mut lead: impl FnMut(Leader<'_, W, T>) -> Result<()>,
    ) -> Result<()> {
        let mut waited = Waited::default();
        let mut had_to_wait = false;
        let result = loop {
            if let Err(error) = self.check() {
                break Err(error);
            }
            if stage.done() >= target {
                break Ok(());
            }
            if let Some(leader) = self.users_lead().then(|| self.try_lead(stage, op)).flatten() {
                if let Err(error) = lead(leader) {
                    break Err(error);
                }
                continue;
            }
            had_to_wait = true;
            self.nudge_ready(port);
            stage.add_demand(target);
            waited += stage.events.wait(target.0, port.spin_for(&stage.pass), || {
                self.is_poisoned() || stage.done() >= target || (!stage.role.is_held() && self.users_lead())
            });
        };
        port.count_wait(site, had_to_wait, waited);
        result
    }

    /// The one lead loop of both stages: passes until `target` is done, then
    /// more (at most `LEADER_ROUNDS_MAX` that moved) while parked threads
    /// demand more. Between passes the covered waiters are woken with the
    /// role let go (INV-28); a leader that finds it taken then stops. Returns
    /// the pass that ended it.
    fn lead<T>(
        &self,
        leader: &mut Leader<'_, W, T>,
        target: Lsn,
        mut pass: impl FnMut(&mut Leader<'_, W, T>, Lsn) -> Result<Pass>,
    ) -> Result<Pass> {
        let stage = leader.stage;
        let mut rounds = 0;
        loop {
            self.check()?;
            let done = stage.done();
            if done >= target && (stage.demand() <= done || rounds >= LEADER_ROUNDS_MAX) {
                return Ok(Pass::Stop);
            }
            if !leader.wake_and_retake() {
                return Ok(Pass::Stop);
            }
            // Re-read: while the role was let go another leader may have
            // taken it and moved the stage (INV-28).
            let done = stage.done();
            match pass(leader, done)? {
                Pass::Moved => rounds += 1,
                Pass::Again => {}
                ended @ (Pass::Stop | Pass::NeedsWrite) => return Ok(ended),
            }
        }
    }

    /// One pass of the write role: write everything ready, or wait for what
    /// stops it (appenders still copying, file space, the unsynced bound).
    fn write_pass<P: Port<Writer = W>>(
        &self,
        port: &P,
        leader: &mut Leader<'_, W, W>,
        written: Lsn,
        target: Lsn,
    ) -> Result<Pass> {
        let ready = port.ready();
        if ready <= written {
            if written >= target {
                // Only others' demand is left, and its bytes are not copied
                // yet. Waiting for them here could wait for our own: an
                // appender short of ring space leads writes before it copies
                // its group, and its group may be the next to become ready
                // (stress_faults found that self-deadlock, INV-11). Hand over:
                // the release kicks the thread with the demand, which leads
                // once the bytes are ready.
                return Ok(Pass::Stop);
            }
            // Appenders before `target` are still copying; `target` lies
            // before our own reservation, if we have one (ring space).
            let waited =
                self.ready_events.wait(written.0 + 1, Spin::NONE, || self.is_poisoned() || port.ready() > written);
            port.count_wait(Site::Ready, true, waited);
            return Ok(Pass::Again);
        }
        let Some((upto, _)) = self.write_writable(port, leader.state(), written, ready)? else {
            self.wait_for_writable(port, written)?;
            return Ok(Pass::Again);
        };
        self.written_moved();
        leader.covered(written, upto);
        Ok(Pass::Moved)
    }

    /// One pass of the sync role: write what is ready if the write role is
    /// free, then fdatasync up to `written`.
    fn sync_pass<P: Port<Writer = W>>(
        &self,
        port: &P,
        leader: &mut Leader<'_, W, ()>,
        synced: Lsn,
        target: Lsn,
    ) -> Result<Pass> {
        let wrote_at = self.write_ready_if_free(port)?;
        let written = self.written();
        if written <= synced {
            return Ok(if synced >= target { Pass::Stop } else { Pass::NeedsWrite });
        }
        let (pass_started, sync_started) = wrote_at.unwrap_or_else(|| {
            let now = Moment::now();
            (now, now)
        });
        self.sync_written(port, (synced, written), pass_started, sync_started)?;
        leader.covered(synced, written);
        Ok(Pass::Moved)
    }

    /// How far the writer may write now: up to `ready`, bounded by the checkpoint
    /// (INV-7) and the unsynced bound (INV-8). The caller holds the gate.
    fn writable_end<P: Port>(&self, port: &P, written: Lsn, ready: Lsn) -> Lsn {
        let file_end = port.file_limit().data_start();
        let unsynced_end = BlockNo(self.synced().block().0 + self.unsynced_blocks() + 1).data_start();
        ready.min(file_end).min(unsynced_end).max(written)
    }

    /// Under the port's gate, so that the limits it reads still hold when it
    /// writes (a resize lowers them under the gate, [DESIGN §1.18](crate::docs::design#118-online-resize)):
    /// writes from `written` as far as the limits let it, up to `ready`, and
    /// publishes `written`. Returns the new end and the write's start and
    /// finish, or `None` if the limits let it write nothing.
    pub(super) fn write_writable<P: Port<Writer = W>>(
        &self,
        port: &P,
        writer: &mut W,
        written: Lsn,
        ready: Lsn,
    ) -> Result<Option<(Lsn, (Moment, Moment))>> {
        let gate = port.gate();
        let upto = self.writable_end(port, written, ready);
        if upto <= written {
            return Ok(None);
        }
        let times = self.write_range(port, &gate, writer, (written, upto))?;
        Ok(Some((upto, times)))
    }

    /// `written` moved: the dedicated flusher, if it waits for that (one load
    /// otherwise; a committer's write matters to it during a switch, INV-37).
    pub(super) fn written_moved(&self) {
        self.flusher_event.notify_all();
    }

    /// The writer cannot write at all: wait for a checkpoint (INV-7) or sync what
    /// is written (INV-8). Called holding the write role and never the sync role.
    pub(super) fn wait_for_writable<P: Port<Writer = W>>(&self, port: &P, written: Lsn) -> Result<()> {
        let limit = port.file_limit();
        if limit.data_start() <= written {
            port.file_space_short(limit);
            let site = if port.limit_held_by_consumer() { Site::Consumer } else { Site::FileSpace };
            let waited = self
                .space_events
                .wait(limit.0, Spin::NONE, || self.is_poisoned() || self.is_shutdown() || port.file_limit() > limit);
            port.count_wait(site, true, waited);
            if self.is_shutdown() && port.file_limit() <= limit {
                return Err(Error::Closed);
            }
            return Ok(());
        }
        // INV-8: sync what is written before writing further. Waiting for the
        // sync role while holding the write role is the allowed lock order; the
        // syncer only ever tries the write role.
        self.wait_synced(port, written)
    }

    /// Writes `[written, upto)` and publishes `written`. The caller wakes the
    /// covered waiters: a committer once it let go of the role (INV-28).
    /// Returns when the write started and finished (the clock reads serve the pass
    /// timings of both roles).
    fn write_range<P: Port<Writer = W>>(
        &self,
        port: &P,
        gate: &P::Gate<'_>,
        writer: &mut W,
        (written, upto): (Lsn, Lsn),
    ) -> Result<(Moment, Moment)> {
        // Where the stages meet, checked on every pass (a pass costs a system
        // call; these cost a few loads). A failure panics under the write role,
        // which poisons the log (INV-6) rather than write what it must not.
        assert!(written < upto && upto <= port.ready(), "INV-4: writing [{written}, {upto}) would pass ready");
        assert!(
            upto <= port.file_limit().data_start(),
            "INV-7: writing up to {upto} would pass the file limit {}",
            port.file_limit()
        );
        assert!(
            upto <= BlockNo(self.synced().block().0 + self.unsynced_blocks() + 1).data_start(),
            "INV-8: writing up to {upto} would run more than {} blocks ahead of synced {}",
            self.unsynced_blocks(),
            self.synced()
        );
        // A poisoned log writes nothing more (INV-6), checked under the role:
        // a leader that checked before it took the role may find a poison a
        // failed pass left (the review of format version 3 found the gap).
        self.check()?;
        let started = Moment::now();
        port.write(gate, writer, (written, upto), self.synced()).map_err(|failure| self.poison(failure))?;
        // INV-4; it also hands ring space back to appenders. Not after a
        // poison, though this write succeeded (INV-6's seal).
        self.publish(&self.write, written, upto)?;
        let finished = Moment::now();
        self.write.pass.record(finished.ns_since(started));
        port.tick(finished);
        Ok((started, finished))
    }

    /// Before a sync: write everything ready, if the write role is free. Never
    /// waits (the caller holds the sync role, INV-8's lock order). Returns when
    /// the write started and finished, if it wrote.
    fn write_ready_if_free<P: Port<Writer = W>>(&self, port: &P) -> Result<Option<(Moment, Moment)>> {
        if port.ready() <= self.written() {
            return Ok(None);
        }
        let Some(mut leader) = self.try_lead(&self.write, "write") else { return Ok(None) };
        // Re-read under the role: another writer may have finished meanwhile.
        let written = self.written();
        let Some((upto, wrote)) = self.write_writable(port, leader.state(), written, port.ready())? else {
            return Ok(None);
        };
        self.written_moved();
        // Dropping the leader releases the write role, then wakes (INV-28).
        leader.covered(written, upto);
        Ok(Some(wrote))
    }

    /// fdatasyncs `[synced, written)` and publishes `synced`; the caller wakes
    /// the covered waiters, as after `write_range`. The pass began at `pass_started` (before its write, if any); the
    /// sync at `sync_started`. The caller holds the sync role.
    pub(super) fn sync_written<P: Port>(
        &self,
        port: &P,
        (synced, written): (Lsn, Lsn),
        pass_started: Moment,
        sync_started: Moment,
    ) -> Result<()> {
        assert!(
            synced < written && written <= self.written(),
            "INV-5: syncing [{synced}, {written}) would pass written"
        );
        let finished = port.sync((synced, written), sync_started).map_err(|failure| self.poison(failure))?;
        // INV-5: only after every fdatasync covering [synced, written) returned
        // Ok; INV-6: and not after a poison, though this one did.
        self.publish(&self.sync, synced, written)?;
        self.sync.pass.record(finished.ns_since(pass_started));
        self.tail_moved();
        Ok(())
    }
}
