//! An openraft 0.10 cluster in one process, for tests and benchmarks: the
//! 0.10 counterpart of `openraft_0_9::in_process` — a network that is a map
//! from node id to its [`Raft`] handle ([`Router`]), and a small key-value
//! state machine ([`Machine`]) on [`TypeConfig`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use std::sync::Arc;
//! use redolog_raft::openraft_0_10::in_process::{Machine, Node, Router, Store};
//! use redolog_raft::openraft_0_10::openraft;
//!
//! let config = Arc::new(openraft::Config::default().validate()?);
//! let router = Router::default();
//! for id in 1..=3 {
//!     let store = Store::open(format!("node-{id}"), redolog::Config::default())?;
//!     let node = Node::new(id, config.clone(), router.clone(), store, Machine::default()).await?;
//!     router.set(id, Some(node));
//! }
//! let members = (1..=3).map(|id| (id, openraft::BasicNode::default())).collect::<std::collections::BTreeMap<_, _>>();
//! router.get(1).ok_or("node 1")?.initialize(members).await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{self, Cursor};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::{Stream, TryStreamExt};
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf, VoteOf};
use openraft::error::{RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{BasicNode, EntryPayload, OptionalSend, Raft};

use super::openraft;

openraft::declare_raft_types!(
    /// The in-process cluster's types: string commands and responses, `u64`
    /// node ids, openraft's defaults otherwise.
    pub TypeConfig
);

/// A redolog log store for [`TypeConfig`].
pub type Store = super::RedologLogStore<TypeConfig>;

/// A running node.
pub type Node = Raft<TypeConfig, Machine>;

/// The in-process network for this line's nodes: every running node by id.
pub type Router = crate::testkit::Router<Node>;

/// One node's connection to `target`.
pub struct Connection {
    router: Router,
    target: u64,
}

impl Connection {
    /// The target, or the error a dead link gives.
    fn target(&self) -> Result<Node, Unreachable<TypeConfig>> {
        self.router.get(self.target).ok_or_else(|| {
            let down = io::Error::new(io::ErrorKind::NotConnected, format!("node {} is down", self.target));
            Unreachable::new(&down)
        })
    }
}

/// A fatal error of the target: it stopped, as a dead link does.
fn stopped(error: RaftError<TypeConfig>) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::new(&error))
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection {
        Connection { router: self.clone(), target }
    }
}

impl RaftNetworkV2<TypeConfig> for Connection {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.target()?.append_entries(rpc).await.map_err(stopped)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.target()?.vote(rpc).await.map_err(stopped)
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, Cursor<Vec<u8>>>,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let target = self.target()?;
        target.install_full_snapshot(vote, snapshot).await.map_err(|fatal| Unreachable::new(&fatal).into())
    }
}

/// What the machine has applied.
#[derive(Default, Clone, serde::Serialize, serde::Deserialize)]
struct Applied {
    last: Option<LogIdOf<TypeConfig>>,
    membership: StoredMembershipOf<TypeConfig>,
    /// `key=value` commands set `key`; a command without `=` sets itself to "".
    data: BTreeMap<String, String>,
}

#[derive(Default)]
struct Inner {
    applied: Applied,
    snapshot: Option<(SnapshotMetaOf<TypeConfig>, Vec<u8>)>,
}

/// An in-memory key-value state machine: a command `key=value` sets `key`.
/// Snapshots are the map as JSON, kept in memory.
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

impl RaftSnapshotBuilder<TypeConfig> for Machine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<SnapshotOf<TypeConfig, Cursor<Vec<u8>>>, io::Error> {
        let mut inner = self.inner();
        let bytes = serde_json::to_vec(&inner.applied).map_err(io::Error::other)?;
        let meta = SnapshotMetaOf::<TypeConfig> {
            last_log_id: inner.applied.last,
            last_membership: inner.applied.membership.clone(),
        };
        inner.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(SnapshotOf::<TypeConfig, Cursor<Vec<u8>>> { meta, snapshot: Cursor::new(bytes) })
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<TypeConfig>>, StoredMembershipOf<TypeConfig>), io::Error> {
        let inner = self.inner();
        Ok((inner.applied.last, inner.applied.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + OptionalSend,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            {
                let mut inner = self.inner();
                inner.applied.last = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => {}
                    EntryPayload::Normal(command) => {
                        let (key, value) = command.split_once('=').unwrap_or((&command, ""));
                        inner.applied.data.insert(key.to_string(), value.to_string());
                    }
                    EntryPayload::Membership(membership) => {
                        inner.applied.membership =
                            StoredMembershipOf::<TypeConfig>::new(Some(entry.log_id), membership);
                    }
                }
            }
            if let Some(responder) = responder {
                responder.send(String::new());
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), io::Error> {
        let bytes = snapshot.into_inner();
        let applied: Applied = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
        let mut inner = self.inner();
        inner.applied = Applied { last: meta.last_log_id, membership: meta.last_membership.clone(), ..applied };
        inner.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<SnapshotOf<TypeConfig, Cursor<Vec<u8>>>>, io::Error> {
        let inner = self.inner();
        Ok(inner.snapshot.as_ref().map(|(meta, bytes)| SnapshotOf::<TypeConfig, Cursor<Vec<u8>>> {
            meta: meta.clone(),
            snapshot: Cursor::new(bytes.clone()),
        }))
    }
}
