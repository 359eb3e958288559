//! A seeded simulation driver (cargo feature `testkit`): for the tests of
//! redolog and of engines built on it, the way FoundationDB and TigerBeetle
//! test a whole system. A [`Simulation`] is a world — the system under test
//! on [`CrashStorage`](crate::storage::CrashStorage), and a reference model
//! of what must survive — and the operations it draws from a seed; the
//! driver runs a schedule of them, catches a failed check, a panic or a
//! hang, shrinks the schedule to the shortest one that still fails, and
//! reports the seed and that schedule. Every run counts which operations,
//! which pairs of consecutive operations and which named crash points it
//! reached ([`Coverage`], FoundationDB's `CODE_PROBE`): a rare path no run
//! reaches is a testing bug, and [`Coverage::missing`] names it.
//!
//! A schedule is a function of its seed; what the system's own threads do
//! meanwhile is not, so a world checks what must hold whatever they did
//! (every acknowledged write survives, nothing else appears), and a
//! shrink re-runs each candidate a few times before it gives up on it.
//!
//! ```
//! use redolog::sim::{explore, Coverage, Rng, Simulation};
//!
//! /// A counter that must never go down: the smallest world.
//! struct Counter(u64);
//!
//! #[derive(Clone, Debug)]
//! enum Op {
//!     Add(u8),
//!     Check,
//! }
//!
//! impl Simulation for Counter {
//!     type Op = Op;
//!     fn new(_seed: u64) -> Self {
//!         Counter(0)
//!     }
//!     fn draw(rng: &mut Rng) -> Op {
//!         if rng.bool() { Op::Add(rng.u8(..)) } else { Op::Check }
//!     }
//!     fn kind(op: &Op) -> &'static str {
//!         match op {
//!             Op::Add(_) => "add",
//!             Op::Check => "check",
//!         }
//!     }
//!     fn step(&mut self, op: &Op, coverage: &mut Coverage) -> Result<(), String> {
//!         match op {
//!             Op::Add(value) => self.0 += u64::from(*value),
//!             Op::Check if self.0 > 1000 => coverage.point("past 1000"),
//!             Op::Check => {}
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let coverage = explore::<Counter>(0..20, 40);
//! assert!(coverage.missing(&["add", "check"], &[]).is_empty());
//! ```

use std::collections::BTreeMap;
use std::fmt::{self, Debug, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

/// The random source of schedules (and of a world's own choices).
pub use fastrand::Rng;

/// How long one run may take before the driver calls it a hang. With
/// `REDOLOG_SIM_TRACE` set in the environment, each step is printed as it
/// begins.
pub const RUN_TIME_LIMIT: Duration = Duration::from_secs(120);

/// A world the driver runs schedules against.
pub trait Simulation: Sized {
    /// One operation of a schedule. Operations name what they act on
    /// abstractly (the k-th known position, the n-th consumer), so that a
    /// shrunk schedule, missing some of the operations before, still means
    /// something.
    type Op: Clone + Debug + Send + 'static;

    /// A fresh world for `seed` (its configuration may depend on it).
    fn new(seed: u64) -> Self;

    /// Draws the next operation of a schedule.
    fn draw(rng: &mut Rng) -> Self::Op;

    /// The operation's kind, for coverage.
    fn kind(op: &Self::Op) -> &'static str;

    /// Runs one operation and checks what it must: `Err` names a violation.
    fn step(&mut self, op: &Self::Op, coverage: &mut Coverage) -> Result<(), String>;

    /// After the schedule: the world's last checks (let background work
    /// finish, crash, recover, compare with the model).
    fn finish(&mut self, coverage: &mut Coverage) -> Result<(), String> {
        let _ = coverage;
        Ok(())
    }
}

/// What the runs reached: operations, pairs of consecutive operations, and
/// named crash points (or any other rare path a world names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Times each operation kind ran.
    pub ops: BTreeMap<String, u64>,
    /// Times each operation kind followed another.
    pub pairs: BTreeMap<(String, String), u64>,
    /// Times each named point was reached.
    pub points: BTreeMap<String, u64>,
    /// Runs merged in.
    pub runs: u64,
}

impl Coverage {
    /// Counts one arrival at the point `name`.
    pub fn point(&mut self, name: impl Into<String>) {
        *self.points.entry(name.into()).or_insert(0) += 1;
    }

    fn op(&mut self, previous: Option<&'static str>, kind: &'static str) {
        *self.ops.entry(kind.to_owned()).or_insert(0) += 1;
        if let Some(previous) = previous {
            *self.pairs.entry((previous.to_owned(), kind.to_owned())).or_insert(0) += 1;
        }
    }

    /// Adds another run's counts.
    pub fn merge(&mut self, other: &Coverage) {
        for (name, count) in &other.ops {
            *self.ops.entry(name.clone()).or_insert(0) += count;
        }
        for (pair, count) in &other.pairs {
            *self.pairs.entry(pair.clone()).or_insert(0) += count;
        }
        for (name, count) in &other.points {
            *self.points.entry(name.clone()).or_insert(0) += count;
        }
        self.runs += other.runs;
    }

    /// What the runs did not reach, of the operation kinds `ops` (alone and
    /// as every ordered pair of them) and the points `points`.
    pub fn missing(&self, ops: &[&str], points: &[&str]) -> Vec<String> {
        let mut missing = Vec::new();
        for op in ops {
            if !self.ops.contains_key(*op) {
                missing.push(format!("operation {op}"));
            }
        }
        for first in ops {
            for second in ops {
                if !self.pairs.contains_key(&((*first).to_owned(), (*second).to_owned())) {
                    missing.push(format!("pair {first} → {second}"));
                }
            }
        }
        for point in points {
            if !self.points.contains_key(*point) {
                missing.push(format!("point {point}"));
            }
        }
        missing
    }

    /// A report: every operation and point with its count, the pairs as a
    /// matrix of counts, and what was expected and not reached.
    pub fn report(&self, ops: &[&str], points: &[&str]) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "coverage of {} runs", self.runs);
        let _ = writeln!(out, "operations:");
        for (name, count) in &self.ops {
            let _ = writeln!(out, "  {name:<28} {count}");
        }
        let _ = writeln!(out, "points:");
        for (name, count) in &self.points {
            let _ = writeln!(out, "  {name:<40} {count}");
        }
        let _ = writeln!(out, "pairs (row: first, column: second; counts):");
        let _ = write!(out, "  {:>4}", "");
        for column in 0..ops.len() {
            let _ = write!(out, " {column:>6}");
        }
        let _ = writeln!(out);
        for (row, first) in ops.iter().enumerate() {
            let _ = write!(out, "  {row:>4}");
            for second in ops {
                let count = self.pairs.get(&((*first).to_owned(), (*second).to_owned())).copied().unwrap_or(0);
                let _ = write!(out, " {count:>6}");
            }
            let _ = writeln!(out, "  {row}: {first}");
        }
        let missing = self.missing(ops, points);
        let _ =
            writeln!(out, "not reached: {}", if missing.is_empty() { "nothing".into() } else { missing.join(", ") });
        out
    }
}

/// A run that failed: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The step that failed (the schedule's length: in `finish`).
    pub step: usize,
    /// The violation, panic message or hang.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.message)
    }
}

/// The schedule of `len` operations drawn from `seed`.
pub fn schedule<S: Simulation>(seed: u64, len: usize) -> Vec<S::Op> {
    let mut rng = Rng::with_seed(seed);
    (0..len).map(|_| S::draw(&mut rng)).collect()
}

/// Runs `ops` against a world made for `seed`, on a thread of its own:
/// a failed check, a panic, or a run longer than [`RUN_TIME_LIMIT`] (a
/// hang; its thread is left behind) is a `Failure`.
pub fn run<S: Simulation + 'static>(seed: u64, ops: &[S::Op]) -> Result<Coverage, Failure> {
    let ops = ops.to_vec();
    let (sender, receiver) = mpsc::channel();
    let step = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let at = step.clone();
    let spawned = std::thread::Builder::new().name(format!("sim-{seed}")).spawn(move || {
        let outcome = catch_unwind(AssertUnwindSafe(|| run_here::<S>(seed, &ops, &at)));
        let outcome = outcome.unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_else(|| "a panic".into());
            Err(Failure { step: at.load(std::sync::atomic::Ordering::SeqCst), message: format!("panic: {message}") })
        });
        let _ = sender.send(outcome);
    });
    if let Err(error) = spawned {
        return Err(Failure { step: 0, message: format!("spawn the run's thread: {error}") });
    }
    receiver.recv_timeout(RUN_TIME_LIMIT).unwrap_or_else(|_| {
        let step = step.load(std::sync::atomic::Ordering::SeqCst);
        Err(Failure { step, message: format!("hang: the run did not end within {RUN_TIME_LIMIT:?}") })
    })
}

fn run_here<S: Simulation>(seed: u64, ops: &[S::Op], at: &std::sync::atomic::AtomicUsize) -> Result<Coverage, Failure> {
    let trace = std::env::var_os("REDOLOG_SIM_TRACE").is_some();
    let mut world = S::new(seed);
    let mut coverage = Coverage { runs: 1, ..Coverage::default() };
    let mut previous = None;
    for (step, op) in ops.iter().enumerate() {
        at.store(step, std::sync::atomic::Ordering::SeqCst);
        if trace {
            eprintln!("seed {seed} step {step}: {op:?}");
        }
        let kind = S::kind(op);
        coverage.op(previous, kind);
        previous = Some(kind);
        world.step(op, &mut coverage).map_err(|message| Failure { step, message })?;
    }
    at.store(ops.len(), std::sync::atomic::Ordering::SeqCst);
    world.finish(&mut coverage).map_err(|message| Failure { step: ops.len(), message })?;
    Ok(coverage)
}

/// Tries of a candidate while shrinking: a world's threads may not fail the
/// same way every time.
const SHRINK_TRIES: usize = 3;

/// The shortest schedule found that still fails for `seed`, by delta
/// debugging: drop chunks of halving size, then single operations, keeping
/// every removal after which a run still fails. A hang is not shrunk (each
/// try would leave a thread behind): its schedule comes back as it is.
pub fn shrink<S: Simulation + 'static>(seed: u64, ops: &[S::Op], failure: &Failure) -> Vec<S::Op> {
    if failure.message.starts_with("hang") {
        return ops.to_vec();
    }
    // What follows the failing step cannot matter.
    let mut ops: Vec<S::Op> = ops[..(failure.step + 1).min(ops.len())].to_vec();
    let fails = |candidate: &[S::Op]| {
        (0..SHRINK_TRIES)
            .any(|_| matches!(run::<S>(seed, candidate), Err(failure) if !failure.message.starts_with("hang")))
    };
    let mut chunk = ops.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        let mut removed_any = false;
        while start < ops.len() {
            let end = (start + chunk).min(ops.len());
            let candidate: Vec<S::Op> = ops[..start].iter().chain(&ops[end..]).cloned().collect();
            if !candidate.is_empty() && fails(&candidate) {
                ops = candidate;
                removed_any = true;
            } else {
                start = end;
            }
        }
        if chunk == 1 && !removed_any {
            return ops;
        }
        chunk = (chunk / 2).max(1);
    }
}

/// Runs at once while exploring: a run mostly waits (grace periods, slow
/// disks, liveness checks), so a few share two cores in an optimised build.
/// A debug build runs one at a time: its runs use the cores, and four at
/// once stretch their timings past what they exercise (and hide nothing
/// the release runs do not find).
const PARALLEL_RUNS: usize = if cfg!(debug_assertions) { 1 } else { 4 };

/// Runs the schedules of `len` operations of every seed in `seeds`, a few
/// at a time; on the first failure (the lowest failing seed among those
/// run) shrinks it and panics with the seed, the failure and the shortest
/// schedule found. Returns the merged coverage.
pub fn explore<S: Simulation + 'static>(seeds: std::ops::Range<u64>, len: usize) -> Coverage {
    use std::sync::atomic::{AtomicU64, Ordering};
    let next = AtomicU64::new(seeds.start);
    let merged = std::sync::Mutex::new(Coverage::default());
    let failed = std::sync::Mutex::new(None::<(u64, Vec<S::Op>, Failure)>);
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL_RUNS {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::SeqCst);
                if seed >= seeds.end || failed.lock().unwrap_or_else(|poison| poison.into_inner()).is_some() {
                    return;
                }
                let ops = schedule::<S>(seed, len);
                match run::<S>(seed, &ops) {
                    Ok(run) => merged.lock().unwrap_or_else(|poison| poison.into_inner()).merge(&run),
                    Err(failure) => {
                        let mut failed = failed.lock().unwrap_or_else(|poison| poison.into_inner());
                        if failed.as_ref().is_none_or(|(first, _, _)| seed < *first) {
                            *failed = Some((seed, ops, failure));
                        }
                    }
                }
            });
        }
    });
    if let Some((seed, ops, failure)) = failed.into_inner().unwrap_or_else(|poison| poison.into_inner()) {
        report_failure::<S>(seed, &ops, &failure);
    }
    merged.into_inner().unwrap_or_else(|poison| poison.into_inner())
}

/// Shrinks a failed run and panics with its seed, failure and shortest
/// schedule.
fn report_failure<S: Simulation + 'static>(seed: u64, ops: &[S::Op], failure: &Failure) -> ! {
    let shortest = shrink::<S>(seed, ops, failure);
    let shortest_failure = if failure.message.starts_with("hang") {
        failure.to_string()
    } else {
        match run::<S>(seed, &shortest) {
            Err(failure) => failure.to_string(),
            Ok(_) => "passed this time (the world's threads)".into(),
        }
    };
    let mut steps = String::new();
    for (index, op) in shortest.iter().enumerate() {
        let _ = writeln!(steps, "  {index:>3}: {op:?}");
    }
    panic!(
        "simulation seed {seed} failed at {failure}\n\
         shortest schedule found ({} of {} operations; run it with \
         redolog::sim::run(seed, &ops)), which fails at {shortest_failure}:\n{steps}",
        shortest.len(),
        ops.len()
    );
}

/// The seeds a simulation test runs: `count_var` from the environment (or
/// `default`) seeds from `REDOLOG_SIM_FIRST` (or 0) on.
///
/// ```
/// assert_eq!(redolog::sim::seeds_from_env("REDOLOG_DOC_SEEDS_UNSET", 24), 0..24);
/// ```
pub fn seeds_from_env(count_var: &str, default: u64) -> std::ops::Range<u64> {
    let number = |var: &str, default: u64| match std::env::var(var) {
        Ok(value) => value.parse().unwrap_or_else(|_| panic!("{var} is a number of seeds, not {value:?}")),
        Err(_) => default,
    };
    let first = number("REDOLOG_SIM_FIRST", 0);
    first..first + number(count_var, default)
}

/// Explores `seeds` ([`explore`]), prints how long it took and the coverage
/// report, and with `long_from` seeds or more fails if any of `ops`, their
/// pairs or `points` went unreached (a path a long run never reaches is a
/// testing bug). Returns the coverage.
pub fn explore_and_report<S: Simulation + 'static>(
    seeds: std::ops::Range<u64>,
    len: usize,
    (ops, points): (&[&str], &[&str]),
    long_from: u64,
) -> Coverage {
    let count = seeds.end - seeds.start;
    let started = std::time::Instant::now();
    let coverage = explore::<S>(seeds, len);
    eprintln!("{count} seeds in {:.1} s", started.elapsed().as_secs_f64());
    eprintln!("{}", coverage.report(ops, points));
    if count >= long_from {
        let missing = coverage.missing(ops, points);
        assert!(missing.is_empty(), "a long run left paths unreached: {missing:?}");
    }
    coverage
}

/// The crash a schedule's code draws: only what was synced survives, all
/// of it, or a random part (from `seed`); with the coverage point naming it.
///
/// ```
/// use redolog::storage::CrashMode;
/// assert_eq!(redolog::sim::crash_mode(0, 7), (CrashMode::DropUnsynced, "crash: only what was synced"));
/// ```
pub fn crash_mode(code: u8, seed: u64) -> (crate::storage::CrashMode, &'static str) {
    use crate::storage::CrashMode;
    match code % 3 {
        0 => (CrashMode::DropUnsynced, "crash: only what was synced"),
        1 => (CrashMode::KeepAll, "crash: everything"),
        _ => (CrashMode::Random(seed), "crash: a random part"),
    }
}
