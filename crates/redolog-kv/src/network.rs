//! Raft's RPCs between nodes over HTTP — single calls as JSON, the streamed
//! appends as MessagePack frames (`frames.rs`) — reqwest on the calling side
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
//! its entries are flushed (KV-5, KV-6, KV-7: [RAFT](redolog_raft::docs::raft), "A cluster of
//! processes"). Single calls — votes, snapshots, and each heartbeat (a
//! stream of one request) — go over HTTP/1.1, whose request leaves in one
//! write. Every call names the node's cluster (KV-9, `identity.rs`); a node
//! of another cluster refuses it, `403`, and is `Unreachable` here.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Bytes;

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
use crate::identity::{Identity, HEADER};
use crate::machine::{SnapshotFile, TypeConfig};

/// What the follower answers each streamed request with: openraft's result,
/// or why it has no result.
pub type StreamAnswer = Result<StreamAppendResult<TypeConfig>, StreamFailure>;

/// Why a follower could not answer a streamed request.
#[derive(Debug, Serialize, Deserialize, thiserror::Error)]
pub enum StreamFailure {
    /// Its Raft stopped.
    #[error("{0}")]
    Fatal(Fatal<TypeConfig>),
    /// The request's frame was malformed or cut short: the follower read
    /// no further. Sent in band, after the answers to the requests before
    /// it, as the session's last answer.
    #[error("request {index} of the stream refused: {reason}")]
    Refused { index: u64, reason: String },
}

/// A full snapshot as it travels: the leader's vote and the snapshot's meta
/// in this header, as JSON; the snapshot file's bytes as the body, streamed
/// from the leader's file into the follower's (KV-10).
pub const SNAPSHOT_HEADER: &str = "x-redolog-snapshot";

/// What [`SNAPSHOT_HEADER`] carries.
#[derive(Serialize, Deserialize)]
pub struct SnapshotHead {
    pub vote: VoteOf<TypeConfig>,
    pub meta: SnapshotMetaOf<TypeConfig>,
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
    /// The cluster every call names (KV-9).
    identity: Arc<Identity>,
}

impl Network {
    /// A network that names `identity`'s cluster and reaches node `id`
    /// through `routes[id]` where given.
    pub fn new(identity: Arc<Identity>, routes: std::collections::BTreeMap<u64, String>) -> Network {
        // Prior knowledge: the nodes speak HTTP/2 in clear (h2c), so a
        // streamed append is full duplex — answers flow back while the
        // leader is still writing requests.
        // Keepalive pings find a connection to a dead or cut off node
        // within two seconds, before a session waits on it.
        let streams = reqwest::Client::builder()
            .http2_prior_knowledge()
            .http2_keep_alive_interval(Duration::from_secs(1))
            .http2_keep_alive_timeout(Duration::from_secs(1))
            .http2_keep_alive_while_idle(true)
            .build()
            .expect("an HTTP/2 client");
        Network { calls: reqwest::Client::default(), streams, routes, identity }
    }
}

/// A connection to one node.
pub struct Connection {
    calls: reqwest::Client,
    streams: reqwest::Client,
    identity: Arc<Identity>,
    target: u64,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Connection {
        let addr = self.routes.get(&target).unwrap_or(&node.addr).clone();
        let identity = self.identity.clone();
        Connection { calls: self.calls.clone(), streams: self.streams.clone(), identity, target, addr }
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
        self.call(self.named(self.calls.post(url)).json(request).timeout(option.hard_ttl())).await
    }

    /// Sends `call` and decodes openraft's answer ([`Connection::rpc`]).
    async fn call<P: DeserializeOwned>(&self, call: reqwest::RequestBuilder) -> Result<P, RPCError<TypeConfig>> {
        let failed = |source| CallError { target: self.target, addr: self.addr.clone(), source };
        let response = call.send().await.map_err(|error| transport_error(failed(error)))?;
        let response = self.ours(response).await?;
        let answer: Result<Result<P, RaftError<TypeConfig>>, CallError> =
            async { response.error_for_status().map_err(failed)?.json().await.map_err(failed) }.await;
        match answer {
            Ok(Ok(response)) => Ok(response),
            // A node whose Raft stopped answers as a dead one would.
            Ok(Err(RaftError::Fatal(fatal))) => Err(RPCError::Unreachable(Unreachable::new(&fatal))),
            Ok(Err(RaftError::APIError(never))) => match never {},
            Err(error) => Err(transport_error(error)),
        }
    }

    /// `request` naming the node's cluster, once it has one (KV-9).
    fn named(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.identity.get() {
            Some(id) => request.header(HEADER, id.to_string()),
            None => request,
        }
    }

    /// `response`, unless the node refused a call from another cluster
    /// (`403`, KV-9): then `Unreachable`, so openraft backs off, naming the
    /// node and what it said.
    async fn ours(&self, response: reqwest::Response) -> Result<reqwest::Response, RPCError<TypeConfig>> {
        if response.status() != reqwest::StatusCode::FORBIDDEN {
            return Ok(response);
        }
        // What it said, bounded: a stranger on a reused port may trickle.
        let said = tokio::time::timeout(Duration::from_secs(1), response.text()).await;
        let mut said = said.ok().and_then(Result::ok).unwrap_or_default();
        if said.len() > 512 {
            let end = (0..=512).rev().find(|&end| said.is_char_boundary(end)).unwrap_or(0);
            said.truncate(end);
        }
        let foreign = Foreign { target: self.target, addr: self.addr.clone(), said };
        tracing::warn!("{foreign}");
        Err(RPCError::Unreachable(Unreachable::new(&foreign)))
    }
}

/// A node that refused a call: it belongs to another cluster (KV-9).
#[derive(Debug, thiserror::Error)]
#[error("node {target} at {addr} belongs to another cluster and refused this one's call: {said}")]
struct Foreign {
    target: u64,
    addr: String,
    said: String,
}

/// A session that stopped making progress: the node is `Unreachable`.
#[derive(Debug, thiserror::Error)]
#[error("node {target} at {addr}: no answer to a streamed append in {patience:?}")]
struct Silent {
    target: u64,
    addr: String,
    patience: Duration,
}

/// A session the follower ended with requests still unanswered.
#[derive(Debug, thiserror::Error)]
#[error("node {target} at {addr}: the streamed append ended with {unanswered} request(s) unanswered")]
struct CutShort {
    target: u64,
    addr: String,
    unanswered: u64,
}

/// `Unreachable`: node `target` at `addr` made no progress in `patience`.
fn silent(target: u64, addr: &str, patience: Duration) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::new(&Silent { target, addr: addr.to_string(), patience }))
}

impl Connection {
    /// Opens `/raft/stream` with `input` as its body and returns the
    /// follower's answers in order. Opening, and each answer while a request
    /// waits for one, get openraft's timeout for a stream's progress
    /// (`soft_ttl`, KV-6): a paused or cut off node is `Unreachable` and
    /// the session ends. With no request outstanding the stream waits as
    /// long as openraft does. However the session ends, openraft's requests
    /// stop being taken at once (KV-7).
    async fn open_stream<S>(&self, input: S, option: &RPCOption) -> Result<Answers, RPCError<TypeConfig>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
    {
        let patience = option.soft_ttl();
        let (feed, cut) = Feed::new(input);
        let seen = feed.sent.subscribe();
        let url = format!("http://{}/raft/stream", self.addr);
        let failed = |source| CallError { target: self.target, addr: self.addr.clone(), source };
        let request = self.named(self.streams.post(url)).body(reqwest::Body::wrap_stream(feed)).send();
        // On every early return `cut` is dropped, and with it the body's
        // hold on openraft's requests.
        let response = match tokio::time::timeout(patience, request).await {
            Err(_) => return Err(silent(self.target, &self.addr, patience)),
            Ok(Err(error)) => return Err(transport_error(failed(error))),
            Ok(Ok(response)) => {
                self.ours(response).await?.error_for_status().map_err(|error| transport_error(failed(error)))?
            }
        };
        let answers = Box::pin(frames::decode::<StreamAnswer, _>(response.bytes_stream()));
        Ok(Answers { answers, seen, answered: 0, patience, target: self.target, addr: self.addr.clone(), _cut: cut })
    }
}

/// How far the body of a streamed append has got.
#[derive(Clone, Copy, Default)]
struct Sent {
    /// Requests handed to HTTP.
    requests: u64,
    /// openraft's requests ended: nothing more will be sent.
    ended: bool,
}

/// The body of a streamed append: openraft's requests, framed, while the
/// session lasts. openraft's request streams of one replication task share
/// its state (the payload, and a lock held while a request is made), and
/// HTTP/2 sends a body from a task of its own that outlives the response
/// it belongs to; so the requests sit in a slot the session empties when it
/// ends ([`Cut`]), after which the body fails and the HTTP/2 stream is
/// reset — an old session never takes a request meant for the next one.
struct Feed<S> {
    slot: Arc<Mutex<Slot<S>>>,
    sent: watch::Sender<Sent>,
    done: bool,
}

struct Slot<S> {
    input: Option<S>,
    /// The body's task, to wake when the session ends.
    waker: Option<Waker>,
}

/// Ends a session's body when dropped (KV-7).
struct Cut(Box<dyn FnMut() + Send>);

impl Drop for Cut {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Why a streamed append's body stopped: its session ended first.
#[derive(Debug, thiserror::Error)]
#[error("the replication session ended")]
struct SessionOver;

impl<S: Stream + Send + Unpin + 'static> Feed<S> {
    fn new(input: S) -> (Feed<S>, Cut) {
        let slot = Arc::new(Mutex::new(Slot { input: Some(input), waker: None }));
        let held = slot.clone();
        let cut = Cut(Box::new(move || {
            let (input, waker) = {
                let mut slot = held.lock().expect("the body's slot is never poisoned");
                (slot.input.take(), slot.waker.take())
            };
            // openraft's stream, and any lock its pending request holds,
            // dropped outside the slot's lock.
            drop(input);
            if let Some(waker) = waker {
                waker.wake();
            }
        }));
        (Feed { slot, sent: watch::channel(Sent::default()).0, done: false }, cut)
    }
}

impl<S> Stream for Feed<S>
where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Unpin,
{
    type Item = Result<Bytes, SessionOver>;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let polled = {
            let mut slot = self.slot.lock().expect("the body's slot is never poisoned");
            let Some(input) = slot.input.as_mut() else {
                drop(slot);
                self.done = true;
                return Poll::Ready(Some(Err(SessionOver)));
            };
            let polled = input.poll_next_unpin(context);
            if polled.is_pending() {
                slot.waker = Some(context.waker().clone());
            }
            polled
        };
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(request)) => {
                self.sent.send_modify(|sent| sent.requests += 1);
                Poll::Ready(Some(Ok(frames::encode(&request))))
            }
            Poll::Ready(None) => {
                self.done = true;
                self.sent.send_modify(|sent| sent.ended = true);
                Poll::Ready(None)
            }
        }
    }
}

/// The answers of one streamed append session, with the timeout on each.
struct Answers {
    answers: Pin<Box<dyn Stream<Item = Result<StreamAnswer, frames::FrameError>> + Send>>,
    seen: watch::Receiver<Sent>,
    answered: u64,
    patience: Duration,
    target: u64,
    addr: String,
    /// Dropped with the answers: openraft stopped reading them, so the
    /// body stops taking its requests (KV-7).
    _cut: Cut,
}

impl Answers {
    /// The next answer: `None` once every request of a body that ended is
    /// answered, an error when the follower failed, ended the stream early
    /// or made no progress in time (KV-6: the timeout runs from the moment
    /// a request was handed to HTTP, even when the wait began before it).
    async fn next(&mut self) -> Option<Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>> {
        // The body is gone without ending: only the follower's word on the
        // requests it had is left to wait for.
        let mut body_gone = false;
        let next = loop {
            let sent = *self.seen.borrow_and_update();
            if sent.requests > self.answered || body_gone {
                match tokio::time::timeout(self.patience, self.answers.next()).await {
                    Ok(next) => break next,
                    Err(_) => return Some(Err(silent(self.target, &self.addr, self.patience))),
                }
            }
            if sent.ended {
                // Every request answered: the session is over, whenever
                // the follower gets to closing its side.
                return None;
            }
            // Nothing outstanding: an answer (the stream's end), or a
            // request sent, which starts the timeout.
            tokio::select! {
                next = self.answers.next() => break next,
                changed = self.seen.changed() => body_gone = changed.is_err(),
            }
        };
        let Some(next) = next else {
            let unanswered = self.seen.borrow().requests - self.answered;
            if unanswered == 0 {
                return None;
            }
            let short = CutShort { target: self.target, addr: self.addr.clone(), unanswered };
            return Some(Err(RPCError::Network(NetworkError::new(&short))));
        };
        self.answered += 1;
        Some(match next {
            Ok(Ok(result)) => Ok(result),
            // A node whose Raft stopped answers as a dead one would.
            Ok(Err(StreamFailure::Fatal(fatal))) => Err(RPCError::Unreachable(Unreachable::new(&fatal))),
            Ok(Err(failure @ StreamFailure::Refused { .. })) => Err(RPCError::Network(NetworkError::new(&failure))),
            // The connection broke: the node died or the link was cut.
            Err(error @ frames::FrameError::Io(_)) => Err(RPCError::Unreachable(Unreachable::new(&error))),
            Err(error @ frames::FrameError::Malformed { .. }) => Err(RPCError::Network(NetworkError::new(&error))),
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
    type SnapshotData = SnapshotFile;

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
        snapshot: SnapshotOf<TypeConfig, SnapshotFile>,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let head = serde_json::to_vec(&SnapshotHead { vote, meta: snapshot.meta })
            .map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        let head = reqwest::header::HeaderValue::from_bytes(&head)
            .map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        let file = tokio::fs::File::from_std(snapshot.snapshot.into_file());
        let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::with_capacity(file, 1 << 16));
        let url = format!("http://{}/raft/snapshot", self.addr);
        let call = self.named(self.calls.post(url)).header(SNAPSHOT_HEADER, head).body(body).timeout(option.hard_ttl());
        tokio::select! {
            answer = self.call(call) => Ok(answer?),
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
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
    /// `answered` requests of a stream and then nothing, holding the
    /// stream open: a follower paused after them.
    async fn to_a_node_that_goes_silent_after(answered: usize) -> Connection {
        let answer_some = move |body: axum::body::Body| async move {
            let requests = frames::decode::<AppendEntriesRequest<TypeConfig>, _>(body.into_data_stream());
            let answers = requests
                .take(answered)
                .map(move |_| {
                    let answer: StreamAnswer = Ok(Ok(None));
                    Ok::<_, std::io::Error>(frames::encode(&answer))
                })
                .chain(futures_util::stream::pending());
            axum::body::Body::from_stream(answers)
        };
        serve(axum::Router::new().route("/raft/stream", post(answer_some))).await
    }

    async fn to_a_node_that_goes_silent() -> Connection {
        to_a_node_that_goes_silent_after(1).await
    }

    /// A connection to `app` on a loopback port.
    async fn serve(app: axum::Router) -> Connection {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = Arc::new(Identity::open(dir.path()).expect("no identity yet"));
        let mut network = Network::new(identity, Default::default());
        network.new_client(2, &BasicNode::new(addr)).await
    }

    #[tokio::test]
    async fn a_node_of_another_cluster_is_unreachable_naming_it() {
        use axum::http::{HeaderMap, StatusCode};
        let refuse = |headers: HeaderMap| async move {
            let named = headers.get(HEADER).map(|name| name.to_str().expect("text").to_string());
            (StatusCode::FORBIDDEN, format!("another cluster; the request named {named:?}"))
        };
        let app = axum::Router::new().route("/raft/vote", post(refuse)).route("/raft/stream", post(refuse));
        let mut connection = serve(app).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = Arc::new(Identity::open(dir.path()).expect("open"));
        let ours = identity.get_or_draw().await.expect("drawn");
        connection.identity = identity;

        let request = VoteRequest::new(openraft::Vote::new(1, 1), None);
        let voted = connection.vote(request, RPCOption::new(Duration::from_secs(1))).await;
        let Err(RPCError::Unreachable(unreachable)) = voted else { panic!("{voted:?}") };
        let said = unreachable.to_string();
        assert!(said.contains("node 2") && said.contains("belongs to another cluster"), "{said}");
        assert!(said.contains(&ours.to_string()), "the call did not name its cluster: {said}");

        // Two requests waiting: a stream, not one call.
        let (requests, input) = tokio::sync::mpsc::unbounded_channel();
        requests.send(heartbeat()).expect("send");
        requests.send(heartbeat()).expect("send");
        let opened = connection.stream_append(tokio_stream_of(input), RPCOption::new(Duration::from_secs(1))).await;
        let Err(RPCError::Unreachable(unreachable)) = opened else { panic!("{:?}", opened.err()) };
        assert!(unreachable.to_string().contains(&ours.to_string()), "{unreachable}");
    }

    /// Waits up to 2 s for `requests`' receiving end to be dropped.
    async fn dropped<T>(requests: &tokio::sync::mpsc::UnboundedSender<T>) -> bool {
        tokio::time::timeout(Duration::from_secs(2), requests.closed()).await.is_ok()
    }

    type Sender = tokio::sync::mpsc::UnboundedSender<AppendEntriesRequest<TypeConfig>>;

    /// A session opened with `requests` heartbeats waiting and openraft's
    /// `ttl`: its answers, and the input's sender (the input stays open
    /// while it lives).
    async fn session(
        connection: &mut Connection,
        requests: usize,
        ttl: Duration,
    ) -> (Sender, BoxStream<'_, Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>) {
        let (sender, input) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..requests {
            sender.send(heartbeat()).expect("send");
        }
        let option = RPCOption::new(ttl);
        (sender, connection.stream_append(tokio_stream_of(input), option).await.expect("the stream opens"))
    }

    #[tokio::test]
    async fn answers_dropped_let_go_of_the_requests_at_once() {
        let mut connection = to_a_node_that_goes_silent().await;
        let (requests, mut answers) = session(&mut connection, 1, Duration::from_millis(200)).await;
        assert!(matches!(answers.next().await, Some(Ok(Ok(None)))));
        // openraft ends the session (a newer payload, a conflict): the body
        // must not go on taking requests the next session's stream shares.
        drop(answers);
        assert!(dropped(&requests).await, "the body of an ended session still holds openraft's requests");
    }

    #[tokio::test]
    async fn an_opening_that_times_out_lets_go_of_the_requests() {
        let never = |_body: axum::body::Body| std::future::pending::<axum::body::Body>();
        let mut connection = serve(axum::Router::new().route("/raft/stream", post(never))).await;
        let (requests, input) = tokio::sync::mpsc::unbounded_channel();
        requests.send(heartbeat()).expect("send");
        requests.send(heartbeat()).expect("send");
        let option = RPCOption::new(Duration::from_millis(200));
        let opened = connection.stream_append(tokio_stream_of(input), option).await;
        assert!(matches!(opened, Err(RPCError::Unreachable(_))), "{:?}", opened.err());
        assert!(dropped(&requests).await, "the body of a failed opening still holds openraft's requests");
    }

    #[tokio::test]
    async fn a_session_whose_requests_are_all_answered_ends_without_waiting_for_the_follower() {
        let mut connection = to_a_node_that_goes_silent_after(2).await;
        let (requests, mut answers) = session(&mut connection, 2, Duration::from_secs(4)).await;
        drop(requests);
        for _ in 0..2 {
            let answer = answers.next().await;
            assert!(matches!(answer, Some(Ok(Ok(None)))), "{answer:?}");
        }
        // The follower holds its side open; the session is over all the same.
        let end = tokio::time::timeout(Duration::from_secs(1), answers.next()).await;
        assert!(matches!(end, Ok(None)), "{end:?}");
    }

    /// A connection to a node whose `/raft/stream` answers the first
    /// requests with `answers`, one each, and then ends its response.
    async fn to_a_node_answering(answers: Vec<StreamAnswer>) -> Connection {
        let frames: Vec<Bytes> = answers.iter().map(frames::encode).collect();
        let answer = move |body: axum::body::Body| async move {
            let requests = frames::decode::<AppendEntriesRequest<TypeConfig>, _>(body.into_data_stream());
            let answers =
                requests.zip(futures_util::stream::iter(frames)).map(|(_, frame)| Ok::<_, std::io::Error>(frame));
            axum::body::Body::from_stream(answers)
        };
        serve(axum::Router::new().route("/raft/stream", post(answer))).await
    }

    #[tokio::test]
    async fn a_follower_that_ends_the_stream_early_is_a_network_error() {
        let mut connection = to_a_node_answering(vec![Ok(Ok(None))]).await;
        let (_requests, mut answers) = session(&mut connection, 2, Duration::from_secs(4)).await;
        assert!(matches!(answers.next().await, Some(Ok(Ok(None)))));
        let cut = tokio::time::timeout(Duration::from_secs(2), answers.next()).await.expect("no wait for the timeout");
        let Some(Err(RPCError::Network(error))) = cut else { panic!("{cut:?}") };
        assert!(error.to_string().contains("1 request(s) unanswered"), "{error}");
    }

    #[tokio::test]
    async fn a_refused_request_is_a_network_error_naming_it() {
        let refused = Err(StreamFailure::Refused { index: 1, reason: "malformed".into() });
        let mut connection = to_a_node_answering(vec![Ok(Ok(None)), refused]).await;
        let (_requests, answers) = session(&mut connection, 2, Duration::from_secs(4)).await;
        let answers: Vec<_> = answers.collect().await;
        assert!(matches!(answers[..], [Ok(Ok(None)), Err(RPCError::Network(_))]), "{answers:?}");
        let Err(refused) = &answers[1] else { unreachable!("matched above") };
        assert!(refused.to_string().contains("request 1 of the stream refused"), "{refused}");
    }

    #[tokio::test]
    async fn a_request_with_no_answer_is_unreachable_after_the_deadline() {
        let mut connection = to_a_node_that_goes_silent().await;
        let (requests, mut answers) = session(&mut connection, 1, Duration::from_millis(200)).await;
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
