//! The openraft log store: in a three-node cluster (`--workload raft`,
//! `cluster`) and alone (`redolog-bench raft-store`, `alone`). Both open their
//! stores through one factory (`stores`) and sweep through the one round
//! driver; the peers (`rocksdb`, `raft_log`) come with `--features peers`.
//! The cluster runs on both openraft lines ([`OpenraftLine`]); the peers
//! implement both lines' traits over one implementation each, through
//! `line::Line`, as redolog-raft does.

use std::fmt;
use std::str::FromStr;

pub mod alone;
pub mod cluster;
#[cfg(feature = "peers")]
pub mod etcd;
#[cfg(feature = "peers")]
pub mod line;
pub mod processes;
#[cfg(feature = "peers")]
pub mod raft_log;
#[cfg(feature = "peers")]
pub mod rocksdb;
pub mod service;
pub mod stores;
pub mod sweep;

/// The benchmarks' openraft 0.9 types: redolog-raft's in-process cluster's
/// (string commands and responses, `u64` node ids, openraft's defaults
/// otherwise).
pub type RaftTypes = redolog_raft::openraft_0_9::in_process::TypeConfig;

/// The same on openraft 0.10.
pub type RaftTypes010 = redolog_raft::openraft_0_10::in_process::TypeConfig;

/// openraft 0.10, as redolog-raft pins it.
pub use redolog_raft::openraft_0_10::openraft as openraft010;

/// An openraft line the cluster benchmark runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenraftLine {
    /// 0.9.25: the core awaits each append's flush.
    V0_9,
    /// 0.10.0-alpha.37: the core submits appends without waiting.
    V0_10,
}

impl fmt::Display for OpenraftLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenraftLine::V0_9 => "0.9",
            OpenraftLine::V0_10 => "0.10",
        })
    }
}

impl FromStr for OpenraftLine {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "0.9" => Ok(OpenraftLine::V0_9),
            "0.10" => Ok(OpenraftLine::V0_10),
            other => Err(format!("openraft line {other}: this build has 0.9 and 0.10")),
        }
    }
}

/// Where the cluster benchmark's three nodes run (`--placement`, read by
/// clap: `in-process`, `processes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// In this process, over redolog-raft's in-memory network.
    InProcess,
    /// One `redolog-bench kv-node` process each (redolog-kv's node), over
    /// HTTP on loopback.
    Processes,
}

impl fmt::Display for Placement {
    /// The name `--placement` takes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = clap::ValueEnum::to_possible_value(self).ok_or(fmt::Error)?;
        f.write_str(name.get_name())
    }
}
