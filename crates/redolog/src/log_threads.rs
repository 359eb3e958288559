//! The dedicated pipeline's threads: starting the log writer and the log
//! flusher, and placing them (CPU affinity, nice value). Their loops are
//! `pipeline/dedicated.rs`.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::core::Core;
use crate::error::{Error, Result};
use crate::pipeline::PoisonOnPanic;

/// Starts the log writer and the log flusher.
pub(crate) fn spawn_log_threads(core: &Arc<Core>) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::with_capacity(2);
    for (name, body) in [
        ("redolog-writer", (|core| core.stages.run_log_writer(core)) as fn(&Core)),
        ("redolog-flusher", (|core| core.stages.run_log_flusher(core)) as fn(&Core)),
    ] {
        let core = core.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // A log thread that dies leaves nobody to write or sync while the
                // dedicated pipeline is active: poison, so waiters get an error.
                let _guard = PoisonOnPanic { stages: &core.stages, op: "log thread" };
                place_this_thread(name, &core.config.log_thread_cpus, core.config.log_thread_nice);
                body(&core);
            })
            .map_err(|source| Error::io("spawn log thread", name, source))?;
        threads.push(thread);
    }
    Ok(threads)
}

/// Pins the calling thread and sets its nice value as configured (the blog
/// post on MySQL 8.0's log threads starved on few cores).
/// Refusals are logged and ignored: the thread runs as the scheduler decides.
fn place_this_thread(name: &str, cpus: &[usize], nice: Option<i32>) {
    if let Err(error) = pin_this_thread(cpus) {
        log::warn!("{name}: cannot pin to CPUs {cpus:?}: {error}; running unpinned");
    }
    if let Some(nice) = nice {
        if let Err(error) = renice_this_thread(nice) {
            log::warn!("{name}: cannot set nice {nice}: {error}; keeping the inherited priority");
        }
    }
}

/// Pins the calling thread to `cpus` (nothing to do if empty).
fn pin_this_thread(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = rustix::thread::CpuSet::new();
    for &cpu in cpus {
        if cpu >= rustix::thread::CpuSet::MAX_CPU {
            return Err(std::io::Error::other(format!("CPU {cpu} is beyond the largest CPU number")));
        }
        set.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Sets the calling thread's nice value (on Linux, per thread).
pub(crate) fn renice_this_thread(nice: i32) -> std::io::Result<()> {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice)?;
    Ok(())
}
