//! The engine's background threads (docs/PAGESTORE.md §10): one page cleaner
//! per instance (`cleaners.rs` has their work) and the checkpointer, at a
//! raised priority; or the cleaners a benchmark's policy asks for
//! (`policy.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::engine::{Engine, Space};

/// The background threads; stopped and joined when dropped.
pub(crate) struct Background {
    engine: Arc<Engine>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts one page cleaner per instance (InnoDB's
    /// `innodb_page_cleaners` default; as many as a policy asks for) and
    /// the checkpointer.
    pub(crate) fn start(engine: &Arc<Engine>) -> std::io::Result<Background> {
        let instances = engine.pool.instances();
        let cleaners = engine.policy.as_ref().map_or(instances, |policy| policy.cleaners(instances));
        let mut threads = Vec::new();
        for cleaner in 0..cleaners {
            let engine = engine.clone();
            threads.push(std::thread::Builder::new().name(format!("page-cleaner-{cleaner}")).spawn(move || {
                engine.raise_priority();
                while engine.wait_tick() {
                    // A failed write poisons the log; statements see it.
                    let _ = match &engine.policy {
                        Some(policy) => policy.clean(&Space::new(&engine), cleaner, cleaners),
                        None => engine.clean(cleaner, cleaners),
                    };
                }
            })?);
        }
        let checkpointer = engine.clone();
        threads.push(std::thread::Builder::new().name("checkpointer".into()).spawn(move || {
            checkpointer.raise_priority();
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
