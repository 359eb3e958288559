//! Running one point: N threads committing for a fixed time, with sysbench-style
//! interval lines.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use redolog::Durability;

use super::machine::process_cpu_time;
use super::systems::{BoxError, System};

/// What one point should do.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub threads: usize,
    pub duration: Duration,
    pub record_bytes: usize,
    pub durability: Durability,
    /// Append only; one final wait per thread.
    pub no_wait: bool,
    pub print_intervals: bool,
}

/// What one point measured.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub commits: u64,
    pub elapsed: Duration,
    pub latency_us: Histogram<u64>,
    pub fsyncs: u64,
    pub cpu: Duration,
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

    pub fn cpu_us_per_commit(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.commits.max(1) as f64
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("constant bounds")
}

/// One committing thread's loop.
fn commit_loop(
    system: &dyn System,
    workload: &Workload,
    stop: &AtomicBool,
    commits: &AtomicU64,
    interval: &Mutex<Histogram<u64>>,
) -> Result<(), BoxError> {
    let record = vec![0x5Au8; workload.record_bytes];
    let mut last = 0;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        last = system.append(&record)?;
        if !workload.no_wait {
            system.wait(last, workload.durability)?;
        }
        interval.lock().saturating_record(started.elapsed().as_micros().max(1) as u64);
        commits.fetch_add(1, Ordering::Relaxed);
    }
    if workload.no_wait && last > 0 {
        system.wait(last, workload.durability)?;
    }
    Ok(())
}

/// Runs `workload` against `system` and measures it.
pub fn run_point(system: &Arc<dyn System>, workload: Workload, label: &str) -> Result<PointResult, BoxError> {
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let intervals: Vec<Arc<Mutex<Histogram<u64>>>> =
        (0..workload.threads).map(|_| Arc::new(Mutex::new(new_histogram()))).collect();
    let fsyncs_before = system.fsyncs();
    let cpu_before = process_cpu_time();
    let started = Instant::now();
    let threads: Vec<_> = intervals
        .iter()
        .map(|interval| {
            let (system, stop, commits, interval) = (system.clone(), stop.clone(), commits.clone(), interval.clone());
            std::thread::spawn(move || commit_loop(&*system, &workload, &stop, &commits, &interval))
        })
        .collect();
    let mut total = new_histogram();
    let mut second = 1;
    let mut last_commits = 0;
    while started.elapsed() < workload.duration {
        std::thread::sleep(Duration::from_millis(100));
        system.maintain();
        if started.elapsed() >= Duration::from_secs(second) || started.elapsed() >= workload.duration {
            let mut window = new_histogram();
            for interval in &intervals {
                let taken = std::mem::replace(&mut *interval.lock(), new_histogram());
                let _ = window.add(&taken);
            }
            let _ = total.add(&window);
            let now = commits.load(Ordering::Relaxed);
            if workload.print_intervals {
                println!(
                    "[ {second}s ] {label} thds: {} tps: {:.2} lat (ms,95%): {:.3}",
                    workload.threads,
                    (now - last_commits) as f64,
                    window.value_at_quantile(0.95) as f64 / 1000.0
                );
            }
            last_commits = now;
            second += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().map_err(|_| "a benchmark thread panicked")??;
    }
    let elapsed = started.elapsed();
    for interval in &intervals {
        let _ = total.add(&*interval.lock());
    }
    Ok(PointResult {
        commits: commits.load(Ordering::Relaxed),
        elapsed,
        latency_us: total,
        fsyncs: system.fsyncs() - fsyncs_before,
        cpu: process_cpu_time() - cpu_before,
    })
}
