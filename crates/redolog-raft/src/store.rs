//! [`LogStore`]: the store itself, one implementation for every openraft
//! line — open and recovery, reads through the position index and the cache,
//! the vote, the committed id, appends whose callback fires once they are
//! durable, truncate, purge and space. The line modules
//! ([`openraft_0_9`](crate::openraft_0_9), [`openraft_0_10`](crate::openraft_0_10))
//! implement openraft's traits on it and convert errors; nothing else.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use redolog::{Config, Durability, Log, Lsn};

use crate::error::Error;
use crate::line::Line;
use crate::record::{self, Record};
use crate::space;
use crate::state::{Appended, Shared, Slot, State};

/// openraft's log storage on one redolog log, for the openraft line `L`.
/// Clones share the log: the store is its own `LogReader`. Users name it
/// through their line's alias, [`openraft_0_9::RedologLogStore`] or
/// [`openraft_0_10::RedologLogStore`].
///
/// [`openraft_0_9::RedologLogStore`]: crate::openraft_0_9::RedologLogStore
/// [`openraft_0_10::RedologLogStore`]: crate::openraft_0_10::RedologLogStore
pub struct LogStore<L: Line> {
    shared: Arc<Shared<L>>,
}

impl<L: Line> Clone for LogStore<L> {
    fn clone(&self) -> Self {
        LogStore { shared: self.shared.clone() }
    }
}

impl<L: Line> Debug for LogStore<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").field("end_lsn", &self.shared.log.end_lsn()).finish_non_exhaustive()
    }
}

impl<L: Line> LogStore<L> {
    /// Opens (or creates) the log in `dir` and rebuilds the store's state by
    /// recovery: the vote, the committed id, the purge point and the position
    /// of every entry. `config` is redolog's; its capacity bounds the entries
    /// kept between two purges.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), redolog_raft::Error> {
    /// use std::io::Cursor; // the default snapshot type of 0.9's declare_raft_types
    /// openraft::declare_raft_types!(pub TypeConfig);
    /// let store = redolog_raft::openraft_0_9::RedologLogStore::<TypeConfig>::open(
    ///     "node-1/raft-log",
    ///     redolog::Config::default(),
    /// )?;
    /// println!("recovered up to LSN {}", store.log().end_lsn());
    /// # Ok(()) }
    /// ```
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
                match record::decode::<L>(bytes).map_err(corrupt)? {
                    Record::Entry { index } => {
                        let entry = record::entry_body::<L>(bytes).map_err(corrupt)?;
                        let slot = Slot {
                            log_id: L::log_id(&entry),
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
        Ok(LogStore { shared: Arc::new(Shared::new(log, state, capacity)) })
    }

    /// The redolog log underneath: its metrics, its durable LSN.
    pub fn log(&self) -> &Log {
        &self.shared.log
    }

    /// Entries in `range`, from the cache or the files.
    pub(crate) fn entries(&self, range: impl RangeBounds<u64>) -> Result<Vec<L::Entry>, Error> {
        let wanted: Vec<(Option<L::Entry>, Lsn, usize)> = {
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
            entries.push(record::entry_body::<L>(bytes).map_err(corrupt)?);
        }
        Ok(entries)
    }

    /// The last purged log id and the last log id (the purged one when no
    /// entry is left), as openraft's `LogState` has them.
    pub(crate) fn log_state(&self) -> (Option<L::LogId>, Option<L::LogId>) {
        let state = self.shared.state();
        let last = state.entries.last_key_value().map(|(_, slot)| slot.log_id.clone());
        (state.purged.clone(), last.or_else(|| state.purged.clone()))
    }

    pub(crate) fn vote(&self) -> Option<L::Vote> {
        self.shared.state().vote.clone()
    }

    pub(crate) fn committed(&self) -> Option<L::LogId> {
        self.shared.state().committed.clone()
    }

    /// Appends the vote and returns once it is durable.
    pub(crate) async fn save_vote(&self, vote: &L::Vote) -> Result<(), Error> {
        let record = record::vote::<L>(vote)?;
        let end = self.shared.append_group(&[record], |state, appended| {
            state.vote = Some(vote.clone());
            appended.end
        })?;
        Ok(self.shared.log.wait_async(end, Durability::Synced).await?)
    }

    /// Keeps the committed id for the next group ([RAFT](crate::docs::raft),
    /// "Durability"): no append, no fdatasync of its own.
    pub(crate) fn save_committed(&self, committed: Option<L::LogId>) -> Result<(), Error> {
        let record = record::committed::<L>(&committed)?;
        let mut state = self.shared.state();
        state.pending_committed = Some(record);
        state.committed = committed;
        Ok(())
    }

    /// Appends `entries` as one group, readable at once, and calls `flushed`
    /// from a log thread once the group is durable — with the error that
    /// poisoned the log if it never will be ([RAFT, "Durability"](crate::docs::raft#durability) and
    /// "Two openraft lines"). Only 0.10's core hands appends over without
    /// waiting; 0.9's waits in `append_and_wait`.
    #[cfg(feature = "openraft-0.10")]
    pub(crate) fn append(
        &self,
        entries: impl IntoIterator<Item = L::Entry>,
        flushed: impl FnOnce(std::io::Result<()>) + Send + 'static,
    ) -> Result<(), Error> {
        match self.append_entries(entries)? {
            Some(end) => self
                .shared
                .log
                .on_durable(end, Durability::Synced, move |result| flushed(result.map_err(std::io::Error::other))),
            None => flushed(Ok(())),
        }
        Ok(())
    }

    /// `append` for a core that awaits every append's flush before it does
    /// anything else (openraft 0.9's): nothing can overlap the flush, so it
    /// is waited for here, on the calling thread, as `Log::wait` does — in
    /// group commit that thread writes and syncs itself, without the hand-offs
    /// to the log threads and back (RocksDB's store also syncs in `append`).
    #[cfg(feature = "openraft-0.9")]
    pub(crate) fn append_and_wait(
        &self,
        entries: impl IntoIterator<Item = L::Entry>,
        flushed: impl FnOnce(std::io::Result<()>),
    ) -> Result<(), Error> {
        let result = match self.append_entries(entries)? {
            Some(end) => self.shared.log.wait(end, Durability::Synced).map_err(std::io::Error::other),
            None => Ok(()),
        };
        flushed(result);
        Ok(())
    }

    /// Appends the entries as one group; returns its end (`None`: no entries).
    fn append_entries(&self, entries: impl IntoIterator<Item = L::Entry>) -> Result<Option<Lsn>, Error> {
        let entries: Vec<L::Entry> = entries.into_iter().collect();
        let records = entries
            .iter()
            .map(|entry| record::entry::<L>(L::index(&L::log_id(entry)), entry))
            .collect::<Result<Vec<_>, _>>()?;
        if records.is_empty() {
            return Ok(None);
        }
        let durable = self.shared.log.durable_lsn();
        let end = self.shared.append_group(&records, |state, Appended { start, end, first }| {
            for (number, entry) in entries.into_iter().enumerate() {
                let log_id = L::log_id(&entry);
                let index = L::index(&log_id);
                let slot = Slot { log_id, group: start, end, record: first + number, cached: Some(entry) };
                state.insert(index, slot);
            }
            state.evict(durable);
            end
        })?;
        Ok(Some(end))
    }

    /// Removes the entries from index `since` on. Appended, not waited for:
    /// the next durable append or vote makes it durable too.
    pub(crate) fn truncate(&self, since: u64) -> Result<(), Error> {
        self.shared.append_group(&[record::truncate(since)], |state, _| state.truncate(since))
    }

    /// Removes the entries up to `upto` (inclusive) and reclaims the space
    /// they held once that is an eighth of the log ([RAFT, "Space"](crate::docs::raft#space)).
    pub(crate) async fn purge(&self, upto: L::LogId) -> Result<(), Error> {
        let record = record::purge::<L>(&upto)?;
        self.shared.append_group(&[record], |state, _| state.purge(upto))?;
        space::reclaim(&self.shared).await
    }
}
