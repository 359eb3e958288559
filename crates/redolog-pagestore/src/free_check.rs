//! InnoDB's `log_free_check` ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)): one coordinator flushes
//! when the log says a checkpoint is wanted (`Log::checkpoint_wanted`, 3/4
//! of its usable bytes), the threads that must wait sleep on an
//! event, and the threads that need not wait pay two atomic loads (MySQL bug
//! #68555's convoy came from a global flag that sent every thread into the
//! slow path). A benchmark's policy replaces it (`policy.rs`).

use std::time::Instant;

use crate::engine::{Engine, Space, BATCH_PAGES};
use crate::Result;

impl Engine {
    pub fn free_check(&self) -> Result<()> {
        if let Some(policy) = &self.policy {
            return policy.free_check(&Space::new(self));
        }
        if !self.log.checkpoint_wanted() {
            return Ok(());
        }
        let started = Instant::now();
        let mut coordinating = self.space.lock();
        loop {
            if !self.log.checkpoint_wanted() {
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
}
