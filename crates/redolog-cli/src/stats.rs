//! `redolog dump --stats`: the size distributions of a range's groups and
//! records, and how many groups each fsync carried as far as the blocks
//! recorded it (pg_waldump's `--stats`).

use std::io::Write;

use hdrhistogram::Histogram;
use redolog::inspect::{Inspection, SyncFrontiers};
use redolog::Lsn;
use serde_json::{json, Value};

use crate::inspect::BoxError;

/// The statistics of a range of groups.
pub struct Stats {
    start: Lsn,
    end: Lsn,
    group_bytes: Histogram<u64>,
    records_per_group: Histogram<u64>,
    record_bytes: Histogram<u64>,
    frontiers: SyncFrontiers,
}

fn histogram() -> Histogram<u64> {
    // Auto-resizing, three significant digits: sizes up to the ring's.
    #[allow(clippy::expect_used)] // constant, valid precision
    Histogram::new(3).expect("3 significant digits is a valid precision")
}

impl Stats {
    /// Reads the groups of `[start, end)` (at most `limit` of them).
    pub fn of(mut inspection: Inspection, start: Lsn, end: Option<Lsn>, limit: Option<u64>) -> Result<Self, BoxError> {
        let mut stats = Stats {
            start,
            end: start,
            group_bytes: histogram(),
            records_per_group: histogram(),
            record_bytes: histogram(),
            frontiers: SyncFrontiers::default(),
        };
        for group in inspection.groups.by_ref() {
            let group = group?;
            if group.end_lsn() <= start {
                continue;
            }
            if end.is_some_and(|end| group.start_lsn() >= end)
                || limit.is_some_and(|limit| stats.group_bytes.len() >= limit)
            {
                break;
            }
            let mut bytes = 0;
            for record in group.records() {
                stats.record_bytes.record(record.len() as u64)?;
                bytes += record.len() as u64;
            }
            stats.group_bytes.record(bytes)?;
            stats.records_per_group.record(group.record_count() as u64)?;
            stats.end = group.end_lsn();
        }
        stats.frontiers = inspection.sync_frontiers(stats.start, stats.end)?;
        Ok(stats)
    }

    fn groups(&self) -> u64 {
        self.group_bytes.len()
    }

    /// Groups per recorded sync: an upper bound on groups per fsync, since
    /// the count of syncs is a lower bound.
    fn groups_per_sync(&self) -> Option<f64> {
        let syncs = self.frontiers.syncs_at_least();
        (syncs > 0).then(|| self.groups() as f64 / syncs as f64)
    }

    /// Prints the statistics as text or one JSON object.
    pub fn print(&self, out: &mut impl Write, json: bool) -> Result<(), BoxError> {
        let rows = [
            ("bytes/group", "group_bytes", &self.group_bytes),
            ("records/group", "records_per_group", &self.records_per_group),
            ("bytes/record", "record_bytes", &self.record_bytes),
        ];
        if json {
            let mut line = json!({
                "type": "stats",
                "start_lsn": self.start.as_u64(),
                "end_lsn": self.end.as_u64(),
                "groups": self.groups(),
                "records": self.record_bytes.len(),
                "sync_frontiers": {
                    "blocks": self.frontiers.blocks,
                    "distinct": self.frontiers.distinct,
                    "syncs_at_least": self.frontiers.syncs_at_least(),
                },
                "groups_per_sync": self.groups_per_sync(),
            });
            for (_, key, histogram) in rows {
                line[key] = distribution_json(histogram);
            }
            writeln!(out, "{line}")?;
            return Ok(());
        }
        writeln!(
            out,
            "statistics of LSN {}..{}: {} groups, {} records",
            self.start,
            self.end,
            self.groups(),
            self.record_bytes.len()
        )?;
        writeln!(out, "{:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}", "", "min", "p50", "p90", "p99", "max", "mean")?;
        for (name, _, histogram) in rows {
            let [min, p50, p90, p99, max] = quantiles(histogram);
            writeln!(out, "{name:<18} {min:>8} {p50:>8} {p90:>8} {p99:>8} {max:>8} {:>10.1}", histogram.mean())?;
        }
        let frontiers = self.frontiers;
        write!(
            out,
            "sync frontiers recorded: {} distinct over {} blocks: at least {} syncs while the range was written",
            frontiers.distinct,
            frontiers.blocks,
            frontiers.syncs_at_least()
        )?;
        match self.groups_per_sync() {
            Some(per_sync) => writeln!(out, ", at most {per_sync:.1} groups per fsync")?,
            None => writeln!(out, " (the range shows no sync)")?,
        }
        Ok(())
    }
}

/// min, p50, p90, p99, max (0 when empty).
fn quantiles(histogram: &Histogram<u64>) -> [u64; 5] {
    if histogram.is_empty() {
        return [0; 5];
    }
    [
        histogram.min(),
        histogram.value_at_quantile(0.5),
        histogram.value_at_quantile(0.9),
        histogram.value_at_quantile(0.99),
        histogram.max(),
    ]
}

fn distribution_json(histogram: &Histogram<u64>) -> Value {
    let [min, p50, p90, p99, max] = quantiles(histogram);
    json!({ "min": min, "p50": p50, "p90": p90, "p99": p99, "max": max, "mean": histogram.mean() })
}
