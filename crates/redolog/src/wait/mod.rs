//! How threads wait — a short spin, then a park on an LSN-keyed slot — and
//! where asynchronous waiters (wakers, callbacks) wait: LSN-keyed slots too.

mod event;
#[cfg(test)]
mod event_tests;

mod tail;
mod wakers;

pub(crate) use event::{slot_of, slots_covering, EventSlots, PassTime, Spin, Waited};
pub(crate) use tail::TailWakers;
pub(crate) use wakers::{Completion, WakerSlots};
