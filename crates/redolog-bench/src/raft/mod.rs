//! The openraft log store: in a three-node cluster (`--workload raft`,
//! `cluster`) and alone (`redolog-bench raft-store`, `alone`). Both open their
//! stores through one factory (`stores`) and sweep through the one round
//! driver; the peers (`rocksdb`, `raft_log`) come with `--features peers`.

pub mod alone;
pub mod cluster;
#[cfg(feature = "peers")]
pub mod raft_log;
#[cfg(feature = "peers")]
pub mod rocksdb;
pub mod stores;

/// The benchmarks' openraft types: redolog-raft's in-process cluster's
/// (string commands and responses, `u64` node ids, openraft's defaults
/// otherwise).
pub type RaftTypes = redolog_raft::openraft_0_9::in_process::TypeConfig;
