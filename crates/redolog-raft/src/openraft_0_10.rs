//! The store on openraft 0.10 (`=0.10.0-alpha.37`): its `RaftLogStorage`
//! and `RaftLogReader` on [`LogStore`], nothing more — the store itself is
//! shared with the 0.9 line ([RAFT, "Two openraft lines"](crate::docs::raft#two-openraft-lines)). Cargo
//! feature `openraft-0.10`.
//!
//! On this line openraft's core submits an append and goes on without
//! waiting for it: the store's group commit then covers every append in
//! flight with one fdatasync, and `IOFlushed` fires from a log thread once
//! the covering fdatasync returned — never before, and with the error if the
//! log is poisoned ([RAFT, "Two openraft lines"](crate::docs::raft#two-openraft-lines)).
//!
//! The store keeps the committed id lazily ([RAFT, "Durability"](crate::docs::raft#durability)): a
//! node that serves reads must set openraft's `enable_leader_restore` to
//! `Some(false)`, or a leader restarted in its own term serves read-index
//! reads from a machine re-applied only to a stale committed id (KV-4).
//!
//! ```no_run
//! # fn main() -> Result<(), redolog_raft::Error> {
//! use redolog_raft::openraft_0_10::{openraft, RedologLogStore};
//! openraft::declare_raft_types!(pub TypeConfig);
//! let store = RedologLogStore::<TypeConfig>::open("node-1/raft-log", redolog::Config::default())?;
//! // Hand `store` to `openraft::Raft::new` as its log storage.
//! # drop(store); Ok(()) }
//! ```

#[cfg(feature = "testkit")]
pub mod in_process;

use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use openraft::alias::{LogIdOf, VoteOf};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{OptionalSend, RaftTypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::line;
use crate::store::LogStore;

/// The openraft crate of this line (`=0.10.0-alpha.37`), for code that names
/// its types through the store.
pub use openraft_0_10 as openraft;

/// openraft 0.10's types for the type config `C`.
pub struct Line<C>(PhantomData<fn() -> C>);

impl<C: RaftTypeConfig> line::Sealed for Line<C> {}

impl<C> line::Line for Line<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
    LogIdOf<C>: Serialize + DeserializeOwned,
    VoteOf<C>: Serialize + DeserializeOwned,
{
    type Entry = C::Entry;
    type LogId = LogIdOf<C>;
    type Vote = VoteOf<C>;

    fn log_id(entry: &C::Entry) -> LogIdOf<C> {
        entry.log_id()
    }

    fn index(log_id: &LogIdOf<C>) -> u64 {
        log_id.index
    }
}

/// The store on openraft 0.10 for the type config `C`.
pub type RedologLogStore<C> = LogStore<Line<C>>;

impl<C> RaftLogReader<C> for LogStore<Line<C>>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
    LogIdOf<C>: Serialize + DeserializeOwned,
    VoteOf<C>: Serialize + DeserializeOwned,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        self.entries(range).map_err(io::Error::other)
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<C>>, io::Error> {
        Ok(self.vote())
    }
}

impl<C> RaftLogStorage<C> for LogStore<Line<C>>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
    LogIdOf<C>: Serialize + DeserializeOwned,
    VoteOf<C>: Serialize + DeserializeOwned,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, io::Error> {
        let (last_purged_log_id, last_log_id) = self.log_state();
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &VoteOf<C>) -> Result<(), io::Error> {
        LogStore::save_vote(self, vote).await.map_err(io::Error::other)
    }

    async fn save_committed(&mut self, committed: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        LogStore::save_committed(self, committed).map_err(io::Error::other)
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<C>>, io::Error> {
        Ok(self.committed())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        LogStore::append(self, entries, move |result| callback.io_completed(result)).map_err(io::Error::other)
    }

    /// 0.10 keeps `last_log_id` and removes what follows it (`None`: all).
    async fn truncate_after(&mut self, last_log_id: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        let since = last_log_id.map_or(0, |log_id| log_id.index + 1);
        LogStore::truncate(self, since).map_err(io::Error::other)
    }

    async fn purge(&mut self, log_id: LogIdOf<C>) -> Result<(), io::Error> {
        LogStore::purge(self, log_id).await.map_err(io::Error::other)
    }
}
