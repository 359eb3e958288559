//! Goal: the archive holds every durable group of the log, byte for byte and
//! in LSN order, over wraps of the log and restarts of the process that
//! holds it; a commit acknowledged through `Archiver::wait` is in the synced
//! archive; a torn tail is cut off on resume and damage is reported, never
//! skipped (docs/DESIGN.md §1.17, FORMAT.md §9).
//! Method: workloads on a small log that wraps many times, with the archive
//! compared group by group against what was committed.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use common::GroupImage;
use redolog::archive::{Archive, Archiver};
use redolog::{Config, Durability, Error, Log};

/// A record of `index`: sizes from 1 byte to several blocks.
fn record(index: usize) -> Vec<u8> {
    vec![(index % 251) as u8; [1, 60, 700, 1500, 5][index % 5] + index % 13]
}

/// Opens the log and starts its archiver, with 16 KiB segments (many of
/// them) unless `one_segment`.
fn open_with(dir: &Path, config: &Config, one_segment: bool) -> (Arc<Log>, Archiver) {
    let log = Arc::new(Log::open(dir.join("redo"), config.clone()).expect("open").0);
    let archive = dir.join("archive");
    let archiver = if one_segment {
        Archiver::start(&log, archive)
    } else {
        Archiver::start_with_segments(&log, archive, 16 << 10)
    };
    (log, archiver.expect("start the archiver"))
}

fn open(dir: &Path, config: &Config) -> (Arc<Log>, Archiver) {
    open_with(dir, config, false)
}

/// Commits `count` records from `first`, checkpointing at the durable end
/// every 16 (the log's own space is free; only the archiver's consumer holds
/// it); returns the groups.
fn commit(log: &Log, first: usize, count: usize) -> Vec<GroupImage> {
    let mut groups = Vec::new();
    for index in first..first + count {
        let record = record(index);
        let end = log.commit(&record, [Durability::Synced, Durability::Written][index % 2]).expect("commit");
        groups.push((end, vec![record]));
        if index % 16 == 15 {
            log.checkpoint(log.durable_lsn()).expect("checkpoint");
        }
    }
    groups
}

/// The path of the archive's last segment.
fn last_segment(dir: &Path) -> std::path::PathBuf {
    let archive = dir.join("archive");
    let names: std::collections::BTreeSet<String> = std::fs::read_dir(&archive)
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
        .collect();
    archive.join(names.last().expect("a segment"))
}

fn assert_same(archived: &[GroupImage], committed: &[GroupImage]) {
    assert_eq!(archived.len(), committed.len(), "groups archived and committed");
    for (index, (got, want)) in archived.iter().zip(committed).enumerate() {
        assert_eq!(got, want, "group {index}");
    }
}

#[test]
fn the_archive_equals_the_log_over_wraps_and_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::archive_log();
    let mut committed = Vec::new();
    for session in 0..4 {
        let (log, archiver) = open(dir.path(), &config);
        committed.extend(commit(&log, session * 300, 300));
        log.close().expect("close");
        let end = archiver.stop().expect("stop");
        assert_eq!(end, committed.last().expect("committed").0, "session {session}: the archive reaches the log's end");
    }
    let bytes: usize = committed.iter().map(|(_, records)| records[0].len()).sum();
    assert!(bytes > 2 * (256 << 10), "the log wrapped at least twice ({bytes} bytes)");
    assert_same(&common::archived(dir.path()), &committed);
    let archive = Archive::open(dir.path().join("archive")).expect("open");
    let summary = archive.verify().expect("verify");
    assert_eq!((summary.groups, summary.torn_tail), (1200, None));
    assert!(archive.segment_count() > 5, "{} segments", archive.segment_count());
    // Reading from a group boundary in the middle gives the rest.
    let (middle, _) = committed[700];
    let rest: Vec<_> =
        archive.read_from(middle).expect("read_from").map(|group| group.expect("group").end_lsn()).collect();
    assert_eq!(rest, committed[701..].iter().map(|(end, _)| *end).collect::<Vec<_>>());
    let inside = archive.read_from(redolog::Lsn::from_u64(middle.as_u64() + 1));
    assert!(matches!(inside, Err(Error::InvalidLsn { .. })), "{inside:?}");
}

#[test]
fn a_crash_keeps_what_the_archiver_acknowledged_and_it_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::archive_log();
    let (log, archiver) = open(dir.path(), &config);
    let mut committed = commit(&log, 0, 200);
    let acked = committed.last().expect("committed").0;
    archiver.wait(acked).expect("archived");
    // The process dies: the log is not closed, the archiver not stopped.
    drop(archiver);
    let log = Arc::into_inner(log).expect("the archiver released the log");
    log.simulate_crash();
    // And the archiver's last entry was torn: half an entry after the last one.
    let last = last_segment(dir.path());
    OpenOptions::new().append(true).open(&last).expect("open segment").write_all(&[0xA5; 40]).expect("tear");
    let (log, archiver) = open(dir.path(), &config);
    // A Written commit may have died with the process.
    committed.retain(|(end, _)| *end <= log.end_lsn());
    assert!(log.end_lsn() >= acked);
    committed.extend(commit(&log, 200, 200));
    log.close().expect("close");
    archiver.stop().expect("stop");
    assert!(common::archived(dir.path()).iter().any(|(end, _)| *end == acked));
    assert_same(&common::archived(dir.path()), &committed);
}

#[test]
fn a_synchronous_commit_is_in_the_synced_archive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, archiver) = open(dir.path(), &common::archive_log());
    for index in 0..20 {
        let end = log.commit(&record(index), Durability::Synced).expect("commit");
        archiver.wait(end).expect("archived");
        let archive = common::archived(dir.path());
        assert_eq!(archive.last().map(|(end, _)| *end), Some(end), "the acknowledged group is the archive's last");
    }
}

#[test]
fn damage_inside_the_archive_is_corruption_not_a_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::archive_log().with_capacity_bytes(8 << 20);
    let (log, archiver) = open_with(dir.path(), &config, true);
    let committed = commit(&log, 0, 4000);
    log.close().expect("close");
    archiver.stop().expect("stop");
    drop(log);
    assert_same(&common::archived(dir.path()), &committed);
    let archive = Archive::open(dir.path().join("archive")).expect("open");
    let segment = archive.dir().join(format!("{:016x}.seg", archive.start_lsn().as_u64()));
    let mut bytes = std::fs::read(&segment).expect("read");
    assert!(bytes.len() > 3 << 19, "the archive holds more than a batch ({} bytes)", bytes.len());
    bytes[100] ^= 1;
    std::fs::write(&segment, &bytes).expect("write");
    // Damage far from the end of the last segment is no torn tail: reading
    // it, verifying it and resuming there are all `Corruption`.
    let verified = Archive::open(dir.path().join("archive")).expect("open").verify();
    assert!(matches!(verified, Err(Error::Corruption { .. })), "{verified:?}");
    let log = Arc::new(Log::open(dir.path().join("redo"), config).expect("reopen").0);
    let resumed = Archiver::start(&log, dir.path().join("archive"));
    assert!(matches!(resumed, Err(Error::Corruption { .. })), "{resumed:?}");
}

#[test]
fn damage_in_a_closed_segment_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, archiver) = open(dir.path(), &common::archive_log());
    commit(&log, 0, 300);
    log.close().expect("close");
    archiver.stop().expect("stop");
    let archive = Archive::open(dir.path().join("archive")).expect("open");
    let second = archive.dir().join(
        std::fs::read_dir(archive.dir())
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .nth(1)
            .expect("a second segment"),
    );
    let mut bytes = std::fs::read(&second).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&second, &bytes).expect("write");
    let verified = archive.verify();
    assert!(matches!(&verified, Err(Error::Corruption { path, .. }) if *path == second), "{verified:?}");
}

#[test]
fn unsafe_foreign_and_encrypted_archives_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open_dir = dir.path().join("open-archive");
    std::fs::create_dir(&open_dir).expect("mkdir");
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let log = Arc::new(Log::open(dir.path().join("redo"), common::archive_log()).expect("open").0);
    let refused = Archiver::start(&log, &open_dir);
    assert!(matches!(&refused, Err(Error::UnsafeArchive { path, .. }) if *path == open_dir), "{refused:?}");
    // An archive of another log.
    let other = Arc::new(Log::open(dir.path().join("other"), common::archive_log()).expect("open").0);
    let archiver = Archiver::start(&other, dir.path().join("archive")).expect("start");
    other.commit(b"other", Durability::Synced).expect("commit");
    other.close().expect("close");
    archiver.stop().expect("stop");
    let foreign = Archiver::start(&log, dir.path().join("archive"));
    assert!(matches!(foreign, Err(Error::ForeignFile { .. })), "{foreign:?}");
    // A stray file in the archive.
    std::fs::write(dir.path().join("archive").join("notes.txt"), b"x").expect("write");
    assert!(matches!(Archive::open(dir.path().join("archive")), Err(Error::NotAnArchive { .. })));
    let encrypted = Arc::new(Log::open(dir.path().join("encrypted"), common::small_encrypted_log()).expect("open").0);
    let refused = Archiver::start(&encrypted, dir.path().join("encrypted-archive"));
    assert!(matches!(refused, Err(Error::EncryptedArchive { .. })), "{refused:?}");
}

/// The archive copies what the log wrote before the log syncs it; a power
/// loss then leaves the archive ahead of the log. The next start cuts it
/// back to the log's recovered end and goes on from there.
#[test]
fn an_archive_ahead_of_a_log_that_lost_its_unsynced_tail_is_cut_back() {
    use redolog::storage::{CrashMode, CrashStorage};
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = CrashStorage::new();
    let log_dir = Path::new("/log");
    // The Written groups stay unsynced until the power loss: no flush syncs
    // them (on a loaded machine the 1 s flush did).
    let config = common::archive_log().with_flush_interval(Config::FLUSH_INTERVAL_MAX);
    let log = Arc::new(Log::open_with_storage(log_dir, config.clone(), storage.clone()).expect("create").0);
    let archiver = Archiver::start(&log, dir.path().join("archive")).expect("start");
    let mut committed = Vec::new();
    for index in 0..20 {
        let record = record(index);
        let durability = if index < 10 { Durability::Synced } else { Durability::Written };
        committed.push((log.commit(&record, durability).expect("commit"), vec![record]));
    }
    let written = committed.last().expect("committed").0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while archiver.archived_lsn() < written {
        assert!(std::time::Instant::now() < deadline, "the archive follows the written log");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Power loss: what the log did not sync is gone; the archive synced it.
    // (The archive lives on the log's storage: one crash image holds both.)
    let image = storage.state().crash(CrashMode::DropUnsynced).to_storage();
    drop(archiver);
    Arc::into_inner(log).expect("the archiver released the log").simulate_crash();
    let log = Arc::new(Log::open_with_storage(log_dir, config, image.clone()).expect("reopen").0);
    let recovered = log.end_lsn();
    assert!(recovered < written, "the Written groups were lost ({recovered} < {written})");
    let archived = common::archived_in(dir.path(), image.clone());
    assert_eq!(archived.last().map(|(end, _)| *end), Some(written), "the archive is ahead");
    committed.retain(|(end, _)| *end <= recovered);
    // The log writes other groups where the archive still holds the lost
    // ones, before the archiver starts again: it must not splice them.
    committed.extend(commit(&log, 100, 30));
    let archiver = Archiver::start(&log, dir.path().join("archive")).expect("resume");
    committed.extend(commit(&log, 200, 20));
    log.close().expect("close");
    archiver.stop().expect("stop");
    assert_same(&common::archived_in(dir.path(), image), &committed);
}

/// `stop` copies what the log had written when it was asked, then returns,
/// however fast commits go on. Before the fix it hung: with the log full up
/// to the archiver's consumer, `LogReader::next_timeout` waited for `synced`
/// to pass its position — which it had, inside the next group, where the
/// writer waited for file space — and spun for ever, past its time limit;
/// the consumer never advanced and the committer never got its space.
/// After that fix it still hung in some runs: the test's own committer,
/// waiting at a file limit the checkpoint set (nobody checkpoints here),
/// never returned to see that it should stop (gdb: `archiver.stop()` had
/// returned; the committer waited for file space at the scope's end).
#[test]
fn stop_returns_while_commits_go_on() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, archiver) = open(dir.path(), &common::archive_log());
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut index = 0;
            while !done.load(Ordering::Relaxed) {
                if log.commit(&record(index), Durability::Synced).is_err() {
                    break;
                }
                index += 1;
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        let asked = std::time::Instant::now();
        let end = archiver.stop().expect("stop");
        assert!(asked.elapsed() < std::time::Duration::from_secs(5), "stop took {:?}", asked.elapsed());
        assert!(end > redolog::Lsn::from_u64(0));
        // Nobody advances the stopped archiver's consumer, and nobody
        // checkpoints: the committer may be waiting at the file limit. Let
        // it go: drop the consumer, and checkpoint what is durable (without
        // the checkpoint the test hung, the writer waiting for it).
        done.store(true, Ordering::Relaxed);
        log.drop_consumer(redolog::archive::CONSUMER_NAME).expect("drop the consumer");
        log.checkpoint(log.durable_lsn()).expect("checkpoint");
    });
}

/// A checkpoint may lie inside a group (`Log::checkpoint` takes any data
/// position; the log itself checkpoints at its durable end when it is full,
/// and that end may cut a group). A new archive then starts at the first
/// group boundary after its consumer's position: it holds whole groups.
/// Before, `Archiver::start` failed there with `InvalidLsn`.
#[test]
fn a_new_archive_at_a_checkpoint_inside_a_group_starts_at_the_next_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path().join("redo"), common::archive_log()).expect("open").0);
    let (start, end) = log.append_group_range(&[&[7u8; 3000]]).expect("append");
    log.wait(end, Durability::Synced).expect("sync");
    // 100 data bytes into the group's second block: inside the group.
    let inside = redolog::Lsn::from_u64((start.as_u64() / 512 + 1) * 512 + 16 + 100);
    assert!(inside > start && inside < end);
    log.checkpoint(inside).expect("checkpoint inside the group");
    let archiver = Archiver::start(&log, dir.path().join("archive")).expect("start at a checkpoint inside a group");
    let after = commit(&log, 0, 20);
    archiver.wait(after.last().expect("groups").0).expect("archived");
    log.close().expect("close");
    archiver.stop().expect("stop");
    assert_same(&common::archived(dir.path()), &after);
}

/// The archiver moves its consumer lazily (an eighth of the log behind, or
/// every second), so a crash leaves its archive ahead of its consumer. The
/// resumed archiver must move the consumer to the archive's end even with
/// nothing new to copy. Before the fix it hung (the simulation, seed 221):
/// the next group straddled the limit that consumer set, so the writer
/// waited for space and the archiver for a whole group to copy, and the
/// consumer — knowing only the ends of groups it copied itself — stayed.
#[test]
fn a_resumed_archiver_frees_the_log_its_archive_already_holds() {
    use redolog::storage::{CrashMode, CrashStorage};
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = CrashStorage::new();
    let log_dir = Path::new("/log");
    let config = common::archive_log().with_capacity_bytes(Config::CAPACITY_BYTES_MIN);
    let log = Arc::new(Log::open_with_storage(log_dir, config.clone(), storage.clone()).expect("create").0);
    let archiver = Archiver::start(&log, dir.path().join("archive")).expect("start");
    let mut end = redolog::Lsn::from_u64(0);
    for index in 0..4 {
        end = log.commit(&record(index * 5 + 3), Durability::Synced).expect("commit");
    }
    archiver.wait(end).expect("archived");
    log.checkpoint(end).expect("checkpoint");
    let held = log.consumers().into_iter().find(|info| info.name == "archiver").expect("the archiver's consumer").lsn;
    // The consumer moves lazily (once a second): behind the archive's end
    // unless a loaded machine took that long to get here; the rest of the
    // test holds either way, only the case it was written for needs it.
    if held == end {
        eprintln!("the archiver's consumer caught up with the archive's end {end} before the image: the lazy case did not arise");
    }
    assert!(held <= end, "the consumer {held} is past the archive's end {end}");
    // Power loss: log and archive synced to `end`, the consumer behind.
    let image = storage.state().crash(CrashMode::DropUnsynced).to_storage();
    drop(archiver);
    Arc::into_inner(log).expect("the archiver released the log").simulate_crash();
    let log = Arc::new(Log::open_with_storage(log_dir, config, image).expect("reopen").0);
    let archiver = Archiver::start(&log, dir.path().join("archive")).expect("resume");
    // One group from the archive's end to past the consumer's limit.
    let room = log.space().writable_end_lsn.as_u64() - log.end_lsn().as_u64();
    let last = log.commit(&vec![9u8; room as usize + 1000], Durability::Buffered).expect("append");
    let (done, closed) = std::sync::mpsc::channel();
    let closing = log.clone();
    std::thread::spawn(move || done.send(closing.close()));
    let outcome = closed.recv_timeout(std::time::Duration::from_secs(20));
    let space = log.space();
    assert!(matches!(outcome, Ok(Ok(()))), "close returned {outcome:?}; the log's space: {space:?}");
    assert_eq!(archiver.stop().expect("stop"), last, "archived to the log's end");
}
