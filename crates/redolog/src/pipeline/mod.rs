//! The commit protocol: how a thread gets its LSN written and synced
//! ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline), §1.11).
//!
//! [`Stages`] owns the write stage, the sync stage and everything threads use
//! to move between them: the roles, the demands, the events, the running mode
//! (committers lead, or the dedicated log threads hold the roles), the poison
//! and the shutdown flag. What the protocol needs from the rest of the log —
//! the appenders' progress, the checkpoint's file limit, the I/O itself, where
//! to count a wait — it asks through [`Port`], so this module depends on
//! nothing but `sync`, `wait`, `lsn` and `error`. That is what lets
//! `tests/loom_pipeline.rs` compile these very files against loom with a model
//! port instead of restating the protocol.
//!
//! Lock order (written once, here): the checkpoint coordinator → the write role
//! → the sync role. A thread holding the sync role never waits for the write
//! role (it only tries it); the write role's holder may wait for a sync (INV-8).

mod dedicated;
mod group;
mod stage;

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use parking_lot::MutexGuard;

use crate::clock::Moment;
use crate::error::{Error, IoFailure, Result};
use crate::lsn::{BlockNo, Lsn};
use crate::sync::atomic::{fence, AtomicBool, AtomicU8, Ordering};
use crate::wait::{Completion, EventSlots, PassTime, Spin, TailWakers, Waited, WakerSlots};

use stage::Stage;

/// Wait slots per event array, as MySQL's 2048 write/flush events but halved:
/// at 1024 slots × 512 bytes a lap spans 512 KiB of log, more than any commit
/// group we measured (docs/BENCHMARKS.md).
const EVENT_SLOTS: usize = 1024;

/// `Stages::mode`: committing threads take the roles themselves.
const MODE_GROUP: u8 = 0;
/// `Stages::mode`: the dedicated log threads hold the roles.
const MODE_DEDICATED: u8 = 1;

/// What an asynchronous wait found (`Stages::wait_async`).
pub(crate) enum AsyncWait {
    /// Covered, poisoned or shut down: the outcome, and the completion back
    /// unless a notifier took it (and completes it itself).
    Ready(Result<()>, Option<Completion<Error>>),
    /// Registered; a log thread's pass will complete it.
    Pending,
    /// Registered, but committers lead: start the dedicated mode (INV-27).
    NeedsLogThreads,
}

/// Where a thread waited, for the wait triads (`*_no_waits / *_waits /
/// *_wait_loops`, [DESIGN §1.9](crate::docs::design#19-unsynced-bound)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Site {
    /// A `Written` commit waiting for `written`.
    Write,
    /// An appender waiting for `written` to free ring space.
    BufferSpace,
    /// A `Synced` commit waiting for `synced`.
    Flush,
    /// The write role's holder waiting for appenders to finish copying.
    Ready,
    /// The write role's holder waiting for a checkpoint to free file space.
    FileSpace,
    /// The write role's holder waiting for a consumer to advance (§1.16).
    Consumer,
    /// The dedicated log writer idle.
    LogWriter,
    /// The dedicated log flusher idle.
    LogFlusher,
}

/// What the commit protocol needs from the rest of the log. The log implements
/// it over its appender, checkpoint coordinator, files and metrics; the loom
/// model over a few atomics.
pub(crate) trait Port {
    /// The write role's state (the partial last block it rewrites).
    type Writer;
    /// Held from a write pass's reading of its limits to the end of its
    /// write: a resize takes it exclusively to lower the limits and switch
    /// the files with no pass between the two ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    type Gate<'a>
    where
        Self: 'a;
    /// Takes the gate (shared).
    fn gate(&self) -> Self::Gate<'_>;
    /// End of the prefix the appenders have completed (the link buffer's tail).
    fn ready(&self) -> Lsn;
    /// The first block the writer may not write yet (INV-7).
    fn file_limit(&self) -> BlockNo;
    /// Whether a consumer, not the checkpoint, sets the file limit (§1.16):
    /// which triad a file-space wait counts in.
    fn limit_held_by_consumer(&self) -> bool {
        false
    }
    /// Hands `[from, to)` to the OS. `synced` is the sync frontier, for the
    /// blocks' synced-back field.
    fn write(
        &self,
        gate: &Self::Gate<'_>,
        writer: &mut Self::Writer,
        range: (Lsn, Lsn),
        synced: Lsn,
    ) -> std::result::Result<(), IoFailure>;
    /// fdatasyncs `[from, to)`; the sync began at `started`. Returns when it
    /// finished.
    fn sync(&self, range: (Lsn, Lsn), started: Moment) -> std::result::Result<Moment, IoFailure>;
    /// A wait at `site` ended (`had_to_wait`: it did not find its value at once).
    fn count_wait(&self, site: Site, had_to_wait: bool, waited: Waited);
    /// The writer is about to wait for file space: it has written everything
    /// up to `limit`, the file limit (INV-7), and more is ready. The log
    /// reports a full log once per episode (INV-44).
    fn file_space_short(&self, limit: BlockNo) {
        let _ = limit;
    }
    /// How a thread waiting on a pass of `pass` may spin (§1.10).
    fn spin_for(&self, pass: &PassTime) -> Spin;
    /// Periodic work after a write pass (the CPU monitor, `Auto`); cheap when
    /// nothing is due.
    fn tick(&self, now: Moment);
}

/// The first I/O failure, kept to report on every later call (INV-6).
#[derive(Debug)]
struct Poison {
    op: &'static str,
    path: PathBuf,
    source: Arc<io::Error>,
}

/// A write + sync pass shorter than this costs less than handing it to
/// another thread and being woken (each hand-off measured 5–25 µs on a loaded
/// 2-CPU machine): `Auto` keeps such a log in group commit (§1.12, row 1) and
/// a lone asynchronous waiter does the pass itself (INV-38).
pub(crate) const FAST_PASS_NS: u64 = 20_000;

/// The write and sync stages and everything threads use to move between them.
pub(crate) struct Stages<W> {
    /// `written`, the write role (holding the writer's state), its waiters.
    write: Stage<W>,
    /// `synced`, the sync role, its waiters.
    sync: Stage<()>,
    /// Blocks the writer may run ahead of the sync frontier (INV-8). Only
    /// lowered, and only under the port's gate (a shrinking resize, §1.18).
    unsynced_blocks: crate::sync::atomic::AtomicU64,
    /// Waiters for `ready`: the writer waiting for appenders, appenders
    /// waiting for link-buffer space. Appenders notify it (`ready_moved`).
    ready_events: EventSlots,
    /// The writer waiting for a checkpoint (`space_freed`).
    space_events: EventSlots,
    /// The dedicated log flusher waiting for `written` to pass `synced`.
    flusher_event: EventSlots,
    /// Dedicated log threads waiting for their mode or their role (§1.11).
    mode_events: EventSlots,
    /// Readers tailing the log, waiting for `synced` to move (§4.1). They
    /// demand nothing, so they never wait in the sync stage's own slots,
    /// where a role hand-off (`kick`) could pick one of them.
    tail_events: EventSlots,
    /// Tasks tailing the log through the reader's `Stream`, woken where
    /// `tail_events` is notified (INV-47).
    tail_wakers: TailWakers,
    /// `MODE_GROUP` or `MODE_DEDICATED` (INV-17).
    mode: CachePadded<AtomicU8>,
    poison: OnceLock<Poison>,
    poisoned: AtomicBool,
    /// Set when the log shuts down: stops the log threads and a writer waiting
    /// for file space.
    shutdown: AtomicBool,
}

impl<W> Stages<W> {
    /// Stages starting at `end` (everything before it written and synced), in
    /// the dedicated mode or not. `Pipeline::Auto` starts in group commit,
    /// which needs no warm-up, and switches once it has measured the load.
    pub(crate) fn new(end: Lsn, writer: W, unsynced_blocks: u64, dedicated: bool) -> Self {
        Self::with_slots(end, writer, unsynced_blocks, dedicated, EVENT_SLOTS)
    }

    /// `new` with `slots` wait slots per LSN-keyed event array (the loom
    /// model uses two).
    pub(crate) fn with_slots(end: Lsn, writer: W, unsynced_blocks: u64, dedicated: bool, slots: usize) -> Self {
        Stages {
            write: Stage::new(end, writer, slots),
            sync: Stage::new(end, (), slots),
            unsynced_blocks: crate::sync::atomic::AtomicU64::new(unsynced_blocks),
            ready_events: EventSlots::new(slots),
            space_events: EventSlots::new(1),
            flusher_event: EventSlots::new(1),
            mode_events: EventSlots::new(1),
            tail_events: EventSlots::new(1),
            tail_wakers: TailWakers::default(),
            mode: CachePadded::new(AtomicU8::new(if dedicated { MODE_DEDICATED } else { MODE_GROUP })),
            poison: OnceLock::new(),
            poisoned: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Time the write passes took, summed, in ns.
    pub(crate) fn write_passes_ns(&self) -> u64 {
        self.write.pass.total_ns()
    }

    /// End of what was handed to the OS (INV-4).
    pub(crate) fn written(&self) -> Lsn {
        self.write.done()
    }

    /// End of what was synced (INV-5).
    pub(crate) fn synced(&self) -> Lsn {
        self.sync.done()
    }

    /// How long a sync pass is expected to take, in ns (for `Auto`).
    pub(crate) fn sync_pass_ns(&self) -> u64 {
        self.sync.pass.expected_ns()
    }

    // ---- poison (INV-6) ----

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    fn poison_error(&self) -> Error {
        match self.poison.get() {
            Some(poison) => Error::Poisoned { op: poison.op, path: poison.path.clone(), source: poison.source.clone() },
            None => Error::Closed,
        }
    }

    /// `Err` with the poison if the log is poisoned.
    pub(crate) fn check(&self) -> Result<()> {
        if self.is_poisoned() {
            return Err(self.poison_error());
        }
        Ok(())
    }

    /// Records the first I/O failure, seals both frontiers, wakes every waiter
    /// so it sees the poison, and returns the error for the failing call
    /// (INV-6). The seals come before the flag: whoever sees the flag reads
    /// final frontiers, and a role whose I/O is still in flight cannot publish
    /// after it ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline)).
    pub(crate) fn poison(&self, failure: IoFailure) -> Error {
        self.poison.get_or_init(|| Poison { op: failure.op, path: failure.path, source: Arc::new(failure.source) });
        self.seal();
        self.wake_everyone();
        self.poison_error()
    }

    /// Seals both frontiers, then sets the poison flag (INV-6). The poisoner
    /// calls it, and so does a publication whose compare-and-swap found its
    /// word sealed (`publish`): the seals are set one after the other, so it must not
    /// return the error (nor let its role go) before the other word is sealed
    /// and the flag is up, whoever the poisoner is ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline)).
    /// Idempotent.
    fn seal(&self) {
        self.write.seal();
        self.sync.seal();
        self.poisoned.store(true, Ordering::SeqCst);
    }

    /// The role holder publishes `stage`'s move from `from` to `to`. If the
    /// seal beat it, it finishes the seal and returns the poison (INV-6): the
    /// one place a publication meets the poison, for both stages.
    fn publish<T>(&self, stage: &stage::Stage<T>, from: Lsn, to: Lsn) -> Result<()> {
        if stage.advance(from, to) {
            return Ok(());
        }
        self.seal();
        Err(self.poison_error())
    }

    /// Poisons the log if the calling thread is panicking: a panic while holding
    /// a role (a failing `Storage`, say) leaves state nobody can vouch for, such
    /// as whether an fdatasync happened or how far a write got, so it fails the
    /// log like an I/O error (INV-6) instead of letting a successor retry the
    /// operation, and wakes every waiter instead of leaving them parked.
    pub(crate) fn poison_if_panicking(&self, op: &'static str) {
        if std::thread::panicking() {
            let thread = std::thread::current().name().unwrap_or("an unnamed thread").to_owned();
            let source = io::Error::other(format!("the thread panicked during {op}"));
            self.poison(IoFailure { op, path: thread.into(), source });
        }
    }

    fn wake_everyone(&self) {
        self.ready_events.notify_all();
        self.write.events.notify_all();
        self.sync.events.notify_all();
        // Poison or shutdown: nothing more will be written or synced. Poison:
        // every waiter fails, as a thread waiter does (INV-6). Shutdown: a
        // waiter the last pass covered, but whose pass has not taken it yet
        // (`close` returns once `synced` moved, before the wake-up), is
        // covered: Ok.
        let outcome = |done: Lsn| {
            move |lsn: u64| {
                self.check()?;
                if done.0 >= lsn {
                    Ok(())
                } else {
                    Err(Error::Closed)
                }
            }
        };
        self.write.wakers.take_all().complete(outcome(self.written()));
        self.sync.wakers.take_all().complete(outcome(self.synced()));
        self.space_events.notify_all();
        self.flusher_event.notify_all();
        self.mode_events.notify_all();
        self.tail_moved();
    }

    // ---- what the other owners tell the stages ----

    /// Appenders moved `ready` from `old` to `new` (the link buffer's tail),
    /// or closers the closed LSN. Precondition: the move ended with the link
    /// buffer's SeqCst fence (F2 or F4), after which the waiters' counts are
    /// read without another (E2).
    pub(crate) fn ready_moved(&self, old: Lsn, new: Lsn) {
        // Only `old < new`: by now other appenders may have moved the tail on
        // and the writer written past `new`.
        debug_assert!(old < new, "INV-2: ready only moves forward");
        self.ready_events.notify_range_after_fence(old.0, new.0);
    }

    /// INV-39: a thread about to wait for a pass wakes the one parked on
    /// `ready` (the log writer, or a leader waiting for bytes to become
    /// ready) if `ready` lies past `written`: an open mini-transaction keeps
    /// its publish's notice until it closes, and its owner may be the one
    /// about to wait. Costs two loads when `ready` is written; a fence and a
    /// look at the counts otherwise.
    pub(crate) fn nudge_ready<P: Port<Writer = W>>(&self, port: &P) {
        let written = self.written();
        let ready = port.ready();
        if ready > written {
            self.ready_events.notify_range(written.0, ready.0);
        }
    }

    /// Waits, without spinning, until `has_space()` or the log is poisoned: an
    /// appender short of link-buffer space, which frees as `ready` passes
    /// `target`.
    pub(crate) fn wait_ready_space(&self, target: Lsn, has_space: impl Fn() -> bool) -> Waited {
        self.ready_events.wait(target.0, Spin::NONE, || self.is_poisoned() || has_space())
    }

    /// Waits, demanding nothing, until `synced` passes `lsn`, the log is
    /// poisoned or shut down, or `deadline` comes; returns whether `synced`
    /// passed `lsn`. A reader tailing the log: it follows the sync stage
    /// without making it sync sooner.
    pub(crate) fn wait_synced_past(&self, lsn: Lsn, deadline: Instant) -> bool {
        self.tail_events
            .wait_until(lsn.0, deadline, || self.synced() > lsn || self.is_poisoned() || self.is_shutdown());
        self.synced() > lsn
    }

    /// The sync frontier moved, or the log closed or was poisoned: wake the
    /// tailers, threads and tasks.
    pub(crate) fn tail_moved(&self) {
        self.tail_events.notify_all();
        self.tail_wakers.wake_all();
    }

    /// Registers a task tailing the log (the reader's `Stream`) for the next
    /// move of the sync frontier, the close or the poison; the caller looks
    /// at them again afterwards (INV-47).
    pub(crate) fn register_tail_waker(&self, waker: &std::task::Waker) {
        self.tail_wakers.register(waker);
    }

    /// A checkpoint moved the file limit: wake a writer waiting for space.
    pub(crate) fn space_freed(&self) {
        self.space_events.notify_all();
    }

    /// Waits, without spinning, until `freed()` (the file limit passed
    /// `limit`) or the log is poisoned or shut down: a checkpoint that needs
    /// the space a consumer holds ([DESIGN §1.16](crate::docs::design#116-consumers-readers-that-hold-the-logs-space)).
    pub(crate) fn wait_space_freed(&self, limit: BlockNo, freed: impl Fn() -> bool) -> Waited {
        self.space_events.wait(limit.0, Spin::NONE, || self.is_poisoned() || self.is_shutdown() || freed())
    }

    /// `wait_space_freed` until `deadline` at the latest; returns whether
    /// `freed()` (or the poison or shutdown) ended it: a wait bounded by
    /// `Config::log_full_timeout` (INV-44).
    pub(crate) fn wait_space_freed_until(&self, limit: BlockNo, deadline: Instant, freed: impl Fn() -> bool) -> bool {
        self.space_events.wait_until(limit.0, deadline, || self.is_poisoned() || self.is_shutdown() || freed())
    }

    /// Blocks the writer may run ahead of the sync frontier (INV-8).
    pub(crate) fn unsynced_blocks(&self) -> u64 {
        self.unsynced_blocks.load(Ordering::Relaxed)
    }

    /// Lowers the unsynced bound to `blocks` (never raises it). The caller
    /// holds the port's gate exclusively: no pass is between reading the
    /// bound and writing ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    pub(crate) fn lower_unsynced_blocks(&self, blocks: u64) {
        self.unsynced_blocks.fetch_min(blocks, Ordering::Relaxed);
    }

    /// Whether the log is shutting down (the background threads stop).
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Stops the log threads' work: back to group commit, then shutdown
    /// (`Log::close`, `Drop`). Committers still waiting take the roles over.
    pub(crate) fn shut_down(&self) {
        self.set_dedicated(false);
        self.shutdown.store(true, Ordering::SeqCst);
        self.wake_everyone();
    }

    // ---- asynchronous waiters (§1.14, INV-26, INV-27) ----

    /// What covers `lsn` for `stage` now, if anything: poisoned, done, shut
    /// down. The poison comes first, as in the thread path's loop: after the
    /// first failed write or sync every call fails (INV-6), even for an LSN
    /// an earlier pass covered.
    fn async_outcome<T>(&self, stage: &Stage<T>, lsn: Lsn) -> Option<Result<()>> {
        if self.is_poisoned() {
            Some(Err(self.poison_error()))
        } else if stage.done() >= lsn {
            Some(Ok(()))
        } else if self.is_shutdown() {
            Some(Err(Error::Closed))
        } else {
            None
        }
    }

    /// An asynchronous wait for `lsn` to be written (`synced: false`) or
    /// synced: its outcome if it is covered, else `completion` registered in
    /// the stage's waker slots under `*id` (a new id if 0). INV-26: the
    /// registration precedes (A1) a second check, so a pass that covers `lsn`
    /// either finds the entry or is seen by that check. INV-27: if committers
    /// lead (no log thread will do the I/O), the caller must start the
    /// dedicated mode.
    pub(crate) fn wait_async(&self, lsn: Lsn, synced: bool, id: &mut u64, completion: Completion<Error>) -> AsyncWait {
        let wakers = self.wakers(synced);
        let outcome =
            || if synced { self.async_outcome(&self.sync, lsn) } else { self.async_outcome(&self.write, lsn) };
        if let Some(outcome) = outcome() {
            if *id != 0 {
                let _ = wakers.cancel(lsn.0, *id);
            }
            return AsyncWait::Ready(outcome, Some(completion));
        }
        if *id == 0 {
            *id = wakers.new_id();
        }
        wakers.register(lsn.0, *id, completion);
        if let Some(outcome) = outcome() {
            // Covered meanwhile. If a notifier took the entry, it completes it.
            return AsyncWait::Ready(outcome, wakers.cancel(lsn.0, *id));
        }
        if self.dedicated_active() {
            AsyncWait::Pending
        } else {
            AsyncWait::NeedsLogThreads
        }
    }

    /// Withdraws the asynchronous waiter `id` for `lsn` (a future dropped
    /// before it completed); returns its completion unless a notifier took it.
    pub(crate) fn cancel_async(&self, lsn: Lsn, synced: bool, id: u64) -> Option<Completion<Error>> {
        self.wakers(synced).cancel(lsn.0, id)
    }

    /// The asynchronous waiters of the sync stage (`synced`) or the write stage.
    fn wakers(&self, synced: bool) -> &WakerSlots<Error> {
        if synced {
            &self.sync.wakers
        } else {
            &self.write.wakers
        }
    }

    /// Whether asynchronous waiters are registered.
    pub(crate) fn async_pending(&self) -> bool {
        self.async_waiters() > 0
    }

    /// Asynchronous waiters registered now.
    pub(crate) fn async_waiters(&self) -> u64 {
        u64::from(self.write.wakers.pending()) + u64::from(self.sync.wakers.pending())
    }

    /// INV-38: no asynchronous waiter is registered and a pass is measured
    /// shorter than a hand-off (`FAST_PASS_NS`): an asynchronous waiter
    /// arriving now waits on its own thread, as `wait` does, for less than
    /// the wake-ups of the log threads would cost.
    pub(crate) fn alone_on_a_fast_device(&self) -> bool {
        let expected = self.sync.pass.expected_ns();
        expected > 0 && expected < FAST_PASS_NS && self.async_waiters() == 0
    }

    /// Switches to group commit unless asynchronous waiters need the log
    /// threads (INV-27); returns whether the mode changed. A waiter that
    /// registered after the first check sees the switch (A2 pairs with A1) and
    /// asks for the dedicated mode again; one seen here switches it back.
    pub(crate) fn set_group_unless_async(&self) -> bool {
        if self.async_pending() {
            return false;
        }
        let changed = self.set_dedicated(false);
        // A2: the mode before the counts. With the swap and the loads SeqCst,
        // A1 alone already orders the pair (the model passes without A2);
        // kept so each side of the store-buffering pair shows its fence.
        fence(Ordering::SeqCst);
        if self.async_pending() {
            self.set_dedicated(true);
        }
        changed
    }

    // ---- the mode (INV-17) ----

    /// The dedicated threads hold the roles (or are taking them over).
    pub(crate) fn dedicated_active(&self) -> bool {
        // SeqCst: read in wait predicates against role releases (INV-17).
        self.mode.load(Ordering::SeqCst) == MODE_DEDICATED
    }

    /// Committing threads may take the write and sync roles (INV-17).
    fn users_lead(&self) -> bool {
        !self.dedicated_active()
    }

    /// Switches who holds the roles; returns whether the mode changed. The log
    /// threads notice through `mode_events` (a thread idle in group-commit
    /// mode) or their work events; committing threads through their predicates
    /// when a role is released.
    pub(crate) fn set_dedicated(&self, dedicated: bool) -> bool {
        let mode = if dedicated { MODE_DEDICATED } else { MODE_GROUP };
        if self.mode.swap(mode, Ordering::SeqCst) == mode {
            return false;
        }
        self.mode_events.notify_all();
        self.ready_events.notify_all();
        self.flusher_event.notify_all();
        if !dedicated {
            // Threads parked while the log threads held the roles: the roles
            // come free when the log threads see the switch, and their release
            // kicks a successor; this covers a role already free.
            self.write.events.notify_all();
            self.sync.events.notify_all();
        }
        true
    }

    // ---- roles ----

    /// Takes `stage`'s role if it is free.
    fn try_lead<'a, T>(&'a self, stage: &'a Stage<T>, op: &'static str) -> Option<Leader<'a, W, T>> {
        stage.try_take().map(|guard| Leader { stages: self, stage, guard: Some(guard), op, covered: None })
    }
}

/// Holds a stage's role; releases it and kicks a successor when dropped, then
/// wakes the waiters its passes covered (INV-28). A leader that panics
/// poisons the log first, so a successor sees the poison instead of redoing
/// the write or retrying the fdatasync (INV-6).
pub(crate) struct Leader<'a, W, T> {
    stages: &'a Stages<W>,
    stage: &'a Stage<T>,
    /// `Some` while the role is held: from creation until `drop`, or until a
    /// `wake_and_retake` finds the role taken.
    guard: Option<MutexGuard<'a, T>>,
    op: &'static str,
    /// What the passes covered and nobody was woken for yet.
    covered: Option<(Lsn, Lsn)>,
}

impl<T, W> Leader<'_, W, T> {
    /// The role's state.
    fn state(&mut self) -> &mut T {
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!("a pass runs only while its Leader holds the role"))
    }

    /// A pass covered `[from, to)`: its waiters are woken once the role is
    /// let go (INV-28).
    fn covered(&mut self, from: Lsn, to: Lsn) {
        self.covered = Some(match self.covered {
            Some((first, _)) => (first, to),
            None => (from, to),
        });
    }

    /// Between two passes: release the role quietly, wake what the last pass
    /// covered, take the role again (INV-28). False: another thread took the
    /// role meanwhile and leads; stop leading.
    fn wake_and_retake(&mut self) -> bool {
        let Some((from, to)) = self.covered.take() else { return true };
        if let Some(guard) = self.guard.take() {
            self.stage.release_quiet(guard);
        }
        self.wake_log_threads();
        self.stage.wake_covered(from, to);
        self.guard = self.stage.try_take();
        self.guard.is_some()
    }

    /// INV-17: a log thread waiting to take the role over. INV-37: the idle
    /// flusher waits for `written > synced` with the sync role free, so a
    /// release that leaves written bytes unsynced tells it (a committer that
    /// held the role across a switch; never the writer's own sync, which
    /// leaves nothing behind).
    fn wake_log_threads(&self) {
        if self.stages.dedicated_active() {
            self.stages.mode_events.notify_all();
            if self.stages.written() > self.stages.synced() {
                self.stages.flusher_event.notify_all();
            }
        }
    }
}

impl<W, T> Drop for Leader<'_, W, T> {
    fn drop(&mut self) {
        // Before the release: a successor must see the poison.
        self.stages.poison_if_panicking(self.op);
        if let Some(guard) = self.guard.take() {
            self.stage.release(guard);
        }
        self.wake_log_threads();
        if let Some((from, to)) = self.covered.take() {
            self.stage.wake_covered(from, to);
        }
    }
}

/// Calls [`Stages::poison_if_panicking`] when dropped: held across a stretch
/// of code that does I/O or publishes outside the roles (an append, a
/// checkpoint) or for a log thread's whole life.
pub(crate) struct PoisonOnPanic<'a, W> {
    pub(crate) stages: &'a Stages<W>,
    pub(crate) op: &'static str,
}

impl<W> Drop for PoisonOnPanic<'_, W> {
    fn drop(&mut self) {
        self.stages.poison_if_panicking(self.op);
    }
}
