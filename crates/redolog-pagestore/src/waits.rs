//! Wait counters for the page store's wait sites ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)):
//! for each, how many acquisitions had to wait and for how long in all. The
//! acquisitions that did not wait are not counted — an atomic increment on
//! one shared cache line per latch would cost every statement — so the
//! benchmark reports waits per transaction instead of a share of visits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One wait site's counters, as a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waits {
    /// Acquisitions that found the latch or lock taken and waited.
    pub waits: u64,
    /// Their total wait, µs.
    pub wait_us: u64,
}

impl std::ops::Sub for Waits {
    type Output = Waits;

    fn sub(self, earlier: Waits) -> Waits {
        Waits { waits: self.waits - earlier.waits, wait_us: self.wait_us - earlier.wait_us }
    }
}

/// One wait site's live counters.
#[derive(Debug, Default)]
pub(crate) struct Site {
    waits: AtomicU64,
    wait_us: AtomicU64,
}

impl Site {
    /// Takes what `try_take` gives at once, or else counts a wait and times
    /// `take`, which blocks until it has it.
    pub(crate) fn take<G>(&self, try_take: impl FnOnce() -> Option<G>, take: impl FnOnce() -> G) -> G {
        if let Some(guard) = try_take() {
            return guard;
        }
        let started = Instant::now();
        let guard = take();
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.wait_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        guard
    }

    pub(crate) fn snapshot(&self) -> Waits {
        Waits { waits: self.waits.load(Ordering::Relaxed), wait_us: self.wait_us.load(Ordering::Relaxed) }
    }
}

/// The pool's wait sites.
#[derive(Debug, Default)]
pub(crate) struct PoolWaits {
    /// Page latches: a mini-transaction's exclusive latch, a descent's
    /// shared one.
    pub(crate) page_latch: Site,
    /// The index locks: shared for an optimistic statement, exclusive for a
    /// pessimistic one.
    pub(crate) index_lock: Site,
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;

    /// An acquisition the try takes is not a wait; one the try refuses is,
    /// timed around the blocking take. No thread races here: the blocking
    /// take is a closure that takes at least 10 ms, so the counts are the
    /// same on every run, however loaded the machine.
    #[test]
    fn only_an_acquisition_that_waits_is_counted() {
        let site = Site::default();
        let lock = Mutex::new(());
        drop(site.take(|| lock.try_lock(), || lock.lock()));
        assert_eq!(site.snapshot(), Waits::default());
        let held = lock.lock();
        let taken = site.take(
            || lock.try_lock().map(|_| "the try"),
            || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                "the blocking take"
            },
        );
        drop(held);
        assert_eq!(taken, "the blocking take");
        let after = site.snapshot();
        assert_eq!(after.waits, 1);
        assert!(after.wait_us >= 10_000, "{after:?}");
    }
}
