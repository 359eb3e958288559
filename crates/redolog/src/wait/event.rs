//! Event slots: waiters park on the slot of their LSN and are woken only when the
//! value they wait for covers their LSN (docs/DESIGN.md §1.6, INV-10).
//!
//! A waiter for LSN `L` uses slot `((L − 1) / 512) mod slots` (MySQL's flush_events
//! key) and parks with `L` as its park token. A notifier that moved a value from
//! `old` to `new` visits only the slots of blocks in `(old, new]` and unparks the
//! tokens `<= new`. `kick` wakes one unsatisfied waiter of a slot (a role hand-off).

use std::hint::spin_loop;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot_core::{FilterOp, ParkResult, ParkToken, DEFAULT_UNPARK_TOKEN};

use crate::format::BLOCK_BYTES;
use crate::sync::atomic::{AtomicU32, Ordering};

// Park tokens carry an LSN.
const _: () = assert!(usize::BITS == 64, "redolog needs a 64-bit target");

/// Predicate checks before parking. A PAUSE costs ~40–140 cycles on recent x86,
/// so this is a few microseconds at most: enough to catch a leader that is about to
/// finish, short enough not to steal a core from it on a 2-core machine.
const SPIN_ROUNDS: u32 = 32;

/// Safety net only: a park that times out with its predicate true is a lost
/// wake-up, counted in `Metrics` and asserted to be 0 by the tests.
const PARK_TIMEOUT: Duration = Duration::from_secs(1);

/// What one `wait` cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Waited {
    /// Predicate checks while spinning.
    pub(crate) spins: u64,
    /// Times the thread parked.
    pub(crate) parks: u64,
    /// Parks that ended by timeout.
    pub(crate) timeouts: u64,
    /// Parks that ended by timeout although the predicate was already true:
    /// lost wake-ups.
    pub(crate) timeouts_with_work: u64,
}

/// A set of LSN-keyed wait slots.
pub(crate) struct EventSlots {
    /// Waiters parked or about to park, per slot. A slot's address is its park key.
    slots: Box<[CachePadded<AtomicU32>]>,
    /// Waiters in all slots: lets a notifier skip everything with one load.
    waiters: CachePadded<AtomicU32>,
    mask: u64,
}

impl EventSlots {
    /// `count` slots, a power of two.
    pub(crate) fn new(count: usize) -> Self {
        assert!(count.is_power_of_two());
        EventSlots {
            slots: (0..count).map(|_| CachePadded::new(AtomicU32::new(0))).collect(),
            waiters: CachePadded::new(AtomicU32::new(0)),
            mask: count as u64 - 1,
        }
    }

    fn slot_index(&self, lsn: u64) -> usize {
        ((lsn.saturating_sub(1) / BLOCK_BYTES as u64) & self.mask) as usize
    }

    fn key(&self, index: usize) -> usize {
        std::ptr::from_ref::<AtomicU32>(&self.slots[index]) as usize
    }

    /// Returns once `ready()` is true: spins briefly, then parks on the slot of
    /// `lsn`. `ready` must be cheap, must not panic and must read the values
    /// notifiers publish with SeqCst.
    pub(crate) fn wait(&self, lsn: u64, ready: impl Fn() -> bool) -> Waited {
        let mut waited = Waited::default();
        for _ in 0..SPIN_ROUNDS {
            if ready() {
                return waited;
            }
            waited.spins += 1;
            spin_loop();
        }
        let index = self.slot_index(lsn);
        // INV-10: count ourselves in before evaluating the predicate (in `park`'s
        // validate, under the bucket lock); a notifier publishes its value before
        // reading these counts. SeqCst on both sides: store-buffering.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.slots[index].fetch_add(1, Ordering::SeqCst);
        while !ready() {
            waited.parks += 1;
            let deadline = Instant::now() + PARK_TIMEOUT;
            // SAFETY: the key is the address of a slot we own; `validate` only
            // loads atomics and cannot panic (`ready`'s contract); the other
            // callbacks do nothing.
            #[allow(unsafe_code)]
            let result = unsafe {
                parking_lot_core::park(
                    self.key(index),
                    || !ready(),
                    || {},
                    |_, _| {},
                    ParkToken(lsn as usize),
                    Some(deadline),
                )
            };
            if result == ParkResult::TimedOut {
                waited.timeouts += 1;
                if ready() {
                    waited.timeouts_with_work += 1;
                }
            }
        }
        self.slots[index].fetch_sub(1, Ordering::SeqCst);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        waited
    }

    /// Wakes the waiters whose LSN is in `(old, new]`, after the caller published
    /// `new` with SeqCst. Visits only the slots of those blocks.
    pub(crate) fn notify_range(&self, old: u64, new: u64) {
        if new <= old || self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let first = old / BLOCK_BYTES as u64;
        let last = (new - 1) / BLOCK_BYTES as u64;
        let span = (last - first + 1).min(self.mask + 1);
        for block in first..first + span {
            let index = (block & self.mask) as usize;
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
            // SAFETY: our slot's key; the filter and callback cannot panic.
            #[allow(unsafe_code)]
            unsafe {
                parking_lot_core::unpark_filter(self.key(index), covered, |_| DEFAULT_UNPARK_TOKEN);
            }
        }
    }

    /// Wakes one waiter of the slot of `lsn` whose LSN is above `done`: the
    /// successor for a role (INV-11).
    pub(crate) fn kick(&self, lsn: u64, done: u64) {
        let index = self.slot_index(lsn);
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
        // SAFETY: our slot's key; the filter and callback cannot panic.
        #[allow(unsafe_code)]
        unsafe {
            parking_lot_core::unpark_filter(self.key(index), first_unsatisfied, |_| DEFAULT_UNPARK_TOKEN);
        }
    }

    /// Wakes every waiter (poisoning, closing).
    pub(crate) fn notify_all(&self) {
        for index in 0..self.slots.len() {
            if self.slots[index].load(Ordering::SeqCst) > 0 {
                // SAFETY: our slot's key.
                #[allow(unsafe_code)]
                unsafe {
                    parking_lot_core::unpark_all(self.key(index), DEFAULT_UNPARK_TOKEN);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn waiters_wake_exactly_when_covered() {
        let events = Arc::new(EventSlots::new(8));
        let value = Arc::new(AtomicU64::new(0));
        let waiters: Vec<_> = [600u64, 1200, 5000]
            .into_iter()
            .map(|lsn| {
                let (events, value) = (events.clone(), value.clone());
                std::thread::spawn(move || {
                    let waited = events.wait(lsn, || value.load(Ordering::SeqCst) >= lsn);
                    (lsn, value.load(Ordering::SeqCst), waited)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        value.store(1200, Ordering::SeqCst);
        events.notify_range(0, 1200);
        std::thread::sleep(Duration::from_millis(50));
        value.store(6000, Ordering::SeqCst);
        events.notify_range(1200, 6000);
        for waiter in waiters {
            let (lsn, seen, waited) = waiter.join().expect("waiter");
            assert!(seen >= lsn);
            assert_eq!(waited.timeouts, 0, "lost wake-up for {lsn}");
        }
    }

    #[test]
    fn kick_wakes_one_unsatisfied_waiter() {
        let events = Arc::new(EventSlots::new(8));
        let go = Arc::new(AtomicU64::new(0));
        let woken = Arc::new(AtomicU64::new(0));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let (events, go, woken) = (events.clone(), go.clone(), woken.clone());
                std::thread::spawn(move || {
                    events.wait(700, || go.load(Ordering::SeqCst) > 0);
                    woken.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        while events.slots[events.slot_index(700)].load(Ordering::SeqCst) < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        // A kick without a true predicate wakes one waiter, which parks again.
        events.kick(700, 0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(woken.load(Ordering::SeqCst), 0);
        go.store(1, Ordering::SeqCst);
        events.notify_all();
        for waiter in waiters {
            waiter.join().expect("waiter");
        }
        assert_eq!(woken.load(Ordering::SeqCst), 3);
    }
}
