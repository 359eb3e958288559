//! `--scenario NAME`: the experiments of the public reports redolog answers —
//! MySQL bugs #95390 and #77094 and the two blog posts on spinning under a CPU
//! quota and on log threads starved on few cores (docs/BENCHMARKS.md, "The MySQL
//! failures, reproduced"). Each sets the systems, threads, durability and CPU
//! limit, runs like any other bench, then prints the report's figure next to ours and the
//! counters that tell the story: the wait triads (no_waits / waits / wait_loops)
//! and the time spent spinning.

use std::path::Path;
use std::sync::Arc;

use clap::ValueEnum;
use redolog::{Config, Pipeline};

use super::report::{median, paired_ratio, Measurement};
use super::systems::{BoxError, RedologSystem, SystemKind};
use super::{BenchOptions, Contender, DurabilityArg};

/// A seed's experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// MySQL bug #95390: the smallest ring and link buffer, 64
    /// threads; waits for space must be woken, not polled.
    #[value(name = "seed-wakeup")]
    Wakeup,
    /// The CPU-quota spinning post (spinning in a container): 64 threads under a 1-CPU CFS quota;
    /// CPU spent spinning and throughput per pipeline.
    #[value(name = "seed-cpu-quota")]
    CpuQuota,
    /// The few-cores post (log threads starved on few cores): 128 threads on this
    /// machine's cores; dedicated versus group commit versus auto, with the log
    /// threads at nice -10 and pinned.
    #[value(name = "seed-few-cores")]
    FewCores,
    /// MySQL bug #77094: written durability, 16 to 256 threads;
    /// append never waits for an in-flight write, against the mutex design.
    #[value(name = "seed-double-buffer")]
    DoubleBuffer,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Wakeup => "seed-wakeup",
            Scenario::CpuQuota => "seed-cpu-quota",
            Scenario::FewCores => "seed-few-cores",
            Scenario::DoubleBuffer => "seed-double-buffer",
        }
    }

    /// The seed's setting and figure.
    pub fn seed_story(self) -> &'static str {
        match self {
            Scenario::Wakeup => {
                "MySQL bug #95390: 8.0.16's log_closer, woken only by its timeout while user threads waited for \
                 recent_closed space, halved throughput (25k TPS; 49k once woken)"
            }
            Scenario::CpuQuota => {
                "Spinning in the Cloud (blog): MySQL 8.0's adaptive spinning read the affinity mask, not the CFS quota: 21 % of the \
                 container's CPU went to spinning; quota-aware spinning gave +35 % TPS (3.5k -> 4.7k)"
            }
            Scenario::FewCores => {
                "MySQL 8.0 redo log write performance analysis (blog): on 8 cores, 8.0's log threads starved behind the user threads: 64.7k QPS against \
                 5.6's 140k; isolating the log threads gave 91.8k"
            }
            Scenario::DoubleBuffer => {
                "MySQL bug #77094: one mutex for appending and writing serialised them in 5.7.7; a second buffer let \
                 them overlap: +10-20 % at 32-256 threads"
            }
        }
    }

    /// `base` with the scenario's systems, threads, durability and CPU limit;
    /// the device, time, rounds and outputs stay as given.
    pub fn options(self, base: &BenchOptions) -> BenchOptions {
        let mut options = base.clone();
        options.durability = DurabilityArg::Synced;
        options.cpu_quota = None;
        options.no_wait = false;
        match self {
            Scenario::Wakeup => options.threads = vec![64],
            Scenario::CpuQuota => {
                options.threads = vec![64];
                options.cpu_quota = Some(1.0);
            }
            Scenario::FewCores => options.threads = vec![128],
            Scenario::DoubleBuffer => {
                options.threads = vec![16, 64, 256];
                options.durability = DurabilityArg::Written;
            }
        }
        options
    }

    /// The systems the scenario compares, opened under `dir`.
    pub fn contenders(self, dir: &Path) -> Result<Vec<Contender>, BoxError> {
        let kinds: &[SystemKind] = match self {
            Scenario::Wakeup => &[SystemKind::Redolog],
            Scenario::CpuQuota | Scenario::FewCores => &[SystemKind::Group, SystemKind::Dedicated, SystemKind::Redolog],
            Scenario::DoubleBuffer => &[SystemKind::Redolog, SystemKind::Mutex],
        };
        let mut contenders = kinds.iter().map(|&kind| Contender::open(kind, dir)).collect::<Result<Vec<_>, _>>()?;
        let redolog = |name: &'static str, config: Config| -> Result<Contender, BoxError> {
            Ok(Contender {
                name,
                system: Arc::new(RedologSystem::open_with(&dir.join(name), config)?),
                is_redolog: true,
                one_thread_only: false,
            })
        };
        match self {
            Scenario::Wakeup => contenders
                .push(redolog("redolog-tiny", Config { buffer_bytes: Config::BUFFER_BYTES_MIN, ..Config::default() })?),
            Scenario::FewCores => {
                let dedicated = Config { pipeline: Pipeline::Dedicated, ..Config::default() };
                contenders.push(redolog("dedicated-nice", Config { log_thread_nice: Some(-10), ..dedicated.clone() })?);
                // The last CPU: the log threads share it with committers, but
                // never wait for a core behind each other's migrations.
                let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
                contenders.push(redolog("dedicated-pinned", Config { log_thread_cpus: vec![last], ..dedicated })?);
            }
            Scenario::CpuQuota | Scenario::DoubleBuffer => {}
        }
        Ok(contenders)
    }

    /// Prints our figures beside the seed's.
    pub fn print_story(self, measurements: &[Measurement]) {
        println!();
        println!("scenario {}", self.name());
        println!("  {}", self.seed_story());
        let reference = match self {
            Scenario::Wakeup => "redolog",
            Scenario::CpuQuota | Scenario::FewCores => "group",
            Scenario::DoubleBuffer => "mutex",
        };
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
                let story = match self {
                    Scenario::Wakeup => format!(
                        "space waits per commit {:.3} (ring {:.3}, link buffer {:.3}), wait loops per commit {:.3} \
                         and per wait {:.2}, lost wake-ups {}",
                        stats.per_commit(&["log_on_buffer_space_waits", "log_on_recent_written_waits"]),
                        stats.per_commit(&["log_on_buffer_space_waits"]),
                        stats.per_commit(&["log_on_recent_written_waits"]),
                        stats.per_commit(&["log_on_buffer_space_wait_loops", "log_on_recent_written_wait_loops"]),
                        stats.loops_per_wait(&["log_on_buffer_space_", "log_on_recent_written_"]),
                        stats.sum(&[
                            "log_on_buffer_space_timeouts_with_work",
                            "log_on_recent_written_timeouts_with_work"
                        ]),
                    ),
                    Scenario::CpuQuota => format!(
                        "spinning {:.1} % of CPU, {:.1} µs CPU per commit, pipeline {}",
                        stats.spin_pct, stats.cpu_us_per_commit, stats.pipeline
                    ),
                    Scenario::FewCores => format!(
                        "{:.1} µs CPU per commit, {:.1} records per fsync, pipeline {}",
                        stats.cpu_us_per_commit, stats.records_per_fsync, stats.pipeline
                    ),
                    Scenario::DoubleBuffer => format!(
                        "appends that waited for ring space per commit {:.4}, write waits per commit {:.3}",
                        stats.per_commit(&["log_on_buffer_space_waits"]),
                        stats.per_commit(&["log_on_write_waits"]),
                    ),
                };
                println!(
                    "  {system:<17} {threads:>4} threads: {:>9.0} commits/s{ratio}; {story}",
                    stats.commits_per_sec
                );
            }
        }
    }
}

/// One system at one thread count, over the rounds.
struct Stats<'a> {
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
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: BenchOptions,
    }

    /// Each scenario sets what its seed measured and keeps the device, time,
    /// rounds and outputs the user gave.
    #[test]
    fn scenarios_set_the_seeds_settings() {
        let base =
            Cli::parse_from(["bench", "--device", "tmpfs", "--seconds", "5", "--rounds", "4", "--no-wait"]).options;
        let expect = [
            (Scenario::Wakeup, vec![64], DurabilityArg::Synced, None),
            (Scenario::CpuQuota, vec![64], DurabilityArg::Synced, Some(1.0)),
            (Scenario::FewCores, vec![128], DurabilityArg::Synced, None),
            (Scenario::DoubleBuffer, vec![16, 64, 256], DurabilityArg::Written, None),
        ];
        for (scenario, threads, durability, quota) in expect {
            let options = scenario.options(&base);
            assert_eq!(options.threads, threads, "{}", scenario.name());
            assert_eq!(options.durability, durability, "{}", scenario.name());
            assert_eq!(options.cpu_quota, quota, "{}", scenario.name());
            assert!(!options.no_wait, "{}: every scenario waits for its commits", scenario.name());
            assert_eq!((options.seconds, options.rounds), (5.0, 4), "{}", scenario.name());
            assert_eq!(options.device, base.device);
            assert_eq!(Scenario::from_str(scenario.name(), false), Ok(scenario), "the CLI name");
        }
    }
}
