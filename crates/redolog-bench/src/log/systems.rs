//! The systems a benchmark compares: redolog and the same-run baselines, as a
//! registry of rows (`SystemRow`: name, role, help, how to open it); the real
//! peers add theirs in `peers.rs`. A new system is one row and the file that
//! implements `System` for it.
//!
//! - `raw`: one thread, pwrite + fdatasync per record, no buffer: the device's
//!   floor for a durable commit, and the bar for redolog at one thread.
//! - `mutex`: the naive group commit — one mutex around append + write + sync
//!   state, leader/follower with one condition variable broadcast — what a
//!   careful first implementation looks like (and MySQL 5.6's log_sys->mutex).
//!   It uses `std::sync`, whose `notify_all` wakes every waiter like glibc's
//!   `pthread_cond_broadcast`: the design MySQL bug #77094 describes. (parking_lot's
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

use crate::harness::BoxError;

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
    /// How a point drives the system: one OS thread per committer, unless
    /// the system says otherwise.
    fn driver(&self) -> Driver {
        Driver::Threads
    }
}

/// How a point's committers run.
#[derive(Clone)]
pub enum Driver {
    /// One OS thread per committer, calling `System::commit`.
    Threads,
    /// One Tokio task per committer, awaiting `Log::commit_async` (`async`).
    Futures(Arc<Log>),
    /// One Tokio task per committer, each commit a blocking call in
    /// `tokio::task::spawn_blocking`: how an async user drives a log whose API
    /// blocks (`rocksdb-async`, `raft-engine-async`). Tokio's blocking pool
    /// has at most 512 threads by default; commits beyond it queue.
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    SpawnBlocking(Arc<dyn System>),
}

/// What a system is to the report: the ratio column divides by redolog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// redolog, under some pipeline or configuration.
    Redolog,
    /// A baseline written here (`mutex`, `raw`).
    Baseline,
    /// A real log a user would pick instead (cargo feature `peers`).
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    Peer,
}

/// One row of the registry: a system `--systems` can name. A new peer is one
/// row here (or in `peers.rs`) and the file that implements `System` for it.
pub struct SystemRow {
    pub name: &'static str,
    /// Other names `--systems` accepts.
    pub aliases: &'static [&'static str],
    pub role: Role,
    /// What it is, for `--help`.
    pub about: &'static str,
    /// Runs at one thread only (`raw`: the device's floor).
    pub one_thread_only: bool,
    /// Opens the system in a directory of its own.
    pub open: fn(&Path) -> Result<Arc<dyn System>, BoxError>,
}

/// The systems built into every build.
pub const SYSTEMS: &[SystemRow] = &[
    SystemRow {
        name: "redolog",
        aliases: &["auto"],
        role: Role::Redolog,
        about: "redolog as a user gets it: Pipeline::Auto",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RedologSystem::open(dir, Pipeline::Auto)?)),
    },
    SystemRow {
        name: "group",
        aliases: &[],
        role: Role::Redolog,
        about: "redolog with Pipeline::GroupCommit",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RedologSystem::open(dir, Pipeline::GroupCommit)?)),
    },
    SystemRow {
        name: "dedicated",
        aliases: &[],
        role: Role::Redolog,
        about: "redolog with Pipeline::Dedicated",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RedologSystem::open(dir, Pipeline::Dedicated)?)),
    },
    SystemRow {
        name: "mtr",
        aliases: &[],
        role: Role::Redolog,
        about: "redolog as an engine drives it: begin_group, then close (Pipeline::Auto)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(MtrSystem(RedologSystem::open(dir, Pipeline::Auto)?))),
    },
    SystemRow {
        name: "async",
        aliases: &[],
        role: Role::Redolog,
        about: "redolog through futures: each of --threads is a Tokio task awaiting commit_async, on one worker \
                per usable CPU (Pipeline::Auto)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(OnTasks::futures(RedologSystem::open(dir, Pipeline::Auto)?))),
    },
    SystemRow {
        name: "encrypted",
        aliases: &[],
        role: Role::Redolog,
        about: "redolog with Config::encryption: every block sealed with AES-256-GCM by the writer (Pipeline::Auto)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RedologSystem::open_with(dir, encrypted_config())?)),
    },
    SystemRow {
        name: "mutex",
        aliases: &[],
        role: Role::Baseline,
        about: "one mutex around append + write + fdatasync, leader/follower with one condvar",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(MutexLog::open(dir)?)),
    },
    SystemRow {
        name: "raw",
        aliases: &[],
        role: Role::Baseline,
        about: "one thread, write + fdatasync per record: the device's floor",
        one_thread_only: true,
        open: |dir| Ok(Arc::new(RawLog::open(dir)?)),
    },
];

/// redolog with `Config::encryption`, under a fixed benchmark key: what
/// `encrypted` and `read-back --encrypted` run.
pub fn encrypted_config() -> Config {
    use redolog::encryption::{Encryption, Key, Keys};
    let keys = Keys::new().with_key(1, Key::from_bytes([0x42; 32]));
    Config::default().with_encryption(Encryption::new(keys))
}

pub struct RedologSystem {
    /// Shared with the tasks of the `async` system.
    log: Arc<Log>,
}

impl RedologSystem {
    fn open(dir: &Path, pipeline: Pipeline) -> Result<Self, BoxError> {
        Self::open_with(dir, Config::default().with_pipeline(pipeline))
    }

    /// redolog with `config` (the scenarios' variants), in `dir`.
    pub fn open_with(dir: &Path, config: Config) -> Result<Self, BoxError> {
        std::fs::create_dir_all(dir)?;
        let (log, _) = Log::open(dir, config)?;
        Ok(RedologSystem { log: Arc::new(log) })
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

/// redolog driven as an engine drives it: each record a mini-transaction,
/// begun (its LSNs known, the closed window waited for) and then closed.
pub struct MtrSystem(pub RedologSystem);

impl System for MtrSystem {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        let mtr = self.0.log.begin_group(&[record])?;
        let end = mtr.end_lsn();
        mtr.close();
        Ok(end.as_u64())
    }

    fn wait(&self, token: u64, durability: Durability) -> Result<(), BoxError> {
        self.0.wait(token, durability)
    }

    fn maintain(&self) {
        self.0.maintain();
    }

    fn metrics(&self) -> Option<redolog::Metrics> {
        self.0.metrics()
    }
}

/// A system whose points run Tokio tasks instead of threads (`driver`):
/// every call but the driver goes to `system`.
pub struct OnTasks {
    system: Arc<dyn System>,
    driver: Driver,
}

impl OnTasks {
    /// redolog through `commit_async` (`async`): no thread per waiter.
    pub fn futures(redolog: RedologSystem) -> Self {
        let driver = Driver::Futures(redolog.log.clone());
        OnTasks { system: Arc::new(redolog), driver }
    }

    /// A blocking system, each commit in `spawn_blocking`: the peers as an
    /// async user runs them today.
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub fn spawn_blocking(system: Arc<dyn System>) -> Self {
        OnTasks { driver: Driver::SpawnBlocking(system.clone()), system }
    }
}

impl System for OnTasks {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        self.system.append(record)
    }

    fn wait(&self, token: u64, durability: Durability) -> Result<(), BoxError> {
        self.system.wait(token, durability)
    }

    fn commit(&self, record: &[u8], durability: Durability) -> Result<u64, BoxError> {
        self.system.commit(record, durability)
    }

    fn maintain(&self) {
        self.system.maintain();
    }

    fn metrics(&self) -> Option<redolog::Metrics> {
        self.system.metrics()
    }

    fn driver(&self) -> Driver {
        self.driver.clone()
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
