//! How threads wait: a short spin, then a park on an LSN-keyed slot.

mod event;

pub(crate) use event::{EventSlots, PassTime, Spin, Waited};
