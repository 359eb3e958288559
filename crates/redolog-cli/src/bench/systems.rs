//! The systems a benchmark compares: redolog and the same-run baselines.
//!
//! - `raw`: one thread, pwrite + fdatasync per record, no buffer: the device's
//!   floor for a durable commit, and the bar for redolog at one thread.
//! - `mutex`: the naive group commit — one mutex around append + write + sync
//!   state, leader/follower with one condition variable broadcast — what a
//!   careful first implementation looks like (and MySQL 5.6's log_sys->mutex).
//!   It uses `std::sync`, whose `notify_all` wakes every waiter like glibc's
//!   `pthread_cond_broadcast`: the design the issue measured in C. (parking_lot's
//!   condvar requeues waiters onto the mutex instead; that variant is faster,
//!   see docs/BENCHMARKS.md.)

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use std::sync::{Condvar, Mutex, MutexGuard};

use parking_lot::Mutex as FastMutex;
use redolog::{Config, Durability, Log, Lsn, Pipeline};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One log implementation under test.
pub trait System: Send + Sync {
    /// Appends one record; returns a token to wait for.
    fn append(&self, record: &[u8]) -> Result<u64, BoxError>;
    /// Waits until the record of `token` has `durability`.
    fn wait(&self, token: u64, durability: Durability) -> Result<(), BoxError>;
    /// One commit: append `record` and wait until it has `durability`. Peers
    /// whose API writes and syncs in one call override this.
    fn commit(&self, record: &[u8], durability: Durability) -> Result<u64, BoxError> {
        let token = self.append(record)?;
        self.wait(token, durability)?;
        Ok(token)
    }
    /// Called every 100 ms while a point runs (redolog: checkpoint, as an engine's
    /// page cleaner would, so the log never fills).
    fn maintain(&self) {}
    /// The system's own counters, if it has any (redolog's metrics).
    fn metrics(&self) -> Option<redolog::Metrics> {
        None
    }
}

/// Which system, by name on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemKind {
    /// redolog as a user gets it: `Pipeline::Auto`.
    #[value(alias = "auto")]
    Redolog,
    /// redolog with `Pipeline::GroupCommit`.
    Group,
    /// redolog with `Pipeline::Dedicated`.
    Dedicated,
    Mutex,
    Raw,
    /// RocksDB (system library, 7.x): a WriteBatch with one put per commit,
    /// `sync` per the durability (cargo feature `peers`).
    #[cfg(feature = "peers")]
    #[value(name = "rocksdb")]
    RocksDb,
    /// RocksDB with `enable_pipelined_write` (cargo feature `peers`).
    #[cfg(feature = "peers")]
    #[value(name = "rocksdb-pipelined")]
    RocksDbPipelined,
    /// raft-engine 0.4 (TiKV's Raft log): a LogBatch with one put per commit,
    /// written with `sync` per the durability (cargo feature `peers`).
    #[cfg(feature = "peers")]
    RaftEngine,
    /// okaywal 0.3: one entry of one chunk per commit; every commit fdatasyncs
    /// (cargo feature `peers`).
    #[cfg(feature = "peers")]
    #[value(name = "okaywal")]
    OkayWal,
}

impl SystemKind {
    /// Whether this is redolog (under some pipeline) rather than a baseline.
    pub fn is_redolog(self) -> bool {
        matches!(self, SystemKind::Redolog | SystemKind::Group | SystemKind::Dedicated)
    }

    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Redolog => "redolog",
            SystemKind::Group => "group",
            SystemKind::Dedicated => "dedicated",
            SystemKind::Mutex => "mutex",
            SystemKind::Raw => "raw",
            #[cfg(feature = "peers")]
            SystemKind::RocksDb => "rocksdb",
            #[cfg(feature = "peers")]
            SystemKind::RocksDbPipelined => "rocksdb-pipelined",
            #[cfg(feature = "peers")]
            SystemKind::RaftEngine => "raft-engine",
            #[cfg(feature = "peers")]
            SystemKind::OkayWal => "okaywal",
        }
    }

    pub fn open(self, dir: &Path) -> Result<Arc<dyn System>, BoxError> {
        let dir = dir.join(self.name());
        std::fs::create_dir_all(&dir)?;
        Ok(match self {
            SystemKind::Redolog => Arc::new(RedologSystem::open(&dir, Pipeline::Auto)?),
            SystemKind::Group => Arc::new(RedologSystem::open(&dir, Pipeline::GroupCommit)?),
            SystemKind::Dedicated => Arc::new(RedologSystem::open(&dir, Pipeline::Dedicated)?),
            SystemKind::Mutex => Arc::new(MutexLog::open(&dir)?),
            SystemKind::Raw => Arc::new(RawLog::open(&dir)?),
            #[cfg(feature = "peers")]
            SystemKind::RocksDb => Arc::new(super::peers::RocksDbSystem::open(&dir, false)?),
            #[cfg(feature = "peers")]
            SystemKind::RocksDbPipelined => Arc::new(super::peers::RocksDbSystem::open(&dir, true)?),
            #[cfg(feature = "peers")]
            SystemKind::RaftEngine => Arc::new(super::peers::RaftEngineSystem::open(&dir)?),
            #[cfg(feature = "peers")]
            SystemKind::OkayWal => Arc::new(super::peers::OkayWalSystem::open(&dir)?),
        })
    }
}

pub struct RedologSystem {
    log: Log,
}

impl RedologSystem {
    fn open(dir: &Path, pipeline: Pipeline) -> Result<Self, BoxError> {
        Self::open_with(dir, Config { pipeline, ..Config::default() })
    }

    /// redolog with `config` (the scenarios' variants), in `dir`.
    pub fn open_with(dir: &Path, config: Config) -> Result<Self, BoxError> {
        std::fs::create_dir_all(dir)?;
        let (log, _) = Log::open(dir, config)?;
        Ok(RedologSystem { log })
    }
}

impl System for RedologSystem {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        Ok(self.log.append(record)?.as_u64())
    }

    fn wait(&self, token: u64, durability: Durability) -> Result<(), BoxError> {
        Ok(self.log.wait(Lsn::from_u64(token), durability)?)
    }

    fn maintain(&self) {
        // Everything durable is "flushed to pages" in this benchmark.
        let _ = self.log.checkpoint(self.log.durable_lsn());
    }

    fn metrics(&self) -> Option<redolog::Metrics> {
        Some(self.log.metrics())
    }
}

/// A zero-filled file written as a ring, like redolog's, so neither baseline
/// pays for metadata updates redolog avoids.
struct RingFile {
    file: File,
    bytes: u64,
}

impl RingFile {
    const BYTES: u64 = 256 << 20;

    fn create(dir: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.join("log"))?;
        let zeros = vec![0u8; 1 << 20];
        for chunk in 0..Self::BYTES >> 20 {
            file.write_all_at(&zeros, chunk << 20)?;
        }
        file.sync_all()?;
        File::open(dir)?.sync_all()?;
        Ok(RingFile { file, bytes: Self::BYTES })
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Writes `data` at stream position `position`, wrapping at the end.
    fn write(&self, data: &[u8], position: u64) -> io::Result<()> {
        let offset = position % self.bytes;
        let first = data.len().min((self.bytes - offset) as usize);
        self.file.write_all_at(&data[..first], offset)?;
        if first < data.len() {
            self.file.write_all_at(&data[first..], 0)?;
        }
        Ok(())
    }
}

fn frame(buffer: &mut Vec<u8>, record: &[u8]) {
    buffer.extend_from_slice(&(record.len() as u32).to_le_bytes());
    buffer.extend_from_slice(&crc32c::crc32c(record).to_le_bytes());
    buffer.extend_from_slice(record);
}

/// The naive design: one mutex, one condition variable.
struct MutexLog {
    ring: RingFile,
    state: Mutex<MutexState>,
    changed: Condvar,
}

#[derive(Default)]
struct MutexState {
    buffer: Vec<u8>,
    appended: u64,
    written: u64,
    synced: u64,
    leader_busy: bool,
}

/// Buffered bytes at which an appender writes the buffer itself.
const MUTEX_BUFFER_BYTES: usize = 1 << 20;

impl MutexLog {
    fn open(dir: &Path) -> io::Result<Self> {
        Ok(MutexLog { ring: RingFile::create(dir)?, state: Mutex::new(MutexState::default()), changed: Condvar::new() })
    }

    fn done(state: &MutexState, token: u64, durability: Durability) -> bool {
        match durability {
            Durability::Buffered => true,
            Durability::Written => state.written >= token,
            Durability::Synced => state.synced >= token,
        }
    }

    fn lock(&self) -> MutexGuard<'_, MutexState> {
        // A panicking benchmark thread has already failed the run.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl System for MutexLog {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        let mut state = self.lock();
        frame(&mut state.buffer, record);
        state.appended += (8 + record.len()) as u64;
        let token = state.appended;
        if state.buffer.len() >= MUTEX_BUFFER_BYTES {
            drop(state);
            self.wait(token, Durability::Written)?;
        }
        Ok(token)
    }

    fn wait(&self, token: u64, durability: Durability) -> Result<(), BoxError> {
        let mut state = self.lock();
        while !Self::done(&state, token, durability) {
            if state.leader_busy {
                state = self.changed.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            state.leader_busy = true;
            let data = std::mem::take(&mut state.buffer);
            let (from, upto) = (state.written, state.appended);
            drop(state);
            self.ring.write(&data, from)?;
            let sync = durability == Durability::Synced;
            if sync {
                self.ring.sync()?;
            }
            state = self.lock();
            state.written = upto;
            if sync {
                state.synced = upto;
            }
            state.leader_busy = false;
            self.changed.notify_all();
        }
        Ok(())
    }
}

/// One write and one fdatasync per record; serialised by a mutex.
struct RawLog {
    ring: RingFile,
    position: FastMutex<u64>,
}

impl RawLog {
    fn open(dir: &Path) -> io::Result<Self> {
        Ok(RawLog { ring: RingFile::create(dir)?, position: FastMutex::new(0) })
    }
}

impl System for RawLog {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        let mut framed = Vec::with_capacity(8 + record.len());
        frame(&mut framed, record);
        let mut position = self.position.lock();
        self.ring.write(&framed, *position)?;
        *position += framed.len() as u64;
        Ok(*position)
    }

    fn wait(&self, _token: u64, durability: Durability) -> Result<(), BoxError> {
        if durability == Durability::Synced {
            let _position = self.position.lock();
            self.ring.sync()?;
        }
        Ok(())
    }
}
