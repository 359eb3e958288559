//! The final table and the JSON report.

use serde::Serialize;

use super::options::{durability_name, LogOptions};
use super::runner::PointResult;
use crate::harness::machine::Machine;
use crate::harness::plot::{Line, LinePoint};
use crate::harness::stats::median;
use crate::harness::BoxError;

/// One point of one round.
pub struct Measurement {
    pub system: &'static str,
    pub threads: usize,
    pub round: usize,
    pub result: PointResult,
    /// redolog's pipeline at the end of the point (None for other systems).
    pub pipeline: Option<String>,
    /// redolog's counters' growth during the point (INNODB_METRICS names).
    pub counters: Vec<(String, u64)>,
}

impl Measurement {
    /// Growth of the counter `name` during the point (0 for other systems).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.iter().find(|(n, _)| n == name).map_or(0, |(_, value)| *value)
    }
}

/// One row of the JSON `results` (medians over rounds).
#[derive(Clone, Debug, Serialize)]
struct Row {
    system: &'static str,
    threads: usize,
    durability: &'static str,
    record_bytes: usize,
    commits_per_sec: f64,
    p50_us: u64,
    p95_us: u64,
    p99_us: u64,
    records_per_fsync: f64,
    cpu_us_per_commit: f64,
    /// redolog's waiters' spinning, in percent of the process's CPU time.
    spin_pct_of_cpu: f64,
    /// Median over rounds of (this system / the reference) measured in the
    /// same round; the reference is redolog (or the first redolog pipeline run).
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<Ratio>,
    rounds: usize,
    /// Lowest and highest commits/s over the rounds.
    spread: (f64, f64),
}

#[derive(Clone, Debug, Serialize)]
struct Ratio {
    reference: &'static str,
    value: f64,
}

/// One point of one round, as measured (the JSON `points`).
#[derive(Clone, Debug, Serialize)]
struct Point {
    system: &'static str,
    threads: usize,
    round: usize,
    commits_per_sec: f64,
    p99_us: u64,
    records_per_fsync: f64,
    /// redolog's pipeline at the end of the point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pipeline: Option<String>,
}

#[derive(Serialize)]
struct Json<'a> {
    machine: &'a Machine,
    /// The seed's experiment (`--scenario`), if the run was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    scenario: Option<&'static str>,
    no_wait: bool,
    results: &'a [Row],
    points: &'a [Point],
    auto_vs_best: &'a [AutoVsBest],
}

pub struct Report {
    machine: Machine,
    scenario: Option<&'static str>,
    no_wait: bool,
    rows: Vec<Row>,
    points: Vec<Point>,
    auto_vs_best: Vec<AutoVsBest>,
}

/// `Pipeline::Auto` against the better fixed pipeline at one thread count.
#[derive(Clone, Debug, Serialize)]
struct AutoVsBest {
    threads: usize,
    /// Median over rounds of auto / max(group, dedicated), same round.
    ratio: f64,
    /// The fixed pipeline that was better in most rounds.
    best: &'static str,
}

/// For every thread count where redolog (Auto), group and dedicated all ran.
fn auto_vs_best(measurements: &[Measurement]) -> Vec<AutoVsBest> {
    let mut threads: Vec<usize> = measurements.iter().map(|m| m.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let rate = |system, threads, round| {
        measurements
            .iter()
            .find(|m| m.system == system && m.threads == threads && m.round == round)
            .map(|m| m.result.commits_per_sec())
    };
    threads
        .into_iter()
        .filter_map(|threads| {
            let mut ratios = Vec::new();
            let mut group_wins = 0;
            for m in measurements.iter().filter(|m| m.system == "redolog" && m.threads == threads) {
                let group = rate("group", threads, m.round)?;
                let dedicated = rate("dedicated", threads, m.round)?;
                group_wins += usize::from(group >= dedicated);
                ratios.push(m.result.commits_per_sec() / group.max(dedicated));
            }
            let rounds = ratios.len();
            let best = if 2 * group_wins >= rounds { "group" } else { "dedicated" };
            (rounds > 0).then(|| AutoVsBest { threads, ratio: median(ratios), best })
        })
        .collect()
}

/// Median over rounds of `system`/`baseline` at `threads`, pairing equal rounds.
pub fn paired_ratio(measurements: &[Measurement], system: &str, baseline: &str, threads: usize) -> Option<f64> {
    let ratios: Vec<f64> = measurements
        .iter()
        .filter(|m| m.system == system && m.threads == threads)
        .filter_map(|m| {
            measurements
                .iter()
                .find(|b| b.system == baseline && b.threads == threads && b.round == m.round)
                .map(|b| m.result.commits_per_sec() / b.result.commits_per_sec())
        })
        .collect();
    (!ratios.is_empty()).then(|| median(ratios))
}

impl Report {
    /// `contenders`: each system's name and whether it is redolog, in the
    /// order of the table.
    pub fn new(
        machine: Machine,
        options: &LogOptions,
        scenario: Option<&'static str>,
        contenders: &[(&'static str, bool)],
        measurements: Vec<Measurement>,
    ) -> Self {
        let order = |system| contenders.iter().position(|&(name, _)| name == system);
        let mut keys: Vec<(&'static str, usize)> = measurements.iter().map(|m| (m.system, m.threads)).collect();
        keys.sort_by_key(|&(system, threads)| (threads, order(system)));
        keys.dedup();
        // Every ratio compares with redolog as users get it, or else with the
        // first redolog configuration in the run.
        let reference = contenders
            .iter()
            .find(|&&(name, _)| name == "redolog")
            .or_else(|| contenders.iter().find(|&&(_, is_redolog)| is_redolog))
            .map(|&(name, _)| name);
        let rows = keys
            .into_iter()
            .map(|(system, threads)| {
                let points: Vec<&PointResult> = measurements
                    .iter()
                    .filter(|m| m.system == system && m.threads == threads)
                    .map(|m| &m.result)
                    .collect();
                let per_sec: Vec<f64> = points.iter().map(|p| p.commits_per_sec()).collect();
                let quantile =
                    |q: f64| median(points.iter().map(|p| p.latency_us.value_at_quantile(q) as f64).collect());
                let ratio = reference.filter(|&reference| reference != system).and_then(|reference| {
                    let value = paired_ratio(&measurements, system, reference, threads)?;
                    Some(Ratio { reference, value })
                });
                Row {
                    system,
                    threads,
                    durability: durability_name(options.durability),
                    record_bytes: options.record_bytes,
                    commits_per_sec: median(per_sec.clone()),
                    p50_us: quantile(0.5) as u64,
                    p95_us: quantile(0.95) as u64,
                    p99_us: quantile(0.99) as u64,
                    records_per_fsync: median(points.iter().map(|p| p.records_per_fsync()).collect()),
                    cpu_us_per_commit: median(points.iter().map(|p| p.cpu_us_per_commit()).collect()),
                    spin_pct_of_cpu: median(points.iter().map(|p| p.spin_pct_of_cpu()).collect()),
                    ratio,
                    rounds: points.len(),
                    spread: (
                        per_sec.iter().copied().fold(f64::INFINITY, f64::min),
                        per_sec.iter().copied().fold(0.0, f64::max),
                    ),
                }
            })
            .collect();
        let auto_vs_best = auto_vs_best(&measurements);
        let points = measurements
            .into_iter()
            .map(|m| Point {
                system: m.system,
                threads: m.threads,
                round: m.round + 1,
                commits_per_sec: m.result.commits_per_sec(),
                p99_us: m.result.latency_us.value_at_quantile(0.99),
                records_per_fsync: m.result.records_per_fsync(),
                pipeline: m.pipeline,
            })
            .collect();
        Report { machine, scenario, no_wait: options.no_wait, rows, points, auto_vs_best }
    }

    pub fn print_table(&self) {
        println!();
        println!(
            "{:<17} {:>7} {:>12} {:>9} {:>9} {:>9} {:>10} {:>9} {:>7} {:>16} {:>22}",
            "system",
            "threads",
            "commits/s",
            "p50 µs",
            "p95 µs",
            "p99 µs",
            "rec/fsync",
            "cpu µs/c",
            "spin %",
            "ratio (paired)",
            "spread (min..max/s)"
        );
        for row in &self.rows {
            let ratio = row.ratio.as_ref().map_or(String::new(), |r| format!("{:.2}× {}", r.value, r.reference));
            println!(
                "{:<17} {:>7} {:>12.0} {:>9} {:>9} {:>9} {:>10.1} {:>9.1} {:>7.2} {:>16} {:>22}",
                row.system,
                row.threads,
                row.commits_per_sec,
                row.p50_us,
                row.p95_us,
                row.p99_us,
                row.records_per_fsync,
                row.cpu_us_per_commit,
                row.spin_pct_of_cpu,
                ratio,
                format!("{:.0}..{:.0}", row.spread.0, row.spread.1)
            );
        }
        let bound_threads: Vec<String> = self
            .rows
            .iter()
            .filter(|row| row.system == "redolog")
            .map(|row| {
                format!("{} thr: {:.0}/s", row.threads, row.threads as f64 / (self.machine.fdatasync_p50_us / 1e6))
            })
            .collect();
        if !self.no_wait {
            println!("device bound (threads / fdatasync p50): {}", bound_threads.join(", "));
        }
        for point in &self.auto_vs_best {
            println!(
                "auto vs best fixed pipeline at {:>3} threads: {:.2}× {} (median of same-round ratios)",
                point.threads, point.ratio, point.best
            );
        }
    }

    /// One line per system, in table order, of its medians per thread count.
    pub fn lines(&self) -> Vec<Line> {
        let mut lines: Vec<Line> = Vec::new();
        for row in &self.rows {
            let point = LinePoint { threads: row.threads, commits_per_sec: row.commits_per_sec, p99_us: row.p99_us };
            match lines.iter_mut().find(|line| line.system == row.system) {
                Some(line) => line.points.push(point),
                None => lines.push(Line { system: row.system, points: vec![point] }),
            }
        }
        lines
    }

    /// What the plot's title says: the device and the durability.
    pub fn title(&self) -> String {
        let durability = self.rows.first().map_or("", |row| row.durability);
        let bytes = self.rows.first().map_or(0, |row| row.record_bytes);
        format!("{} B records, {durability}, device {}", bytes, self.machine.device)
    }

    pub fn to_json(&self) -> Result<String, BoxError> {
        let json = Json {
            machine: &self.machine,
            scenario: self.scenario,
            no_wait: self.no_wait,
            results: &self.rows,
            points: &self.points,
            auto_vs_best: &self.auto_vs_best,
        };
        Ok(serde_json::to_string_pretty(&json)?)
    }
}
