//! A RocksDB log store for openraft (cargo feature `peers`), the peer of
//! `redolog-bench raft-store` and `--workload raft`: written the way
//! openraft's RocksDB example store is — entries, the vote, the committed id
//! and the purge point in one database, entries keyed by their index, one
//! WriteBatch per append, `flush_wal(true)` before the flush callback,
//! serde_json values. One implementation for both openraft lines ([`Line`]);
//! what differs is where the flush runs, as in openraft's example of each
//! line: on 0.9 inside `append` (its core awaits the flush anyway), on 0.10
//! on a thread spawned per append, so `append` returns at once
//! (examples/log-rocks in openraft's repository).

use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use rocksdb::{Direction, IteratorMode, Options, WriteBatch, DB};

use super::line::{Ends, Line, V0_10, V0_9};
use super::{openraft010, RaftTypes, RaftTypes010};
use crate::harness::BoxError;

fn entry_key(index: u64) -> [u8; 9] {
    let mut key = [b'l'; 9];
    key[1..].copy_from_slice(&index.to_be_bytes());
    key
}

/// openraft's log storage on RocksDB, for the openraft line `L`.
pub struct RocksDbLogStore<L> {
    db: Arc<DB>,
    line: PhantomData<L>,
}

impl<L> Clone for RocksDbLogStore<L> {
    fn clone(&self) -> Self {
        RocksDbLogStore { db: self.db.clone(), line: PhantomData }
    }
}

impl<L: Line> RocksDbLogStore<L> {
    pub fn open(dir: &Path) -> Result<Self, BoxError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        Ok(RocksDbLogStore { db: Arc::new(DB::open(&options, dir)?), line: PhantomData })
    }

    fn get<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> io::Result<Option<T>> {
        match self.db.get(key).map_err(io::Error::other)? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
            None => Ok(None),
        }
    }

    fn put_synced<T: serde::Serialize>(&self, key: &[u8], value: &T) -> io::Result<()> {
        self.db.put(key, serde_json::to_vec(value)?).map_err(io::Error::other)?;
        self.db.flush_wal(true).map_err(io::Error::other)
    }

    fn entries(&self, range: impl RangeBounds<u64>) -> io::Result<Vec<L::Entry>> {
        let start = match range.start_bound() {
            Bound::Included(&index) => index,
            Bound::Excluded(&index) => index + 1,
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        for item in self.db.iterator(IteratorMode::From(&entry_key(start), Direction::Forward)) {
            let (key, value) = item.map_err(io::Error::other)?;
            let Some(index) = key.strip_prefix(b"l").and_then(|index| index.try_into().ok()).map(u64::from_be_bytes)
            else {
                break;
            };
            if !range.contains(&index) {
                break;
            }
            entries.push(serde_json::from_slice(&value)?);
        }
        Ok(entries)
    }

    /// The last purged and the last log id.
    fn log_state(&self) -> io::Result<Ends<L>> {
        let purged: Option<L::LogId> = self.get(b"p")?;
        let mut last = purged.clone();
        if let Some(item) = self.db.iterator(IteratorMode::From(&entry_key(u64::MAX), Direction::Reverse)).next() {
            let (key, value) = item.map_err(io::Error::other)?;
            if key.starts_with(b"l") {
                let entry: L::Entry = serde_json::from_slice(&value)?;
                last = Some(L::split(entry).0);
            }
        }
        Ok((purged, last))
    }

    fn committed(&self) -> io::Result<Option<L::LogId>> {
        Ok(self.get::<Option<L::LogId>>(b"c")?.flatten())
    }

    /// Writes the entries in one batch, unsynced.
    fn write_entries(&self, entries: impl IntoIterator<Item = L::Entry>) -> io::Result<()> {
        let mut batch = WriteBatch::default();
        for entry in entries {
            let bytes = serde_json::to_vec(&entry)?;
            batch.put(entry_key(L::index(&L::split(entry).0)), bytes);
        }
        self.db.write(batch).map_err(io::Error::other)
    }

    /// Removes the entries from `since` on.
    fn truncate(&self, since: u64) -> io::Result<()> {
        let mut batch = WriteBatch::default();
        batch.delete_range(entry_key(since), entry_key(u64::MAX));
        batch.delete(entry_key(u64::MAX));
        self.db.write(batch).map_err(io::Error::other)
    }

    fn purge(&self, upto: &L::LogId) -> io::Result<()> {
        let mut batch = WriteBatch::default();
        batch.delete_range(entry_key(0), entry_key(L::index(upto) + 1));
        batch.put(b"p", serde_json::to_vec(upto)?);
        self.db.write(batch).map_err(io::Error::other)
    }
}

/// The openraft 0.9 traits.
mod on_0_9 {
    use openraft::storage::{LogFlushed, RaftLogStorage};
    use openraft::{AnyError, Entry, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};

    use super::*;

    type Failure = StorageError<u64>;

    fn fail(error: &io::Error) -> Failure {
        StorageIOError::write_logs(AnyError::new(error)).into()
    }

    impl RaftLogReader<RaftTypes> for RocksDbLogStore<V0_9> {
        async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
            &mut self,
            range: RB,
        ) -> Result<Vec<Entry<RaftTypes>>, Failure> {
            self.entries(range).map_err(|error| fail(&error))
        }
    }

    impl RaftLogStorage<RaftTypes> for RocksDbLogStore<V0_9> {
        type LogReader = Self;

        async fn get_log_state(&mut self) -> Result<LogState<RaftTypes>, Failure> {
            let (last_purged_log_id, last_log_id) = self.log_state().map_err(|error| fail(&error))?;
            Ok(LogState { last_purged_log_id, last_log_id })
        }

        async fn get_log_reader(&mut self) -> Self {
            self.clone()
        }

        async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Failure> {
            self.put_synced(b"v", vote).map_err(|error| fail(&error))
        }

        async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Failure> {
            self.get(b"v").map_err(|error| fail(&error))
        }

        async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), Failure> {
            self.put_synced(b"c", &committed).map_err(|error| fail(&error))
        }

        async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Failure> {
            self.committed().map_err(|error| fail(&error))
        }

        async fn append<I>(&mut self, entries: I, callback: LogFlushed<RaftTypes>) -> Result<(), Failure>
        where
            I: IntoIterator<Item = Entry<RaftTypes>> + OptionalSend,
            I::IntoIter: OptionalSend,
        {
            self.write_entries(entries).map_err(|error| fail(&error))?;
            callback.log_io_completed(self.db.flush_wal(true).map_err(io::Error::other));
            Ok(())
        }

        async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
            RocksDbLogStore::truncate(self, log_id.index).map_err(|error| fail(&error))
        }

        async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
            RocksDbLogStore::purge(self, &log_id).map_err(|error| fail(&error))
        }
    }
}

/// The openraft 0.10 traits, for the type config `$types`: the in-process
/// cluster's and the key-value node's (`redolog-bench kv-node`).
macro_rules! on_0_10 {
    ($types:ty) => {
        impl openraft010::storage::RaftLogReader<$types> for RocksDbLogStore<V0_10<$types>> {
            async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + openraft010::OptionalSend>(
                &mut self,
                range: RB,
            ) -> io::Result<Vec<openraft010::alias::EntryOf<$types>>> {
                self.entries(range)
            }

            async fn read_vote(&mut self) -> io::Result<Option<openraft010::alias::VoteOf<$types>>> {
                self.get(b"v")
            }
        }

        impl openraft010::storage::RaftLogStorage<$types> for RocksDbLogStore<V0_10<$types>> {
            type LogReader = Self;

            async fn get_log_state(&mut self) -> io::Result<openraft010::storage::LogState<$types>> {
                let (last_purged_log_id, last_log_id) = self.log_state()?;
                Ok(openraft010::storage::LogState { last_purged_log_id, last_log_id })
            }

            async fn get_log_reader(&mut self) -> Self {
                self.clone()
            }

            async fn save_vote(&mut self, vote: &openraft010::alias::VoteOf<$types>) -> io::Result<()> {
                self.put_synced(b"v", vote)
            }

            async fn save_committed(
                &mut self,
                committed: Option<openraft010::alias::LogIdOf<$types>>,
            ) -> io::Result<()> {
                self.put_synced(b"c", &committed)
            }

            async fn read_committed(&mut self) -> io::Result<Option<openraft010::alias::LogIdOf<$types>>> {
                self.committed()
            }

            async fn append<I>(
                &mut self,
                entries: I,
                callback: openraft010::storage::IOFlushed<$types>,
            ) -> io::Result<()>
            where
                I: IntoIterator<Item = openraft010::alias::EntryOf<$types>> + openraft010::OptionalSend,
                I::IntoIter: openraft010::OptionalSend,
            {
                self.write_entries(entries)?;
                // As openraft's example: the entries are readable now; the
                // flush and the callback run on a thread of their own.
                let db = self.db.clone();
                std::thread::spawn(move || callback.io_completed(db.flush_wal(true).map_err(io::Error::other)));
                Ok(())
            }

            async fn truncate_after(
                &mut self,
                last_log_id: Option<openraft010::alias::LogIdOf<$types>>,
            ) -> io::Result<()> {
                RocksDbLogStore::truncate(self, last_log_id.map_or(0, |log_id| log_id.index + 1))
            }

            async fn purge(&mut self, log_id: openraft010::alias::LogIdOf<$types>) -> io::Result<()> {
                RocksDbLogStore::purge(self, &log_id)
            }
        }
    };
}

on_0_10!(RaftTypes010);
on_0_10!(redolog_kv::TypeConfig);
