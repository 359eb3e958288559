//! `redolog`: benchmark, dump and verify redolog logs.

mod bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// redolog: a crash-safe concurrent redo log. Benchmark it, dump or verify logs.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare redolog with same-run baselines (sysbench-style output).
    Bench(bench::BenchOptions),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(options) => bench::run(options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("redolog: {error}");
            ExitCode::FAILURE
        }
    }
}
