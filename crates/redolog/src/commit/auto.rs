//! `Pipeline::Auto`: choosing between group commit and the dedicated log threads
//! at run time (docs/DESIGN.md §1.12).
//!
//! Every 100 ms, after a write pass, the rule table below is applied to what was
//! measured over the last interval; the pipeline switches when two evaluations
//! in a row choose the other one, so a single odd interval does not flip it.

use std::time::{Duration, Instant};

use crate::config::Pipeline;
use crate::core::Shared;

/// How often `Auto` re-evaluates.
const EVALUATE_EVERY: Duration = Duration::from_millis(100);
/// Evaluations in a row that must agree before a switch.
const CONFIRMATIONS: u32 = 2;

/// What `Auto` decides from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AutoInput {
    /// CPUs the process can use (affinity ∧ cgroup quota).
    pub(crate) usable_cpus: f64,
    /// The process's CPU use, in percent of `usable_cpus`.
    pub(crate) busy_pct: u64,
    /// Mean number of threads waiting for a commit to be written or synced
    /// (Little's law: total wait time / elapsed time).
    pub(crate) committers: f64,
}

/// One row of the rule table: the first row whose condition holds decides.
pub(crate) struct Rule {
    pub(crate) when: &'static str,
    pub(crate) applies: fn(&AutoInput) -> bool,
    pub(crate) choose: Pipeline,
}

/// The rule table (docs/DESIGN.md §1.12 gives the evidence for each row).
pub(crate) const RULES: &[Rule] = &[
    Rule {
        // Two log threads need CPUs of their own. With four or fewer they share
        // them with the committers, and every commit pays two extra hand-offs
        // (seed 002; measured on 2 CPUs in docs/BENCHMARKS.md). MySQL 9.5 also
        // enables its log threads only above 4 CPUs.
        when: "4 or fewer usable CPUs",
        applies: |input| input.usable_cpus < 5.0,
        choose: Pipeline::GroupCommit,
    },
    Rule {
        // The CPUs are saturated: the log threads would queue for a CPU behind
        // the committers they serve (seed 002's starvation).
        when: "CPU use at 90 % of the usable CPUs or more",
        applies: |input| input.busy_pct >= 90,
        choose: Pipeline::GroupCommit,
    },
    Rule {
        // Low concurrency: a committer doing its own write and sync has the
        // shortest path (MySQL's advice for innodb_log_writer_threads=OFF).
        when: "fewer than 4 committers waiting on average",
        applies: |input| input.committers < 4.0,
        choose: Pipeline::GroupCommit,
    },
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
pub(crate) struct AutoState {
    /// The condition of the row that decided last (for `Metrics`).
    pub(crate) reason: &'static str,
    last_at: Option<Instant>,
    last_wait_ns: u64,
    streak: u32,
    streak_choice: Pipeline,
}

impl AutoState {
    pub(crate) fn new() -> Self {
        AutoState {
            reason: "not evaluated yet",
            last_at: None,
            last_wait_ns: 0,
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

impl Shared {
    /// Applies the rule table if an evaluation is due. Never blocks: a thread
    /// finding another one evaluating goes on.
    pub(crate) fn evaluate_auto(&self, now: Instant) {
        let Some(mut state) = self.auto.try_lock() else { return };
        let wait_ns = self.metrics.commit_wait_ns.get();
        let Some(last_at) = state.last_at else {
            state.last_at = Some(now);
            state.last_wait_ns = wait_ns;
            return;
        };
        let elapsed = now.saturating_duration_since(last_at);
        if elapsed < EVALUATE_EVERY {
            return;
        }
        let cpu = self.cpu.sample();
        let input = AutoInput {
            usable_cpus: cpu.usable,
            busy_pct: cpu.busy_pct,
            committers: wait_ns.saturating_sub(state.last_wait_ns) as f64 / elapsed.as_nanos() as f64,
        };
        state.last_at = Some(now);
        state.last_wait_ns = wait_ns;
        let rule = rule_for(&input);
        state.reason = rule.when;
        if let Some(pipeline) = state.decide(rule.choose, self.active()) {
            drop(state);
            self.set_active(pipeline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(usable_cpus: f64, busy_pct: u64, committers: f64) -> AutoInput {
        AutoInput { usable_cpus, busy_pct, committers }
    }

    #[test]
    fn rule_table_chooses_as_documented() {
        // Few CPUs: group commit, however many committers.
        assert_eq!(choose(&input(2.0, 10, 200.0)), Pipeline::GroupCommit);
        assert_eq!(choose(&input(4.0, 10, 64.0)), Pipeline::GroupCommit);
        // Many CPUs, saturated: the log threads would starve.
        assert_eq!(choose(&input(16.0, 95, 64.0)), Pipeline::GroupCommit);
        // Many CPUs, idle enough, but hardly any concurrency.
        assert_eq!(choose(&input(16.0, 20, 1.5)), Pipeline::GroupCommit);
        // Many CPUs, spare CPU, many committers: dedicated threads.
        assert_eq!(choose(&input(16.0, 40, 32.0)), Pipeline::Dedicated);
        assert_eq!(choose(&input(5.0, 89, 4.0)), Pipeline::Dedicated);
        // The last row catches everything.
        assert!((RULES.last().expect("rows").applies)(&input(0.0, 0, 0.0)));
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
