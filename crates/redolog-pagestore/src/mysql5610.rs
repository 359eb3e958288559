//! Benchmark only: a copy of MySQL 5.6.10's free check
//! ([`FreeCheck::Mysql5610GlobalFlag`](crate::FreeCheck)) and the batch
//! bookkeeping its single page cleaner shares, so that `redolog-bench bench
//! --scenario seed-convoy` can show MySQL bug #68555's convoy next to its
//! absence. The engine's own free check is `free_check.rs`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use redolog::Lsn;

use crate::engine::{Engine, BATCH_PAGES};
use crate::Result;

impl Engine {
    pub(crate) fn free_check_5610(&self) -> Result<()> {
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

    pub(crate) fn start_batch(&self, instance: usize) -> bool {
        let mut batches = self.batches.lock();
        !std::mem::replace(&mut batches[instance], true)
    }

    pub(crate) fn end_batch(&self, instance: usize) {
        self.batches.lock()[instance] = false;
        self.batch_ended.notify_all();
    }

    /// MySQL 5.6's one page cleaner, which flushes the instances in turn:
    /// each instance's batch is one the 5.6.10 free check finds running.
    pub(crate) fn page_cleaner_5610(&self) {
        let instances = self.pool.instances();
        while self.wait_tick() {
            let count = self.pages_per_tick(instances).min(BATCH_PAGES);
            for instance in 0..instances {
                if self.start_batch(instance) {
                    let _ = self.flush_oldest(instance, instances, count);
                    self.end_batch(instance);
                }
            }
        }
    }
}
