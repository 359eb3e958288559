//! The dedicated pipeline: a log writer and a log flusher thread (MySQL 8.0's
//! log_writer and log_flusher; docs/DESIGN.md §1.11).
//!
//! While the dedicated pipeline is active each thread holds its role for good:
//! the writer writes whatever appenders completed as soon as the link buffer's
//! tail moves, the flusher fdatasyncs whatever was written as soon as `written`
//! passes `synced`. Committing threads cannot take a held role and only park on
//! the event slot of their LSN until a pass covers it. Each log thread waits on
//! an event that whoever creates its work sets:
//!
//! | thread  | waits for              | event          | set by                        |
//! |---------|------------------------|----------------|-------------------------------|
//! | writer  | `ready > written`      | `ready_events` | the appender that moves the tail |
//! | flusher | `written > synced`     | `flusher_event`| the writer, after each write  |
//! | both    | dedicated mode, role free | `pipeline_events` | `set_active`, role releases |
//!
//! When the pipeline switches to group commit, each thread releases its role
//! (kicking a successor, INV-11) and waits on `pipeline_events`.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::core::{PoisonOnPanic, Shared};
use crate::error::{Error, Result};
use crate::metrics::WaitCounters;
use crate::sync::atomic::Ordering;
use crate::wait::{Spin, Waited};

use super::group::{SyncLeader, WriteLeader};

/// Starts the log writer and the log flusher.
pub(crate) fn spawn_log_threads(shared: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::with_capacity(2);
    for (name, body) in [
        ("redolog-writer", Shared::run_log_writer as fn(&Shared)),
        ("redolog-flusher", Shared::run_log_flusher as fn(&Shared)),
    ] {
        let shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // A log thread that dies leaves nobody to write or sync while the
                // dedicated pipeline is active: poison, so waiters get an error.
                let _guard = PoisonOnPanic { shared: &shared, op: "log thread" };
                place_this_thread(name, &shared.config.log_thread_cpus, shared.config.log_thread_nice);
                body(&shared);
            })
            .map_err(|source| Error::io("spawn log thread", name, source))?;
        threads.push(thread);
    }
    Ok(threads)
}

/// Pins the calling thread and sets its nice value as configured (seed 002).
/// Refusals are logged and ignored: the thread runs as the scheduler decides.
fn place_this_thread(name: &str, cpus: &[usize], nice: Option<i32>) {
    if let Err(error) = pin_this_thread(cpus) {
        log::warn!("{name}: cannot pin to CPUs {cpus:?}: {error}; running unpinned");
    }
    if let Some(nice) = nice {
        if let Err(error) = renice_this_thread(nice) {
            log::warn!("{name}: cannot set nice {nice}: {error}; keeping the inherited priority");
        }
    }
}

/// Pins the calling thread to `cpus` (nothing to do if empty).
fn pin_this_thread(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = rustix::thread::CpuSet::new();
    for &cpu in cpus {
        if cpu >= rustix::thread::CpuSet::MAX_CPU {
            return Err(std::io::Error::other(format!("CPU {cpu} is beyond the largest CPU number")));
        }
        set.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Sets the calling thread's nice value (on Linux, per thread).
fn renice_this_thread(nice: i32) -> std::io::Result<()> {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice)?;
    Ok(())
}

impl Shared {
    fn log_threads_stop(&self) -> bool {
        self.is_shutdown() || self.is_poisoned()
    }

    /// Waits until the dedicated pipeline is active and `role_held()` is false:
    /// in group-commit mode (`role_held` = `|| false`), or for a role a
    /// committer still holds.
    fn wait_for_mode_or_role(&self, role_held: impl Fn() -> bool, site: &WaitCounters) {
        let waited = self
            .pipeline_events
            .wait(1, Spin::NONE, || self.log_threads_stop() || (self.dedicated_active() && !role_held()));
        site.record(true, waited);
    }

    /// The log writer thread: holds the write role while the dedicated pipeline
    /// is active and writes the ready prefix whenever it grows.
    pub(crate) fn run_log_writer(&self) {
        let mut leader: Option<WriteLeader<'_>> = None;
        while !self.log_threads_stop() {
            if !self.dedicated_active() {
                leader = None; // releases the role and kicks a successor (INV-11)
                self.wait_for_mode_or_role(|| false, &self.metrics.log_writer);
                continue;
            }
            let Some(writer) = leader.as_mut().and_then(|leader| leader.writer.as_mut()) else {
                match self.write_role.try_take() {
                    Some(writer) => leader = Some(WriteLeader { shared: self, writer: Some(writer) }),
                    None => self.wait_for_mode_or_role(|| self.write_role.is_held(), &self.metrics.log_writer),
                }
                continue;
            };
            let written = self.written();
            if self.ready() <= written {
                let waited = self.ready_events.wait(written.0 + 1, self.spin_for(&self.write_pass), || {
                    self.log_threads_stop() || !self.dedicated_active() || self.ready() > written
                });
                self.metrics.log_writer.record(true, waited);
                continue;
            }
            let upto = self.writable_end(written, self.ready());
            let done = if upto <= written {
                // File space (a checkpoint) or the unsynced bound (the flusher).
                self.wait_for_writable(written)
            } else {
                self.metrics.log_writer.record(false, Waited::default());
                self.write_range(writer, written, upto).map(|_| ())
            };
            if done.is_err() {
                break; // poisoned, or closed while waiting for file space
            }
        }
        drop(leader);
    }

    /// The log flusher thread: holds the sync role while the dedicated pipeline
    /// is active and fdatasyncs whenever `written` passes `synced`.
    pub(crate) fn run_log_flusher(&self) {
        let mut leader: Option<SyncLeader<'_>> = None;
        while !self.log_threads_stop() {
            if !self.dedicated_active() {
                leader = None;
                self.wait_for_mode_or_role(|| false, &self.metrics.log_flusher);
                continue;
            }
            if leader.is_none() {
                match self.sync_role.try_take() {
                    Some(role) => leader = Some(SyncLeader { shared: self, role: Some(role) }),
                    None => self.wait_for_mode_or_role(|| self.sync_role.is_held(), &self.metrics.log_flusher),
                }
                continue;
            }
            let synced = self.synced();
            let written = self.written();
            if written <= synced {
                let waited = self.flusher_event.wait(1, self.spin_for(&self.write_pass), || {
                    self.log_threads_stop() || !self.dedicated_active() || self.written() > synced
                });
                self.metrics.log_flusher.record(true, waited);
                continue;
            }
            self.metrics.log_flusher.record(false, Waited::default());
            let now = Instant::now();
            if self.sync_written((synced, written), now, now).is_err() {
                break;
            }
        }
        drop(leader);
    }

    /// Stops the log threads' work: back to group commit, then shutdown
    /// (`Log::close`, `Drop`). Committers still waiting take the roles over.
    pub(crate) fn stop_log_threads(&self) {
        self.set_active(crate::config::Pipeline::GroupCommit);
        self.shutdown.store(true, Ordering::SeqCst);
        self.wake_everyone();
    }
}
