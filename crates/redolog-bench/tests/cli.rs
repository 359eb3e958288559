//! Goal: `redolog-bench` does what its help says: `bench` runs a tiny sweep
//! of every workload and writes JSON in the documented schema, plots, runs the
//! seed scenarios, simulates a device; `read-back` reads every group both ways;
//! options a workload does not take are refused.

use std::path::Path;
use std::process::{Command, Output};

fn redolog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_redolog-bench")).args(args).output().expect("run redolog-bench")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `redolog-bench bench` for one round without interval lines, plus `args`;
/// it must succeed. Returns its standard output.
fn bench(args: &[&str]) -> String {
    let output = redolog(&[&["bench", "--rounds", "1", "--intervals", "false"], args].concat());
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("json")).expect("parse")
}

#[test]
fn bench_writes_json_in_the_documented_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    bench(&[
        "--threads",
        "1,2",
        "--seconds",
        "0.2",
        "--dir",
        dir.path().to_str().expect("utf-8 path"),
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    let value = read_json(&json);
    for key in ["cpu", "cores", "kernel", "filesystem", "device", "fdatasync_p50_us", "fdatasync_p99_us"] {
        assert!(value["machine"].get(key).is_some(), "machine.{key} missing: {value}");
    }
    assert_eq!(value["machine"]["device"], "disk");
    let results = value["results"].as_array().expect("results");
    let systems: Vec<&str> = results.iter().filter_map(|result| result["system"].as_str()).collect();
    for system in ["redolog", "mutex", "raw"] {
        assert!(systems.contains(&system), "{system} missing: {systems:?}");
    }
    for result in results {
        for key in ["threads", "durability", "record_bytes", "commits_per_sec", "p50_us", "p99_us", "records_per_fsync"]
        {
            assert!(result.get(key).is_some(), "{key} missing: {result}");
        }
        assert!(result["commits_per_sec"].as_f64().expect("number") > 0.0, "{result}");
        // Every system but redolog is compared with redolog, pair by pair;
        // every system's fdatasyncs are counted (the process-wide hook).
        if result["system"] == "redolog" {
            assert!(result.get("ratio").is_none(), "{result}");
        } else {
            assert_eq!(result["ratio"]["reference"], "redolog", "{result}");
        }
        assert!(result["records_per_fsync"].as_f64().expect("number") > 0.0, "{result}");
    }
    // Every round's point, with redolog's pipeline.
    let points = value["points"].as_array().expect("points");
    assert_eq!(points.len(), 5, "redolog and mutex at 1 and 2 threads, raw at 1: {points:?}");
    assert!(points.iter().any(|p| p["system"] == "redolog" && p["pipeline"].is_string() && p["round"] == 1));
}

/// `--plot` draws an SVG with a line per system, and a PNG beside it in a
/// build with the `png` feature (none without).
#[test]
fn bench_plots_svg_and_png() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("plot.svg");
    bench(&["--device", "tmpfs", "--threads", "1,2", "--seconds", "0.1", "--plot", svg.to_str().expect("utf-8 path")]);
    let drawing = std::fs::read_to_string(&svg).expect("svg");
    for label in ["commits/s", "p99 latency", "redolog", "mutex", "threads"] {
        assert!(drawing.contains(label), "{label} missing from the SVG");
    }
    if cfg!(feature = "png") {
        let png = std::fs::read(dir.path().join("plot.png")).expect("png");
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());
    } else {
        assert!(!dir.path().join("plot.png").exists(), "a PNG without the png feature");
    }
}

/// `--scenario` runs a seed's experiment and prints the seed's figure beside
/// ours: MySQL bug #95390's with the wait counters, which show no lost wake-up.
#[test]
fn bench_runs_a_seed_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let stdout = bench(&[
        "--scenario",
        "seed-wakeup",
        "--device",
        "tmpfs",
        "--seconds",
        "0.3",
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(stdout.contains("MySQL bug #95390"), "{stdout}");
    assert_eq!(read_json(&json)["scenario"], "seed-wakeup");
    for system in ["redolog ", "redolog-tiny "] {
        let line = stdout
            .lines()
            .find(|line| line.trim_start().starts_with(system) && line.contains("64 threads"))
            .unwrap_or_else(|| panic!("no story line for {system}: {stdout}"));
        assert!(line.contains("lost wake-ups 0"), "{line}");
    }
}

/// `--device sim:<latency>`: every fdatasync (the probe's, redolog's and the
/// baselines') takes at least the latency, and the JSON names the profile.
#[test]
fn a_simulated_device_makes_fdatasync_take_its_latency() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let stdout = bench(&[
        "--device",
        "sim:2ms",
        "--threads",
        "1",
        "--seconds",
        "0.3",
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(stdout.contains("device sim:2000us: fdatasync p50"), "{stdout}");
    let value = read_json(&json);
    assert_eq!(value["machine"]["device"], "sim:2000us");
    assert!(value["machine"]["fdatasync_p50_us"].as_f64().expect("number") >= 2000.0, "{value}");
    for result in value["results"].as_array().expect("results") {
        // One thread, one commit per fdatasync: at most 500 commits/s.
        assert!(result["commits_per_sec"].as_f64().expect("number") <= 500.0, "{result}");
    }
    // --dir belongs to --device disk.
    let refused = redolog(&["bench", "--device", "tmpfs", "--dir", "/tmp", "--threads", "1", "--seconds", "0.1"]);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("--device disk"), "{}", text(&refused.stderr));
}

/// `redolog-bench read-back` writes a log, reads it back both ways and checks that
/// both ways returned every group (it fails otherwise).
#[test]
fn read_back_reads_every_group_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_str().expect("utf-8 path");
    let output = redolog(&["read-back", "--gib", "0.01", "--rounds", "2", "--dir", path]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("read_from GiB/s") && stdout.contains("median"), "{stdout}");
}

/// `redolog-bench bench --async`: tasks awaiting `commit_async` beside the thread
/// path, in one table.
#[test]
fn bench_async_runs_tasks_beside_threads() {
    let stdout = bench(&["--async", "--tasks", "8", "--time", "0.3", "--device", "tmpfs"]);
    // Table rows: the system, then the task count.
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|line| {
            let mut words = line.split_whitespace();
            matches!(words.next(), Some("async" | "redolog")) && words.next() == Some("8")
        })
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}\n{stdout}");
    assert!(stdout.contains("× redolog"), "{stdout}");
}

#[cfg(feature = "raft")]
/// `redolog-bench bench --workload raft`: a three-node openraft cluster per store
/// and openraft line, clients writing through the leader; every write
/// succeeds, on both lines, and the leader's fdatasyncs are counted apart
/// (some, and no more than the whole process's).
#[test]
fn bench_raft_writes_through_a_three_node_cluster() {
    let stdout = bench(&["--workload", "raft", "--tasks", "4", "--time", "0.5", "--device", "tmpfs"]);
    for line in ["0.9", "0.10"] {
        let row = stdout
            .lines()
            .find(|row| row.split_whitespace().take(4).eq(["redolog-raft", line, "in-process", "4"]))
            .unwrap_or_else(|| panic!("no redolog-raft row on openraft {line}\n{stdout}"));
        let columns: Vec<&str> = row.split_whitespace().collect();
        let writes_per_s: f64 = columns[4].parse().expect("writes/s");
        assert!(writes_per_s > 0.0, "{row}");
        let (all, leader): (f64, f64) = (columns[8].parse().expect("fsync/write"), columns[9].parse().expect("leader"));
        assert!(leader > 0.0 && leader <= all, "{row}");
        assert_eq!(columns.last(), Some(&"0"), "failed writes: {row}");
    }
}

#[cfg(feature = "raft")]
/// `--placement processes`: three `redolog-bench kv-node` processes
/// (redolog-kv's node) form a cluster over HTTP and take every write; the
/// CPU per write counts the node processes too, and no node outlives the
/// run.
#[test]
fn bench_raft_runs_a_cluster_of_node_processes() {
    let stdout = bench(&[
        "--workload",
        "raft",
        "--openraft",
        "0.10",
        "--placement",
        "processes",
        "--stores",
        "redolog-raft",
        "--tasks",
        "4",
        "--time",
        "0.5",
        "--device",
        "tmpfs",
    ]);
    let row = stdout
        .lines()
        .find(|row| row.split_whitespace().take(4).eq(["redolog-raft", "0.10", "processes", "4"]))
        .unwrap_or_else(|| panic!("no row for the node processes\n{stdout}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    let writes_per_s: f64 = columns[4].parse().expect("writes/s");
    assert!(writes_per_s > 0.0, "{row}");
    let cpu_per_write: f64 = columns[7].parse().expect("cpu µs/write");
    assert!(cpu_per_write > 0.0, "{row}");
    assert_eq!(columns[8], "-", "fdatasyncs of other processes are not counted: {row}");
    assert_eq!(columns.last(), Some(&"0"), "failed writes: {row}");
    // The nodes' directories are under the run's work directory: no process
    // may still have it on its command line.
    assert!(!running(raft_workdir(&stdout)), "node processes left running");
}

/// A build without the `raft` feature refuses the openraft workloads with
/// an error that names the feature and the command that builds it; without
/// `prometheus`, `--prometheus` likewise.
#[test]
fn a_workload_this_build_lacks_is_refused_naming_its_feature() {
    let mut cases = Vec::new();
    if !cfg!(feature = "raft") {
        cases.push((vec!["bench", "--workload", "raft"], "--features raft"));
        cases.push((vec!["bench", "--workload", "kv"], "--features raft"));
        cases.push((vec!["raft-store"], "--features raft"));
    }
    if !cfg!(feature = "prometheus") {
        cases.push((vec!["bench", "--prometheus", "127.0.0.1:1"], "--features prometheus"));
    }
    for (args, names) in cases {
        let output = redolog(&args);
        assert!(!output.status.success(), "{args:?} ran");
        assert!(text(&output.stderr).contains(names), "{args:?}: {}", text(&output.stderr));
    }
}

/// Options that mean nothing to a workload are refused, not ignored.
#[test]
fn bench_refuses_options_its_workload_does_not_take() {
    let output = redolog(&["bench", "--workload", "raft", "--json", "/tmp/never-written.json"]);
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("--json does not apply to --workload raft"), "{}", text(&output.stderr));
    let output = redolog(&["bench", "--stores", "raft-log"]);
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("--stores does not apply to --workload log"), "{}", text(&output.stderr));
}

/// A page store small enough for a debug build, on tmpfs.
const SMALL_STORE: [&str; 6] = ["--device", "tmpfs", "--buffer-pool-bytes", "16777216", "--log-capacity", "8388608"];

/// `redolog-bench bench --workload oltp_write_only`: sysbench's shape on the page
/// store — prepare, interval lines, the summary, no failed transaction —
/// and its JSON and plot.
#[test]
fn bench_oltp_runs_sysbench_shaped_transactions_on_the_page_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (json, svg) = (dir.path().join("oltp.json"), dir.path().join("oltp.svg"));
    let stdout = bench(
        &[
            &SMALL_STORE[..],
            &[
                "--json",
                json.to_str().expect("utf-8 path"),
                "--plot",
                svg.to_str().expect("utf-8 path"),
                "--workload",
                "oltp_write_only",
                "--tables",
                "2",
                "--table-size",
                "500",
                "--threads",
                "2",
                "--time",
                "1",
            ],
        ]
        .concat(),
    );
    assert!(stdout.contains("prepared 2 tables of 500 rows"), "{stdout}");
    let transactions: u64 = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("transactions:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no transactions line\n{stdout}"));
    assert!(transactions > 0, "{stdout}");
    assert!(stdout.contains("failed:                              0"), "{stdout}");
    let json = read_json(&json);
    assert_eq!(json["workload"], "oltp_write_only");
    let point = &json["points"][0];
    assert_eq!((point["system"].as_str(), point["threads"].as_u64()), (Some("pagestore"), Some(2)), "{json}");
    assert_eq!(point["transactions"].as_u64(), Some(transactions), "{json}");
    assert!(point["engine"]["log_bytes"].as_u64() > Some(0), "{json}");
    assert!(std::fs::read_to_string(&svg).expect("svg").contains("pagestore"));
    if cfg!(feature = "png") {
        assert!(std::fs::read(svg.with_extension("png")).expect("png").starts_with(b"\x89PNG"));
    }
}

/// The seeds' buffer-pool scenarios run on the page store and print the
/// seed's figures beside ours: seed-convoy's four stores at each client
/// count, seed-wakeup's two closed windows with their wait counters.
#[test]
fn bench_runs_the_engine_scenarios() {
    let small = [&SMALL_STORE[..], &["--tables", "1", "--table-size", "300", "--time", "0.3"]].concat();
    let stdout = bench(&[&["--scenario", "seed-convoy", "--threads", "2"][..], &small].concat());
    assert!(stdout.contains("MySQL bug #68555"), "{stdout}");
    let row = stdout
        .lines()
        .find(|line| line.split_whitespace().next() == Some("2") && line.matches('x').count() >= 2)
        .unwrap_or_else(|| panic!("no 2-client row\n{stdout}"));
    assert!(!row.contains(" 0 "), "every store ran transactions: {row}");
    let stdout = bench(&[&["--scenario", "seed-wakeup", "--workload", "oltp_insert"][..], &small].concat());
    assert!(stdout.contains("MySQL bug #95390"), "{stdout}");
    for system in ["pagestore ", "closed-16k "] {
        let line = stdout
            .lines()
            .find(|line| line.trim_start().starts_with(system) && line.contains("64 clients"))
            .unwrap_or_else(|| panic!("no story line for {system}\n{stdout}"));
        assert!(line.contains("lost wake-ups 0"), "{line}");
    }
}

#[cfg(feature = "raft")]
/// The work directory a `--workload raft` run names in its first line.
fn raft_workdir(output: &str) -> &str {
    output
        .split_whitespace()
        .find(|word| word.contains("redolog-bench-raft-"))
        .unwrap_or_else(|| panic!("no work directory in {output:?}"))
        .trim_end_matches(',')
}

#[cfg(feature = "raft")]
/// Whether any process has `needle` on its command line (false where
/// `pgrep` is missing).
fn running(needle: &str) -> bool {
    Command::new("pgrep").args(["-f", needle]).output().is_ok_and(|found| !text(&found.stdout).trim().is_empty())
}

#[cfg(feature = "raft")]
/// A benchmark killed with SIGKILL mid-point takes its node processes with
/// it (the kernel's parent-death signal): no node outlives its benchmark.
#[test]
fn node_processes_die_with_a_killed_benchmark() {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};

    let mut child = Command::new(env!("CARGO_BIN_EXE_redolog-bench"))
        .args(["bench", "--workload", "raft", "--openraft", "0.10", "--placement", "processes"])
        .args(["--stores", "redolog-raft", "--tasks", "2", "--time", "60", "--rounds", "1", "--device", "tmpfs"])
        .stdout(std::process::Stdio::piped())
        // Not this test's stderr: a node that outlived the benchmark would
        // hold it open, and whatever reads it would wait.
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start redolog-bench");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("first line");
    let workdir = raft_workdir(&first).to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !running(&workdir) {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no node process started within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("SIGKILL the benchmark");
    child.wait().expect("reap it");
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(&workdir) {
        assert!(Instant::now() < deadline, "node processes outlived their benchmark by 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&workdir);
}

#[cfg(feature = "prometheus")]
/// `bench --prometheus ADDR` serves the live counters while a point runs:
/// a scrape mid-point finds the benchmark's commits and the log's counters,
/// labelled by point and threads.
#[test]
fn bench_serves_live_counters_to_prometheus() {
    use std::time::{Duration, Instant};

    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|socket| socket.local_addr()).expect("a port");
    let _bench = Reaped(
        Command::new(env!("CARGO_BIN_EXE_redolog-bench"))
            .args(["bench", "--systems", "redolog", "--threads", "1", "--time", "20", "--rounds", "1"])
            .args(["--device", "tmpfs", "--intervals", "false", "--prometheus", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start redolog-bench"),
    );
    let series = |scrape: &str, name: &str| -> Option<f64> {
        let prefix = format!("{name}{{point=\"round 1 redolog\",threads=\"1\"}} ");
        scrape.lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let scrape = ureq::get(&format!("http://{port}/metrics"))
            .call()
            .ok()
            .and_then(|mut response| response.body_mut().read_to_string().ok())
            .unwrap_or_default();
        let commits = series(&scrape, "redolog_bench_commits_total");
        let records = series(&scrape, "redolog_log_records_total");
        if commits.is_some_and(|commits| commits > 0.0) && records.is_some_and(|records| records > 0.0) {
            assert!(scrape.contains("# TYPE redolog_log_fsyncs_total counter"), "{scrape}");
            break;
        }
        assert!(Instant::now() < deadline, "no live counters at {port} within 15 s: {scrape}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A benchmark stopped by SIGTERM (`timeout`, `kill`) mid-point removes its
/// work directory: on tmpfs that directory is memory, and the directories of
/// killed runs once filled /dev/shm.
#[test]
fn a_benchmark_stopped_by_sigterm_removes_its_work_directory() {
    use std::time::{Duration, Instant};

    let parent = tempfile::tempdir().expect("parent");
    let mut bench = Reaped(
        Command::new(env!("CARGO_BIN_EXE_redolog-bench"))
            .args(["bench", "--systems", "redolog", "--threads", "2", "--time", "60", "--rounds", "1"])
            .args(["--device", "disk", "--dir"])
            .arg(parent.path())
            .args(["--intervals", "false"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start redolog-bench"),
    );
    let entries = || std::fs::read_dir(parent.path()).expect("parent").count();
    let deadline = Instant::now() + Duration::from_secs(30);
    while entries() == 0 {
        assert!(Instant::now() < deadline, "no work directory within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the point start writing into it.
    std::thread::sleep(Duration::from_millis(500));
    let status = terminate(&mut bench.0, Duration::from_secs(30)).expect("the benchmark ran on 30 s after SIGTERM");
    assert!(!status.success(), "a benchmark stopped by SIGTERM reported success");
    assert_eq!(entries(), 0, "the work directory outlived the benchmark");
}

/// A benchmark stopped on every path out of a test: SIGTERM, so that it
/// removes its work directory in /dev/shm (SIGKILL left a log's worth there
/// on every run of the Prometheus test), SIGKILL if it is still running 10 s
/// later; nothing if it has exited already.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // A child already waited for keeps its status: no signal goes to a
        // process id that may have been reused.
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        if terminate(&mut self.0, std::time::Duration::from_secs(10)).is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Sends `child` SIGTERM and waits up to `within` for it to exit; its status,
/// or `None` if it is still running.
fn terminate(child: &mut std::process::Child, within: std::time::Duration) -> Option<std::process::ExitStatus> {
    let pid = i32::try_from(child.id()).ok().and_then(rustix::process::Pid::from_raw)?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).ok()?;
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
