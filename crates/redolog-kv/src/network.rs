//! Raft's RPCs between nodes: JSON over HTTP, reqwest on the calling side
//! (the other side is `api.rs`'s `/raft/*` routes). Every call carries
//! openraft's deadline for it; a node that does not answer is
//! `Unreachable`, an answer openraft sent as an error is the remote's error.

use std::future::Future;
use std::io::Cursor;

use redolog_raft::openraft_0_10::openraft;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use openraft::alias::{SnapshotMetaOf, SnapshotOf, VoteOf};
use openraft::error::{NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};
use openraft::{BasicNode, OptionalSend};

use crate::machine::TypeConfig;

/// A full snapshot as it travels: the leader's vote, the snapshot's meta and
/// its bytes.
#[derive(Serialize, Deserialize)]
pub struct SnapshotMessage {
    pub vote: VoteOf<TypeConfig>,
    pub meta: SnapshotMetaOf<TypeConfig>,
    pub data: Vec<u8>,
}

/// Makes connections to the other nodes; one HTTP client (a connection
/// pool) for all of them.
#[derive(Clone, Default)]
pub struct Network {
    client: reqwest::Client,
    /// Where to send Raft's RPCs for a node instead of the address the
    /// membership gives it (`--route`): a fault test puts a proxy on each
    /// link to cut or delay it.
    routes: std::collections::BTreeMap<u64, String>,
}

impl Network {
    /// A network that reaches node `id` through `routes[id]` where given.
    pub fn with_routes(routes: std::collections::BTreeMap<u64, String>) -> Network {
        Network { client: reqwest::Client::default(), routes }
    }
}

/// A connection to one node.
pub struct Connection {
    client: reqwest::Client,
    target: u64,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Connection {
        let addr = self.routes.get(&target).unwrap_or(&node.addr).clone();
        Connection { client: self.client.clone(), target, addr }
    }
}

/// Why a call got no answer.
#[derive(Debug, thiserror::Error)]
#[error("node {target} at {addr}: {source}")]
struct CallError {
    target: u64,
    addr: String,
    source: reqwest::Error,
}

impl Connection {
    /// POSTs `request` to `path` and decodes openraft's answer: the
    /// response, or the error the remote's Raft returned, as the RPC error
    /// openraft expects of every call.
    async fn rpc<Q, P>(&self, path: &str, request: &Q, option: &RPCOption) -> Result<P, RPCError<TypeConfig>>
    where
        Q: Serialize,
        P: DeserializeOwned,
    {
        let url = format!("http://{}{path}", self.addr);
        let failed = |source| CallError { target: self.target, addr: self.addr.clone(), source };
        let answer: Result<Result<P, RaftError<TypeConfig>>, CallError> = async {
            let response =
                self.client.post(url).json(request).timeout(option.hard_ttl()).send().await.map_err(failed)?;
            response.error_for_status().map_err(failed)?.json().await.map_err(failed)
        }
        .await;
        match answer {
            Ok(Ok(response)) => Ok(response),
            // A node whose Raft stopped answers as a dead one would.
            Ok(Err(RaftError::Fatal(fatal))) => Err(RPCError::Unreachable(Unreachable::new(&fatal))),
            Ok(Err(RaftError::APIError(never))) => match never {},
            Err(error) if error.source.is_connect() || error.source.is_timeout() => {
                Err(RPCError::Unreachable(Unreachable::new(&error)))
            }
            Err(error) => Err(RPCError::Network(NetworkError::new(&error))),
        }
    }
}

impl RaftNetworkV2<TypeConfig> for Connection {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.rpc("/raft/append", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.rpc("/raft/vote", &rpc, &option).await
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, Cursor<Vec<u8>>>,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let message = SnapshotMessage { vote, meta: snapshot.meta, data: snapshot.snapshot.into_inner() };
        Ok(self.rpc("/raft/snapshot", &message, &option).await?)
    }
}
