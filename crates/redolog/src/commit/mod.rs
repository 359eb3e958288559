//! Commit pipelines: how a thread gets its LSN written and synced.
//!
//! Two pipelines share one set of roles (docs/DESIGN.md §1.5, §1.11): in
//! `GroupCommit` committing threads take the write and sync roles themselves; in
//! `Dedicated` a log writer and a log flusher thread hold the roles and
//! committing threads only wait. `Auto` switches between them (§1.12).

mod auto;
mod dedicated;
mod group;

use std::time::Instant;

pub(crate) use auto::AutoState;
pub(crate) use dedicated::spawn_log_threads;

use crate::config::Pipeline;
use crate::core::Shared;
use crate::sync::atomic::Ordering;

/// `Shared::active_pipeline` / `requested_pipeline` values.
const PIPELINE_GROUP: u8 = 0;
const PIPELINE_DEDICATED: u8 = 1;
const PIPELINE_AUTO: u8 = 2;

pub(crate) fn pipeline_code(pipeline: Pipeline) -> u8 {
    match pipeline {
        Pipeline::GroupCommit => PIPELINE_GROUP,
        Pipeline::Dedicated => PIPELINE_DEDICATED,
        Pipeline::Auto => PIPELINE_AUTO,
    }
}

/// The pipeline a log starts with: `Auto` starts as `GroupCommit`, which needs
/// no warm-up, and switches once it has measured the load.
pub(crate) fn initial_active(pipeline: Pipeline) -> u8 {
    match pipeline {
        Pipeline::Dedicated => PIPELINE_DEDICATED,
        Pipeline::GroupCommit | Pipeline::Auto => PIPELINE_GROUP,
    }
}

impl Shared {
    /// The pipeline running now.
    pub(crate) fn active(&self) -> Pipeline {
        if self.dedicated_active() {
            Pipeline::Dedicated
        } else {
            Pipeline::GroupCommit
        }
    }

    /// The dedicated threads hold the roles (or are taking them over).
    pub(crate) fn dedicated_active(&self) -> bool {
        // SeqCst: read in wait predicates against role releases (INV-17).
        self.active_pipeline.load(Ordering::SeqCst) == PIPELINE_DEDICATED
    }

    /// Committing threads may take the write and sync roles (INV-17).
    pub(crate) fn users_lead(&self) -> bool {
        !self.dedicated_active()
    }

    /// Records what the user asked for; a fixed pipeline takes effect at once.
    /// The caller has started the log threads if `pipeline` needs them.
    pub(crate) fn request_pipeline(&self, pipeline: Pipeline) {
        self.requested_pipeline.store(pipeline_code(pipeline), Ordering::SeqCst);
        self.auto.lock().reason = match pipeline {
            Pipeline::Auto => "not evaluated yet",
            Pipeline::GroupCommit | Pipeline::Dedicated => "fixed by the configuration",
        };
        match pipeline {
            Pipeline::GroupCommit => self.set_active(Pipeline::GroupCommit),
            Pipeline::Dedicated => self.set_active(Pipeline::Dedicated),
            Pipeline::Auto => {}
        }
    }

    /// Switches the running pipeline (INV-17). The log threads notice through
    /// `pipeline_events` (a thread idle in group-commit mode) or their work
    /// events; committing threads through their predicates when a role is
    /// released.
    pub(crate) fn set_active(&self, pipeline: Pipeline) {
        let code = initial_active(pipeline);
        if self.active_pipeline.swap(code, Ordering::SeqCst) == code {
            return;
        }
        self.metrics.pipeline_switches.add(1);
        self.pipeline_events.notify_all();
        self.ready_events.notify_all();
        self.flusher_event.notify_all();
        if pipeline == Pipeline::GroupCommit {
            // Threads parked while the log threads held the roles: the roles
            // come free when the log threads see the switch, and their release
            // kicks a successor; this covers a role already free.
            self.write_events.notify_all();
            self.sync_events.notify_all();
        }
    }

    /// Periodic work done inline after a write pass: the CPU monitor's sample and
    /// `Auto`'s decision, each at most every 100 ms. Otherwise one load.
    pub(crate) fn tick(&self, now: Instant) {
        self.cpu.maybe_sample(now);
        if self.requested_pipeline.load(Ordering::Relaxed) == PIPELINE_AUTO {
            self.evaluate_auto(now);
        }
    }
}
