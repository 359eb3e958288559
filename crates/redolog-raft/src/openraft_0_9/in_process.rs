//! An openraft cluster in one process, for examples, tests and benchmarks:
//! a network that is a map from node id to its [`Raft`] handle ([`Router`]),
//! and a small key-value state machine ([`Machine`]) on [`TypeConfig`].
//!
//! Production nodes bring their own network and state machine; this module
//! is what `cargo run -p redolog-raft --example raft_kv`, the crate's kill
//! test and `redolog bench --workload raft` run, so that a user can run the
//! same cluster against their own code.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use std::sync::Arc;
//! use redolog_raft::openraft_0_9::in_process::{Machine, Router, Store};
//!
//! let config = Arc::new(openraft::Config::default().validate()?);
//! let router = Router::default();
//! for id in 1..=3 {
//!     let store = Store::open(format!("node-{id}"), redolog::Config::default())?;
//!     let node = openraft::Raft::new(id, config.clone(), router.clone(), store, Machine::default()).await?;
//!     router.set(id, Some(node));
//! }
//! let members = (1..=3).map(|id| (id, openraft::BasicNode::default())).collect::<std::collections::BTreeMap<_, _>>();
//! router.get(1).ok_or("node 1")?.initialize(members).await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, Raft, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};

openraft::declare_raft_types!(
    /// The in-process cluster's types: string commands and responses, `u64`
    /// node ids, openraft's defaults otherwise.
    pub TypeConfig
);

/// A redolog log store for [`TypeConfig`].
pub type Store = super::RedologLogStore<TypeConfig>;

/// A running node.
pub type Node = Raft<TypeConfig>;

/// The in-process network for this line's nodes: every running node by id.
pub type Router = crate::testkit::Router<Node>;

/// One node's connection to `target`.
pub struct Connection {
    router: Router,
    target: u64,
}

impl Connection {
    /// The target, or the error a dead link gives (openraft's error type, as
    /// large as openraft makes it).
    #[allow(clippy::result_large_err)]
    fn target<E: std::error::Error>(&self) -> Result<Node, RPCError<u64, BasicNode, E>> {
        self.router.get(self.target).ok_or_else(|| {
            let down = std::io::Error::new(std::io::ErrorKind::NotConnected, format!("node {} is down", self.target));
            RPCError::Network(NetworkError::new(&down))
        })
    }
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection {
        Connection { router: self.clone(), target }
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.target()?;
        target.append_entries(rpc).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        let target = self.target()?;
        target.install_snapshot(rpc).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.target()?;
        target.vote(rpc).await.map_err(|error| RPCError::RemoteError(RemoteError::new(self.target, error)))
    }
}

/// What the machine has applied.
#[derive(Default, Clone, serde::Serialize, serde::Deserialize)]
struct Applied {
    last: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    /// `key=value` commands set `key`; a command without `=` sets itself to "".
    data: BTreeMap<String, String>,
}

#[derive(Default)]
struct Inner {
    applied: Applied,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// An in-memory key-value state machine: a command `key=value` sets `key`.
/// Snapshots are the map as JSON, kept in memory (a restarted node catches
/// up from its log, or from the leader's snapshot).
#[derive(Clone, Default)]
pub struct Machine(Arc<Mutex<Inner>>);

impl Machine {
    /// The keys and values applied so far.
    pub fn data(&self) -> BTreeMap<String, String> {
        self.inner().applied.data.clone()
    }

    /// How many keys are set.
    pub fn len(&self) -> usize {
        self.inner().applied.data.len()
    }

    /// No key is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every update is one assignment under the lock.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
                EntryPayload::Normal(command) => {
                    let (key, value) = command.split_once('=').unwrap_or((&command, ""));
                    inner.applied.data.insert(key.to_string(), value.to_string());
                }
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
