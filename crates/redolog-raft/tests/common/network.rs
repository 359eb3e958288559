//! The in-process network of the example and the kill test: a map from node
//! id to its `Raft`; a node that is not in it is down (unreachable).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Raft};

use super::TypeConfig;

pub type Node = Raft<TypeConfig>;

/// The in-process network: every running node by id.
#[derive(Clone, Default)]
pub struct Router(Arc<Mutex<BTreeMap<u64, Node>>>);

impl Router {
    pub fn get(&self, id: u64) -> Option<Node> {
        self.0.lock().expect("router").get(&id).cloned()
    }

    pub fn set(&self, id: u64, node: Option<Node>) {
        let mut nodes = self.0.lock().expect("router");
        match node {
            Some(node) => nodes.insert(id, node),
            None => nodes.remove(&id),
        };
    }
}

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
