//! Goal: everything the store was told survives a reopen — after every kind
//! of write (append, vote, committed id, truncate, purge, and the checkpoint a
//! purge triggers) a reopened store reports the same log state, vote,
//! committed id and entries. openraft's suite never reopens a store; these
//! tests do. Also: entries read back from the files once the cache dropped
//! them, and a log that holds something else is a typed error.

mod common;

use openraft::storage::{RaftLogReaderExt, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, LogState, RaftLogReader, Vote};

use common::{Store, TypeConfig};

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(format!("entry {index} of term {term}")) }
}

/// What a reopen must reproduce.
#[derive(Debug, PartialEq)]
struct Seen {
    state: LogState<TypeConfig>,
    vote: Option<Vote<u64>>,
    committed: Option<LogId<u64>>,
    entries: Vec<Entry<TypeConfig>>,
}

async fn seen(store: &mut Store) -> Seen {
    let state = store.get_log_state().await.expect("log state");
    let from = state.last_purged_log_id.map_or(0, |id| id.index + 1);
    let to = state.last_log_id.map_or(0, |id| id.index + 1);
    Seen {
        vote: store.read_vote().await.expect("vote"),
        committed: store.read_committed().await.expect("committed"),
        entries: store.try_get_log_entries(from..to).await.expect("entries"),
        state,
    }
}

/// Checks that a reopened store sees what `store` sees, and returns it.
async fn reopened(dir: &std::path::Path, store: Store, context: &str) -> Store {
    let mut store = store;
    let before = seen(&mut store).await;
    drop(store);
    let mut store = common::open(dir);
    assert_eq!(seen(&mut store).await, before, "{context}: the reopened store differs");
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_write_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = common::open(dir.path());
    store.blocking_append((1..=10).map(|index| entry(1, index))).await.expect("append");
    let mut store = reopened(dir.path(), store, "append").await;
    store.save_vote(&Vote::new(2, 1)).await.expect("vote");
    let mut store = reopened(dir.path(), store, "vote").await;
    assert_eq!(store.read_vote().await.expect("vote"), Some(Vote::new(2, 1)));
    // `save_committed` appends nothing: the id goes first in the next group,
    // or is appended when the store closes.
    store.save_committed(Some(log_id(1, 5))).await.expect("committed");
    let mut store = reopened(dir.path(), store, "committed, then closed").await;
    assert_eq!(store.read_committed().await.expect("committed"), Some(log_id(1, 5)));
    store.save_committed(Some(log_id(1, 6))).await.expect("committed");
    store.blocking_append([entry(2, 11)]).await.expect("append");
    let mut store = reopened(dir.path(), store, "committed, then an append").await;
    assert_eq!(store.read_committed().await.expect("committed"), Some(log_id(1, 6)));
    store.truncate(log_id(1, 9)).await.expect("truncate");
    store.blocking_append([entry(3, 9), entry(3, 10)]).await.expect("append after truncate");
    let mut store = reopened(dir.path(), store, "truncate").await;
    let last = store.get_log_state().await.expect("state").last_log_id;
    assert_eq!(last, Some(log_id(3, 10)), "the truncated entries came back");
    store.purge(log_id(1, 4)).await.expect("purge");
    store.blocking_append([entry(3, 11)]).await.expect("append after purge");
    let mut store = reopened(dir.path(), store, "purge").await;
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 4)));
    assert_eq!(store.try_get_log_entries(5..6).await.expect("entries"), vec![entry(1, 5)]);
}

/// A purge that frees an eighth of the log checkpoints it; the vote, the
/// committed id and the purge point were appended long before the checkpoint,
/// and must survive it (they are re-appended first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_after_a_purge_keeps_the_vote_the_committed_id_and_the_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = common::open(dir.path());
    store.save_vote(&Vote::new_committed(7, 1)).await.expect("vote");
    store.save_committed(Some(log_id(7, 1))).await.expect("committed");
    let mut index = 0;
    // 1 MiB of log; purge behind the writer so the log wraps several times.
    for round in 0..12 {
        let batch: Vec<_> = (0..200)
            .map(|_| {
                index += 1;
                entry(7, index)
            })
            .collect();
        store.blocking_append(batch).await.expect("append");
        if round > 1 {
            store.purge(log_id(7, index - 300)).await.expect("purge");
        }
    }
    let checkpoint = store.log().metrics().log_checkpoints;
    assert!(checkpoint > 0, "no purge checkpointed the log");
    let mut store = reopened(dir.path(), store, "after the checkpoints").await;
    assert_eq!(store.read_vote().await.expect("vote"), Some(Vote::new_committed(7, 1)));
    assert_eq!(store.read_committed().await.expect("committed"), Some(log_id(7, 1)));
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(7, index - 300)));
    assert_eq!(state.last_log_id, Some(log_id(7, index)));
    let kept = store.try_get_log_entries(index - 299..=index).await.expect("entries");
    assert_eq!(kept, (index - 299..=index).map(|i| entry(7, i)).collect::<Vec<_>>());
}

/// More entries than the cache holds: the old ones are read from the files
/// through the live reader, equal to what was appended, also from groups
/// that begin with a committed id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_the_cache_dropped_are_read_from_the_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(dir.path(), redolog::Config { capacity_bytes: 8 << 20, ..redolog::Config::default() })
        .expect("open");
    for batch in 0..100u64 {
        // As a leader does: the committed id before most appends, so those
        // groups start with it and their entries' record numbers shift.
        if batch % 3 != 0 {
            store.save_committed(Some(log_id(1, batch * 64))).await.expect("committed");
        }
        store.blocking_append((1..=64).map(|i| entry(1, batch * 64 + i))).await.expect("append");
    }
    let mut reader = store.get_log_reader().await;
    let all = reader.try_get_log_entries(1..=6400).await.expect("entries");
    assert_eq!(all, (1..=6400).map(|i| entry(1, i)).collect::<Vec<_>>());
    let one = reader.try_get_log_entries(100..101).await.expect("one entry");
    assert_eq!(one, vec![entry(1, 100)]);
    assert_eq!(reader.get_log_entries(1..3).await.expect("two entries"), vec![entry(1, 1), entry(1, 2)]);
}

/// A redolog log written by something else: opening it as a Raft store is
/// `Error::Corrupt` naming the group and the record, not a panic.
#[test]
fn a_log_of_foreign_records_is_a_typed_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (log, _) = redolog::Log::open(dir.path(), common::config()).expect("open");
        log.commit(b"not a raft record", redolog::Durability::Synced).expect("commit");
    }
    match Store::open(dir.path(), common::config()) {
        Err(redolog_raft::Error::Corrupt { record: 0, reason, .. }) => {
            assert!(reason.contains("version"), "{reason}");
        }
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}
