//! Goal: a hot backup of a running page store, restored to any LSN from its
//! consistent point to the archive's end, is the store's state at that LSN
//! exactly (docs/PAGESTORE.md §11).
//! Method: as a user would. A workload of random inserts, updates and
//! deletes runs on a store whose log an archiver keeps; page cleaners, the
//! checkpointer and the free check run behind it (a small log and a small
//! buffer pool make them flush and checkpoint all the time). Mid-run, a
//! thread takes a backup while the workload goes on. An oracle keeps the
//! table after every statement, keyed by its commit LSN. Each restore point
//! — the consistent LSN, random statements after it, the archive's end —
//! is restored into a fresh directory, opened, and both of its indexes
//! compared with the oracle at that LSN. A point before the consistent LSN
//! and one past the archive are refused with typed errors.
//!
//! 20 randomised runs by default; `REDOLOG_BACKUP_RUNS=200 cargo test
//! --release -p redolog-pagestore --test backup` for more (docs/RELIABILITY.md).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use redolog::archive::Archiver;
use redolog::{Durability, Lsn};
use redolog_pagestore::{restore, Error, Options, PageStore, RestoreTo, Row, Table};

/// The table after a statement: id → row.
type State = BTreeMap<u64, Row>;

/// A 256 KiB log and eight pages of buffer pool for a table of up to 4 000
/// rows (about 60 pages): pages are evicted, flushed and checkpointed all
/// the time, also while the backup copies them.
fn options() -> Options {
    common::options(256 << 10, 16 << 10, 128 << 10)
}

/// One random statement; returns its commit LSN if it changed something.
fn statement(table: &Table<'_>, state: &mut State, next: &mut impl FnMut() -> u64) -> Option<Lsn> {
    let roll = next();
    let id = roll % 4000;
    let (_, lsn) = match roll % 10 {
        0..=4 => {
            let row = common::row(id, next() % 1000, (next() % 251) as u8);
            let outcome = table.insert(&row).expect("insert");
            if outcome.1.is_some() {
                state.entry(id).or_insert(row);
            }
            outcome
        }
        5..=7 => {
            let c = [(next() % 251) as u8; redolog_pagestore::C_BYTES];
            let outcome = table.update_c(id, &c).expect("update");
            if let (Some(row), Some(_)) = (state.get_mut(&id), outcome.1) {
                row.c = c;
            }
            outcome
        }
        _ => {
            let outcome = table.delete(id).expect("delete");
            if outcome.1.is_some() {
                state.remove(&id);
            }
            outcome
        }
    };
    lsn
}

/// `found == expected`, or a panic naming the first difference (the tables
/// are too long to print whole).
fn assert_same<T: PartialEq + std::fmt::Debug>(found: &[T], expected: &[T], context: &str) {
    if let Some(at) = (0..found.len().max(expected.len())).find(|&at| found.get(at) != expected.get(at)) {
        panic!(
            "{context}: {} found, {} expected; first difference at {at}: {:?} found, {:?} expected",
            found.len(),
            expected.len(),
            found.get(at),
            expected.get(at)
        );
    }
}

/// The rows of the store restored in `dir`, and its secondary index as
/// `(k, id)`, which must agree with them.
fn restored_rows(dir: &Path, table: usize) -> Vec<Row> {
    let (store, _) = PageStore::open(dir, options()).expect("open the restored store");
    let (rows, entries) = store.table(table).scan().expect("scan");
    let mut expected: Vec<(u64, u64)> = rows.iter().map(|row| (row.k, row.id)).collect();
    expected.sort_unstable();
    assert_same(&entries, &expected, &format!("{}: the secondary index against the rows", dir.display()));
    // The restored store takes statements and checkpoints as any other.
    let (_, lsn) = store.table(table).insert(&common::row(10_000, 1, 1)).expect("insert after restore");
    store.log().wait(lsn.expect("a change"), Durability::Synced).expect("sync");
    rows
}

/// What a run exercised: restore points, pages the backup copied, whether
/// the store flushed pages past the backup's checkpoint during the copy
/// (consistent point after it), groups the restores replayed.
#[derive(Default)]
struct Exercised {
    points: usize,
    pages: u64,
    later_pages: u64,
    groups: u64,
}

fn one_run(seed: u64, exercised: &mut Exercised) {
    let mut next = common::xorshift(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let (archive_dir, backup_dir) = (dir.path().join("archive"), dir.path().join("backup"));
    let (mut store, _) = PageStore::open(dir.path().join("store"), options()).expect("open");
    let table = store.create_table().expect("table");
    // The table exists from here: restore points lie at or after it.
    let created = store.log().end_lsn();
    let archiver = Archiver::start(store.log(), &archive_dir).expect("archiver");
    let _watchdog = Watchdog::start(store.log().clone(), seed);
    let mut state = State::new();
    // (commit LSN, the table after it), in commit order.
    let mut history: Vec<(Lsn, State)> = Vec::new();
    let before = 1500 + next() % 1500;
    let during = 300 + next() % 600;
    let flush_at = next() % before;
    for number in 0..before {
        if let Some(lsn) = statement(&store.table(table), &mut state, &mut next) {
            history.push((lsn, state.clone()));
        }
        if number == flush_at {
            // A checkpoint well past the archive's start.
            store.flush_all().expect("flush");
        }
    }
    let backup = std::thread::scope(|scope| {
        let backup = scope.spawn(|| store.backup(&archiver, &backup_dir).expect("backup"));
        for number in 0..during {
            if let Some(lsn) = statement(&store.table(table), &mut state, &mut next) {
                history.push((lsn, state.clone()));
            }
            if number == 10 {
                // Pages written, and a checkpoint moved, while the copy runs.
                store.flush_all().expect("flush");
            }
        }
        backup.join().expect("backup thread")
    });
    for _ in 0..50 {
        if let Some(lsn) = statement(&store.table(table), &mut state, &mut next) {
            history.push((lsn, state.clone()));
        }
    }
    let last = history.last().expect("statements").0;
    store.log().wait(last, Durability::Synced).expect("sync");
    archiver.wait(last).expect("archived");
    drop(store);
    archiver.stop().expect("stop the archiver");
    let run = Run { dir: dir.path(), table, created, backup, history, last };
    check_restores(seed, &run, &mut next, exercised);
}

/// Fails the run, with the log's state, if it has not ended within a
/// minute (a hang would otherwise stall `cargo test`): prints the LSNs and
/// consumers and exits the process.
struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    fn start(log: std::sync::Arc<redolog::Log>, seed: u64) -> Watchdog {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        std::thread::spawn(move || {
            for _ in 0..600 {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
            }
            let metrics = log.metrics();
            eprintln!(
                "seed {seed}: the run hung: {:?}, consumers {:?}, capacity {}, triads: file space {:?}, consumer {:?}",
                metrics.lsns,
                log.consumers(),
                log.capacity_bytes(),
                metrics.log_on_file_space,
                metrics.log_on_consumer
            );
            std::process::exit(3);
        });
        Watchdog { done }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A run's workload and backup, for `check_restores`.
struct Run<'a> {
    dir: &'a Path,
    table: usize,
    /// The log's end once the table existed.
    created: Lsn,
    backup: redolog_pagestore::Backup,
    /// (commit LSN, the table after it), in commit order.
    history: Vec<(Lsn, State)>,
    /// The last statement's commit LSN.
    last: Lsn,
}

/// Restores `run`'s backup to its consistent point, random statements after
/// it and the end, each compared with the oracle; and refuses a point before
/// the consistent one and past the archive.
fn check_restores(seed: u64, run: &Run<'_>, next: &mut impl FnMut() -> u64, exercised: &mut Exercised) {
    let Run { dir, table, created, backup, ref history, last } = *run;
    let (archive_dir, backup_dir) = (dir.join("archive"), dir.join("backup"));
    // The table at `lsn`: after the last statement ending at or before it.
    let at = |lsn: Lsn| {
        history.iter().rev().find(|(end, _)| *end <= lsn).map(|(_, state)| state.clone()).unwrap_or_default()
    };
    let earliest = backup.consistent_lsn.max(created);
    let mut points = vec![RestoreTo::Lsn(earliest), RestoreTo::End];
    let later: Vec<Lsn> = history.iter().map(|(lsn, _)| *lsn).filter(|lsn| *lsn >= earliest).collect();
    for _ in 0..3 {
        points.push(RestoreTo::Lsn(later[(next() as usize) % later.len()]));
    }
    for (number, point) in points.iter().enumerate() {
        let into = dir.join(format!("restore-{number}"));
        let restored = restore(&backup_dir, &archive_dir, *point, &into, options())
            .unwrap_or_else(|error| panic!("seed {seed}: restore to {point:?}: {error}"));
        exercised.groups += restored.replayed.groups;
        let target = match point {
            RestoreTo::Lsn(lsn) => *lsn,
            RestoreTo::End => last,
        };
        assert!(restored.lsn <= target, "seed {seed}: restored past {point:?}");
        let expected: Vec<Row> = at(target).into_values().collect();
        assert_same(&restored_rows(&into, table), &expected, &format!("seed {seed}: restore to {point:?}, the oracle"));
    }
    // Before the consistent point: refused; past the archive: refused.
    if backup.consistent_lsn > backup.start_lsn {
        let early = restore(&backup_dir, &archive_dir, RestoreTo::Lsn(backup.start_lsn), dir.join("early"), options());
        assert!(matches!(early, Err(Error::RestoreTooEarly { .. })), "seed {seed}: {early:?}");
    }
    let late = Lsn::from_u64(last.as_u64() + (1 << 20));
    let past = restore(&backup_dir, &archive_dir, RestoreTo::Lsn(late), dir.join("late"), options());
    assert!(matches!(past, Err(Error::RestorePastArchive { .. })), "seed {seed}: {past:?}");
    exercised.points += points.len();
    exercised.pages += backup.pages;
    exercised.later_pages += u64::from(backup.consistent_lsn > backup.start_lsn);
}

#[test]
fn every_restore_point_of_a_hot_backup_equals_the_oracle() {
    let runs: u64 = std::env::var("REDOLOG_BACKUP_RUNS").ok().and_then(|runs| runs.parse().ok()).unwrap_or(20);
    let base = redolog_seed();
    let mut exercised = Exercised::default();
    for run in 0..runs {
        one_run(base.wrapping_add(run.wrapping_mul(0x9E37_79B9_7F4A_7C15)), &mut exercised);
    }
    let Exercised { points, pages, later_pages, groups } = exercised;
    eprintln!(
        "backup: seed {base}, {runs} runs, {pages} pages copied, {later_pages} backups consistent only past their \
         checkpoint, {groups} groups replayed, {points} restore points, each equal to the oracle"
    );
    assert!(pages > 0 && groups > 0, "the backups copied no page or the restores replayed nothing");
}

/// The base seed: `REDOLOG_BACKUP_SEED`, or the clock's nanoseconds (printed).
fn redolog_seed() -> u64 {
    std::env::var("REDOLOG_BACKUP_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |now| now.as_nanos() as u64)
    })
}

/// A backup directory that is not empty, a damaged description, and an
/// archive of another log are refused with `BadBackup`.
#[test]
fn a_bad_backup_or_a_foreign_archive_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut store, _) = PageStore::open(dir.path().join("store"), options()).expect("open");
    let table = store.create_table().expect("table");
    let archiver = Archiver::start(store.log(), dir.path().join("archive")).expect("archiver");
    store.table(table).insert(&common::row(1, 1, 1)).expect("insert");
    std::fs::create_dir(dir.path().join("full")).expect("dir");
    std::fs::write(dir.path().join("full/x"), b"x").expect("file");
    assert!(matches!(store.backup(&archiver, dir.path().join("full")), Err(Error::BadBackup { .. })));
    store.backup(&archiver, dir.path().join("backup")).expect("backup");
    let (other, _) = PageStore::open(dir.path().join("other"), options()).expect("open another");
    let other_archiver = Archiver::start(other.log(), dir.path().join("other-archive")).expect("archiver");
    let foreign = restore(
        dir.path().join("backup"),
        dir.path().join("other-archive"),
        RestoreTo::End,
        dir.path().join("r1"),
        options(),
    );
    assert!(matches!(foreign, Err(Error::BadBackup { .. })), "{foreign:?}");
    let meta = dir.path().join("backup").join(redolog_pagestore::BACKUP_META_NAME);
    let text = std::fs::read_to_string(&meta).expect("meta").replace("pages", "pagez");
    std::fs::write(&meta, text).expect("damage");
    let damaged = restore(
        dir.path().join("backup"),
        dir.path().join("archive"),
        RestoreTo::End,
        dir.path().join("r2"),
        options(),
    );
    assert!(matches!(damaged, Err(Error::BadBackup { .. })), "{damaged:?}");
    drop((store, other));
    archiver.stop().expect("stop");
    other_archiver.stop().expect("stop");
}
