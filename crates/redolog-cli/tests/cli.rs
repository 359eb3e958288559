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
    let config = Config::default().with_capacity_bytes(1 << 20).with_buffer_bytes(64 << 10);
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
    let config = Config::default().with_capacity_bytes(1 << 20);
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

/// A closed log of `count` Synced groups of one `bytes`-byte record each
/// (record `i` filled with byte `i`); returns each group's end LSN.
fn log_of_groups(dir: &Path, count: u8, bytes: usize) -> Vec<u64> {
    let config = Config::default().with_capacity_bytes(1 << 20);
    let (log, _) = Log::open(dir, config).expect("create");
    let ends =
        (0..count).map(|index| log.commit(&vec![index; bytes], Durability::Synced).expect("commit").as_u64()).collect();
    log.close().expect("close");
    ends
}

/// The `group a..b` lines of a text dump.
fn group_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|line| line.starts_with("group ")).collect()
}

#[test]
fn dump_shows_the_range_and_limit_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ends = log_of_groups(dir.path(), 10, 40);
    let path = dir.path().to_str().expect("utf-8 path");
    let (start, end) = (ends[2].to_string(), ends[6].to_string());
    let output = redolog(&["dump", path, "--start", &start, "--end", &end]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let groups = group_lines(&stdout);
    assert_eq!(groups.len(), 4, "{stdout}");
    assert!(groups[0].starts_with(&format!("group {}..{}", ends[2], ends[3])), "{stdout}");
    assert!(groups[3].starts_with(&format!("group {}..{}", ends[5], ends[6])), "{stdout}");
    assert!(stdout.contains("4 groups, 4 records, 160 record bytes"), "{stdout}");

    let limited = text(&redolog(&["dump", path, "--start", &start, "--limit", "2"]).stdout);
    assert_eq!(group_lines(&limited).len(), 2, "{limited}");
}

#[test]
fn dump_refuses_a_bad_range_naming_the_nearest_boundaries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ends = log_of_groups(dir.path(), 5, 40);
    let path = dir.path().to_str().expect("utf-8 path");
    let refused = |args: &[&str]| {
        let output = redolog(&[&["dump", path], args].concat());
        // 1: refused by the tool; 2: by the argument parser.
        assert!(matches!(output.status.code(), Some(1 | 2)), "{args:?} was accepted: {}", text(&output.stdout));
        assert!(group_lines(&text(&output.stdout)).is_empty(), "{args:?} printed groups before refusing");
        text(&output.stderr)
    };
    let inside = (ends[1] + 3).to_string();
    let message = refused(&["--start", &inside]);
    assert!(message.contains(&format!("--start {inside} is not a group boundary")), "{message}");
    assert!(message.contains(&format!("nearest boundaries are {} and {}", ends[1], ends[2])), "{message}");
    let message = refused(&["--end", &inside]);
    assert!(message.contains(&format!("--end {inside} is not a group boundary")), "{message}");
    let message = refused(&["--start", "100"]);
    assert!(message.contains("before the oldest group recovery can read, at LSN 8208"), "{message}");
    let past = (ends[4] + 1000).to_string();
    let message = refused(&["--start", &past]);
    assert!(message.contains(&format!("past the end of the log, at LSN {}", ends[4])), "{message}");
    let message = refused(&["--start", &ends[2].to_string(), "--end", &ends[1].to_string()]);
    assert!(message.contains("the range is empty"), "{message}");
    let message = refused(&["--start", "12x"]);
    assert!(message.contains("invalid value '12x' for '--start <LSN>'"), "{message}");
    let message = refused(&["--stats", "--follow"]);
    assert!(message.contains("cannot be used with"), "{message}");
}

#[test]
fn dump_records_show_payloads_in_hex_and_text_up_to_the_byte_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::default().with_capacity_bytes(1 << 20);
    let (log, _) = Log::open(dir.path(), config).expect("create");
    log.commit(b"page 7: set x = 'hello, world'\x00\x01", Durability::Synced).expect("commit");
    log.close().expect("close");
    let path = dir.path().to_str().expect("utf-8 path");
    let stdout = text(&redolog(&["dump", path, "--records", "--payload-bytes", "8"]).stdout);
    assert!(stdout.contains("record 0: 32 bytes"), "{stdout}");
    assert!(stdout.contains("0000  70 61 67 65 20 37 3a 20"), "{stdout}");
    assert!(stdout.contains("|page 7: |"), "{stdout}");
    assert!(stdout.contains("… 24 more bytes"), "{stdout}");
    let stdout = text(&redolog(&["dump", path, "--records", "--payload-bytes", "0"]).stdout);
    assert!(stdout.contains("0010  27 68 65 6c 6c 6f 2c 20 77 6f 72 6c 64 27 00 01"), "{stdout}");
    assert!(stdout.contains("|'hello, world'..|"), "{stdout}");
    assert!(!stdout.contains("more bytes"), "{stdout}");
}

#[test]
fn dump_stats_give_size_distributions_and_groups_per_fsync() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Each Synced group fills more than a block: every write leaves a full
    // block behind that records the sync before it.
    log_of_groups(dir.path(), 8, 600);
    let path = dir.path().to_str().expect("utf-8 path");
    let output = redolog(&["dump", path, "--stats"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("8 groups, 8 records"), "{stdout}");
    assert!(group_lines(&stdout).is_empty(), "--stats prints no groups: {stdout}");
    let row = stdout.lines().find(|line| line.starts_with("bytes/record")).expect("a bytes/record row");
    assert_eq!(row.split_whitespace().skip(1).take(5).collect::<Vec<_>>(), ["600"; 5], "{stdout}");

    let json = text(&redolog(&["dump", path, "--stats", "--json"]).stdout);
    let stats: serde_json::Value = serde_json::from_str(json.lines().last().expect("a stats line")).expect("json");
    assert_eq!(stats["type"], "stats");
    assert_eq!(stats["groups"], 8);
    assert_eq!(stats["record_bytes"]["p50"], 600);
    // One commit per fdatasync: the blocks recorded at least 7 of the 8.
    let syncs = stats["sync_frontiers"]["syncs_at_least"].as_u64().expect("a count");
    assert!((7..=8).contains(&syncs), "{stats}");
    assert!(stats["groups_per_sync"].as_f64().expect("a ratio") <= 8.0 / 7.0, "{stats}");
}

#[test]
fn dump_json_is_one_object_per_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ends = log_of_groups(dir.path(), 3, 5);
    let path = dir.path().to_str().expect("utf-8 path");
    let stdout = text(&redolog(&["dump", path, "--json", "--records", "--payload-bytes", "2"]).stdout);
    let lines: Vec<serde_json::Value> =
        stdout.lines().map(|line| serde_json::from_str(line).expect("each line is JSON")).collect();
    let types: Vec<&str> = lines.iter().map(|line| line["type"].as_str().expect("a type")).collect();
    assert_eq!(types, ["log", "group", "group", "group", "summary"]);
    assert_eq!(lines[0]["end_lsn"], ends[2]);
    assert_eq!(lines[2]["start_lsn"], ends[0]);
    assert_eq!(lines[2]["payloads"][0], serde_json::json!({"len": 5, "hex": "0101", "text": "..", "truncated": true}));
    assert_eq!(lines[4]["groups"], 3);
}

/// `--follow` on a log another process holds: groups committed after the
/// tool started are printed as they become durable, until `--limit`.
#[test]
fn dump_follow_prints_groups_as_the_log_grows() {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};

    /// Kills the tool on every path out of the test.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::default().with_capacity_bytes(1 << 20);
    let (log, _) = Log::open(dir.path(), config).expect("create");
    log.commit(b"before", Durability::Synced).expect("commit");
    let mut tool = Reaped(
        Command::new(env!("CARGO_BIN_EXE_redolog"))
            .args(["dump", "--follow", "--limit", "4", dir.path().to_str().expect("utf-8 path")])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start redolog dump --follow"),
    );
    let mut lines = BufReader::new(tool.0.stdout.take().expect("stdout")).lines();
    let mut groups = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while groups.len() < 4 {
        assert!(Instant::now() < deadline, "4 groups not followed in 30 s: {groups:?}");
        let line = lines.next().expect("the tool ended early").expect("a line");
        if line.starts_with("group ") {
            groups.push(line);
            // The next group is written only after this one was seen.
            log.commit(format!("after {}", groups.len()).as_bytes(), Durability::Synced).expect("commit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(rest.last().map(String::as_str), Some("4 groups, 4 records, 27 record bytes"), "{rest:?}");
    assert!(tool.0.wait().expect("wait").success());
    log.close().expect("close");
}

/// An encrypted log: `dump` and `verify` read it with `--key-file`, refuse a
/// key file others can read, and without the keys say which are needed.
#[test]
fn dump_and_verify_read_an_encrypted_log_with_its_key_file() {
    use std::os::unix::fs::PermissionsExt;

    use redolog::encryption::{Encryption, Key, Keys};

    let dir = tempfile::tempdir().expect("tempdir");
    let hex = "5a".repeat(32);
    let keys = Encryption::new(Keys::new().with_key(4, Key::from_hex(&hex).expect("a key")));
    let config = Config::default().with_capacity_bytes(1 << 20).with_encryption(keys);
    let (log, _) = Log::open(dir.path().join("log"), config).expect("create");
    log.commit(b"the secret payload", Durability::Synced).expect("commit");
    log.close().expect("close");
    let path = dir.path().join("log");
    let path = path.to_str().expect("utf-8 path");
    let key_file = dir.path().join("keys");
    std::fs::write(&key_file, format!("# the log's key\n4 {hex}\n")).expect("write keys");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let key_file = key_file.to_str().expect("utf-8 path");

    let output = redolog(&["dump", path, "--records", "--key-file", key_file]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("format 3"), "{stdout}");
    assert!(stdout.contains("|the secret paylo|"), "{stdout}");
    let output = redolog(&["verify", path, "--key-file", key_file]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("sound. 1 groups"), "{}", text(&output.stdout));

    let output = redolog(&["dump", path]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("is an encrypted log: give its keys"), "{}", text(&output.stderr));
    std::fs::set_permissions(key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let output = redolog(&["verify", path, "--key-file", key_file]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("accessible by others (mode 0644)"), "{}", text(&output.stderr));
}

/// An archive of 30 groups in segments of 4 KiB; returns the groups' ends.
fn sample_archive(dir: &Path) -> Vec<u64> {
    let config = Config::default().with_capacity_bytes(1 << 20);
    let log = std::sync::Arc::new(Log::open(dir.join("redo"), config).expect("create").0);
    let archiver =
        redolog::archive::Archiver::start_with_segments(&log, dir.join("archive"), 4096).expect("start the archiver");
    let ends = (0..30u8).map(|index| log.commit(&[index; 500], Durability::Synced).expect("commit").as_u64()).collect();
    log.close().expect("close");
    archiver.stop().expect("stop");
    ends
}

#[test]
fn archive_verify_accepts_a_sound_archive_and_names_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ends = sample_archive(dir.path());
    let archive = dir.path().join("archive");
    let path = archive.to_str().expect("utf-8 path");
    let output = redolog(&["archive", "verify", path]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("30 groups") && stdout.contains(&format!("..{}", ends[29])), "{stdout}");
    // A changed byte in the first (closed) segment.
    let mut names: Vec<_> =
        std::fs::read_dir(&archive).expect("list").map(|entry| entry.expect("entry").path()).collect();
    names.sort();
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&names[0]).expect("open");
    file.write_at(&[0xFF], 200).expect("damage");
    let output = redolog(&["archive", "verify", path]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains(names[0].to_str().expect("utf-8")) && stderr.contains("offset"), "{stderr}");
}

#[test]
fn dump_reads_an_archive_with_range_limit_records_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ends = sample_archive(dir.path());
    let path = dir.path().join("archive");
    let path = path.to_str().expect("utf-8 path");
    let output = redolog(&["dump", path, "--start", &ends[4].to_string(), "--limit", "3", "--records"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("archive of log "), "{stdout}");
    assert_eq!(group_lines(&stdout).len(), 3, "{stdout}");
    assert!(stdout.contains(&format!("group {}..{}", ends[4], ends[5])), "{stdout}");
    assert!(stdout.contains("record 0: 500 bytes") && stdout.contains("05 05 05"), "{stdout}");
    let output = redolog(&["dump", path, "--json", "--end", &ends[2].to_string()]);
    let lines: Vec<serde_json::Value> =
        text(&output.stdout).lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    assert_eq!(lines[0]["type"], "archive");
    assert_eq!(lines.iter().filter(|line| line["type"] == "group").count(), 3, "{lines:?}");
    // Bad input: a boundary that is not one, and flags that read logs only.
    let inside = (ends[1] + ends[2]) / 2;
    let output = redolog(&["dump", path, "--start", &inside.to_string()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("not a group boundary"), "{}", text(&output.stderr));
    let output = redolog(&["dump", path, "--stats"]);
    assert!(text(&output.stderr).contains("--stats reads a log, not an archive"), "{}", text(&output.stderr));
}
