//! Event slots: waiters park on the slot of their LSN and are woken only when the
//! value they wait for covers their LSN ([DESIGN §1.6](crate::docs::design#16-waiting-event-slots), INV-10).
//!
//! A waiter for LSN `L` uses slot `((L − 1) / 512) mod slots` (MySQL's flush_events
//! key) and parks with `L` as its park token. A notifier that moved a value from
//! `old` to `new` visits only the slots of blocks in `(old, new]` and unparks the
//! tokens `<= new`. `kick` wakes one unsatisfied waiter of a slot (a role hand-off).

use std::hint::spin_loop;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot_core::{FilterOp, ParkResult, ParkToken, UnparkToken, DEFAULT_UNPARK_TOKEN};

use crate::clock::Moment;
use crate::geometry::BLOCK_BYTES;
use crate::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use crate::sync::ParkingLot;

// Park tokens carry an LSN.
const _: () = assert!(usize::BITS == 64, "redolog needs a 64-bit target");

/// CPU cost of one park + unpark hand-off between two threads on this machine
/// (measured: 4.3–4.8 µs CPU, 5.0–5.4 µs wall; a spinning hand-off costs 0.13 µs).
/// A wait expected to be shorter than this is cheaper spun than parked.
const PARK_COST_NS: u64 = 5_000;

/// Longest adaptive spin: twice the park cost.
const SPIN_NS_MAX: u64 = 2 * PARK_COST_NS;

/// Threads spinning right now, in this process: they may use at most the CPUs the
/// process can use minus one, which is left to the thread they wait for.
static SPINNERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How a waiter may spin before it parks ([DESIGN §1.10](crate::docs::design#110-adaptive-waiting-and-the-cpu-monitor)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spin {
    /// Longest spin; zero: park at once.
    pub(crate) budget: Duration,
    /// Spinners allowed in the process at once (the usable CPUs but one).
    pub(crate) spinners_max: usize,
}

impl Spin {
    /// Park at once.
    pub(crate) const NONE: Spin = Spin { budget: Duration::ZERO, spinners_max: 0 };
}

/// The expected duration of a role's pass (write, or write + fdatasync), as an
/// exponential moving average; waiters use it to choose spinning over parking.
#[derive(Default)]
pub(crate) struct PassTime {
    ema_ns: AtomicU64,
    /// Every pass's duration, summed (metrics: pg_stat_wal's `wal_write_time`).
    /// A std atomic even under loom: statistics, outside the protocol.
    total_ns: std::sync::atomic::AtomicU64,
}

impl PassTime {
    /// Records one pass. Relaxed: an estimate, never used to synchronise.
    pub(crate) fn record(&self, elapsed_ns: u64) {
        let sample = elapsed_ns.min(u64::MAX / 8);
        let old = self.ema_ns.load(Ordering::Relaxed);
        let new = if old == 0 { sample } else { old - old / 8 + sample / 8 };
        self.ema_ns.store(new, Ordering::Relaxed);
        // One recorder at a time (the role's holder): no read-modify-write.
        let total = &self.total_ns;
        total.store(
            total.load(std::sync::atomic::Ordering::Relaxed).wrapping_add(sample),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Every pass's duration so far, summed, in ns.
    pub(crate) fn total_ns(&self) -> u64 {
        self.total_ns.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The expected duration of a pass, in ns (0 before the first pass).
    pub(crate) fn expected_ns(&self) -> u64 {
        self.ema_ns.load(Ordering::Relaxed)
    }

    /// How long a waiter should spin before parking, CPU permitting: about two
    /// passes, if a pass is cheaper than parking; otherwise not at all.
    pub(crate) fn spin_budget(&self) -> Duration {
        let expected = self.ema_ns.load(Ordering::Relaxed);
        if expected == 0 || expected > PARK_COST_NS {
            return Duration::ZERO;
        }
        Duration::from_nanos((2 * expected).min(SPIN_NS_MAX))
    }
}

/// Safety net only: a park that times out with its predicate true is a lost
/// wake-up, counted in `Metrics` and asserted to be 0 by the tests.
const PARK_TIMEOUT: Duration = Duration::from_secs(1);

/// What one `wait` cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Waited {
    /// Predicate checks while spinning.
    pub(crate) spins: u64,
    /// Time spent spinning, in nanoseconds.
    pub(crate) spin_ns: u64,
    /// Times the thread parked.
    pub(crate) parks: u64,
    /// Parks that ended by timeout.
    pub(crate) timeouts: u64,
    /// Parks that ended by timeout although the predicate was already true:
    /// lost wake-ups.
    pub(crate) timeouts_with_work: u64,
}

impl std::ops::AddAssign for Waited {
    fn add_assign(&mut self, other: Waited) {
        self.spins += other.spins;
        self.spin_ns += other.spin_ns;
        self.parks += other.parks;
        self.timeouts += other.timeouts;
        self.timeouts_with_work += other.timeouts_with_work;
    }
}

/// Spins until `ready()` for up to `budget`, if a spinner slot is free. Returns
/// whether `ready()` became true. A zero budget (the wait is expected to be longer
/// than a park) skips spinning: on 2 cores with 64 waiters even a 0.1 µs spin per
/// wait was 4% of CPU and almost never succeeded (perf, 64 threads on disk).
fn spin(policy: Spin, ready: &impl Fn() -> bool, waited: &mut Waited) -> bool {
    if policy.budget.is_zero() || policy.spinners_max == 0 {
        return ready();
    }
    let admitted = SPINNERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < policy.spinners_max;
    let mut outcome = ready();
    if admitted && !outcome {
        let started = Moment::now();
        let deadline = started.after(policy.budget);
        let mut now = started;
        while !outcome {
            waited.spins += 1;
            spin_loop();
            outcome = ready();
            if waited.spins % 16 == 0 {
                now = Moment::now();
                if now >= deadline {
                    break;
                }
            }
        }
        if outcome {
            now = Moment::now();
        }
        waited.spin_ns += now.ns_since(started);
    }
    SPINNERS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    outcome
}

/// The slot of a waiter for `lsn` among `mask + 1` slots: the block holding
/// the byte before `lsn`, modulo the slots (MySQL's flush_events key). Parked
/// threads (`EventSlots`) and futures (`WakerSlots`) share it, so a pass
/// visits the same slots for both.
pub(crate) fn slot_of(lsn: u64, mask: u64) -> usize {
    ((lsn.saturating_sub(1) / BLOCK_BYTES as u64) & mask) as usize
}

/// Blocks in `(old, new]`: the first, and how many. Precondition: `old < new`.
fn blocks_between(old: u64, new: u64) -> (u64, u64) {
    let first = old / BLOCK_BYTES as u64;
    (first, (new - 1) / BLOCK_BYTES as u64 - first + 1)
}

/// The slots of the waiters a move from `old` to `new` covers: those of the
/// blocks in `(old, new]`, each slot at most once. Precondition: `old < new`.
pub(crate) fn slots_covering(old: u64, new: u64, mask: u64) -> impl Iterator<Item = usize> {
    let (first, blocks) = blocks_between(old, new);
    (first..first + blocks.min(mask + 1)).map(move |block| (block & mask) as usize)
}

/// A set of LSN-keyed wait slots.
pub(crate) struct EventSlots {
    /// Waiters parked or about to park, per slot. A slot's address is its park key.
    slots: Box<[CachePadded<AtomicU32>]>,
    /// Waiters in all slots: lets a notifier skip everything with one load.
    waiters: CachePadded<AtomicU32>,
    mask: u64,
    lot: ParkingLot,
}

impl EventSlots {
    /// `count` slots, a power of two.
    // `ParkingLot` is a unit struct here but not in the loom model.
    #[allow(clippy::default_constructed_unit_structs)]
    pub(crate) fn new(count: usize) -> Self {
        assert!(count.is_power_of_two());
        EventSlots {
            slots: (0..count).map(|_| CachePadded::new(AtomicU32::new(0))).collect(),
            waiters: CachePadded::new(AtomicU32::new(0)),
            mask: count as u64 - 1,
            lot: ParkingLot::default(),
        }
    }

    /// Waiters counted in the slot of `lsn` (for the unit tests).
    #[cfg(test)]
    pub(crate) fn slot_waiters(&self, lsn: u64) -> u32 {
        self.slots[slot_of(lsn, self.mask)].load(Ordering::SeqCst)
    }

    fn key(&self, index: usize) -> usize {
        std::ptr::from_ref::<AtomicU32>(&self.slots[index]) as usize
    }

    /// Returns once `ready()` is true: spins briefly, then parks on the slot of
    /// `lsn`. `ready` must be cheap, must not panic and must read the values
    /// notifiers publish with SeqCst.
    pub(crate) fn wait(&self, lsn: u64, spin_policy: Spin, ready: impl Fn() -> bool) -> Waited {
        let mut waited = Waited::default();
        if spin(spin_policy, &ready, &mut waited) {
            return waited;
        }
        self.park_until(lsn, None, &ready, &mut waited);
        waited
    }

    /// Parks on the slot of `lsn` until `ready()` or `deadline`, without
    /// spinning; returns whether `ready()` held. For a waiter with a time
    /// limit of its own (a reader tailing the log): reaching the deadline is
    /// not a lost wake-up.
    pub(crate) fn wait_until(&self, lsn: u64, deadline: Instant, ready: impl Fn() -> bool) -> bool {
        self.park_until(lsn, Some(deadline), &ready, &mut Waited::default())
    }

    fn park_until(&self, lsn: u64, deadline: Option<Instant>, ready: &impl Fn() -> bool, waited: &mut Waited) -> bool {
        let index = slot_of(lsn, self.mask);
        // INV-10: count ourselves in before evaluating the predicate (in `park`'s
        // validate, under the bucket lock); a notifier publishes its value before
        // reading these counts. SeqCst on both sides: store-buffering.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.slots[index].fetch_add(1, Ordering::SeqCst);
        // E1: the SeqCst operations already exclude store buffering; the fence
        // makes the order explicit, as in the loom model (tests/loom_pipeline.rs).
        fence(Ordering::SeqCst);
        let mut outcome = ready();
        while !outcome {
            let now = Instant::now();
            let park_deadline = match deadline {
                Some(deadline) if deadline <= now => break,
                Some(deadline) => deadline.min(now + PARK_TIMEOUT),
                None => now + PARK_TIMEOUT,
            };
            waited.parks += 1;
            // `ready` cannot panic (its contract), as `park` requires.
            let result = self.lot.park(self.key(index), || !ready(), ParkToken(lsn as usize), Some(park_deadline));
            outcome = ready();
            match result {
                ParkResult::TimedOut if deadline.is_none_or(|deadline| park_deadline < deadline) => {
                    waited.timeouts += 1;
                    if outcome {
                        waited.timeouts_with_work += 1;
                    }
                }
                // We were woken as the helper of a delegated notification: wake
                // the others covered up to the value in the token, from our slot
                // on (the notifier found no waiter before it).
                ParkResult::Unparked(token) if token != DEFAULT_UNPARK_TOKEN => {
                    let from = (lsn.saturating_sub(1) / BLOCK_BYTES as u64) * BLOCK_BYTES as u64;
                    self.notify_range(from, token.0 as u64);
                }
                _ => {}
            }
        }
        self.slots[index].fetch_sub(1, Ordering::SeqCst);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        outcome
    }

    /// Wakes the waiters whose LSN is in `(old, new]`, after the caller published
    /// `new` with SeqCst. Visits only the slots of those blocks.
    pub(crate) fn notify_range(&self, old: u64, new: u64) {
        fence(Ordering::SeqCst); // E2: the caller's value before the counts
        self.notify_range_after_fence(old, new);
    }

    /// `notify_range` for a caller whose store of `new` was already followed
    /// by a SeqCst fence, which serves as E2: a link buffer's tail move ends
    /// with its fence F2 or F4 (link_buf.rs). One `mfence` less per append.
    pub(crate) fn notify_range_after_fence(&self, old: u64, new: u64) {
        if new <= old || self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        for index in slots_covering(old, new, self.mask) {
            if self.slots[index].load(Ordering::SeqCst) == 0 {
                continue;
            }
            let covered = |token: ParkToken| {
                if token.0 as u64 <= new {
                    FilterOp::Unpark
                } else {
                    FilterOp::Skip
                }
            };
            self.lot.unpark_filter(self.key(index), covered, DEFAULT_UNPARK_TOKEN);
        }
    }

    /// Like `notify_range`, but wakes only the first covered waiter and makes it
    /// wake the others: the notifier (a leader with its next pass to start) pays
    /// for one wake-up, and the rest happen on whatever core the helper runs on.
    ///
    /// Only when the range spans at most as many blocks as there are slots:
    /// then each slot holds the waiters of one block of the range, the first
    /// covered waiter found is in the lowest block that has one, and the helper
    /// wakes from its own block on. A longer range (a pass over more than
    /// 512 KiB) puts several blocks in one slot: the first covered waiter found
    /// may lie above others the helper would then miss, so such a range is
    /// notified in full here (the loom model found the lost wake-up).
    pub(crate) fn notify_range_delegated(&self, old: u64, new: u64) {
        fence(Ordering::SeqCst); // E2
        if new <= old || self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        if blocks_between(old, new).1 > self.mask + 1 {
            self.notify_range(old, new);
            return;
        }
        for index in slots_covering(old, new, self.mask) {
            if self.slots[index].load(Ordering::SeqCst) == 0 {
                continue;
            }
            let mut woke = false;
            let first_covered = |token: ParkToken| {
                if woke {
                    FilterOp::Stop
                } else if token.0 as u64 <= new {
                    woke = true;
                    FilterOp::Unpark
                } else {
                    FilterOp::Skip
                }
            };
            // The helper gets `new` in its unpark token (never the default 0:
            // `new > old >= 0`).
            if self.lot.unpark_filter(self.key(index), first_covered, UnparkToken(new as usize)) > 0 {
                return;
            }
        }
    }

    /// Wakes one waiter of the slot of `lsn` whose LSN is above `done`: the
    /// successor for a role (INV-11).
    pub(crate) fn kick(&self, lsn: u64, done: u64) {
        fence(Ordering::SeqCst); // E2
        let index = slot_of(lsn, self.mask);
        if self.slots[index].load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut woke = false;
        let first_unsatisfied = |token: ParkToken| {
            if woke {
                FilterOp::Stop
            } else if token.0 as u64 > done {
                woke = true;
                FilterOp::Unpark
            } else {
                FilterOp::Skip
            }
        };
        self.lot.unpark_filter(self.key(index), first_unsatisfied, DEFAULT_UNPARK_TOKEN);
    }

    /// Wakes every waiter (poisoning, closing).
    pub(crate) fn notify_all(&self) {
        fence(Ordering::SeqCst); // E2
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        for index in 0..self.slots.len() {
            if self.slots[index].load(Ordering::SeqCst) > 0 {
                self.lot.unpark_all(self.key(index), DEFAULT_UNPARK_TOKEN);
            }
        }
    }
}
