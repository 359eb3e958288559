//! Raft's RPCs between nodes: JSON over HTTP, reqwest on the calling side
//! (the other side is `api.rs`'s `/raft/*` routes). Every call carries
//! openraft's deadline for it; a node that does not answer is
//! `Unreachable`, an answer openraft sent as an error is the remote's error.
//!
//! Replication is one streamed request per session (`/raft/stream`,
//! openraft 0.10's `stream_append`) over HTTP/2: the leader writes each
//! `AppendEntriesRequest` into the request's body as openraft produces it,
//! without waiting for the answer to the one before, and reads the
//! follower's answers from the response's body in the same order. One
//! HTTP/2 stream keeps the order; the follower hands the requests to
//! `Raft::stream_append`, which appends them in order and answers each once
//! its entries are flushed (KV-5, KV-6: docs/RAFT.md, "A cluster of
//! processes"). Single calls — votes, snapshots, and each heartbeat (a
//! stream of one request) — go over HTTP/1.1, whose request leaves in one
//! write.

use std::future::Future;
use std::io::Cursor;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use redolog_raft::openraft_0_10::openraft;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use openraft::alias::{SnapshotMetaOf, SnapshotOf, VoteOf};
use openraft::base::{BoxFuture, BoxStream};
use openraft::error::{Fatal, NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{stream_append_sequential, RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, OptionalSend};

use tokio::sync::watch;

use crate::frames;
use crate::machine::TypeConfig;

/// What the follower answers each streamed request with: openraft's result,
/// or the error its Raft stopped with.
pub type StreamAnswer = Result<StreamAppendResult<TypeConfig>, Fatal<TypeConfig>>;

/// A full snapshot as it travels: the leader's vote, the snapshot's meta and
/// its bytes.
#[derive(Serialize, Deserialize)]
pub struct SnapshotMessage {
    pub vote: VoteOf<TypeConfig>,
    pub meta: SnapshotMetaOf<TypeConfig>,
    pub data: Vec<u8>,
}

/// Makes connections to the other nodes: one HTTP/1.1 client for single
/// calls and one HTTP/2 client for replication streams, each a connection
/// pool shared by every peer.
#[derive(Clone)]
pub struct Network {
    calls: reqwest::Client,
    streams: reqwest::Client,
    /// Where to send Raft's RPCs for a node instead of the address the
    /// membership gives it (`--route`): a fault test puts a proxy on each
    /// link to cut or delay it.
    routes: std::collections::BTreeMap<u64, String>,
}

impl Network {
    /// A network that reaches node `id` through `routes[id]` where given.
    pub fn with_routes(routes: std::collections::BTreeMap<u64, String>) -> Network {
        // Prior knowledge: the nodes speak HTTP/2 in clear (h2c), so a
        // streamed append is full duplex — answers flow back while the
        // leader is still writing requests.
        let streams = reqwest::Client::builder().http2_prior_knowledge().build().expect("an HTTP/2 client");
        Network { calls: reqwest::Client::default(), streams, routes }
    }
}

/// A connection to one node.
pub struct Connection {
    calls: reqwest::Client,
    streams: reqwest::Client,
    target: u64,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Connection {
        let addr = self.routes.get(&target).unwrap_or(&node.addr).clone();
        Connection { calls: self.calls.clone(), streams: self.streams.clone(), target, addr }
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
                self.calls.post(url).json(request).timeout(option.hard_ttl()).send().await.map_err(failed)?;
            response.error_for_status().map_err(failed)?.json().await.map_err(failed)
        }
        .await;
        match answer {
            Ok(Ok(response)) => Ok(response),
            // A node whose Raft stopped answers as a dead one would.
            Ok(Err(RaftError::Fatal(fatal))) => Err(RPCError::Unreachable(Unreachable::new(&fatal))),
            Ok(Err(RaftError::APIError(never))) => match never {},
            Err(error) => Err(transport_error(error)),
        }
    }
}

/// A call that got no answer in time: the node is `Unreachable`.
#[derive(Debug, thiserror::Error)]
#[error("node {target} at {addr}: no answer to a streamed append in {patience:?}")]
struct Silent {
    target: u64,
    addr: String,
    patience: Duration,
}

impl Connection {
    fn silent(&self, patience: Duration) -> RPCError<TypeConfig> {
        RPCError::Unreachable(Unreachable::new(&Silent { target: self.target, addr: self.addr.clone(), patience }))
    }

    /// Opens `/raft/stream` with `input` as its body and returns the
    /// follower's answers in order. Opening, and each answer while a request
    /// waits for one, get openraft's deadline for one call (`hard_ttl`, as a
    /// single `append_entries` had): a paused or cut off node is
    /// `Unreachable` and the session ends. With no request outstanding the
    /// stream waits as long as openraft does.
    async fn open_stream<S>(&self, input: S, option: &RPCOption) -> Result<Answers, RPCError<TypeConfig>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + 'static,
    {
        let patience = option.hard_ttl();
        let (sent, seen) = watch::channel(0u64);
        let body = input.map(move |request| {
            sent.send_modify(|sent| *sent += 1);
            Ok::<_, std::convert::Infallible>(frames::encode(&request))
        });
        let url = format!("http://{}/raft/stream", self.addr);
        let failed = |source| CallError { target: self.target, addr: self.addr.clone(), source };
        let request = self.streams.post(url).body(reqwest::Body::wrap_stream(body)).send();
        let response = match tokio::time::timeout(patience, request).await {
            Err(_) => return Err(self.silent(patience)),
            Ok(Err(error)) => return Err(transport_error(failed(error))),
            Ok(Ok(response)) => response.error_for_status().map_err(|error| transport_error(failed(error)))?,
        };
        let answers = Box::pin(frames::decode::<StreamAnswer, _>(response.bytes_stream()));
        Ok(Answers { answers, seen, answered: 0, patience, silent: self.silent(patience) })
    }
}

/// The answers of one streamed append session, with the deadline on each.
struct Answers {
    answers: Pin<Box<dyn Stream<Item = Result<StreamAnswer, frames::FrameError>> + Send>>,
    /// How many requests the body has taken from openraft.
    seen: watch::Receiver<u64>,
    answered: u64,
    patience: Duration,
    /// What a missed deadline returns.
    silent: RPCError<TypeConfig>,
}

impl Answers {
    /// The next answer: `None` when the follower ended the stream (after
    /// the last request), an error when it failed or missed the deadline
    /// (KV-6: the deadline runs from the moment a request was handed to
    /// HTTP, even when the wait began before it).
    async fn next(&mut self) -> Option<Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>> {
        let next = loop {
            if *self.seen.borrow_and_update() > self.answered {
                match tokio::time::timeout(self.patience, self.answers.next()).await {
                    Ok(next) => break next,
                    Err(_) => return Some(Err(self.silent.clone())),
                }
            }
            // Nothing outstanding: an answer (the stream's end), or a
            // request sent, which starts the deadline. A body that ended
            // leaves only the answers to wait for.
            tokio::select! {
                next = self.answers.next() => break next,
                sent = self.seen.changed() => if sent.is_err() {
                    // Every request answered: the follower ends the stream.
                    match tokio::time::timeout(self.patience, self.answers.next()).await {
                        Ok(next) => break next,
                        Err(_) => return Some(Err(self.silent.clone())),
                    }
                },
            }
        };
        self.answered += 1;
        Some(match next? {
            Ok(Ok(result)) => Ok(result),
            // A node whose Raft stopped answers as a dead one would.
            Ok(Err(fatal)) => Err(RPCError::Unreachable(Unreachable::new(&fatal))),
            Err(error) => Err(RPCError::Network(NetworkError::new(&error))),
        })
    }

    /// The answers as the stream openraft reads: it ends after the first
    /// error.
    fn into_stream(self) -> impl Stream<Item = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>> {
        futures_util::stream::unfold(Some(self), |answers| async move {
            let mut answers = answers?;
            let next = answers.next().await?;
            let go_on = next.is_ok().then_some(answers);
            Some((next, go_on))
        })
    }
}

/// A transport failure as openraft takes it: a refused connection or a
/// timeout is `Unreachable`, anything else a network error.
fn transport_error(error: CallError) -> RPCError<TypeConfig> {
    if error.source.is_connect() || error.source.is_timeout() {
        RPCError::Unreachable(Unreachable::new(&error))
    } else {
        RPCError::Network(NetworkError::new(&error))
    }
}

impl RaftNetworkV2<TypeConfig> for Connection {
    type SnapshotData = Cursor<Vec<u8>>;

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<
        's,
        Result<BoxStream<'s, Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>, RPCError<TypeConfig>>,
    >
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        Box::pin(async move {
            let mut input = input;
            let Some(first) = input.next().await else {
                return Ok(Box::pin(futures_util::stream::empty()) as BoxStream<'s, _>);
            };
            let input = match input.next().now_or_never() {
                // A stream that ended after one request — each heartbeat —
                // is one call: over HTTP/1.1 its headers and body leave in
                // one write, where a new HTTP/2 stream hands its body to a
                // task of its own, a wait for a turn on a busy leader's
                // thread before a follower sees it (a linearizable read's
                // p50 450-530 -> 660-820 us when heartbeats were streams).
                Some(None) => {
                    return stream_append_sequential(self, futures_util::stream::iter([first]), option).await;
                }
                Some(Some(second)) => futures_util::stream::iter([first, second]).chain(input).left_stream(),
                None => futures_util::stream::once(std::future::ready(first)).chain(input).right_stream(),
            };
            let answers = self.open_stream(input, &option).await?;
            Ok(Box::pin(answers.into_stream()) as BoxStream<'s, _>)
        })
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;

    fn heartbeat() -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: openraft::Vote::new(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: vec![],
        }
    }

    /// A connection to a node whose `/raft/stream` answers the first
    /// request of a stream and then nothing: a follower paused after it.
    async fn to_a_node_that_goes_silent() -> Connection {
        let answer_once = |body: axum::body::Body| async move {
            let requests = frames::decode::<AppendEntriesRequest<TypeConfig>, _>(body.into_data_stream());
            let first: StreamAnswer = Ok(Ok(None));
            let answers = requests
                .take(1)
                .map(move |_| Ok::<_, std::io::Error>(frames::encode(&first)))
                .chain(futures_util::stream::pending());
            axum::body::Body::from_stream(answers)
        };
        let app = axum::Router::new().route("/raft/stream", post(answer_once));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut network = Network::with_routes(Default::default());
        network.new_client(2, &BasicNode::new(addr)).await
    }

    #[tokio::test]
    async fn a_request_with_no_answer_is_unreachable_after_the_deadline() {
        let mut connection = to_a_node_that_goes_silent().await;
        let (requests, input) = tokio::sync::mpsc::unbounded_channel();
        requests.send(heartbeat()).expect("send");
        let option = RPCOption::new(Duration::from_millis(200));
        let mut answers = connection.stream_append(tokio_stream_of(input), option).await.expect("the stream opens");
        let first = answers.next().await;
        assert!(matches!(first, Some(Ok(Ok(None)))), "{first:?}");
        // Nothing outstanding: the stream waits as openraft does, past the deadline.
        let idle = tokio::time::timeout(Duration::from_millis(600), answers.next()).await;
        assert!(idle.is_err(), "an idle stream ended or failed: {:?}", idle.ok());
        requests.send(heartbeat()).expect("send");
        let started = std::time::Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(5), answers.next()).await.expect("an answer or an error");
        assert!(matches!(answer, Some(Err(RPCError::Unreachable(_)))), "{answer:?}");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(150) && waited < Duration::from_secs(2), "waited {waited:?}");
        assert!(answers.next().await.is_none(), "the stream ends after the error");
    }

    fn tokio_stream_of<T: Send + 'static>(
        mut receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
    ) -> impl Stream<Item = T> + Send + Unpin + 'static {
        Box::pin(futures_util::stream::poll_fn(move |context| receiver.poll_recv(context)))
    }
}
