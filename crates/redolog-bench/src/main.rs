//! `redolog-bench`: redolog against same-run baselines and the peers a user
//! would pick instead — the log (`--workload log`), the page store on
//! sysbench's write workloads (`oltp_*`) and the openraft store in a
//! three-node cluster (`raft`), plus the openraft store alone (`raft-store`)
//! and the read path (`read-back`).
//!
//! One design for every workload: each has a registry of the systems it
//! compares (`log::registry`, `oltp::systems`, `raft::stores`), every one runs
//! its points through the one round driver (`harness::rounds`), and results are
//! printed, written as JSON and plotted by the same harness. This binary
//! replaces libc's `fdatasync`/`fsync` for the whole process
//! (`harness::sync_hook`) to count them and to simulate a device; the tool
//! users run on their logs, `redolog`, is the crate `redolog-cli` and does not.

mod harness;
mod log;
mod oltp;
mod options;
mod raft;
mod scenario;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use harness::BoxError;
use options::{BenchOptions, Run};

/// redolog-bench: compare redolog with same-run baselines and peers
/// (sysbench-style output).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare redolog with same-run baselines (sysbench-style output).
    Bench(BenchOptions),
    /// Read a log back: `Log::read_from` on the open log against reopening
    /// it and iterating recovery, over the same bytes, in interleaved rounds.
    ReadBack(log::read_back::ReadBackOptions),
    /// An openraft log store alone: redolog-raft against a RocksDB log store
    /// and raft-log (`--features peers`), appends of N entries through
    /// openraft's `blocking_append`, in interleaved rounds.
    RaftStore(raft::alone::RaftStoreOptions),
}

/// Runs the benchmark `--workload` names (or its `--scenario`'s experiment).
fn bench(options: BenchOptions, matches: &clap::ArgMatches) -> Result<(), BoxError> {
    let command = Cli::command();
    let bench = command.find_subcommand("bench").ok_or("no bench subcommand")?;
    match options.into_run(matches, bench)? {
        Run::Log(options, scenario) => log::run(&options, scenario.as_ref().map(|s| s as &dyn log::Experiment)),
        Run::Oltp(options) => oltp::run(&options),
        Run::Engine(options, engine) => engine(&options),
        Run::Raft(options) => raft::cluster::run(&options),
    }
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let result = match cli.command {
        Command::Bench(options) => match matches.subcommand_matches("bench") {
            Some(bench_matches) => bench(options, bench_matches),
            None => Err("no bench arguments".into()),
        },
        Command::ReadBack(options) => log::read_back::run(&options),
        Command::RaftStore(options) => raft::alone::run(&options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("redolog-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
