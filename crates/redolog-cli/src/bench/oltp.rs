//! `redolog bench --workload oltp_*`: sysbench's write workloads on the page
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
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use redolog_pagestore::{EngineStats, Options, Outcome, PageStore, Row, C_BYTES, PAD_BYTES};

use super::runner::new_histogram;
use super::{BenchOptions, BoxError, WorkloadArg};

/// A small xorshift generator per client: sysbench's uniform distribution.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn row(&mut self, id: u64, table_size: u64) -> Row {
        let c = b'0' + (self.below(10) as u8);
        Row { id, k: self.below(table_size), c: [c; C_BYTES], pad: [b'p'; PAD_BYTES] }
    }
}

/// One client's counts: transactions, and latencies this interval and in all.
struct Client {
    transactions: u64,
    interval: Histogram<u64>,
    total: Histogram<u64>,
}

/// The store's options from the command line.
fn store_options(options: &BenchOptions) -> Options {
    Options {
        buffer_pool_instances: options.buffer_pool_instances,
        buffer_pool_bytes: options.buffer_pool_bytes,
        io_capacity: options.io_capacity,
        log: redolog::Config { capacity_bytes: options.log_capacity, ..redolog::Config::default() },
    }
}

/// sysbench's `prepare`: every table filled with `--table-size` rows, the
/// tables loaded in parallel, the commits not waited for until the end.
fn prepare(store: &mut PageStore, options: &BenchOptions) -> Result<(), BoxError> {
    while store.tables() < options.tables {
        store.create_table()?;
    }
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), BoxError> {
        let loaders: Vec<_> = (0..options.tables)
            .map(|table| {
                let store = &*store;
                scope.spawn(move || -> Result<(), redolog_pagestore::Error> {
                    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ table as u64);
                    for id in 0..options.table_size {
                        store.table(table).insert(store, &random.row(id, options.table_size))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for loader in loaders {
            loader.join().map_err(|_| "a loader panicked")??;
        }
        Ok(())
    })?;
    store.log().wait(store.log().end_lsn(), redolog::Durability::Synced)?;
    println!(
        "prepared {} tables of {} rows in {:.1} s",
        options.tables,
        options.table_size,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One statement of a transaction, its random choices made: every system
/// runs the same statements.
#[derive(Clone, Debug)]
pub enum Statement {
    /// INSERT of a new row.
    Insert { table: usize, row: Row },
    /// `UPDATE … SET c = ? WHERE id = ?`.
    UpdateC { table: usize, id: u64, c: [u8; C_BYTES] },
    /// `UPDATE … SET k = k + 1 WHERE id = ?`.
    IncrementK { table: usize, id: u64 },
    /// `DELETE … WHERE id = ?`.
    Delete { table: usize, id: u64 },
}

/// The statements of one transaction of `workload`.
fn transaction(
    workload: WorkloadArg,
    random: &mut Random,
    options: &BenchOptions,
    next_insert: &mut u64,
) -> Vec<Statement> {
    let table = random.below(options.tables as u64) as usize;
    let id = random.below(options.table_size);
    let c = |random: &mut Random| [b'a' + random.below(26) as u8; C_BYTES];
    match workload {
        WorkloadArg::OltpInsert => {
            *next_insert += 1;
            vec![Statement::Insert { table, row: random.row(*next_insert, options.table_size) }]
        }
        WorkloadArg::OltpUpdateIndex => vec![Statement::IncrementK { table, id }],
        WorkloadArg::OltpUpdateNonIndex => vec![Statement::UpdateC { table, id, c: c(random) }],
        _ => vec![
            Statement::IncrementK { table, id: random.below(options.table_size) },
            Statement::UpdateC { table, id: random.below(options.table_size), c: c(random) },
            Statement::Delete { table, id },
            Statement::Insert { table, row: random.row(id, options.table_size) },
        ],
    }
}

/// A system the workloads run on: the page store, or a peer that stores
/// the same rows with the same durability.
pub trait OltpSystem: Sync {
    /// Its name in the tables.
    fn name(&self) -> &'static str;
    /// sysbench's `prepare`: every table filled with `--table-size` rows.
    fn prepare(&mut self, options: &BenchOptions) -> Result<(), BoxError>;
    /// Runs one transaction's statements and its commit wait
    /// (`flush_log_at_trx_commit`).
    fn run(&self, statements: &[Statement], flush_log_at_trx_commit: u8) -> Result<(), BoxError>;
    /// The engine's counters, for the page store.
    fn engine_stats(&self) -> Option<EngineStats> {
        None
    }
}

/// The page store as an [`OltpSystem`].
pub struct PageStoreSystem(PageStore);

impl OltpSystem for PageStoreSystem {
    fn name(&self) -> &'static str {
        "pagestore"
    }

    fn prepare(&mut self, options: &BenchOptions) -> Result<(), BoxError> {
        prepare(&mut self.0, options)
    }

    fn run(&self, statements: &[Statement], flush_log_at_trx_commit: u8) -> Result<(), BoxError> {
        let store = &self.0;
        let mut end = None;
        for statement in statements {
            let (_, last): (Outcome, _) = match statement {
                Statement::Insert { table, row } => store.table(*table).insert(store, row)?,
                Statement::UpdateC { table, id, c } => store.table(*table).update_c(store, *id, c)?,
                Statement::IncrementK { table, id } => store.table(*table).increment_k(store, *id)?,
                Statement::Delete { table, id } => store.table(*table).delete(store, *id)?,
            };
            end = last.or(end);
        }
        Ok(store.commit_wait(end, flush_log_at_trx_commit)?)
    }

    fn engine_stats(&self) -> Option<EngineStats> {
        Some(self.0.stats())
    }
}

/// Runs `threads` clients for `--time` seconds; prints interval lines and
/// the summary.
fn run_point(
    system: &dyn OltpSystem,
    workload: WorkloadArg,
    threads: usize,
    options: &BenchOptions,
) -> Result<f64, BoxError> {
    let clients: Vec<Mutex<Client>> = (0..threads)
        .map(|_| Mutex::new(Client { transactions: 0, interval: new_histogram(), total: new_histogram() }))
        .collect();
    let stop = AtomicBool::new(false);
    let failed = AtomicU64::new(0);
    let before = system.engine_stats();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (number, client) in clients.iter().enumerate() {
            let (stop, failed) = (&stop, &failed);
            scope.spawn(move || {
                let mut random = Random(0xD1B5_4A32_D192_ED03 ^ ((number as u64 + 1) * 0x9E37_79B9));
                // Inserted ids: past every loaded one, unique per client.
                let mut next_insert = options.table_size + ((number as u64) << 40);
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
        report(&clients, threads, options, started);
        stop.store(true, Ordering::Relaxed);
    });
    Ok(summary(system, before.as_ref(), &clients, started.elapsed(), failed.load(Ordering::Relaxed)))
}

/// sysbench's interval lines, until `--time` is over.
fn report(clients: &[Mutex<Client>], threads: usize, options: &BenchOptions, started: Instant) {
    let interval = Duration::from_secs(options.report_interval.max(1));
    let mut seen = 0;
    let mut next = started + interval;
    while started.elapsed().as_secs_f64() < options.seconds {
        let end = (started + Duration::from_secs_f64(options.seconds)).min(next);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        if options.report_interval == 0 || Instant::now() < next {
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
/// longest wait: since the store opened).
fn summary(
    system: &dyn OltpSystem,
    before: Option<&EngineStats>,
    clients: &[Mutex<Client>],
    elapsed: Duration,
    failed: u64,
) -> f64 {
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
    let tps = transactions as f64 / elapsed.as_secs_f64();
    let (Some(stats), Some(before)) = (system.engine_stats(), before) else { return tps };
    println!(
        "engine: free check waits {} ({:.2} ms total, {:.2} ms max), pages flushed {}, checkpoints {}, checkpoint age {} KiB",
        stats.free_check_waits - before.free_check_waits,
        ms(stats.free_check_wait_us - before.free_check_wait_us),
        ms(stats.free_check_wait_us_max),
        stats.pages_flushed - before.pages_flushed,
        stats.checkpoints - before.checkpoints,
        stats.checkpoint_age >> 10
    );
    tps
}

/// The systems of this build: the page store, and with `--features peers`
/// RocksDB, each in its own directory under `workdir`.
fn systems(workdir: &Path, options: &BenchOptions) -> Result<Vec<Box<dyn OltpSystem>>, BoxError> {
    let (store, _) = PageStore::open(workdir.join("pagestore"), store_options(options))?;
    #[allow(unused_mut)] // with --features peers
    let mut systems: Vec<Box<dyn OltpSystem>> = vec![Box::new(PageStoreSystem(store))];
    #[cfg(feature = "peers")]
    systems.push(Box::new(super::oltp_rocksdb::RocksDbOltp::open(&workdir.join("rocksdb"), options.tables)?));
    Ok(systems)
}

/// Runs an `oltp_*` workload at each `--threads` count on every system, the
/// systems' order alternating from one count to the next; prints sysbench's
/// lines per point and a table of transactions per second at the end.
pub fn run(options: &BenchOptions) -> Result<(), BoxError> {
    if let Some(flag) = super::log_only_flag(options) {
        return Err(format!("{flag} does not apply to --workload {}", options.workload.name()).into());
    }
    let workdir = options.device.work_dir(options.dir.as_deref(), "redolog-bench-oltp-")?;
    println!(
        "redolog bench --workload {}: device {}, {} tables of {} rows, page store: {} buffer pool instance(s) of \
         {} MiB in all, flush_log_at_trx_commit={}",
        options.workload.name(),
        options.device,
        options.tables,
        options.table_size,
        options.buffer_pool_instances,
        options.buffer_pool_bytes >> 20,
        options.flush_log_at_trx_commit
    );
    let mut systems = systems(workdir.path(), options)?;
    for system in &mut systems {
        let started = Instant::now();
        system.prepare(options)?;
        println!("{}: prepared in {:.1} s", system.name(), started.elapsed().as_secs_f64());
    }
    let mut results: Vec<(usize, &'static str, f64)> = Vec::new();
    for (point, &threads) in options.threads.iter().enumerate() {
        let mut order: Vec<&dyn OltpSystem> = systems.iter().map(|system| &**system).collect();
        if point % 2 == 1 {
            order.reverse();
        }
        for system in order {
            println!("\n{} threads: {threads}", system.name());
            results.push((threads, system.name(), run_point(system, options.workload, threads, options)?));
        }
    }
    println!("\n{:<10} {:>8} {:>12}", "system", "threads", "tps");
    for (threads, name, tps) in results {
        println!("{name:<10} {threads:>8} {tps:>12.0}");
    }
    Ok(())
}
