//! [`RedologLogStore`]: openraft 0.9's `RaftLogStorage` and `RaftLogReader`
//! over the store's state (`state`), its records (`record`) and its space
//! reclamation (`space`).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, LogId, LogState, RaftLogId, RaftLogReader, RaftTypeConfig, StorageError, StorageIOError, Vote,
};
use redolog::{Config, Durability, Log, Lsn};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::record::{self, Record};
use crate::space;
use crate::state::{Appended, Shared, Slot, State};

/// openraft's log storage on one redolog log. Clones share the log: the
/// store is its own `LogReader`.
pub struct RedologLogStore<C: RaftTypeConfig> {
    shared: Arc<Shared<C>>,
}

impl<C: RaftTypeConfig> Clone for RedologLogStore<C> {
    fn clone(&self) -> Self {
        RedologLogStore { shared: self.shared.clone() }
    }
}

impl<C: RaftTypeConfig> Debug for RedologLogStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedologLogStore").field("end_lsn", &self.shared.log.end_lsn()).finish_non_exhaustive()
    }
}

/// An openraft error for a failed log write.
fn write_error<NID: openraft::NodeId>(error: &Error) -> StorageError<NID> {
    StorageIOError::write_logs(AnyError::new(error)).into()
}

fn read_error<NID: openraft::NodeId>(error: &Error) -> StorageError<NID> {
    StorageIOError::read_logs(AnyError::new(error)).into()
}

impl<C> RedologLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    /// Opens (or creates) the log in `dir` and rebuilds the store's state by
    /// recovery: the vote, the committed id, the purge point and the position
    /// of every entry. `config` is redolog's; its capacity bounds the entries
    /// kept between two purges.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Self, Error> {
        let capacity = config.capacity_bytes;
        let (log, recovery) = Log::open(dir, config)?;
        Self::recover(log, recovery, capacity)
    }

    /// [`open`](Self::open) on another storage: redolog's `CrashStorage` or
    /// `FaultyStorage` (cargo feature `testkit` of redolog) to test an
    /// application's crash and I/O-error handling with the store in it.
    pub fn open_with_storage(
        dir: &Path,
        config: Config,
        storage: impl redolog::storage::Storage + 'static,
    ) -> Result<Self, Error> {
        let capacity = config.capacity_bytes;
        let (log, recovery) = Log::open_with_storage(dir, config, storage)?;
        Self::recover(log, recovery, capacity)
    }

    /// Rebuilds the store's state from what recovery returns.
    fn recover(log: Log, recovery: redolog::Recovery, capacity: u64) -> Result<Self, Error> {
        let mut state = State {
            vote: None,
            committed: None,
            purged: None,
            entries: BTreeMap::new(),
            end: recovery.end_lsn(),
            checkpoint: recovery.checkpoint_lsn(),
            uncached_below: 0,
            pending_committed: None,
        };
        for group in recovery {
            let group = group?;
            for (number, bytes) in group.records().enumerate() {
                let corrupt = |reason| Error::Corrupt { lsn: group.start_lsn(), record: number, reason };
                match record::decode::<C>(bytes).map_err(corrupt)? {
                    Record::Entry { index } => {
                        let entry = record::entry_body::<C>(bytes).map_err(corrupt)?;
                        let slot = Slot {
                            log_id: entry.get_log_id().clone(),
                            group: group.start_lsn(),
                            end: group.end_lsn(),
                            record: number,
                            cached: Some(entry),
                        };
                        state.insert(index, slot);
                    }
                    Record::Vote(vote) => state.vote = Some(vote),
                    Record::Committed(committed) => state.committed = committed,
                    Record::Truncate { since } => state.truncate(since),
                    Record::Purge(upto) => state.purge(upto),
                    Record::State(kept) => {
                        state.vote = kept.vote;
                        state.committed = kept.committed;
                        if let Some(purged) = kept.purged {
                            state.purge(purged);
                        }
                    }
                }
            }
        }
        state.evict(log.durable_lsn());
        Ok(RedologLogStore { shared: Arc::new(Shared::new(log, state, capacity)) })
    }

    /// The redolog log underneath: its metrics, its durable LSN.
    pub fn log(&self) -> &Log {
        &self.shared.log
    }

    /// Entries in `range`, from the cache or the files.
    fn entries(&self, range: impl RangeBounds<u64>) -> Result<Vec<C::Entry>, Error> {
        let wanted: Vec<(Option<C::Entry>, Lsn, usize)> = {
            let state = self.shared.state();
            state.entries.range(range).map(|(_, slot)| (slot.cached.clone(), slot.group, slot.record)).collect()
        };
        let mut entries = Vec::with_capacity(wanted.len());
        let mut last_group: Option<redolog::Group> = None;
        for (cached, lsn, number) in wanted {
            if let Some(entry) = cached {
                entries.push(entry);
                continue;
            }
            if last_group.as_ref().is_none_or(|group| group.start_lsn() != lsn) {
                let mut reader = self.shared.log.read_from(lsn)?;
                let missing = || Error::Corrupt { lsn, record: number, reason: "the group is not durable".into() };
                last_group = Some(reader.try_next()?.ok_or_else(missing)?);
            }
            let group = last_group.as_ref().unwrap_or_else(|| unreachable!("read just above"));
            let corrupt = |reason| Error::Corrupt { lsn, record: number, reason };
            let bytes = group.records().nth(number).ok_or_else(|| corrupt("no such record".into()))?;
            entries.push(record::entry_body::<C>(bytes).map_err(corrupt)?);
        }
        Ok(entries)
    }
}

impl<C> RaftLogReader<C> for RedologLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + openraft::OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.entries(range).map_err(|error| read_error(&error))
    }
}

impl<C> RaftLogStorage<C> for RedologLogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let state = self.shared.state();
        let last = state.entries.last_key_value().map(|(_, slot)| slot.log_id.clone());
        Ok(LogState { last_purged_log_id: state.purged.clone(), last_log_id: last.or_else(|| state.purged.clone()) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let fail = |error: Error| StorageError::from(StorageIOError::write_vote(AnyError::new(&error)));
        let record = record::vote::<C>(vote).map_err(fail)?;
        let end = self
            .shared
            .append_group(&[record], |state, appended| {
                state.vote = Some(vote.clone());
                appended.end
            })
            .map_err(fail)?;
        self.shared.log.wait_async(end, Durability::Synced).await.map_err(|error| fail(error.into()))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.shared.state().vote.clone())
    }

    async fn save_committed(&mut self, committed: Option<LogId<C::NodeId>>) -> Result<(), StorageError<C::NodeId>> {
        let record = record::committed::<C>(&committed).map_err(|error| write_error(&error))?;
        let mut state = self.shared.state();
        state.pending_committed = Some(record);
        state.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.shared.state().committed.clone())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let entries: Vec<C::Entry> = entries.into_iter().collect();
        let records = entries
            .iter()
            .map(|entry| record::entry::<C>(entry.get_log_id().index, entry))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| write_error(&error))?;
        if records.is_empty() {
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        let durable = self.shared.log.durable_lsn();
        let end = self
            .shared
            .append_group(&records, |state, Appended { start, end, first }| {
                for (number, entry) in entries.into_iter().enumerate() {
                    let log_id = entry.get_log_id().clone();
                    let index = log_id.index;
                    let slot = Slot { log_id, group: start, end, record: first + number, cached: Some(entry) };
                    state.insert(index, slot);
                }
                state.evict(durable);
                end
            })
            .map_err(|error| write_error(&error))?;
        self.shared.log.on_durable(end, Durability::Synced, move |result| {
            callback.log_io_completed(result.map_err(std::io::Error::other));
        });
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let since = log_id.index;
        self.shared
            .append_group(&[record::truncate(since)], |state, _| state.truncate(since))
            .map_err(|error| write_error(&error))
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let record = record::purge::<C>(&log_id).map_err(|error| write_error(&error))?;
        self.shared.append_group(&[record], |state, _| state.purge(log_id)).map_err(|error| write_error(&error))?;
        space::reclaim(&self.shared).await.map_err(|error| write_error(&error))
    }
}
