//! The fuzz case of the page store's redo records (docs/PAGESTORE.md §3,
//! docs/RELIABILITY.md): the bytes are a run of records, each a little-endian
//! `u16` length and that many bytes, applied in turn to one page that starts
//! as a formatted leaf. Every record decodes to a record or a typed error; a
//! decoded record re-encodes to bytes that decode to it; applying it either
//! succeeds, leaving a page whose records are all readable within its
//! capacity and which seals and verifies, or is refused with a typed error
//! and leaves the page as it was (`Redo::apply`'s contract). Panics only on
//! a real finding.
//!
//! This file is also compiled into `tests/fuzz_regressions.rs`, which replays
//! `tests/fuzz/regressions/redo_records/` on every `cargo test`, and into the
//! cargo-fuzz target of the repository's `fuzz/` crate.

use redolog_pagestore::{Format, Page, PageKind, Redo};

/// The page every run starts from: a leaf of 8-byte keys and 24-byte values.
fn leaf() -> Page {
    let mut page = Page::zeroed();
    let format = Format { kind: PageKind::Leaf, level: 0, key_bytes: 8, value_bytes: 24, next: None, tree: 1 };
    page.init(7, &format).expect("a leaf formats");
    page
}

/// The case: see the module's documentation.
pub fn redo_records(mut data: &[u8]) {
    let mut page = leaf();
    while data.len() >= 2 {
        let length = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        let (bytes, rest) = data[2..].split_at(length);
        data = rest;
        let Ok(redo) = Redo::decode(bytes) else { continue };
        assert_eq!(Redo::decode(&redo.encode()).as_ref(), Ok(&redo), "re-encoding changed {redo:?}");
        let before = page.clone();
        match redo.apply(&mut page) {
            Ok(()) => {
                assert!(page.count() <= page.capacity(), "{redo:?} overfilled the page");
                for slot in 0..page.count() {
                    assert_eq!(page.record(slot).len(), page.record_bytes(), "slot {slot} after {redo:?}");
                }
                let mut sealed = page.clone();
                sealed.seal();
                let no = sealed.page_no();
                assert!(sealed.verify(no).is_ok(), "a sealed page fails its own check after {redo:?}");
            }
            Err(_) => assert!(page == before, "the refused {redo:?} changed the page"),
        }
    }
}
