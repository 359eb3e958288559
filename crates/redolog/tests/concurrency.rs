//! Goal: many threads committing at once lose nothing and recover in LSN order.
//! Method: 64 threads commit numbered records with each durability (and groups of
//! several records) on real files; every returned LSN is kept; after close and
//! reopen, the recovered groups must be exactly the appended ones, in strictly
//! increasing end-LSN order, each byte-exact. The metrics must show no lost
//! wake-up (INV-10, INV-11) and group commit at work. Run under both pipelines.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use redolog::{Durability, Log, Lsn, Pipeline};

const THREADS: usize = 64;
const COMMITS_PER_THREAD: usize = 150;

fn record(thread: usize, index: usize) -> Vec<u8> {
    let mut bytes = format!("thread {thread} commit {index} ").into_bytes();
    bytes.resize(20 + (thread * 7 + index * 13) % 300, b'0' + (index % 10) as u8);
    bytes
}

#[test]
fn sixty_four_threads_recover_in_lsn_order_with_group_commit() {
    sixty_four_threads_recover_in_lsn_order(Pipeline::GroupCommit);
}

#[test]
fn sixty_four_threads_recover_in_lsn_order_with_dedicated_log_threads() {
    sixty_four_threads_recover_in_lsn_order(Pipeline::Dedicated);
}

fn sixty_four_threads_recover_in_lsn_order(pipeline: Pipeline) {
    let dir = tempfile::tempdir().expect("tempdir");
    // A 64 KiB ring so appenders also wait for ring space and big groups stream.
    let config = common::config(2048, 64 << 10).with_pipeline(pipeline);
    let (log, _) = Log::open(dir.path(), config.clone()).expect("open");
    let log = Arc::new(log);
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut appended = Vec::new();
                for index in 0..COMMITS_PER_THREAD {
                    let durability = match (thread + index) % 3 {
                        0 => Durability::Buffered,
                        1 => Durability::Written,
                        _ => Durability::Synced,
                    };
                    let records: Vec<Vec<u8>> =
                        (0..1 + (index % 4 == 0) as usize * 2).map(|part| record(thread, index * 10 + part)).collect();
                    let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
                    let end = log.append_group(&slices).expect("append");
                    log.wait(end, durability).expect("wait");
                    if durability == Durability::Synced {
                        assert!(log.durable_lsn() >= end, "acknowledged before synced");
                    }
                    appended.push((end, records));
                }
                appended
            })
        })
        .collect();
    let mut expected: BTreeMap<Lsn, Vec<Vec<u8>>> = BTreeMap::new();
    for thread in threads {
        for (end, records) in thread.join().expect("thread") {
            assert!(expected.insert(end, records).is_none(), "two groups got end LSN {end}");
        }
    }
    let metrics = log.metrics();
    assert_eq!(metrics.timeouts_with_work(), 0, "lost wake-up:\n{metrics:#}");
    assert_eq!(metrics.pipeline, pipeline);
    if pipeline == Pipeline::Dedicated {
        // The log threads did the passes: every write and sync visit is theirs.
        assert!(metrics.log_writer.no_waits > 0 && metrics.log_flusher.no_waits > 0, "{metrics:#}");
        assert_eq!(metrics.log_on_ready.waits, 0, "a committer led a write pass\n{metrics:#}");
    }
    assert!(metrics.log_fsyncs > 0);
    assert!(
        metrics.log_fsyncs < metrics.log_on_flush.no_waits + metrics.log_on_flush.waits,
        "no group commit: one fsync per Synced commit\n{metrics:#}"
    );
    log.close().expect("close");
    drop(log);

    let (_log, groups, _) = common::reopen(dir.path(), &config);
    assert_eq!(groups.len(), expected.len());
    let mut previous_end = Lsn::from_u64(0);
    for (group, (end, records)) in groups.iter().zip(&expected) {
        assert!(group.start_lsn() >= previous_end);
        assert_eq!(group.end_lsn(), *end);
        let recovered: Vec<Vec<u8>> = group.records().map(<[u8]>::to_vec).collect();
        assert_eq!(&recovered, records, "group ending at {end}");
        previous_end = group.end_lsn();
    }
}
