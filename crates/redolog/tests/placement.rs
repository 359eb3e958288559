//! Goal: `Config::log_thread_cpus` and `log_thread_nice` place the dedicated log
//! threads (the few-cores post), and a placement the system refuses is a warning, not a
//! failure. Its own test binary: it inspects this process's threads by name.
//! Method: read the log threads' `Cpus_allowed_list` and nice value from /proc.

mod common;

use redolog::{Durability, Log, Pipeline};

/// `(Cpus_allowed_list, nice)` of every thread of this process named `name`.
fn placement_of(name: &str) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let task = task.expect("task").path();
        if std::fs::read_to_string(task.join("comm")).unwrap_or_default().trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).expect("status");
        let cpus = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim()
            .to_string();
        let stat = std::fs::read_to_string(task.join("stat")).expect("stat");
        // Fields after the `(comm)`: state is field 3, nice is field 19.
        let after_comm = &stat[stat.rfind(')').expect("comm end") + 2..];
        let nice = after_comm.split(' ').nth(16).expect("nice").parse().expect("nice value");
        found.push((cpus, nice));
    }
    found
}

#[test]
fn log_threads_are_pinned_and_reniced_and_refusals_only_warn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(256, 64 << 10)
        .with_pipeline(Pipeline::Dedicated)
        .with_log_thread_cpus(vec![0])
        .with_log_thread_nice(3);
    let (log, _) = Log::open(dir.path(), config).expect("open");
    // A Synced commit under Dedicated needs both threads: both have placed
    // themselves before their first pass.
    log.commit(b"placed", Durability::Synced).expect("commit");
    for name in ["redolog-writer", "redolog-flusher"] {
        assert_eq!(placement_of(name), vec![("0".to_string(), 3)], "{name}");
    }
    log.close().expect("close");
    drop(log);

    // A CPU that does not exist here (a valid number, below the kernel's CPU
    // set size; a larger one is InvalidConfig): the threads run unpinned and
    // the log works.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(256, 64 << 10).with_pipeline(Pipeline::Dedicated).with_log_thread_cpus(vec![1000]);
    let (log, _) = Log::open(dir.path(), config).expect("open");
    let end = log.commit(b"unpinned", Durability::Synced).expect("commit despite the refused pinning");
    assert!(log.durable_lsn() >= end);
}
