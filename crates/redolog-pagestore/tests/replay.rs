//! Goal: page recovery brings every page to the state the log describes,
//! whatever subset of pages reached the data file before the crash and at
//! whatever LSN (PS-2), and replaying twice changes nothing; bad redo or a
//! torn page is a typed error naming where.
//! Method: random mini-transactions (inserts, deletes, writes, splits'
//! truncates) on a few leaf pages, each one redolog group, mirrored on pages
//! in memory; for each group the pages' state after it is kept, and a random
//! "cleaner" writes some pages as they stood after some earlier group
//! (always at or below the durable log, PS-1). Then the log is reopened and
//! replayed onto the data file, which must equal the final state.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use redolog::storage::FsStorage;
use redolog::{Config, Durability, Log, Lsn};
use redolog_pagestore::{replay, DataFile, Error, Page, PageKind, PageNo, Redo, PAGE_BYTES};

const PAGES: [PageNo; 3] = [1, 2, 7];

fn config() -> Config {
    // Small rings: a debug build fills the default 16 MiB buffer byte by byte at
    // every open, and this test opens the log 48 times.
    Config::default().with_capacity_bytes(1 << 20).with_buffer_bytes(64 << 10).with_closed_window_bytes(64 << 10)
}

fn init(page: PageNo) -> Redo {
    Redo::Init { page, kind: PageKind::Leaf, level: 0, key_bytes: 8, value_bytes: 8, next: None, tree: 1 }
}

/// One step a test asks for; turned into a redo record that fits the page.
#[derive(Clone, Debug)]
enum Step {
    Insert { page: usize, key: u64 },
    Delete { page: usize, pick: usize },
    Write { page: usize, pick: usize, value: u64 },
    Truncate { page: usize, keep: usize },
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..PAGES.len(), any::<u64>()).prop_map(|(page, key)| Step::Insert { page, key }),
        1 => (0..PAGES.len(), any::<usize>()).prop_map(|(page, pick)| Step::Delete { page, pick }),
        2 => (0..PAGES.len(), any::<usize>(), any::<u64>()).prop_map(|(page, pick, value)| Step::Write { page, pick, value }),
        1 => (0..PAGES.len(), any::<usize>()).prop_map(|(page, keep)| Step::Truncate { page, keep }),
    ]
}

/// The redo record for `step` on `page`, if it has one there.
fn redo_for(step: &Step, pages: &BTreeMap<PageNo, Page>) -> Option<Redo> {
    let no = |index: &usize| PAGES[*index];
    Some(match step {
        Step::Insert { page, key } => {
            let slot = pages[&no(page)].search(&key.to_be_bytes()).err()?;
            let record = [key.to_be_bytes(), key.wrapping_mul(3).to_le_bytes()].concat();
            Redo::Insert { page: no(page), slot: slot as u16, record }
        }
        Step::Delete { page, pick } => {
            let count = pages[&no(page)].count();
            Redo::Delete { page: no(page), slot: (pick % count.max(1)) as u16 }
        }
        Step::Write { page, pick, value } => {
            let count = pages[&no(page)].count().max(1);
            let offset = redolog_pagestore::HEADER_BYTES + (pick % count) * 16 + 8;
            Redo::Write { page: no(page), offset: offset as u16, bytes: value.to_le_bytes().to_vec() }
        }
        Step::Truncate { page, keep } => {
            let count = pages[&no(page)].count();
            Redo::Truncate { page: no(page), keep: (keep % (count + 1)) as u16 }
        }
    })
}

/// Turns `steps` into groups of redo records (`sizes` steps each) that fit
/// the pages as the earlier groups leave them; the first group formats the
/// pages.
fn groups(steps: &[Step], sizes: &[usize]) -> Vec<Vec<Redo>> {
    let mut scratch: BTreeMap<PageNo, Page> = PAGES.iter().map(|&no| (no, Page::zeroed())).collect();
    let mut groups = vec![PAGES.iter().map(|&no| init(no)).collect::<Vec<_>>()];
    for redo in &groups[0] {
        redo.apply(scratch.get_mut(&redo.page()).expect("a test page")).expect("init");
    }
    let mut rest = steps;
    for &size in sizes {
        let (steps, later) = rest.split_at(size.min(rest.len()));
        rest = later;
        let group: Vec<Redo> = steps
            .iter()
            .filter_map(|step| {
                let redo = redo_for(step, &scratch)?;
                redo.apply(scratch.get_mut(&redo.page())?).ok().map(|()| redo)
            })
            .collect();
        if !group.is_empty() {
            groups.push(group);
        }
    }
    groups
}

/// Appends each group to `log` and applies it to pages in memory; returns
/// the pages after each group, with the group's end LSN.
fn run(log: &Log, steps: &[Step], sizes: &[usize]) -> Vec<(Lsn, BTreeMap<PageNo, Page>)> {
    let mut pages: BTreeMap<PageNo, Page> = PAGES.iter().map(|&no| (no, Page::zeroed())).collect();
    let mut states = Vec::new();
    for group in groups(steps, sizes) {
        let encoded: Vec<Vec<u8>> = group.iter().map(Redo::encode).collect();
        let refs: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        let end = log.append_group(&refs).expect("append");
        for redo in &group {
            redo.apply(pages.get_mut(&redo.page()).expect("a test page")).expect("fits, as it did in groups()");
        }
        for redo in &group {
            pages.get_mut(&redo.page()).expect("a test page").set_lsn(end);
        }
        states.push((end, pages.clone()));
    }
    log.wait(log.end_lsn(), Durability::Synced).expect("durable");
    states
}

fn data_file(dir: &Path) -> DataFile {
    DataFile::open(dir, &FsStorage).expect("data file")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn replay_reaches_the_final_pages_from_any_pages_the_cleaner_wrote(
        steps in proptest::collection::vec(any_step(), 1..120),
        sizes in proptest::collection::vec(1usize..5, 1..60),
        flushed in proptest::collection::vec((0..PAGES.len(), any::<prop::sample::Index>()), 0..6),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let log_dir = dir.path().join("log");
        let (log, _) = Log::open(&log_dir, config()).expect("log");
        let states = run(&log, &steps, &sizes);
        // The cleaner: some pages reached the file as of some earlier group.
        let data = data_file(dir.path());
        for (page, when) in &flushed {
            let (_, pages) = &states[when.index(states.len())];
            let mut page = pages[&PAGES[*page]].clone();
            data.write_one(&mut page).expect("write");
        }
        data.sync().expect("sync");
        log.simulate_crash();
        let (_, recovery) = Log::open(&log_dir, config()).expect("reopen");
        let replayed = replay(recovery, &data).expect("replay");
        let (end, last) = states.last().expect("a group").clone();
        prop_assert_eq!(replayed.end_lsn, end);
        for (&no, expected) in &last {
            let mut expected = expected.clone();
            expected.seal();
            prop_assert_eq!(&data.read(no).expect("read"), &expected, "page {}", no);
        }
        // Again: nothing left to apply.
        let (_, recovery) = Log::open(&log_dir, config()).expect("reopen");
        let again = replay(recovery, &data).expect("replay again");
        prop_assert_eq!(again.applied, 0);
        prop_assert_eq!(again.skipped, replayed.applied + replayed.skipped);
    }
}

#[test]
fn a_redo_record_that_does_not_fit_its_page_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = dir.path().join("log");
    let (log, _) = Log::open(&log_dir, config()).expect("log");
    log.append_group(&[&init(3).encode()]).expect("append");
    let second = log.append_group(&[&Redo::Delete { page: 3, slot: 0 }.encode()]).expect("append");
    log.append_group(&[b"\x09 not a redo record"]).expect("append");
    drop(log);
    let data = data_file(dir.path());
    let (_, recovery) = Log::open(&log_dir, config()).expect("reopen");
    match replay(recovery, &data) {
        Err(Error::BadRedo { lsn, record: 0, reason }) => {
            assert!(lsn < second, "the delete's group, not a later one: {lsn:?}");
            assert!(reason.contains("page 3") && reason.contains("slot 0"), "{reason}");
        }
        other => panic!("expected BadRedo, got {other:?}"),
    }
}

#[test]
fn a_torn_page_is_named_not_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = dir.path().join("log");
    let (log, _) = Log::open(&log_dir, config()).expect("log");
    log.commit(&init(2).encode(), Durability::Synced).expect("append");
    drop(log);
    let data = data_file(dir.path());
    let mut page = Page::zeroed();
    init(2).apply(&mut page).expect("init");
    data.write_one(&mut page).expect("write");
    // Half of a later write of the page reached the disk.
    let path = dir.path().join(redolog_pagestore::DATA_FILE_NAME);
    let mut bytes = std::fs::read(&path).expect("read");
    let start = 2 * PAGE_BYTES;
    bytes[start + PAGE_BYTES / 2..start + PAGE_BYTES].fill(0xAB);
    std::fs::write(&path, bytes).expect("tear");
    let (_, recovery) = Log::open(&log_dir, config()).expect("reopen");
    match replay(recovery, &data) {
        Err(Error::CorruptPage { page: 2, reason }) => assert!(reason.contains("checksum"), "{reason}"),
        other => panic!("expected CorruptPage, got {other:?}"),
    }
}

/// A page written through the doublewrite file and then torn in place (a
/// power loss mid-write) is put back whole when the data file opens.
#[test]
fn a_page_torn_after_its_doublewrite_copy_is_repaired_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = data_file(dir.path());
    let mut page = Page::zeroed();
    init(2).apply(&mut page).expect("init");
    Redo::Insert { page: 2, slot: 0, record: vec![7; 16] }.apply(&mut page).expect("insert");
    data.write_pages(std::slice::from_mut(&mut page)).expect("write");
    drop(data);
    let path = dir.path().join(redolog_pagestore::DATA_FILE_NAME);
    let mut bytes = std::fs::read(&path).expect("read");
    let start = 2 * PAGE_BYTES;
    bytes[start + 4096..start + PAGE_BYTES].fill(0xAB);
    std::fs::write(&path, bytes).expect("tear");
    let data = data_file(dir.path());
    assert_eq!(data.read(2).expect("repaired"), page);
}
