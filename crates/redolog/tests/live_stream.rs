//! Goal: the live reader as an async `Stream` (docs/DESIGN.md §4.1, INV-47):
//! a task tailing a log written from threads gets every group, in order,
//! each once, and the stream ends when the log is closed and read to its
//! end; a poisoned log gives its poison once, then the end; and a waiting
//! stream demands nothing — the log stays in group commit, no log thread
//! runs for it (what a registration in the sync stage's own waker slots
//! would do, INV-27).

use std::future::poll_fn;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use redolog::storage::{FaultKind, FaultyStorage, MemStorage};
use redolog::{Config, Durability, Error, Log, LogReader, Pipeline};

fn config(pipeline: Pipeline) -> Config {
    Config::default().with_capacity_bytes(4 << 20).with_pipeline(pipeline)
}

async fn next(reader: &mut LogReader<'static>) -> Option<redolog::Result<redolog::Group>> {
    poll_fn(|context| Pin::new(&mut *reader).poll_next(context)).await
}

#[test]
fn a_task_follows_writers_to_the_close_and_the_stream_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), config(Pipeline::GroupCommit)).expect("open").0);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().expect("runtime");
    let mut tail = log.read_from_owned(log.end_lsn()).expect("reader");
    let follower = runtime.spawn(async move {
        let mut seen = Vec::new();
        while let Some(group) = next(&mut tail).await {
            let group = group.expect("a durable group");
            seen.push((group.start_lsn(), group.records().next().expect("a record").to_vec()));
        }
        seen
    });
    // While the stream waits, nothing runs for it: still group commit.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(log.active_pipeline(), Pipeline::GroupCommit, "a waiting stream started the log threads");
    let writers: Vec<_> = (0..2u8)
        .map(|writer| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..300u16 {
                    log.commit(&[writer, i as u8, (i >> 8) as u8], Durability::Synced).expect("commit");
                }
                300
            })
        })
        .collect();
    let written: usize = writers.into_iter().map(|writer| writer.join().expect("writer")).sum();
    log.close().expect("close");
    let seen = runtime.block_on(follower).expect("the follower ended");
    assert_eq!(seen.len(), written, "every group once");
    assert!(seen.windows(2).all(|pair| pair[0].0 < pair[1].0), "in LSN order");
    for writer in 0..2u8 {
        let order: Vec<u16> = seen
            .iter()
            .filter(|(_, record)| record[0] == writer)
            .map(|(_, record)| u16::from(record[1]) | u16::from(record[2]) << 8)
            .collect();
        assert_eq!(order, (0..300).collect::<Vec<_>>(), "writer {writer}'s commits, each once, in order");
    }
}

#[test]
fn a_poisoned_log_gives_its_poison_once_then_the_end() {
    let memory = MemStorage::new();
    let dir = Path::new("/log");
    Log::open_with_storage(dir, config(Pipeline::GroupCommit), memory.clone())
        .expect("create")
        .0
        .close()
        .expect("close");
    // The fdatasyncs of an open, counted on an equal one, so that the fault
    // lands on the workload's second.
    let counting = FaultyStorage::new(memory.clone(), FaultKind::Sync, u64::MAX, false);
    let (counted, _) = Log::open_with_storage(dir, config(Pipeline::GroupCommit), counting.clone()).expect("count");
    let syncs_of_open = counting.attempted();
    counted.close().expect("close");
    let storage = FaultyStorage::new(memory, FaultKind::Sync, syncs_of_open + 2, true);
    let log = Arc::new(Log::open_with_storage(dir, config(Pipeline::GroupCommit), storage).expect("open").0);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().expect("runtime");
    let mut tail = log.read_from_owned(log.end_lsn()).expect("reader");
    let follower = runtime.spawn(async move {
        let mut items = Vec::new();
        while let Some(item) = next(&mut tail).await {
            items.push(item.map(|group| group.records().next().expect("a record").to_vec()));
        }
        items
    });
    log.commit(b"synced", Durability::Synced).expect("the first sync succeeds");
    assert!(log.commit(b"never", Durability::Synced).is_err(), "the second sync fails");
    let items = runtime.block_on(follower).expect("the follower ended");
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0].as_ref().expect("the synced group"), b"synced");
    assert!(matches!(items[1], Err(Error::Io { .. }) | Err(Error::Poisoned { .. })), "{:?}", items[1]);
}
