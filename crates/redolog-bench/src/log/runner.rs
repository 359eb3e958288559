//! Running one point: N threads (or, for `async`, N Tokio tasks) committing
//! for a fixed time, with sysbench-style interval lines.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use parking_lot::Mutex;
use redolog::Durability;

use super::systems::{Driver, System};
use crate::harness::machine::process_cpu_time;
use crate::harness::stats::new_histogram;
use crate::harness::{sync_hook, BoxError};

/// What one point should do.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub threads: usize,
    pub duration: Duration,
    pub record_bytes: usize,
    pub durability: Durability,
    /// Append only; one final wait per thread.
    pub no_wait: bool,
    /// Print an interval line every this many seconds (0: none), as sysbench's
    /// `--report-interval`.
    pub report_interval: u64,
}

/// What one point measured.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub commits: u64,
    pub elapsed: Duration,
    pub latency_us: Histogram<u64>,
    /// fdatasync and fsync calls in the process during the point.
    pub fsyncs: u64,
    pub cpu: Duration,
    /// Time redolog's waiters spent spinning (0 for the baselines).
    pub spin: Duration,
}

impl PointResult {
    pub fn commits_per_sec(&self) -> f64 {
        self.commits as f64 / self.elapsed.as_secs_f64()
    }

    pub fn records_per_fsync(&self) -> f64 {
        if self.fsyncs == 0 {
            return 0.0;
        }
        self.commits as f64 / self.fsyncs as f64
    }

    /// Spinning as a share of the process's CPU time, in percent.
    pub fn spin_pct_of_cpu(&self) -> f64 {
        100.0 * self.spin.as_secs_f64() / self.cpu.as_secs_f64().max(1e-9)
    }

    pub fn cpu_us_per_commit(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.commits.max(1) as f64
    }
}

/// One committing thread's counters. Each thread has its own, cache-padded, so
/// measuring adds no shared cache line to the path measured: a shared commit
/// counter was 5% of a no-wait profile, as every append moved its line.
struct ThreadStats {
    commits: CachePadded<AtomicU64>,
    latency_us: Mutex<Histogram<u64>>,
}

impl ThreadStats {
    fn new() -> Self {
        ThreadStats { commits: CachePadded::new(AtomicU64::new(0)), latency_us: Mutex::new(new_histogram()) }
    }
}

/// In `--no-wait` mode one append in this many is timed: an append takes about
/// as long as two clock reads, so timing each would measure the clock.
const NO_WAIT_TIMING_EVERY: u64 = 64;

/// One committing thread's loop.
fn commit_loop(
    system: &dyn System,
    workload: &Workload,
    stop: &AtomicBool,
    stats: &ThreadStats,
) -> Result<(), BoxError> {
    let record = vec![0x5Au8; workload.record_bytes];
    let mut last = 0;
    let mut commits = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if workload.no_wait && commits % NO_WAIT_TIMING_EVERY != 0 {
            last = system.append(&record)?;
        } else {
            let started = Instant::now();
            last =
                if workload.no_wait { system.append(&record)? } else { system.commit(&record, workload.durability)? };
            stats.latency_us.lock().saturating_record(started.elapsed().as_micros().max(1) as u64);
        }
        commits += 1;
        // The only writer of this counter: a store, not a read-modify-write.
        stats.commits.store(commits, Ordering::Relaxed);
    }
    if workload.no_wait && last > 0 {
        system.wait(last, workload.durability)?;
    }
    Ok(())
}

/// Stops the workers of a point once `stop` is set: joins them, returns the
/// first error.
type Join = Box<dyn FnOnce() -> Result<(), BoxError>>;

/// One thread per `workload.threads`, each running `commit_loop`.
fn start_threads(
    system: &Arc<dyn System>,
    workload: &Workload,
    stop: &Arc<AtomicBool>,
    stats: &[Arc<ThreadStats>],
) -> Join {
    let threads: Vec<_> = stats
        .iter()
        .map(|stats| {
            let (system, stop, stats, workload) = (system.clone(), stop.clone(), stats.clone(), *workload);
            std::thread::spawn(move || commit_loop(&*system, &workload, &stop, &stats))
        })
        .collect();
    Box::new(move || {
        for thread in threads {
            thread.join().map_err(|_| "a benchmark thread panicked")??;
        }
        Ok(())
    })
}

/// `workload.threads` Tokio tasks on one worker thread per usable CPU, each
/// committing and awaiting the commit: through `commit_async` (`Futures`: no
/// thread per waiter) or through a blocking commit in `spawn_blocking`.
fn start_tasks(
    driver: Driver,
    workload: &Workload,
    stop: &Arc<AtomicBool>,
    stats: &[Arc<ThreadStats>],
) -> Result<Join, BoxError> {
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build()?;
    let tasks: Vec<_> = stats
        .iter()
        .map(|stats| {
            let (stop, stats, workload) = (stop.clone(), stats.clone(), *workload);
            let record: Arc<[u8]> = vec![0x5Au8; workload.record_bytes].into();
            let driver = driver.clone();
            runtime.spawn(async move {
                let mut commits = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    match &driver {
                        Driver::Futures(log) => {
                            log.commit_async(&record, workload.durability).await?;
                        }
                        Driver::SpawnBlocking(system) => {
                            let (system, record) = (system.clone(), record.clone());
                            tokio::task::spawn_blocking(move || system.commit(&record, workload.durability))
                                .await
                                .map_err(|_| "a spawn_blocking commit panicked")??;
                        }
                        Driver::Threads => unreachable!("threads are not tasks"),
                    }
                    stats.latency_us.lock().saturating_record(started.elapsed().as_micros().max(1) as u64);
                    commits += 1;
                    stats.commits.store(commits, Ordering::Relaxed);
                }
                Ok::<(), BoxError>(())
            })
        })
        .collect();
    Ok(Box::new(move || {
        runtime.block_on(async {
            for task in tasks {
                task.await.map_err(|_| "a benchmark task panicked")??;
            }
            Ok::<(), BoxError>(())
        })
    }))
}

/// Publishes the point's live counters through the `metrics` facade (served
/// by `--prometheus`; a no-op without it): the log's, and the benchmark's
/// own commits, labelled by point and threads.
fn publish(system: &dyn System, point: &str, threads: usize, commits: u64) {
    let threads = threads.to_string();
    let labels = [("point", point), ("threads", threads.as_str())];
    if let Some(metrics) = system.metrics() {
        metrics.publish(&labels);
    }
    let labels: Vec<metrics::Label> =
        labels.iter().map(|(key, value)| metrics::Label::new(*key, value.to_string())).collect();
    metrics::counter!("redolog_bench_commits_total", labels).absolute(commits);
}

/// Runs `workload` against `system` and measures it.
/// `progress` advances once per measured second; interval lines print above it.
pub fn run_point(
    system: &Arc<dyn System>,
    workload: Workload,
    label: &str,
    progress: &ProgressBar,
) -> Result<PointResult, BoxError> {
    let stop = Arc::new(AtomicBool::new(false));
    let stats: Vec<Arc<ThreadStats>> = (0..workload.threads).map(|_| Arc::new(ThreadStats::new())).collect();
    let commits = || stats.iter().map(|stats| stats.commits.load(Ordering::Relaxed)).sum::<u64>();
    let fsyncs_before = sync_hook::calls();
    let cpu_before = process_cpu_time();
    let started = Instant::now();
    let workers = match system.driver() {
        Driver::Threads => start_threads(system, &workload, &stop, &stats),
        driver => start_tasks(driver, &workload, &stop, &stats)?,
    };
    let mut total = new_histogram();
    let mut window = new_histogram();
    let mut second = 1;
    let mut last_commits = 0;
    let mut last_report = 0;
    while started.elapsed() < workload.duration {
        std::thread::sleep(Duration::from_millis(100));
        system.maintain();
        let ended = started.elapsed() >= workload.duration;
        if started.elapsed() >= Duration::from_secs(second) || ended {
            publish(system.as_ref(), label, workload.threads, commits());
            for stats in &stats {
                let taken = std::mem::replace(&mut *stats.latency_us.lock(), new_histogram());
                let _ = window.add(&taken);
            }
            progress.inc(1);
            let interval = workload.report_interval;
            if interval > 0 && (second % interval == 0 || ended) && second > last_report {
                let now = commits();
                let seconds = (second - last_report) as f64;
                progress.suspend(|| {
                    println!(
                        "[ {second}s ] {label} thds: {} tps: {:.2} lat (ms,95%): {:.3}",
                        workload.threads,
                        (now - last_commits) as f64 / seconds,
                        window.value_at_quantile(0.95) as f64 / 1000.0
                    )
                });
                last_commits = now;
                last_report = second;
                let _ = total.add(&window);
                window = new_histogram();
            }
            second += 1;
        }
    }
    let _ = total.add(&window);
    stop.store(true, Ordering::Relaxed);
    workers()?;
    let elapsed = started.elapsed();
    for stats in &stats {
        let _ = total.add(&*stats.latency_us.lock());
    }
    Ok(PointResult {
        commits: commits(),
        elapsed,
        latency_us: total,
        fsyncs: sync_hook::calls() - fsyncs_before,
        cpu: process_cpu_time() - cpu_before,
        spin: Duration::ZERO,
    })
}
