//! `redolog bench`: a sysbench-like comparison of redolog with same-run baselines.
//!
//! Systems run in rounds, interleaved point by point (redolog, mutex, raw at one
//! thread), so every ratio compares figures measured minutes — not hours — apart
//! on this noisy machine. The table reports the median over rounds and the median
//! of the per-round ratios.

mod device;
mod machine;
mod oltp;
#[cfg(feature = "peers")]
mod oltp_rocksdb;
#[cfg(feature = "peers")]
mod oltp_sqlite;
#[cfg(feature = "peers")]
mod peers;
mod plot;
mod quota;
mod raft_cluster;
#[cfg(feature = "peers")]
mod raft_log_store;
#[cfg(feature = "peers")]
mod raft_rocksdb;
pub mod raft_store;
pub mod read_back;
mod registry;
mod report;
mod runner;
mod scenario;
mod sync_hook;
mod systems;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use redolog::Durability;

pub use device::Device;
use registry::SystemKind;
use report::{Measurement, Report};
use runner::{run_point, Workload};
use scenario::Scenario;
pub use systems::BoxError;
use systems::System;

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

/// What `redolog bench` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    /// Commits to one log: redolog against the baselines and peers.
    Log,
    /// Writes through the leader of a three-node openraft cluster in this
    /// process: redolog-raft against the RocksDB and raft-log log stores
    /// (`--features peers`); `--threads` are the client tasks.
    Raft,
    /// sysbench's oltp_insert on the page store: one INSERT per transaction.
    #[value(name = "oltp_insert")]
    OltpInsert,
    /// sysbench's oltp_update_index: `SET k = k + 1 WHERE id = ?`.
    #[value(name = "oltp_update_index")]
    OltpUpdateIndex,
    /// sysbench's oltp_update_non_index: `SET c = ? WHERE id = ?`.
    #[value(name = "oltp_update_non_index")]
    OltpUpdateNonIndex,
    /// sysbench's oltp_write_only: index update, non-index update, delete
    /// and insert, one commit wait.
    #[value(name = "oltp_write_only")]
    OltpWriteOnly,
}

impl WorkloadArg {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadArg::Log => "log",
            WorkloadArg::Raft => "raft",
            WorkloadArg::OltpInsert => "oltp_insert",
            WorkloadArg::OltpUpdateIndex => "oltp_update_index",
            WorkloadArg::OltpUpdateNonIndex => "oltp_update_non_index",
            WorkloadArg::OltpWriteOnly => "oltp_write_only",
        }
    }
}

/// The first flag given that only `--workload log` takes, if any.
fn log_only_flag(options: &BenchOptions) -> Option<&'static str> {
    [
        ("--scenario", options.scenario.is_some()),
        ("--async", options.async_tasks),
        ("--no-wait", options.no_wait),
        ("--cpu-quota", options.cpu_quota.is_some()),
        ("--metrics", options.metrics),
    ]
    .into_iter()
    .find_map(|(flag, given)| given.then_some(flag))
}

/// The first output flag given (`--workload log` and `oltp_*` take them;
/// `raft` does not), if any.
fn output_flag(options: &BenchOptions) -> Option<&'static str> {
    [("--json", options.json.is_some()), ("--plot", options.plot.is_some())]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
}

/// The default `--threads` (clap's `default_value` spells it as text; a
/// test checks the two agree).
const DEFAULT_THREADS: [usize; 4] = [1, 4, 16, 64];

/// Options of `redolog bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchOptions {
    /// What to run.
    #[arg(long, value_enum, default_value_t = WorkloadArg::Log)]
    pub workload: WorkloadArg,
    /// With `--workload raft`: the log stores to compare (redolog-raft,
    /// rocksdb-raft, raft-log, raft-log-nowait); default: every one this
    /// build has.
    #[arg(long, value_delimiter = ',')]
    pub stores: Vec<String>,
    /// With `--workload oltp_*`: tables (sysbench's `--tables`).
    #[arg(long, default_value_t = 8)]
    pub tables: usize,
    /// With `--workload oltp_*`: rows per table (sysbench's `--table-size`).
    #[arg(long, default_value_t = 10_000)]
    pub table_size: u64,
    /// With `--workload oltp_*`: 1 waits for the fdatasync, 2 for the write,
    /// 0 for nothing (InnoDB's `innodb_flush_log_at_trx_commit`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub flush_log_at_trx_commit: u8,
    /// With `--workload oltp_*`: buffer pool instances.
    #[arg(long, default_value_t = 1)]
    pub buffer_pool_instances: usize,
    /// With `--workload oltp_*`: buffer pool bytes (default 1 GiB: the
    /// tables stay in memory, as in the seeds' experiments).
    #[arg(long, default_value_t = 1 << 30)]
    pub buffer_pool_bytes: u64,
    /// With `--workload oltp_*`: the page cleaners' pages per second at a
    /// low checkpoint age (InnoDB's `innodb_io_capacity`).
    #[arg(long, default_value_t = 200)]
    pub io_capacity: u64,
    /// With `--workload oltp_*`: the log's capacity in bytes (InnoDB's
    /// `innodb_redo_log_capacity`, default 100 MiB).
    #[arg(long, default_value_t = 100 << 20)]
    pub log_capacity: u64,
    /// With `--workload oltp_*`, measurement only: the page store writes
    /// pages in place without the doublewrite file — unprotected from torn
    /// pages — to measure what the doublewrite file costs
    /// (docs/PAGESTORE.md §4.1).
    #[arg(long)]
    pub no_doublewrite: bool,
    /// Thread counts to sweep (with `async`: task counts; `--tasks` is an alias).
    #[arg(long, alias = "tasks", value_delimiter = ',', default_value = "1,4,16,64")]
    pub threads: Vec<usize>,
    /// Bytes per record.
    #[arg(long, default_value_t = 128)]
    pub record_bytes: usize,
    /// Durability each commit waits for.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Synced)]
    pub durability: DurabilityArg,
    /// Seconds per point (sysbench's `--time`; `--seconds` is an alias).
    #[arg(long = "time", alias = "seconds", default_value_t = 2.0)]
    pub seconds: f64,
    /// Rounds of interleaved points (the table reports medians).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Systems to compare: redolog (alias auto: Pipeline::Auto, the default),
    /// group and dedicated (redolog with that fixed pipeline), and the baselines
    /// mutex and raw. `--pipeline group,dedicated,auto,mutex` compares pipelines.
    #[arg(long, alias = "pipeline", value_parser = SystemKind::parser(), value_delimiter = ',', default_value = "redolog,mutex,raw")]
    pub systems: Vec<SystemKind>,
    /// Run under a CFS quota of this many CPUs (as in the CPU-quota spinning post), in a cgroup created
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
    /// Print an interval line (tps, p95 latency) every this many seconds of a
    /// point, as sysbench's `--report-interval`; 0 prints none.
    #[arg(long, default_value_t = 1)]
    pub report_interval: u64,
    /// `--intervals false` is `--report-interval 0` (the flag of earlier
    /// versions, kept for recorded commands).
    #[arg(long, hide = true, action = clap::ArgAction::Set)]
    pub intervals: Option<bool>,
    /// Print redolog's counters (INNODB_METRICS names) after each point.
    #[arg(long)]
    pub metrics: bool,
    /// Write the results as JSON to this file (`--workload log` and `oltp_*`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw commits/s and p99 latency against threads, one line per system, to
    /// this SVG file, and the same as a PNG beside it (FILE.png) (`--workload
    /// log` and `oltp_*`).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Commit through futures: run the `async` system (Tokio tasks awaiting
    /// `commit_async`) beside the thread path (`redolog`) at the same counts
    /// and, built with `--features peers`, RocksDB and raft-engine driven
    /// through `spawn_blocking` (`rocksdb-async`, `raft-engine-async`).
    #[arg(long = "async")]
    pub async_tasks: bool,
    /// Reproduce one public report's experiment (MySQL bugs #95390 and #77094,
    /// the CPU-quota and few-cores blog posts): it sets the systems, threads,
    /// durability and CPU limit, and prints the report's figure next to ours
    /// (docs/BENCHMARKS.md).
    #[arg(long, value_parser = Scenario::parser())]
    pub scenario: Option<Scenario>,
}

/// One system in a run: redolog under some configuration, a baseline or a peer.
pub struct Contender {
    pub name: &'static str,
    pub system: Arc<dyn System>,
    /// redolog (any pipeline or configuration) rather than a baseline or peer.
    pub is_redolog: bool,
    /// Runs at one thread only (`raw`: the device's floor).
    pub one_thread_only: bool,
}

impl Contender {
    /// A system from the `--systems` list.
    fn open(kind: SystemKind, dir: &Path) -> Result<Self, BoxError> {
        Ok(Contender {
            name: kind.name(),
            system: kind.open(dir)?,
            is_redolog: kind.is_redolog(),
            one_thread_only: kind.row().one_thread_only,
        })
    }
}

/// Runs the benchmark its `--workload` names and prints the table.
pub fn run(options: &BenchOptions) -> Result<(), BoxError> {
    if let Some(engine) = options.scenario.and_then(|scenario| scenario.engine(options.workload)) {
        return engine(options);
    }
    match options.workload {
        WorkloadArg::Log | WorkloadArg::Raft if options.no_doublewrite => {
            Err("--no-doublewrite applies to --workload oltp_* only".into())
        }
        WorkloadArg::Raft => raft_cluster::run(options),
        WorkloadArg::OltpInsert
        | WorkloadArg::OltpUpdateIndex
        | WorkloadArg::OltpUpdateNonIndex
        | WorkloadArg::OltpWriteOnly => oltp::run(options),
        WorkloadArg::Log if !options.stores.is_empty() => Err("--stores applies to --workload raft only".into()),
        WorkloadArg::Log => run_log(options),
    }
}

/// `--workload log`: commits to one log, redolog against baselines and peers.
fn run_log(options: &BenchOptions) -> Result<(), BoxError> {
    let mut options = match options.scenario {
        Some(scenario) => scenario.options(options),
        None => options.clone(),
    };
    if options.async_tasks {
        // The peers (feature `peers`) as async users drive them today.
        options.systems = ["async", "redolog", "rocksdb-async", "raft-engine-async"]
            .into_iter()
            .filter_map(SystemKind::named)
            .collect();
    }
    let options = &options;
    // Before any thread starts: every thread inherits the limit.
    let quota = options.cpu_quota.map(quota::CpuQuota::apply).transpose()?;
    let workdir = options.device.work_dir(options.dir.as_deref(), "redolog-bench-")?;
    let fdatasync = machine::fdatasync_latency(workdir.path(), 200)?;
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
    let contenders = match options.scenario {
        Some(scenario) => {
            println!("scenario {}: {}", scenario.name(), scenario.seed_story());
            scenario.contenders(workdir.path())?
        }
        None => options.systems.iter().map(|&kind| Contender::open(kind, workdir.path())).collect::<Result<_, _>>()?,
    };
    let measurements = run_rounds(options, &contenders)?;
    let wakeups: Vec<String> = contenders
        .iter()
        .filter_map(|contender| {
            let metrics = contender.system.metrics()?;
            Some(format!(
                "{}: {} lost wake-ups (timeouts with work), {} pipeline switches",
                contender.name,
                metrics.timeouts_with_work(),
                metrics.log_pipeline_switches
            ))
        })
        .collect();
    let order: Vec<(&'static str, bool)> = contenders.iter().map(|c| (c.name, c.is_redolog)).collect();
    drop(contenders);
    if let Some(scenario) = options.scenario {
        scenario.print_story(&measurements);
    }
    let report = Report::new(machine, options, &order, measurements);
    report.print_table();
    for line in wakeups {
        println!("{line}");
    }
    if let Some(path) = &options.json {
        std::fs::write(path, report.to_json()?)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &options.plot {
        for written in plot::draw(&report, path)? {
            println!("wrote {}", written.display());
        }
    }
    Ok(())
}

/// Runs every point of every round, interleaved: round 1 of every thread count
/// and contender, then round 2, …, so each ratio pairs points minutes apart.
fn run_rounds(options: &BenchOptions, contenders: &[Contender]) -> Result<Vec<Measurement>, BoxError> {
    let points_per_round: usize = options
        .threads
        .iter()
        .map(|&threads| contenders.iter().filter(|c| threads == 1 || !c.one_thread_only).count())
        .sum();
    let total_seconds = (options.rounds * points_per_round) as f64 * options.seconds;
    let progress = progress_bar(total_seconds);
    let mut measurements = Vec::new();
    for round in 0..options.rounds {
        for &threads in &options.threads {
            for contender in contenders {
                if contender.one_thread_only && threads != 1 {
                    continue;
                }
                let workload = Workload {
                    threads,
                    duration: Duration::from_secs_f64(options.seconds),
                    record_bytes: options.record_bytes,
                    durability: options.durability.durability(),
                    no_wait: options.no_wait,
                    report_interval: if options.intervals == Some(false) { 0 } else { options.report_interval },
                };
                let label = format!("round {} {}", round + 1, contender.name);
                progress.set_message(format!("{label}, {threads} threads"));
                let before = contender.system.metrics();
                let mut result = run_point(&contender.system, workload, &label, &progress)?;
                let mut counters = Vec::new();
                let mut pipeline = None;
                if let (Some(before), Some(after)) = (before, contender.system.metrics()) {
                    result.spin = Duration::from_micros(after.spin_us() - before.spin_us());
                    counters = counter_deltas(&before, &after);
                    if options.metrics {
                        progress.suspend(|| print_metrics_delta(&label, threads, &after, &counters));
                    }
                    pipeline = Some(format!("{:?}", after.pipeline));
                }
                measurements.push(Measurement { system: contender.name, threads, round, result, pipeline, counters });
            }
        }
    }
    progress.finish_and_clear();
    Ok(measurements)
}

/// A bar over the run's measured seconds, on stderr; hidden when stderr is not
/// a terminal, and for runs under a few seconds.
fn progress_bar(total_seconds: f64) -> ProgressBar {
    if total_seconds < 5.0 {
        return ProgressBar::hidden();
    }
    let progress = ProgressBar::new(total_seconds.ceil() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} s, {eta} left: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress
}

/// Each counter's growth between two snapshots (not the LSN gauges).
fn counter_deltas(before: &redolog::Metrics, after: &redolog::Metrics) -> Vec<(String, u64)> {
    before
        .counters()
        .into_iter()
        .zip(after.counters())
        .filter(|((name, _), _)| !name.starts_with("log_lsn"))
        .map(|((name, old), (_, new))| (name, new.saturating_sub(old)))
        .collect()
}

/// Prints the counters that moved during a point.
fn print_metrics_delta(label: &str, threads: usize, after: &redolog::Metrics, deltas: &[(String, u64)]) {
    println!(
        "-- {label} {threads} threads: pipeline {:?} ({}), {} usable CPUs, {} % busy; counters during the point",
        after.pipeline, after.pipeline_reason, after.cpu_usable, after.cpu_busy_pct
    );
    for (name, delta) in deltas.iter().filter(|(_, delta)| *delta != 0) {
        println!("   {name:<36} {delta}");
    }
}
