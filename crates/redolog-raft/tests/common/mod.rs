//! What the tests share: a type config, a small state machine (openraft's
//! suite drives one beside the log store), and opening a store.

#![allow(dead_code)]

pub mod network;

use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership,
};
use redolog_raft::RedologLogStore;

openraft::declare_raft_types!(pub TypeConfig);

pub type Store = RedologLogStore<TypeConfig>;

/// A small log for tests: 1 MiB.
pub fn config() -> redolog::Config {
    redolog::Config { capacity_bytes: 1 << 20, ..redolog::Config::default() }
}

pub fn open(dir: &Path) -> Store {
    Store::open(dir, config()).expect("open the store")
}

/// What the machine has applied: the payloads of normal entries, in order.
#[derive(Default, Clone, serde::Serialize, serde::Deserialize)]
struct Applied {
    last: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    data: Vec<String>,
}

#[derive(Default)]
struct Inner {
    applied: Applied,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// An in-memory state machine: a list of applied strings, snapshotted as JSON.
#[derive(Clone, Default)]
pub struct Machine(Arc<Mutex<Inner>>);

impl Machine {
    /// The payloads of the normal entries applied so far, in order.
    pub fn applied(&self) -> Vec<String> {
        self.inner().applied.data.clone()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().expect("no test panicked holding the machine")
    }
}

fn snapshot_error(error: &serde_json::Error) -> StorageError<u64> {
    StorageIOError::read_snapshot(None, AnyError::new(error)).into()
}

impl RaftSnapshotBuilder<TypeConfig> for Machine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let mut inner = self.inner();
        inner.snapshots_built += 1;
        let bytes = serde_json::to_vec(&inner.applied).map_err(|error| snapshot_error(&error))?;
        let meta = SnapshotMeta {
            last_log_id: inner.applied.last,
            last_membership: inner.applied.membership.clone(),
            snapshot_id: format!("snapshot-{}", inner.snapshots_built),
        };
        inner.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let inner = self.inner();
        Ok((inner.applied.last, inner.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
    {
        let mut inner = self.inner();
        let mut responses = Vec::new();
        for entry in entries {
            inner.applied.last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(data) => inner.applied.data.push(data),
                EntryPayload::Membership(membership) => {
                    inner.applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
            responses.push(String::new());
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let applied: Applied = serde_json::from_slice(&bytes).map_err(|error| snapshot_error(&error))?;
        let mut inner = self.inner();
        inner.applied = Applied { last: meta.last_log_id, membership: meta.last_membership.clone(), ..applied };
        inner.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let inner = self.inner();
        Ok(inner
            .snapshot
            .as_ref()
            .map(|(meta, bytes)| Snapshot { meta: meta.clone(), snapshot: Box::new(Cursor::new(bytes.clone())) }))
    }
}
