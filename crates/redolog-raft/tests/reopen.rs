//! Goal: everything the store was told survives a reopen, on both openraft
//! lines — after every kind of write (append, vote, committed id, truncate,
//! purge, and the checkpoint a purge triggers) a reopened store reports the
//! same log state, vote, committed id and entries. openraft's suite never
//! reopens a store; these tests do. Also: entries read back from the files
//! once the cache dropped them; a log written on one line opens on the
//! other with everything in it; and a log that holds something else is a
//! typed error.

mod common;

use std::path::Path;

use common::{v0_10, v0_9, Item, Line};

fn entry(term: u64, index: u64) -> Item {
    ((term, index), Some(format!("entry {index} of term {term}")))
}

/// Checks that a reopened store sees what `store` sees, and returns it.
async fn reopened<S: Line>(dir: &Path, mut store: S, context: &str) -> S {
    let before = store.seen().await;
    drop(store);
    let mut store = S::open(dir);
    assert_eq!(store.seen().await, before, "{}, {context}: the reopened store differs", S::NAME);
    store
}

async fn every_kind_of_write_survives_a_reopen<S: Line>() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = S::open(dir.path());
    store.append((1..=10).map(|index| entry(1, index)).collect()).await;
    let mut store = reopened(dir.path(), store, "append").await;
    store.save_vote((2, 1, false)).await;
    let mut store = reopened(dir.path(), store, "vote").await;
    assert_eq!(store.vote().await, Some((2, 1, false)));
    // `save_committed` appends nothing: the id goes first in the next group,
    // or is appended when the store closes.
    store.save_committed(Some((1, 5))).await;
    let mut store = reopened(dir.path(), store, "committed, then closed").await;
    assert_eq!(store.committed().await, Some((1, 5)));
    store.save_committed(Some((1, 6))).await;
    store.append(vec![entry(2, 11)]).await;
    let mut store = reopened(dir.path(), store, "committed, then an append").await;
    assert_eq!(store.committed().await, Some((1, 6)));
    store.truncate_after(Some((1, 8))).await;
    store.append(vec![entry(3, 9), entry(3, 10)]).await;
    let mut store = reopened(dir.path(), store, "truncate").await;
    assert_eq!(store.state().await.1, Some((3, 10)), "the truncated entries came back");
    store.purge((1, 4)).await;
    store.append(vec![entry(3, 11)]).await;
    let mut store = reopened(dir.path(), store, "purge").await;
    assert_eq!(store.state().await.0, Some((1, 4)));
    assert_eq!(store.entries(5..=5).await, vec![entry(1, 5)]);
    store.truncate_after(None).await;
    let mut store = reopened(dir.path(), store, "truncate everything").await;
    assert_eq!(store.state().await, (Some((1, 4)), Some((1, 4))), "no entry is left but the purge point");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_write_survives_a_reopen_0_9() {
    every_kind_of_write_survives_a_reopen::<v0_9::Store>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_write_survives_a_reopen_0_10() {
    every_kind_of_write_survives_a_reopen::<v0_10::Store>().await;
}

/// A purge that frees an eighth of the log checkpoints it; the vote, the
/// committed id and the purge point were appended long before the checkpoint,
/// and must survive it (they are re-appended first).
async fn a_checkpoint_after_a_purge_keeps_the_vote_the_committed_id_and_the_entries<S: Line>() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = S::open(dir.path());
    store.save_vote((7, 1, true)).await;
    store.save_committed(Some((7, 1))).await;
    let mut index = 0;
    // 1 MiB of log; purge behind the writer so the log wraps several times.
    for round in 0..12 {
        let batch: Vec<_> = (0..200)
            .map(|_| {
                index += 1;
                entry(7, index)
            })
            .collect();
        store.append(batch).await;
        if round > 1 {
            store.purge((7, index - 300)).await;
        }
    }
    let checkpoint = store.log().metrics().log_checkpoints;
    assert!(checkpoint > 0, "no purge checkpointed the log");
    let mut store = reopened(dir.path(), store, "after the checkpoints").await;
    assert_eq!(store.vote().await, Some((7, 1, true)));
    assert_eq!(store.committed().await, Some((7, 1)));
    assert_eq!(store.state().await, (Some((7, index - 300)), Some((7, index))));
    let kept = store.entries(index - 299..=index).await;
    assert_eq!(kept, (index - 299..=index).map(|i| entry(7, i)).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_after_a_purge_keeps_everything_0_9() {
    a_checkpoint_after_a_purge_keeps_the_vote_the_committed_id_and_the_entries::<v0_9::Store>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_after_a_purge_keeps_everything_0_10() {
    a_checkpoint_after_a_purge_keeps_the_vote_the_committed_id_and_the_entries::<v0_10::Store>().await;
}

/// More entries than the cache holds: the old ones are read from the files
/// through the live reader, equal to what was appended, also from groups
/// that begin with a committed id.
async fn entries_the_cache_dropped_are_read_from_the_files<S: Line>() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = redolog::Config::default().with_capacity_bytes(8 << 20);
    let mut store = S::open_with(dir.path(), config).expect("open");
    for batch in 0..100u64 {
        // As a leader does: the committed id before most appends, so those
        // groups start with it and their entries' record numbers shift.
        if batch % 3 != 0 {
            store.save_committed(Some((1, batch * 64))).await;
        }
        store.append((1..=64).map(|i| entry(1, batch * 64 + i)).collect()).await;
    }
    let all = store.entries(1..=6400).await;
    assert_eq!(all, (1..=6400).map(|i| entry(1, i)).collect::<Vec<_>>());
    assert_eq!(store.entries(100..=100).await, vec![entry(1, 100)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_the_cache_dropped_are_read_from_the_files_0_9() {
    entries_the_cache_dropped_are_read_from_the_files::<v0_9::Store>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_the_cache_dropped_are_read_from_the_files_0_10() {
    entries_the_cache_dropped_are_read_from_the_files::<v0_10::Store>().await;
}

/// A store written on line `A` opened on line `B`: the same vote, committed
/// id, purge point and entries (blank ones too), and `B` appends on.
async fn a_log_written_on_one_line_opens_on_the_other<A: Line, B: Line>() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = A::open(dir.path());
    store.save_vote((3, 1, true)).await;
    let mut entries = vec![((3, 1), None)];
    entries.extend((2..=40).map(|index| entry(3, index)));
    store.append(entries).await;
    store.purge((3, 2)).await;
    store.truncate_after(Some((3, 30))).await;
    store.save_committed(Some((3, 20))).await;
    let before = store.seen().await;
    drop(store);
    let mut other = B::open(dir.path());
    assert_eq!(other.seen().await, before, "{} wrote it, {} reads it differently", A::NAME, B::NAME);
    other.append(vec![entry(4, 31)]).await;
    assert_eq!(other.state().await.1, Some((4, 31)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_on_0_9_opens_on_0_10() {
    a_log_written_on_one_line_opens_on_the_other::<v0_9::Store, v0_10::Store>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_on_0_10_opens_on_0_9() {
    a_log_written_on_one_line_opens_on_the_other::<v0_10::Store, v0_9::Store>().await;
}

/// A redolog log written by something else: opening it as a Raft store is
/// `Error::Corrupt` naming the group and the record, not a panic.
fn a_log_of_foreign_records_is_a_typed_error<S: Line>() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (log, _) = redolog::Log::open(dir.path(), common::config()).expect("open");
        log.commit(b"not a raft record", redolog::Durability::Synced).expect("commit");
    }
    match S::open_with(dir.path(), common::config()) {
        Err(redolog_raft::Error::Corrupt { record: 0, reason, .. }) => {
            assert!(reason.contains("version"), "{reason}");
        }
        Err(other) => panic!("{}: expected Error::Corrupt, got {other:?}", S::NAME),
        Ok(_) => panic!("{}: a log of foreign records opened", S::NAME),
    }
}

#[test]
fn a_log_of_foreign_records_is_a_typed_error_on_both_lines() {
    a_log_of_foreign_records_is_a_typed_error::<v0_9::Store>();
    a_log_of_foreign_records_is_a_typed_error::<v0_10::Store>();
}
