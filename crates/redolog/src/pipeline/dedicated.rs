//! The dedicated pipeline's loops: a log writer and a log flusher thread
//! (MySQL 8.0's log_writer and log_flusher; [DESIGN §1.11](crate::docs::design#111-the-dedicated-pipeline-mysql-80s-log-threads)).
//!
//! While the dedicated mode is on the writer holds its role for good and the
//! flusher holds its role while it has work: the writer writes whatever
//! appenders completed as soon as the link buffer's tail moves, the flusher
//! fdatasyncs whatever was written as soon as `written` passes `synced`. Committing threads cannot take a held role and only park on
//! the event slot of their LSN until a pass covers it. Each log thread waits on
//! an event that whoever creates its work sets:
//!
//! | thread  | waits for                 | event           | set by                           |
//! |---------|---------------------------|-----------------|----------------------------------|
//! | writer  | `ready > written`         | `ready_events`  | the appender that moves the tail (a mini-transaction's when it closes), a committer about to park (INV-39) |
//! | flusher | `written > synced`        | `flusher_event` | the writer, after each write it does not sync |
//! | both    | dedicated mode, role free | `mode_events`   | `set_dedicated`, role releases   |
//!
//! The flusher lets the sync role go while it is idle, and the writer syncs
//! a write it began from idle itself when it can take that role: a lone
//! commit then costs one hand-off, not two (INV-37).
//!
//! When the mode switches to group commit, each thread releases its role
//! (kicking a successor, INV-11) and waits on `mode_events`. Both threads run
//! one loop, `run_log_thread`; only their pass differs.

use super::stage::Stage;
use super::{Leader, Port, Site, Stages};
use crate::clock::Moment;
use crate::error::Result;
use crate::wait::Waited;

/// What a log thread does with its role after a pass.
enum Hold {
    /// Keep it and run the next pass.
    Keep,
    /// Let it go and wait for work: the flusher, idle (INV-37).
    LetGo,
}

impl<W> Stages<W> {
    fn log_threads_stop(&self) -> bool {
        self.is_shutdown() || self.is_poisoned()
    }

    /// The log writer thread's body: holds the write role while the dedicated
    /// mode is on and writes the ready prefix whenever it grows. A write it
    /// began from idle it syncs itself if the flusher is idle too (INV-37).
    /// Returns at shutdown or poison.
    pub(crate) fn run_log_writer<P: Port<Writer = W>>(&self, port: &P) {
        // The last look found nothing ready: the next write is a lone one.
        let mut idle = true;
        self.run_log_thread(port, &self.write, Site::LogWriter, "write", |leader| {
            let written = self.written();
            if port.ready() <= written {
                idle = true;
                let waited = self.ready_events.wait(written.0 + 1, port.spin_for(&self.write.pass), || {
                    self.log_threads_stop() || !self.dedicated_active() || port.ready() > written
                });
                port.count_wait(Site::LogWriter, true, waited);
                return Ok(Hold::Keep);
            }
            let Some((upto, _)) = self.write_writable(port, leader.state(), written, port.ready())? else {
                // File space (a checkpoint) or the unsynced bound (the flusher).
                self.wait_for_writable(port, written)?;
                return Ok(Hold::Keep);
            };
            port.count_wait(Site::LogWriter, false, Waited::default());
            // A log thread keeps its role while it wakes: no committer could
            // take over (INV-28 is group commit's).
            self.write.wake_covered(written, upto);
            if !(std::mem::replace(&mut idle, false) && self.sync_lone_write(port)?) {
                self.written_moved();
            }
            Ok(Hold::Keep)
        });
    }

    /// INV-37: the writer wrote a lone group; if the flusher is idle (the
    /// sync role free), sync it here instead of handing it over. Only tries
    /// the role: the writer holds the write role (INV-8's lock order). False:
    /// the role is held, the caller notifies the flusher.
    fn sync_lone_write<P: Port<Writer = W>>(&self, port: &P) -> Result<bool> {
        let Some(mut leader) = self.try_lead(&self.sync, "fdatasync") else { return Ok(false) };
        // Under the role, as every syncer: after a failed fdatasync (the
        // flusher's, which let the role go) nothing may be synced and
        // acknowledged (INV-6; loom's failed-sync model caught its absence).
        self.check()?;
        // Only the writer writes in this mode, so what it syncs here is
        // everything written.
        let (synced, written) = (self.synced(), self.written());
        if written > synced {
            let now = Moment::now();
            self.sync_written(port, (synced, written), now, now)?;
            leader.covered(synced, written);
        }
        // Dropping the leader releases the role, then wakes the covered.
        Ok(true)
    }

    /// The log flusher thread's body: holds the sync role while the dedicated
    /// mode is on and there is something to sync, and fdatasyncs whenever
    /// `written` passes `synced`. Idle, it lets the role go, so that the
    /// writer can sync a lone write itself (INV-37).
    pub(crate) fn run_log_flusher<P: Port<Writer = W>>(&self, port: &P) {
        self.run_log_thread(port, &self.sync, Site::LogFlusher, "fdatasync", |_leader| {
            let synced = self.synced();
            let written = self.written();
            if written <= synced {
                return Ok(Hold::LetGo);
            }
            port.count_wait(Site::LogFlusher, false, Waited::default());
            let now = Moment::now();
            self.sync_written(port, (synced, written), now, now)?;
            self.sync.wake_covered(synced, written);
            Ok(Hold::Keep)
        });
    }

    /// The idle flusher, its role let go: waits until something written is
    /// not synced and nobody holds the sync role, the mode changes or the log
    /// stops. The writer notifies `flusher_event` after every write it does
    /// not sync itself, a committer's release when it leaves written bytes
    /// unsynced (INV-37).
    fn wait_flusher_work<P: Port>(&self, port: &P) {
        // The flusher's spin budget is the writer's pass: its work arrives
        // when a write ends.
        let waited = self.flusher_event.wait(1, port.spin_for(&self.write.pass), || {
            self.log_threads_stop()
                || !self.dedicated_active()
                || (self.written() > self.synced() && !self.sync.role.is_held())
        });
        port.count_wait(Site::LogFlusher, true, waited);
    }

    /// The one loop of both log threads: while the dedicated mode is on, take
    /// `stage`'s role (waiting while a committer still holds it) and run
    /// `pass` over and over; when it is off, give the role up and wait for the
    /// mode. Returns at shutdown, poison, or a pass's error.
    fn run_log_thread<P: Port<Writer = W>, T>(
        &self,
        port: &P,
        stage: &Stage<T>,
        site: Site,
        op: &'static str,
        mut pass: impl FnMut(&mut Leader<'_, W, T>) -> Result<Hold>,
    ) {
        let mut leader: Option<Leader<'_, W, T>> = None;
        while !self.log_threads_stop() {
            if !self.dedicated_active() {
                leader = None; // releases the role and kicks a successor (INV-11)
                self.wait_for_mode(port, site, || false);
                continue;
            }
            let Some(held) = leader.as_mut() else {
                leader = self.try_lead(stage, op);
                if leader.is_none() {
                    self.wait_for_mode(port, site, || stage.role.is_held());
                }
                continue;
            };
            match pass(held) {
                Ok(Hold::Keep) => {}
                Ok(Hold::LetGo) => {
                    leader = None;
                    self.wait_flusher_work(port);
                }
                Err(_) => break, // poisoned, or closed while waiting for file space
            }
        }
        drop(leader);
    }

    /// Waits until the dedicated mode is on and `role_held()` is false: in
    /// group-commit mode (`role_held` = `|| false`), or for a role a committer
    /// still holds.
    fn wait_for_mode<P: Port>(&self, port: &P, site: Site, role_held: impl Fn() -> bool) {
        let waited = self
            .mode_events
            .wait(1, crate::wait::Spin::NONE, || self.log_threads_stop() || (self.dedicated_active() && !role_held()));
        port.count_wait(site, true, waited);
    }
}
