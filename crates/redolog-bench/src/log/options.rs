//! What `--workload log` takes: the run's options and the log's own.

use redolog::Durability;

use super::registry::SystemKind;
use crate::harness::run::RunOptions;

/// The options of `--workload log`.
#[derive(Clone, Debug)]
pub struct LogOptions {
    pub run: RunOptions,
    /// The systems to compare.
    pub systems: Vec<SystemKind>,
    /// Bytes per record.
    pub record_bytes: usize,
    /// What each commit waits for.
    pub durability: Durability,
    /// Append only, then one final wait: the append path alone.
    pub no_wait: bool,
    /// Run under a CFS quota of this many CPUs.
    pub cpu_quota: Option<f64>,
    /// Print redolog's counters after each point.
    pub metrics: bool,
    /// Serve the live counters to Prometheus here while the benchmark runs.
    pub prometheus: Option<std::net::SocketAddr>,
    /// Commit through futures (Tokio tasks) beside the thread path.
    pub async_tasks: bool,
}

/// The name of a durability in tables and JSON.
pub fn durability_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Synced => "synced",
        Durability::Written => "written",
        Durability::Buffered => "buffered",
    }
}
