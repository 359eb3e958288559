//! The engine's background work and its log free check (docs/PAGESTORE.md
//! §10): page cleaners that flush each instance's oldest pages at a rate set
//! by the checkpoint age, a checkpointer, and the free check a statement
//! makes before it starts — one coordinator flushes when the log is short of
//! space, the threads that must wait sleep on an event, and the threads that
//! need not wait pay two atomic loads (MySQL bug #68555's convoy came from a
//! global flag that sent every thread into the slow path).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redolog::{Log, Lsn};

use crate::buffer_pool::BufferPool;
use crate::page::PageNo;
use crate::Result;

/// How often a cleaner and the checkpointer wake when nobody wakes them
/// (InnoDB's page cleaners loop once a second; a tenth keeps batches small).
const TICK: Duration = Duration::from_millis(100);
/// Pages one flush batch writes at most (the doublewrite file's size).
const BATCH_PAGES: usize = crate::datafile::DOUBLEWRITE_PAGES;
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

/// How the log free check behaves. [`Coordinator`](Self::Coordinator) is the
/// engine's; the other exists only so that `redolog bench --scenario
/// seed-convoy` can show MySQL bug #68555's convoy next to its absence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FreeCheck {
    /// One coordinator flushes when the checkpoint age passes the free-check
    /// mark; the threads that must wait sleep on an event; the others pay
    /// two atomic loads.
    #[default]
    Coordinator,
    /// Benchmark only: MySQL 5.6.10's `log_checkpoint_margin`. A global
    /// `check_flush_or_checkpoint` flag, set when the age passes seven
    /// eighths of the mark, sends every statement into the slow path; each
    /// thread there checkpoints, and past the mark flushes every instance
    /// that has no batch running up to its target and waits for every
    /// instance's batch to end; a thread that found a batch running sets the
    /// flag again (the line the bug is about) and loops.
    #[doc(hidden)]
    Mysql5610GlobalFlag,
}

/// The wait triad of the free check, and what the background did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Statements that had to wait in the free check.
    pub free_check_waits: u64,
    /// Their total wait, µs.
    pub free_check_wait_us: u64,
    /// The longest, µs.
    pub free_check_wait_us_max: u64,
    /// Pages written by the cleaners and the free check's coordinator.
    pub pages_flushed: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Of `pages_flushed`, those the cleaners' LRU flush wrote: the least
    /// recently used pages of a full instance that had no clean page to
    /// evict.
    pub lru_pages_flushed: u64,
    /// Pages that went from clean to dirty (each a full-page image, were
    /// torn pages cured that way: docs/PAGESTORE.md §4.1).
    pub pages_dirtied: u64,
    /// The log's end LSN: bytes logged since it was created.
    pub log_end: u64,
    /// Page latch waits: a mini-transaction's exclusive latch or a
    /// descent's shared one found the page latched.
    pub page_latch: crate::Waits,
    /// Index lock waits: a statement found an index lock held (shared:
    /// a split runs; exclusive: any statement runs).
    pub index_lock: crate::Waits,
    /// Whether the page cleaners and the checkpointer run at a raised
    /// priority (nice -10; refused without `CAP_SYS_NICE`).
    pub background_prioritized: bool,
    /// Statements that took the free check's slow path
    /// ([`FreeCheck::Mysql5610GlobalFlag`] only; the coordinator's slow path
    /// is its waits).
    pub free_check_slow_paths: u64,
    /// The checkpoint age now: end LSN minus the last checkpoint, bytes.
    pub checkpoint_age: u64,
}

impl EngineStats {
    /// The counters since `earlier` (a snapshot of the same store): every
    /// count and total minus its earlier value; the gauges — the longest
    /// wait since open, the checkpoint age, the priority — as they are now.
    pub fn since(&self, earlier: &EngineStats) -> EngineStats {
        EngineStats {
            free_check_waits: self.free_check_waits - earlier.free_check_waits,
            free_check_wait_us: self.free_check_wait_us - earlier.free_check_wait_us,
            pages_flushed: self.pages_flushed - earlier.pages_flushed,
            checkpoints: self.checkpoints - earlier.checkpoints,
            lru_pages_flushed: self.lru_pages_flushed - earlier.lru_pages_flushed,
            pages_dirtied: self.pages_dirtied - earlier.pages_dirtied,
            log_end: self.log_end - earlier.log_end,
            page_latch: self.page_latch - earlier.page_latch,
            index_lock: self.index_lock - earlier.index_lock,
            free_check_slow_paths: self.free_check_slow_paths - earlier.free_check_slow_paths,
            ..self.clone()
        }
    }
}

/// The log, the pool, and the state the background threads share.
pub(crate) struct Engine {
    pub(crate) log: Log,
    pub(crate) pool: BufferPool,
    /// The log's last checkpoint: this engine takes every one.
    checkpoint: AtomicU64,
    /// A statement waits in the free check above this checkpoint age.
    free_check_age: u64,
    /// The log's capacity in bytes.
    capacity: u64,
    /// Pages per second the cleaners write at a low checkpoint age
    /// (`innodb_io_capacity`); ten times that as the age nears the free
    /// check (`innodb_io_capacity_max`'s default ratio).
    io_capacity: u64,
    shutdown: AtomicBool,
    /// The background threads wait a tick on this, so a shutdown wakes
    /// them at once (it sets `shutdown`, then notifies under the mutex).
    tick: Mutex<()>,
    tick_over: Condvar,
    /// Whether a thread is flushing for space, under the mutex the waiters
    /// sleep on: a waiter checks and sleeps under it, the coordinator
    /// clears it and wakes them under it, so no wake-up is lost.
    space: Mutex<bool>,
    space_freed: Condvar,
    stats: Mutex<EngineStats>,
    /// [`FreeCheck::Mysql5610GlobalFlag`]: the flag, and which instances
    /// have a flush batch running (`buf_flush_start` / `buf_flush_end`).
    mode: FreeCheck,
    check_flush_or_checkpoint: AtomicBool,
    /// Set when a background thread was refused its raised priority.
    priority_refused: AtomicBool,
    batches: Mutex<Vec<bool>>,
    batch_ended: Condvar,
}

impl Engine {
    pub(crate) fn new(
        log: Log,
        pool: BufferPool,
        checkpoint: Lsn,
        capacity: u64,
        io_capacity: u64,
        mode: FreeCheck,
    ) -> Engine {
        let instances = pool.instances();
        Engine {
            log,
            pool,
            checkpoint: AtomicU64::new(checkpoint.as_u64()),
            free_check_age: capacity / 4 * 3,
            capacity,
            io_capacity: io_capacity.max(1),
            shutdown: AtomicBool::new(false),
            tick: Mutex::new(()),
            tick_over: Condvar::new(),
            space: Mutex::new(false),
            space_freed: Condvar::new(),
            stats: Mutex::new(EngineStats::default()),
            mode,
            check_flush_or_checkpoint: AtomicBool::new(false),
            priority_refused: AtomicBool::new(false),
            batches: Mutex::new(vec![false; instances]),
            batch_ended: Condvar::new(),
        }
    }

    /// Waits one tick, or until shutdown; false once shut down.
    fn wait_tick(&self) -> bool {
        let mut tick = self.tick.lock();
        if self.shutdown.load(Ordering::Relaxed) {
            return false;
        }
        self.tick_over.wait_for(&mut tick, TICK);
        !self.shutdown.load(Ordering::Relaxed)
    }

    fn age(&self) -> u64 {
        self.log.end_lsn().as_u64().saturating_sub(self.checkpoint.load(Ordering::Acquire))
    }

    /// Flushes up to `count` pages of the instances `first`, `first + step`, …
    fn flush_oldest(&self, first: usize, step: usize, count: usize) -> Result<usize> {
        self.flush(&self.pool.oldest_dirty(first, step, count))
    }

    /// Flushes `pages` (`BufferPool::flush_pages`) and counts them.
    fn flush(&self, pages: &[PageNo]) -> Result<usize> {
        let flushed = self.pool.flush_pages(&self.log, pages)?;
        self.stats.lock().pages_flushed += flushed as u64;
        Ok(flushed)
    }

    /// Checkpoints at `min(oldest modification, closed LSN)` if that moved
    /// (PS-4). The pages below it were written through `write_pages`, which
    /// syncs the data file.
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

    /// InnoDB's `log_free_check`: before a statement, make sure the log has
    /// room. Below the free-check age this is two atomic loads. Above it,
    /// the first thread to arrive becomes the coordinator and flushes the
    /// oldest pages of every instance and checkpoints until the age is half
    /// the log; the others sleep on an event until it is done.
    pub fn free_check(&self) -> Result<()> {
        if self.mode == FreeCheck::Mysql5610GlobalFlag {
            return self.free_check_5610();
        }
        if self.age() <= self.free_check_age {
            return Ok(());
        }
        let started = Instant::now();
        let mut coordinating = self.space.lock();
        loop {
            if self.age() <= self.free_check_age {
                break;
            }
            if *coordinating {
                self.space_freed.wait(&mut coordinating);
                continue;
            }
            *coordinating = true;
            drop(coordinating);
            let flushed = self.make_room();
            coordinating = self.space.lock();
            *coordinating = false;
            self.space_freed.notify_all();
            flushed?;
        }
        drop(coordinating);
        self.record_wait(started);
        Ok(())
    }

    /// Flushes every page dirty now, oldest first, then checkpoints.
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

    /// Adds one wait to the free check's triad.
    fn record_wait(&self, started: Instant) {
        let waited = started.elapsed().as_micros() as u64;
        let mut stats = self.stats.lock();
        stats.free_check_waits += 1;
        stats.free_check_wait_us += waited;
        stats.free_check_wait_us_max = stats.free_check_wait_us_max.max(waited);
    }

    /// [`FreeCheck::Mysql5610GlobalFlag`]: MySQL 5.6.10's `log_free_check`
    /// and `log_checkpoint_margin`, for the benchmark that shows bug
    /// #68555's convoy.
    fn free_check_5610(&self) -> Result<()> {
        let (sync_age, async_age) = (self.free_check_age, self.async_age());
        // `log_close`'s part: past the async mark, every thread must look.
        if self.age() > async_age {
            self.check_flush_or_checkpoint.store(true, Ordering::Relaxed);
        }
        if !self.check_flush_or_checkpoint.load(Ordering::Relaxed) {
            return Ok(());
        }
        let started = Instant::now();
        self.stats.lock().free_check_slow_paths += 1;
        let mut waited = false;
        loop {
            self.check_flush_or_checkpoint.store(false, Ordering::Relaxed);
            let age = self.age();
            if age > async_age {
                self.checkpoint()?;
            }
            if age <= sync_age {
                break;
            }
            waited = true;
            // `log_preflush_pool_modified_pages`: every instance up to the
            // target, but an instance whose batch is running is skipped
            // and the call fails.
            let target = Lsn::from_u64(self.checkpoint.load(Ordering::Acquire) + (age - sync_age));
            let mut success = true;
            for instance in 0..self.pool.instances() {
                if !self.start_batch(instance) {
                    success = false;
                    continue;
                }
                let flushed =
                    self.flush(&self.pool.oldest_dirty_below(instance, self.pool.instances(), BATCH_PAGES, target));
                self.end_batch(instance);
                flushed?;
            }
            // `buf_flush_wait_batch_end(NULL, BUF_FLUSH_LIST)`.
            let mut batches = self.batches.lock();
            while batches.iter().any(|running| *running) {
                self.batch_ended.wait(&mut batches);
            }
            drop(batches);
            self.checkpoint()?;
            if !success {
                // The line MySQL bug #68555 is about: every other thread's
                // next statement now takes this path too.
                self.check_flush_or_checkpoint.store(true, Ordering::Relaxed);
            }
            if self.pool.dirty_pages() == 0 {
                break;
            }
        }
        if waited {
            self.record_wait(started);
        }
        Ok(())
    }

    /// `buf_flush_start`: false if `instance` has a batch running.
    fn start_batch(&self, instance: usize) -> bool {
        let mut batches = self.batches.lock();
        !std::mem::replace(&mut batches[instance], true)
    }

    /// `buf_flush_end`.
    fn end_batch(&self, instance: usize) {
        self.batches.lock()[instance] = false;
        self.batch_ended.notify_all();
    }

    /// The coordinator's work: flush oldest-first and checkpoint until the
    /// age is half the log (or nothing is left to flush).
    fn make_room(&self) -> Result<()> {
        while self.age() > self.capacity / 2 {
            let flushed = self.flush_oldest(0, 1, BATCH_PAGES)?;
            self.checkpoint()?;
            if flushed == 0 {
                if self.pool.dirty_pages() == 0 {
                    break;
                }
                // The oldest pages are a cleaner's to finish (io-fixed).
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// [`raise_priority`] for a background thread, remembering a refusal.
    fn raise_priority(&self) {
        if !raise_priority() {
            self.priority_refused.store(true, Ordering::Relaxed);
        }
    }

    /// The free check's wait triad, what the background did, and the
    /// checkpoint age now.
    pub(crate) fn stats(&self) -> EngineStats {
        EngineStats {
            checkpoint_age: self.age(),
            pages_dirtied: self.pool.pages_dirtied(),
            page_latch: self.pool.waits.page_latch.snapshot(),
            index_lock: self.pool.waits.index_lock.snapshot(),
            log_end: self.log.end_lsn().as_u64(),
            background_prioritized: self.mode == FreeCheck::Coordinator
                && !self.priority_refused.load(Ordering::Relaxed),
            ..self.stats.lock().clone()
        }
    }

    /// The checkpoint age past which the cleaners flush without the
    /// `io_capacity` budget (InnoDB's async mark): seven eighths of the
    /// free-check age.
    fn async_age(&self) -> u64 {
        self.free_check_age / 8 * 7
    }

    /// One cleaner's tick over the instances `first`, `first + step`, …:
    /// the LRU flush of a full instance with nothing clean to evict; the
    /// tick's budget of oldest pages, in doublewrite-sized batches;
    /// past the async mark, every page whose oldest modification keeps the
    /// age above three quarters of that mark, checkpointing after each
    /// batch — InnoDB's page cleaners' sync flush, which keeps statements
    /// away from the free check while the device can keep up.
    fn clean(&self, first: usize, step: usize) -> Result<()> {
        // The LRU flush first: a full instance with no clean page to evict
        // grows until some are written.
        for instance in (first..self.pool.instances()).step_by(step.max(1)) {
            let pages = self.pool.lru_dirty(instance, BATCH_PAGES);
            if !pages.is_empty() {
                let flushed = self.flush(&pages)?;
                self.stats.lock().lru_pages_flushed += flushed as u64;
            }
        }
        let mut left = self.pages_per_tick(step);
        let started = Instant::now();
        loop {
            let age = self.age();
            // Past the async mark for at most a tick at a time: then the
            // next tick's LRU flush runs, and a shutdown is seen.
            if age > self.async_age() && started.elapsed() < TICK && !self.shutdown.load(Ordering::Relaxed) {
                let end = self.log.end_lsn().as_u64();
                let target = Lsn::from_u64(end.saturating_sub(self.async_age() / 4 * 3));
                let pages = self.pool.oldest_dirty_below(first, step, BATCH_PAGES, target);
                if pages.is_empty() {
                    return Ok(());
                }
                let flushed = self.flush(&pages)?;
                self.checkpoint()?;
                if flushed == 0 {
                    // Another flush holds them (io-fixed); next tick.
                    return Ok(());
                }
                continue;
            }
            if left == 0 {
                return Ok(());
            }
            match self.flush_oldest(first, step, left.min(BATCH_PAGES))? {
                0 => return Ok(()),
                flushed => left = left.saturating_sub(flushed),
            }
        }
    }

    /// Pages a cleaner writes per tick: `io_capacity` per second, rising to
    /// ten times that as the age goes from an eighth of the log to the
    /// free-check age, as (age fraction)^1.5 (InnoDB's adaptive flushing).
    fn pages_per_tick(&self, cleaners: usize) -> usize {
        let low = self.capacity / 8;
        let age = self.age();
        let boost = if age <= low {
            1.0
        } else {
            let fraction = ((age - low) as f64 / (self.free_check_age - low).max(1) as f64).min(1.0);
            1.0 + 9.0 * fraction.powf(1.5)
        };
        let per_second = self.io_capacity as f64 * boost;
        (per_second * TICK.as_secs_f64() / cleaners as f64).ceil() as usize
    }
}

/// The background threads; stopped and joined when dropped.
pub(crate) struct Background {
    engine: Arc<Engine>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts one page cleaner per instance (InnoDB's
    /// `innodb_page_cleaners` default; one for all with
    /// [`FreeCheck::Mysql5610GlobalFlag`], as 5.6 had) and the checkpointer.
    pub(crate) fn start(engine: &Arc<Engine>) -> std::io::Result<Background> {
        let instances = engine.pool.instances();
        let mut threads = Vec::new();
        if engine.mode == FreeCheck::Mysql5610GlobalFlag {
            // MySQL 5.6's one page cleaner, which flushes the instances in
            // turn: each instance's batch is one the 5.6.10 free check finds
            // running.
            let engine = engine.clone();
            threads.push(std::thread::Builder::new().name("page-cleaner".into()).spawn(move || {
                while engine.wait_tick() {
                    let count = engine.pages_per_tick(instances).min(BATCH_PAGES);
                    for instance in 0..instances {
                        if engine.start_batch(instance) {
                            let _ = engine.flush_oldest(instance, instances, count);
                            engine.end_batch(instance);
                        }
                    }
                }
            })?);
        }
        let cleaners = if engine.mode == FreeCheck::Mysql5610GlobalFlag { 0 } else { instances };
        for cleaner in 0..cleaners {
            let engine = engine.clone();
            threads.push(std::thread::Builder::new().name(format!("page-cleaner-{cleaner}")).spawn(move || {
                engine.raise_priority();
                while engine.wait_tick() {
                    // A failed write poisons the log; statements see it.
                    let _ = engine.clean(cleaner, cleaners);
                }
            })?);
        }
        let checkpointer = engine.clone();
        threads.push(std::thread::Builder::new().name("checkpointer".into()).spawn(move || {
            if checkpointer.mode == FreeCheck::Coordinator {
                checkpointer.raise_priority();
            }
            while checkpointer.wait_tick() {
                let _ = checkpointer.checkpoint();
            }
        })?);
        Ok(Background { engine: engine.clone(), threads })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.engine.shutdown.store(true, Ordering::Relaxed);
        drop(self.engine.tick.lock());
        self.engine.tick_over.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
