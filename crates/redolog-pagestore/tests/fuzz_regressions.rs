//! Goal: every input the `redo_records` fuzzer kept or crashed on still
//! passes, and the case's oracle holds on runs of real records.
//! Method: `tests/fuzz/redo_records.rs` (the fuzz target's body) is compiled
//! in here and run on every file of `tests/fuzz/regressions/redo_records/` and on
//! seeds built from records the store writes (docs/RELIABILITY.md).

#[path = "fuzz/redo_records.rs"]
mod redo_records;

use std::path::Path;

use redolog_pagestore::{PageKind, Redo, NEXT_OFFSET};

/// A run of records in the case's framing: a `u16` length before each.
fn framed(records: &[Redo]) -> Vec<u8> {
    records
        .iter()
        .flat_map(|redo| {
            let bytes = redo.encode();
            [(bytes.len() as u16).to_le_bytes().to_vec(), bytes].concat()
        })
        .collect()
}

fn record(key: u64) -> Vec<u8> {
    [key.to_be_bytes().to_vec(), vec![key as u8; 24]].concat()
}

/// What the store's own mini-transactions write, and the refusals the
/// oracle must see leave the page alone.
fn seeds() -> Vec<Vec<u8>> {
    let insert = |slot, key| Redo::Insert { page: 7, slot, record: record(key) };
    vec![
        framed(&[insert(0, 5), insert(0, 3), insert(2, 9), Redo::Delete { page: 7, slot: 1 }]),
        framed(&[
            insert(0, 1),
            insert(1, 2),
            Redo::Truncate { page: 7, keep: 1 },
            Redo::Write { page: 7, offset: NEXT_OFFSET as u16, bytes: 8u32.to_le_bytes().to_vec() },
        ]),
        // Refused: a record of the wrong size, a slot past the end, a write
        // of the record count.
        framed(&[
            Redo::Insert { page: 7, slot: 0, record: vec![1; 3] },
            insert(5, 1),
            Redo::Write { page: 7, offset: (NEXT_OFFSET - 2) as u16, bytes: u16::MAX.to_le_bytes().to_vec() },
        ]),
        framed(&[Redo::Init {
            page: 7,
            kind: PageKind::Internal,
            level: 1,
            key_bytes: 8,
            value_bytes: 4,
            next: None,
            tree: 1,
        }]),
        framed(&(0..600).map(|key| insert(key as u16, key)).collect::<Vec<_>>()),
    ]
}

#[test]
fn redo_records_regressions_and_seeds_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/regressions/redo_records");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .filter(|entry| entry.as_ref().is_ok_and(|entry| entry.file_name() != ".gitkeep"))
        .map(|entry| std::fs::read(entry.expect("directory entry").path()).expect("read a regression input"))
        .collect();
    inputs.extend(seeds());
    for input in &inputs {
        redo_records::redo_records(input);
    }
    // `REDOLOG_FUZZ_SEEDS=DIR` writes the seeds out for the fuzzer's corpus.
    if let Some(out) = std::env::var_os("REDOLOG_FUZZ_SEEDS") {
        for (number, seed) in seeds().iter().enumerate() {
            std::fs::write(Path::new(&out).join(format!("seed-{number}")), seed).expect("write a seed");
        }
    }
}

/// The oracle catches what it is for: a `write` of the record count, which
/// `Redo::apply` accepted before the writable range started after it, made
/// the page claim more records than it holds.
#[test]
fn a_write_of_the_record_count_is_refused() {
    let mut page = redolog_pagestore::Page::zeroed();
    let format = redolog_pagestore::Format {
        kind: PageKind::Leaf,
        level: 0,
        key_bytes: 8,
        value_bytes: 24,
        next: None,
        tree: 1,
    };
    page.init(7, &format).expect("init");
    let write = Redo::Write { page: 7, offset: (NEXT_OFFSET - 2) as u16, bytes: u16::MAX.to_le_bytes().to_vec() };
    assert!(write.apply(&mut page).is_err());
    assert_eq!(page.count(), 0);
}
