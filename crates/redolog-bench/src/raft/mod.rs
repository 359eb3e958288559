//! The openraft log store: in a three-node cluster (`--workload raft`,
//! `cluster`) and alone (`redolog-bench raft-store`, `alone`), and the
//! key-value service across processes (`--workload kv`, `service`). Both
//! store workloads open their stores through one factory (`stores`) and
//! sweep through the one round driver; the peers (`rocksdb`, `raft_log`,
//! `etcd`) come with `--features peers`. The cluster runs on both openraft
//! lines ([`OpenraftLine`]); the peers implement both lines' traits over one
//! implementation each, through `line::Line`, as redolog-raft does.
//!
//! Everything but the options is built with the `raft` feature only
//! (`peers` turns it on): openraft's two lines, Tokio's servers and the
//! HTTP stack are most of this binary's dependencies, and the README's
//! benchmark of the log needs none of them.

pub mod options;

pub use options::{ClusterOptions, OpenraftLine, Placement, RaftStoreOptions, ServiceOptions};

#[cfg(feature = "raft")]
pub mod alone;
#[cfg(feature = "raft")]
pub mod cluster;
#[cfg(feature = "peers")]
pub mod etcd;
#[cfg(feature = "peers")]
pub mod line;
#[cfg(feature = "raft")]
pub mod processes;
#[cfg(feature = "peers")]
pub mod raft_log;
#[cfg(feature = "peers")]
pub mod rocksdb;
#[cfg(feature = "raft")]
pub mod service;
#[cfg(feature = "raft")]
pub mod stores;
#[cfg(feature = "raft")]
pub mod sweep;

/// The benchmarks' openraft 0.9 types: redolog-raft's in-process cluster's
/// (string commands and responses, `u64` node ids, openraft's defaults
/// otherwise).
#[cfg(feature = "raft")]
pub type RaftTypes = redolog_raft::openraft_0_9::in_process::TypeConfig;

/// The same on openraft 0.10.
#[cfg(feature = "raft")]
pub type RaftTypes010 = redolog_raft::openraft_0_10::in_process::TypeConfig;

/// openraft 0.10, as redolog-raft pins it.
#[cfg(feature = "raft")]
pub use redolog_raft::openraft_0_10::openraft as openraft010;
