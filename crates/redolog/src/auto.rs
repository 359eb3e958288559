//! `Pipeline::Auto`: choosing between group commit and the dedicated log threads
//! at run time (docs/DESIGN.md §1.12).
//!
//! Every 100 ms, after a write pass, the rule table below is applied to what was
//! measured over the last interval; the pipeline switches when two evaluations
//! in a row choose the other one, so a single odd interval does not flip it.

use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::Moment;
use crate::config::Pipeline;
use crate::cpu::CpuMonitor;
use crate::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// How often `Auto` re-evaluates.
const EVALUATE_EVERY: Duration = Duration::from_millis(100);
/// Evaluations in a row that must agree before a switch.
const CONFIRMATIONS: u32 = 2;

/// What `Auto` decides from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AutoInput {
    /// CPUs the process can use (affinity ∧ cgroup quota).
    pub(crate) usable_cpus: f64,
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

/// The rule table (docs/DESIGN.md §1.12 gives the measurements behind each row).
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
    Rule {
        // Far more committers than CPUs: the log threads queue for a CPU behind
        // the committers they serve (the blog post on MySQL 8.0's log threads
        // starved on few cores). Disk, 256 threads on 2 CPUs: dedicated 0.82×
        // group commit; 64 threads: 1.20×.
        when: "more than 32 committers waiting per usable CPU",
        applies: |input| input.committers > 32.0 * input.usable_cpus,
        choose: Pipeline::GroupCommit,
    },
    // Concurrent commits on a real device: the writer writes the next group
    // while the flusher syncs the last one. Disk, 4–64 threads: 1.09–1.20×.
    Rule { when: "otherwise", applies: |_| true, choose: Pipeline::Dedicated },
];

/// The row of the rule table that decides for `input`.
pub(crate) fn rule_for(input: &AutoInput) -> &'static Rule {
    RULES.iter().find(|rule| (rule.applies)(input)).unwrap_or(&RULES[RULES.len() - 1])
}

#[cfg(test)]
fn choose(input: &AutoInput) -> Pipeline {
    rule_for(input).choose
}

/// What `Auto` remembers between evaluations.
struct AutoState {
    /// The condition of the row that decided last (for `Metrics`).
    pub(crate) reason: &'static str,
    last_at: Option<Moment>,
    last_wait_ns: u64,
    last_sync_wait_ns: u64,
    streak: u32,
    streak_choice: Pipeline,
}

impl AutoState {
    fn new() -> Self {
        AutoState {
            reason: "not evaluated yet",
            last_at: None,
            last_wait_ns: 0,
            last_sync_wait_ns: 0,
            streak: 0,
            streak_choice: Pipeline::GroupCommit,
        }
    }

    /// Feeds one evaluation; returns the pipeline to switch to, if any.
    fn decide(&mut self, choice: Pipeline, active: Pipeline) -> Option<Pipeline> {
        if choice == active {
            self.streak = 0;
            return None;
        }
        if choice == self.streak_choice {
            self.streak += 1;
        } else {
            self.streak_choice = choice;
            self.streak = 1;
        }
        (self.streak >= CONFIRMATIONS).then(|| {
            self.streak = 0;
            choice
        })
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
        self.state.lock().reason = match pipeline {
            Pipeline::Auto => "not evaluated yet",
            Pipeline::GroupCommit | Pipeline::Dedicated => "fixed by the configuration",
        };
    }

    /// The condition of the row that decided last (for `Metrics`).
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

    /// Applies the rule table if the user asked for `Auto` and an evaluation
    /// is due; returns the pipeline to switch to, if any. Never blocks: a
    /// thread finding another one evaluating goes on.
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
        let Some(last_at) = state.last_at else {
            state.last_at = Some(now);
            state.last_wait_ns = readings.wait_ns;
            state.last_sync_wait_ns = readings.sync_wait_ns;
            return None;
        };
        let elapsed_ns = now.ns_since(last_at);
        if elapsed_ns == 0 {
            return None;
        }
        let waited_ns = readings.wait_ns.saturating_sub(state.last_wait_ns);
        let input = AutoInput {
            usable_cpus: cpu.sample().usable,
            sync_pass_us: readings.sync_pass_ns as f64 / 1000.0,
            committers: waited_ns as f64 / elapsed_ns as f64,
            sync_share: readings.sync_wait_ns.saturating_sub(state.last_sync_wait_ns) as f64 / waited_ns.max(1) as f64,
        };
        state.last_at = Some(now);
        state.last_wait_ns = readings.wait_ns;
        state.last_sync_wait_ns = readings.sync_wait_ns;
        let rule = rule_for(&input);
        state.reason = rule.when;
        state.decide(rule.choose, readings.active)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(usable_cpus: f64, sync_pass_us: f64, committers: f64) -> AutoInput {
        AutoInput { usable_cpus, sync_pass_us, committers, sync_share: 1.0 }
    }

    #[test]
    fn rule_table_chooses_as_documented() {
        // tmpfs: a 1 µs sync, group commit however many committers.
        assert_eq!(choose(&input(2.0, 1.0, 64.0)), Pipeline::GroupCommit);
        assert_eq!(choose(&input(64.0, 19.9, 64.0)), Pipeline::GroupCommit);
        // A disk, but one or two committers.
        assert_eq!(choose(&input(2.0, 80.0, 1.0)), Pipeline::GroupCommit);
        assert_eq!(choose(&input(16.0, 80.0, 2.9)), Pipeline::GroupCommit);
        // A disk and 4 to 64 committers on 2 CPUs: the log threads.
        assert_eq!(choose(&input(2.0, 80.0, 3.5)), Pipeline::Dedicated);
        assert_eq!(choose(&input(2.0, 80.0, 64.0)), Pipeline::Dedicated);
        // 256 committers on 2 CPUs: starved log threads.
        assert_eq!(choose(&input(2.0, 80.0, 250.0)), Pipeline::GroupCommit);
        assert_eq!(choose(&input(16.0, 80.0, 250.0)), Pipeline::Dedicated);
        // The same 64 committers waiting mostly for write(), not fdatasync.
        let written = |sync_share| AutoInput { sync_share, ..input(2.0, 80.0, 64.0) };
        assert_eq!(choose(&written(0.0)), Pipeline::GroupCommit);
        assert_eq!(choose(&written(0.49)), Pipeline::GroupCommit);
        assert_eq!(choose(&written(0.5)), Pipeline::Dedicated);
        // The last row catches everything.
        assert!((RULES.last().expect("rows").applies)(&input(0.0, 0.0, 0.0)));
    }

    #[test]
    fn a_switch_needs_two_agreeing_evaluations() {
        let mut state = AutoState::new();
        assert_eq!(state.decide(Pipeline::Dedicated, Pipeline::GroupCommit), None);
        // An odd interval in between resets the streak.
        assert_eq!(state.decide(Pipeline::GroupCommit, Pipeline::GroupCommit), None);
        assert_eq!(state.decide(Pipeline::Dedicated, Pipeline::GroupCommit), None);
        assert_eq!(state.decide(Pipeline::Dedicated, Pipeline::GroupCommit), Some(Pipeline::Dedicated));
        assert_eq!(state.decide(Pipeline::GroupCommit, Pipeline::Dedicated), None);
        assert_eq!(state.decide(Pipeline::GroupCommit, Pipeline::Dedicated), Some(Pipeline::GroupCommit));
    }
}
