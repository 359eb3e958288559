//! Structure-aware fuzzing of recovery (B12): see `cases::mutated_log`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| redolog_fuzz::cases::mutated_log(data));
