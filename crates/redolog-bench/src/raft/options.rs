//! The options of the openraft workloads — `--workload raft`, `--workload
//! kv` and `raft-store` — which every build parses, so a command line is
//! read and checked the same way with or without the `raft` feature that
//! builds the workloads themselves.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use clap::Args;

use crate::harness::device::Device;
use crate::harness::run::RunOptions;
#[cfg(not(feature = "raft"))]
use crate::harness::BoxError;

/// The options of `--workload raft` (read by the workload: a build without
/// the `raft` feature parses them only).
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "raft"), allow(dead_code))]
pub struct ClusterOptions {
    pub run: RunOptions,
    /// The stores to compare (empty: every one of this build).
    pub stores: Vec<String>,
    /// The openraft lines to run each store on.
    pub lines: Vec<OpenraftLine>,
    /// Where the nodes run: in this process, or a process each.
    pub placements: Vec<Placement>,
    /// Payload bytes per write.
    pub record_bytes: usize,
}

/// The options of `--workload kv` (as `ClusterOptions`, parsed by every
/// build).
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "raft"), allow(dead_code))]
pub struct ServiceOptions {
    pub run: RunOptions,
    /// The services to compare (empty: every one of this build).
    pub services: Vec<String>,
    /// Data set sizes: keys loaded before each point.
    pub keys: Vec<u64>,
    /// Value bytes per write.
    pub record_bytes: usize,
}

/// Options of `redolog-bench raft-store`.
#[derive(Clone, Debug, Args)]
pub struct RaftStoreOptions {
    /// Entries per append call.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    pub entries: Vec<usize>,
    /// Appends kept outstanding: 1 awaits each flush before the next append,
    /// as openraft 0.9's core does; more submit the next appends first, as
    /// openraft 0.10's core does (it does not wait for the flush).
    #[arg(long, default_value_t = 1)]
    pub in_flight: usize,
    /// Payload bytes per entry.
    #[arg(long, default_value_t = 128)]
    pub entry_bytes: usize,
    /// Seconds per point.
    #[arg(long = "time", default_value_t = 2)]
    pub seconds: u64,
    /// Rounds; the stores' order alternates from round to round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Device profile, as for `bench`: disk, tmpfs or sim:LATENCY.
    #[arg(long, default_value = "disk")]
    pub device: Device,
    /// Directory for the stores with --device disk.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

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

/// The refusal of a build without the `raft` feature: `what` (the command)
/// and the command line that builds it.
#[cfg(not(feature = "raft"))]
pub fn not_built(what: &str) -> BoxError {
    format!(
        "`{what}` is built with the raft feature (openraft, Tokio's servers, HTTP): \
         cargo run --release --features raft -- {what} …"
    )
    .into()
}
