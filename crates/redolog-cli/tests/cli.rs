//! Goal: the `redolog` tool does what its help says. `verify` exits 0 on a
//! sound log and 1 with a message naming file, offset and LSN on a damaged one;
//! `dump` prints the checkpoint and every group; a missing directory is a clear
//! error; `redolog bench` says where the benchmark went.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Output};

use redolog::{Config, Durability, Log};

fn redolog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_redolog")).args(args).output().expect("run redolog")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A closed log with three groups, one of them spanning several blocks.
fn sample_log(dir: &Path) {
    let config = Config { capacity_bytes: 1 << 20, buffer_bytes: 64 << 10, ..Config::default() };
    let (log, _) = Log::open(dir, config).expect("create");
    log.append_group(&[b"hello", b""]).expect("append");
    log.commit(&[0xAB; 3000], Durability::Synced).expect("commit");
    log.commit(b"last", Durability::Synced).expect("commit");
    log.close().expect("close");
}

#[test]
fn verify_accepts_a_sound_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    sample_log(dir.path());
    let output = redolog(&["verify", dir.path().to_str().expect("utf-8 path")]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("3 groups"), "{}", text(&output.stdout));
}

/// The read-only tools on a log this process is writing: they say it is in
/// use, by whom, and leave it to its owner (INV-19).
#[test]
fn verify_and_dump_of_a_live_log_say_it_is_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config { capacity_bytes: 1 << 20, ..Config::default() };
    let (log, _) = Log::open(dir.path(), config).expect("create");
    log.commit(b"live", Durability::Synced).expect("commit");
    let path = dir.path().to_str().expect("utf-8 path");
    let holder = format!("in use by process {}", std::process::id());
    for command in ["verify", "dump"] {
        let output = redolog(&[command, path]);
        assert!(output.status.success(), "{command}: {}", text(&output.stderr));
        assert!(text(&output.stdout).contains(&holder), "{command}: {}", text(&output.stdout));
    }
    log.commit(b"still the owner", Durability::Synced).expect("the tools took no lock");
    log.close().expect("close");
    let output = redolog(&["verify", path]);
    assert!(!text(&output.stdout).contains("in use"), "{}", text(&output.stdout));
}

#[test]
fn verify_names_file_offset_and_lsn_of_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    sample_log(dir.path());
    // Block 18 (the middle of the 3000-byte group) lives at 12288 + 18·512 in redo.0000.
    let file = std::fs::OpenOptions::new().write(true).open(dir.path().join("redo.0000")).expect("open");
    file.write_all_at(b"\xFF\xFF", 12288 + 18 * 512 + 200).expect("damage");
    let output = redolog(&["verify", dir.path().to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let message = text(&output.stderr);
    assert!(message.contains("redo.0000"), "{message}");
    assert!(message.contains(&format!("offset {}", 12288 + 18 * 512 + 16)), "{message}");
    assert!(message.contains(&format!("LSN {}", 18 * 512 + 16)), "{message}");
}

#[test]
fn verify_of_a_missing_directory_is_an_error_not_a_new_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nothing-here");
    let output = redolog(&["verify", missing.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("nothing-here"), "{}", text(&output.stderr));
    assert!(!missing.exists(), "verify must not create a log");
}

#[test]
fn dump_prints_the_checkpoint_and_every_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    sample_log(dir.path());
    let output = redolog(&["dump", "--records", dir.path().to_str().expect("utf-8 path")]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("checkpoint"), "{stdout}");
    assert!(stdout.contains("8208"), "the first group starts at LSN 8208: {stdout}");
    assert!(stdout.contains("hello"), "record preview: {stdout}");
}

#[test]
fn bench_names_the_binary_that_runs_it() {
    for command in ["bench", "raft-store", "read-back"] {
        let output = redolog(&[command, "--workload", "raft"]);
        assert_eq!(output.status.code(), Some(1), "{command}");
        assert!(text(&output.stderr).contains("redolog-bench bench"), "{command}: {}", text(&output.stderr));
    }
}
