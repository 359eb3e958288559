//! What every workload of the benchmark shares: the device profiles and the
//! process-wide fdatasync hook, the machine's description, a CPU quota, the
//! one round driver, medians and histograms, plots. Nothing here knows a
//! workload: the workloads import the harness, never the other way round.

pub mod device;
pub mod machine;
pub mod plot;
pub mod quota;
pub mod rounds;
pub mod run;
pub mod stats;
pub mod sync_hook;

/// Any error a benchmark reports (printed, then exit 1).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
