//! `redolog`: read a redolog log by hand — dump it or verify it.
//!
//! This is the tool an operator runs against a log directory. It links the
//! library and nothing heavier: the benchmark is its own binary,
//! `redolog-bench` (crate `redolog-bench`), so this one never replaces the
//! process's `fdatasync` and pulls in no openraft, Tokio, RocksDB or SQLite.

mod archive;
mod dump;
mod inspect;
mod stats;
mod view;

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
    /// Print a log's files, checkpoints and record groups: a range of them,
    /// their records' payloads, statistics or JSON, or follow the log as it
    /// grows (as pg_waldump does for PostgreSQL's WAL).
    Dump(dump::DumpOptions),
    /// Check every block and group of a log. Exit 0 when sound; otherwise exit 1
    /// with a message naming the file, offset and LSN.
    Verify {
        /// The log directory.
        dir: PathBuf,
        #[command(flatten)]
        keys: inspect::KeyOptions,
    },
    /// Read an archive directory (the segments `redolog::archive::Archiver`
    /// writes).
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// The benchmarks moved to their own binary: `redolog-bench bench`,
    /// `redolog-bench raft-store`, `redolog-bench read-back`.
    #[command(name = "bench", aliases = ["raft-store", "read-back"], hide = true)]
    Moved {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<OsString>,
    },
}

#[derive(Debug, Subcommand)]
enum ArchiveCommand {
    /// Check every entry of every segment: checksums, the LSN chain between
    /// segments, the records. Exit 0 when sound (a torn last entry, what a
    /// crash of the archiver leaves, is reported); otherwise exit 1 with a
    /// message naming the file, offset and LSN.
    Verify {
        /// The archive directory.
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Dump(options) if archive::is_archive(&options.dir) => archive::dump(options),
        Command::Dump(options) => dump::dump(options),
        Command::Verify { dir, keys } => inspect::verify(dir, keys).map(|summary| println!("{summary}")),
        Command::Archive(ArchiveCommand::Verify { dir }) => archive::verify(dir).map(|summary| println!("{summary}")),
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

#[cfg(test)]
mod documented_commands {
    //! Goal: every `redolog` command the README and docs/ give
    //! (`cargo run … --bin redolog -- …`, `redolog dump|verify …`) parses.
    //! The benchmark's commands are checked by redolog-bench's own test.

    use std::path::Path;

    use clap::Parser;

    use super::Cli;

    /// The tool's arguments in every inline code span and code line of `text`.
    fn commands(text: &str) -> Vec<(usize, String)> {
        let mut found = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let spans = line.split('`').skip(1).step_by(2).map(str::to_owned);
            for candidate in spans.chain([line.split(" #").next().unwrap_or_default().to_owned()]) {
                let candidate = candidate.trim();
                let args = match candidate.split_once("--bin redolog -- ") {
                    Some((_, args)) => args,
                    // `redolog verify` alone in prose names the command;
                    // with arguments it is one to run.
                    None => match candidate.strip_prefix("redolog ") {
                        Some(args)
                            if (args.starts_with("dump ")
                                || args.starts_with("verify ")
                                || args.starts_with("archive ")) =>
                        {
                            args
                        }
                        _ => continue,
                    },
                };
                found.push((number + 1, args.replace("DIR", "/tmp/a-log")));
            }
        }
        found
    }

    #[test]
    fn every_documented_command_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut documents = vec![root.join("README.md")];
        documents.extend(
            std::fs::read_dir(root.join("docs"))
                .expect("docs/")
                .map(|entry| entry.expect("entry").path())
                .filter(|path| path.extension().is_some_and(|extension| extension == "md")),
        );
        let mut checked = 0;
        for document in documents {
            let text = std::fs::read_to_string(&document).expect("readable");
            for (line, args) in commands(&text) {
                checked += 1;
                let parsed = Cli::try_parse_from(std::iter::once("redolog").chain(args.split_whitespace()));
                assert!(parsed.is_ok(), "{}:{line}: redolog {args}: {:?}", document.display(), parsed.err());
            }
        }
        assert!(checked >= 2, "the README's dump and verify: {checked} found");
    }

    #[test]
    fn a_wrong_command_is_caught() {
        let found = commands("cargo run --release --bin redolog -- dumpp DIR   # typo\nsee `redolog verify DIR`");
        assert_eq!(found, [(1, "dumpp /tmp/a-log".to_owned()), (2, "verify /tmp/a-log".to_owned())]);
        assert!(Cli::try_parse_from(["redolog", "dumpp", "/tmp/a-log"]).is_err());
    }
}
