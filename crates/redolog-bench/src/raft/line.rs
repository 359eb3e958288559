//! What differs between the openraft lines for the peers' stores (cargo
//! feature `peers`): the types they keep and how the flush callback is
//! called. redolog-raft has its own, sealed, for its records.

use std::fmt;
use std::io;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{openraft010, RaftTypes, RaftTypes010};

/// What differs between the openraft lines for the peers' stores: the types
/// they keep and how the flush callback is called.
pub trait Line: fmt::Debug + Default + PartialEq + Eq + Clone + Send + Sync + 'static {
    type LogId: Serialize + DeserializeOwned + fmt::Debug + Clone + Ord + Send + Sync + 'static;
    type Payload: Serialize + DeserializeOwned + fmt::Debug + Clone + Send + Sync + 'static;
    type Vote: Serialize + DeserializeOwned + fmt::Debug + Clone + PartialOrd + Eq + Send + Sync + 'static;
    type Entry: Serialize + DeserializeOwned + Send + 'static;
    /// The line's flush callback (`LogFlushed`, `IOFlushed`).
    type Flushed: Send + 'static;

    fn index(log_id: &Self::LogId) -> u64;
    fn split(entry: Self::Entry) -> (Self::LogId, Self::Payload);
    fn join(log_id: Self::LogId, payload: Self::Payload) -> Self::Entry;
    /// The bytes a payload holds, for raft-log's cache accounting.
    fn payload_size(payload: &Self::Payload) -> u64;
    fn completed(flushed: Self::Flushed, result: io::Result<()>);
}

/// A log's two ends as openraft's `LogState` has them: the last purged and
/// the last log id.
pub type Ends<L> = (Option<<L as Line>::LogId>, Option<<L as Line>::LogId>);

/// openraft 0.9 for [`RaftTypes`].
#[derive(Debug, Default, PartialEq, Eq, Clone)]
pub struct V0_9;

impl Line for V0_9 {
    type LogId = openraft::LogId<u64>;
    type Payload = openraft::EntryPayload<RaftTypes>;
    type Vote = openraft::Vote<u64>;
    type Entry = openraft::Entry<RaftTypes>;
    type Flushed = openraft::storage::LogFlushed<RaftTypes>;

    fn index(log_id: &Self::LogId) -> u64 {
        log_id.index
    }

    fn split(entry: Self::Entry) -> (Self::LogId, Self::Payload) {
        (entry.log_id, entry.payload)
    }

    fn join(log_id: Self::LogId, payload: Self::Payload) -> Self::Entry {
        openraft::Entry { log_id, payload }
    }

    fn payload_size(payload: &Self::Payload) -> u64 {
        match payload {
            openraft::EntryPayload::Normal(data) => data.len() as u64,
            _ => 64,
        }
    }

    fn completed(flushed: Self::Flushed, result: io::Result<()>) {
        flushed.log_io_completed(result);
    }
}

/// openraft 0.10 for the type config `C`: the in-process cluster's
/// ([`RaftTypes010`], the default) or the key-value node's
/// (`redolog_kv::TypeConfig`, which `redolog-bench kv-node` runs on).
#[derive(Debug, Default, PartialEq, Eq, Clone)]
pub struct V0_10<C = RaftTypes010>(PhantomData<C>);

/// `Line` for `V0_10<$types>`; `$bytes` measures a normal entry's payload.
macro_rules! line_0_10 {
    ($types:ty, $bytes:expr) => {
        impl Line for V0_10<$types> {
            type LogId = openraft010::alias::LogIdOf<$types>;
            type Payload = openraft010::alias::EntryPayloadOf<$types>;
            type Vote = openraft010::alias::VoteOf<$types>;
            type Entry = openraft010::alias::EntryOf<$types>;
            type Flushed = openraft010::storage::IOFlushed<$types>;

            fn index(log_id: &Self::LogId) -> u64 {
                log_id.index
            }

            fn split(entry: Self::Entry) -> (Self::LogId, Self::Payload) {
                (entry.log_id, entry.payload)
            }

            fn join(log_id: Self::LogId, payload: Self::Payload) -> Self::Entry {
                openraft010::Entry { log_id, payload }
            }

            fn payload_size(payload: &Self::Payload) -> u64 {
                match payload {
                    openraft010::EntryPayload::Normal(data) => $bytes(data),
                    _ => 64,
                }
            }

            fn completed(flushed: Self::Flushed, result: io::Result<()>) {
                flushed.io_completed(result);
            }
        }
    };
}

line_0_10!(RaftTypes010, |data: &String| data.len() as u64);
line_0_10!(redolog_kv::TypeConfig, |command: &redolog_kv::Command| match &command.request {
    redolog_kv::Request::Set { key, value } => (key.len() + value.len()) as u64,
    redolog_kv::Request::Delete { key } => key.len() as u64,
    redolog_kv::Request::Cas { key, expected, new } => {
        (key.len() + expected.as_ref().map_or(0, String::len) + new.len()) as u64
    }
});
