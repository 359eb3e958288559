//! `redolog-bench bench --workload oltp_*`: sysbench's write workloads on the page
//! store (crates/redolog-pagestore), named and shaped like sysbench's:
//! `--tables` tables of `--table-size` rows (`id`, `k`, `c` 120 bytes, `pad`
//! 60) loaded first (sysbench's `prepare`), then `--threads` clients for
//! `--time` seconds, each transaction's commit waiting as
//! `--flush-log-at-trx-commit` says, with sysbench's interval lines and
//! summary, and the engine's free-check triad and checkpoint age.
//!
//! - `oltp_insert`: one INSERT of a new row.
//! - `oltp_update_index`: `UPDATE … SET k = k + 1 WHERE id = ?`.
//! - `oltp_update_non_index`: `UPDATE … SET c = ? WHERE id = ?`.
//! - `oltp_write_only`: one index update, one non-index update, one DELETE
//!   and its re-INSERT, then the commit wait. Each statement is atomic (one
//!   mini-transaction); the page store has no undo, so the four are not one
//!   atomic unit as in InnoDB.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use redolog_pagestore::{EngineStats, Options, SpacePolicy};

mod mysql5610;
pub mod options;
mod pagestore;
#[cfg(feature = "peers")]
pub mod rocksdb;
#[cfg(feature = "peers")]
pub mod sqlite;
pub mod system;

use crate::harness::plot::{Line, LinePoint};
use crate::harness::rounds::interleave;
use crate::harness::run::{RunOptions, DEFAULT_SECONDS, DEFAULT_THREADS};
use crate::harness::stats::{median, new_histogram};
use crate::harness::BoxError;
use options::{OltpOptions, OltpWorkload, DEFAULT_LOG_CAPACITY};
use pagestore::{store_options, PageStoreSystem};
use system::{transaction, OltpSystem, Random};

/// seed-convoy's log when `--log-capacity` is left at its default: small
/// enough that a 15 s point reaches the free check's marks at every client
/// count, large enough that one instance's cleaner nearly keeps up, as in
/// the seed (with 16 MiB the copy's one instance convoyed on its own on two
/// cores, and its 8 ÷ 1 stayed above the seed's: docs/BENCHMARKS.md).
const SEED_CONVOY_LOG_CAPACITY: u64 = 64 << 20;
/// seed-convoy's seconds per point when `--time` is left at its default.
const SEED_CONVOY_SECONDS: f64 = 15.0;

/// One client's counts: transactions, and latencies this interval and in all.
struct Client {
    transactions: u64,
    interval: Histogram<u64>,
    total: Histogram<u64>,
}

/// One system at one client count in one round.
pub struct Point {
    pub system: &'static str,
    pub threads: usize,
    pub round: usize,
    pub transactions: u64,
    pub tps: f64,
    /// Latency percentiles over the point, µs.
    pub p95_us: u64,
    pub p99_us: u64,
    /// The engine's counters over the point (the page store only).
    pub engine: Option<EngineStats>,
    /// The log's counters over the point (the page store only).
    pub log_counters: Vec<(String, u64)>,
}

/// Runs `threads` clients for `--time` seconds; prints interval lines and
/// the summary. `serial` numbers the point among the run's points (the same
/// for every system): the ids the clients insert are new to the system,
/// as sysbench's auto-increment ids are — never ones an earlier point
/// inserted, which would find the row there and change nothing.
fn run_point(
    system: &dyn OltpSystem,
    workload: OltpWorkload,
    (threads, serial): (usize, u64),
    options: &OltpOptions,
) -> Result<Point, BoxError> {
    let clients: Vec<Mutex<Client>> = (0..threads)
        .map(|_| Mutex::new(Client { transactions: 0, interval: new_histogram(), total: new_histogram() }))
        .collect();
    let stop = AtomicBool::new(false);
    let failed = AtomicU64::new(0);
    let before = system.engine_stats();
    let counters_before = system.log_counters();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (number, client) in clients.iter().enumerate() {
            let (stop, failed) = (&stop, &failed);
            scope.spawn(move || {
                let mut random = Random(0xD1B5_4A32_D192_ED03 ^ ((number as u64 + 1) * 0x9E37_79B9));
                // Inserted ids: past every loaded one, unique per point and
                // client (below 2^63: SQLite's integers are signed).
                let mut next_insert = options.table_size + (serial << 44) + ((number as u64) << 32);
                while !stop.load(Ordering::Relaxed) {
                    let begun = Instant::now();
                    let statements = transaction(workload, &mut random, options, &mut next_insert);
                    let done = system.run(&statements, options.flush_log_at_trx_commit);
                    if done.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let micros = begun.elapsed().as_micros().max(1) as u64;
                    let mut client = client.lock();
                    client.transactions += 1;
                    client.interval.saturating_record(micros);
                    client.total.saturating_record(micros);
                }
            });
        }
        report(&clients, threads, (options.run.report_interval, options.run.seconds), started);
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = started.elapsed();
    let (transactions, latency, engine) =
        summary(system, before.as_ref(), &clients, elapsed, failed.load(Ordering::Relaxed));
    let log_counters = system
        .log_counters()
        .into_iter()
        .map(|(name, value)| {
            let was = counters_before.iter().find(|(before, _)| *before == name).map_or(0, |(_, value)| *value);
            (name, value.saturating_sub(was))
        })
        .collect();
    Ok(Point {
        system: system.name(),
        threads,
        round: 0,
        transactions,
        tps: transactions as f64 / elapsed.as_secs_f64(),
        p95_us: latency.value_at_quantile(0.95),
        p99_us: latency.value_at_quantile(0.99),
        engine,
        log_counters,
    })
}

/// sysbench's interval lines every `report_interval` seconds (none if 0),
/// until `seconds` are over; sleeps in between.
fn report(clients: &[Mutex<Client>], threads: usize, (report_interval, seconds): (u64, f64), started: Instant) {
    let end = started + Duration::from_secs_f64(seconds);
    if report_interval == 0 {
        // No lines to print: sleep through the point. (A loop that waited
        // for the next line here spun a core from the first second on,
        // taking it from the clients: `--report-interval 0` ran seed-convoy's
        // engine at 0.6 of its throughput.)
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        return;
    }
    let interval = Duration::from_secs(report_interval);
    let mut seen = 0;
    let mut next = started + interval;
    while Instant::now() < end {
        std::thread::sleep(end.min(next).saturating_duration_since(Instant::now()));
        if Instant::now() < next {
            continue;
        }
        let mut latency = new_histogram();
        let mut total = 0;
        for client in clients {
            let mut client = client.lock();
            total += client.transactions;
            let _ = latency.add(&client.interval);
            client.interval.reset();
        }
        println!(
            "[ {}s ] thds: {threads} tps: {:.2} lat (ms,95%): {:.2}",
            started.elapsed().as_secs(),
            (total - seen) as f64 / interval.as_secs_f64(),
            latency.value_at_quantile(0.95) as f64 / 1000.0
        );
        seen = total;
        next += interval;
    }
}

/// sysbench's summary, and the engine's counters over this point (the
/// longest wait: since the store opened); returns the transactions, their
/// latencies and those counters.
fn summary(
    system: &dyn OltpSystem,
    before: Option<&EngineStats>,
    clients: &[Mutex<Client>],
    elapsed: Duration,
    failed: u64,
) -> (u64, Histogram<u64>, Option<EngineStats>) {
    let mut latency = new_histogram();
    let mut transactions = 0;
    for client in clients {
        let client = client.lock();
        transactions += client.transactions;
        let _ = latency.add(&client.total);
    }
    let ms = |micros: u64| micros as f64 / 1000.0;
    println!("{}: SQL statistics:", system.name());
    println!(
        "    transactions:                        {transactions} ({:.2} per sec.)",
        transactions as f64 / elapsed.as_secs_f64()
    );
    println!("    failed:                              {failed}");
    println!("Latency (ms):");
    println!("         min:                            {:.2}", ms(latency.min()));
    println!("         avg:                            {:.2}", latency.mean() / 1000.0);
    println!("         max:                            {:.2}", ms(latency.max()));
    println!("         95th percentile:                {:.2}", ms(latency.value_at_quantile(0.95)));
    let (Some(stats), Some(before)) = (system.engine_stats(), before) else { return (transactions, latency, None) };
    let delta = stats.since(before);
    println!(
        "engine: free check waits {} ({:.2} ms total, {:.2} ms max), slow paths {}, pages flushed {}, checkpoints {}, \
         checkpoint age {} KiB, background {}",
        delta.free_check_waits,
        ms(delta.free_check_wait_us),
        ms(delta.free_check_wait_us_max),
        delta.free_check_slow_paths,
        delta.pages_flushed,
        delta.checkpoints,
        delta.checkpoint_age >> 10,
        if delta.background_prioritized { "at nice -10" } else { "at the inherited priority" }
    );
    let per_1k = |waits: u64| waits as f64 * 1000.0 / transactions.max(1) as f64;
    println!(
        "engine: waits per 1k transactions: page latch {:.1} ({:.2} ms total), index lock {:.1} ({:.2} ms total); \
         LRU-flushed pages {}",
        per_1k(delta.page_latch.waits),
        ms(delta.page_latch.wait_us),
        per_1k(delta.index_lock.waits),
        ms(delta.index_lock.wait_us),
        delta.lru_pages_flushed
    );
    println!(
        "engine: log {:.1} MiB; pages dirtied {} (full-page images instead of the doublewrite file would add up to \
         {:.1} MiB, {:.2}x the log)",
        delta.log_end as f64 / (1 << 20) as f64,
        delta.pages_dirtied,
        (delta.pages_dirtied * redolog_pagestore::PAGE_BYTES as u64) as f64 / (1 << 20) as f64,
        (delta.pages_dirtied * redolog_pagestore::PAGE_BYTES as u64) as f64 / delta.log_end.max(1) as f64
    );
    (transactions, latency, Some(delta))
}

/// The systems of this build: the page store, and with `--features peers`
/// RocksDB and SQLite, each in its own directory under `workdir`.
fn systems(workdir: &Path, options: &OltpOptions) -> Result<Vec<Box<dyn OltpSystem>>, BoxError> {
    #[allow(unused_mut)] // with --features peers
    let mut systems: Vec<Box<dyn OltpSystem>> =
        vec![Box::new(PageStoreSystem::open(workdir, "pagestore", store_options(options))?)];
    if options.archiver {
        for sync in [false, true] {
            systems.push(Box::new(PageStoreSystem::open_archived(workdir, store_options(options), sync)?));
        }
    }
    #[cfg(feature = "peers")]
    systems.push(Box::new(rocksdb::RocksDbOltp::open(&workdir.join("rocksdb"), options.tables)?));
    #[cfg(feature = "peers")]
    systems.push(Box::new(sqlite::SqliteOltp::open(
        &workdir.join("sqlite"),
        options.tables,
        options.flush_log_at_trx_commit,
    )?));
    Ok(systems)
}

/// The first line of a run.
fn print_heading(options: &OltpOptions) {
    println!(
        "redolog-bench bench --workload {}: device {}, {} tables of {} rows, page store: {} buffer pool instance(s) of \
         {} MiB in all, io_capacity {}, a {} MiB log, flush_log_at_trx_commit={}",
        options.workload.name(),
        options.run.device,
        options.tables,
        options.table_size,
        options.buffer_pool_instances,
        options.buffer_pool_bytes >> 20,
        options.io_capacity,
        options.log_capacity >> 20,
        options.flush_log_at_trx_commit
    );
}

/// Prepares every system, then runs `--rounds` rounds of the workload at
/// each `--threads` count on each system, the systems' order alternating
/// from one point to the next, so each ratio pairs figures measured seconds
/// apart.
fn compare(systems: &mut [Box<dyn OltpSystem>], options: &OltpOptions) -> Result<Vec<Point>, BoxError> {
    compare_with(systems, options, false)
}

/// [`compare`]; with `quiesce`, every point ends with the system quiesced
/// (outside the measured time), so each starts from a clean pool.
fn compare_with(
    systems: &mut [Box<dyn OltpSystem>],
    options: &OltpOptions,
    quiesce: bool,
) -> Result<Vec<Point>, BoxError> {
    for system in systems.iter_mut() {
        let started = Instant::now();
        system.prepare(options)?;
        println!("{}: prepared in {:.1} s", system.name(), started.elapsed().as_secs_f64());
    }
    let systems: Vec<&dyn OltpSystem> = systems.iter().map(|system| &**system).collect();
    let measured = interleave(
        options.run.rounds,
        &options.run.threads,
        &systems,
        |_, _| true,
        |visit| {
            let (system, threads, round) = (*visit.system, visit.count, visit.round);
            println!("\n{} threads: {threads} (round {})", system.name(), round + 1);
            let serial = (round * options.run.threads.len() + visit.point) as u64;
            let point = Point { round, ..run_point(system, options.workload, (threads, serial), options)? };
            if quiesce {
                system.quiesce()?;
            }
            Ok(point)
        },
    )?;
    Ok(measured.into_iter().map(|point| point.result).collect())
}

/// The points of `system` at `threads`, one per round.
fn points_of<'a>(points: &'a [Point], system: &'a str, threads: usize) -> impl Iterator<Item = &'a Point> + 'a {
    points.iter().filter(move |point| point.system == system && point.threads == threads)
}

/// The median tps of `system` at `threads` over the rounds.
fn median_tps(points: &[Point], system: &str, threads: usize) -> f64 {
    median(points_of(points, system, threads).map(|point| point.tps).collect())
}

/// The median over rounds of `system`'s tps over `baseline`'s in the same
/// round.
fn paired(points: &[Point], system: &str, baseline: &str, threads: usize) -> f64 {
    median(
        points_of(points, system, threads)
            .filter_map(|point| {
                points_of(points, baseline, threads)
                    .find(|base| base.round == point.round)
                    .map(|base| point.tps / base.tps.max(1e-9))
            })
            .collect(),
    )
}

/// A log counter of `system` at `threads`, summed over the rounds.
fn log_counter(points: &[Point], system: &str, threads: usize, counter: &str) -> u64 {
    points_of(points, system, threads)
        .flat_map(|point| &point.log_counters)
        .filter(|(name, _)| name == counter)
        .map(|(_, value)| value)
        .sum()
}

/// A log counter of `system` at `threads`, per transaction over the rounds.
fn per_transaction(points: &[Point], system: &str, threads: usize, counter: &str) -> f64 {
    let transactions: u64 = points_of(points, system, threads).map(|point| point.transactions).sum();
    log_counter(points, system, threads, counter) as f64 / transactions.max(1) as f64
}

/// An engine counter of `system` at `threads`, per 1,000 transactions over
/// the rounds.
fn per_1k_transactions(points: &[Point], system: &str, threads: usize, counter: fn(&EngineStats) -> u64) -> f64 {
    let (mut value, mut transactions) = (0, 0);
    for point in points_of(points, system, threads) {
        value += point.engine.as_ref().map_or(0, counter);
        transactions += point.transactions;
    }
    value as f64 * 1000.0 / transactions.max(1) as f64
}

/// Runs an `oltp_*` workload at each `--threads` count on every system, the
/// systems' order alternating from one count to the next; prints sysbench's
/// lines per point and a table of transactions per second at the end.
pub fn run(options: &OltpOptions) -> Result<(), BoxError> {
    let workdir = options.run.device.work_dir(options.run.dir.as_deref(), "redolog-bench-oltp-")?;
    print_heading(options);
    let mut systems = systems(workdir.path(), options)?;
    let points = compare(&mut systems, options)?;
    println!(
        "\n{:<10} {:>8} {:>12} {:>16}   (medians over {} round(s))",
        "system",
        "threads",
        "tps",
        "pagestore / it",
        options.run.rounds.max(1)
    );
    for &threads in &options.run.threads {
        for system in &systems {
            let name = system.name();
            println!(
                "{name:<10} {threads:>8} {:>12.0} {:>15.2}x",
                median_tps(&points, name, threads),
                paired(&points, "pagestore", name, threads)
            );
        }
    }
    write_outputs(options, None, &points)
}

/// `--scenario seed-wakeup --workload oltp_insert`: MySQL bug #95390 on the
/// engine. sysbench's `oltp_insert` at 64 clients with the bug's
/// `innodb_log_recent_closed_size=16384` against the default closed window;
/// the story is the closed window's wait triad per commit.
pub fn seed_wakeup(options: &OltpOptions) -> Result<(), BoxError> {
    let run = RunOptions { threads: vec![64], ..options.run.clone() };
    let options = &OltpOptions { workload: OltpWorkload::Insert, run, ..options.clone() };
    let workdir = options.run.device.work_dir(options.run.dir.as_deref(), "redolog-bench-oltp-")?;
    print_heading(options);
    let default = store_options(options);
    let small = Options { log: default.log.clone().with_closed_window_bytes(16 << 10), ..default.clone() };
    let mut systems: Vec<Box<dyn OltpSystem>> = vec![
        Box::new(PageStoreSystem::open(workdir.path(), "pagestore", default)?),
        Box::new(PageStoreSystem::open(workdir.path(), "closed-16k", small)?),
    ];
    let points = compare(&mut systems, options)?;
    println!("\nscenario seed-wakeup");
    println!(
        "  MySQL bug #95390: sysbench oltp_insert, 64 threads, 8 x 200k rows, innodb_log_recent_closed_size=16384: \
         25.4k TPS with 6.47 M recent_closed wait loops a minute (~4.2 per transaction); 49k TPS once the log \
         closer was woken"
    );
    for system in ["pagestore", "closed-16k"] {
        println!(
            "  {system:<11} 64 clients: {:>8.0} tps, {:.2}x the default window; space waits per commit: ring {:.4}, \
             link buffer {:.4}, closed window {:.4}; closed-window wait loops per commit {:.4}, lost wake-ups {}",
            median_tps(&points, system, 64),
            paired(&points, system, "pagestore", 64),
            per_transaction(&points, system, 64, "log_on_buffer_space_waits"),
            per_transaction(&points, system, 64, "log_on_recent_written_waits"),
            per_transaction(&points, system, 64, "log_on_recent_closed_waits"),
            per_transaction(&points, system, 64, "log_on_recent_closed_wait_loops"),
            log_counter(&points, system, 64, "log_on_recent_closed_timeouts_with_work"),
        );
    }
    write_outputs(options, Some("seed-wakeup"), &points)
}

/// `--scenario seed-convoy`: MySQL bug #68555 on the engine. Update by
/// primary key (`oltp_update_non_index`) on tables that stay in memory with
/// a small `--io-capacity`, 1 against 8 buffer pool instances at 8 to 256
/// clients, with the engine's free check and with the bench-only copy of
/// MySQL 5.6.10's global flag.
pub fn seed_convoy(options: &OltpOptions) -> Result<(), BoxError> {
    // The seed's client counts, unless --threads says otherwise.
    let threads = if options.run.threads == DEFAULT_THREADS {
        vec![8, 16, 32, 64, 128, 256]
    } else {
        options.run.threads.clone()
    };
    // 15 s points unless --time says otherwise: with the log below, a point
    // needs seconds to reach the marks at 8 and 16 clients.
    let seconds = if options.run.seconds == DEFAULT_SECONDS { SEED_CONVOY_SECONDS } else { options.run.seconds };
    let run = RunOptions { threads, seconds, ..options.run.clone() };
    // A log each point reaches the marks of, unless --log-capacity says
    // otherwise: 5.6.10's flag is set only past its sync mark, and with the
    // 100 MiB default a few seconds' point at 8 to 32 clients never got
    // there (the ratios then compared two engines that never met their free
    // check). The output names any point where a copy never took its slow
    // path.
    let log_capacity =
        if options.log_capacity == DEFAULT_LOG_CAPACITY { SEED_CONVOY_LOG_CAPACITY } else { options.log_capacity };
    let options = &OltpOptions { workload: OltpWorkload::UpdateNonIndex, run, log_capacity, ..options.clone() };
    let workdir = options.run.device.work_dir(options.run.dir.as_deref(), "redolog-bench-oltp-")?;
    print_heading(options);
    let mut systems: Vec<Box<dyn OltpSystem>> = Vec::new();
    for (name, instances, copy) in VARIANTS {
        let space_policy = copy.then(|| Arc::new(mysql5610::Mysql5610::new(instances)) as Arc<dyn SpacePolicy>);
        let options = Options { buffer_pool_instances: instances, space_policy, ..store_options(options) };
        systems.push(Box::new(PageStoreSystem::open(workdir.path(), name, options)?));
    }
    // Each point starts from a clean pool and no store's flushing runs into
    // the next point: what a point measures does not depend on the order.
    let points = compare_with(&mut systems, options, true)?;
    report_convoy(&points, &options.run.threads);
    write_outputs(options, Some("seed-convoy"), &points)
}

/// seed-convoy's stores: (name, buffer pool instances, whether the copy of
/// 5.6.10 runs).
const VARIANTS: [(&str, usize, bool); 4] = [
    ("1-instance", 1, false),
    ("8-instances", 8, false),
    ("5.6.10-1-instance", 1, true),
    ("5.6.10-8-instances", 8, true),
];

/// seed-convoy's table against the seed's figures, and the points where
/// its story did not show.
fn report_convoy(points: &[Point], counts: &[usize]) {
    println!("\nscenario seed-convoy");
    println!(
        "  MySQL bug #68555: update 1 row by PK, cached database, small innodb_io_capacity (1000), 5.6.10: 1 \
         instance 36.7k / 54.7k / 62.8k / 62.3k / 61.2k / 60.9k updates/s at 8 / 16 / 32 / 64 / 128 / 256 \
         clients, 8 instances 30.1k / 30.5k / 39.3k / 33.3k / 37.1k / 31.4k"
    );
    println!(
        "  {:>7} {:>11} {:>11} {:>6} {:>13} {:>13} {:>6}   free-check waits per 1k txns (1 / 8 / 5.6.10 1 / 8)",
        "clients", "1 instance", "8 instances", "8/1", "5.6.10 1 inst", "5.6.10 8 inst", "8/1"
    );
    let mut unmarked = Vec::new();
    // The seed's story at a point: the engine's 8 instances keep up with
    // its 1, the copy's fall to 0.7 of its 1 or below (the seed: 0.52-0.63
    // from 16 clients on).
    let mut untold = Vec::new();
    for &threads in counts {
        let slow_paths = |variant: usize| {
            per_1k_transactions(points, VARIANTS[variant].0, threads, |stats| stats.free_check_slow_paths)
        };
        if slow_paths(2) == 0.0 || slow_paths(3) == 0.0 {
            unmarked.push(threads);
        }
        let tps = |variant: usize| median_tps(points, VARIANTS[variant].0, threads);
        let ratio = |variant: usize| paired(points, VARIANTS[variant].0, VARIANTS[variant - 1].0, threads);
        if threads >= 16 && (ratio(1) < 0.95 || ratio(3) > 0.7) {
            untold.push(threads);
        }
        let waits =
            |variant: usize| per_1k_transactions(points, VARIANTS[variant].0, threads, |stats| stats.free_check_waits);
        println!(
            "  {threads:>7} {:>11.0} {:>11.0} {:>5.2}x {:>13.0} {:>13.0} {:>5.2}x   {:.1} / {:.1} / {:.1} / {:.1}",
            tps(0),
            tps(1),
            ratio(1),
            tps(2),
            tps(3),
            ratio(3),
            waits(0),
            waits(1),
            waits(2),
            waits(3),
        );
    }
    if !unmarked.is_empty() {
        println!(
            "  at {unmarked:?} clients a 5.6.10 copy never took its slow path (its marks were not reached within \
             the point): its 8/1 there shows no convoy; a smaller --log-capacity or a longer --time reaches them"
        );
    }
    if !untold.is_empty() {
        println!(
            "  at {untold:?} clients the story did not show: the engine's 8/1 below 0.95x or the copy's above 0.7x"
        );
    }
}

/// One point in the JSON output.
#[derive(serde::Serialize)]
struct PointJson<'a> {
    system: &'a str,
    threads: usize,
    round: usize,
    transactions: u64,
    tps: f64,
    p95_us: u64,
    p99_us: u64,
    /// The page store's counters over the point.
    engine: Option<EngineJson>,
    /// The log's counters over the point (`Metrics::counters`).
    log: std::collections::BTreeMap<&'a str, u64>,
}

/// [`EngineStats`] over a point, for the JSON output.
#[derive(serde::Serialize)]
struct EngineJson {
    free_check_waits: u64,
    free_check_wait_us: u64,
    free_check_slow_paths: u64,
    page_latch_waits: u64,
    page_latch_wait_us: u64,
    index_lock_waits: u64,
    index_lock_wait_us: u64,
    pages_flushed: u64,
    lru_pages_flushed: u64,
    pages_dirtied: u64,
    checkpoints: u64,
    checkpoint_age: u64,
    log_bytes: u64,
    background_prioritized: bool,
}

impl From<&EngineStats> for EngineJson {
    fn from(stats: &EngineStats) -> EngineJson {
        EngineJson {
            free_check_waits: stats.free_check_waits,
            free_check_wait_us: stats.free_check_wait_us,
            free_check_slow_paths: stats.free_check_slow_paths,
            page_latch_waits: stats.page_latch.waits,
            page_latch_wait_us: stats.page_latch.wait_us,
            index_lock_waits: stats.index_lock.waits,
            index_lock_wait_us: stats.index_lock.wait_us,
            pages_flushed: stats.pages_flushed,
            lru_pages_flushed: stats.lru_pages_flushed,
            pages_dirtied: stats.pages_dirtied,
            checkpoints: stats.checkpoints,
            checkpoint_age: stats.checkpoint_age,
            log_bytes: stats.log_end,
            background_prioritized: stats.background_prioritized,
        }
    }
}

/// `--json FILE` and `--plot FILE.svg` for the `oltp_*` runs: every point
/// with its counters, and tps and p99 latency against clients, one line per
/// system (medians over rounds).
fn write_outputs(options: &OltpOptions, scenario: Option<&str>, points: &[Point]) -> Result<(), BoxError> {
    if let Some(path) = &options.run.json {
        let json = serde_json::json!({
            "workload": options.workload.name(),
            "scenario": scenario,
            "device": options.run.device.to_string(),
            "tables": options.tables,
            "table_size": options.table_size,
            "flush_log_at_trx_commit": options.flush_log_at_trx_commit,
            "buffer_pool_instances": options.buffer_pool_instances,
            "buffer_pool_bytes": options.buffer_pool_bytes,
            "io_capacity": options.io_capacity,
            "log_capacity": options.log_capacity,
            "seconds": options.run.seconds,
            "points": points
                .iter()
                .map(|point| PointJson {
                    system: point.system,
                    threads: point.threads,
                    round: point.round,
                    transactions: point.transactions,
                    tps: point.tps,
                    p95_us: point.p95_us,
                    p99_us: point.p99_us,
                    engine: point.engine.as_ref().map(EngineJson::from),
                    log: point.log_counters.iter().map(|(name, value)| (name.as_str(), *value)).collect(),
                })
                .collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &options.run.plot {
        let mut lines: Vec<Line> = Vec::new();
        for point in points {
            if lines.iter().any(|line| line.system == point.system) {
                continue;
            }
            let mut threads: Vec<usize> =
                points.iter().filter(|other| other.system == point.system).map(|other| other.threads).collect();
            threads.sort_unstable();
            threads.dedup();
            let line_points = threads
                .into_iter()
                .map(|threads| LinePoint {
                    threads,
                    commits_per_sec: median_tps(points, point.system, threads),
                    p99_us: median(points_of(points, point.system, threads).map(|p| p.p99_us as f64).collect()) as u64,
                })
                .collect();
            lines.push(Line { system: point.system, points: line_points });
        }
        let title = format!(
            "{}{}, {} x {} rows, flush_log_at_trx_commit={}, device {}",
            options.workload.name(),
            scenario.map_or(String::new(), |scenario| format!(" ({scenario})")),
            options.tables,
            options.table_size,
            options.flush_log_at_trx_commit,
            options.run.device
        );
        for written in crate::harness::plot::draw_lines(&title, &lines, path)? {
            println!("wrote {}", written.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's own CPU time.
    fn thread_cpu() -> Duration {
        let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
    }

    #[test]
    fn a_point_without_interval_lines_sleeps_through_its_time() {
        for report_interval in [0, 1] {
            let (cpu, started) = (thread_cpu(), Instant::now());
            report(&[], 1, (report_interval, 1.6), started);
            let (cpu, wall) = (thread_cpu() - cpu, started.elapsed());
            assert!(
                wall >= Duration::from_millis(1600),
                "--report-interval {report_interval}: returned after {wall:?}"
            );
            // The loop that waited for a line it would never print spun
            // 0.6 s of this 1.6 s point.
            assert!(
                cpu < Duration::from_millis(100),
                "--report-interval {report_interval}: {cpu:?} of CPU in {wall:?}"
            );
        }
    }
}
