//! Helpers the page store's integration tests share.
#![allow(dead_code)] // each test file uses some of them

use redolog_pagestore::{Options, Row, C_BYTES, PAD_BYTES};

/// Two buffer pool instances of `pool_bytes` in all, a log of `log_bytes`,
/// and small rings (`ring_bytes`): a debug build fills the default 16 MiB
/// ring at each open.
pub fn options(log_bytes: u64, ring_bytes: usize, pool_bytes: u64) -> Options {
    let log = redolog::Config::default()
        .with_capacity_bytes(log_bytes)
        .with_buffer_bytes(ring_bytes)
        .with_closed_window_bytes(ring_bytes as u64);
    Options { buffer_pool_instances: 2, buffer_pool_bytes: pool_bytes, log, ..Options::default() }
}

/// A sysbench-shaped row: `c` filled with `c`, `pad` with `p`.
pub fn row(id: u64, k: u64, c: u8) -> Row {
    Row { id, k, c: [c; C_BYTES], pad: [b'p'; PAD_BYTES] }
}

/// A small xorshift generator: a test's randomness, reproducible by seed.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
