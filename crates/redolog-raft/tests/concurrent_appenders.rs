//! Goal: the store's position index stays true whoever appends (RS-1,
//! docs/RAFT.md, "Appends"): clones of one store appending at once — entries
//! from one task, votes from another — leave every entry readable back from
//! the log files, with the bytes it was appended with. Before RS-1 the index
//! took a group's start from the previous group's end, so a vote appended
//! between an entry's append and its bookkeeping gave the entry the vote's
//! group, and reading the entry back from the files failed; now the start is
//! the log's own (`Log::append_group_range`).
//! Method: 6,000 one-entry appends (more than the store caches, so the oldest
//! are read from the files) beside a task saving votes, on `MemStorage` (no
//! fsync to wait for); then every entry is read back and compared. The
//! index is the shared store's (`LogStore`), one for both openraft lines:
//! the test drives it through 0.9's traits.

mod common;

use std::path::Path;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

const ENTRIES: u64 = 6_000;

fn entry(index: u64) -> Entry<common::v0_9::TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(format!("e{index}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_appending_at_once_keep_every_entry_readable() {
    let config = redolog::Config::default().with_capacity_bytes(16 << 20);
    let store = common::v0_9::Store::open_with_storage(Path::new("log"), config, redolog::storage::MemStorage::new())
        .expect("open");
    let mut entries = store.clone();
    let appender = tokio::spawn(async move {
        for index in 1..=ENTRIES {
            entries.blocking_append([entry(index)]).await.expect("append");
        }
    });
    let mut votes = store.clone();
    let voter = tokio::spawn(async move {
        let mut term = 1;
        while !appender_done(&votes).await {
            term += 1;
            votes.save_vote(&Vote::new(term, 1)).await.expect("vote");
        }
        term
    });
    appender.await.expect("the appender");
    let terms = voter.await.expect("the voter");
    assert!(terms > 10, "the votes ran beside the appends: {terms} terms");
    let mut store = store;
    let mut reader = store.get_log_reader().await;
    let read = reader.try_get_log_entries(1..=ENTRIES).await.expect("every entry reads back");
    assert_eq!(read.len() as u64, ENTRIES);
    for (index, got) in (1..=ENTRIES).zip(read) {
        assert_eq!(got.log_id.index, index);
        assert!(matches!(&got.payload, EntryPayload::Normal(text) if *text == format!("e{index}")), "{index}: {got:?}");
    }
}

/// Whether the appender has appended the last entry (and yields, so the two
/// tasks interleave).
async fn appender_done(store: &common::v0_9::Store) -> bool {
    tokio::task::yield_now().await;
    let mut store = store.clone();
    let state = store.get_log_state().await.expect("state");
    state.last_log_id.is_some_and(|last| last.index == ENTRIES)
}
