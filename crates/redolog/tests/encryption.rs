//! Goal: an encrypted log (docs/DESIGN.md §1.15, FORMAT.md §6.1) returns
//! exactly what was appended — through recovery, the live reader and
//! inspection — keeps no record in clear on disk, names the key id in every
//! key error, rotates keys without rewriting, and reports every changed byte
//! of a group as corruption, never other bytes (INV-30).

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;

use redolog::encryption::{Encryption, Key, Keys};
use redolog::{inspect, Config, Durability, Error, Log, Lsn};

fn keys(ids: &[u32]) -> Encryption {
    let mut keys = Keys::new();
    for id in ids {
        keys = keys.with_key(*id, Key::from_bytes([*id as u8; 32]));
    }
    Encryption::new(keys)
}

fn encrypted(encryption: &Encryption) -> Config {
    common::small_log().with_encryption(encryption.clone())
}

/// Groups of every shape: empty, tiny, several records, across blocks and
/// across the 8 KiB ring.
fn workload() -> Vec<Vec<Vec<u8>>> {
    vec![
        vec![],
        vec![b"x".to_vec()],
        vec![b"SECRET-one".to_vec(), Vec::new(), b"SECRET-two".to_vec()],
        vec![vec![0xA5; 700]],
        vec![b"SECRET-large".repeat(1000)],
        vec![b"SECRET-last".to_vec()],
    ]
}

fn append_all(log: &Log, groups: &[Vec<Vec<u8>>]) -> Vec<Lsn> {
    groups
        .iter()
        .map(|records| {
            let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
            log.append_group(&slices).expect("append")
        })
        .collect()
}

fn records(group: &redolog::Group) -> Vec<Vec<u8>> {
    group.records().map(<[u8]>::to_vec).collect()
}

fn file_bytes(dir: &Path) -> Vec<u8> {
    (0..4).flat_map(|index| std::fs::read(dir.join(format!("redo.{index:04}"))).expect("read file")).collect()
}

#[test]
fn an_encrypted_log_returns_what_was_appended_and_keeps_nothing_in_clear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let encryption = keys(&[1]);
    let (log, _) = Log::open(dir.path(), encrypted(&encryption)).expect("create");
    let start = log.end_lsn();
    let groups = workload();
    let ends = append_all(&log, &groups);
    log.wait(*ends.last().expect("groups"), Durability::Synced).expect("sync");
    // The live reader opens the seals too.
    let live: Vec<Vec<Vec<u8>>> =
        log.read_from(start).expect("reader").map(|group| records(&group.expect("group"))).collect();
    assert_eq!(live, groups);
    log.close().expect("close");

    let bytes = file_bytes(dir.path());
    let found = bytes.windows(6).filter(|window| window == b"SECRET").count();
    assert_eq!(found, 0, "records must not be on disk in clear");

    let (_, recovery) = Log::open(dir.path(), encrypted(&encryption)).expect("reopen");
    let recovered: Vec<Vec<Vec<u8>>> = recovery.map(|group| records(&group.expect("group"))).collect();
    assert_eq!(recovered, groups);
}

#[test]
fn key_errors_name_the_key_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), encrypted(&keys(&[7]))).expect("create");
    log.commit(b"payload", Durability::Synced).expect("commit");
    drop(log);

    let plain = common::small_log().with_encryption(None);
    assert!(matches!(Log::open(dir.path(), plain.clone()), Err(Error::KeyRequired { .. })));
    // Another key under the same id: its check differs from the recorded one.
    let wrong = Encryption::new(Keys::new().with_key(7, Key::from_bytes([0xEE; 32])));
    match Log::open(dir.path(), encrypted(&wrong)) {
        Err(Error::WrongKey { key_id: 7, .. }) => {}
        other => panic!("wrong key: {other:?}"),
    }
    // The provider's current key is 8; the blocks need 7, which it lacks:
    // recovery opens every block from the checkpoint on, so the open says so.
    match Log::open(dir.path(), encrypted(&keys(&[8]))) {
        Err(Error::MissingKey { key_id: 7, needed }) => assert!(needed.contains("LSN"), "{needed}"),
        other => panic!("missing key: {:?}", other.map(|_| ())),
    }
    // Inspection without any key cannot find the groups' ends either.
    assert!(matches!(inspect::inspect(dir.path()), Err(Error::KeyRequired { .. })));
    // Encryption cannot be switched on for a log created without it.
    let clear = tempfile::tempdir().expect("tempdir");
    drop(Log::open(clear.path(), plain).expect("create"));
    assert!(matches!(Log::open(clear.path(), encrypted(&keys(&[1]))), Err(Error::NotEncrypted { .. })));
}

#[test]
fn a_rotated_key_seals_new_groups_and_the_old_key_still_reads_old_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), encrypted(&keys(&[1]))).expect("create");
    log.commit(b"under key 1", Durability::Synced).expect("commit");
    drop(log); // a crash: nothing checkpointed
    let both = keys(&[1, 2]);
    let (log, recovery) = Log::open(dir.path(), encrypted(&both)).expect("reopen with key 2 current");
    assert_eq!(recovery.count(), 1);
    let end = log.commit(b"under key 2", Durability::Synced).expect("commit");
    drop(log);
    let (log, recovery) = Log::open(dir.path(), encrypted(&both)).expect("reopen");
    let read: Vec<Vec<Vec<u8>>> = recovery.map(|group| records(&group.expect("group"))).collect();
    assert_eq!(read, [vec![b"under key 1".to_vec()], vec![b"under key 2".to_vec()]]);
    // Once a checkpoint passes every group of key 1, key 1 may be retired.
    log.checkpoint(end).expect("checkpoint");
    log.close().expect("close");
    let (log, recovery) = Log::open(dir.path(), encrypted(&keys(&[2]))).expect("key 1 retired");
    assert_eq!(recovery.count(), 0);
    log.commit(b"still key 2", Durability::Synced).expect("commit");
}

/// Every single-byte change of an encrypted log's blocks — block header,
/// ciphertext, tag, key fields — with the block's CRC recomputed (an
/// attacker, not a torn write), is reported as corruption; no group returned
/// differs from what was appended (INV-30).
#[test]
fn every_changed_byte_of_an_encrypted_group_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let encryption = keys(&[1]);
    let config = encrypted(&encryption);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("create");
    let groups = vec![vec![b"alpha".to_vec(), b"beta".to_vec()], vec![vec![0x33; 600]], vec![b"omega".to_vec()]];
    let ends = append_all(&log, &groups);
    let start = inspect::inspect_with_keys(dir.path(), &encryption).expect("inspect").first_lsn.as_u64();
    let end = ends.last().expect("groups").as_u64();
    log.close().expect("close");
    let seed = inspect::inspect_with_keys(dir.path(), &encryption).expect("inspect").log_id.to_le_bytes();

    let (mut changed, mut corruption) = (0, 0);
    // Every byte of every block the groups lie in, but the CRC itself.
    for lsn in start / 512 * 512..end.div_ceil(512) * 512 {
        let offset_in_block = lsn % 512;
        if offset_in_block >= 508 {
            continue;
        }
        let (path, block_offset) = common::place(dir.path(), &config, lsn / 512);
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open");
        let mut block = [0u8; 512];
        file.read_exact_at(&mut block, block_offset).expect("read block");
        let original = block;
        block[offset_in_block as usize] ^= 0x41;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&seed), &block[..508]);
        block[508..].copy_from_slice(&crc.to_le_bytes());
        file.write_all_at(&block, block_offset).expect("change a byte");
        changed += 1;

        let outcome = inspect::inspect_with_keys(dir.path(), &encryption).map(|inspection| {
            let mut returned = Vec::new();
            let mut failure = None;
            for group in inspection.groups {
                match group {
                    Ok(group) => returned.push(records(&group)),
                    Err(error) => {
                        failure = Some(error);
                        break;
                    }
                }
            }
            (returned, failure)
        });
        match outcome {
            Ok((returned, failure)) => {
                assert!(groups.starts_with(&returned), "LSN {lsn}: returned other bytes: {returned:?}");
                match failure {
                    Some(Error::Corruption { .. }) => corruption += 1,
                    other => panic!("LSN {lsn}: expected corruption, got {other:?} after {} groups", returned.len()),
                }
            }
            Err(Error::Corruption { .. }) => corruption += 1,
            Err(other) => panic!("LSN {lsn}: expected corruption, got {other}"),
        }
        file.write_all_at(&original, block_offset).expect("restore");
    }
    assert!(changed > 600, "{changed} bytes changed");
    assert_eq!(corruption, changed);
}

/// Two copies of one log that both write (a restored backup, a rolled-back
/// snapshot) open with the same next epoch and append at the same LSN: the
/// session's random salt still gives them different cipher keys, so the same
/// record at the same LSN is sealed to different bytes (no nonce reuse).
#[test]
fn two_copies_of_a_log_never_seal_with_the_same_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let encryption = keys(&[1]);
    let (original, copy) = (dir.path().join("original"), dir.path().join("copy"));
    let (log, _) = Log::open(&original, encrypted(&encryption)).expect("create");
    log.commit(b"before the copy", Durability::Synced).expect("commit");
    log.close().expect("close");
    std::fs::create_dir(&copy).expect("mkdir");
    for index in 0..4 {
        let name = format!("redo.{index:04}");
        std::fs::copy(original.join(&name), copy.join(&name)).expect("copy a file");
    }
    let mut sealed = Vec::new();
    for path in [&original, &copy] {
        let (log, _) = Log::open(path, encrypted(&encryption)).expect("open a copy");
        let end = log.commit(b"the same record", Durability::Synced).expect("commit");
        log.close().expect("close");
        sealed.push((end, file_bytes(path)));
    }
    assert_eq!(sealed[0].0, sealed[1].0, "both appended at the same LSN");
    assert_ne!(sealed[0].1, sealed[1].1, "the copies sealed the same group identically");
}

/// `read_from` below the checkpoint, in a group sealed with a key the
/// checkpoint's table no longer records: opened with the provider's key.
#[test]
fn a_group_under_a_retired_key_below_the_checkpoint_is_still_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), encrypted(&keys(&[1]))).expect("create");
    let start = log.end_lsn();
    let end = log.commit(b"under key 1", Durability::Synced).expect("commit");
    log.checkpoint(end).expect("checkpoint");
    log.close().expect("close");
    let (log, _) = Log::open(dir.path(), encrypted(&keys(&[1, 2]))).expect("key 2 current");
    let read: Vec<Vec<Vec<u8>>> =
        log.read_from(start).expect("reader").map(|group| records(&group.expect("group"))).collect();
    assert_eq!(read, [vec![b"under key 1".to_vec()]]);
}

/// A key file is read only if it is a regular file nobody else may read:
/// a symbolic link, a FIFO or a group-readable file is refused, never read.
#[test]
fn an_unsafe_key_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("keys");
    std::fs::write(&file, format!("1 {}\n", "ab".repeat(32))).expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(Keys::from_file(&file).is_ok());
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from(0o600), 0)
        .expect("mkfifo");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    for (path, reason) in [(&link, "symbolic link"), (&fifo, "not a regular file"), (&file, "mode 0640")] {
        match Keys::from_file(path) {
            Err(Error::UnsafeKeyFile { reason: found, .. }) => assert!(found.contains(reason), "{found}"),
            other => panic!("{}: {other:?}", path.display()),
        }
    }
}

/// The session fields of the block `block` as it lies on disk: the key id
/// and session a sealed block names (FORMAT.md §6.1, bytes 492..500).
fn sealed_by(dir: &Path, config: &Config, block: u64) -> (u32, u32) {
    let (path, offset) = common::place(dir, config, block);
    let bytes = common::peek(&path, offset + 492, 8);
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    (word(0), word(4))
}

/// A torn tail's repair rewrites the block holding the log's new end under
/// the session that repairs it, never under the crashed one: that session
/// may have spent the block's nonce on other bytes (docs/DESIGN.md §1.15).
/// The repaired log reads back what was durable and goes on.
#[test]
fn a_torn_tail_is_repaired_under_the_new_session() {
    use redolog::storage::{CrashMode, CrashStorage};
    let config = encrypted(&keys(&[1]));
    let storage = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new("/log"), config.clone(), storage.clone()).expect("create");
    let durable = log.commit(b"durable", Durability::Synced).expect("commit");
    let torn = log.commit(&vec![0x5A; 2000], Durability::Written).expect("commit");
    // A crash that kept every write, synced or not; laid out in a directory.
    let image = storage.state().crash(CrashMode::KeepAll);
    drop(log);
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, bytes) in &image.files {
        std::fs::write(dir.path().join(path.file_name().expect("a file")), bytes).expect("write a file");
    }
    let end_block = durable.as_u64() / 512;
    let (key_id, crashed) = sealed_by(dir.path(), &config, end_block);
    assert_eq!(key_id, 1);
    // The torn group's last block never reached the disk.
    let (path, offset) = common::place(dir.path(), &config, (torn.as_u64() - 1) / 512);
    common::patch(&path, offset, &[0u8; 512]);

    let (log, recovery) = Log::open(dir.path(), config.clone()).expect("reopen");
    assert!(matches!(recovery.end(), redolog::LogEnd::TornTail { truncated_at, .. } if truncated_at == durable));
    let read: Vec<Vec<Vec<u8>>> = recovery.map(|group| records(&group.expect("group"))).collect();
    assert_eq!(read, [vec![b"durable".to_vec()]]);
    let (_, repaired_by) = sealed_by(dir.path(), &config, end_block);
    assert!(repaired_by > crashed, "the repair sealed under session {repaired_by}, the crashed one was {crashed}");
    let after = log.commit(b"after the repair", Durability::Synced).expect("commit");
    drop(log);
    let (_, recovery) = Log::open(dir.path(), config).expect("reopen the repaired log");
    let groups = common::collect(recovery);
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[1].end_lsn(), after);
}

/// Format version 2 (groups sealed one by one) was replaced by version 3
/// before any release: a log that names it is refused by its version, not
/// misread.
#[test]
fn a_version_2_log_is_refused_by_its_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), encrypted(&keys(&[1]))).expect("create");
    log.close().expect("close");
    let path = dir.path().join("redo.0000");
    let mut header = common::peek(&path, 0, 512);
    assert_eq!(&header[8..12], &3u32.to_le_bytes(), "an encrypted log is written as version 3");
    header[8..12].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32c::crc32c(&header[..508]);
    header[508..].copy_from_slice(&crc.to_le_bytes());
    common::patch(&path, 0, &header);
    match Log::open(dir.path(), encrypted(&keys(&[1]))) {
        Err(error @ Error::UnsupportedVersion { found: 2, .. }) => {
            assert!(error.to_string().contains("format version 2"), "{error}")
        }
        other => panic!("expected UnsupportedVersion, got {:?}", other.map(|_| ())),
    }
}
