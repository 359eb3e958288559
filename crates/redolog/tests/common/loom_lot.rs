//! `crate::sync::ParkingLot` for loom models: `parking_lot_core`'s contract on a
//! loom `Mutex` + `Condvar`, one lot per `EventSlots` (keys stay slot
//! addresses). `park` validates under the lock and parks only if `validate()`
//! is true; unparks take the same lock, visit the parked threads of the key in
//! park order and hand each selected one its token.
//!
//! Deadlines are ignored: a waiter that only a timeout would wake stays parked,
//! and loom reports the execution as a deadlock. That is the point: the real
//! code's timeout is a safety net that counts lost wake-ups, and a model run
//! must show there are none.

use std::time::Instant;

use loom::sync::{Condvar, Mutex};
use parking_lot_core::{FilterOp, ParkResult, ParkToken, UnparkToken};

struct Parked {
    key: usize,
    token: ParkToken,
    id: u64,
    /// Set by an unpark; the thread removes its entry when it sees it.
    woken: Option<UnparkToken>,
}

#[derive(Default)]
struct Parking {
    next_id: u64,
    parked: Vec<Parked>,
}

pub struct ParkingLot {
    state: Mutex<Parking>,
    wake: Condvar,
}

impl Default for ParkingLot {
    fn default() -> Self {
        ParkingLot { state: Mutex::new(Parking::default()), wake: Condvar::new() }
    }
}

impl ParkingLot {
    pub fn park(
        &self,
        key: usize,
        validate: impl FnOnce() -> bool,
        token: ParkToken,
        _deadline: Option<Instant>,
    ) -> ParkResult {
        let mut state = self.state.lock().expect("lot lock");
        if !validate() {
            return ParkResult::Invalid;
        }
        let id = state.next_id;
        state.next_id += 1;
        state.parked.push(Parked { key, token, id, woken: None });
        loop {
            state = self.wake.wait(state).expect("lot lock");
            if let Some(at) = state.parked.iter().position(|parked| parked.id == id && parked.woken.is_some()) {
                let parked = state.parked.remove(at);
                return ParkResult::Unparked(parked.woken.expect("checked above"));
            }
        }
    }

    pub fn unpark_filter(
        &self,
        key: usize,
        mut filter: impl FnMut(ParkToken) -> FilterOp,
        token: UnparkToken,
    ) -> usize {
        let mut state = self.state.lock().expect("lot lock");
        let mut unparked = 0;
        for parked in state.parked.iter_mut().filter(|parked| parked.key == key && parked.woken.is_none()) {
            match filter(parked.token) {
                FilterOp::Unpark => {
                    parked.woken = Some(token);
                    unparked += 1;
                }
                FilterOp::Skip => {}
                FilterOp::Stop => break,
            }
        }
        if unparked > 0 {
            self.wake.notify_all();
        }
        unparked
    }

    pub fn unpark_all(&self, key: usize, token: UnparkToken) {
        self.unpark_filter(key, |_| FilterOp::Unpark, token);
    }
}
