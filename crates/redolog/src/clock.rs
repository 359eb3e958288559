//! The pipeline's clock: a reading of `CLOCK_MONOTONIC` as one `u64` of
//! nanoseconds.
//!
//! A lone commit reads the clock five times (its wait, the write's start and
//! end, the fdatasync's end) and turns readings into durations about eight
//! times. With `std::time::Instant` every one of those is a `timespec`
//! subtraction with its carry and checks; callgrind counted about 500 of a
//! lone commit's 4,100 instructions there (docs/BENCHMARKS.md, "A lone
//! commit's clock"). A `Moment` is read the same way (the vDSO's
//! `clock_gettime`, as `Instant::now`) but converted once, and every
//! duration after that is one subtraction.

use std::time::Duration;

/// A point on the monotonic clock, in nanoseconds since an unspecified
/// origin (the boot, on Linux). Comparable with other `Moment`s only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Moment(u64);

impl Moment {
    /// Now.
    #[inline]
    pub(crate) fn now() -> Moment {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        // The monotonic clock never reads negative; u64 nanoseconds last
        // 584 years past its origin.
        Moment((now.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(now.tv_nsec as u64))
    }

    /// Nanoseconds from `earlier` to `self`; 0 if `earlier` is later.
    #[inline]
    pub(crate) fn ns_since(self, earlier: Moment) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self` plus `duration` (saturating).
    #[inline]
    pub(crate) fn after(self, duration: Duration) -> Moment {
        Moment(self.0.saturating_add(duration.as_nanos().min(u128::from(u64::MAX)) as u64))
    }

    /// The reading as nanoseconds since the clock's origin (what the
    /// atomics of periodic work store).
    #[inline]
    pub(crate) fn as_ns(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_follow_the_monotonic_clock_and_subtract_without_underflow() {
        let first = Moment::now();
        let instant = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let second = Moment::now();
        let elapsed = instant.elapsed();
        assert!(second > first);
        // The same clock as `Instant`: the two measures of the sleep agree
        // within the time between the reads.
        let ns = second.ns_since(first);
        assert!(ns >= 2_000_000, "{ns} ns for a 2 ms sleep");
        assert!(ns <= elapsed.as_nanos() as u64 + 1_000_000, "{ns} ns against Instant's {elapsed:?}");
        assert_eq!(first.ns_since(second), 0);
        assert_eq!(first.after(Duration::from_nanos(5)).ns_since(first), 5);
        assert_eq!(Moment(u64::MAX - 1).after(Duration::from_secs(1)), Moment(u64::MAX));
    }
}
