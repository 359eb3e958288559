//! Counters and latency histograms, named and shaped like InnoDB's INNODB_METRICS
//! `log` module (the blog post "MySQL 8.0 redo log write performance analysis"
//! diagnoses with them).
//!
//! Hot counters are sharded over cache-padded atomics (a thread always adds to the
//! same shard), so 64 committing threads do not bounce one cache line.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use parking_lot::Mutex;

use crate::wait::Waited;

/// Shards per counter: enough that 64 committing threads rarely share one.
const SHARDS: usize = 64;

fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

/// A monotonic counter. Relaxed: statistics only, never used to synchronise.
pub(crate) struct Counter {
    shards: Box<[CachePadded<AtomicU64>; SHARDS]>,
}

impl Default for Counter {
    fn default() -> Self {
        Counter { shards: Box::new(std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0)))) }
    }
}

impl Counter {
    pub(crate) fn add(&self, value: u64) {
        if value > 0 {
            self.shards[shard()].fetch_add(value, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        self.shards.iter().map(|shard| shard.load(Ordering::Relaxed)).sum()
    }
}

/// A counter only one thread at a time adds to: the holder of the write role,
/// or of the sync role. A plain load and store, no read-modify-write: callgrind
/// put a sharded `Counter` on the commit path at 30–90 instructions a pass.
#[derive(Default)]
pub(crate) struct RoleCounter(AtomicU64);

impl RoleCounter {
    /// Adds `value`. The caller holds the role that owns this counter.
    pub(crate) fn add_as_sole_writer(&self, value: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(value), Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The counters of one wait site.
#[derive(Default)]
pub(crate) struct WaitCounters {
    no_waits: Counter,
    waits: Counter,
    wait_loops: Counter,
    spin_rounds: Counter,
    spin_ns: Counter,
    timeouts: Counter,
    timeouts_with_work: Counter,
}

impl WaitCounters {
    /// Records one visit of the wait site: `waited` sums what its loop cost;
    /// `false` for `had_to_wait` means the condition held on arrival.
    pub(crate) fn record(&self, had_to_wait: bool, waited: Waited) {
        if had_to_wait {
            self.waits.add(1);
        } else {
            self.no_waits.add(1);
        }
        self.wait_loops.add(waited.parks);
        self.spin_rounds.add(waited.spins);
        self.spin_ns.add(waited.spin_ns);
        self.timeouts.add(waited.timeouts);
        self.timeouts_with_work.add(waited.timeouts_with_work);
    }

    fn snapshot(&self) -> WaitStats {
        self.snapshot_with_no_waits(self.no_waits.get())
    }

    /// For the append path's sites, which count only visits that waited: every
    /// chunk appended visits them once, so `no_waits = visits − waits`.
    fn snapshot_of_visits(&self, visits: u64) -> WaitStats {
        self.snapshot_with_no_waits(visits.saturating_sub(self.waits.get()))
    }

    fn snapshot_with_no_waits(&self, no_waits: u64) -> WaitStats {
        WaitStats {
            no_waits,
            waits: self.waits.get(),
            wait_loops: self.wait_loops.get(),
            spin_rounds: self.spin_rounds.get(),
            spin_us: self.spin_ns.get() / 1000,
            timeouts: self.timeouts.get(),
            timeouts_with_work: self.timeouts_with_work.get(),
        }
    }
}

/// Microsecond latencies from 1 µs to 100 s at 2 significant digits.
fn new_histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)] // constant bounds, valid (every snapshot test builds one)
    Histogram::new_with_bounds(1, 100_000_000, 2).expect("constant histogram bounds are valid")
}

/// Histogram shards: each is a few KiB, and a recording holds its lock briefly.
const HISTOGRAM_SHARDS: usize = 16;

/// A latency histogram sharded like `Counter`.
pub(crate) struct LatencyRecorder {
    shards: Box<[CachePadded<Mutex<Histogram<u64>>>]>,
    /// The same values, in seconds, to the `metrics` facade's histogram of
    /// this name (a no-op handle unless a recorder was installed before open).
    #[cfg(feature = "metrics")]
    facade: ::metrics::Histogram,
}

impl LatencyRecorder {
    fn new(#[cfg_attr(not(feature = "metrics"), allow(unused_variables))] facade: (&'static str, &str)) -> Self {
        LatencyRecorder {
            shards: (0..HISTOGRAM_SHARDS).map(|_| CachePadded::new(Mutex::new(new_histogram()))).collect(),
            #[cfg(feature = "metrics")]
            facade: ::metrics::histogram!(facade.0, "log" => facade.1.to_string()),
        }
    }

    pub(crate) fn record_us(&self, micros: u64) {
        self.shards[shard() % self.shards.len()].lock().saturating_record(micros.max(1));
        #[cfg(feature = "metrics")]
        self.facade.record(micros as f64 / 1e6);
    }

    fn snapshot(&self) -> LatencySummary {
        let mut merged = new_histogram();
        for shard in self.shards.iter() {
            // Same bounds on every shard, so `add` cannot fail.
            let _ = merged.add(&*shard.lock());
        }
        LatencySummary::of(&merged)
    }
}

/// A latency distribution, summarised: how many, the mean, the percentiles a
/// storage engineer reads, and the worst. Microseconds, at two significant
/// digits (the recording's precision); all zero when nothing was recorded.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// log.commit(b"x", Durability::Synced).unwrap();
/// let fsyncs = log.metrics().fsync_us;
/// assert!(fsyncs.count >= 1);
/// assert!(fsyncs.p50_us <= fsyncs.p99_us && fsyncs.p99_us <= fsyncs.max_us);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Their mean, in µs.
    pub mean_us: f64,
    /// The median, in µs.
    pub p50_us: u64,
    /// The 90th percentile, in µs.
    pub p90_us: u64,
    /// The 99th percentile, in µs.
    pub p99_us: u64,
    /// The 99.9th percentile, in µs.
    pub p999_us: u64,
    /// The largest value, in µs.
    pub max_us: u64,
}

impl LatencySummary {
    fn of(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: histogram.len(),
            mean_us: histogram.mean(),
            p50_us: histogram.value_at_quantile(0.5),
            p90_us: histogram.value_at_quantile(0.9),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
        }
    }
}

/// The live metrics of a log.
pub(crate) struct MetricsRecorder {
    pub(crate) on_write: WaitCounters,
    pub(crate) on_flush: WaitCounters,
    pub(crate) on_buffer_space: WaitCounters,
    pub(crate) on_file_space: WaitCounters,
    pub(crate) on_consumer: WaitCounters,
    pub(crate) on_recent_written: WaitCounters,
    pub(crate) on_recent_closed: WaitCounters,
    pub(crate) on_ready: WaitCounters,
    pub(crate) log_writer: WaitCounters,
    pub(crate) log_flusher: WaitCounters,
    pub(crate) write_requests: Counter,
    /// Total time `wait` spent waiting, in ns: by Little's law, divided by the
    /// elapsed time it is the mean number of waiting committers (auto.rs).
    pub(crate) commit_wait_ns: Counter,
    /// The part of `commit_wait_ns` spent waiting for `Durability::Synced`.
    pub(crate) commit_sync_wait_ns: Counter,
    pub(crate) pipeline_switches: Counter,
    pub(crate) writes: Counter,
    pub(crate) bytes_written: Counter,
    pub(crate) fsyncs: Counter,
    pub(crate) groups: Counter,
    /// Groups without records; with `records_beyond_one` and `groups` it gives
    /// `log_records` without a counter update per record.
    pub(crate) empty_groups: Counter,
    pub(crate) records_beyond_one: Counter,
    /// Chunks after the first of groups larger than half the ring.
    pub(crate) extra_chunks: Counter,
    pub(crate) checkpoints: Counter,
    /// Times the writer found the log full (INV-44).
    pub(crate) log_full_episodes: Counter,
    /// `Error::LogFull`s given (`Config::log_full_timeout`).
    pub(crate) log_full_refusals: Counter,
    /// Times the checkpoint age passed the checkpoint-wanted level (§1.8).
    pub(crate) checkpoint_wanted_episodes: Counter,
    /// Time spent in fdatasync, in ns (pg_stat_wal's `wal_sync_time`): the
    /// sync role's.
    pub(crate) fsync_ns: RoleCounter,
    pub(crate) commit_wait_us: LatencyRecorder,
    pub(crate) fsync_us: LatencyRecorder,
}

impl MetricsRecorder {
    /// `log` names the log in the `metrics` facade's histograms (its directory).
    pub(crate) fn new(log: &str) -> Self {
        MetricsRecorder {
            on_write: WaitCounters::default(),
            on_flush: WaitCounters::default(),
            on_buffer_space: WaitCounters::default(),
            on_file_space: WaitCounters::default(),
            on_consumer: WaitCounters::default(),
            on_recent_written: WaitCounters::default(),
            on_recent_closed: WaitCounters::default(),
            on_ready: WaitCounters::default(),
            log_writer: WaitCounters::default(),
            log_flusher: WaitCounters::default(),
            write_requests: Counter::default(),
            commit_wait_ns: Counter::default(),
            commit_sync_wait_ns: Counter::default(),
            pipeline_switches: Counter::default(),
            writes: Counter::default(),
            bytes_written: Counter::default(),
            fsyncs: Counter::default(),
            groups: Counter::default(),
            empty_groups: Counter::default(),
            records_beyond_one: Counter::default(),
            extra_chunks: Counter::default(),
            checkpoints: Counter::default(),
            log_full_episodes: Counter::default(),
            log_full_refusals: Counter::default(),
            checkpoint_wanted_episodes: Counter::default(),
            fsync_ns: RoleCounter::default(),
            commit_wait_us: LatencyRecorder::new(("redolog_commit_wait_seconds", log)),
            fsync_us: LatencyRecorder::new(("redolog_fsync_seconds", log)),
        }
    }

    pub(crate) fn snapshot(&self, lsns: LsnLevels) -> Metrics {
        // Read the visit counts first: a visit is counted (as a group) after its
        // waits, so the derived `no_waits` never goes below zero.
        let groups = self.groups.get();
        let chunks = groups + self.extra_chunks.get();
        let records = (groups + self.records_beyond_one.get()).saturating_sub(self.empty_groups.get());
        Metrics {
            lsns,
            log_write_requests: self.write_requests.get(),
            log_writes: self.writes.get(),
            log_bytes_written: self.bytes_written.get(),
            log_fsyncs: self.fsyncs.get(),
            log_groups: groups,
            log_records: records,
            log_checkpoints: self.checkpoints.get(),
            log_full_episodes: self.log_full_episodes.get(),
            log_full_refusals: self.log_full_refusals.get(),
            log_checkpoint_wanted_episodes: self.checkpoint_wanted_episodes.get(),
            // The write passes' own timing (`PassTime`): set by `Core::metrics`.
            log_write_time_us: 0,
            log_fsync_time_us: self.fsync_ns.get() / 1000,
            log_on_write: self.on_write.snapshot(),
            log_on_flush: self.on_flush.snapshot(),
            log_on_buffer_space: self.on_buffer_space.snapshot_of_visits(chunks),
            log_on_file_space: self.on_file_space.snapshot(),
            log_on_consumer: self.on_consumer.snapshot(),
            log_on_recent_written: self.on_recent_written.snapshot_of_visits(chunks),
            log_on_recent_closed: self.on_recent_closed.snapshot_of_visits(groups),
            log_on_ready: self.on_ready.snapshot(),
            log_writer: self.log_writer.snapshot(),
            log_flusher: self.log_flusher.snapshot(),
            log_pipeline_switches: self.pipeline_switches.get(),
            pipeline: crate::Pipeline::GroupCommit,
            pipeline_reason: "",
            cpu_usable: 0.0,
            async_waiters: 0,
            cpu_busy_pct: 0,
            commit_wait_us: self.commit_wait_us.snapshot(),
            fsync_us: self.fsync_us.snapshot(),
        }
    }
}

/// The INNODB_METRICS prefix of each wait site.
pub(crate) const SITE_PREFIXES: [&str; 10] = [
    "log_on_write_",
    "log_on_flush_",
    "log_on_buffer_space_",
    "log_on_file_space_",
    "log_on_consumer_",
    "log_on_recent_written_",
    "log_on_recent_closed_",
    "log_on_ready_",
    "log_writer_",
    "log_flusher_",
];

/// The counters of a wait site, in [`WaitStats`]' field order, with what each counts.
pub(crate) const TRIAD: [(&str, &str); 7] = [
    ("no_waits", "visits that found the condition already true"),
    ("waits", "visits that had to wait"),
    ("wait_loops", "times a waiting thread parked"),
    ("spin_rounds", "predicate checks while spinning before parking"),
    ("spin_us", "time spent spinning before parking"),
    ("timeouts", "parks ended by the safety-net timeout"),
    ("timeouts_with_work", "timeouts that found the condition true (lost wake-ups; 0 unless a bug)"),
];

/// The counters of one wait site: InnoDB's `<site>_no_waits / _waits / _wait_loops`
/// triad, plus the cost of spinning and the safety-net timeouts.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// # let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// log.commit(b"x", Durability::Synced).unwrap();
/// let stats = log.metrics().log_on_recent_closed; // one visit per group
/// assert_eq!(stats.no_waits + stats.waits, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitStats {
    /// Visits that found the condition already true.
    pub no_waits: u64,
    /// Visits that had to wait.
    pub waits: u64,
    /// Times a waiting thread parked (went to sleep).
    pub wait_loops: u64,
    /// Predicate checks made while spinning before parking.
    pub spin_rounds: u64,
    /// Time spent spinning before parking, in µs.
    pub spin_us: u64,
    /// Parks that ended by the safety-net timeout.
    pub timeouts: u64,
    /// Timeouts that found the condition already true: lost wake-ups. Always 0
    /// unless there is a bug.
    pub timeouts_with_work: u64,
}

/// The LSN levels of InnoDB's `log_lsn_*` metrics.
///
/// ```
/// use redolog::LsnLevels;
/// let levels = LsnLevels::default();
/// assert_eq!(levels.log_lsn_checkpoint_age(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LsnLevels {
    /// End of everything appended (`log_lsn_current`).
    pub log_lsn_current: u64,
    /// End of the completely copied prefix (`ready_lsn`).
    pub log_lsn_ready: u64,
    /// End of what was written to the OS.
    pub log_lsn_last_write: u64,
    /// End of what was synced (`log_lsn_last_flush`).
    pub log_lsn_last_flush: u64,
    /// The last checkpoint (`log_lsn_last_checkpoint`).
    pub log_lsn_last_checkpoint: u64,
}

impl LsnLevels {
    /// Bytes of log between the checkpoint and the end (`log_lsn_checkpoint_age`).
    pub fn log_lsn_checkpoint_age(&self) -> u64 {
        self.log_lsn_current.saturating_sub(self.log_lsn_last_checkpoint)
    }
}

/// How much of the log is in use, from [`crate::Log::space`]: what an
/// engine's free check (InnoDB's `log_free_check`) reads to flush pages
/// before the log is full.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// let space = log.space();
/// assert_eq!((space.checkpoint_age(), space.usable_bytes), (0, log.usable_bytes()));
/// assert!(!space.checkpoint_wanted() && space.free_bytes() > 0);
/// while !log.checkpoint_wanted() {
///     log.append(&[7u8; 4000]).unwrap();
/// }
/// let space = log.space();
/// assert!(space.checkpoint_wanted() && space.checkpoint_age() >= space.checkpoint_wanted_age);
/// log.checkpoint(log.end_lsn()).unwrap();
/// assert!(!log.checkpoint_wanted());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogSpace {
    /// The last checkpoint.
    pub checkpoint_lsn: crate::Lsn,
    /// The oldest LSN the log keeps: the checkpoint, or a consumer's
    /// position before it.
    pub oldest_lsn: crate::Lsn,
    /// The end of everything appended.
    pub end_lsn: crate::Lsn,
    /// How far the writer may write before the next checkpoint (or
    /// consumer advance): a lap of the files past `oldest_lsn`.
    pub writable_end_lsn: crate::Lsn,
    /// The bytes the files hold between a checkpoint and the writer's limit
    /// (`Log::usable_bytes`).
    pub usable_bytes: u64,
    /// The checkpoint age past which a checkpoint is wanted: 3/4 of the
    /// usable bytes (the margin an engine's free check flushes at).
    pub checkpoint_wanted_age: u64,
    /// The consumer whose position is `oldest_lsn`, when it is not the
    /// checkpoint.
    pub held_by: Option<String>,
}

impl LogSpace {
    /// Bytes between the checkpoint and the end (`log_lsn_checkpoint_age`).
    pub fn checkpoint_age(&self) -> u64 {
        self.end_lsn.as_u64().saturating_sub(self.checkpoint_lsn.as_u64())
    }

    /// Whether the checkpoint age is at or past `checkpoint_wanted_age`:
    /// flush pages and checkpoint now, before appends wait for it.
    pub fn checkpoint_wanted(&self) -> bool {
        self.checkpoint_age() >= self.checkpoint_wanted_age
    }

    /// Bytes that can still be appended before the writer has to wait for
    /// a checkpoint; 0 when the log is full.
    pub fn free_bytes(&self) -> u64 {
        self.writable_end_lsn.as_u64().saturating_sub(self.end_lsn.as_u64())
    }
}

/// A snapshot of a log's metrics, from `Log::metrics`.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
/// log.commit(b"x", Durability::Synced).unwrap();
/// let metrics = log.metrics();
/// assert_eq!(metrics.log_records, 1);
/// assert!(metrics.log_fsyncs >= 1);
/// assert_eq!(metrics.fsync_us.count, metrics.log_fsyncs);
/// println!("{metrics}");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Metrics {
    /// LSN levels.
    pub lsns: LsnLevels,
    /// Waits for `Written` or `Synced`: calls of `wait` / `commit`, futures
    /// (`wait_async`, `commit_async`) and callbacks (`on_durable`)
    /// (`log_write_requests`).
    pub log_write_requests: u64,
    /// Write calls to the OS (`log_writes`): one `pwritev` per file touched.
    pub log_writes: u64,
    /// Bytes handed to the OS, whole blocks (a partial block counts each time).
    pub log_bytes_written: u64,
    /// fdatasync calls on log files.
    pub log_fsyncs: u64,
    /// Groups appended.
    pub log_groups: u64,
    /// Records appended.
    pub log_records: u64,
    /// Checkpoints written.
    pub log_checkpoints: u64,
    /// Times the writer found the log full: it had written up to the file
    /// limit and waited for a checkpoint (or a consumer) to free space. Each
    /// episode is logged once, with the checkpoint age and the bytes needed
    /// ([DESIGN INV-44](crate::docs::design#2-invariants)).
    pub log_full_episodes: u64,
    /// Appends and waits refused with `Error::LogFull` after
    /// `Config::log_full_timeout`.
    pub log_full_refusals: u64,
    /// Times the checkpoint age passed the checkpoint-wanted level
    /// ([`LogSpace::checkpoint_wanted`]).
    pub log_checkpoint_wanted_episodes: u64,
    /// Time spent in write passes (the write calls to the OS and their
    /// bookkeeping), in µs (pg_stat_wal's `wal_write_time`).
    pub log_write_time_us: u64,
    /// Time spent in fdatasync of log files, in µs (pg_stat_wal's `wal_sync_time`).
    pub log_fsync_time_us: u64,
    /// Waiting for an LSN to be written (`log_on_write_*`).
    pub log_on_write: WaitStats,
    /// Waiting for an LSN to be synced (`log_on_flush_*`).
    pub log_on_flush: WaitStats,
    /// Appenders waiting for free ring space (`log_on_buffer_space_*`).
    pub log_on_buffer_space: WaitStats,
    /// The writer waiting for a checkpoint to free file space (`log_on_file_space_*`).
    pub log_on_file_space: WaitStats,
    /// The writer waiting for a consumer to advance: the log is full up to a
    /// consumer's position (`log_on_consumer_*`; MySQL's
    /// `log_writer_on_archiver_waits`, [DESIGN §1.16](crate::docs::design#116-consumers-readers-that-hold-the-logs-space)).
    pub log_on_consumer: WaitStats,
    /// Appenders waiting for a free link-buffer slot (`log_on_recent_written_*`).
    pub log_on_recent_written: WaitStats,
    /// Groups waiting for space in the closed window (`log_on_recent_closed_*`,
    /// MySQL bug #95390's counter).
    pub log_on_recent_closed: WaitStats,
    /// The writer waiting for appenders to finish copying (`log_on_ready_*`).
    pub log_on_ready: WaitStats,
    /// The dedicated log writer thread waiting for work (`log_writer_*`); a visit
    /// is one write pass or one wait.
    pub log_writer: WaitStats,
    /// The dedicated log flusher thread waiting for work (`log_flusher_*`).
    pub log_flusher: WaitStats,
    /// Times the active pipeline changed (`Auto`, or `Log::set_pipeline`).
    pub log_pipeline_switches: u64,
    /// The pipeline running when the snapshot was taken.
    pub pipeline: crate::Pipeline,
    /// Futures and callbacks waiting for a write or sync now (`wait_async`,
    /// `on_durable`).
    pub async_waiters: u64,
    /// Why the pipeline is what it is: for `Pipeline::Auto`, the condition of
    /// the deciding row of its table, "measuring both pipelines" during a
    /// probe, or the probe's verdict ("measured: …", [DESIGN §1.12](crate::docs::design#112-choosing-the-pipeline-auto)).
    pub pipeline_reason: &'static str,
    /// CPUs the process can use: affinity mask ∧ cgroup quota (`cpu_n`).
    pub cpu_usable: f64,
    /// The process's CPU use over the last 100 ms, in percent of `cpu_usable`.
    pub cpu_busy_pct: u64,
    /// Time waits for Written or Synced took: `wait`/`commit`, and futures
    /// and callbacks from their making to their completion.
    pub commit_wait_us: LatencySummary,
    /// Duration of each fdatasync of a log file.
    pub fsync_us: LatencySummary,
}

impl Metrics {
    /// Records appended per fdatasync.
    pub fn records_per_fsync(&self) -> f64 {
        self.log_records as f64 / self.log_fsyncs.max(1) as f64
    }

    /// Bytes written per fdatasync.
    pub fn bytes_per_fsync(&self) -> f64 {
        self.log_bytes_written as f64 / self.log_fsyncs.max(1) as f64
    }

    /// Every counter as `(name, value)`, named as in INNODB_METRICS.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let mut counters = vec![
            ("log_lsn_current".to_string(), self.lsns.log_lsn_current),
            ("log_lsn_ready".to_string(), self.lsns.log_lsn_ready),
            ("log_lsn_last_write".to_string(), self.lsns.log_lsn_last_write),
            ("log_lsn_last_flush".to_string(), self.lsns.log_lsn_last_flush),
            ("log_lsn_last_checkpoint".to_string(), self.lsns.log_lsn_last_checkpoint),
            ("log_lsn_checkpoint_age".to_string(), self.lsns.log_lsn_checkpoint_age()),
            ("log_write_requests".to_string(), self.log_write_requests),
            ("log_writes".to_string(), self.log_writes),
            ("log_bytes_written".to_string(), self.log_bytes_written),
            ("log_fsyncs".to_string(), self.log_fsyncs),
            ("log_groups".to_string(), self.log_groups),
            ("log_records".to_string(), self.log_records),
            ("log_checkpoints".to_string(), self.log_checkpoints),
            ("log_full_episodes".to_string(), self.log_full_episodes),
            ("log_full_refusals".to_string(), self.log_full_refusals),
            ("log_checkpoint_wanted_episodes".to_string(), self.log_checkpoint_wanted_episodes),
            ("log_write_time_us".to_string(), self.log_write_time_us),
            ("log_fsync_time_us".to_string(), self.log_fsync_time_us),
            ("log_pipeline_switches".to_string(), self.log_pipeline_switches),
        ];
        for (prefix, stats) in SITE_PREFIXES.iter().zip(self.sites()) {
            let values = [
                stats.no_waits,
                stats.waits,
                stats.wait_loops,
                stats.spin_rounds,
                stats.spin_us,
                stats.timeouts,
                stats.timeouts_with_work,
            ];
            for ((field, _), value) in TRIAD.iter().zip(values) {
                counters.push((format!("{prefix}{field}"), value));
            }
        }
        counters
    }

    /// Every wait site, in the order of [`SITE_PREFIXES`].
    fn sites(&self) -> [&WaitStats; 10] {
        [
            &self.log_on_write,
            &self.log_on_flush,
            &self.log_on_buffer_space,
            &self.log_on_file_space,
            &self.log_on_consumer,
            &self.log_on_recent_written,
            &self.log_on_recent_closed,
            &self.log_on_ready,
            &self.log_writer,
            &self.log_flusher,
        ]
    }

    /// Time spent spinning, summed over the wait sites, in µs.
    pub fn spin_us(&self) -> u64 {
        self.sites().iter().map(|stats| stats.spin_us).sum()
    }

    /// Total lost wake-ups over all wait sites (always 0 unless there is a bug).
    pub fn timeouts_with_work(&self) -> u64 {
        self.sites().iter().map(|stats| stats.timeouts_with_work).sum()
    }
}

/// A short report, a few lines, the quiet parts left out: the pipeline and
/// why, the LSNs, the I/O and what it grouped, the two latencies, the wait
/// sites that waited, and anything that needs a look (a full log, a lost
/// wake-up). `{:#}` prints every counter instead, one per line, under its
/// INNODB_METRICS name.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// log.commit(b"counted", Durability::Synced).unwrap();
/// let report = log.metrics().to_string();
/// assert!(report.starts_with("pipeline ") && report.lines().count() < 12, "{report}");
/// assert!(format!("{:#}", log.metrics()).contains("log_fsyncs "));
/// ```
impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            for (name, value) in self.counters() {
                writeln!(f, "{name:<36} {value}")?;
            }
            for (name, summary) in [("commit_wait_us", &self.commit_wait_us), ("fsync_us", &self.fsync_us)] {
                writeln!(f, "{name:<36} {}", Summary(summary))?;
            }
            return Ok(());
        }
        let lsns = &self.lsns;
        writeln!(
            f,
            "pipeline   {:?} ({}), {} switches; {} async waiters; {:.1} CPUs usable, {} % busy",
            self.pipeline,
            if self.pipeline_reason.is_empty() { "set" } else { self.pipeline_reason },
            self.log_pipeline_switches,
            self.async_waiters,
            self.cpu_usable,
            self.cpu_busy_pct
        )?;
        writeln!(
            f,
            "lsn        current {}, written {}, flushed {}, checkpoint {} (age {} bytes)",
            lsns.log_lsn_current,
            lsns.log_lsn_last_write,
            lsns.log_lsn_last_flush,
            lsns.log_lsn_last_checkpoint,
            lsns.log_lsn_checkpoint_age()
        )?;
        writeln!(
            f,
            "io         {} requests, {} writes ({} bytes), {} fsyncs ({:.1} records each), {} groups, {} records, {} checkpoints",
            self.log_write_requests,
            self.log_writes,
            self.log_bytes_written,
            self.log_fsyncs,
            self.records_per_fsync(),
            self.log_groups,
            self.log_records,
            self.log_checkpoints
        )?;
        writeln!(f, "commit µs  {}", Summary(&self.commit_wait_us))?;
        writeln!(f, "fsync µs   {}", Summary(&self.fsync_us))?;
        let waited: Vec<String> = SITE_PREFIXES
            .iter()
            .zip(self.sites())
            .filter(|(_, stats)| stats.waits > 0)
            .map(|(prefix, stats)| {
                let site = prefix.trim_start_matches("log_").trim_end_matches('_');
                format!("{site} {} of {} ({} µs spinning)", stats.waits, stats.waits + stats.no_waits, stats.spin_us)
            })
            .collect();
        if !waited.is_empty() {
            writeln!(f, "waited     {}", waited.join(", "))?;
        }
        if self.log_full_episodes > 0 || self.log_full_refusals > 0 {
            writeln!(
                f,
                "log full   {} episodes, {} appends refused (LogFull); checkpoint wanted {} times",
                self.log_full_episodes, self.log_full_refusals, self.log_checkpoint_wanted_episodes
            )?;
        }
        let lost = self.timeouts_with_work();
        if lost > 0 {
            writeln!(f, "LOST WAKE-UPS {lost}: a wait timed out with its condition true (a bug: please report it)")?;
        }
        Ok(())
    }
}

/// A latency summary on one line.
struct Summary<'a>(&'a LatencySummary);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summary = self.0;
        write!(
            f,
            "count {} p50 {} p99 {} p99.9 {} max {}",
            summary.count, summary.p50_us, summary.p99_us, summary.p999_us, summary.max_us
        )
    }
}
