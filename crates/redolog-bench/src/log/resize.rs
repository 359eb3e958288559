//! `redolog-bench resize`: commit throughput while `Log::resize` runs,
//! against the same committers' throughput in the second just before it,
//! resize after resize (grow, then shrink back), with a checkpointer running
//! as an engine's page cleaner would (docs/DESIGN.md §1.18).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use redolog::{Config, Durability, Log};

use crate::harness::device::Device;
use crate::harness::stats::median;
use crate::harness::BoxError;

/// Options of `redolog-bench resize`.
#[derive(Clone, Debug, Args)]
pub struct ResizeOptions {
    /// Threads committing `Synced`, one record per commit.
    #[arg(long, default_value_t = 64)]
    pub threads: usize,
    /// The log's capacity before each grow and after each shrink, in MiB.
    #[arg(long, default_value_t = 64)]
    pub small_mib: u64,
    /// The capacity each round grows to, in MiB.
    #[arg(long, default_value_t = 256)]
    pub large_mib: u64,
    /// Rounds; each grows the log, then shrinks it back.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Bytes per record.
    #[arg(long, default_value_t = 128)]
    pub record_bytes: usize,
    /// How long each "before" window lasts, in ms.
    #[arg(long, default_value_t = 1000)]
    pub before_ms: u64,
    /// Device profile, as for `bench`: disk, tmpfs or sim:LATENCY.
    #[arg(long, default_value = "disk")]
    pub device: Device,
    /// Directory for the log with --device disk (default: a fresh temporary
    /// directory under the current one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Commits per second over `window`, from the shared counter.
fn rate(commits: &AtomicU64, window: impl FnOnce() -> Result<(), BoxError>) -> Result<(f64, Duration), BoxError> {
    let (before, started) = (commits.load(Ordering::Relaxed), Instant::now());
    window()?;
    let elapsed = started.elapsed();
    let done = commits.load(Ordering::Relaxed) - before;
    Ok((done as f64 / elapsed.as_secs_f64(), elapsed))
}

/// Runs the committers and the checkpointer, resizes round after round, and
/// prints each resize's throughput against the second before it.
pub fn run(options: &ResizeOptions) -> Result<(), BoxError> {
    if options.rounds == 0 || options.threads == 0 || options.small_mib == options.large_mib {
        return Err("--rounds and --threads must be at least 1, --small-mib and --large-mib differ".into());
    }
    options.device.install();
    let dir = options.device.work_dir(options.dir.as_deref(), "redolog-resize-")?;
    let config = Config::default().with_capacity_bytes(options.small_mib << 20);
    let (log, _) = Log::open(dir.path(), config)?;
    let log = Arc::new(log);
    let (stop, commits) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let mut threads: Vec<_> = (0..options.threads)
        .map(|_| {
            let (log, stop, commits) = (log.clone(), stop.clone(), commits.clone());
            let record = vec![0x5a; options.record_bytes];
            std::thread::spawn(move || -> redolog::Result<()> {
                while !stop.load(Ordering::Relaxed) {
                    log.commit(&record, Durability::Synced)?;
                    commits.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    threads.push({
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || -> redolog::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                log.checkpoint(log.durable_lsn())?;
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(())
        })
    });
    println!(
        "redolog-bench resize: {} on {}, {} threads committing {} B Synced, {} MiB <-> {} MiB",
        dir.path().display(),
        options.device,
        options.threads,
        options.record_bytes,
        options.small_mib,
        options.large_mib
    );
    println!("round  resize       ms  before/s   during/s  ratio");
    let mut ratios = Vec::new();
    let result = (|| -> Result<(), BoxError> {
        for round in 1..=options.rounds {
            for (name, mib) in [("grow", options.large_mib), ("shrink", options.small_mib)] {
                let before = Duration::from_millis(options.before_ms);
                let (before_rate, _) = rate(&commits, || {
                    std::thread::sleep(before);
                    Ok(())
                })?;
                let (during_rate, took) = rate(&commits, || Ok(log.resize(mib << 20)?))?;
                let ratio = during_rate / before_rate;
                println!(
                    "{round:>5}  {name:<6} {:>8.1}  {before_rate:>8.0}  {during_rate:>9.0}  {ratio:>5.2}",
                    took.as_secs_f64() * 1000.0
                );
                ratios.push(ratio);
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().map_err(|_| "a committer panicked")??;
    }
    result?;
    println!("median ratio during/before: {:.2} over {} resizes", median(ratios.clone()), ratios.len());
    Ok(())
}
