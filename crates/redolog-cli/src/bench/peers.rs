//! Real peers for `redolog bench` (cargo feature `peers`), each doing the same
//! work as redolog: one commit is one record made durable per the durability.
//!
//! - `raft-engine` 0.4 (TiKV's Raft log): a `LogBatch` with one put per commit,
//!   `Engine::write(batch, sync)`; its write barrier groups concurrent writers
//!   (a leader writes every member's batch and, if any asked, fdatasyncs once).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use raft_engine::{Config as EngineConfig, Engine, LogBatch};
use redolog::Durability;

use super::device::Device;
use super::systems::{BoxError, System};

/// Peers do their own file I/O: the simulated fdatasync of `--device sim` lives
/// in redolog's storage layer and around the built-in baselines' own calls.
fn refuse_sim(device: Device, peer: &str) -> Result<(), BoxError> {
    match device {
        Device::Sim { .. } => {
            Err(format!("{peer} does its own I/O: --device {device} cannot slow its fdatasync").into())
        }
        Device::Disk | Device::Tmpfs => Ok(()),
    }
}

pub struct RaftEngineSystem {
    engine: Engine,
    next_key: AtomicU64,
}

impl RaftEngineSystem {
    pub fn open(dir: &Path, device: Device) -> Result<Self, BoxError> {
        refuse_sim(device, "raft-engine")?;
        let config = EngineConfig { dir: dir.to_string_lossy().into_owned(), ..EngineConfig::default() };
        Ok(RaftEngineSystem { engine: Engine::open(config)?, next_key: AtomicU64::new(0) })
    }

    fn write(&self, record: &[u8], sync: bool) -> Result<u64, BoxError> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut batch = LogBatch::default();
        // Region 1: one Raft group, as one log.
        batch.put(1, key.to_be_bytes().to_vec(), record.to_vec())?;
        self.engine.write(&mut batch, sync)?;
        Ok(key + 1)
    }
}

impl System for RaftEngineSystem {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        self.write(record, false)
    }

    fn wait(&self, _token: u64, durability: Durability) -> Result<(), BoxError> {
        if durability == Durability::Synced {
            self.engine.sync()?;
        }
        Ok(())
    }

    fn commit(&self, record: &[u8], durability: Durability) -> Result<u64, BoxError> {
        self.write(record, durability == Durability::Synced)
    }

    fn fsyncs(&self) -> u64 {
        // raft-engine does not count them; records per fsync shows as 0.
        0
    }
}
