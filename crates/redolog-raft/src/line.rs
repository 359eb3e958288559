//! What differs between the openraft lines the store runs on: the types of an
//! entry, a log id and a vote. Everything else — records, recovery, the
//! position index, the cache, purge and space — is one implementation over
//! this trait ([`LogStore`](crate::LogStore)); each line's module adds only
//! its trait signatures ([RAFT, "Two openraft lines"](crate::docs::raft#two-openraft-lines)).

use serde::de::DeserializeOwned;
use serde::Serialize;

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// An openraft line's types for one `RaftTypeConfig`:
/// [`openraft_0_9::Line`](crate::openraft_0_9::Line) and
/// [`openraft_0_10::Line`](crate::openraft_0_10::Line). Sealed: the store's
/// records are pinned for these lines only (`tests/golden.rs`).
pub trait Line: Sealed + Send + Sync + 'static {
    /// The line's entry type for the type config.
    type Entry: Clone + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The line's log id.
    type LogId: Clone + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The line's vote.
    type Vote: Clone + Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The entry's log id.
    fn log_id(entry: &Self::Entry) -> Self::LogId;

    /// The log id's index.
    fn index(log_id: &Self::LogId) -> u64;
}
