//! Real peers for `redolog-bench bench` (cargo feature `peers`), each doing the same
//! work as redolog: one commit is one record made durable per the durability.
//!
//! - `rocksdb` and `rocksdb-pipelined` (RocksDB through the `rocksdb` crate,
//!   linked to the system library): a `WriteBatch` with one put per commit,
//!   written with `sync` per the durability, WAL on. The memtable is large and
//!   auto-compaction is off, so the WAL dominates. `rocksdb-pipelined` sets
//!   `enable_pipelined_write`: the memtable insert of one group overlaps the
//!   WAL write of the next.
//! - `raft-engine` 0.4 (TiKV's Raft log): a `LogBatch` with one put per commit,
//!   `Engine::write(batch, sync)`; its write barrier groups concurrent writers
//!   (a leader writes every member's batch and, if any asked, fdatasyncs once).
//! - `rocksdb-async` and `raft-engine-async`: the same, driven by Tokio tasks
//!   that run each commit in `spawn_blocking`, as an async user runs a
//!   blocking log today (beside redolog's `async`, `bench --async`).
//! - `okaywal` 0.3 (BonsaiDb's log): one entry with one chunk per commit;
//!   `EntryWriter::commit` always fdatasyncs (grouped across committers), so
//!   under `written` and `buffered` it does more than asked.
//!
//! Every peer does its own file I/O; `--device sim` reaches it through the
//! process-wide fdatasync hook (`sync_hook`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use okaywal::{LogVoid, WriteAheadLog};
use raft_engine::{Config as EngineConfig, Engine, LogBatch};
use redolog::Durability;
use rocksdb::{Options, WriteBatch, WriteOptions, DB};

use super::systems::{OnTasks, Role, System, SystemRow};
use crate::harness::BoxError;

/// The peers' rows of the registry (`systems::registry`).
pub const PEERS: &[SystemRow] = &[
    SystemRow {
        name: "rocksdb",
        aliases: &[],
        role: Role::Peer,
        about: "RocksDB (system library, 7.x): a WriteBatch with one put per commit, sync per the durability",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RocksDbSystem::open(dir, false)?)),
    },
    SystemRow {
        name: "rocksdb-pipelined",
        aliases: &[],
        role: Role::Peer,
        about: "RocksDB with enable_pipelined_write",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RocksDbSystem::open(dir, true)?)),
    },
    SystemRow {
        name: "raft-engine",
        aliases: &[],
        role: Role::Peer,
        about: "raft-engine 0.4 (TiKV's Raft log): a LogBatch with one put per commit, sync per the durability",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(RaftEngineSystem::open(dir)?)),
    },
    SystemRow {
        name: "rocksdb-async",
        aliases: &[],
        role: Role::Peer,
        about: "rocksdb driven by Tokio tasks, each commit in spawn_blocking (how an async user runs it today)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(OnTasks::spawn_blocking(Arc::new(RocksDbSystem::open(dir, false)?)))),
    },
    SystemRow {
        name: "raft-engine-async",
        aliases: &[],
        role: Role::Peer,
        about: "raft-engine driven by Tokio tasks, each commit in spawn_blocking (how an async user runs it today)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(OnTasks::spawn_blocking(Arc::new(RaftEngineSystem::open(dir)?)))),
    },
    SystemRow {
        name: "okaywal",
        aliases: &[],
        role: Role::Peer,
        about: "okaywal 0.3: one entry of one chunk per commit; every commit fdatasyncs",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(OkayWalSystem::open(dir)?)),
    },
];

pub struct RaftEngineSystem {
    engine: Engine,
    next_key: AtomicU64,
}

impl RaftEngineSystem {
    pub fn open(dir: &Path) -> Result<Self, BoxError> {
        let config = EngineConfig { dir: dir.to_string_lossy().into_owned(), ..EngineConfig::default() };
        Ok(RaftEngineSystem { engine: Engine::open(config)?, next_key: AtomicU64::new(0) })
    }
}

impl System for RaftEngineSystem {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        self.commit(record, Durability::Buffered)
    }

    fn wait(&self, _token: u64, durability: Durability) -> Result<(), BoxError> {
        if durability == Durability::Synced {
            self.engine.sync()?;
        }
        Ok(())
    }

    fn commit(&self, record: &[u8], durability: Durability) -> Result<u64, BoxError> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut batch = LogBatch::default();
        // Region 1: one Raft group, as one log.
        batch.put(1, key.to_be_bytes().to_vec(), record.to_vec())?;
        self.engine.write(&mut batch, durability == Durability::Synced)?;
        Ok(key + 1)
    }
}

pub struct RocksDbSystem {
    db: DB,
    next_key: AtomicU64,
}

impl RocksDbSystem {
    /// RocksDB's defaults, but a 256 MiB memtable and no auto-compaction (so
    /// no L0 stall), and with `pipelined` its pipelined write.
    pub fn open(dir: &Path, pipelined: bool) -> Result<Self, BoxError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_write_buffer_size(256 << 20);
        options.set_max_write_buffer_number(4);
        options.set_disable_auto_compactions(true);
        options.set_enable_pipelined_write(pipelined);
        Ok(RocksDbSystem { db: DB::open(&options, dir)?, next_key: AtomicU64::new(0) })
    }
}

impl System for RocksDbSystem {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        self.commit(record, Durability::Buffered)
    }

    fn wait(&self, _token: u64, durability: Durability) -> Result<(), BoxError> {
        if durability == Durability::Synced {
            self.db.flush_wal(true)?;
        }
        Ok(())
    }

    fn commit(&self, record: &[u8], durability: Durability) -> Result<u64, BoxError> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut batch = WriteBatch::default();
        batch.put(key.to_be_bytes(), record);
        let mut options = WriteOptions::default();
        options.set_sync(durability == Durability::Synced);
        self.db.write_opt(batch, &options)?;
        Ok(key + 1)
    }
}

pub struct OkayWalSystem {
    wal: WriteAheadLog,
}

impl OkayWalSystem {
    pub fn open(dir: &Path) -> Result<Self, BoxError> {
        Ok(OkayWalSystem { wal: WriteAheadLog::recover(dir, LogVoid)? })
    }
}

impl System for OkayWalSystem {
    /// Every okaywal commit is synced already.
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        self.commit(record, Durability::Synced)
    }

    fn wait(&self, _token: u64, _durability: Durability) -> Result<(), BoxError> {
        Ok(())
    }

    fn commit(&self, record: &[u8], _durability: Durability) -> Result<u64, BoxError> {
        let mut entry = self.wal.begin_entry()?;
        entry.write_chunk(record)?;
        Ok(entry.commit()?.0)
    }
}
