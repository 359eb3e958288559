//! The synchronisation primitives the lock-free structures use.
//!
//! Modules written only against this shim (`link_buf`, `wait/event.rs`) are also
//! compiled against loom by the model tests (`tests/loom_*.rs` include their
//! source with a `sync` module of their own, where `ParkingLot` is a loom
//! `Mutex` + `Condvar` with the same contract), so the same code is
//! model-checked.

pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
}

/// A mutex whose `lock` returns the guard (no poisoning), as loom's model of
/// it does in the tests.
pub(crate) use parking_lot::Mutex;

use std::time::Instant;

use parking_lot_core::{FilterOp, ParkResult, ParkToken, UnparkToken};

/// Address-keyed parking: `parking_lot_core`'s global parking lot, behind a safe
/// interface. The contract the model (tests/common/loom_lot.rs) restates:
/// `park` runs `validate` under the key's lock and parks only if it returns
/// true; an unpark for the key takes the same lock, so a waiter is either seen
/// by the unpark or validates after it.
#[derive(Default)]
pub(crate) struct ParkingLot;

impl ParkingLot {
    /// Parks the calling thread on `key` with `token` unless `validate()` is
    /// false. `validate` must not panic; `deadline` bounds the park.
    pub(crate) fn park(
        &self,
        key: usize,
        validate: impl FnOnce() -> bool,
        token: ParkToken,
        deadline: Option<Instant>,
    ) -> ParkResult {
        // SAFETY: `validate` only loads atomics and cannot panic (the caller's
        // contract); the before-sleep and timed-out callbacks do nothing; keys
        // are addresses of atomics owned by the caller's `EventSlots`.
        #[allow(unsafe_code)]
        let result = unsafe { parking_lot_core::park(key, validate, || {}, |_, _| {}, token, deadline) };
        result
    }

    /// Unparks the threads parked on `key` that `filter` selects, in park
    /// order, handing each `token`. Returns how many it unparked.
    pub(crate) fn unpark_filter(
        &self,
        key: usize,
        filter: impl FnMut(ParkToken) -> FilterOp,
        token: UnparkToken,
    ) -> usize {
        // SAFETY: the filter and the callback cannot panic.
        #[allow(unsafe_code)]
        let result = unsafe { parking_lot_core::unpark_filter(key, filter, |_| token) };
        result.unparked_threads
    }

    /// Unparks every thread parked on `key`.
    pub(crate) fn unpark_all(&self, key: usize, token: UnparkToken) {
        // SAFETY: no callbacks.
        #[allow(unsafe_code)]
        unsafe {
            parking_lot_core::unpark_all(key, token);
        }
    }
}
