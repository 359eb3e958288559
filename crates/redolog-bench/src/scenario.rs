//! `--scenario NAME`: the experiments of the public reports redolog answers —
//! MySQL bugs #95390 and #77094 and the two blog posts on spinning under a CPU
//! quota and on log threads starved on few cores (docs/BENCHMARKS.md, "The MySQL
//! failures, reproduced"). Each sets the systems, threads, durability and CPU
//! limit, runs like any other bench, then prints the report's figure next to ours and the
//! counters that tell the story: the wait triads (no_waits / waits / wait_loops)
//! and the time spent spinning.

use std::path::Path;
use std::sync::Arc;

use redolog::{Config, Durability, Pipeline};

use crate::harness::stats::median;
use crate::harness::BoxError;
use crate::log::options::LogOptions;
use crate::log::registry::SystemKind;
use crate::log::report::{paired_ratio, Measurement};
use crate::log::systems::{MtrSystem, RedologSystem, System};
use crate::log::{Contender, Experiment};
use crate::oltp::options::OltpOptions;

/// A scenario's experiment on the page store.
pub type EngineRun = fn(&OltpOptions) -> Result<(), BoxError>;

/// One row of the scenario table. A new experiment is one row (and, if it
/// needs them, its redolog variants and story line).
pub struct ScenarioRow {
    /// The `--scenario` value.
    pub name: &'static str,
    /// The public report, and the figure it gives: printed next to ours.
    pub report: &'static str,
    /// What the experiment runs, for `--help`.
    pub about: &'static str,
    /// Thread counts, durability and CPU quota the report measured at.
    threads: &'static [usize],
    durability: Durability,
    cpu_quota: Option<f64>,
    /// Registry systems to run, then redolog variants of its own.
    systems: &'static [&'static str],
    variants: fn() -> Vec<Variant>,
    /// The system the ratios divide by.
    reference: &'static str,
    /// Our figures that tell the story, for one system at one thread count.
    story: fn(&Stats<'_>) -> String,
    /// The experiment on the page store (docs/PAGESTORE.md), run instead of
    /// the log's when `--workload` is an `oltp_*` one, or always when the
    /// row has no log experiment (no `systems`).
    engine: Option<EngineRun>,
}

/// A redolog configured for one scenario.
struct Variant {
    name: &'static str,
    config: Config,
    /// Each record a mini-transaction: `begin_group`, then `close` (system
    /// `mtr`), so the closed window applies as MySQL's recent_closed does.
    mini_transactions: bool,
}

/// The experiments of the public reports redolog answers.
pub const SCENARIOS: &[ScenarioRow] = &[
    ScenarioRow {
        name: "seed-wakeup",
        report: "MySQL bug #95390: 8.0.16's log_closer, woken only by its timeout while user threads waited for \
                 recent_closed space, halved throughput (25k TPS; 49k once woken)",
        about: "the smallest ring and link buffer, and mini-transactions under the bug's 16 KiB recent_closed \
                window, 64 threads: waits for space must be woken, not polled; with --workload oltp_insert, the \
                bug's sysbench run on the page store, 16 KiB closed window against the default",
        threads: &[64],
        durability: Durability::Synced,
        cpu_quota: None,
        systems: &["redolog", "mtr"],
        variants: || {
            vec![
                Variant {
                    name: "redolog-tiny",
                    config: Config::default().with_buffer_bytes(Config::BUFFER_BYTES_MIN),
                    mini_transactions: false,
                },
                // innodb_log_recent_closed_size=16384, the bug's setting.
                Variant {
                    name: "mtr-closed-16k",
                    config: Config::default().with_closed_window_bytes(16 << 10),
                    mini_transactions: true,
                },
            ]
        },
        reference: "redolog",
        story: |stats| {
            const SITES: [&str; 3] = ["log_on_buffer_space_", "log_on_recent_written_", "log_on_recent_closed_"];
            let counters = |suffix: &str| SITES.map(|site| format!("{site}{suffix}"));
            let (waits, loops, lost) = (counters("waits"), counters("wait_loops"), counters("timeouts_with_work"));
            format!(
                "space waits per commit {:.3} (ring {:.3}, link buffer {:.3}, closed window {:.3}), wait loops per \
                 commit {:.3} (closed window {:.4}) and per wait {:.2}, lost wake-ups {}",
                stats.per_commit(&waits.each_ref().map(String::as_str)),
                stats.per_commit(&[waits[0].as_str()]),
                stats.per_commit(&[waits[1].as_str()]),
                stats.per_commit(&[waits[2].as_str()]),
                stats.per_commit(&loops.each_ref().map(String::as_str)),
                stats.per_commit(&[loops[2].as_str()]),
                stats.loops_per_wait(&SITES),
                stats.sum(&lost.each_ref().map(String::as_str)),
            )
        },
        engine: Some(crate::oltp::seed_wakeup),
    },
    ScenarioRow {
        name: "seed-cpu-quota",
        report: "Spinning in the Cloud (blog): MySQL 8.0's adaptive spinning read the affinity mask, not the CFS \
                 quota: 21 % of the container's CPU went to spinning; quota-aware spinning gave +35 % TPS (3.5k -> 4.7k)",
        about: "64 threads under a 1-CPU CFS quota: CPU spent spinning and throughput per pipeline",
        threads: &[64],
        durability: Durability::Synced,
        cpu_quota: Some(1.0),
        systems: &["group", "dedicated", "redolog"],
        variants: Vec::new,
        reference: "group",
        story: |stats| {
            format!(
                "spinning {:.1} % of CPU, {:.1} µs CPU per commit, pipeline {}",
                stats.spin_pct, stats.cpu_us_per_commit, stats.pipeline
            )
        },
        engine: None,
    },
    ScenarioRow {
        name: "seed-few-cores",
        report: "MySQL 8.0 redo log write performance analysis (blog): on 8 cores, 8.0's log threads starved behind \
                 the user threads: 64.7k QPS against 5.6's 140k; isolating the log threads gave 91.8k",
        about: "128 threads on this machine's cores: dedicated versus group commit versus auto, with the log threads \
                at nice -10 and pinned",
        threads: &[128],
        durability: Durability::Synced,
        cpu_quota: None,
        systems: &["group", "dedicated", "redolog"],
        variants: || {
            let dedicated = Config::default().with_pipeline(Pipeline::Dedicated);
            // The last CPU: the log threads share it with committers, but
            // never wait for a core behind each other's migrations.
            let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
            let plain = |name, config| Variant { name, config, mini_transactions: false };
            vec![
                plain("dedicated-nice", dedicated.clone().with_log_thread_nice(-10)),
                plain("dedicated-pinned", dedicated.with_log_thread_cpus(vec![last])),
            ]
        },
        reference: "group",
        story: |stats| {
            format!(
                "{:.1} µs CPU per commit, {:.1} records per fsync, pipeline {}",
                stats.cpu_us_per_commit, stats.records_per_fsync, stats.pipeline
            )
        },
        engine: None,
    },
    ScenarioRow {
        name: "seed-double-buffer",
        report: "MySQL bug #77094: one mutex for appending and writing serialised them in 5.7.7; a second buffer let \
                 them overlap: +10-20 % at 32-256 threads",
        about: "written durability, 16 to 256 threads: append never waits for an in-flight write, against the mutex \
                design",
        threads: &[16, 64, 256],
        durability: Durability::Written,
        cpu_quota: None,
        systems: &["redolog", "mutex"],
        variants: Vec::new,
        reference: "mutex",
        story: |stats| {
            format!(
                "appends that waited for ring space per commit {:.4}, write waits per commit {:.3}",
                stats.per_commit(&["log_on_buffer_space_waits"]),
                stats.per_commit(&["log_on_write_waits"]),
            )
        },
        engine: None,
    },
    ScenarioRow {
        name: "seed-convoy",
        report: "MySQL bug #68555: 5.6.10's global check_flush_or_checkpoint flag dragged every thread into \
                 log_checkpoint_margin; 8 buffer pool instances instead of 1 cut 62k updates/s to 31-39k",
        about: "the page store: update by primary key, tables in memory, small --io-capacity, 1 against 8 buffer \
                pool instances at 8 to 256 clients, with the engine's free check and with a copy of 5.6.10's flag",
        threads: &[],
        durability: Durability::Synced,
        cpu_quota: None,
        systems: &[],
        variants: Vec::new,
        reference: "",
        story: |_| String::new(),
        engine: Some(crate::oltp::seed_convoy),
    },
];

/// A scenario named on the command line: a row of the table.
#[derive(Clone, Copy)]
pub struct Scenario(&'static ScenarioRow);

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Scenario {
    /// The row named `name`.
    pub fn named(name: &str) -> Option<Scenario> {
        SCENARIOS.iter().find(|row| row.name == name).map(Scenario)
    }

    /// The clap parser of `--scenario`: the table's names, with their help.
    pub fn parser() -> impl clap::builder::TypedValueParser<Value = Scenario> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
        PossibleValuesParser::new(SCENARIOS.iter().map(|row| PossibleValue::new(row.name).help(row.about)))
            .map(|name| Scenario::named(&name).unwrap_or_else(|| unreachable!("clap accepted only table names")))
    }

    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The page-store experiment to run, if this scenario runs on the page
    /// store: with an `oltp_*` workload (`on_log` false), or always when it
    /// has no log form.
    pub fn engine(self, on_log: bool) -> Option<EngineRun> {
        let on_engine = !on_log || self.0.systems.is_empty();
        self.0.engine.filter(|_| on_engine)
    }

    /// `base` with the scenario's threads, durability and CPU limit; the
    /// device, time, rounds and outputs stay as given.
    pub fn options(self, base: &LogOptions) -> LogOptions {
        let mut options = base.clone();
        options.run.threads = self.0.threads.to_vec();
        options.durability = self.0.durability;
        options.cpu_quota = self.0.cpu_quota;
        options.no_wait = false;
        options
    }

    /// Whether `system` is one the scenario runs (a registry name or one of
    /// its own variants).
    #[cfg(test)]
    fn runs(self, system: &str) -> bool {
        self.0.systems.contains(&system) || (self.0.variants)().iter().any(|variant| variant.name == system)
    }
}

impl Experiment for Scenario {
    fn name(&self) -> &'static str {
        self.0.name
    }

    /// The public report's figure.
    fn seed_story(&self) -> &'static str {
        self.0.report
    }

    /// The systems the scenario compares, opened under `dir`.
    fn contenders(&self, dir: &Path) -> Result<Vec<Contender>, BoxError> {
        let mut contenders = Vec::new();
        for name in self.0.systems {
            let kind = SystemKind::named(name).ok_or_else(|| format!("scenario {}: no system {name}", self.name()))?;
            contenders.push(Contender::open(kind, dir)?);
        }
        for Variant { name, config, mini_transactions } in (self.0.variants)() {
            let log = RedologSystem::open_with(&dir.join(name), config)?;
            let system: Arc<dyn System> = if mini_transactions { Arc::new(MtrSystem(log)) } else { Arc::new(log) };
            contenders.push(Contender { name, system, is_redolog: true, one_thread_only: false });
        }
        Ok(contenders)
    }

    /// Prints our figures beside the report's.
    fn print_story(&self, measurements: &[Measurement]) {
        println!();
        println!("scenario {}", self.name());
        println!("  {}", self.seed_story());
        let reference = self.0.reference;
        let mut systems: Vec<&'static str> = Vec::new();
        for m in measurements {
            if !systems.contains(&m.system) {
                systems.push(m.system);
            }
        }
        for &system in &systems {
            let mut thread_counts: Vec<usize> =
                measurements.iter().filter(|m| m.system == system).map(|m| m.threads).collect();
            thread_counts.sort_unstable();
            thread_counts.dedup();
            for threads in thread_counts {
                let stats = Stats::of(measurements, system, threads);
                let ratio = paired_ratio(measurements, system, reference, threads)
                    .filter(|_| system != reference)
                    .map_or(String::new(), |ratio| format!(", {ratio:.2}× {reference}"));
                println!(
                    "  {system:<17} {threads:>4} threads: {:>9.0} commits/s{ratio}; {}",
                    stats.commits_per_sec,
                    (self.0.story)(&stats)
                );
            }
        }
    }
}

/// One system at one thread count, over the rounds.
pub struct Stats<'a> {
    points: Vec<&'a Measurement>,
    commits_per_sec: f64,
    spin_pct: f64,
    cpu_us_per_commit: f64,
    records_per_fsync: f64,
    pipeline: String,
}

impl<'a> Stats<'a> {
    fn of(measurements: &'a [Measurement], system: &str, threads: usize) -> Self {
        let points: Vec<&Measurement> =
            measurements.iter().filter(|m| m.system == system && m.threads == threads).collect();
        let median_of = |f: fn(&Measurement) -> f64| median(points.iter().map(|m| f(m)).collect());
        let mut pipelines: Vec<&str> = points.iter().filter_map(|m| m.pipeline.as_deref()).collect();
        pipelines.dedup();
        Stats {
            commits_per_sec: median_of(|m| m.result.commits_per_sec()),
            spin_pct: median_of(|m| m.result.spin_pct_of_cpu()),
            cpu_us_per_commit: median_of(|m| m.result.cpu_us_per_commit()),
            records_per_fsync: median_of(|m| m.result.records_per_fsync()),
            pipeline: if pipelines.is_empty() { "-".to_string() } else { pipelines.join("/") },
            points,
        }
    }

    fn sum(&self, counters: &[&str]) -> u64 {
        self.points.iter().flat_map(|m| counters.iter().map(|name| m.counter(name))).sum()
    }

    fn per_commit(&self, counters: &[&str]) -> f64 {
        let commits: u64 = self.points.iter().map(|m| m.result.commits).sum();
        self.sum(counters) as f64 / commits.max(1) as f64
    }

    /// Wait loops per wait over the wait sites with these prefixes.
    fn loops_per_wait(&self, prefixes: &[&str]) -> f64 {
        let total = |suffix: &str| -> u64 {
            prefixes.iter().map(|prefix| self.sum(&[format!("{prefix}{suffix}").as_str()])).sum()
        };
        total("wait_loops") as f64 / total("waits").max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::device::Device;
    use crate::harness::run::RunOptions;

    fn base() -> LogOptions {
        LogOptions {
            run: RunOptions {
                threads: vec![1, 4],
                seconds: 5.0,
                rounds: 4,
                device: Device::Tmpfs,
                dir: None,
                report_interval: 1,
                json: None,
                plot: None,
            },
            systems: Vec::new(),
            record_bytes: 128,
            durability: Durability::Buffered,
            no_wait: true,
            cpu_quota: None,
            metrics: false,
            prometheus: None,
            async_tasks: false,
        }
    }

    /// Each scenario sets what its seed measured and keeps the device, time,
    /// rounds and outputs the user gave.
    #[test]
    fn scenarios_set_the_seeds_settings() {
        let base = base();
        let expect = [
            ("seed-wakeup", vec![64], Durability::Synced, None),
            ("seed-cpu-quota", vec![64], Durability::Synced, Some(1.0)),
            ("seed-few-cores", vec![128], Durability::Synced, None),
            ("seed-double-buffer", vec![16, 64, 256], Durability::Written, None),
        ];
        let log_rows = SCENARIOS.iter().filter(|row| !row.systems.is_empty()).count();
        assert_eq!(log_rows, expect.len(), "every scenario on the log is checked");
        for (name, threads, durability, quota) in expect {
            let scenario = Scenario::named(name).expect("a row of the table");
            let options = scenario.options(&base);
            assert_eq!(options.run.threads, threads, "{name}");
            assert_eq!(options.durability, durability, "{name}");
            assert_eq!(options.cpu_quota, quota, "{name}");
            assert!(!options.no_wait, "{name}: every scenario waits for its commits");
            assert_eq!((options.run.seconds, options.run.rounds), (5.0, 4), "{name}");
            assert_eq!(options.run.device, base.run.device);
            for system in scenario.0.systems.iter().chain([&scenario.0.reference]) {
                assert!(SystemKind::named(system).is_some() || scenario.runs(system), "{name}: {system}");
            }
        }
    }

    /// The page-store experiments run where they belong: seed-convoy always
    /// (it has no log form), seed-wakeup with an `oltp_*` workload only.
    #[test]
    fn engine_scenarios_run_on_the_page_store() {
        let named = |name| Scenario::named(name).expect("a row of the table");
        assert!(named("seed-convoy").engine(true).is_some());
        assert!(named("seed-wakeup").engine(true).is_none());
        assert!(named("seed-wakeup").engine(false).is_some());
        for name in ["seed-cpu-quota", "seed-few-cores", "seed-double-buffer"] {
            assert!(named(name).engine(false).is_none(), "{name}");
        }
    }
}
