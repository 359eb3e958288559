//! Goal: INV-6 where a checkpoint meets a close — after a checkpoint's
//! fdatasync failed, `close` returns the poison and writes nothing: no
//! clean-shutdown mark written over the slot whose sync failed, which
//! would claim what the failure left unknown (the simulation, seed 5625:
//! the close returned `Ok` and marked the log clean).
//! Method: on `CrashStorage`, a checkpoint whose slot write is held for
//! 300 ms (the `checkpoint.write` failpoint sleeps) and whose sync then
//! fails (`checkpoint.sync` returns an error), and a close called while it
//! is held, on another thread; the storage operations counted from the
//! failure to the close's return; the log reopened.
//! One binary of its own: failpoints are global to the process.

use std::path::Path;
use std::time::Duration;

use redolog::storage::CrashStorage;
use redolog::{Config, Durability, Error, Log, LogEnd};

#[test]
fn a_close_after_a_failed_checkpoint_sync_returns_the_poison_and_writes_nothing() {
    let _scenario = fail::FailScenario::setup();
    let storage = CrashStorage::new();
    let config = Config::default().with_capacity_bytes(Config::CAPACITY_BYTES_MIN);
    let (log, _) = Log::open_with_storage(Path::new("/log"), config.clone(), storage.clone()).expect("open");
    log.commit(b"durable", Durability::Synced).expect("commit");
    fail::cfg("checkpoint.write", "1*sleep(300)->off").expect("configure");
    fail::cfg("checkpoint.sync", "1*return->off").expect("configure");
    let log = std::sync::Arc::new(log);
    let checkpointing = log.clone();
    let checkpoint = std::thread::spawn(move || checkpointing.checkpoint(checkpointing.durable_lsn()));
    std::thread::sleep(Duration::from_millis(100));
    let closing = log.clone();
    let close = std::thread::spawn(move || closing.close());
    let failed = checkpoint.join().expect("the checkpoint's thread");
    let before = storage.op_count();
    let closed = close.join().expect("the close's thread");
    fail::remove("checkpoint.write");
    fail::remove("checkpoint.sync");
    assert!(matches!(failed, Err(Error::Poisoned { .. })), "the checkpoint: {failed:?}");
    assert!(matches!(closed, Err(Error::Poisoned { .. })), "the close beside it: {closed:?}");
    assert_eq!(storage.op_count(), before, "the close wrote after the failure");
    drop(log);
    let (_, recovery) = Log::open_with_storage(
        Path::new("/log"),
        config,
        storage.state().crash(redolog::storage::CrashMode::KeepAll).to_storage(),
    )
    .expect("reopen");
    assert_ne!(recovery.end(), LogEnd::CleanShutdown, "a log whose checkpoint sync failed was marked clean");
}
