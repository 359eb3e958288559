//! redolog: a crash-safe concurrent redo log (write-ahead log) for storage engines.
//!
//! The InnoDB redo log, done right: threads append record groups (mini-transactions)
//! with one atomic reservation and a copy into a shared ring — no mutex on the
//! append path — and wait until their groups are written or durable. A committing
//! thread either finds its LSN already synced, or does the write and the fdatasync
//! for everybody waiting (group commit), while the next group's write proceeds
//! during the previous group's fdatasync. Recovery tells a torn tail from mid-log
//! corruption, and a failed write or fdatasync poisons the log.
//!
//! ```
//! use redolog::{Config, Durability, Log};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config::default().with_capacity_bytes(4 << 20);
//! let (log, recovery) = Log::open(dir.path(), config.clone()).unwrap();
//! for group in recovery {
//!     let _replay = group.unwrap(); // apply to pages
//! }
//! let end = log.append_group(&[b"set a = 1", b"set b = 2"]).unwrap();
//! log.wait(end, Durability::Synced).unwrap(); // survives a power loss now
//! log.checkpoint(end).unwrap(); // the pages are flushed: recovery can start here
//! log.close().unwrap();
//! ```
//!
//! The design (pipeline, invariants, durability argument) is in `docs/DESIGN.md`,
//! the byte format in `docs/FORMAT.md`.

#![deny(unsafe_code)]
// docs.rs builds with every feature and `--cfg docsrs`: feature-gated items
// carry a badge naming their feature.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code states why a value is there instead of `expect`ing it; tests may.
#![cfg_attr(not(test), deny(clippy::expect_used))]
#![warn(missing_docs)]

mod append;
pub mod archive;
mod auto;
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_internals;
mod buffer;
mod checkpoint;
mod clock;
mod closed;
mod config;
mod consumer;
mod core;
mod cpu;
mod durable;
pub mod encryption;
mod error;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod export;
mod failpoint;
mod format;
mod geometry;
#[cfg(test)]
mod geometry_tests;
mod layout;
mod link_buf;
#[cfg(test)]
mod link_buf_tests;
mod live;
mod log;
mod log_threads;
mod lsn;
mod metrics;
mod owner;
mod pipeline;
mod recovery;
mod resize;
#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub mod sim;
pub mod storage;
mod sync;
mod wait;
mod writer;

pub use config::{Config, Durability, Pipeline};
pub use consumer::{Consumer, ConsumerInfo};
pub use durable::DurableFuture;
pub use error::{Error, Result};
#[cfg(feature = "failpoints")]
#[cfg_attr(docsrs, doc(cfg(feature = "failpoints")))]
pub use failpoint::FAILPOINTS;
pub use live::LogReader;
pub use log::{Log, MiniTransaction};
pub use lsn::Lsn;
pub use metrics::{LatencySummary, LogSpace, LsnLevels, Metrics, WaitStats};
pub use recovery::inspect;
pub use recovery::{Group, LogEnd, Recovery};

/// The documents the rustdoc cites, shipped with the crate so the citations
/// resolve wherever the docs are read (docs.rs included): the design —
/// protocol, states and the invariants `INV-n` — and the on-disk format.
pub mod docs {
    #[doc = include_str!("../docs/DESIGN.md")]
    pub mod design {}
    #[doc = include_str!("../docs/FORMAT.md")]
    pub mod format {}
}

/// The README's usage example, compiled as a doctest so it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
