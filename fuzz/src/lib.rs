//! The fuzz cases of redolog, shared by the cargo-fuzz targets and by the
//! regression tests that replay their corpora in `cargo test`. The cases and
//! the corpora live in the crates they test (`crates/redolog/tests/fuzz/`,
//! `crates/redolog-pagestore/tests/fuzz/`), so each published package replays
//! its own corpus from the .crate alone.
#[path = "../../crates/redolog/tests/fuzz/cases.rs"]
pub mod cases;
#[path = "../../crates/redolog-pagestore/tests/fuzz/redo_records.rs"]
pub mod redo_records;
