//! The engine's background threads (docs/PAGESTORE.md §10): one page cleaner
//! per instance (`cleaners.rs` has their work) and the checkpointer, at a
//! raised priority; with [`FreeCheck::Mysql5610GlobalFlag`] MySQL 5.6's one
//! page cleaner instead.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::engine::{Engine, FreeCheck};

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
            let engine = engine.clone();
            threads.push(
                std::thread::Builder::new().name("page-cleaner".into()).spawn(move || engine.page_cleaner_5610())?,
            );
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
