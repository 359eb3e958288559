//! The command line of `redolog-bench bench`: one set of flags, as sysbench
//! has, read into the options of the workload that runs (`LogOptions`,
//! `OltpOptions`, `ClusterOptions`); a flag that workload does not take is
//! refused, naming it, never ignored. This is the only module that knows
//! every workload's options; the workloads know only their own.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, ValueEnum};
use redolog::Durability;

use crate::harness::device::Device;
use crate::harness::run::RunOptions;
use crate::harness::BoxError;
use crate::log::options::LogOptions;
use crate::log::registry::SystemKind;
use crate::oltp::options::{OltpOptions, OltpWorkload, DEFAULT_LOG_CAPACITY};
use crate::raft::{ClusterOptions, OpenraftLine, Placement, ServiceOptions};
use crate::scenario::Scenario;

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
    pub fn durability(self) -> Durability {
        match self {
            DurabilityArg::Synced => Durability::Synced,
            DurabilityArg::Written => Durability::Written,
            DurabilityArg::Buffered => Durability::Buffered,
        }
    }
}

/// What `redolog-bench bench` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    /// Commits to one log: redolog against the baselines and peers.
    Log,
    /// Writes through the leader of a three-node openraft cluster in this
    /// process: redolog-raft against the RocksDB and raft-log log stores
    /// (`--features peers`); `--threads` are the client tasks.
    Raft,
    /// The replicated key-value service across processes as its users
    /// meet it, one write per request — its throughput and tail — beside
    /// etcd 3.4 (`--features peers`); `--threads` are the clients.
    Kv,
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
            WorkloadArg::Kv => "kv",
            WorkloadArg::OltpInsert => "oltp_insert",
            WorkloadArg::OltpUpdateIndex => "oltp_update_index",
            WorkloadArg::OltpUpdateNonIndex => "oltp_update_non_index",
            WorkloadArg::OltpWriteOnly => "oltp_write_only",
        }
    }
}

/// Options of `redolog-bench bench`.
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
    /// With `--workload raft`: the openraft lines to run each store on (0.9:
    /// the core awaits each append's flush; 0.10: it does not).
    #[arg(long, value_delimiter = ',', default_value = "0.9,0.10")]
    pub openraft: Vec<OpenraftLine>,
    /// With `--workload raft`: where the three nodes run — `in-process` (one
    /// process, an in-memory network) and `processes` (one `redolog-kv`
    /// node process each, HTTP on loopback, the clients over HTTP too;
    /// openraft 0.10, redolog-raft and rocksdb-raft only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "in-process")]
    pub placement: Vec<Placement>,
    /// With `--workload kv`: the services to compare (redolog-kv, etcd);
    /// default: every one this build has.
    #[arg(long, value_delimiter = ',')]
    pub services: Vec<String>,
    /// With `--workload kv`: keys loaded before each point, one data set per
    /// value (0: a fresh one; 1000000: one whose snapshot takes longer than
    /// a heartbeat).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub keys: Vec<u64>,
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
    /// `innodb_redo_log_capacity`, default 100 MiB; `--scenario seed-convoy`
    /// uses 64 MiB unless this is given).
    #[arg(long, default_value_t = DEFAULT_LOG_CAPACITY)]
    pub log_capacity: u64,
    /// With `--workload oltp_*`, measurement only: the page store writes
    /// pages in place without the doublewrite file — unprotected from torn
    /// pages — to measure what the doublewrite file costs
    /// (docs/PAGESTORE.md §4.1).
    #[arg(long)]
    pub no_doublewrite: bool,
    /// With `--workload oltp_*`: also run the page store with an `Archiver`
    /// on its log — asynchronous (`archived`: commits wait for the log only)
    /// and synchronous (`archived-sync`: commits wait with `Archiver::wait`,
    /// synced in the log and in the archive) — paired with the store alone
    /// (docs/DESIGN.md §1.17).
    #[arg(long)]
    pub archiver: bool,
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
    #[arg(long = "time", alias = "seconds", default_value_t = crate::harness::run::DEFAULT_SECONDS)]
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
    /// path) or sim:LATENCY (/dev/shm with every fdatasync taking that long,
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
    /// Serve the live counters of the log being benchmarked to Prometheus at
    /// this address (`http://ADDR/metrics`, published every second, labelled
    /// by point and threads) while the benchmark runs (`--workload log`).
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<std::net::SocketAddr>,
    /// Write the results as JSON to this file (`--workload log` and `oltp_*`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw commits/s and p99 latency against threads, one line per system, to
    /// this SVG file, and, built with `--features png`, the same as a PNG
    /// beside it (FILE.png) (`--workload log` and `oltp_*`).
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

/// The options only some workloads take, by clap id: each workload refuses
/// the ones it is not listed with.
const TAKEN_BY: &[(&str, &[Taker])] = &[
    ("systems", &[Taker::Log]),
    ("durability", &[Taker::Log]),
    ("no_wait", &[Taker::Log]),
    ("cpu_quota", &[Taker::Log]),
    ("metrics", &[Taker::Log]),
    ("prometheus", &[Taker::Log]),
    ("async_tasks", &[Taker::Log]),
    ("record_bytes", &[Taker::Log, Taker::Raft, Taker::Kv]),
    ("scenario", &[Taker::Log, Taker::Oltp]),
    ("json", &[Taker::Log, Taker::Oltp]),
    ("plot", &[Taker::Log, Taker::Oltp]),
    ("stores", &[Taker::Raft]),
    ("openraft", &[Taker::Raft]),
    ("placement", &[Taker::Raft]),
    ("services", &[Taker::Kv]),
    ("keys", &[Taker::Kv]),
    ("tables", &[Taker::Oltp]),
    ("table_size", &[Taker::Oltp]),
    ("flush_log_at_trx_commit", &[Taker::Oltp]),
    ("buffer_pool_instances", &[Taker::Oltp]),
    ("buffer_pool_bytes", &[Taker::Oltp]),
    ("io_capacity", &[Taker::Oltp]),
    ("log_capacity", &[Taker::Oltp]),
    ("no_doublewrite", &[Taker::Oltp]),
    ("archiver", &[Taker::Oltp]),
];

/// What runs, as far as the flags are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Taker {
    Log,
    Oltp,
    Raft,
    Kv,
}

/// The workload a command line runs, with its options (the openraft ones
/// parsed, and refused, by a build without the `raft` feature).
#[cfg_attr(not(feature = "raft"), allow(dead_code))]
pub enum Run {
    /// `--workload log`, with the scenario it reproduces, if any.
    Log(LogOptions, Option<Scenario>),
    /// `--workload oltp_*`.
    Oltp(OltpOptions),
    /// A scenario's experiment on the page store.
    Engine(OltpOptions, crate::scenario::EngineRun),
    /// `--workload raft`.
    Raft(ClusterOptions),
    /// `--workload kv`.
    Kv(ServiceOptions),
}

impl BenchOptions {
    /// The workload these options run and its options; `matches` (the
    /// `bench` subcommand's) tell which flags were given, so a flag the
    /// workload does not take is refused by name.
    pub fn into_run(self, matches: &ArgMatches) -> Result<Run, BoxError> {
        let on_log = self.workload == WorkloadArg::Log;
        let engine = self.scenario.and_then(|scenario| scenario.engine(on_log));
        let (taker, what) = match (self.workload, engine, self.scenario) {
            (_, Some(_), Some(scenario)) => (Taker::Oltp, format!("--scenario {}", scenario.name())),
            (WorkloadArg::Log, ..) => (Taker::Log, "--workload log".to_string()),
            (WorkloadArg::Raft, ..) => (Taker::Raft, "--workload raft".to_string()),
            (WorkloadArg::Kv, ..) => (Taker::Kv, "--workload kv".to_string()),
            (workload, ..) => (Taker::Oltp, format!("--workload {}", workload.name())),
        };
        refuse_flags_not_taken(taker, &what, matches)?;
        let oltp = |workload| self.oltp_options(workload);
        Ok(match (self.workload, engine) {
            (WorkloadArg::Raft, _) => Run::Raft(ClusterOptions {
                run: self.run_options(),
                stores: self.stores.clone(),
                lines: self.openraft.clone(),
                placements: self.placement.clone(),
                record_bytes: self.record_bytes,
            }),
            (WorkloadArg::Kv, _) => Run::Kv(ServiceOptions {
                run: self.run_options(),
                services: self.services.clone(),
                keys: self.keys.clone(),
                record_bytes: self.record_bytes,
            }),
            // The engine scenarios pick their own workload.
            (WorkloadArg::Log, Some(engine)) => Run::Engine(oltp(OltpWorkload::UpdateNonIndex), engine),
            (WorkloadArg::Log, None) => match self.scenario {
                Some(scenario) => Run::Log(scenario.options(&self.log_options()), Some(scenario)),
                None => Run::Log(self.log_options(), None),
            },
            (WorkloadArg::OltpInsert, engine) => oltp_run(oltp(OltpWorkload::Insert), engine),
            (WorkloadArg::OltpUpdateIndex, engine) => oltp_run(oltp(OltpWorkload::UpdateIndex), engine),
            (WorkloadArg::OltpUpdateNonIndex, engine) => oltp_run(oltp(OltpWorkload::UpdateNonIndex), engine),
            (WorkloadArg::OltpWriteOnly, engine) => oltp_run(oltp(OltpWorkload::WriteOnly), engine),
        })
    }

    fn run_options(&self) -> RunOptions {
        RunOptions {
            threads: self.threads.clone(),
            seconds: self.seconds,
            rounds: self.rounds,
            device: self.device,
            dir: self.dir.clone(),
            report_interval: if self.intervals == Some(false) { 0 } else { self.report_interval },
            json: self.json.clone(),
            plot: self.plot.clone(),
        }
    }

    fn log_options(&self) -> LogOptions {
        LogOptions {
            run: self.run_options(),
            systems: self.systems.clone(),
            record_bytes: self.record_bytes,
            durability: self.durability.durability(),
            no_wait: self.no_wait,
            cpu_quota: self.cpu_quota,
            metrics: self.metrics,
            prometheus: self.prometheus,
            async_tasks: self.async_tasks,
        }
    }

    fn oltp_options(&self, workload: OltpWorkload) -> OltpOptions {
        OltpOptions {
            run: self.run_options(),
            workload,
            tables: self.tables,
            table_size: self.table_size,
            flush_log_at_trx_commit: self.flush_log_at_trx_commit,
            buffer_pool_instances: self.buffer_pool_instances,
            buffer_pool_bytes: self.buffer_pool_bytes,
            io_capacity: self.io_capacity,
            log_capacity: self.log_capacity,
            no_doublewrite: self.no_doublewrite,
            archiver: self.archiver,
        }
    }
}

/// An `oltp_*` workload, or the scenario's experiment on the page store.
fn oltp_run(options: OltpOptions, engine: Option<crate::scenario::EngineRun>) -> Run {
    match engine {
        Some(engine) => Run::Engine(options, engine),
        None => Run::Oltp(options),
    }
}

/// The first flag given on the command line that `taker` does not take, as
/// an error naming it and what runs (`what`).
fn refuse_flags_not_taken(taker: Taker, what: &str, matches: &ArgMatches) -> Result<(), BoxError> {
    for (id, takers) in TAKEN_BY {
        let given = matches.value_source(id) == Some(ValueSource::CommandLine);
        if given && !takers.contains(&taker) {
            // The flag as the user typed it: these options' own arguments.
            let options = BenchOptions::augment_args(clap::Command::new("bench"));
            let flag = options.get_arguments().find(|arg| arg.get_id() == *id).and_then(|arg| arg.get_long());
            let flag = flag.unwrap_or(id);
            return Err(format!("--{flag} does not apply to {what}").into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::*;
    use crate::harness::run::DEFAULT_THREADS;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: BenchOptions,
    }

    fn run(args: &[&str]) -> Result<Run, String> {
        let matches = Cli::command().try_get_matches_from(args).map_err(|error| error.to_string())?;
        let options = Cli::from_arg_matches(&matches).map_err(|error| error.to_string())?.options;
        options.into_run(&matches).map_err(|error| error.to_string())
    }

    #[test]
    fn the_threads_default_and_its_constant_agree() {
        let Ok(Run::Log(options, None)) = run(&["bench"]) else { panic!("the default runs the log") };
        assert_eq!(options.run.threads, DEFAULT_THREADS);
    }

    /// Every id in the table is an option of the command line: a renamed
    /// field would otherwise never be refused.
    #[test]
    fn every_listed_option_exists() {
        let command = Cli::command();
        for (id, _) in TAKEN_BY {
            assert!(command.get_arguments().any(|arg| arg.get_id() == *id), "{id}");
        }
    }

    #[test]
    fn a_flag_the_workload_does_not_take_is_refused_by_name() {
        let refused = |args: &[&str]| run(args).err().unwrap_or_else(|| panic!("{args:?} ran"));
        assert_eq!(
            refused(&["bench", "--workload", "raft", "--json", "x.json"]),
            "--json does not apply to --workload raft"
        );
        assert_eq!(refused(&["bench", "--stores", "raft-log"]), "--stores does not apply to --workload log");
        assert_eq!(
            refused(&["bench", "--workload", "oltp_insert", "--no-wait"]),
            "--no-wait does not apply to --workload oltp_insert"
        );
        assert_eq!(refused(&["bench", "--tables", "2"]), "--tables does not apply to --workload log");
        assert_eq!(
            refused(&["bench", "--scenario", "seed-convoy", "--metrics"]),
            "--metrics does not apply to --scenario seed-convoy"
        );
        // The engine scenarios take the page store's options under the
        // default workload.
        assert!(matches!(run(&["bench", "--scenario", "seed-convoy", "--tables", "8"]), Ok(Run::Engine(..))));
        assert!(matches!(run(&["bench", "--scenario", "seed-wakeup"]), Ok(Run::Log(_, Some(_)))));
        assert!(matches!(
            run(&["bench", "--scenario", "seed-wakeup", "--workload", "oltp_insert"]),
            Ok(Run::Engine(..))
        ));
    }
}
