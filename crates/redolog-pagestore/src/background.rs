//! The engine's background threads ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)): the page
//! cleaners, one per instance up to InnoDB's default of four and the usable
//! CPUs (`cleaners.rs` has their work), and the checkpointer, at a raised
//! priority; or the cleaners a benchmark's policy asks for (`policy.rs`).

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
    /// Starts the page cleaners (`page_cleaners`; as many as a policy asks
    /// for) and the checkpointer.
    pub(crate) fn start(engine: &Arc<Engine>) -> std::io::Result<Background> {
        let instances = engine.pool.instances();
        // The log's reading of the usable CPUs (affinity and the cgroup
        // quota, up the hierarchy), so that the engine and its log follow
        // one reading: its spinning and its log threads use the same.
        let cpus = (engine.log.metrics().cpu_usable.floor() as usize).max(1);
        let cleaners =
            engine.policy.as_ref().map_or(page_cleaners(instances, cpus), |policy| policy.cleaners(instances));
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

/// InnoDB's default `innodb_page_cleaners` (MySQL WL#8316): 4, and never
/// more than the instances; each cleaner takes every `cleaners`-th instance.
const PAGE_CLEANERS_MAX: usize = 4;

/// The engine's page cleaners for `instances` buffer pool instances on
/// `cpus` usable CPUs: InnoDB's default, and no more than the CPUs. One per
/// instance, as this engine first had, ran 8 cleaners at a raised priority
/// beside 32 clients on 2 cores: seed-convoy's 8 instances then ran 0.91,
/// 0.94 and 0.95 of one instance's updates/s in three paired rounds, and
/// 1.01, 0.96 and 0.99 with 4 cleaners; 4 against 2 cleaners, six rounds
/// each: 0.998 against 1.032 of one instance on average (docs/BENCHMARKS.md,
/// seed-convoy). A cleaner past the CPUs flushes nothing more in a
/// CPU-bound process and, at its raised priority, preempts a statement.
fn page_cleaners(instances: usize, cpus: usize) -> usize {
    instances.min(cpus).clamp(1, PAGE_CLEANERS_MAX)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_cleaners_follow_innodbs_default_within_the_usable_cpus() {
        assert_eq!(page_cleaners(1, 16), 1);
        assert_eq!(page_cleaners(3, 16), 3);
        assert_eq!(page_cleaners(4, 16), 4);
        assert_eq!(page_cleaners(8, 16), 4);
        assert_eq!(page_cleaners(64, 16), 4);
        assert_eq!(page_cleaners(8, 2), 2);
        assert_eq!(page_cleaners(1, 2), 1);
    }
}
