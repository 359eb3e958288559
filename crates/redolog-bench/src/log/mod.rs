//! `--workload log`: commits to one log, redolog against same-run baselines
//! and peers.
//!
//! Systems run in rounds, interleaved point by point (`harness::rounds`), so
//! every ratio compares figures measured seconds, not hours, apart on this
//! noisy machine. The table reports the median over rounds and the median of
//! the per-round ratios.

mod archived;
pub mod options;
#[cfg(feature = "peers")]
pub mod peers;
pub mod read_back;
pub mod registry;
pub mod report;
pub mod resize;
pub mod runner;
pub mod systems;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::rounds::interleave;
use crate::harness::run::progress_bar;
use crate::harness::{machine, plot, quota, BoxError};
use options::LogOptions;
use registry::SystemKind;
use report::{Measurement, Report};
use runner::{run_point, Workload};
use systems::System;

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
    /// A system of the registry, opened under `dir`.
    pub fn open(kind: SystemKind, dir: &Path) -> Result<Self, BoxError> {
        Ok(Contender {
            name: kind.name(),
            system: kind.open(dir)?,
            is_redolog: kind.is_redolog(),
            one_thread_only: kind.row().one_thread_only,
        })
    }
}

/// A public report's experiment run as a log workload (`--scenario`): it
/// chooses the contenders and tells its story beside the table.
pub trait Experiment {
    /// The `--scenario` value.
    fn name(&self) -> &'static str;
    /// The report and the figure it gives.
    fn seed_story(&self) -> &'static str;
    /// The systems it compares, opened under `dir`.
    fn contenders(&self, dir: &Path) -> Result<Vec<Contender>, BoxError>;
    /// Our figures beside the report's.
    fn print_story(&self, measurements: &[Measurement]);
}

/// `--workload log`: commits to one log, redolog against baselines and peers
/// (or the contenders of `experiment`).
pub fn run(options: &LogOptions, experiment: Option<&dyn Experiment>) -> Result<(), BoxError> {
    let mut options = options.clone();
    if options.async_tasks {
        // The peers (feature `peers`) as async users drive them today.
        options.systems = ["async", "redolog", "rocksdb-async", "raft-engine-async"]
            .into_iter()
            .filter_map(SystemKind::named)
            .collect();
    }
    let options = &options;
    let run = &options.run;
    // Before any thread starts: every thread inherits the limit.
    let quota = options.cpu_quota.map(quota::CpuQuota::apply).transpose()?;
    let workdir = run.device.work_dir(run.dir.as_deref(), "redolog-bench-")?;
    let fdatasync = machine::fdatasync_latency(workdir.path(), 200)?;
    let machine = machine::Machine::describe(workdir.path(), run.device, &fdatasync);
    println!(
        "redolog-bench bench: {} on {} ({} cores, kernel {}), {}",
        workdir.path().display(),
        machine.filesystem,
        machine.cores,
        machine.kernel,
        machine.cpu
    );
    println!("device {}: fdatasync {}", run.device, fdatasync.describe());
    if let Some(quota) = &quota {
        println!("cpu limit: {}", quota.description);
    }
    let contenders = match experiment {
        Some(experiment) => {
            println!("scenario {}: {}", experiment.name(), experiment.seed_story());
            experiment.contenders(workdir.path())?
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
    if let Some(experiment) = experiment {
        experiment.print_story(&measurements);
    }
    let report = Report::new(machine, options, experiment.map(|experiment| experiment.name()), &order, measurements);
    report.print_table();
    for line in wakeups {
        println!("{line}");
    }
    if let Some(path) = &run.json {
        std::fs::write(path, report.to_json()?)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &run.plot {
        for written in plot::draw_lines(&report.title(), &report.lines(), path)? {
            println!("wrote {}", written.display());
        }
    }
    Ok(())
}

/// Runs every point of every round through the one round driver
/// (`harness::rounds`): round 1 of every thread count and contender, then
/// round 2, …, the contenders' order alternating from point to point.
fn run_rounds(options: &LogOptions, contenders: &[Contender]) -> Result<Vec<Measurement>, BoxError> {
    let run = &options.run;
    let runs_at = |contender: &Contender, threads: usize| threads == 1 || !contender.one_thread_only;
    let points_per_round: usize =
        run.threads.iter().map(|&threads| contenders.iter().filter(|c| runs_at(c, threads)).count()).sum();
    let progress = progress_bar((run.rounds * points_per_round) as f64 * run.seconds);
    let measured = interleave(run.rounds, &run.threads, contenders, runs_at, |visit| {
        let (contender, threads, round) = (visit.system, visit.count, visit.round);
        let workload = Workload {
            threads,
            duration: Duration::from_secs_f64(run.seconds),
            record_bytes: options.record_bytes,
            durability: options.durability,
            no_wait: options.no_wait,
            report_interval: run.report_interval,
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
        Ok(Measurement { system: contender.name, threads, round, result, pipeline, counters })
    })?;
    progress.finish_and_clear();
    Ok(measured.into_iter().map(|point| point.result).collect())
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
