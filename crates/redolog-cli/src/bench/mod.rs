//! `redolog bench`: a sysbench-like comparison of redolog with same-run baselines.
//!
//! Systems run in rounds, interleaved point by point (redolog, mutex, raw at one
//! thread), so every ratio compares figures measured minutes — not hours — apart
//! on this noisy machine. The table reports the median over rounds and the median
//! of the per-round ratios.

mod device;
mod machine;
#[cfg(feature = "peers")]
mod peers;
mod quota;
mod report;
mod runner;
mod systems;

use std::path::PathBuf;

pub use device::Device;
use std::time::Duration;

use clap::{Args, ValueEnum};
use redolog::Durability;

use report::{Measurement, Report};
use runner::{run_point, Workload};
pub use systems::BoxError;
use systems::SystemKind;

/// The durability each commit waits for (innodb_flush_log_at_trx_commit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// 1: wait for fdatasync.
    Synced,
    /// 2: wait for write().
    Written,
    /// 0: do not wait.
    Buffered,
}

impl DurabilityArg {
    fn durability(self) -> Durability {
        match self {
            DurabilityArg::Synced => Durability::Synced,
            DurabilityArg::Written => Durability::Written,
            DurabilityArg::Buffered => Durability::Buffered,
        }
    }

    fn name(self) -> &'static str {
        match self {
            DurabilityArg::Synced => "synced",
            DurabilityArg::Written => "written",
            DurabilityArg::Buffered => "buffered",
        }
    }
}

/// Options of `redolog bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchOptions {
    /// Thread counts to sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub threads: Vec<usize>,
    /// Bytes per record.
    #[arg(long, default_value_t = 128)]
    pub record_bytes: usize,
    /// Durability each commit waits for.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Synced)]
    pub durability: DurabilityArg,
    /// Seconds per point.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Rounds of interleaved points (the table reports medians).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Systems to compare: redolog (alias auto: Pipeline::Auto, the default),
    /// group and dedicated (redolog with that fixed pipeline), and the baselines
    /// mutex and raw. `--pipeline group,dedicated,auto,mutex` compares pipelines.
    #[arg(long, alias = "pipeline", value_enum, value_delimiter = ',', default_value = "redolog,mutex,raw")]
    pub systems: Vec<SystemKind>,
    /// Run under a CFS quota of this many CPUs (seed 001), in a cgroup created
    /// for the run; falls back to an affinity mask where cgroups cannot be made.
    #[arg(long)]
    pub cpu_quota: Option<f64>,
    /// Device profile: disk (the --dir as it is), tmpfs (/dev/shm: the CPU
    /// path) or sim:<latency> (/dev/shm with every fdatasync taking that long,
    /// e.g. sim:100us: a fast NVMe, deterministically).
    #[arg(long, default_value = "disk")]
    pub device: Device,
    /// Directory for the logs with --device disk (default: a fresh temporary
    /// directory under the current one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Append only, then one final wait: measures the append path alone.
    #[arg(long)]
    pub no_wait: bool,
    /// Print one line per second per point.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub intervals: bool,
    /// Print redolog's counters (INNODB_METRICS names) after each point.
    #[arg(long)]
    pub metrics: bool,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs the benchmark and prints the table.
pub fn run(options: &BenchOptions) -> Result<(), BoxError> {
    // Before any thread starts: every thread inherits the limit.
    let quota = options.cpu_quota.map(quota::CpuQuota::apply).transpose()?;
    let parent = options.device.parent_dir(options.dir.as_deref())?;
    std::fs::create_dir_all(&parent)?;
    let workdir = tempfile::Builder::new().prefix("redolog-bench-").tempdir_in(&parent)?;
    let fdatasync = machine::fdatasync_latency(workdir.path(), 200, options.device)?;
    let machine = machine::Machine::describe(workdir.path(), options.device, &fdatasync);
    println!(
        "redolog bench: {} on {} ({} cores, kernel {}), {}",
        workdir.path().display(),
        machine.filesystem,
        machine.cores,
        machine.kernel,
        machine.cpu
    );
    println!("device {}: fdatasync {}", options.device, fdatasync.describe());
    if let Some(quota) = &quota {
        println!("cpu limit: {}", quota.description);
    }
    let mut systems = Vec::new();
    for kind in &options.systems {
        systems.push((*kind, kind.open(workdir.path(), options.device)?));
    }
    let mut measurements = Vec::new();
    for round in 0..options.rounds {
        for &threads in &options.threads {
            for (kind, system) in &systems {
                // raw is one thread by definition: the device's floor.
                if *kind == SystemKind::Raw && threads != 1 {
                    continue;
                }
                let workload = Workload {
                    threads,
                    duration: Duration::from_secs_f64(options.seconds),
                    record_bytes: options.record_bytes,
                    durability: options.durability.durability(),
                    no_wait: options.no_wait,
                    print_intervals: options.intervals,
                };
                let label = format!("round {} {}", round + 1, kind.name());
                let before = system.metrics();
                let mut result = run_point(system, workload, &label)?;
                if let (Some(before), Some(after)) = (before, system.metrics()) {
                    result.spin = Duration::from_micros(after.spin_us() - before.spin_us());
                    if options.metrics {
                        print_metrics_delta(&label, threads, &before, &after);
                    }
                }
                measurements.push(Measurement { system: *kind, threads, round, result });
            }
        }
    }
    let wakeups: Vec<String> = systems
        .iter()
        .filter_map(|(kind, system)| {
            let metrics = system.metrics()?;
            Some(format!(
                "{}: {} lost wake-ups (timeouts with work), {} pipeline switches",
                kind.name(),
                metrics.timeouts_with_work(),
                metrics.log_pipeline_switches
            ))
        })
        .collect();
    drop(systems);
    let report = Report::new(machine, options, measurements);
    report.print_table();
    for line in wakeups {
        println!("{line}");
    }
    if let Some(path) = &options.json {
        std::fs::write(path, report.to_json()?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Prints the counters that moved during a point.
fn print_metrics_delta(label: &str, threads: usize, before: &redolog::Metrics, after: &redolog::Metrics) {
    println!(
        "-- {label} {threads} threads: pipeline {:?} ({}), {} usable CPUs, {} % busy; counters during the point",
        after.pipeline, after.pipeline_reason, after.cpu_usable, after.cpu_busy_pct
    );
    for ((name, old), (_, new)) in before.counters().iter().zip(after.counters()) {
        if new != *old && !name.starts_with("log_lsn") {
            println!("   {name:<36} {}", new - old);
        }
    }
}
