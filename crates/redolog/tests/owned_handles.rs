//! Goal: the owned forms of the live reader, the durable future and the
//! mini-transaction (`read_from_owned`, `wait_async_owned`,
//! `begin_group_owned`) live where a borrow cannot — a `'static` task, a
//! struct beside the `Arc<Log>` — and each keeps the log open while it
//! lives: the log closes (cleanly) when the last of them and of the user's
//! `Arc`s goes.

use std::sync::Arc;
use std::time::Duration;

use redolog::{Config, Durability, Error, Log, LogEnd};

fn config() -> Config {
    Config::default().with_capacity_bytes(1 << 20)
}

/// Compiles only for what a spawned task or thread may own.
fn owned<T: Send + 'static>(value: T) -> T {
    value
}

#[test]
fn owned_forms_run_in_spawned_tasks_and_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), config()).expect("open").0);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("runtime");
    let end = log.append(b"from a task").expect("append");
    let waited = runtime.spawn(owned(log.wait_async_owned(end, Durability::Synced)));
    runtime.block_on(waited).expect("joined").expect("durable");
    assert!(log.durable_lsn() >= end);

    let mut reader = owned(log.read_from_owned(log.end_lsn()).expect("reader"));
    let mtr = owned(log.begin_group_owned(&[b"from a thread"]).expect("begin"));
    let mtr_end = mtr.end_lsn();
    std::thread::spawn(move || drop(mtr)).join().expect("thread");
    assert!(log.closed_lsn() >= mtr_end, "the mini-transaction closed on the thread that dropped it");
    log.wait(mtr_end, Durability::Synced).expect("sync");
    let tail = std::thread::spawn(move || reader.next_timeout(Duration::from_secs(10)));
    let group = tail.join().expect("thread").expect("read").expect("a group");
    assert_eq!(group.records().next(), Some(&b"from a thread"[..]));
}

#[test]
fn an_owned_reader_keeps_the_log_open_until_it_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), config()).expect("open").0);
    let start = log.end_lsn();
    log.commit(b"kept", Durability::Synced).expect("commit");
    let mut reader = log.read_from_owned(start).expect("reader");
    drop(log);
    // The user's last Arc is gone; the reader's keeps the log open: its
    // directory is still locked, and the reader still reads.
    assert!(matches!(Log::open(dir.path(), config()), Err(Error::Locked { .. })), "the log closed under its reader");
    let group = reader.try_next().expect("read").expect("a group");
    assert_eq!(group.records().next(), Some(&b"kept"[..]));
    drop(reader);
    let (_, recovery) = Log::open(dir.path(), config()).expect("reopen once the reader went");
    assert_eq!(recovery.end(), LogEnd::CleanShutdown);
}
