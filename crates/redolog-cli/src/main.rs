//! `redolog`: benchmark, dump and verify redolog logs.

mod bench;
mod inspect;

use std::path::PathBuf;
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
    /// Read a log back: `Log::read_from` on the open log against reopening
    /// it and iterating recovery, over the same bytes, in interleaved rounds.
    ReadBack(bench::read_back::ReadBackOptions),
    /// An openraft log store alone: redolog-raft against a RocksDB log store
    /// (`--features peers`), appends of N entries through openraft's
    /// `blocking_append`, in interleaved rounds.
    RaftStore(bench::raft_store::RaftStoreOptions),
    /// Print a log's files, checkpoints and every record group.
    Dump {
        /// The log directory.
        dir: PathBuf,
        /// Also print each record (length and a preview).
        #[arg(long)]
        records: bool,
    },
    /// Check every block and group of a log. Exit 0 when sound; otherwise exit 1
    /// with a message naming the file, offset and LSN.
    Verify {
        /// The log directory.
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(options) => bench::run(options),
        Command::ReadBack(options) => bench::read_back::run(options),
        Command::RaftStore(options) => bench::raft_store::run(options),
        Command::Dump { dir, records } => inspect::dump(dir, *records),
        Command::Verify { dir } => inspect::verify(dir).map(|summary| println!("{summary}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `redolog dump DIR | head`: the reader left; that is not a failure.
        Err(error) if is_broken_pipe(&*error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("redolog: {error}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(error: &(dyn std::error::Error + 'static)) -> bool {
    error.downcast_ref::<std::io::Error>().is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
}
