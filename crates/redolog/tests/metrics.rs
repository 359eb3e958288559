//! Goal: the metrics count what happened, exactly, including the counters the
//! append path derives instead of updating per append (`log_records`, and the
//! `no_waits` of `log_on_buffer_space` / `log_on_recent_written`): every chunk
//! of every group visits both wait sites once, so `no_waits + waits` equals the
//! number of chunks, whether or not the appender had to wait.

mod common;

use redolog::{Durability, Log};

#[test]
fn append_site_visits_and_records_are_counted_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The smallest ring (4 KiB): a 40 KiB group streams through it in chunks.
    // A lone appender that finds the ring full writes it out itself; InnoDB
    // counts that as no wait, and so do we.
    let (log, _) = Log::open(dir.path(), common::config(512, 4096)).expect("open");
    let groups: Vec<Vec<&[u8]>> = vec![vec![], vec![b"one"], vec![b"a", b"b", b"c"], vec![&[7u8; 40_000]]];
    for group in &groups {
        log.append_group(group).expect("append");
    }
    for _ in 0..200 {
        log.append(&[1u8; 300]).expect("append");
    }
    log.wait(log.end_lsn(), Durability::Synced).expect("sync");
    let metrics = log.metrics();
    assert_eq!(metrics.log_groups, 204);
    assert_eq!(metrics.log_records, 1 + 3 + 1 + 200);
    // The 40 000-byte group in a 4 KiB ring: chunks of at most 4 blocks' data
    // (1968 bytes), split evenly: 21 chunks. Every other group is one chunk.
    let chunks = 203 + 40_008u64.div_ceil(1968);
    for (name, site) in
        [("buffer_space", metrics.log_on_buffer_space), ("recent_written", metrics.log_on_recent_written)]
    {
        assert_eq!(site.no_waits + site.waits, chunks, "log_on_{name}: {site:?}");
    }
}

/// Futures and callbacks count as `wait` does: one write request each for
/// `Written` and `Synced` (none for `Buffered`), and their time in
/// `commit_wait_us`, whichever thread completes them.
#[test]
fn async_and_callback_waits_are_counted_as_waits_are() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), common::config(512, 1 << 16)).expect("open");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    runtime.block_on(async {
        for _ in 0..5 {
            log.commit_async(b"future", Durability::Synced).await.expect("commit_async");
        }
        log.commit_async(b"buffered", Durability::Buffered).await.expect("buffered");
    });
    let (sender, receiver) = std::sync::mpsc::channel();
    for _ in 0..3 {
        let end = log.append(b"callback").expect("append");
        let sender = sender.clone();
        log.on_durable(end, Durability::Written, move |result| sender.send(result).expect("send"));
    }
    for _ in 0..3 {
        receiver.recv().expect("a callback ran").expect("durable");
    }
    log.commit(b"blocking", Durability::Synced).expect("commit");
    // A callback's time is recorded before it runs, on the thread that runs it.
    let metrics = log.metrics();
    assert_eq!(metrics.log_write_requests, 5 + 3 + 1, "{metrics:#}");
    assert_eq!(metrics.commit_wait_us.count, 5 + 3 + 1, "{metrics:#}");
}
