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

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

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

// The command line is parsed once, at start: `bench`'s options are the
// large variant, and boxing them would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Compare redolog with same-run baselines (sysbench-style output).
    Bench(BenchOptions),
    /// Read a log back: `Log::read_from` on the open log against reopening
    /// it and iterating recovery, over the same bytes, in interleaved rounds.
    ReadBack(log::read_back::ReadBackOptions),
    /// Commit throughput while `Log::resize` grows and shrinks the log,
    /// against the second before each resize.
    Resize(log::resize::ResizeOptions),
    /// An openraft log store alone: redolog-raft against a RocksDB log store
    /// and raft-log (`--features peers`), appends of N entries through
    /// openraft's `blocking_append`, in interleaved rounds.
    RaftStore(raft::RaftStoreOptions),
    /// One node of redolog-kv's replicated key-value service on a store of
    /// this build: what `bench --workload raft --placement processes`
    /// starts, one process per node.
    #[cfg(feature = "raft")]
    #[command(hide = true)]
    KvNode(raft::processes::KvNodeOptions),
    /// Runs a program (a peer's server: etcd) in this process's place,
    /// killed by the kernel when the benchmark that started it dies.
    #[cfg(feature = "raft")]
    #[command(hide = true)]
    Child(raft::processes::ChildOptions),
}

/// What a command line asks for, read into the options of what runs (the
/// openraft ones parsed, and refused, by a build without the `raft` feature).
#[cfg_attr(not(feature = "raft"), allow(dead_code))]
enum Job {
    /// `bench`: the workload `--workload` names (or its `--scenario`'s
    /// experiment).
    Bench(Run),
    ReadBack(log::read_back::ReadBackOptions),
    Resize(log::resize::ResizeOptions),
    RaftStore(raft::RaftStoreOptions),
    #[cfg(feature = "raft")]
    KvNode(raft::processes::KvNodeOptions),
    #[cfg(feature = "raft")]
    Child(raft::processes::ChildOptions),
}

/// Reads parsed arguments into a [`Job`]: a `bench` command into its
/// workload's options, refusing a flag that workload does not take.
fn job(matches: &ArgMatches) -> Result<Job, BoxError> {
    Ok(match Cli::from_arg_matches(matches)?.command {
        Command::Bench(options) => {
            Job::Bench(options.into_run(matches.subcommand_matches("bench").ok_or("no bench arguments")?)?)
        }
        Command::ReadBack(options) => Job::ReadBack(options),
        Command::Resize(options) => Job::Resize(options),
        Command::RaftStore(options) => Job::RaftStore(options),
        #[cfg(feature = "raft")]
        Command::KvNode(options) => Job::KvNode(options),
        #[cfg(feature = "raft")]
        Command::Child(options) => Job::Child(options),
    })
}

fn main() -> ExitCode {
    let result = job(&Cli::command().get_matches()).and_then(|job| match job {
        Job::Bench(Run::Log(options, scenario)) => {
            if let Some(listen) = options.prometheus {
                harness::serve_prometheus(listen)?;
            }
            log::run(&options, scenario.as_ref().map(|scenario| scenario as &dyn log::Experiment))
        }
        Job::Bench(Run::Oltp(options)) => oltp::run(&options),
        Job::Bench(Run::Engine(options, engine)) => engine(&options),
        #[cfg(feature = "raft")]
        Job::Bench(Run::Raft(options)) => raft::sweep::run(&options),
        #[cfg(feature = "raft")]
        Job::Bench(Run::Kv(options)) => raft::service::run(&options),
        #[cfg(not(feature = "raft"))]
        Job::Bench(Run::Raft(_)) => Err(raft::options::not_built("bench --workload raft")),
        #[cfg(not(feature = "raft"))]
        Job::Bench(Run::Kv(_)) => Err(raft::options::not_built("bench --workload kv")),
        Job::ReadBack(options) => log::read_back::run(&options),
        Job::Resize(options) => log::resize::run(&options),
        #[cfg(feature = "raft")]
        Job::RaftStore(options) => raft::alone::run(&options),
        #[cfg(not(feature = "raft"))]
        Job::RaftStore(_) => Err(raft::options::not_built("raft-store")),
        #[cfg(feature = "raft")]
        Job::KvNode(options) => raft::processes::kv_node(options),
        #[cfg(feature = "raft")]
        Job::Child(options) => raft::processes::child(options),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("redolog-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod documented_commands {
    //! Goal: every benchmark command the README and docs/ give parses, with
    //! the flags its workload takes — a renamed flag or a flag moved to
    //! another workload fails here, not in a reader's terminal.
    //! Method: the lines of every fenced block, and every inline code span,
    //! that run this binary (`cargo run … -- bench|raft-store|read-back …`,
    //! `./target/release/redolog-bench …`), continuation lines joined, shell
    //! variables given a value; each is parsed as `main` parses it, and a
    //! `bench` command is read into its workload's options. A command that
    //! runs what a feature builds (the openraft workloads: `raft`, which
    //! `peers` turns on; `--prometheus`: `prometheus`) must name the feature
    //! in its line or block, so a reader's copy builds it; commands that
    //! name features this build lacks are checked in a build with them
    //! (`.ci/run` runs this test so).

    use std::path::{Path, PathBuf};

    use clap::CommandFactory;

    use super::{job, Cli, Job, Run};

    /// Shell variables the documented loops use, with a value each.
    const VARIABLES: [(&str, &str); 5] = [
        ("device", "tmpfs"),
        ("dev", "sim:100us"),
        ("s", "seed-wakeup"),
        ("w", "oltp_insert"),
        ("dw", "--no-doublewrite"),
    ];

    /// README.md and docs/*.md.
    fn documents() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut documents = vec![root.join("README.md")];
        for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|extension| extension == "md") {
                documents.push(path);
            }
        }
        documents
    }

    /// The features a line names (`--features a,b`).
    fn named_features(line: &str) -> Vec<String> {
        let mut words = line.split_whitespace();
        let mut named = Vec::new();
        while let Some(word) = words.next() {
            if word == "--features" {
                named.extend(words.next().unwrap_or_default().split(',').map(str::to_owned));
            }
        }
        named
    }

    /// Whether this build has `feature` (another package's feature, named
    /// for another command of the block, is not this build's to have).
    fn built(feature: &str) -> bool {
        let features = [
            ("peers", cfg!(feature = "peers")),
            ("raft", cfg!(feature = "raft")),
            ("prometheus", cfg!(feature = "prometheus")),
            ("png", cfg!(feature = "png")),
        ];
        features.iter().find(|(name, _)| *name == feature).is_none_or(|(_, built)| *built)
    }

    /// The features what `job` runs is built with.
    fn needed(job: &Job) -> Vec<&'static str> {
        match job {
            Job::Bench(Run::Raft(_) | Run::Kv(_)) | Job::RaftStore(_) => vec!["raft"],
            Job::Bench(Run::Log(options, _)) if options.prometheus.is_some() => vec!["prometheus"],
            _ => Vec::new(),
        }
    }

    /// The commands in `text`: (line number, command, the features its line
    /// or block names).
    fn commands(text: &str) -> Vec<(usize, String, Vec<String>)> {
        let mut found = Vec::new();
        let mut block: Option<Vec<(usize, String)>> = None;
        let mut pending = String::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                match block.take() {
                    Some(lines) => {
                        let named: Vec<String> = lines.iter().flat_map(|(_, line)| named_features(line)).collect();
                        found.extend(lines.into_iter().map(|(number, line)| (number, line, named.clone())));
                    }
                    None => block = Some(Vec::new()),
                }
                continue;
            }
            if let Some(lines) = block.as_mut() {
                let code = line.split(" #").next().unwrap_or_default().trim();
                pending.push_str(code.trim_end_matches('\\'));
                pending.push(' ');
                if !code.ends_with('\\') {
                    lines.push((number + 1, std::mem::take(&mut pending)));
                }
            } else {
                for span in line.split('`').skip(1).step_by(2) {
                    found.push((number + 1, span.to_owned(), named_features(span)));
                }
            }
        }
        found.into_iter().filter_map(|(number, line, named)| Some((number, args_of(&line)?, named))).collect()
    }

    /// The arguments `line` gives this binary, if it runs it.
    fn args_of(line: &str) -> Option<String> {
        let line = line.trim();
        let args = if let Some(rest) = line.strip_prefix("./target/release/redolog-bench ") {
            rest
        } else if line.starts_with("cargo run") && !line.contains("--bin ") && !line.contains("--example ") {
            line.split_once(" -- ")?.1
        } else {
            return None;
        };
        ["bench", "raft-store", "read-back"].iter().any(|command| args.starts_with(command)).then(|| args.to_owned())
    }

    /// `args` with the shell variables given their values.
    fn expand(args: &str) -> Result<Vec<String>, String> {
        args.split_whitespace()
            .map(|word| {
                let mut word = word.to_owned();
                while let Some(at) = word.find('$') {
                    let rest = &word[at + 1..];
                    let (name, length) = match rest.strip_prefix('{') {
                        Some(inner) => {
                            let end = inner.find('}').ok_or_else(|| format!("unclosed ${{ in {word}"))?;
                            let name: String = inner[..end].chars().take_while(|c| c.is_alphanumeric()).collect();
                            (name, end + 2)
                        }
                        None => {
                            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                            let length = name.len();
                            (name, length)
                        }
                    };
                    let value = VARIABLES
                        .iter()
                        .find(|(variable, _)| *variable == name)
                        .ok_or_else(|| format!("no value for the shell variable {name}"))?
                        .1;
                    word.replace_range(at..at + 1 + length, value);
                }
                Ok(word)
            })
            .collect()
    }

    /// Parses `args` as `main` does; a `bench` command is also read into its
    /// workload's options (which refuses flags the workload does not take);
    /// what it runs must be built with the features `named`.
    fn check(args: &str, named: &[String]) -> Result<(), String> {
        let words = expand(args)?;
        let matches = Cli::command()
            .try_get_matches_from(std::iter::once("redolog-bench".to_owned()).chain(words))
            .map_err(|error| error.to_string())?;
        let job = job(&matches).map_err(|error| error.to_string())?;
        let given = |feature: &str| named.iter().any(|name| name == feature || (feature == "raft" && name == "peers"));
        match needed(&job).into_iter().find(|feature| !given(feature)) {
            Some(feature) => Err(format!("runs what --features {feature} builds, and does not name it")),
            None => Ok(()),
        }
    }

    #[test]
    fn every_documented_command_parses() {
        let (mut found, mut checked) = (0, 0);
        let mut failures = Vec::new();
        for document in documents() {
            let text = std::fs::read_to_string(&document).expect("readable");
            for (line, args, named) in commands(&text) {
                found += 1;
                if !named.iter().all(|feature| built(feature)) {
                    continue;
                }
                checked += 1;
                if let Err(error) = check(&args, &named) {
                    let first = error.lines().next().unwrap_or_default().to_owned();
                    failures.push(format!("{}:{line}: {args}\n    {first}", document.display()));
                }
            }
        }
        assert!(found >= 30 && checked >= 10, "{found} commands found, {checked} checked: is the extraction broken?");
        assert!(
            failures.is_empty(),
            "{} of {checked} documented commands fail:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn a_wrong_command_is_caught() {
        assert!(check("bench --workload raft --json x.json", &[]).is_err(), "a flag the workload does not take");
        assert!(check("bench --no-such-flag", &[]).is_err());
        assert!(check("bench --device $device", &[]).is_ok());
        assert!(check("bench --device $nothing", &[]).is_err());
        assert!(check("bench --workload raft", &[]).is_err(), "the raft workload without its feature named");
        assert!(check("bench --workload raft", &["peers".to_owned()]).is_ok());
        assert_eq!(named_features("cargo run --release --features raft,png -- bench"), ["raft", "png"]);
        let text = "```sh\ncargo run --release -- bench \\\n    --threads 2   # a comment\n```\nsee `cargo run --release -- raft-store --rounds 1`\n";
        let found: Vec<(usize, String)> = commands(text).into_iter().map(|(line, args, _)| (line, args)).collect();
        assert_eq!(found, [(3, "bench  --threads 2".to_owned()), (5, "raft-store --rounds 1".to_owned())]);
    }
}
