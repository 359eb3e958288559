//! Goal: a failed write or sync of the archive stops the archiver with a
//! typed error, never acknowledges a group it did not sync, and leaves an
//! archive the next start resumes: every group acknowledged before the fault
//! is kept, and the archive ends equal to the log (docs/DESIGN.md §1.17).
//! Method: each of the archiver's failpoints (`archive.*` in
//! `redolog::FAILPOINTS`) fails once, on a workload with 4 KiB segments; the
//! log keeps running; the archiver is restarted and the archive compared
//! with what was committed. One binary of its own: failpoints are global to
//! the process.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::GroupImage;
use redolog::archive::Archiver;
use redolog::{Durability, Error, Log};

fn start(log: &Arc<Log>, dir: &Path) -> redolog::Result<Archiver> {
    Archiver::start_with_segments(log, dir.join("archive"), 4096)
}

fn commit(log: &Log, archiver: Option<&Archiver>, count: usize, groups: &mut Vec<GroupImage>) -> redolog::Result<()> {
    for _ in 0..count {
        let record = vec![groups.len() as u8; 300 + groups.len() % 700];
        let end = log.append(&record)?;
        groups.push((end, vec![record]));
        if let Some(archiver) = archiver {
            archiver.wait(end)?;
        }
        log.wait(end, Durability::Synced)?;
    }
    Ok(())
}

/// `name` fails once while the archiver runs; returns what happened.
fn fail_while_running(name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path().join("redo"), common::archive_log()).expect("open").0);
    let archiver = start(&log, dir.path()).expect("start");
    let mut groups = Vec::new();
    commit(&log, Some(&archiver), 20, &mut groups).expect("commit before the fault");
    let acknowledged = groups.len();
    fail::cfg(name, "1*return->off").expect("configure");
    let failed = commit(&log, Some(&archiver), 40, &mut groups);
    assert!(matches!(failed, Err(Error::ArchiverFailed { .. })), "{name}: {failed:?}");
    assert!(matches!(archiver.stop(), Err(Error::ArchiverFailed { .. })), "{name}: stop reports the failure");
    fail::remove(name);
    // The log went on; the archive holds every acknowledged group.
    let kept = common::archived(dir.path());
    assert_eq!(kept[..acknowledged], groups[..acknowledged], "{name}: acknowledged groups");
    commit(&log, None, 30, &mut groups).expect("commit without an archiver");
    let archiver = start(&log, dir.path()).expect("resume");
    commit(&log, Some(&archiver), 20, &mut groups).expect("commit after the resume");
    log.close().expect("close");
    archiver.stop().expect("stop");
    assert_eq!(common::archived(dir.path()), groups, "{name}: the archive equals the log");
}

#[test]
fn every_archiver_failpoint_stops_it_and_the_next_start_resumes() {
    let scenario = fail::FailScenario::setup();
    for name in ["archive.write", "archive.sync", "archive.create"] {
        fail_while_running(name);
    }
    // A failed cut of a torn tail: the start fails, the next one cuts it.
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path().join("redo"), common::archive_log()).expect("open").0);
    let archiver = start(&log, dir.path()).expect("start");
    let mut groups = Vec::new();
    commit(&log, Some(&archiver), 10, &mut groups).expect("commit");
    archiver.stop().expect("stop");
    let mut names: Vec<_> = std::fs::read_dir(dir.path().join("archive"))
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .collect();
    names.sort();
    let last = names.last().expect("a segment");
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(last).expect("open").write_all(&[0x5A; 50]).expect("tear");
    fail::cfg("archive.cut", "1*return->off").expect("configure");
    let refused = start(&log, dir.path());
    assert!(matches!(refused, Err(Error::Io { op: "fdatasync", .. })), "{refused:?}");
    fail::remove("archive.cut");
    let archiver = start(&log, dir.path()).expect("resume");
    commit(&log, Some(&archiver), 10, &mut groups).expect("commit");
    log.close().expect("close");
    archiver.stop().expect("stop");
    assert_eq!(common::archived(dir.path()), groups);
    scenario.teardown();
}
