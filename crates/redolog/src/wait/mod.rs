//! How threads wait: a short spin, then a park on an LSN-keyed slot.

mod event;
#[cfg(test)]
mod event_tests;

pub(crate) use event::{EventSlots, PassTime, Spin, Waited};
