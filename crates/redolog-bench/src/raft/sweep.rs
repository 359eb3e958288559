//! `redolog-bench bench --workload raft`: the sweep — every placement
//! (`cluster`: the nodes in this process; `processes`: a process each),
//! openraft line and store at every client count, in interleaved rounds —
//! and its table.

use super::cluster;
use super::stores::{self, Point, Summary};
use super::{processes, ClusterOptions, OpenraftLine, Placement};
use crate::harness::rounds::{interleave, Measured};
use crate::harness::BoxError;

/// The systems a run compares: each placement, line and store, where the
/// placement runs them (a process per node: openraft 0.10, the stores a
/// node process has).
fn systems(options: &ClusterOptions) -> Result<Vec<(Placement, OpenraftLine, &'static str)>, BoxError> {
    let names = stores::chosen(&options.stores)?;
    let mut systems = Vec::new();
    for &placement in &options.placements {
        for &line in &options.lines {
            for &name in &names {
                let runs = placement == Placement::InProcess
                    || (line == OpenraftLine::V0_10 && processes::stores().contains(&name));
                if runs {
                    systems.push((placement, line, name));
                }
            }
        }
    }
    if systems.is_empty() {
        return Err("--placement processes runs openraft 0.10 with redolog-raft or rocksdb-raft only".into());
    }
    Ok(systems)
}

/// Runs the cluster benchmark at each `--threads` count (clients) and prints
/// the table.
pub fn run(options: &ClusterOptions) -> Result<(), BoxError> {
    let run = &options.run;
    let workdir = run.device.work_dir(run.dir.as_deref(), "redolog-bench-raft-")?;
    println!(
        "redolog-bench bench --workload raft: 3 nodes ({}), {} on device {}, {}-byte payloads",
        options
            .placements
            .iter()
            .map(|placement| match placement {
                Placement::InProcess => "in one process",
                Placement::Processes => "a process each, HTTP on loopback",
            })
            .collect::<Vec<_>>()
            .join("; "),
        workdir.path().display(),
        run.device,
        options.record_bytes
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let systems = systems(options)?;
    let measured = interleave(
        run.rounds,
        &run.threads,
        &systems,
        |_, _| true,
        |visit| {
            let ((placement, line, name), clients, round) = (*visit.system, visit.count, visit.round);
            let dir = workdir.path().join(format!("{name}-{line}-{placement}-{clients}-{round}"));
            let measured = match placement {
                Placement::Processes => runtime.block_on(processes::point(name, &dir, clients, options))?,
                Placement::InProcess => cluster::in_process_point(&runtime, line, name, &dir, clients, options)?,
            };
            std::fs::remove_dir_all(&dir)?;
            if run.report_interval > 0 {
                println!(
                    "[ round {} ] {name} on openraft {line}, {placement}, {clients} clients: {:.0} writes/s",
                    round + 1,
                    measured.calls as f64 / measured.elapsed.as_secs_f64()
                );
            }
            Ok(measured)
        },
    )?;
    print_table(&measured, &run.threads, &systems);
    Ok(())
}

/// The table of a run; fdatasyncs are counted in this process only, so a
/// process-per-node row has none to show.
fn print_table(
    measured: &[Measured<'_, (Placement, OpenraftLine, &'static str), Point>],
    counts: &[usize],
    systems: &[(Placement, OpenraftLine, &'static str)],
) {
    println!(
        "\n{:<16} {:>8} {:>10} {:>8} {:>12} {:>9} {:>9} {:>13} {:>12} {:>13} {:>7}",
        "store",
        "openraft",
        "placement",
        "clients",
        "writes/s",
        "p50 µs",
        "p99 µs",
        "cpu µs/write",
        "fsync/write",
        "leader fsync/w",
        "failed"
    );
    for (clients, (placement, line, name), summary) in Summary::table(measured, counts, systems) {
        let fsyncs = |per_call: f64| match placement {
            Placement::InProcess => format!("{per_call:.3}"),
            Placement::Processes => "-".to_string(),
        };
        println!(
            "{:<16} {:>8} {:>10} {:>8} {:>12.0} {:>9} {:>9} {:>13.1} {:>12} {:>13} {:>7}",
            name,
            line.to_string(),
            placement.to_string(),
            clients,
            summary.calls_per_sec,
            summary.p50_us,
            summary.p99_us,
            summary.cpu_us_per_entry,
            fsyncs(summary.fsyncs_per_call),
            fsyncs(summary.store_fsyncs_per_call),
            summary.failed,
        );
    }
}
