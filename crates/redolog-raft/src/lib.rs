//! An [openraft](https://docs.rs/openraft) log store on redolog: Raft's
//! entries, its vote and its committed log id in one crash-safe redo log, with
//! group commit and no thread per append.
//!
//! One store, [`LogStore`], on two openraft lines, each a cargo feature and a
//! module: [`openraft_0_9`] (`=0.9.25`, feature `openraft-0.9`, on by
//! default) and [`openraft_0_10`] (`=0.10.0-alpha.37`, feature
//! `openraft-0.10`). Each implements that line's `RaftLogStorage` and
//! `RaftLogReader` for any `RaftTypeConfig` whose entries serialize with
//! serde; records, recovery, the index, the cache, purge and space are one
//! implementation, and a log written on one line opens on the other
//! ([RAFT, "Two openraft lines"](crate::docs::raft#two-openraft-lines): choose 0.10 for throughput — its
//! core does not wait for an append — and 0.9 while you need a stable
//! release). What the store promises:
//!
//! - **`append`** writes the entries as one redolog group (recovery sees all of
//!   them or none). On openraft 0.10 it returns at once and the flush callback
//!   fires from a log thread when the group is durable (`Log::on_durable`): no
//!   blocked Raft core, no thread per append (on a device that syncs in under
//!   20 µs a lone append syncs itself and calls back before returning: the
//!   log's INV-38). On 0.9, whose core awaits every flush before going on, it
//!   waits in place (`Log::wait`) and calls back before returning: nothing
//!   could overlap that flush, and the hand-offs to the log threads are saved.
//! - **`save_vote`** returns only once the vote is durable (it awaits
//!   `Log::wait_async`).
//! - **truncate and `purge`** append a record and do not wait: the log is
//!   sequential, so the next durable append or vote makes them durable too,
//!   and losing one in a crash before that is losing an operation Raft redoes
//!   ([RAFT, "Durability"](crate::docs::raft#durability)).
//! - **`save_committed`** appends nothing by itself: the committed id goes
//!   first in the next group the store appends, or is appended when the store
//!   is dropped — no fdatasync of its own for a hint openraft may lose.
//! - **Reads** come from an index of entry positions rebuilt at open by
//!   recovery, from a cache of the newest entries (every entry not yet durable
//!   is cached), and for older entries from the files through redolog's live
//!   reader.
//! - **Space**: a purge lets the store checkpoint the log at the group of the
//!   first entry it keeps, after re-appending the vote, the committed id and the
//!   purge point — a checkpoint never drops any of them ([RAFT](crate::docs::raft),
//!   "Space"). The log must be large enough for the entries Raft keeps between
//!   snapshots.
//!
//! ```no_run
//! # #[cfg(feature = "openraft-0.9")]
//! # fn main() -> Result<(), redolog_raft::Error> {
//! use std::io::Cursor; // the default snapshot type of declare_raft_types
//! openraft::declare_raft_types!(pub TypeConfig);
//! let store: redolog_raft::openraft_0_9::RedologLogStore<TypeConfig> =
//!     redolog_raft::openraft_0_9::RedologLogStore::open("node-1/raft-log", redolog::Config::default())?;
//! // Hand `store` to `openraft::Raft::new` as its log storage.
//! # drop(store); Ok(()) }
//! # #[cfg(not(feature = "openraft-0.9"))]
//! # fn main() {}
//! ```

#[cfg(not(any(feature = "openraft-0.9", feature = "openraft-0.10")))]
compile_error!("redolog-raft needs an openraft line: the feature `openraft-0.9` (default) or `openraft-0.10`, or both");

/// The document the rustdoc cites, shipped with the crate so the citations
/// resolve wherever the docs are read: the store's records, durability and
/// space, and the replicated service built on it.
pub mod docs {
    #[doc = include_str!("../docs/RAFT.md")]
    pub mod raft {}
}

mod error;
mod line;
mod record;
mod space;
mod state;
mod store;

#[cfg(feature = "openraft-0.10")]
pub mod openraft_0_10;
#[cfg(feature = "openraft-0.9")]
pub mod openraft_0_9;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use error::Error;
pub use line::Line;
pub use store::LogStore;
