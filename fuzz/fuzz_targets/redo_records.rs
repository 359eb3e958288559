//! The page store's redo records: see `redo_records::redo_records`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| redolog_fuzz::redo_records::redo_records(data));
