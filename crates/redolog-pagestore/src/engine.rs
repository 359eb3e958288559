//! The engine the statements and the background threads share: the log, the
//! buffer pool, the checkpoint, and how the free check behaves
//! ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)). The jobs on it live beside it: the free check
//! (`free_check.rs`), the page cleaners (`cleaners.rs`), the background
//! threads (`background.rs`); a benchmark may replace the first two
//! ([`SpacePolicy`], its handle's methods in `policy.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redolog::{Log, Lsn};

use crate::buffer_pool::BufferPool;
use crate::page::PageNo;
use crate::stats::EngineStats;
use crate::Result;

/// How often a cleaner and the checkpointer wake when nobody wakes them
/// (InnoDB's page cleaners loop once a second; a tenth keeps batches small).
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// Pages one flush batch writes at most (the doublewrite file's size).
pub(crate) const BATCH_PAGES: usize = crate::datafile::DOUBLEWRITE_PAGES;
/// The nice value the page cleaners and the checkpointer ask for: above
/// the statements' threads, as InnoDB raises its page cleaners'
/// (`buf_flush_page_cleaner_priority`), or on a loaded machine they fall
/// behind the redo rate and every statement meets the free check.
const BACKGROUND_NICE: i32 = -10;

/// Asks for [`BACKGROUND_NICE`] for the calling thread; false if refused
/// (raising a priority needs `CAP_SYS_NICE`): the thread then runs at the
/// priority it inherited.
fn raise_priority() -> bool {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), BACKGROUND_NICE).is_ok()
}

/// A free check and page cleaners that replace the engine's
/// ([`Options::space_policy`](crate::Options::space_policy)). The engine
/// still owns the checkpoint, the flushes and the counters: a policy decides
/// when to flush which pages, through [`Space`].
pub trait SpacePolicy: std::fmt::Debug + Send + Sync + 'static {
    /// A statement's free check (`PageStore::free_check`): returns once the
    /// statement may log.
    fn free_check(&self, space: &Space<'_>) -> Result<()>;

    /// How many page cleaner threads run for `instances` buffer pool
    /// instances.
    fn cleaners(&self, instances: usize) -> usize;

    /// One tick's work of cleaner `cleaner` of `cleaners`. An error is
    /// dropped: a failed write has poisoned the log, and statements see it.
    fn clean(&self, space: &Space<'_>, cleaner: usize, cleaners: usize) -> Result<()>;

    /// Whether the cleaners and the checkpointer ask for a raised priority,
    /// as the engine's do.
    fn raise_priority(&self) -> bool;
}

/// What a [`SpacePolicy`] may see and do: the checkpoint age and its marks,
/// flush batches, the checkpoint, and the engine's counters.
pub struct Space<'a> {
    pub(crate) engine: &'a Engine,
}

/// The log, the pool, and the state the background threads share.
pub(crate) struct Engine {
    /// Shared with an archiver (`redolog::archive::Archiver::start`).
    pub(crate) log: Arc<Log>,
    pub(crate) pool: BufferPool,
    /// The log's last checkpoint: this engine takes every one.
    pub(crate) checkpoint: AtomicU64,
    /// A statement waits in the free check above this checkpoint age: the
    /// log's checkpoint-wanted level (`redolog::LogSpace`).
    pub(crate) free_check_age: u64,
    /// The log's capacity in bytes.
    pub(crate) capacity: u64,
    /// Pages per second the cleaners write at a low checkpoint age
    /// (`innodb_io_capacity`); ten times that as the age nears the free
    /// check (`innodb_io_capacity_max`'s default ratio).
    pub(crate) io_capacity: u64,
    pub(crate) shutdown: AtomicBool,
    /// The background threads wait a tick on this, so a shutdown wakes
    /// them at once (it sets `shutdown`, then notifies under the mutex).
    pub(crate) tick: Mutex<()>,
    pub(crate) tick_over: Condvar,
    /// Whether a thread is flushing for space, under the mutex the waiters
    /// sleep on: a waiter checks and sleeps under it, the coordinator
    /// clears it and wakes them under it, so no wake-up is lost.
    pub(crate) space: Mutex<bool>,
    pub(crate) space_freed: Condvar,
    pub(crate) stats: Mutex<EngineStats>,
    /// A benchmark's free check and cleaners in place of the engine's
    /// (`Options::space_policy`).
    pub(crate) policy: Option<Arc<dyn SpacePolicy>>,
    /// Set when a background thread was refused its raised priority.
    pub(crate) priority_refused: AtomicBool,
}

impl Engine {
    pub(crate) fn new(
        log: Log,
        pool: BufferPool,
        checkpoint: Lsn,
        capacity: u64,
        io_capacity: u64,
        policy: Option<Arc<dyn SpacePolicy>>,
    ) -> Engine {
        let free_check_age = log.space().checkpoint_wanted_age;
        Engine {
            log: Arc::new(log),
            pool,
            checkpoint: AtomicU64::new(checkpoint.as_u64()),
            free_check_age,
            capacity,
            io_capacity: io_capacity.max(1),
            shutdown: AtomicBool::new(false),
            tick: Mutex::new(()),
            tick_over: Condvar::new(),
            space: Mutex::new(false),
            space_freed: Condvar::new(),
            stats: Mutex::new(EngineStats::default()),
            policy,
            priority_refused: AtomicBool::new(false),
        }
    }

    pub(crate) fn wait_tick(&self) -> bool {
        let mut tick = self.tick.lock();
        if self.shutdown.load(Ordering::Relaxed) {
            return false;
        }
        self.tick_over.wait_for(&mut tick, TICK);
        !self.shutdown.load(Ordering::Relaxed)
    }

    pub(crate) fn age(&self) -> u64 {
        self.log.end_lsn().as_u64().saturating_sub(self.checkpoint.load(Ordering::Acquire))
    }

    pub(crate) fn flush_oldest(&self, first: usize, step: usize, count: usize) -> Result<usize> {
        self.flush(&self.pool.oldest_dirty(first, step, count))
    }

    pub(crate) fn flush(&self, pages: &[PageNo]) -> Result<usize> {
        let flushed = self.pool.flush_pages(&self.log, pages)?;
        self.stats.lock().pages_flushed += flushed as u64;
        Ok(flushed)
    }

    pub(crate) fn checkpoint(&self) -> Result<()> {
        let target = self.pool.checkpoint_lsn(&self.log);
        if target.as_u64() > self.checkpoint.load(Ordering::Acquire) {
            self.log.checkpoint(target)?;
            // Release: pairs with the Acquire in `age`.
            self.checkpoint.fetch_max(target.as_u64(), Ordering::Release);
            self.stats.lock().checkpoints += 1;
        }
        Ok(())
    }

    pub(crate) fn flush_all(&self) -> Result<()> {
        let end = self.log.end_lsn();
        loop {
            let pages = self.pool.oldest_dirty_below(0, 1, BATCH_PAGES, end);
            if pages.is_empty() {
                break;
            }
            if self.pool.flush_pages(&self.log, &pages)? == 0 {
                // Another flush holds them (io-fixed): it finishes them.
                std::thread::yield_now();
            }
        }
        self.checkpoint()
    }

    pub(crate) fn record_wait(&self, started: Instant) {
        let waited = started.elapsed().as_micros() as u64;
        let mut stats = self.stats.lock();
        stats.free_check_waits += 1;
        stats.free_check_wait_us += waited;
        stats.free_check_wait_us_max = stats.free_check_wait_us_max.max(waited);
    }

    /// Whether the background threads ask for a raised priority: the
    /// engine's do; a policy's only if it says so.
    pub(crate) fn raises_priority(&self) -> bool {
        self.policy.as_ref().is_none_or(|policy| policy.raise_priority())
    }

    /// Asks for the background's raised priority for the calling thread,
    /// unless a policy says its threads keep the inherited one.
    pub(crate) fn raise_priority(&self) {
        if self.raises_priority() && !raise_priority() {
            self.priority_refused.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn stats(&self) -> EngineStats {
        EngineStats {
            checkpoint_age: self.age(),
            pages_dirtied: self.pool.pages_dirtied(),
            page_latch: self.pool.waits.page_latch.snapshot(),
            index_lock: self.pool.waits.index_lock.snapshot(),
            log_end: self.log.end_lsn().as_u64(),
            background_prioritized: self.raises_priority() && !self.priority_refused.load(Ordering::Relaxed),
            ..self.stats.lock().clone()
        }
    }
}
