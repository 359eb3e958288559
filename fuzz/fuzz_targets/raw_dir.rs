//! Byte-level fuzzing of opening a log directory (B11): see `cases::raw_dir`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| redolog_fuzz::cases::raw_dir(data));
