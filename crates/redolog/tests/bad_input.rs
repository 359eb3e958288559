//! Goal: bad input gets a typed error that names what and where — never a panic,
//! never a silent truncation or a fresh log over someone else's data.
//! Cases: a directory holding other files, a file that is not a redolog file, a
//! file from another log, an unknown format version, a missing or truncated file,
//! an invalid configuration, LSNs outside the log, and a log directory path that
//! is a regular file. Each test also checks the message names the file.

mod common;

use std::fs;

use redolog::{Config, Durability, Error, Log, Lsn};

fn new_log(dir: &std::path::Path) -> Config {
    let config = common::config(32, 8192);
    let (log, _) = Log::open(dir, config.clone()).expect("create");
    log.commit(b"data", Durability::Synced).expect("commit");
    log.close().expect("close");
    config
}

fn open_error(dir: &std::path::Path, config: Config) -> Error {
    match Log::open(dir, config) {
        Ok(_) => panic!("{} opened although it is damaged", dir.display()),
        Err(error) => error,
    }
}

#[test]
fn a_directory_with_other_files_is_not_a_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("important.db"), b"user data").expect("write");
    let error = open_error(dir.path(), common::config(32, 8192));
    assert!(matches!(error, Error::NotALog { .. }), "{error}");
    assert!(error.to_string().contains("important.db"), "{error}");
    assert_eq!(fs::read(dir.path().join("important.db")).expect("read"), b"user data", "left untouched");
}

#[test]
fn a_file_without_the_magic_is_not_a_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = new_log(dir.path());
    let path = dir.path().join("redo.0000");
    common::patch(&path, 0, b"NOTALOG!");
    let error = open_error(dir.path(), config);
    assert!(matches!(error, Error::NotALog { .. }), "{error}");
    assert!(error.to_string().contains("redo.0000"), "{error}");
}

#[test]
fn a_file_from_another_log_is_foreign() {
    let (one, two) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let config = new_log(one.path());
    new_log(two.path());
    fs::copy(two.path().join("redo.0002"), one.path().join("redo.0002")).expect("copy");
    let error = open_error(one.path(), config);
    match &error {
        Error::ForeignFile { path, found, expected } => {
            assert!(path.ends_with("redo.0002"), "{error}");
            assert_ne!(found, expected);
        }
        other => panic!("expected ForeignFile, got {other}"),
    }
}

#[test]
fn an_unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = new_log(dir.path());
    let path = dir.path().join("redo.0000");
    // A well-formed header of version 99: patch the version, recompute the CRC
    // (FORMAT.md §2), so only the version is wrong.
    let mut header = common::peek(&path, 0, 512);
    header[8..12].copy_from_slice(&99u32.to_le_bytes());
    let crc = crc32c::crc32c(&header[..508]);
    header[508..].copy_from_slice(&crc.to_le_bytes());
    common::patch(&path, 0, &header);
    match open_error(dir.path(), config) {
        Error::UnsupportedVersion { path: named, found: 99, supported: 3 } => assert_eq!(named, path),
        other => panic!("expected UnsupportedVersion, got {other}"),
    }
}

#[test]
fn a_missing_or_truncated_file_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = new_log(dir.path());
    let path = dir.path().join("redo.0003");
    let full = fs::read(&path).expect("read");
    fs::remove_file(&path).expect("remove");
    let error = open_error(dir.path(), config.clone());
    assert!(matches!(error, Error::MissingFile { .. }), "{error}");
    assert!(error.to_string().contains("redo.0003"), "{error}");

    fs::write(&path, &full[..full.len() - 4096]).expect("write truncated");
    let error = open_error(dir.path(), config);
    assert!(matches!(error, Error::MissingFile { .. }), "{error}");
    assert!(error.to_string().contains("redo.0003"), "{error}");
}

#[test]
fn invalid_configurations_are_rejected_before_touching_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = [
        Config::default().with_capacity_bytes(4096),
        Config::default().with_buffer_bytes(1000),
        Config::default().with_group_bytes_max(0),
        Config::default().with_flush_interval(std::time::Duration::ZERO),
    ];
    for config in bad {
        let error = open_error(&dir.path().join("log"), config.clone());
        assert!(matches!(error, Error::InvalidConfig { .. }), "{config:?}: {error}");
    }
    assert!(!dir.path().join("log").exists(), "nothing was created");
}

#[test]
fn lsns_outside_the_log_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::config(32, 8192)).expect("open");
    let end = log.commit(b"x", Durability::Synced).expect("commit");
    let beyond = Lsn::from_u64(end.as_u64() + 10_000);
    assert!(matches!(log.wait(beyond, Durability::Synced), Err(Error::LsnOutOfRange { .. })));
    assert!(matches!(log.checkpoint(beyond), Err(Error::LsnOutOfRange { .. })));
    // Offset 3 of a block is inside its header: not a position in the log.
    let in_header = Lsn::from_u64(end.as_u64() / 512 * 512 + 3);
    assert!(matches!(log.checkpoint(in_header), Err(Error::InvalidLsn { .. })));
    log.commit(b"still fine", Durability::Synced).expect("errors do not poison");
}

#[test]
fn a_regular_file_as_the_log_directory_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plain-file");
    fs::write(&path, b"x").expect("write");
    let error = open_error(&path, common::config(32, 8192));
    assert!(matches!(error, Error::Io { .. }), "{error}");
    assert!(error.to_string().contains("plain-file"), "{error}");
}

/// Found by the `mutated_log` fuzzer: open used to take files 1..3 without
/// `redo.0000` for a crashed creation, delete them and create a new log.
#[test]
fn a_log_that_lost_its_first_file_is_refused_not_recreated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = new_log(dir.path());
    let second = fs::read(dir.path().join("redo.0001")).expect("read");
    fs::remove_file(dir.path().join("redo.0000")).expect("remove");
    match open_error(dir.path(), config) {
        Error::MissingFile { path, reason } => {
            assert!(path.ends_with("redo.0000"), "{}", path.display());
            assert!(reason.contains("redo.0001"), "{reason}");
        }
        other => panic!("expected MissingFile, got {other}"),
    }
    assert_eq!(fs::read(dir.path().join("redo.0001")).expect("read"), second, "left untouched");
    assert!(!dir.path().join("redo.0000").exists(), "no new log was created");
}
