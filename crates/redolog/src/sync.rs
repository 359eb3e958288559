//! The synchronisation primitives the lock-free structures use.
//!
//! Modules written only against this shim (`link_buf`) are also compiled
//! against loom by the model tests (`tests/loom_*.rs` include their source with
//! a `sync` module of their own), so the same code is model-checked.

pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
}
