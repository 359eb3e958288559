//! The page cleaners' work ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)): each instance's oldest
//! pages at a rate set by the checkpoint age, the LRU flush of a full
//! instance, and past the async mark a sync flush that keeps statements away
//! from the free check.

use std::sync::atomic::Ordering;
use std::time::Instant;

use redolog::Lsn;

use crate::engine::{Engine, BATCH_PAGES, TICK};
use crate::Result;

impl Engine {
    pub(crate) fn async_age(&self) -> u64 {
        self.free_check_age / 8 * 7
    }

    pub(crate) fn clean(&self, first: usize, step: usize) -> Result<()> {
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

    pub(crate) fn pages_per_tick(&self, cleaners: usize) -> usize {
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
