//! Measurement only: another free check and other page cleaners in place of
//! the engine's ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)), so a benchmark can run an older
//! engine's behaviour on this one — `redolog-bench bench --scenario
//! seed-convoy` runs its copy of MySQL 5.6.10's (MySQL bug #68555) this way.
//! The engine's own free check and cleaners never go through here. The
//! trait and the handle are declared beside the engine (`engine.rs`), which
//! holds the policy; what the handle can do is here.

use std::time::Instant;

use redolog::Lsn;

use crate::engine::{Engine, Space};
use crate::Result;

impl<'a> Space<'a> {
    pub(crate) fn new(engine: &'a Engine) -> Space<'a> {
        Space { engine }
    }

    /// The log's end LSN less its last checkpoint, bytes.
    pub fn checkpoint_age(&self) -> u64 {
        self.engine.age()
    }

    /// The engine's free check mark: a statement waits above this age
    /// (three quarters of the log).
    pub fn sync_age(&self) -> u64 {
        self.engine.free_check_age
    }

    /// The log's end LSN (InnoDB's `log_sys->lsn`).
    pub fn end_lsn(&self) -> Lsn {
        self.engine.log.end_lsn()
    }

    /// The oldest modification of any dirty page, or the log's end LSN
    /// when none is dirty (InnoDB's `log_buf_pool_get_oldest_modification`).
    pub fn oldest_modification(&self) -> Lsn {
        self.engine.pool.oldest_modification().unwrap_or_else(|| self.engine.log.end_lsn())
    }

    /// Checkpoints as far as the flush lists and the closed LSN allow (PS-4).
    pub fn checkpoint(&self) -> Result<()> {
        self.engine.checkpoint()
    }

    /// Buffer pool instances.
    pub fn instances(&self) -> usize {
        self.engine.pool.instances()
    }

    /// Flushes one batch of `instance`'s oldest dirty pages — at most
    /// `pages` — whose oldest modification lies below `limit`, through the
    /// doublewrite file a doublewrite file's worth at a time; returns how
    /// many it wrote.
    pub fn flush_batch(&self, instance: usize, pages: usize, limit: Lsn) -> Result<usize> {
        let instances = self.engine.pool.instances();
        self.engine.flush(&self.engine.pool.oldest_dirty_below(instance, instances, pages, limit))
    }

    /// The pages per tick the engine's cleaners' budget gives each of
    /// `cleaners` cleaners at today's checkpoint age (`io_capacity`, up to
    /// ten times that as the log fills).
    pub fn pages_per_tick(&self, cleaners: usize) -> usize {
        self.engine.pages_per_tick(cleaners)
    }

    /// Counts a statement sent to the free check's slow path
    /// (`EngineStats::free_check_slow_paths`).
    pub fn count_slow_path(&self) {
        self.engine.stats.lock().free_check_slow_paths += 1;
    }

    /// Counts a free-check wait begun at `started` (the triad in
    /// `EngineStats`).
    pub fn count_wait(&self, started: Instant) {
        self.engine.record_wait(started);
    }
}
