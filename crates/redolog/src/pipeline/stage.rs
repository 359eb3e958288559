//! One stage of the pipeline, instantiated twice: the write stage (`written`,
//! the write role, its waiters) and the sync stage (`synced`, the sync role, its
//! waiters). Everything that was written twice for the two halves of group
//! commit — the frontier, the demand, the role, the wake-up of the covered
//! waiters, the successor kick — is written once here.

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};

use crate::error::Error;
use crate::lsn::Lsn;
use crate::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use crate::wait::{EventSlots, PassTime, WakerSlots};

/// Bit 63 of a stage's `done`: the poison sealed the frontier (INV-6,
/// [DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline)). LSNs stay below it, as below the reservation
/// counter's closed bit.
const SEALED: u64 = 1 << 63;

/// A role of the commit protocol ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline)): held by at most one
/// thread. `held` is the role; the mutex only hands its state to the holder and
/// is never contended, because it is locked only after `held` was won.
pub(crate) struct Role<T> {
    held: AtomicBool,
    state: Mutex<T>,
}

impl<T> Role<T> {
    fn new(state: T) -> Self {
        Role { held: AtomicBool::new(false), state: Mutex::new(state) }
    }

    /// Takes the role if nobody holds it.
    fn try_take(&self) -> Option<MutexGuard<'_, T>> {
        // SeqCst: waiters read `held` in their predicates after registering
        // demand; releasers read demand after clearing `held` (INV-11).
        self.held.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).ok()?;
        // Never blocks: the previous holder unlocked before clearing `held`.
        Some(self.state.lock())
    }

    /// Gives the role up. The caller then kicks a successor (INV-11).
    fn release(&self, guard: MutexGuard<'_, T>) {
        drop(guard);
        self.held.store(false, Ordering::SeqCst);
    }

    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
}

/// A stage: what it has done, what parked threads need, who does it, who waits.
pub(crate) struct Stage<T> {
    /// End of what the stage has done: `written` (INV-4) or `synced` (INV-5),
    /// and bit 63, the seal (INV-6). Only grows; stored only by the role
    /// holder, sealed only by the poison.
    done: CachePadded<AtomicU64>,
    /// Largest LSN a parked thread needs done. Only grows.
    demand: CachePadded<AtomicU64>,
    pub(super) role: Role<T>,
    /// Threads waiting for `done`, keyed by the LSN they need (INV-10).
    pub(super) events: EventSlots,
    /// Futures and callbacks waiting for `done`, keyed likewise (INV-26).
    pub(super) wakers: WakerSlots<Error>,
    /// How long a pass takes: the waiters' spin budget.
    pub(super) pass: PassTime,
}

impl<T> Stage<T> {
    pub(super) fn new(start: Lsn, state: T, slots: usize) -> Self {
        Stage {
            done: CachePadded::new(AtomicU64::new(start.0)),
            demand: CachePadded::new(AtomicU64::new(start.0)),
            role: Role::new(state),
            events: EventSlots::new(slots),
            wakers: WakerSlots::new(slots),
            pass: PassTime::default(),
        }
    }

    /// What the stage has done.
    pub(crate) fn done(&self) -> Lsn {
        Lsn(self.done.load(Ordering::SeqCst) & !SEALED)
    }

    /// The poison freezes the frontier: no `advance` succeeds after this
    /// (INV-6; the poisoner seals both stages before it sets its flag).
    pub(super) fn seal(&self) {
        self.done.fetch_or(SEALED, Ordering::SeqCst);
    }

    /// What parked threads need done.
    pub(super) fn demand(&self) -> Lsn {
        Lsn(self.demand.load(Ordering::SeqCst))
    }

    /// A thread about to park needs `target` done.
    pub(super) fn add_demand(&self, target: Lsn) {
        // SeqCst: the releaser reads demand after clearing the role (INV-11).
        self.demand.fetch_max(target.0, Ordering::SeqCst);
    }

    /// The role holder moves the frontier from `from` to `to`; the caller wakes
    /// the covered waiters with `wake_covered` once it has published whatever
    /// else goes with the move. False: the log was poisoned (the frontier is
    /// sealed) and nothing moved; the caller returns the poison (INV-6).
    #[must_use]
    pub(super) fn advance(&self, from: Lsn, to: Lsn) -> bool {
        debug_assert!(from == self.done() && to > from, "a stage only moves forward from where it is");
        debug_assert!(to.0 < SEALED, "LSNs stay below the seal bit");
        // Only the role holder stores, so the exchange fails only when the
        // poison sealed the word (§1.5). SeqCst: waiters check `done` in
        // predicates after counting themselves in (INV-10).
        self.done.compare_exchange(from.0, to.0, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }

    /// Wakes the waiters covered by a move from `from` to `to` (delegated: the
    /// first one wakes the rest, so the role holder pays for one wake-up).
    /// The asynchronous waiters covered are woken (futures) or called
    /// (callbacks) here, on the role holder's thread (§1.14).
    pub(super) fn wake_covered(&self, from: Lsn, to: Lsn) {
        // Its fence E2 also orders `done` before the wakers' counts.
        self.events.notify_range_delegated(from.0, to.0);
        self.wakers.take_range(from.0, to.0).complete(|_| Ok(()));
    }

    /// Takes the role if it is free.
    pub(super) fn try_take(&self) -> Option<MutexGuard<'_, T>> {
        self.role.try_take()
    }

    /// Releases the role without the successor check: only when the caller
    /// tries to take it again at once (INV-28). If that take fails, the
    /// thread that took it checks when it releases.
    pub(super) fn release_quiet(&self, guard: MutexGuard<'_, T>) {
        self.role.release(guard);
    }

    /// Releases the role and kicks a successor: INV-11, after the role was
    /// released, wake the thread with the largest uncovered demand if nobody
    /// took the role meanwhile.
    pub(super) fn release(&self, guard: MutexGuard<'_, T>) {
        self.role.release(guard);
        fence(Ordering::SeqCst); // R1: the role's release before the demand
        let done = self.done().0;
        let demand = self.demand.load(Ordering::SeqCst);
        if demand > done && !self.role.is_held() {
            self.events.kick(demand, done);
        }
    }
}
