//! The fuzz cases of redolog, shared by the cargo-fuzz targets and by the
//! regression test that replays `fuzz/regressions/` in `cargo test`.
pub mod cases;
pub mod redo_records;
