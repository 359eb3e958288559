//! An openraft log store on the `raft-log` crate (cargo feature `peers`), a
//! peer of `redolog-bench raft-store` and `redolog-bench bench --workload raft`: written
//! the way raft-log documents its use (its README and `basic_usage` example) —
//! one `RaftLog` holding entries, the vote and the committed id; every write
//! is buffered and then handed to raft-log's flush worker with `flush`; an
//! append or a vote asks for an fsync (`flush(true, callback)`), and openraft's
//! flush callback is raft-log's callback; the committed id, a truncation and
//! a purge ride along without one (`flush(false, None)`), as raft-log's docs
//! advise. Values are serde_json, as in the RocksDB store, so the three stores
//! encode the same bytes. raft-log's defaults throughout (its payload cache,
//! a 1 ms flush batch wait), and a second configuration, `raft-log-nowait`,
//! with the batch wait at zero: under openraft 0.9, whose core awaits each
//! append's flush before the next, the wait is pure latency, and a user who
//! measured would turn it off.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote,
};
use raft_log::api::raft_log_writer::RaftLogWriter;
use raft_log::codeq::{Decode, Encode};
use raft_log::RaftLog;

use super::RaftTypes;
use crate::harness::BoxError;

type Failure = StorageError<u64>;

fn fail(error: &(impl std::error::Error + 'static)) -> Failure {
    StorageIOError::write_logs(AnyError::new(error)).into()
}

/// A value stored as serde_json behind a 4-byte length (raft-log wants its
/// own `codeq` codec; raft-log checksums each record itself).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Json<T>(T);

impl<T: serde::Serialize> Encode for Json<T> {
    fn encode<W: io::Write>(&self, mut w: W) -> Result<usize, io::Error> {
        let bytes = serde_json::to_vec(&self.0)?;
        let len = u32::try_from(bytes.len()).map_err(io::Error::other)?;
        w.write_all(&len.to_be_bytes())?;
        w.write_all(&bytes)?;
        Ok(4 + bytes.len())
    }
}

impl<T: serde::de::DeserializeOwned> Decode for Json<T> {
    fn decode<R: io::Read>(mut r: R) -> Result<Self, io::Error> {
        let mut len = [0; 4];
        r.read_exact(&mut len)?;
        let mut bytes = vec![0; u32::from_be_bytes(len) as usize];
        r.read_exact(&mut bytes)?;
        Ok(Json(serde_json::from_slice(&bytes)?))
    }
}

/// Who waits for a flush: openraft's append callback, or a vote's waiter.
pub enum Flushed {
    Append(LogFlushed<RaftTypes>),
    Vote(tokio::sync::oneshot::Sender<io::Result<()>>),
}

impl raft_log::Callback for Flushed {
    fn send(self, result: Result<(), io::Error>) {
        match self {
            Flushed::Append(callback) => callback.log_io_completed(result),
            Flushed::Vote(waiter) => {
                let _ = waiter.send(result);
            }
        }
    }
}

/// raft-log's type parameters for openraft's entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Types;

impl raft_log::Types for Types {
    type LogId = Json<LogId<u64>>;
    type LogPayload = Json<EntryPayload<RaftTypes>>;
    type Vote = Json<Vote<u64>>;
    type Callback = Flushed;
    type UserData = Json<()>;

    fn log_index(log_id: &Self::LogId) -> u64 {
        log_id.0.index
    }

    fn payload_size(payload: &Self::LogPayload) -> u64 {
        match &payload.0 {
            EntryPayload::Normal(data) => data.len() as u64,
            _ => 64,
        }
    }
}

/// openraft's log storage on raft-log.
#[derive(Clone)]
pub struct RaftLogStore {
    log: Arc<Mutex<RaftLog<Types>>>,
}

// openraft's own error type is what the trait returns, as large as it is.
#[allow(clippy::result_large_err)]
impl RaftLogStore {
    /// raft-log as configured by default.
    pub fn open(dir: &Path) -> Result<Self, BoxError> {
        Self::open_with(dir, None)
    }

    /// raft-log with its flush worker starting each batch at once.
    pub fn open_without_batch_wait(dir: &Path) -> Result<Self, BoxError> {
        Self::open_with(dir, Some(std::time::Duration::ZERO))
    }

    fn open_with(dir: &Path, flush_batch_wait: Option<std::time::Duration>) -> Result<Self, BoxError> {
        std::fs::create_dir_all(dir)?;
        let mut config = raft_log::Config::new(dir.display());
        config.wal.flush_batch_wait = flush_batch_wait;
        Ok(RaftLogStore { log: Arc::new(Mutex::new(RaftLog::open(Arc::new(config))?)) })
    }

    fn log(&self) -> MutexGuard<'_, RaftLog<Types>> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes with `write`, then hands the buffer to the flush worker
    /// without an fsync: the next synced flush carries it.
    fn write_unsynced(
        &self,
        write: impl FnOnce(&mut RaftLog<Types>) -> io::Result<raft_log::Segment>,
    ) -> Result<(), Failure> {
        let mut log = self.log();
        write(&mut log).map_err(|error| fail(&error))?;
        log.flush(false, None).map_err(|error| fail(&error))
    }
}

impl RaftLogReader<RaftTypes> for RaftLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<RaftTypes>>, Failure> {
        let start = match range.start_bound() {
            Bound::Included(&index) => index,
            Bound::Excluded(&index) => index + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&index) => index + 1,
            Bound::Excluded(&index) => index,
            Bound::Unbounded => u64::MAX,
        };
        let log = self.log();
        log.read(start, end)
            .map(|read| read.map(|(log_id, payload)| Entry { log_id: log_id.0, payload: payload.0 }))
            .collect::<Result<_, _>>()
            .map_err(|error| fail(&error))
    }
}

impl RaftLogStorage<RaftTypes> for RaftLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<RaftTypes>, Failure> {
        let log = self.log();
        let state = log.log_state();
        let purged = state.purged().map(|id| id.0);
        Ok(LogState { last_purged_log_id: purged, last_log_id: state.last().map(|id| id.0).or(purged) })
    }

    async fn get_log_reader(&mut self) -> Self {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Failure> {
        let (done, flushed) = tokio::sync::oneshot::channel();
        {
            let mut log = self.log();
            log.save_vote(Json(*vote)).map_err(|error| fail(&error))?;
            log.flush(true, Some(Flushed::Vote(done))).map_err(|error| fail(&error))?;
        }
        let flushed = flushed.await.map_err(|error| fail(&error))?;
        flushed.map_err(|error| fail(&error))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Failure> {
        Ok(self.log().log_state().vote().map(|vote| vote.0))
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), Failure> {
        match committed {
            Some(committed) => self.write_unsynced(|log| log.commit(Json(committed))),
            None => Ok(()),
        }
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Failure> {
        Ok(self.log().log_state().committed().map(|id| id.0))
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<RaftTypes>) -> Result<(), Failure>
    where
        I: IntoIterator<Item = Entry<RaftTypes>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut log = self.log();
        log.append(entries.into_iter().map(|entry| (Json(entry.log_id), Json(entry.payload))))
            .map_err(|error| fail(&error))?;
        log.flush(true, Some(Flushed::Append(callback))).map_err(|error| fail(&error))
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
        self.write_unsynced(|log| log.truncate(log_id.index))
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
        self.write_unsynced(|log| log.purge(Json(log_id)))
    }
}
