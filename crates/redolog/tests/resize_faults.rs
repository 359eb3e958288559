//! Goal: a failure at any storage operation of a resize, or while open
//! settles one a crash left, loses no acknowledged group and leaves a log
//! that opens (docs/DESIGN.md §1.18, INV-34).
//! Method: the resize failpoints (`redolog::FAILPOINTS`, `resize.*`), each
//! failing at each of its hits. Failpoints are global to the process, so
//! these tests live apart from `tests/resize.rs` and take turns.

mod common;

use std::path::Path;

use redolog::storage::MemStorage;
use redolog::{Durability, Error, Log, Lsn};

const DIR: &str = "/log";

/// One test at a time: each configures failpoints the other's resizes hit.
static ONE_AT_A_TIME: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Four files of `blocks` log blocks each.
fn capacity(blocks: u64) -> u64 {
    common::config(blocks, 8192).capacity_bytes
}

fn records(index: usize) -> Vec<Vec<u8>> {
    let sizes: [usize; 5] = [1, 300, 497, 1300, 2500];
    vec![vec![(index % 251) as u8; sizes[index % sizes.len()]]]
}

/// Every resize failpoint, failing at each of its hits: the resize returns
/// the error; the log either goes on (before the commit point) or is
/// poisoned; reopened, it holds every acknowledged group at one of the two
/// capacities.
#[cfg(feature = "failpoints")]
#[test]
fn a_failure_at_any_step_of_a_resize_loses_no_acknowledged_group() {
    let _alone = ONE_AT_A_TIME.lock();
    let scenario = fail::FailScenario::setup();
    let resize_points: Vec<&str> = redolog::FAILPOINTS
        .iter()
        .copied()
        .filter(|name| name.starts_with("resize.") && !name.contains("settle"))
        .collect();
    let mut runs = 0;
    for point in &resize_points {
        for hit in 0.. {
            let storage = MemStorage::new();
            let (log, _) =
                Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone()).expect("create");
            let mut appended = Vec::new();
            for index in 0..40 {
                let group = records(index);
                let end = log.commit(&group[0], Durability::Synced).expect("commit");
                appended.push((end, group));
            }
            fail::cfg(*point, &format!("{hit}*off->1*return->off")).expect("failpoint");
            let result = log.resize(capacity(96));
            fail::cfg(*point, "off").expect("failpoint off");
            if result.is_ok() {
                assert!(hit > 0, "{point} is never reached by a resize");
                drop(log);
                break;
            }
            runs += 1;
            // Whatever happened, the log goes on or is poisoned; never a wrong answer.
            let after = log.commit(b"after", Durability::Synced);
            if let Ok(end) = after {
                appended.push((end, vec![b"after".to_vec()]));
            }
            drop(log);
            let context = format!("{point} failing at hit {hit}");
            let (log, recovery) = Log::open_with_storage(Path::new(DIR), common::small_log(), storage.clone())
                .unwrap_or_else(|error| panic!("{context}: reopen: {error}"));
            let groups = common::group_images(recovery, &context);
            let end = common::assert_recovered_prefix(&context, Lsn::from_u64(0), &groups, &appended);
            assert_eq!(end, appended.last().expect("groups").0, "{context}: acknowledged groups lost");
            assert!([capacity(32), capacity(96)].contains(&log.capacity_bytes()), "{context}");
        }
    }
    assert!(runs >= resize_points.len(), "{runs} failing runs");
    eprintln!("{runs} failing resize runs");
    scenario.teardown();
}

/// Files of a resize that never committed are removed at open; a failure
/// removing them fails the open with the file named, and the next open
/// finishes the job.
#[cfg(feature = "failpoints")]
#[test]
fn an_uncommitted_resize_is_removed_at_open() {
    let _alone = ONE_AT_A_TIME.lock();
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::small_log()).expect("create");
    let end = log.commit(b"kept", Durability::Synced).expect("commit");
    log.close().expect("close");
    for index in 0..4 {
        std::fs::write(dir.path().join(format!("redo.{index:04}.resize")), b"half made").expect("leftover");
    }
    for point in ["resize.settle_remove", "resize.settle_sync_dir"] {
        fail::cfg(point, "return").expect("failpoint");
        let error = Log::open(dir.path(), common::small_log()).map(|_| ()).expect_err("open with a failing settle");
        fail::cfg(point, "off").expect("failpoint off");
        assert!(matches!(error, Error::Io { .. }), "{point}: {error}");
    }
    let (log, recovery) = Log::open(dir.path(), common::small_log()).expect("reopen");
    assert_eq!(recovery.map(|group| group.expect("group").end_lsn()).collect::<Vec<_>>(), [end]);
    assert_eq!(log.capacity_bytes(), capacity(32));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
        .collect();
    assert!(!names.iter().any(|name| name.ends_with(".resize")), "{names:?}");
    scenario.teardown();
}
