//! An [openraft](https://docs.rs/openraft/0.9) log store on redolog: Raft's
//! entries, its vote and its committed log id in one crash-safe redo log, with
//! group commit and no thread per append.
//!
//! [`RedologLogStore`] implements openraft 0.9's `RaftLogStorage` and
//! `RaftLogReader` (feature `storage-v2`) for any `RaftTypeConfig` whose entries
//! serialize with serde. What it promises:
//!
//! - **`append`** writes the entries as one redolog group (recovery sees all of
//!   them or none) and returns at once; openraft's flush callback fires from a
//!   log thread when the group is durable (`Log::on_durable`): no blocked Raft
//!   core, no thread per append.
//! - **`save_vote`** returns only once the vote is durable (it awaits
//!   `Log::wait_async`).
//! - **`truncate` and `purge`** append a record and do not wait: the log is
//!   sequential, so the next durable append or vote makes them durable too,
//!   and losing one in a crash before that is losing an operation Raft redoes
//!   (docs/RAFT.md, "Durability").
//! - **`save_committed`** appends nothing by itself: the committed id goes
//!   first in the next group the store appends, or is appended when the store
//!   is dropped — no fdatasync of its own for a hint openraft may lose.
//! - **Reads** come from an index of entry positions rebuilt at open by
//!   recovery, from a cache of the newest entries (every entry not yet durable
//!   is cached), and for older entries from the files through redolog's live
//!   reader.
//! - **Space**: a purge lets the store checkpoint the log at the group of the
//!   first entry it keeps, after re-appending the vote, the committed id and the
//!   purge point — a checkpoint never drops any of them (docs/RAFT.md,
//!   "Space"). The log must be large enough for the entries Raft keeps between
//!   snapshots.
//!
//! ```no_run
//! # fn main() -> Result<(), redolog_raft::Error> {
//! use std::io::Cursor; // the default snapshot type of declare_raft_types
//! openraft::declare_raft_types!(pub TypeConfig);
//! let store: redolog_raft::RedologLogStore<TypeConfig> =
//!     redolog_raft::RedologLogStore::open("node-1/raft-log", redolog::Config::default())?;
//! // Hand `store` to `openraft::Raft::new` as its log storage.
//! # drop(store); Ok(()) }
//! ```

pub mod in_process;
mod record;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::async_runtime::AsyncOneshotSendExt;
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, AsyncRuntime, LogId, LogState, RaftLogId, RaftLogReader, RaftTypeConfig, StorageError, StorageIOError,
    Vote,
};
use redolog::{Config, Durability, Log, Lsn};
use serde::de::DeserializeOwned;
use serde::Serialize;

use record::{Kept, Record};

/// Entries kept in memory beyond those not yet durable: reads of the newest
/// entries (replication to followers that keep up) never touch the files.
const CACHED_ENTRIES: usize = 4096;

/// Why the store could not open, read or write.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log failed: an I/O error (the log is then poisoned), corruption
    /// found by recovery, a log held by another process, a closed log.
    #[error(transparent)]
    Log(#[from] redolog::Error),
    /// A record that is not one of this store's: the log holds something else,
    /// or a newer version wrote it.
    #[error("record {record} of the group at LSN {lsn}: {reason}")]
    Corrupt {
        /// The group's start.
        lsn: Lsn,
        /// The record's number in its group, from 0.
        record: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// An entry, vote or log id failed to serialize.
    #[error("encoding a record: {source}")]
    Encode {
        /// serde_json's error.
        source: serde_json::Error,
    },
}

/// Where an entry lives, and the entry itself while it is cached.
struct Slot<C: RaftTypeConfig> {
    log_id: LogId<C::NodeId>,
    /// The start of its group: where the live reader starts.
    group: Lsn,
    /// The end of its group: the entry is durable once the log is.
    end: Lsn,
    /// Its record number in the group.
    record: usize,
    cached: Option<C::Entry>,
}

/// The store's view of the log, behind one mutex (never held across I/O or
/// an await).
struct State<C: RaftTypeConfig> {
    vote: Option<Vote<C::NodeId>>,
    committed: Option<LogId<C::NodeId>>,
    purged: Option<LogId<C::NodeId>>,
    entries: BTreeMap<u64, Slot<C>>,
    /// The end of the last group: the next group starts here.
    end: Lsn,
    /// The last checkpoint: recovery starts here.
    checkpoint: Lsn,
    /// Entries below this index hold no cached entry.
    uncached_below: u64,
    /// The committed id `save_committed` was given, encoded, not yet in the
    /// log: it goes first in the next group the store appends (or is
    /// appended when the store closes), so it costs no fdatasync of its own.
    pending_committed: Option<Vec<u8>>,
}

impl<C: RaftTypeConfig> State<C> {
    fn truncate(&mut self, since: u64) {
        // The common case, an append past the last entry, has nothing to cut:
        // `split_off` would still walk and rebuild the tree's right edge.
        if self.entries.last_key_value().is_some_and(|(&last, _)| last >= since) {
            drop(self.entries.split_off(&since));
        }
    }

    /// An entry at `index` replaces the one there and every one after it
    /// (Raft's log matching: a new entry at an index ends the old suffix).
    fn insert(&mut self, index: u64, slot: Slot<C>) {
        self.truncate(index);
        self.entries.insert(index, slot);
    }

    fn purge(&mut self, upto: LogId<C::NodeId>) {
        self.entries = self.entries.split_off(&(upto.index + 1));
        if self.purged.as_ref().is_none_or(|purged| purged.index < upto.index) {
            self.purged = Some(upto);
        }
    }

    /// Drops cached entries that are durable, oldest first, down to
    /// `CACHED_ENTRIES`.
    fn evict(&mut self, durable: Lsn) {
        let Some((&last, _)) = self.entries.last_key_value() else { return };
        let keep_from = last.saturating_sub(CACHED_ENTRIES as u64 - 1);
        for (&index, slot) in self.entries.range_mut(self.uncached_below..keep_from) {
            if slot.end > durable {
                break;
            }
            slot.cached = None;
            self.uncached_below = index + 1;
        }
    }
}

/// What the clones of a store share.
struct Shared<C: RaftTypeConfig> {
    log: Log,
    state: Mutex<State<C>>,
    /// The log's capacity: a purge checkpoints once an eighth of it is free
    /// to reclaim.
    capacity: u64,
}

impl<C: RaftTypeConfig> Drop for Shared<C> {
    /// Appends the pending committed id; the log's own drop then writes and
    /// syncs it.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(record) = state.pending_committed.take() {
            // Best effort, as the log's drop is: the committed id is a hint
            // (docs/RAFT.md, "Durability").
            let _ = self.log.append_group(&[&record]);
        }
    }
}

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
        Ok(RedologLogStore { shared: Arc::new(Shared { log, state: Mutex::new(state), capacity }) })
    }

    /// The redolog log underneath: its metrics, its durable LSN.
    pub fn log(&self) -> &Log {
        &self.shared.log
    }

    fn state(&self) -> MutexGuard<'_, State<C>> {
        // A panic while holding the lock leaves maps that are still whole:
        // every update is one map operation.
        self.shared.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `records` as one group, after the pending committed id if
    /// there is one; returns the group's start and end and the number of the
    /// first of `records` in it.
    fn append_group(&self, records: &[Vec<u8>]) -> Result<(Lsn, Lsn, usize), Error> {
        let pending = self.state().pending_committed.take();
        let refs: Vec<&[u8]> = pending.iter().chain(records).map(Vec::as_slice).collect();
        // The store is the log's only appender and appends under `&mut self`,
        // so the group starts where the previous one ended. (A failed append
        // poisons the log: the pending id has nowhere left to go.)
        let end = self.shared.log.append_group(&refs)?;
        let mut state = self.state();
        let start = std::mem::replace(&mut state.end, end);
        Ok((start, end, usize::from(pending.is_some())))
    }

    /// Entries in `range`, from the cache or the files.
    fn entries(&self, range: impl RangeBounds<u64>) -> Result<Vec<C::Entry>, Error> {
        let wanted: Vec<(Option<C::Entry>, Lsn, usize)> = {
            let state = self.state();
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

    /// Checkpoints the log at the group of the first entry kept, once that
    /// frees an eighth of the log: first the vote, the committed id and the
    /// purge point are appended again and made durable after it, so the
    /// checkpoint drops none of them (docs/RAFT.md, "Space").
    async fn reclaim(&self) -> Result<(), Error> {
        let (target, kept) = {
            let state = self.state();
            let target = state.entries.first_key_value().map_or(state.end, |(_, slot)| slot.group);
            if target.as_u64().saturating_sub(state.checkpoint.as_u64()) < self.shared.capacity / 8 {
                return Ok(());
            }
            (
                target,
                Kept::<C> {
                    vote: state.vote.clone(),
                    committed: state.committed.clone(),
                    purged: state.purged.clone(),
                },
            )
        };
        let (_, end, _) = self.append_group(&[record::state(&kept)?])?;
        self.shared.log.wait_async(end, Durability::Synced).await?;
        // A checkpoint writes and syncs a checkpoint block: it runs on a
        // thread of its own (one per eighth of the log), so no executor thread
        // blocks on the disk; the purge awaits it.
        let (done, checkpointed) = C::AsyncRuntime::oneshot();
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new().name("redolog-raft-checkpoint".into()).spawn(move || {
            let result = shared.log.checkpoint(target);
            // Let go of the log before answering: a store dropped right after
            // the purge must close it (and free its directory) at once.
            drop(shared);
            let _ = done.send(result);
        });
        let on_thread = match spawned {
            Ok(_) => checkpointed.await.ok(),
            Err(_) => None,
        };
        match on_thread {
            Some(result) => result?,
            // No thread to spare, or it ended without an answer: checkpoint here.
            None => self.shared.log.checkpoint(target)?,
        }
        self.state().checkpoint = target;
        Ok(())
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
        let state = self.state();
        let last = state.entries.last_key_value().map(|(_, slot)| slot.log_id.clone());
        Ok(LogState { last_purged_log_id: state.purged.clone(), last_log_id: last.or_else(|| state.purged.clone()) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let fail = |error: Error| StorageError::from(StorageIOError::write_vote(AnyError::new(&error)));
        let (_, end, _) = self.append_group(&[record::vote::<C>(vote).map_err(fail)?]).map_err(fail)?;
        self.state().vote = Some(vote.clone());
        self.shared.log.wait_async(end, Durability::Synced).await.map_err(|error| fail(error.into()))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.state().vote.clone())
    }

    async fn save_committed(&mut self, committed: Option<LogId<C::NodeId>>) -> Result<(), StorageError<C::NodeId>> {
        let record = record::committed::<C>(&committed).map_err(|error| write_error(&error))?;
        let mut state = self.state();
        state.pending_committed = Some(record);
        state.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.state().committed.clone())
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
        let (start, end, first) = self.append_group(&records).map_err(|error| write_error(&error))?;
        {
            let mut state = self.state();
            for (number, entry) in entries.into_iter().enumerate() {
                let log_id = entry.get_log_id().clone();
                let index = log_id.index;
                state.insert(index, Slot { log_id, group: start, end, record: first + number, cached: Some(entry) });
            }
            state.evict(self.shared.log.durable_lsn());
        }
        self.shared.log.on_durable(end, Durability::Synced, move |result| {
            callback.log_io_completed(result.map_err(std::io::Error::other));
        });
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.append_group(&[record::truncate(log_id.index)]).map_err(|error| write_error(&error))?;
        self.state().truncate(log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let record = record::purge::<C>(&log_id).map_err(|error| write_error(&error))?;
        self.append_group(&[record]).map_err(|error| write_error(&error))?;
        self.state().purge(log_id);
        self.reclaim().await.map_err(|error| write_error(&error))
    }
}
