//! The page store under the simulation's driver (`redolog::sim`): from a
//! seed, statements at each `innodb_flush_log_at_trx_commit` level, bursts
//! of them from several threads, page flushes, the free check, sharp
//! checkpoints, hot backups beside the archiver, point-in-time restores, and
//! power losses at any point of the recorded trace — inside a page write,
//! a doublewrite, a checkpoint, a backup — while the page cleaners and the
//! checkpointer run. After each crash the store must open, hold every
//! statement acknowledged at level 1 (PS-1), no half statement (PS-2), be
//! exactly the model's rows at the LSN it recovered to with both indexes in
//! agreement, and its archiver must resume (INV-33). Each restore must be
//! exactly the model's rows at the LSN it restored to.
//!
//! `cargo test` runs 24 seeds; more:
//! `REDOLOG_PAGESTORE_SIM_SEEDS=2000 cargo test --release -p redolog-pagestore --test simulation -- --nocapture`
//! (`REDOLOG_SIM_FIRST` sets the first seed, `REDOLOG_SIM_TRACE=1` prints
//! each step).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use redolog::archive::{Archive, Archiver};
use redolog::sim::{Coverage, Rng, Simulation};
use redolog::storage::{CrashMode, CrashStorage};
use redolog::Lsn;
use redolog_pagestore::{restore_with_storage, Backup, Options, Outcome, PageStore, RestoreTo, Row};

const DIR: &str = "/store";
const ARCHIVE: &str = "/archive";

/// Operations per schedule.
const SCHEDULE_LEN: usize = 60;

#[derive(Clone, Debug)]
enum Op {
    /// One statement on table 0 (`kind`: insert, update c, k + 1, delete),
    /// committed at `innodb_flush_log_at_trx_commit = level`.
    Statement { kind: u8, id: u8, level: u8 },
    /// Statements from several threads at once, each on ids of its own.
    Burst { threads: u8, statements: u8 },
    /// Writes the oldest dirty pages, as a page cleaner does.
    FlushSome { pages: u8 },
    /// A sharp checkpoint.
    FlushAll,
    /// InnoDB's `log_free_check`.
    FreeCheck,
    /// A hot backup, while the archiver runs.
    Backup,
    /// Restores the `backup`-th backup to a point of the archive.
    Restore { backup: u8, point: u16 },
    /// A power loss at a point of the trace since the last open.
    Crash { point: u16, mode: u8 },
}

const KINDS: [&str; 8] = ["statement", "burst", "flush_some", "flush_all", "free_check", "backup", "restore", "crash"];

const POINTS: [&str; 8] = [
    "crash: only what was synced",
    "crash: everything",
    "crash: a random part",
    "crash inside a backup",
    "recovery replayed redo onto pages",
    "restored to a point before the archive's end",
    "a backup restored after a crash",
    "a statement acknowledged at level 1 survived a crash",
];

/// One committed change: the statement's end LSN, the row's id, the row
/// after it (`None`: deleted).
type Change = (Lsn, u64, Option<Row>);

/// A burst's change, with the trace position of its acknowledgement at
/// level 1.
type Done = (Change, Option<usize>);

struct PageWorld {
    rng: Rng,
    options: Options,
    storage: CrashStorage,
    store: Option<PageStore>,
    archiver: Option<Archiver>,
    /// Every statement that changed a row, in LSN order once sorted.
    changes: Vec<Change>,
    /// (trace position of the acknowledgement, end LSN) of level-1 commits.
    acked: Vec<(usize, Lsn)>,
    /// Completed backups: (trace position when complete, directory, meta).
    backups: Vec<(usize, PathBuf, Backup)>,
    /// Trace position of the last open: a crash point lies after it.
    origin: usize,
    /// Spans of backups in the trace, for the coverage.
    backup_spans: Vec<(usize, usize)>,
    counter: u64,
}

/// The rows after every change ending at or before `lsn`.
fn state_at(changes: &[Change], lsn: Lsn) -> BTreeMap<u64, Row> {
    let mut sorted: Vec<&Change> = changes.iter().filter(|(end, _, _)| *end <= lsn).collect();
    sorted.sort_by_key(|(end, _, _)| *end);
    let mut rows = BTreeMap::new();
    for (_, id, after) in sorted {
        match after {
            Some(row) => rows.insert(*id, row.clone()),
            None => rows.remove(id),
        };
    }
    rows
}

/// Compares a store's table 0 with `want`, rows and secondary index.
fn check_table(store: &PageStore, want: &BTreeMap<u64, Row>, context: &str) -> Result<(), String> {
    if store.tables() == 0 {
        // A point before the table was created: no rows yet.
        return match want.is_empty() {
            true => Ok(()),
            false => Err(format!("{context}: no table, and the model has {} rows", want.len())),
        };
    }
    let (rows, entries) = store.table(0).scan().map_err(|error| format!("{context}: scan: {error}"))?;
    let want_rows: Vec<Row> = want.values().cloned().collect();
    if rows != want_rows {
        let got: Vec<u64> = rows.iter().map(|row| row.id).collect();
        let expected: Vec<u64> = want_rows.iter().map(|row| row.id).collect();
        return Err(format!(
            "{context}: the table is not the model's (ids {got:?}, the model's {expected:?}, or a value)"
        ));
    }
    let mut from_rows: Vec<(u64, u64)> = rows.iter().map(|row| (row.k, row.id)).collect();
    from_rows.sort_unstable();
    if entries != from_rows {
        return Err(format!("{context}: the secondary index disagrees with the rows"));
    }
    Ok(())
}

/// Runs one statement on `store` against the rows `current` (updated), and
/// returns its change and end LSN if it changed a row.
fn statement(
    store: &PageStore,
    current: &mut BTreeMap<u64, Row>,
    (kind, id, level): (u8, u64, u8),
    counter: u64,
) -> Result<Option<(Change, Lsn)>, String> {
    let table = store.table(0);
    let before = current.get(&id).cloned();
    let (outcome, end, after) = match kind % 4 {
        0 => {
            let row = common::row(id, id % 13, counter as u8);
            let (outcome, end) = table.insert(&row).map_err(|error| format!("insert {id}: {error}"))?;
            (outcome, end, Some(row))
        }
        1 => {
            let c = [counter as u8; redolog_pagestore::C_BYTES];
            let (outcome, end) = table.update_c(id, &c).map_err(|error| format!("update c of {id}: {error}"))?;
            (outcome, end, before.clone().map(|row| Row { c, ..row }))
        }
        2 => {
            let (outcome, end) = table.increment_k(id).map_err(|error| format!("k + 1 of {id}: {error}"))?;
            (outcome, end, before.clone().map(|row| Row { k: row.k + 1, ..row }))
        }
        _ => {
            let (outcome, end) = table.delete(id).map_err(|error| format!("delete {id}: {error}"))?;
            (outcome, end, None)
        }
    };
    // The model says whether it applies: an insert where the row is not, the
    // others where it is.
    let applies = (kind % 4 == 0) == before.is_none();
    match (outcome, end) {
        (Outcome::Done, Some(end)) if applies => {
            store.commit_wait(Some(end), level).map_err(|error| format!("commit_wait({end}): {error}"))?;
            match &after {
                Some(row) => current.insert(id, row.clone()),
                None => current.remove(&id),
            };
            Ok(Some(((end, id, after), end)))
        }
        (Outcome::NotApplicable, _) if !applies => Ok(None),
        other => Err(format!("statement {kind} on {id}: {other:?}, but the model's row is {before:?}")),
    }
}

impl PageWorld {
    fn store(&self) -> &PageStore {
        self.store.as_ref().expect("an open store")
    }

    fn current(&self) -> BTreeMap<u64, Row> {
        state_at(&self.changes, Lsn::from_u64(u64::MAX))
    }

    /// Opens the store on `storage` (after a crash, or at the start) and
    /// restarts its archiver.
    fn open(&mut self, storage: CrashStorage, context: &str, coverage: &mut Coverage) -> Result<Lsn, String> {
        let (mut store, replayed) = PageStore::open_with_storage(Path::new(DIR), self.options.clone(), storage.clone())
            .map_err(|error| format!("{context}: the store does not open: {error}"))?;
        if replayed.applied > 0 {
            coverage.point("recovery replayed redo onto pages");
        }
        let end = store.log().end_lsn();
        if store.tables() == 0 {
            store.create_table().map_err(|error| format!("create the table: {error}"))?;
        }
        let archiver = Archiver::start_with_segments(store.log(), ARCHIVE, 4096)
            .map_err(|error| format!("{context}: INV-33: the archiver does not resume: {error}"))?;
        self.archiver = Some(archiver);
        self.store = Some(store);
        self.storage = storage;
        self.origin = self.storage.op_count();
        Ok(end)
    }

    fn op_statement(&mut self, kind: u8, id: u8, level: u8) -> Result<(), String> {
        let mut current = self.current();
        self.counter += 1;
        let done = statement(self.store(), &mut current, (kind, u64::from(id % 48), level % 3), self.counter)?;
        if let Some((change, end)) = done {
            self.changes.push(change);
            if level % 3 == 1 {
                self.acked.push((self.storage.op_count(), end));
            }
        }
        Ok(())
    }

    fn op_burst(&mut self, threads: u8, statements: u8) -> Result<(), String> {
        let current = self.current();
        let threads = 2 + u64::from(threads % 3);
        let plans: Vec<Vec<(u8, u64, u8)>> = (0..threads)
            .map(|thread| {
                (0..4 + statements % 12)
                    .map(|_| (self.rng.u8(..), 1000 * (thread + 1) + self.rng.u64(0..24), self.rng.u8(0..3)))
                    .collect()
            })
            .collect();
        let counter = self.counter;
        self.counter += 1000;
        let (store, storage) = (self.store(), &self.storage);
        let outcomes: Vec<Result<Vec<Done>, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = plans
                .into_iter()
                .enumerate()
                .map(|(thread, plan)| {
                    let mut mine: BTreeMap<u64, Row> = current
                        .iter()
                        .filter(|(id, _)| **id / 1000 == thread as u64 + 1)
                        .map(|(id, row)| (*id, row.clone()))
                        .collect();
                    scope.spawn(move || {
                        let mut done = Vec::new();
                        for (index, (kind, id, level)) in plan.into_iter().enumerate() {
                            if let Some((change, _)) =
                                statement(store, &mut mine, (kind, id, level), counter + index as u64)?
                            {
                                done.push((change, (level == 1).then(|| storage.op_count())));
                            }
                        }
                        Ok(done)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_else(|_| Err("a burst thread panicked".into())))
                .collect()
        });
        for outcome in outcomes {
            for (change, acked) in outcome? {
                if let Some(at) = acked {
                    self.acked.push((at, change.0));
                }
                self.changes.push(change);
            }
        }
        Ok(())
    }

    fn op_backup(&mut self) -> Result<(), String> {
        self.counter += 1;
        let dir = PathBuf::from(format!("/backup-{}", self.counter));
        let started = self.storage.op_count();
        let archiver = self.archiver.as_ref().expect("the archiver runs");
        let backup = self.store().backup(archiver, &dir).map_err(|error| format!("backup: {error}"))?;
        let done = self.storage.op_count();
        self.backup_spans.push((started, done));
        self.backups.push((done, dir, backup));
        Ok(())
    }

    /// Restores a backup onto a copy of the files as they are, to a point
    /// of the archive, and compares the restored table with the model.
    fn op_restore(&mut self, backup: u8, point: u16, coverage: &mut Coverage) -> Result<(), String> {
        if self.backups.is_empty() {
            return Ok(());
        }
        let (_, dir, meta) = self.backups[backup as usize % self.backups.len()].clone();
        let end = self.store().log().end_lsn();
        self.store().commit_wait(Some(end), 1).map_err(|error| format!("sync before a restore: {error}"))?;
        self.archiver
            .as_ref()
            .expect("the archiver runs")
            .wait(end)
            .map_err(|error| format!("archiver wait: {error}"))?;
        let span = end.as_u64().saturating_sub(meta.consistent_lsn.as_u64());
        let target = Lsn::from_u64(meta.consistent_lsn.as_u64() + span * u64::from(point) / u64::from(u16::MAX));
        if target < end {
            coverage.point("restored to a point before the archive's end");
        }
        let copy = self.storage.state().crash(CrashMode::KeepAll).to_storage();
        let into = Path::new("/restored");
        let context = format!("restore of {} to {target}", dir.display());
        let restored = restore_with_storage(
            copy.clone(),
            &dir,
            Path::new(ARCHIVE),
            RestoreTo::Lsn(target),
            into,
            self.options.clone(),
        )
        .map_err(|error| format!("{context}: {error}"))?;
        let (store, _) = PageStore::open_with_storage(into, self.options.clone(), copy)
            .map_err(|error| format!("{context}: the restored store does not open: {error}"))?;
        if restored.lsn > target {
            return Err(format!("{context}: restored to {} past the target", restored.lsn));
        }
        check_table(&store, &state_at(&self.changes, restored.lsn), &context)
    }

    /// A power loss at a point of the trace since the last open.
    fn crash(&mut self, point: u16, mode: u8, coverage: &mut Coverage) -> Result<(), String> {
        let ops = self.storage.op_count();
        let at = self.origin + ((ops - self.origin) as u64 * u64::from(point) / u64::from(u16::MAX)) as usize;
        // (A random crash's seed is drawn only for it: the schedules stay.)
        let seed = if mode % 3 == 2 { self.rng.u64(..) } else { 0 };
        let (mode, point) = redolog::sim::crash_mode(mode, seed);
        coverage.point(point);
        if self.backup_spans.iter().any(|(started, done)| *started <= at && at < *done) {
            coverage.point("crash inside a backup");
        }
        // The process dies: its log writes nothing more.
        self.store().log().simulate_crash();
        if let Some(archiver) = self.archiver.take() {
            let _ = archiver.stop();
        }
        drop(self.store.take().and_then(PageStore::into_log));
        let mut image = None;
        self.storage.replay(|position, state| {
            if position == at {
                image = Some(state.crash(mode));
            }
        });
        let image = image.expect("the crash point is in the trace");
        let context = format!("a crash after {at} of {ops} operations, {mode:?}");
        let recovered = self.open(image.to_recording(), &context, coverage)?;
        let floor = self.acked.iter().filter(|(done, _)| *done <= at).map(|(_, end)| *end).max();
        if let Some(floor) = floor {
            if recovered < floor {
                return Err(format!("{context}: PS-1: recovered to {recovered}, below the acknowledged {floor}"));
            }
            coverage.point("a statement acknowledged at level 1 survived a crash");
        }
        check_table(self.store(), &state_at(&self.changes, recovered), &context)?;
        // What the crash lost is no longer the store's history.
        self.changes.retain(|(end, _, _)| *end <= recovered);
        self.acked.retain(|(done, end)| *done <= at && *end <= recovered);
        self.acked.iter_mut().for_each(|(done, _)| *done = 0);
        let survived: Vec<_> = self.backups.drain(..).filter(|(done, _, _)| *done <= at).collect();
        if !survived.is_empty() {
            coverage.point("a backup restored after a crash");
        }
        self.backups = survived.into_iter().map(|(_, dir, meta)| (0, dir, meta)).collect();
        self.backup_spans.clear();
        Ok(())
    }
}

impl Simulation for PageWorld {
    type Op = Op;

    fn new(seed: u64) -> Self {
        let mut rng = Rng::with_seed(seed ^ 0x9a9e);
        let log_bytes = [1 << 20, 4 << 20][rng.usize(0..2)];
        let pool_bytes = [1 << 20, 8 << 20][rng.usize(0..2)];
        let options = common::options(log_bytes, 256 << 10, pool_bytes);
        let mut world = PageWorld {
            rng,
            options,
            storage: CrashStorage::new(),
            store: None,
            archiver: None,
            changes: Vec::new(),
            acked: Vec::new(),
            backups: Vec::new(),
            origin: 0,
            backup_spans: Vec::new(),
            counter: 0,
        };
        let mut coverage = Coverage::default();
        let storage = world.storage.clone();
        world.open(storage, "the first open", &mut coverage).expect("a new store opens");
        world
    }

    fn draw(rng: &mut Rng) -> Op {
        match rng.u16(0..1000) {
            0..=399 => Op::Statement { kind: rng.u8(..), id: rng.u8(..), level: rng.u8(..) },
            400..=549 => Op::Burst { threads: rng.u8(..), statements: rng.u8(..) },
            550..=649 => Op::FlushSome { pages: rng.u8(1..16) },
            650..=699 => Op::FlushAll,
            700..=749 => Op::FreeCheck,
            750..=819 => Op::Backup,
            820..=899 => Op::Restore { backup: rng.u8(..), point: rng.u16(..) },
            _ => Op::Crash { point: rng.u16(..), mode: rng.u8(..) },
        }
    }

    fn kind(op: &Op) -> &'static str {
        match op {
            Op::Statement { .. } => "statement",
            Op::Burst { .. } => "burst",
            Op::FlushSome { .. } => "flush_some",
            Op::FlushAll => "flush_all",
            Op::FreeCheck => "free_check",
            Op::Backup => "backup",
            Op::Restore { .. } => "restore",
            Op::Crash { .. } => "crash",
        }
    }

    fn step(&mut self, op: &Op, coverage: &mut Coverage) -> Result<(), String> {
        match *op {
            Op::Statement { kind, id, level } => self.op_statement(kind, id, level),
            Op::Burst { threads, statements } => self.op_burst(threads, statements),
            Op::FlushSome { pages } => {
                let store = self.store();
                for (_, no) in store.pool().flush_list().into_iter().take(usize::from(pages)) {
                    store.pool().flush_page(store.log(), no).map_err(|error| format!("flush page {no}: {error}"))?;
                }
                Ok(())
            }
            Op::FlushAll => self.store().flush_all().map_err(|error| format!("flush_all: {error}")),
            Op::FreeCheck => self.store().free_check().map_err(|error| format!("free_check: {error}")),
            Op::Backup => self.op_backup(),
            Op::Restore { backup, point } => self.op_restore(backup, point, coverage),
            Op::Crash { point, mode } => self.crash(point, mode, coverage),
        }
    }

    /// A clean shutdown and reopen keeps every change.
    fn finish(&mut self, coverage: &mut Coverage) -> Result<(), String> {
        if let Some(archiver) = self.archiver.take() {
            let end = self.store().log().end_lsn();
            self.store().commit_wait(Some(end), 1).map_err(|error| format!("the last sync: {error}"))?;
            archiver.stop().map_err(|error| format!("archiver stop: {error}"))?;
        }
        let store = self.store.take().expect("an open store");
        if let Some(log) = store.into_log() {
            log.close().map_err(|error| format!("close: {error}"))?;
        }
        let storage = self.storage.clone();
        let end = self.open(storage, "a clean reopen", coverage)?;
        check_table(self.store(), &state_at(&self.changes, end), "after a clean reopen")?;
        let archive = Archive::open_with_storage(ARCHIVE, self.storage.state().crash(CrashMode::KeepAll).to_storage())
            .map_err(|error| format!("the archive: {error}"))?;
        archive.verify().map_err(|error| format!("INV-33: the archive: {error}"))?;
        Ok(())
    }
}

#[test]
fn the_page_store_under_crashes_backups_and_restores_keeps_every_promise() {
    let seeds = redolog::sim::seeds_from_env("REDOLOG_PAGESTORE_SIM_SEEDS", 24);
    redolog::sim::explore_and_report::<PageWorld>(seeds, SCHEDULE_LEN, (&KINDS, &POINTS), 500);
}
