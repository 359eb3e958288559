//! Goal: the WAL rule never deadlocks a checkpoint (docs/DESIGN.md §1.8,
//! INV-18). A checkpoint first makes the log durable up to its LSN; when the
//! log is full the writer cannot write up to that LSN until a checkpoint frees
//! space, so the checkpoint must first checkpoint at what is durable and go on.
//! Method: an appender fills a small log with `Buffered` groups until the
//! writer waits for file space; then a checkpoint at the end of everything
//! appended must return (bounded by a timeout here, never in the library) with
//! the log durable to it, and the appender must finish.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redolog::{Durability, Log};

#[test]
fn a_checkpoint_past_the_file_limit_of_a_full_log_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::small_log();
    // The files' data per lap (common::small_log: 4 files of 32 blocks of 492
    // data bytes, 460 encrypted).
    let lap = 4 * 32 * common::block_data_bytes(&config);
    let (log, _) = Log::open(dir.path(), config).expect("create");
    let log = Arc::new(log);
    let appender = {
        let log = log.clone();
        std::thread::spawn(move || {
            // 1.25 laps of the files: the appender stops at the file limit
            // until the checkpoint below frees a lap, after which all fits.
            let mut appended = 0;
            while appended < lap * 5 / 4 {
                log.append(&[7u8; 300]).expect("append");
                appended += 300;
            }
            log.wait(log.end_lsn(), Durability::Synced).expect("wait");
        })
    };
    // The appender is stuck once nothing moves for a while (a wait is counted
    // only when it ends, so the file-space counter cannot tell).
    let started = Instant::now();
    let (mut end, mut still) = (log.end_lsn(), 0);
    while still < 4 {
        assert!(started.elapsed() < Duration::from_secs(20), "the appender never stopped at the file limit");
        std::thread::sleep(Duration::from_millis(50));
        let now = log.end_lsn();
        still = if now == end { still + 1 } else { 0 };
        end = now;
    }
    assert!(!appender.is_finished(), "the appender stopped at the file limit");
    let lsn = log.end_lsn();
    assert!(lsn > log.durable_lsn(), "the checkpoint lies ahead of the durable log");
    let (done, finished) = mpsc::channel();
    {
        let log = log.clone();
        std::thread::spawn(move || {
            let _ = done.send(log.checkpoint(lsn));
        });
    }
    let result = finished.recv_timeout(Duration::from_secs(20)).expect("the checkpoint of a full log returned");
    result.expect("checkpoint");
    assert!(
        log.durable_lsn() >= lsn,
        "INV-18: checkpoint {lsn} returned with the log durable to {}",
        log.durable_lsn()
    );
    assert_eq!(log.metrics().lsns.log_lsn_last_checkpoint, lsn.as_u64());
    appender.join().expect("the appender finished once the checkpoint freed space");
    assert!(log.metrics().log_on_file_space.waits > 0, "the writer waited for file space");
    log.close().expect("close");
}
