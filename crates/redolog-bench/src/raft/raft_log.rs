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
//! measured would turn it off. One implementation for both openraft lines
//! ([`Line`]): raft-log's flush worker already returns at once, so the
//! lines differ only in their trait signatures.

use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use raft_log::api::raft_log_writer::RaftLogWriter;
use raft_log::codeq::{Decode, Encode};
use raft_log::RaftLog;

use super::line::{Ends, Line, V0_10, V0_9};
use super::{openraft010, RaftTypes, RaftTypes010};
use crate::harness::BoxError;

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
pub enum Flushed<L: Line> {
    Append(L::Flushed),
    Vote(tokio::sync::oneshot::Sender<io::Result<()>>),
}

impl<L: Line> raft_log::Callback for Flushed<L> {
    fn send(self, result: Result<(), io::Error>) {
        match self {
            Flushed::Append(callback) => L::completed(callback, result),
            Flushed::Vote(waiter) => {
                let _ = waiter.send(result);
            }
        }
    }
}

/// raft-log's type parameters for a line's entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Types<L>(PhantomData<L>);

impl<L: Line> raft_log::Types for Types<L> {
    type LogId = Json<L::LogId>;
    type LogPayload = Json<L::Payload>;
    type Vote = Json<L::Vote>;
    type Callback = Flushed<L>;
    type UserData = Json<()>;

    fn log_index(log_id: &Self::LogId) -> u64 {
        L::index(&log_id.0)
    }

    fn payload_size(payload: &Self::LogPayload) -> u64 {
        L::payload_size(&payload.0)
    }
}

/// openraft's log storage on raft-log, for the openraft line `L`.
pub struct RaftLogStore<L: Line> {
    log: Arc<Mutex<RaftLog<Types<L>>>>,
}

impl<L: Line> Clone for RaftLogStore<L> {
    fn clone(&self) -> Self {
        RaftLogStore { log: self.log.clone() }
    }
}

impl<L: Line> RaftLogStore<L> {
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

    fn log(&self) -> MutexGuard<'_, RaftLog<Types<L>>> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes with `write`, then hands the buffer to the flush worker
    /// without an fsync: the next synced flush carries it.
    fn write_unsynced(
        &self,
        write: impl FnOnce(&mut RaftLog<Types<L>>) -> io::Result<raft_log::Segment>,
    ) -> io::Result<()> {
        let mut log = self.log();
        write(&mut log)?;
        log.flush(false, None)
    }

    fn entries(&self, range: impl RangeBounds<u64>) -> io::Result<Vec<L::Entry>> {
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
        log.read(start, end).map(|read| read.map(|(log_id, payload)| L::join(log_id.0, payload.0))).collect()
    }

    /// The last purged and the last log id.
    fn log_state(&self) -> Ends<L> {
        let log = self.log();
        let state = log.log_state();
        let purged = state.purged().map(|id| id.0.clone());
        let last = state.last().map(|id| id.0.clone()).or_else(|| purged.clone());
        (purged, last)
    }

    /// Writes the vote and waits for its fsync.
    async fn save_vote(&self, vote: &L::Vote) -> io::Result<()> {
        let (done, flushed) = tokio::sync::oneshot::channel();
        {
            let mut log = self.log();
            log.save_vote(Json(vote.clone()))?;
            log.flush(true, Some(Flushed::Vote(done)))?;
        }
        flushed.await.map_err(io::Error::other)?
    }

    fn vote(&self) -> Option<L::Vote> {
        self.log().log_state().vote().map(|vote| vote.0.clone())
    }

    fn save_committed(&self, committed: Option<L::LogId>) -> io::Result<()> {
        match committed {
            Some(committed) => self.write_unsynced(|log| log.commit(Json(committed))),
            None => Ok(()),
        }
    }

    fn committed(&self) -> Option<L::LogId> {
        self.log().log_state().committed().map(|id| id.0.clone())
    }

    /// Appends, and asks the flush worker for an fsync that then calls
    /// `callback`.
    fn append(&self, entries: impl IntoIterator<Item = L::Entry>, callback: L::Flushed) -> io::Result<()> {
        let mut log = self.log();
        log.append(entries.into_iter().map(|entry| {
            let (log_id, payload) = L::split(entry);
            (Json(log_id), Json(payload))
        }))?;
        log.flush(true, Some(Flushed::Append(callback)))
    }

    fn truncate(&self, since: u64) -> io::Result<()> {
        self.write_unsynced(|log| log.truncate(since))
    }

    fn purge(&self, upto: L::LogId) -> io::Result<()> {
        self.write_unsynced(|log| log.purge(Json(upto)))
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

    impl RaftLogReader<RaftTypes> for RaftLogStore<V0_9> {
        async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
            &mut self,
            range: RB,
        ) -> Result<Vec<Entry<RaftTypes>>, Failure> {
            self.entries(range).map_err(|error| fail(&error))
        }
    }

    impl RaftLogStorage<RaftTypes> for RaftLogStore<V0_9> {
        type LogReader = Self;

        async fn get_log_state(&mut self) -> Result<LogState<RaftTypes>, Failure> {
            let (last_purged_log_id, last_log_id) = self.log_state();
            Ok(LogState { last_purged_log_id, last_log_id })
        }

        async fn get_log_reader(&mut self) -> Self {
            self.clone()
        }

        async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Failure> {
            RaftLogStore::save_vote(self, vote).await.map_err(|error| fail(&error))
        }

        async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Failure> {
            Ok(self.vote())
        }

        async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), Failure> {
            RaftLogStore::save_committed(self, committed).map_err(|error| fail(&error))
        }

        async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Failure> {
            Ok(self.committed())
        }

        async fn append<I>(&mut self, entries: I, callback: LogFlushed<RaftTypes>) -> Result<(), Failure>
        where
            I: IntoIterator<Item = Entry<RaftTypes>> + OptionalSend,
            I::IntoIter: OptionalSend,
        {
            RaftLogStore::append(self, entries, callback).map_err(|error| fail(&error))
        }

        async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
            RaftLogStore::truncate(self, log_id.index).map_err(|error| fail(&error))
        }

        async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Failure> {
            RaftLogStore::purge(self, log_id).map_err(|error| fail(&error))
        }
    }
}

/// The openraft 0.10 traits.
mod on_0_10 {
    use openraft010::alias::{EntryOf, LogIdOf, VoteOf};
    use openraft010::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
    use openraft010::OptionalSend;

    use super::*;

    impl RaftLogReader<RaftTypes010> for RaftLogStore<V0_10> {
        async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
            &mut self,
            range: RB,
        ) -> io::Result<Vec<EntryOf<RaftTypes010>>> {
            self.entries(range)
        }

        async fn read_vote(&mut self) -> io::Result<Option<VoteOf<RaftTypes010>>> {
            Ok(self.vote())
        }
    }

    impl RaftLogStorage<RaftTypes010> for RaftLogStore<V0_10> {
        type LogReader = Self;

        async fn get_log_state(&mut self) -> io::Result<LogState<RaftTypes010>> {
            let (last_purged_log_id, last_log_id) = self.log_state();
            Ok(LogState { last_purged_log_id, last_log_id })
        }

        async fn get_log_reader(&mut self) -> Self {
            self.clone()
        }

        async fn save_vote(&mut self, vote: &VoteOf<RaftTypes010>) -> io::Result<()> {
            RaftLogStore::save_vote(self, vote).await
        }

        async fn save_committed(&mut self, committed: Option<LogIdOf<RaftTypes010>>) -> io::Result<()> {
            RaftLogStore::save_committed(self, committed)
        }

        async fn read_committed(&mut self) -> io::Result<Option<LogIdOf<RaftTypes010>>> {
            Ok(self.committed())
        }

        async fn append<I>(&mut self, entries: I, callback: IOFlushed<RaftTypes010>) -> io::Result<()>
        where
            I: IntoIterator<Item = EntryOf<RaftTypes010>> + OptionalSend,
            I::IntoIter: OptionalSend,
        {
            RaftLogStore::append(self, entries, callback)
        }

        async fn truncate_after(&mut self, last_log_id: Option<LogIdOf<RaftTypes010>>) -> io::Result<()> {
            RaftLogStore::truncate(self, last_log_id.map_or(0, |log_id| log_id.index + 1))
        }

        async fn purge(&mut self, log_id: LogIdOf<RaftTypes010>) -> io::Result<()> {
            RaftLogStore::purge(self, log_id)
        }
    }
}
