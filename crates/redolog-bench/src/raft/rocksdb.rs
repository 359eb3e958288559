//! A RocksDB log store for openraft (cargo feature `peers`), the peer of
//! `redolog-bench raft-store`: written the way openraft's RocksDB example store is —
//! entries, the vote, the committed id and the purge point in one database,
//! entries keyed by their index, one WriteBatch per append, `flush_wal(true)`
//! before the flush callback, serde_json values.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, Entry, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use rocksdb::{Direction, IteratorMode, Options, WriteBatch, DB};

use super::RaftTypes;
use crate::harness::BoxError;

type Failure = StorageError<u64>;

fn fail(error: &(impl std::error::Error + 'static)) -> Failure {
    StorageIOError::write_logs(AnyError::new(error)).into()
}

fn entry_key(index: u64) -> [u8; 9] {
    let mut key = [b'l'; 9];
    key[1..].copy_from_slice(&index.to_be_bytes());
    key
}

/// openraft's log storage on RocksDB.
#[derive(Clone)]
pub struct RocksDbLogStore {
    db: Arc<DB>,
}

// openraft's own error type is what the trait returns, as large as it is.
#[allow(clippy::result_large_err)]
impl RocksDbLogStore {
    pub fn open(dir: &Path) -> Result<Self, BoxError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        Ok(RocksDbLogStore { db: Arc::new(DB::open(&options, dir)?) })
    }

    fn get<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, Failure> {
        match self.db.get(key).map_err(|error| fail(&error))? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(|error| fail(&error))?)),
            None => Ok(None),
        }
    }

    fn put_synced<T: serde::Serialize>(&self, key: &[u8], value: &T) -> Result<(), Failure> {
        self.db.put(key, serde_json::to_vec(value).map_err(|error| fail(&error))?).map_err(|error| fail(&error))?;
        self.db.flush_wal(true).map_err(|error| fail(&error))
    }
}

impl RaftLogReader<RaftTypes> for RocksDbLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<RaftTypes>>, Failure> {
        let start = match range.start_bound() {
            Bound::Included(&index) => index,
            Bound::Excluded(&index) => index + 1,
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        for item in self.db.iterator(IteratorMode::From(&entry_key(start), Direction::Forward)) {
            let (key, value) = item.map_err(|error| fail(&error))?;
            let Some(index) = key.strip_prefix(b"l").and_then(|index| index.try_into().ok()).map(u64::from_be_bytes)
            else {
                break;
            };
            if !range.contains(&index) {
                break;
            }
            entries.push(serde_json::from_slice(&value).map_err(|error| fail(&error))?);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<RaftTypes> for RocksDbLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<RaftTypes>, Failure> {
        let purged: Option<LogId<u64>> = self.get(b"p")?;
        let mut last = purged;
        if let Some(item) = self.db.iterator(IteratorMode::From(&entry_key(u64::MAX), Direction::Reverse)).next() {
            let (key, value) = item.map_err(|error| fail(&error))?;
            if key.starts_with(b"l") {
                let entry: Entry<RaftTypes> = serde_json::from_slice(&value).map_err(|error| fail(&error))?;
                last = Some(entry.log_id);
            }
        }
        Ok(LogState { last_purged_log_id: purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Failure> {
        self.put_synced(b"v", vote)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Failure> {
        self.get(b"v")
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), Failure> {
        self.put_synced(b"c", &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Failure> {
        Ok(self.get::<Option<LogId<u64>>>(b"c")?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<RaftTypes>) -> Result<(), Failure>
    where
        I: IntoIterator<Item = Entry<RaftTypes>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::default();
        for entry in entries {
            batch.put(entry_key(entry.log_id.index), serde_json::to_vec(&entry).map_err(|error| fail(&error))?);
        }
        self.db.write(batch).map_err(|error| fail(&error))?;
        let flushed = self.db.flush_wal(true).map_err(std::io::Error::other);
        callback.log_io_completed(flushed);
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
        let mut batch = WriteBatch::default();
        batch.delete_range(entry_key(log_id.index), entry_key(u64::MAX));
        batch.delete(entry_key(u64::MAX));
        self.db.write(batch).map_err(|error| fail(&error))
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
        let mut batch = WriteBatch::default();
        batch.delete_range(entry_key(0), entry_key(log_id.index + 1));
        batch.put(b"p", serde_json::to_vec(&log_id).map_err(|error| fail(&error))?);
        self.db.write(batch).map_err(|error| fail(&error))
    }
}
