//! `Pipeline::Auto`: choosing between group commit and the dedicated log threads
//! at run time ([DESIGN §1.12](crate::docs::design#112-choosing-the-pipeline-auto)).
//!
//! Every 100 ms, after a write pass, `Auto` looks at what was measured over the
//! last interval. Where one pipeline wins by construction (a sync too short to
//! overlap, one or two committers, commits that wait for `write()` only) a row
//! of the table below decides. Everywhere else the winner depends on the
//! device, the CPUs and what the application does between commits, and a
//! prediction from this process's own counters can chase itself (the measure
//! moves with the pipeline it picks): there `Auto` *measures*. It runs each
//! pipeline for two short intervals, in the order other, current, current,
//! other (so a drift in the load cancels out), keeps the log threads only if
//! they wrote at least `MARGIN` more bytes per second than group commit, and
//! holds that choice until the load changes or `REPROBE_AFTER` has passed.

use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::Moment;
use crate::config::Pipeline;
use crate::cpu::CpuMonitor;
use crate::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// How often `Auto` re-evaluates, and how long a probe measures a pipeline.
const EVALUATE_EVERY: Duration = Duration::from_millis(100);
/// After a probe switches, this much is left unmeasured: the hand-over and the
/// threads that were waiting under the other pipeline.
const SETTLE: Duration = Duration::from_millis(30);
/// Evaluations in a row that must agree before the table's verdict changes.
const CONFIRMATIONS: u32 = 2;
/// How much faster the log threads must write to be kept: they cost two
/// threads' CPU and two hand-offs per commit, so a tie goes to group commit.
const MARGIN: f64 = 0.03;
/// A probe's choice is measured again after this long even if the load looks
/// the same.
const REPROBE_AFTER: Duration = Duration::from_secs(10);
/// A load change starts a new probe at most this often.
const PROBE_AT_MOST_EVERY: Duration = Duration::from_secs(1);
/// The load has changed when the committers waiting on average moved by this
/// factor from what the probe saw under the pipeline it kept.
const LOAD_CHANGE: f64 = 2.0;

/// What the table decides from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AutoInput {
    /// Expected duration of a sync pass (EMA), in µs: what the log threads
    /// overlap with the next write.
    pub(crate) sync_pass_us: f64,
    /// Mean number of threads waiting for a commit to be written or synced
    /// (Little's law: total wait time / elapsed time).
    pub(crate) committers: f64,
    /// The share of that waiting spent waiting for a sync (`Durability::Synced`)
    /// rather than for a write (`Written`), from 0 to 1.
    pub(crate) sync_share: f64,
}

/// One row of the rule table: the first row whose condition holds decides.
pub(crate) struct Rule {
    pub(crate) when: &'static str,
    pub(crate) applies: fn(&AutoInput) -> bool,
    pub(crate) choose: Pipeline,
}

/// The rule table ([DESIGN §1.12](crate::docs::design#112-choosing-the-pipeline-auto) gives the measurements behind each
/// row). Where no row applies, `Auto` measures.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        // A sync this short (tmpfs, a write cache with power-loss protection)
        // leaves nothing to overlap: the two extra hand-offs per commit (appender
        // → writer → flusher → committer) cost more than they save. /dev/shm:
        // dedicated reached 0.03–0.8× group commit.
        when: "sync pass under 20 µs",
        applies: |input| input.sync_pass_us < crate::pipeline::FAST_PASS_NS as f64 / 1000.0,
        choose: Pipeline::GroupCommit,
    },
    Rule {
        // Low concurrency: a committer doing its own write and sync has the
        // shortest path. Disk, 1 thread: dedicated 0.67× group commit.
        when: "fewer than 3 committers waiting on average",
        applies: |input| input.committers < 3.0,
        choose: Pipeline::GroupCommit,
    },
    Rule {
        // Commits that wait for write() only (innodb_flush_log_at_trx_commit=2):
        // no committer waits for the sync the flusher would overlap, so the
        // extra hand-off to the writer is pure cost. sim:100us, written, 16 and
        // 64 threads on 2 CPUs: dedicated 0.34–0.39× group commit.
        when: "most waiting is for a write, not a sync",
        applies: |input| input.sync_share < 0.5,
        choose: Pipeline::GroupCommit,
    },
];

/// The reason `Metrics::pipeline_reason` gives while a probe runs.
pub(crate) const PROBING: &str = "measuring both pipelines";
/// The reason after a probe that kept group commit.
pub(crate) const MEASURED_GROUP: &str = "measured: the log threads not 3 % faster than group commit";
/// The reason after a probe that kept the log threads.
pub(crate) const MEASURED_DEDICATED: &str = "measured: the log threads 3 % or more faster than group commit";

/// The row of the rule table that decides for `input`; `None` where no row
/// does and `Auto` measures.
pub(crate) fn rule_for(input: &AutoInput) -> Option<&'static Rule> {
    RULES.iter().find(|rule| (rule.applies)(input))
}

/// One interval between two evaluations, as `Auto` saw it.
#[derive(Clone, Copy, Debug)]
struct Interval {
    /// Its length, in ns.
    elapsed_ns: u64,
    /// Bytes written in it (the written LSN's advance): the work done.
    written: u64,
    /// What the table reads.
    input: AutoInput,
    /// The pipeline that ran it.
    active: Pipeline,
}

/// One step of a probe: a pipeline run for a while, measured or not.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Step {
    pipeline: Pipeline,
    lasts: Duration,
    measured: bool,
}

/// A probe's plan from `current`: other, current, current, other — each
/// switch followed by an unmeasured `SETTLE`, each pipeline measured twice.
fn plan(current: Pipeline) -> [Step; 7] {
    let other = match current {
        Pipeline::Dedicated => Pipeline::GroupCommit,
        Pipeline::GroupCommit | Pipeline::Auto => Pipeline::Dedicated,
    };
    let current = if current == Pipeline::Dedicated { Pipeline::Dedicated } else { Pipeline::GroupCommit };
    let settle = |pipeline| Step { pipeline, lasts: SETTLE, measured: false };
    let measure = |pipeline| Step { pipeline, lasts: EVALUATE_EVERY, measured: true };
    [settle(other), measure(other), settle(current), measure(current), measure(current), settle(other), measure(other)]
}

/// What a probe has measured so far, per pipeline (index 0: group commit,
/// 1: the log threads).
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    written: [u64; 2],
    elapsed_ns: [u64; 2],
    waited_ns: [f64; 2],
}

impl Tally {
    fn slot(pipeline: Pipeline) -> usize {
        usize::from(pipeline == Pipeline::Dedicated)
    }

    fn add(&mut self, interval: &Interval) {
        let slot = Tally::slot(interval.active);
        self.written[slot] += interval.written;
        self.elapsed_ns[slot] += interval.elapsed_ns;
        self.waited_ns[slot] += interval.input.committers * interval.elapsed_ns as f64;
    }

    /// Bytes written per ns under `pipeline`.
    fn rate(&self, pipeline: Pipeline) -> f64 {
        let slot = Tally::slot(pipeline);
        self.written[slot] as f64 / self.elapsed_ns[slot].max(1) as f64
    }

    /// Committers waiting on average under `pipeline`.
    fn committers(&self, pipeline: Pipeline) -> f64 {
        let slot = Tally::slot(pipeline);
        self.waited_ns[slot] / self.elapsed_ns[slot].max(1) as f64
    }

    /// The log threads only if they wrote `MARGIN` more per second.
    fn winner(&self) -> Pipeline {
        if self.rate(Pipeline::Dedicated) >= self.rate(Pipeline::GroupCommit) * (1.0 + MARGIN)
            && self.rate(Pipeline::Dedicated) > 0.0
        {
            Pipeline::Dedicated
        } else {
            Pipeline::GroupCommit
        }
    }
}

/// Where `Auto` is.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// A row of the table decides (also before the first evaluation).
    Ruled,
    /// A probe runs: its plan is `plan(from)`, and `step` is the step the
    /// current interval belongs to.
    Probing { from: Pipeline, step: usize, tally: Tally },
    /// A probe's choice holds until the load changes.
    Held { pipeline: Pipeline, committers: f64, since_ns: u64 },
}

/// What one evaluation decided.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Decision {
    /// The pipeline to switch to, if any.
    switch: Option<Pipeline>,
    /// When the next evaluation is due, from now.
    next: Duration,
}

/// The switch that makes `target` run, if `active` is not it already.
fn towards(active: Pipeline, target: Pipeline) -> Option<Pipeline> {
    (active != target).then_some(target)
}

/// What `Auto` remembers between evaluations.
struct AutoState {
    /// Why the pipeline is what it is (for `Metrics`).
    reason: &'static str,
    phase: Phase,
    /// Evaluations in a row that asked to leave the phase.
    streak: u32,
    /// When the last probe started (ns on the clock of `evaluate`).
    probed_at_ns: Option<u64>,
    last_at: Option<Moment>,
    last_wait_ns: u64,
    last_sync_wait_ns: u64,
    last_written: u64,
}

impl AutoState {
    fn new() -> Self {
        AutoState {
            reason: "not evaluated yet",
            phase: Phase::Ruled,
            streak: 0,
            probed_at_ns: None,
            last_at: None,
            last_wait_ns: 0,
            last_sync_wait_ns: 0,
            last_written: 0,
        }
    }

    /// Counts one more evaluation asking to leave the phase; true once
    /// `CONFIRMATIONS` in a row did.
    fn confirmed(&mut self, asks: bool) -> bool {
        self.streak = if asks { self.streak + 1 } else { 0 };
        if self.streak >= CONFIRMATIONS {
            self.streak = 0;
            true
        } else {
            false
        }
    }

    /// Holds `pipeline`, chosen by a probe (or kept by a refused switch) with
    /// `committers` waiting on average under it.
    fn hold(&mut self, pipeline: Pipeline, committers: f64, now_ns: u64) {
        self.phase = Phase::Held { pipeline, committers, since_ns: now_ns };
        self.reason = if pipeline == Pipeline::Dedicated { MEASURED_DEDICATED } else { MEASURED_GROUP };
    }

    /// Starts a probe from the pipeline running now.
    fn start_probe(&mut self, now_ns: u64, active: Pipeline) -> Decision {
        let plan = plan(active);
        self.phase = Phase::Probing { from: active, step: 0, tally: Tally::default() };
        self.probed_at_ns = Some(now_ns);
        self.streak = 0;
        self.reason = PROBING;
        Decision { switch: Some(plan[0].pipeline), next: plan[0].lasts }
    }

    /// Feeds the interval that just ended (at `now_ns`); returns what to do.
    fn step(&mut self, now_ns: u64, interval: &Interval) -> Decision {
        let stay = Decision { switch: None, next: EVALUATE_EVERY };
        let rule = rule_for(&interval.input);
        match self.phase {
            Phase::Ruled => match rule {
                Some(rule) => {
                    self.streak = 0;
                    self.reason = rule.when;
                    Decision { switch: towards(interval.active, rule.choose), ..stay }
                }
                None if self.confirmed(true) => self.start_probe(now_ns, interval.active),
                None => stay,
            },
            Phase::Probing { from, step, mut tally } => {
                let plan = plan(from);
                if interval.active != plan[step].pipeline {
                    // The switch did not happen (asynchronous waiters keep the
                    // log threads, INV-27): keep what runs, measure again later.
                    self.hold(interval.active, interval.input.committers, now_ns);
                    return stay;
                }
                if plan[step].measured {
                    tally.add(interval);
                }
                let next = step + 1;
                if let Some(following) = plan.get(next) {
                    self.phase = Phase::Probing { from, step: next, tally };
                    return Decision { switch: towards(interval.active, following.pipeline), next: following.lasts };
                }
                let winner = tally.winner();
                self.hold(winner, tally.committers(winner), now_ns);
                Decision { switch: towards(interval.active, winner), ..stay }
            }
            Phase::Held { pipeline, committers, since_ns } => {
                if let Some(rule) = rule {
                    if self.confirmed(true) {
                        self.phase = Phase::Ruled;
                        self.reason = rule.when;
                        return Decision { switch: towards(interval.active, rule.choose), ..stay };
                    }
                    return stay;
                }
                let seen = interval.input.committers;
                let changed =
                    interval.active == pipeline && (seen > committers * LOAD_CHANGE || seen * LOAD_CHANGE < committers);
                // INV-40: a load change starts a probe at most once a second.
                let probed_ns = self.probed_at_ns.unwrap_or(since_ns);
                let may_probe = now_ns.saturating_sub(probed_ns) >= PROBE_AT_MOST_EVERY.as_nanos() as u64;
                if self.confirmed(changed) && may_probe
                    || now_ns.saturating_sub(since_ns) >= REPROBE_AFTER.as_nanos() as u64
                {
                    return self.start_probe(now_ns, interval.active);
                }
                stay
            }
        }
    }
}

/// What `Auto` reads at an evaluation: cumulative counters and the current
/// sync pass estimate.
pub(crate) struct Readings {
    /// Total time committers spent waiting for a write or a sync, in ns.
    pub(crate) wait_ns: u64,
    /// The part of it spent waiting for a sync.
    pub(crate) sync_wait_ns: u64,
    /// The expected duration of a sync pass, in ns.
    pub(crate) sync_pass_ns: u64,
    /// The end of what was written (an LSN): its advance is the work done.
    pub(crate) written: u64,
    /// The pipeline running now.
    pub(crate) active: Pipeline,
}

/// The pipeline mode: what the user asked for and, for `Pipeline::Auto`, the
/// state of the decision.
pub(crate) struct Auto {
    /// The pipeline the user asked for (`Pipeline as u8`).
    requested: AtomicU8,
    state: Mutex<AutoState>,
    /// When the next evaluation is due (ns since the CPU monitor's epoch).
    due_ns: AtomicU64,
}

const REQUESTED_GROUP: u8 = 0;
const REQUESTED_DEDICATED: u8 = 1;
const REQUESTED_AUTO: u8 = 2;

impl Auto {
    pub(crate) fn new() -> Self {
        Auto {
            requested: AtomicU8::new(REQUESTED_GROUP),
            state: Mutex::new(AutoState::new()),
            due_ns: AtomicU64::new(0),
        }
    }

    /// Records what the user asked for.
    pub(crate) fn request(&self, pipeline: Pipeline) {
        let code = match pipeline {
            Pipeline::GroupCommit => REQUESTED_GROUP,
            Pipeline::Dedicated => REQUESTED_DEDICATED,
            Pipeline::Auto => REQUESTED_AUTO,
        };
        self.requested.store(code, Ordering::SeqCst);
        let mut state = self.state.lock();
        *state = AutoState::new();
        state.reason = match pipeline {
            Pipeline::Auto => "not evaluated yet",
            Pipeline::GroupCommit | Pipeline::Dedicated => "fixed by the configuration",
        };
    }

    /// Why the pipeline is what it is (for `Metrics`).
    pub(crate) fn reason(&self) -> &'static str {
        self.state.lock().reason
    }

    /// Whether the user asked for group commit (`Pipeline::GroupCommit`).
    pub(crate) fn group_requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed) == REQUESTED_GROUP
    }

    /// The user asked for `Pipeline::Dedicated`.
    pub(crate) fn dedicated_requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed) == REQUESTED_DEDICATED
    }

    /// Evaluates if the user asked for `Auto` and an evaluation is due;
    /// returns the pipeline to switch to, if any. Never blocks: a thread
    /// finding another one evaluating goes on.
    pub(crate) fn evaluate(&self, now: Moment, cpu: &CpuMonitor, read: impl FnOnce() -> Readings) -> Option<Pipeline> {
        if self.requested.load(Ordering::Relaxed) != REQUESTED_AUTO {
            return None;
        }
        // The cheap check first: summing the sharded wait counter reads 64 cache
        // lines, too much for every write pass.
        if !cpu.due(&self.due_ns, now, EVALUATE_EVERY) {
            return None;
        }
        let mut state = self.state.try_lock()?;
        let readings = read();
        let last_at = state.last_at.replace(now);
        let waited_ns = readings.wait_ns.saturating_sub(std::mem::replace(&mut state.last_wait_ns, readings.wait_ns));
        let sync_waited_ns = readings
            .sync_wait_ns
            .saturating_sub(std::mem::replace(&mut state.last_sync_wait_ns, readings.sync_wait_ns));
        let written = readings.written.saturating_sub(std::mem::replace(&mut state.last_written, readings.written));
        let elapsed_ns = now.ns_since(last_at?);
        if elapsed_ns == 0 {
            return None;
        }
        let interval = Interval {
            elapsed_ns,
            written,
            input: AutoInput {
                sync_pass_us: readings.sync_pass_ns as f64 / 1000.0,
                committers: waited_ns as f64 / elapsed_ns as f64,
                sync_share: sync_waited_ns as f64 / waited_ns.max(1) as f64,
            },
            active: readings.active,
        };
        let decision = state.step(now.as_ns(), &interval);
        if decision.next != EVALUATE_EVERY {
            // Relaxed: a schedule (see `CpuMonitor::due`); the state lock
            // orders the evaluations themselves.
            self.due_ns.store(now.after(decision.next).as_ns(), Ordering::Relaxed);
        }
        decision.switch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Pipeline::{Dedicated, GroupCommit};

    fn input(sync_pass_us: f64, committers: f64) -> AutoInput {
        AutoInput { sync_pass_us, committers, sync_share: 1.0 }
    }

    fn decides(input: &AutoInput) -> Option<Pipeline> {
        rule_for(input).map(|rule| rule.choose)
    }

    #[test]
    fn rule_table_chooses_as_documented_and_leaves_the_rest_to_a_probe() {
        // tmpfs: a 1 µs sync, group commit however many committers.
        assert_eq!(decides(&input(1.0, 64.0)), Some(GroupCommit));
        assert_eq!(decides(&input(19.9, 64.0)), Some(GroupCommit));
        // A disk, but one or two committers.
        assert_eq!(decides(&input(80.0, 1.0)), Some(GroupCommit));
        assert_eq!(decides(&input(80.0, 2.9)), Some(GroupCommit));
        // The same 64 committers waiting mostly for write(), not fdatasync.
        let written = |sync_share| AutoInput { sync_share, ..input(80.0, 64.0) };
        assert_eq!(decides(&written(0.0)), Some(GroupCommit));
        assert_eq!(decides(&written(0.49)), Some(GroupCommit));
        // A device with a real sync and 3 to any number of committers: measured.
        assert_eq!(decides(&written(0.5)), None);
        assert_eq!(decides(&input(80.0, 3.5)), None);
        assert_eq!(decides(&input(80.0, 250.0)), None);
    }

    /// `AutoState` driven by a made-up workload: the intervals last what the
    /// decisions ask for; switches take effect at once unless refused.
    struct Sim {
        state: AutoState,
        now_ns: u64,
        next: Duration,
        active: Pipeline,
        /// Every interval: the pipeline that ran it and how long.
        ran: Vec<(Pipeline, Duration)>,
        switches: u32,
        refuse_group: bool,
    }

    impl Sim {
        fn new() -> Self {
            Sim {
                state: AutoState::new(),
                now_ns: 0,
                next: EVALUATE_EVERY,
                active: GroupCommit,
                ran: Vec::new(),
                switches: 0,
                refuse_group: false,
            }
        }

        /// One interval under `load`: (bytes per µs, committers) per pipeline.
        fn tick(&mut self, load: impl Fn(Pipeline) -> (f64, f64)) {
            let elapsed = self.next;
            self.now_ns += elapsed.as_nanos() as u64;
            let (per_us, committers) = load(self.active);
            let interval = Interval {
                elapsed_ns: elapsed.as_nanos() as u64,
                written: (per_us * elapsed.as_micros() as f64) as u64,
                input: input(80.0, committers),
                active: self.active,
            };
            self.ran.push((self.active, elapsed));
            let decision = self.state.step(self.now_ns, &interval);
            if let Some(pipeline) = decision.switch {
                if !(self.refuse_group && pipeline == GroupCommit) && pipeline != self.active {
                    self.active = pipeline;
                    self.switches += 1;
                }
            }
            self.next = decision.next;
        }

        fn run(&mut self, ticks: usize, load: impl Fn(Pipeline) -> (f64, f64)) {
            for _ in 0..ticks {
                self.tick(&load);
            }
        }
    }

    /// The log threads `gain` × group commit's throughput, 16 committers.
    fn faster(gain: f64) -> impl Fn(Pipeline) -> (f64, f64) {
        move |pipeline| (if pipeline == Dedicated { 100.0 * gain } else { 100.0 }, 16.0)
    }

    #[test]
    fn a_probe_runs_each_pipeline_twice_other_current_current_other_and_keeps_the_faster() {
        let mut sim = Sim::new();
        // Two evaluations with no row applying, then the probe's seven steps.
        sim.run(2 + 7, faster(1.10));
        let settle = |pipeline| (pipeline, SETTLE);
        let measure = |pipeline| (pipeline, EVALUATE_EVERY);
        assert_eq!(
            sim.ran[2..],
            [
                settle(Dedicated),
                measure(Dedicated),
                settle(GroupCommit),
                measure(GroupCommit),
                measure(GroupCommit),
                settle(Dedicated),
                measure(Dedicated)
            ]
        );
        assert_eq!(sim.active, Dedicated);
        assert_eq!(sim.state.reason, MEASURED_DEDICATED);
        // It holds: no switch for the next 9 s of the same load.
        let switches = sim.switches;
        sim.run(90, faster(1.10));
        assert_eq!((sim.switches, sim.active), (switches, Dedicated));
    }

    #[test]
    fn the_log_threads_are_kept_only_when_measured_three_percent_faster() {
        for (gain, kept) in [(0.80, GroupCommit), (1.0, GroupCommit), (1.02, GroupCommit), (1.04, Dedicated)] {
            let mut sim = Sim::new();
            sim.run(2 + 7, faster(gain));
            assert_eq!(sim.active, kept, "log threads at {gain} × group commit");
        }
    }

    /// INV-40: a load that follows the pipeline makes `Auto` switch only
    /// in its probes.
    #[test]
    fn a_load_that_moves_with_the_pipeline_does_not_make_it_flip() {
        // What a prediction from the counters could not tell apart (the page
        // store at 128 clients): as many bytes under either pipeline, 55
        // committers waiting under group commit and 90 under the log threads,
        // either side of the old table's 64. That table flipped 8–34 times in
        // 15 s; a probe flips four times (its own steps) in its 10 s.
        let cycle = |pipeline| (100.0, if pipeline == Dedicated { 90.0 } else { 55.0 });
        let mut sim = Sim::new();
        sim.run(2 + 7, cycle);
        assert_eq!((sim.switches, sim.active), (4, GroupCommit));
        sim.run(95, cycle);
        assert_eq!(sim.switches, 4, "switched while holding a measured choice");
        // And after REPROBE_AFTER it measures again, from where it is.
        sim.run(20, cycle);
        assert_eq!((sim.switches, sim.active), (8, GroupCommit));
    }

    #[test]
    fn a_load_change_starts_a_new_probe_at_most_once_a_second() {
        let mut sim = Sim::new();
        sim.run(2 + 7, faster(1.10));
        assert_eq!(sim.active, Dedicated);
        // The committers quadruple right after the probe: it waits for the
        // second of `PROBE_AT_MOST_EVERY`, then measures again.
        let busier = |pipeline| (if pipeline == Dedicated { 100.0 } else { 150.0 }, 64.0);
        sim.run(2, busier);
        assert_eq!(sim.state.reason, MEASURED_DEDICATED, "probed again within a second");
        sim.run(8, busier);
        assert!(matches!(sim.state.phase, Phase::Probing { .. }), "{:?}", sim.state.phase);
        sim.run(7, busier);
        assert_eq!((sim.active, sim.state.reason), (GroupCommit, MEASURED_GROUP));
    }

    #[test]
    fn a_row_that_applies_again_ends_a_measured_choice() {
        let mut sim = Sim::new();
        sim.run(2 + 7, faster(1.10));
        assert_eq!(sim.active, Dedicated);
        // Down to one committer: row 2, after two evaluations in a row.
        let alone = |_| (10.0, 1.0);
        sim.tick(alone);
        assert_eq!(sim.active, Dedicated, "one odd interval switched");
        sim.tick(alone);
        assert_eq!((sim.active, sim.state.reason), (GroupCommit, RULES[1].when));
    }

    #[test]
    fn a_refused_switch_ends_the_probe_on_the_pipeline_that_runs() {
        // Asynchronous waiters keep the log threads (INV-27).
        let mut sim = Sim::new();
        sim.active = Dedicated;
        sim.refuse_group = true;
        sim.run(2 + 2, faster(0.5));
        assert!(matches!(sim.state.phase, Phase::Held { pipeline: Dedicated, .. }), "{:?}", sim.state.phase);
        assert_eq!(sim.active, Dedicated);
    }
}
