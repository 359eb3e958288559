//! The store on openraft 0.9 (`=0.9.25`, feature `storage-v2`): its
//! `RaftLogStorage` and `RaftLogReader` on [`LogStore`], nothing more — the
//! store itself is shared with the 0.10 line ([RAFT](crate::docs::raft), "Two openraft
//! lines"). Cargo feature `openraft-0.9` (on by default).
//!
//! ```no_run
//! # fn main() -> Result<(), redolog_raft::Error> {
//! use std::io::Cursor; // the default snapshot type of declare_raft_types
//! openraft::declare_raft_types!(pub TypeConfig);
//! let store: redolog_raft::openraft_0_9::RedologLogStore<TypeConfig> =
//!     redolog_raft::openraft_0_9::RedologLogStore::open("node-1/raft-log", redolog::Config::default())?;
//! // Hand `store` to `openraft::Raft::new` as its log storage.
//! # drop(store); Ok(()) }
//! ```

#[cfg(feature = "testkit")]
pub mod in_process;

use std::fmt::Debug;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, LogId, LogState, RaftLogId, RaftLogReader, RaftTypeConfig, StorageError, StorageIOError, Vote,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::line;
use crate::store::LogStore;

/// The openraft crate of this line, for code that names its types through
/// the store.
pub use openraft;

/// openraft 0.9's types for the type config `C`.
pub struct Line<C>(PhantomData<fn() -> C>);

impl<C: RaftTypeConfig> line::Sealed for Line<C> {}

impl<C> line::Line for Line<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    type Entry = C::Entry;
    type LogId = LogId<C::NodeId>;
    type Vote = Vote<C::NodeId>;

    fn log_id(entry: &C::Entry) -> LogId<C::NodeId> {
        entry.get_log_id().clone()
    }

    fn index(log_id: &LogId<C::NodeId>) -> u64 {
        log_id.index
    }
}

/// The store on openraft 0.9 for the type config `C`.
pub type RedologLogStore<C> = LogStore<Line<C>>;

fn write_error<NID: openraft::NodeId>(error: &Error) -> StorageError<NID> {
    StorageIOError::write_logs(AnyError::new(error)).into()
}

impl<C> RaftLogReader<C> for LogStore<Line<C>>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + openraft::OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.entries(range).map_err(|error| StorageIOError::read_logs(AnyError::new(&error)).into())
    }
}

impl<C> RaftLogStorage<C> for LogStore<Line<C>>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let (last_purged_log_id, last_log_id) = self.log_state();
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        LogStore::save_vote(self, vote).await.map_err(|error| StorageIOError::write_vote(AnyError::new(&error)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.vote())
    }

    async fn save_committed(&mut self, committed: Option<LogId<C::NodeId>>) -> Result<(), StorageError<C::NodeId>> {
        LogStore::save_committed(self, committed).map_err(|error| write_error(&error))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.committed())
    }

    /// 0.9's core awaits every append's flush before it goes on: the append
    /// waits in place and calls back before it returns ([RAFT](crate::docs::raft),
    /// "Durability").
    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        LogStore::append_and_wait(self, entries, move |result| callback.log_io_completed(result))
            .map_err(|error| write_error(&error))
    }

    /// 0.9 truncates from `log_id` on (inclusive).
    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        LogStore::truncate(self, log_id.index).map_err(|error| write_error(&error))
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        LogStore::purge(self, log_id).await.map_err(|error| write_error(&error))
    }
}
