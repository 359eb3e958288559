//! What the tests share: the in-process cluster's types, network and state
//! machine (openraft's suite drives one beside the log store), and opening a
//! store.

#![allow(dead_code)]

use std::path::Path;

#[allow(unused_imports)] // each test binary uses some of them
pub use redolog_raft::in_process::{Machine, Node, Router, Store, TypeConfig};

/// A small log for tests: 1 MiB.
pub fn config() -> redolog::Config {
    redolog::Config { capacity_bytes: 1 << 20, ..redolog::Config::default() }
}

pub fn open(dir: &Path) -> Store {
    Store::open(dir, config()).expect("open the store")
}
