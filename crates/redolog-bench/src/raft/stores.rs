//! The log stores both raft benchmarks compare, opened by name in one place
//! for each openraft line, and what both measure of a point and print.

use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use openraft::storage::RaftLogStorage;

use super::{openraft010, RaftTypes, RaftTypes010};
use crate::harness::rounds::Measured;
use crate::harness::stats::{median, new_histogram};
use crate::harness::BoxError;

/// The stores of this build, by name.
pub fn names() -> Vec<&'static str> {
    let mut names = vec!["redolog-raft"];
    if cfg!(feature = "peers") {
        names.extend(["rocksdb-raft", "raft-log", "raft-log-nowait"]);
    }
    names
}

/// The stores `chosen` names (every one of this build when empty), or an
/// error naming what this build has.
pub fn chosen(chosen: &[String]) -> Result<Vec<&'static str>, BoxError> {
    let known = names();
    if chosen.is_empty() {
        return Ok(known);
    }
    chosen
        .iter()
        .map(|name| known.iter().copied().find(|known| known == name))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("--stores {}: this build has {}", chosen.join(","), known.join(",")).into())
}

/// What a benchmark does with a store on openraft 0.9, given how to open one
/// in a directory: the one place that knows every store's type is
/// [`with_store`].
pub trait OnStore {
    type Output;
    #[allow(async_fn_in_trait, reason = "used within this binary only, on one runtime")]
    async fn run<S, F>(self, open: F) -> Result<Self::Output, BoxError>
    where
        S: RaftLogStorage<RaftTypes> + Clone,
        F: Fn(&Path) -> Result<S, BoxError>;
}

/// Runs `user` on the store `name`; redolog-raft's log gets `capacity` bytes.
pub async fn with_store<U: OnStore>(name: &str, capacity: u64, user: U) -> Result<U::Output, BoxError> {
    match name {
        "redolog-raft" => {
            let config = redolog::Config::default().with_capacity_bytes(capacity);
            let open =
                |dir: &Path| Ok(redolog_raft::openraft_0_9::RedologLogStore::<RaftTypes>::open(dir, config.clone())?);
            user.run(open).await
        }
        #[cfg(feature = "peers")]
        "rocksdb-raft" => user.run(super::rocksdb::RocksDbLogStore::<super::line::V0_9>::open).await,
        #[cfg(feature = "peers")]
        "raft-log" => user.run(super::raft_log::RaftLogStore::<super::line::V0_9>::open).await,
        #[cfg(feature = "peers")]
        "raft-log-nowait" => {
            user.run(super::raft_log::RaftLogStore::<super::line::V0_9>::open_without_batch_wait).await
        }
        other => Err(format!("no store {other} in this build").into()),
    }
}

/// [`OnStore`] on openraft 0.10.
pub trait OnStore010 {
    type Output;
    #[allow(async_fn_in_trait, reason = "used within this binary only, on one runtime")]
    async fn run<S, F>(self, open: F) -> Result<Self::Output, BoxError>
    where
        S: openraft010::storage::RaftLogStorage<RaftTypes010> + Clone,
        F: Fn(&Path) -> Result<S, BoxError>;
}

/// [`with_store`] on openraft 0.10: the same stores, the same names.
pub async fn with_store_0_10<U: OnStore010>(name: &str, capacity: u64, user: U) -> Result<U::Output, BoxError> {
    match name {
        "redolog-raft" => {
            let config = redolog::Config::default().with_capacity_bytes(capacity);
            let open = |dir: &Path| {
                Ok(redolog_raft::openraft_0_10::RedologLogStore::<RaftTypes010>::open(dir, config.clone())?)
            };
            user.run(open).await
        }
        #[cfg(feature = "peers")]
        "rocksdb-raft" => user.run(super::rocksdb::RocksDbLogStore::<super::line::V0_10>::open).await,
        #[cfg(feature = "peers")]
        "raft-log" => user.run(super::raft_log::RaftLogStore::<super::line::V0_10>::open).await,
        #[cfg(feature = "peers")]
        "raft-log-nowait" => {
            user.run(super::raft_log::RaftLogStore::<super::line::V0_10>::open_without_batch_wait).await
        }
        other => Err(format!("no store {other} in this build").into()),
    }
}

/// What one point measured: calls (appends or client writes), the entries
/// they carried, the calls that failed, the whole process's CPU time and
/// fdatasyncs over the point, and those of the one store that matters (the
/// leader's in a cluster; the store alone, the same as `fsyncs`).
pub struct Point {
    pub calls: u64,
    pub entries: u64,
    pub failed: u64,
    pub elapsed: Duration,
    pub latency_us: Histogram<u64>,
    pub cpu: Duration,
    pub fsyncs: u64,
    pub store_fsyncs: u64,
}

/// One store at one count, over the rounds: the figures both tables print.
pub struct Summary {
    pub calls_per_sec: f64,
    pub entries_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub fsyncs_per_call: f64,
    pub store_fsyncs_per_call: f64,
    pub cpu_us_per_entry: f64,
    pub failed: u64,
}

impl Summary {
    /// Every store at every count of a sweep, over its rounds, in table
    /// order (counts, then stores).
    pub fn table<S: PartialEq + Copy>(
        measured: &[Measured<'_, S, Point>],
        counts: &[usize],
        names: &[S],
    ) -> Vec<(usize, S, Summary)> {
        let at = |count: usize, name: S| {
            let points = measured.iter().filter(|point| point.count == count && *point.system == name);
            Summary::of(points.map(|point| &point.result))
        };
        counts.iter().flat_map(|&count| names.iter().map(move |&name| (count, name, at(count, name)))).collect()
    }

    /// Medians of the rates over the rounds; latencies over every call.
    pub fn of<'a>(points: impl Iterator<Item = &'a Point>) -> Summary {
        let points: Vec<&Point> = points.collect();
        let per_s =
            |f: fn(&Point) -> u64| median(points.iter().map(|p| f(p) as f64 / p.elapsed.as_secs_f64()).collect());
        let mut latency = new_histogram();
        for point in &points {
            let _ = latency.add(&point.latency_us);
        }
        let sum = |f: fn(&Point) -> u64| points.iter().map(|p| f(p)).sum::<u64>();
        let cpu: f64 = points.iter().map(|p| p.cpu.as_secs_f64()).sum();
        Summary {
            calls_per_sec: per_s(|p| p.calls),
            entries_per_sec: per_s(|p| p.entries),
            p50_us: latency.value_at_quantile(0.5),
            p99_us: latency.value_at_quantile(0.99),
            fsyncs_per_call: sum(|p| p.fsyncs) as f64 / sum(|p| p.calls).max(1) as f64,
            store_fsyncs_per_call: sum(|p| p.store_fsyncs) as f64 / sum(|p| p.calls).max(1) as f64,
            cpu_us_per_entry: cpu * 1e6 / sum(|p| p.entries).max(1) as f64,
            failed: sum(|p| p.failed),
        }
    }
}
