//! The log's metrics through the [`metrics`] facade (cargo feature `metrics`),
//! for Prometheus or any other monitoring system with a `metrics` recorder.
//!
//! Nothing here costs anything until the application installs a recorder, and
//! the hot paths never touch the facade's registry:
//!
//! - **Counters and gauges** are published when the application asks:
//!   [`Log::publish_metrics`](crate::Log::publish_metrics) (or [`Metrics::publish`] with labels of its
//!   own) reads the log's own sharded counters once and sets each facade
//!   counter to its absolute value. Call it before each scrape, or every
//!   second from a thread of yours.
//! - **Histograms** (`redolog_commit_wait_seconds`, `redolog_fsync_seconds`)
//!   are recorded per event through a handle taken when the log is opened: a
//!   recorder installed after [`Log::open`](crate::Log::open) does not see them, so install it
//!   first.
//!
//! Names are InnoDB's INNODB_METRICS `log` names with the prefix `redolog_`;
//! counters end in `_total`, as Prometheus expects, and the µs counters in
//! `_microseconds_total`. pg_stat_wal's totals map onto them: `wal_records` is
//! `redolog_log_records_total`, `wal_write` `redolog_log_writes_total`,
//! `wal_sync` `redolog_log_fsyncs_total`, `wal_write_time`
//! `redolog_log_write_time_microseconds_total`, `wal_sync_time`
//! `redolog_log_fsync_time_microseconds_total`, `wal_buffers_full`
//! `redolog_log_on_buffer_space_waits_total`, and `wal_bytes` the growth of
//! the gauge `redolog_log_lsn_current`. Every series carries the label `log`,
//! the log's directory.
//!
//! ```
//! use redolog::{Config, Durability, Log};
//! let dir = tempfile::tempdir().unwrap();
//! // An application installs its recorder first, e.g.
//! // metrics_exporter_prometheus::PrometheusBuilder::new().install()
//! redolog::export::describe();
//! let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
//! log.commit(b"x", Durability::Synced).unwrap();
//! log.publish_metrics(); // sets redolog_log_fsyncs_total{log="..."} and the rest
//! ```

use ::metrics::{Label, Unit};

use crate::metrics::{SITE_PREFIXES, TRIAD};
use crate::Metrics;

/// Prefix of every name.
const PREFIX: &str = "redolog_";

/// Registers each metric's unit and description with the installed recorder
/// (Prometheus prints them as `# HELP` lines). Call once, after installing it.
pub fn describe() {
    ::metrics::describe_histogram!(
        "redolog_commit_wait_seconds",
        Unit::Seconds,
        "Time commit/wait spent waiting for Written or Synced"
    );
    ::metrics::describe_histogram!("redolog_fsync_seconds", Unit::Seconds, "Duration of each fdatasync of a log file");
    for (name, about) in ABOUT {
        let full = format!("{PREFIX}{name}");
        if name.starts_with("log_lsn_") || name.starts_with("cpu_") || *name == "async_waiters" {
            ::metrics::describe_gauge!(full, *about);
        } else if let Some(stem) = name.strip_suffix("_us") {
            ::metrics::describe_counter!(format!("{PREFIX}{stem}_microseconds_total"), Unit::Microseconds, *about);
        } else {
            ::metrics::describe_counter!(format!("{full}_total"), *about);
        }
    }
    for site in SITE_PREFIXES {
        for (field, about) in TRIAD {
            let name = match field.strip_suffix("_us") {
                Some(stem) => format!("{PREFIX}{site}{stem}_microseconds_total"),
                None => format!("{PREFIX}{site}{field}_total"),
            };
            ::metrics::describe_counter!(name, format!("{site}: {about}"));
        }
    }
}

/// What each name counts (the triads' sites share theirs).
const ABOUT: &[(&str, &str)] = &[
    ("log_lsn_current", "End of everything appended"),
    ("log_lsn_ready", "End of the completely copied prefix"),
    ("log_lsn_last_write", "End of what was written to the OS"),
    ("log_lsn_last_flush", "End of what was synced"),
    ("log_lsn_last_checkpoint", "The last checkpoint's LSN"),
    ("log_lsn_checkpoint_age", "Bytes of log between the checkpoint and the end"),
    ("log_write_requests", "Calls of wait or commit with Written or Synced"),
    ("log_writes", "Write calls to the OS"),
    ("log_bytes_written", "Bytes handed to the OS, whole blocks"),
    ("log_fsyncs", "fdatasync calls on log files"),
    ("log_groups", "Groups (mini-transactions) appended"),
    ("log_records", "Records appended"),
    ("log_checkpoints", "Checkpoints written"),
    ("log_write_time_us", "Time spent in write calls to the OS"),
    ("log_fsync_time_us", "Time spent in fdatasync of log files"),
    ("log_pipeline_switches", "Times the active pipeline changed"),
    ("async_waiters", "Futures and callbacks waiting for a write or sync now"),
    ("cpu_usable", "CPUs the process can use: affinity mask and cgroup quota"),
    ("cpu_busy_pct", "The process's CPU use over the last 100 ms, in percent of cpu_usable"),
];

impl Metrics {
    /// Publishes this snapshot through the `metrics` facade: every counter of
    /// [`Metrics::counters`] at its absolute value and the levels as gauges,
    /// each with `labels` (see [`crate::export`] for the names). A no-op
    /// unless a recorder is installed.
    ///
    /// ```
    /// use redolog::{Config, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
    /// log.metrics().publish(&[("log", "orders"), ("shard", "3")]);
    /// ```
    pub fn publish(&self, labels: &[(&'static str, &str)]) {
        let labels: Vec<Label> = labels.iter().map(|(key, value)| Label::new(*key, value.to_string())).collect();
        for (name, value) in self.counters() {
            if name.starts_with("log_lsn_") {
                ::metrics::gauge!(format!("{PREFIX}{name}"), labels.clone()).set(value as f64);
            } else if let Some(stem) = name.strip_suffix("_us") {
                ::metrics::counter!(format!("{PREFIX}{stem}_microseconds_total"), labels.clone()).absolute(value);
            } else {
                ::metrics::counter!(format!("{PREFIX}{name}_total"), labels.clone()).absolute(value);
            }
        }
        ::metrics::gauge!("redolog_async_waiters", labels.clone()).set(self.async_waiters as f64);
        ::metrics::gauge!("redolog_cpu_usable", labels.clone()).set(self.cpu_usable);
        ::metrics::gauge!("redolog_cpu_busy_pct", labels).set(self.cpu_busy_pct as f64);
    }
}
