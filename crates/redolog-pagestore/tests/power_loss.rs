//! Goal: a power loss at any moment — the unsynced writes dropped, all kept,
//! or a random subset of their 512-byte sectors kept in any order (torn
//! pages, in the data file and in the doublewrite file) — loses no
//! acknowledged statement, half-applies none, and leaves no page that fails
//! its checksum (PS-1, PS-2, PS-3).
//! Method: the log and the data file both run on redolog's `CrashStorage`;
//! statements at durability 1, the oldest dirty pages flushed (through the
//! doublewrite file) every few statements; every 20 statements the test
//! takes the files a crash would leave in each mode, reopens the store on
//! them and compares the table with the acknowledged rows. Then, replaying
//! the recorded trace, it crashes right before every fdatasync of the data
//! file and of the doublewrite file — the moments a page write is in the
//! cache, where a power loss tears it — keeping random sectors, and checks
//! the table against the rows acknowledged by then (or with the one
//! statement then in flight). `cargo test` checks every other such moment
//! with one seed; `REDOLOG_PAGESTORE_POWER_LOSS_ALL=1 cargo test -p
//! redolog-pagestore --test power_loss` every one with two.

use std::collections::BTreeMap;
use std::path::Path;

use redolog::storage::{CrashMode, CrashOp, CrashState, CrashStorage};
use redolog_pagestore::{Options, PageStore, Row};

mod common;
use common::row;

const DIR: &str = "/store";

fn options() -> Options {
    common::options(4 << 20, 256 << 10, 8 << 20)
}

/// The files at one moment, and the rows acknowledged by then.
struct Moment {
    state: CrashState,
    rows: BTreeMap<u64, Row>,
}

/// After each acknowledgement: the operations recorded so far, and the rows.
type Acks = Vec<(usize, BTreeMap<u64, Row>)>;

fn run_workload(storage: &CrashStorage) -> (Vec<Moment>, Acks) {
    let (mut store, _) = PageStore::open_with_storage(Path::new(DIR), options(), storage.clone()).expect("open");
    store.create_table().expect("table");
    let mut rows = BTreeMap::new();
    let mut moments = Vec::new();
    let mut acks = vec![(storage.op_count(), rows.clone())];
    for step in 0..240u64 {
        let table = store.table(0);
        let id = step * 7 % 97;
        let (_, end) = match step % 4 {
            0 | 1 => {
                let new = row(1000 + step, step % 13, step as u8);
                rows.insert(new.id, new.clone());
                table.insert(&new).expect("insert")
            }
            2 => {
                if let Some(row) = rows.get_mut(&(1000 + id)) {
                    row.k += 1;
                }
                table.increment_k(1000 + id).expect("k + 1")
            }
            _ => {
                rows.remove(&(1000 + id));
                table.delete(1000 + id).expect("delete")
            }
        };
        store.commit_wait(end, 1).expect("durable");
        acks.push((storage.op_count(), rows.clone()));
        if step % 5 == 4 {
            for (_, no) in store.pool().flush_list().into_iter().take(3) {
                store.pool().flush_page(store.log(), no).expect("flush");
            }
        }
        if step % 20 == 19 {
            moments.push(Moment { state: storage.state(), rows: rows.clone() });
        }
    }
    (moments, acks)
}

/// Reopens the store on the image `mode` makes of `state`; returns the table.
fn reopen(state: &CrashState, mode: CrashMode, context: &str) -> BTreeMap<u64, Row> {
    let image = state.crash(mode);
    let (store, _) = PageStore::open_with_storage(Path::new(DIR), options(), image.to_storage())
        .unwrap_or_else(|error| panic!("{context}: reopen: {error}"));
    let (rows, entries) = store.table(0).scan().unwrap_or_else(|error| panic!("{context}: scan: {error}"));
    let mut secondary: Vec<(u64, u64)> = rows.iter().map(|row| (row.k, row.id)).collect();
    secondary.sort_unstable();
    assert_eq!(entries, secondary, "{context}: the secondary index disagrees with the rows");
    let data = store.pool().data();
    for no in 0..data.pages().expect("pages") {
        data.read(no as u32).unwrap_or_else(|error| panic!("{context}: {error}"));
    }
    rows.into_iter().map(|row| (row.id, row)).collect()
}

#[test]
fn a_power_loss_keeps_every_acknowledged_statement_and_tears_no_page_for_good() {
    let storage = CrashStorage::new();
    let (moments, acks) = run_workload(&storage);
    for (number, moment) in moments.iter().enumerate() {
        let modes = [
            CrashMode::DropUnsynced,
            CrashMode::KeepAll,
            CrashMode::Random(number as u64),
            CrashMode::Random(1000 + number as u64),
        ];
        for mode in modes {
            let context = format!("moment {number} ({} rows), {mode:?}", moment.rows.len());
            assert_eq!(reopen(&moment.state, mode, &context), moment.rows, "{context}: not the acknowledged rows");
        }
    }
    // Right before each fdatasync of the data file and the doublewrite file.
    let trace = storage.trace();
    let inode = |name: &str| {
        trace.iter().find_map(|op| match op {
            CrashOp::Create { path, inode } if path.ends_with(name) => Some(*inode),
            _ => None,
        })
    };
    let files = [inode(redolog_pagestore::DATA_FILE_NAME), inode(redolog_pagestore::DOUBLEWRITE_FILE_NAME)];
    let before_sync: std::collections::BTreeSet<usize> = trace
        .iter()
        .enumerate()
        .filter(|(_, op)| matches!(op, CrashOp::SyncData { inode } if files.contains(&Some(*inode))))
        .map(|(index, _)| index)
        .collect();
    assert!(before_sync.len() > 100, "the workload flushed pages: {} syncs", before_sync.len());
    // In `cargo test`: every other such moment, one seed (about 100 images);
    // REDOLOG_PAGESTORE_POWER_LOSS_ALL=1: every moment, two seeds.
    let all = std::env::var_os("REDOLOG_PAGESTORE_POWER_LOSS_ALL").is_some();
    let chosen: std::collections::BTreeSet<usize> = before_sync
        .iter()
        .copied()
        .enumerate()
        .filter(|(number, _)| all || number % 2 == 0)
        .map(|(_, prefix)| prefix)
        .collect();
    let seeds: &[u64] = if all { &[0, 7919] } else { &[0] };
    let mut checked = 0;
    storage.replay(|prefix, state| {
        if !chosen.contains(&prefix) || state.unsynced_writes() == 0 {
            return;
        }
        // Acknowledged by then: every statement whose ack came at or before
        // this prefix; the next one may have been in flight.
        let acked = acks.iter().rposition(|(ops, _)| *ops <= prefix).expect("the table existed");
        for seed in seeds.iter().map(|offset| prefix as u64 + offset) {
            let context = format!("before the sync at operation {prefix}, Random({seed})");
            let found = reopen(state, CrashMode::Random(seed), &context);
            let in_flight = acks.get(acked + 1).map(|(_, rows)| rows);
            assert!(
                found == acks[acked].1 || in_flight == Some(&found),
                "{context}: {} rows, not the {} acknowledged",
                found.len(),
                acks[acked].1.len()
            );
            checked += 1;
        }
    });
    eprintln!("power_loss: {} images at 12 moments, {checked} images torn mid-flush, 0 violations", moments.len() * 4);
}
