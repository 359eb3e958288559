//! `redolog`: read a redolog log by hand — dump it or verify it.
//!
//! This is the tool an operator runs against a log directory. It links the
//! library and nothing heavier: the benchmark is its own binary,
//! `redolog-bench` (crate `redolog-bench`), so this one never replaces the
//! process's `fdatasync` and pulls in no openraft, Tokio, RocksDB or SQLite.

mod inspect;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// redolog: a crash-safe concurrent redo log. Dump or verify a log directory.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
    /// The benchmarks moved to their own binary: `redolog-bench bench`,
    /// `redolog-bench raft-store`, `redolog-bench read-back`.
    #[command(name = "bench", aliases = ["raft-store", "read-back"], hide = true)]
    Moved {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<OsString>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Dump { dir, records } => inspect::dump(dir, *records),
        Command::Verify { dir } => inspect::verify(dir).map(|summary| println!("{summary}")),
        Command::Moved { .. } => Err("the benchmarks are the `redolog-bench` binary: `redolog-bench bench ...`, \
                                      or from the source tree `cargo run --release -- bench ...`"
            .into()),
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
