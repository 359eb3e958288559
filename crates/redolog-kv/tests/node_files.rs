//! Goal: KV-10, KV-11 (docs/RAFT.md) as a user meets them — every directory
//! a node writes is 0700 and every file 0600, its snapshot included; and a
//! `--snapshot-every` the log cannot hold is refused at start, naming the
//! flag, instead of a cluster that stops answering once its log fills.
//! Method: one node process with snapshots every 20 entries, 80 writes, its
//! directory walked once its snapshot is on disk; the binary started with
//! `--snapshot-every 1000000000` on the default log.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::Nodes;

/// Every directory and file under `dir`, with its mode.
fn modes(dir: &Path, found: &mut Vec<(String, u32, bool)>) {
    for entry in std::fs::read_dir(dir).expect("read a node's directory") {
        let entry = entry.expect("an entry");
        let metadata = entry.metadata().expect("metadata");
        let mode = metadata.permissions().mode() & 0o777;
        found.push((entry.path().display().to_string(), mode, metadata.is_dir()));
        if metadata.is_dir() {
            modes(&entry.path(), found);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_a_node_writes_is_its_users_alone() {
    let mut nodes = Nodes::start(1, &["--snapshot-every=20", "--keep-logs=5"]).await;
    let http = reqwest::Client::new();
    for index in 0..80 {
        let write = serde_json::json!({"op": "set", "key": format!("k{index}"), "value": "v"});
        let written = http.post(format!("http://{}/api/write", nodes.addrs[&1])).json(&write).send().await;
        let status = written.map(|response| response.status());
        assert!(matches!(status, Ok(status) if status.is_success()), "write {index}: {status:?}\n{}", nodes.report());
    }
    let dir = nodes.dir(1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("state/snapshot.bin").exists() {
        assert!(Instant::now() < deadline, "no snapshot after 80 writes\n{}", nodes.report());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut found =
        vec![(dir.display().to_string(), std::fs::metadata(&dir).expect("dir").permissions().mode() & 0o777, true)];
    modes(&dir, &mut found);
    assert!(found.len() > 5, "the node's directory holds its log, state and identity: {found:?}");
    for (path, mode, is_dir) in &found {
        let private = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, private, "{path} is {mode:o}, not {private:o}");
    }
}

#[test]
fn a_snapshot_interval_the_log_cannot_hold_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_redolog-kv"))
        .args(["--id=1", "--listen=127.0.0.1:0", "--snapshot-every=1000000000"])
        .arg(format!("--dir={}", dir.path().join("node").display()))
        .output()
        .expect("run the node");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started: {said}");
    assert!(said.contains("--snapshot-every 1000000000") && said.contains("--log-mib 64"), "{said}");
}
