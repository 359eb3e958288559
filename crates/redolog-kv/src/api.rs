//! The node's HTTP server (axum): Raft's RPCs from the other nodes
//! (`/raft/*`), the client API (`/api/*`) and cluster membership
//! (`/cluster/*`). Every failure is an HTTP status with a JSON body that
//! says what and where — `503 {"error": "not leader", "leader": …}` naming
//! the leader when one is known, `504` after `TIMEOUT`, `404` for an unknown
//! key — never a hang.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redolog_raft::openraft_0_10::openraft;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

use openraft::alias::{SnapshotOf, VoteOf};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::error::{ClientWriteError, ForwardToLeader, RaftError};
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::{BasicNode, ReadPolicy};

use crate::frames;
use crate::identity::{Identity, Refusal, HEADER};
use crate::machine::{Command, Machine, SnapshotFile, TypeConfig};
use crate::network::{SnapshotHead, StreamAnswer, StreamFailure, SNAPSHOT_HEADER};

/// A running node.
pub type Node = openraft::Raft<TypeConfig, Machine>;

/// How long a client call may take before it is answered `504`: a client
/// is answered by then (plus the network), never left waiting.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    pub id: u64,
    pub raft: Node,
    pub machine: Machine,
    /// The cluster's identity (KV-9): what Raft's RPCs must name.
    pub identity: Arc<Identity>,
    /// `--unsafe-reads`: `/api/read` skips the read index (test only).
    pub unsafe_reads: bool,
    /// `--unsafe-stray-votes`: KV-8's check skipped (test only).
    pub unsafe_stray_votes: bool,
}

/// The routes.
pub fn routes(app: App) -> Router {
    Router::new()
        .route("/raft/append", post(append))
        .route("/raft/stream", post(stream))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .route("/api/write", post(write))
        .route("/api/writes", post(writes))
        .route("/api/read", get(read))
        .route("/api/local", get(local))
        .route("/api/dump", get(dump))
        .route("/cluster/init", post(init))
        .route("/cluster/add-learner", post(add_learner))
        .route("/cluster/change-membership", post(change_membership))
        .route("/cluster/metrics", get(metrics))
        .with_state(app)
}

/// A failure as the client sees it.
fn failure(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

fn not_leader(forward: &ForwardToLeader<TypeConfig>) -> Response {
    failure(StatusCode::SERVICE_UNAVAILABLE, not_leader_body(forward))
}

fn not_leader_body(forward: &ForwardToLeader<TypeConfig>) -> serde_json::Value {
    let leader = forward.leader_id.map(|id| json!({"id": id, "addr": forward.leader_node.as_ref().map(|n| &n.addr)}));
    json!({"error": "not leader", "leader": leader})
}

/// The answer to one write, as `/api/write` gives it and `/api/writes` gives
/// each element: the entry's place, the node that answered and the
/// machine's response — or, for a stale session number, `409` with `STALE`.
/// Typed rather than a `json!` map: the leader builds one per write, and the
/// map (a `BTreeMap` of owned keys, `log_id.to_string()`, then the map
/// serialized) was 6 % of the leader's CPU at 256 clients
/// (`perf record --call-graph dwarf` of the leader, 2026-11-27).
fn written_body(
    log_id: openraft::alias::LogIdOf<TypeConfig>,
    node: u64,
    response: crate::machine::Response,
) -> Result<Written, (StatusCode, serde_json::Value)> {
    if response.stale {
        return Err((StatusCode::CONFLICT, json!({"error": STALE, "log_index": log_id.index})));
    }
    Ok(Written { log_index: log_id.index, log_id, node, response })
}

/// A write applied: `{"log_index", "log_id", "node", "response"}`.
#[derive(Serialize)]
struct Written {
    log_index: u64,
    #[serde(serialize_with = "as_text")]
    log_id: openraft::alias::LogIdOf<TypeConfig>,
    node: u64,
    response: crate::machine::Response,
}

/// One element of `/api/writes`' answer: a write applied, or what
/// `/api/write` would have answered instead, with its `"status"`.
#[derive(Serialize)]
#[serde(untagged)]
enum Answer {
    Written(Written),
    Failed(serde_json::Value),
}

impl Answer {
    /// What `/api/write` would have answered with `status`, that status
    /// added as `"status"`.
    fn failed(status: StatusCode, mut body: serde_json::Value) -> Answer {
        body["status"] = json!(status.as_u16());
        Answer::Failed(body)
    }
}

/// Serializes a value as its `Display` text, written straight into the
/// output.
fn as_text<T: std::fmt::Display, S: serde::Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// `call` within `TIMEOUT`, or `504`.
async fn bounded<T>(call: impl Future<Output = T>) -> Result<T, Response> {
    tokio::time::timeout(TIMEOUT, call).await.map_err(|_| {
        failure(StatusCode::GATEWAY_TIMEOUT, json!({"error": "timeout", "after_ms": TIMEOUT.as_millis() as u64}))
    })
}

/// A Raft API error: the leader to ask instead, or what failed.
fn raft_failure<E>(error: RaftError<TypeConfig, E>) -> Response
where
    E: std::error::Error + openraft::TryAsRef<ForwardToLeader<TypeConfig>>,
{
    match error.forward_to_leader() {
        Some(forward) => not_leader(forward),
        None => failure(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": error.to_string()})),
    }
}

// ---- Raft's RPCs: openraft's own result, as JSON ----

/// A JSON body decoded straight from its bytes: axum's `Json` extractor
/// also tracks the path to every field it decodes, which a follower paid on
/// every replicated entry. A malformed body is `400`, saying where it
/// broke.
fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|error| {
        Box::new(failure(StatusCode::BAD_REQUEST, json!({"error": format!("malformed JSON body: {error}")})))
    })
}

/// Whether `vote`, carried by an append or a snapshot, is a leader's: only
/// a leader sends those, with its committed vote (KV-8). openraft takes
/// the sender's word for it — a debug build panics its Raft core on a vote
/// that is not committed, a release build follows the sender as a leader —
/// so the node refuses any other before openraft sees it.
fn leaders_vote(app: &App, vote: &VoteOf<TypeConfig>) -> Result<(), String> {
    if vote.is_committed() || app.unsafe_stray_votes {
        return Ok(());
    }
    Err(format!("vote {vote} is not committed: only a leader sends entries or a snapshot"))
}

/// Whether a Raft RPC comes from the node's own cluster (KV-9): one that
/// names another, or none once the node has an identity, is `403` before
/// openraft sees it; a malformed name is `400`. A node without an identity
/// takes the one named, on disk before the request goes on.
async fn admitted(app: &App, headers: &HeaderMap) -> Result<(), Response> {
    match app.identity.admit(headers.get(HEADER).map(|value| value.as_bytes())).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(refusal @ Refusal::Foreign { ours, .. })) => {
            let ours = ours.map_or_else(|| "none yet".to_string(), |ours| ours.to_string());
            tracing::warn!(node = app.id, cluster = ours, "refused a Raft RPC: {refusal}");
            Err(failure(StatusCode::FORBIDDEN, json!({"error": "another cluster", "detail": refusal.to_string()})))
        }
        Ok(Err(malformed)) => Err(failure(StatusCode::BAD_REQUEST, json!({"error": malformed.to_string()}))),
        Err(error) => Err(failure(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": error.to_string()}))),
    }
}

/// A single Raft call's body, decoded once its sender is admitted
/// ([`admitted`]): a refusal or a malformed body is the answer, before
/// openraft sees anything.
async fn admitted_body<T: DeserializeOwned>(app: &App, headers: &HeaderMap, body: &[u8]) -> Result<T, Response> {
    admitted(app, headers).await?;
    decode(body).map_err(|malformed| *malformed)
}

async fn append(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let rpc: AppendEntriesRequest<TypeConfig> = match admitted_body(&app, &headers, &body).await {
        Ok(rpc) => rpc,
        Err(refused) => return refused,
    };
    if let Err(stray) = leaders_vote(&app, &rpc.vote) {
        return failure(StatusCode::BAD_REQUEST, json!({"error": stray}));
    }
    Json(app.raft.append_entries(rpc).await).into_response()
}

/// A replication session's streamed appends (`network.rs`; KV-5): the requests
/// framed in the body go to `Raft::stream_append` in order; its answers,
/// one per request in the same order, are framed into the response as each
/// request's entries are flushed. A malformed or truncated frame, or a
/// request whose vote is not a leader's (KV-8), ends the requests there:
/// the answers to those before it are sent, then one
/// [`StreamFailure::Refused`] naming it, and the response ends.
async fn stream(State(app): State<App>, headers: HeaderMap, body: axum::body::Body) -> Response {
    const MAX_CHUNK: usize = 64;
    if let Err(refused) = admitted(&app, &headers).await {
        return refused;
    }
    let broken = Arc::new(std::sync::Mutex::new(None));
    let (noted, checked) = (broken.clone(), app.clone());
    let requests = frames::decode::<AppendEntriesRequest<TypeConfig>, _>(body.into_data_stream()).enumerate().scan(
        (),
        move |(), (index, request)| {
            let refused = match request {
                Ok(request) => match leaders_vote(&checked, &request.vote) {
                    Ok(()) => return std::future::ready(Some(request)),
                    Err(stray) => format!("frame {index}: {stray}"),
                },
                Err(error) => error.to_string(),
            };
            *noted.lock().expect("not poisoned") =
                Some(StreamFailure::Refused { index: index as u64, reason: refused });
            std::future::ready(None)
        },
    );
    let answers = app.raft.stream_append(requests).map(|answer| answer.map_err(StreamFailure::Fatal));
    let refused = futures_util::stream::once(async move { broken.lock().expect("not poisoned").take() })
        .filter_map(|refused| std::future::ready(refused.map(Err)));
    // The answers ready together leave as one chunk (one DATA frame): h2
    // tells a peer that sends many small frames to calm down.
    let framed = answers.chain(refused).ready_chunks(MAX_CHUNK).map(|answers: Vec<StreamAnswer>| {
        let mut framed = Vec::with_capacity(128 * answers.len());
        for answer in &answers {
            frames::encode_into(&mut framed, answer);
        }
        Ok::<_, std::convert::Infallible>(Bytes::from(framed))
    });
    axum::body::Body::from_stream(framed).into_response()
}

async fn vote(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let rpc: VoteRequest<TypeConfig> = match admitted_body(&app, &headers, &body).await {
        Ok(rpc) => rpc,
        Err(refused) => return refused,
    };
    Json(app.raft.vote(rpc).await).into_response()
}

/// A leader's snapshot (KV-10): its vote and meta from the header, checked
/// before a byte of the body is read; the body streamed into a file of the
/// state directory, then handed to openraft to install.
async fn snapshot(State(app): State<App>, headers: HeaderMap, body: axum::body::Body) -> Response {
    if let Err(refused) = admitted(&app, &headers).await {
        return refused;
    }
    let Some(head) = headers.get(SNAPSHOT_HEADER) else {
        return failure(StatusCode::BAD_REQUEST, json!({"error": format!("no {SNAPSHOT_HEADER} header")}));
    };
    let head: SnapshotHead = match decode(head.as_bytes()) {
        Ok(head) => head,
        Err(malformed) => return *malformed,
    };
    if let Err(stray) = leaders_vote(&app, &head.vote) {
        return failure(StatusCode::BAD_REQUEST, json!({"error": stray}));
    }
    let received = match app.machine.receive(body.into_data_stream()).await {
        Ok(received) => received,
        Err(error) => {
            let error = format!("receiving the snapshot: {error}");
            return failure(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": error}));
        }
    };
    let snapshot = SnapshotOf::<TypeConfig, SnapshotFile> { meta: head.meta, snapshot: received };
    let result: Result<_, RaftError<TypeConfig>> =
        app.raft.install_full_snapshot(head.vote, snapshot).await.map_err(RaftError::Fatal);
    Json(result).into_response()
}

// ---- The client API ----

const STALE: &str = "stale session number: the session already applied a later write";

async fn write(State(app): State<App>, body: Bytes) -> Response {
    let command: Command = match decode(&body) {
        Ok(command) => command,
        Err(malformed) => return *malformed,
    };
    match bounded(app.raft.client_write(command)).await {
        Ok(Ok(written)) => match written_body(written.log_id, app.id, written.data) {
            Ok(body) => Json(body).into_response(),
            Err((status, body)) => (status, Json(body)).into_response(),
        },
        Ok(Err(error)) => raft_failure(error),
        Err(timeout) => timeout,
    }
}

/// Several writes in one request — `[command, …]`, each as `/api/write`
/// takes it — proposed to Raft together (openraft's `client_write_many`:
/// one message to the core for all of them, in this order, each its own log
/// entry). The answer is `200` with one element per command, in order: the
/// body `/api/write` would have answered it with, plus `"status"` where that
/// would not have been `200` (`503` not leader, naming the leader; `409` a
/// stale session number; `500` an entry the leader discarded, outcome
/// unknown). A batch as a whole fails only as a request does: `504` after
/// `TIMEOUT` (every outcome unknown), `500` if Raft stopped. The
/// [`Client`](crate::Client) gathers concurrent callers' writes into these
/// requests.
async fn writes(State(app): State<App>, body: Bytes) -> Response {
    let commands: Vec<Command> = match decode(&body) {
        Ok(commands) => commands,
        Err(malformed) => return *malformed,
    };
    let answered = bounded(async {
        let mut results = app.raft.client_write_many(commands).await?;
        let mut answers = Vec::new();
        while let Some(result) = results.try_next().await? {
            answers.push(match result {
                Ok(written) => match written_body(written.log_id, app.id, written.response) {
                    Ok(body) => Answer::Written(body),
                    Err((status, body)) => Answer::failed(status, body),
                },
                Err(ClientWriteError::ForwardToLeader(forward)) => {
                    Answer::failed(StatusCode::SERVICE_UNAVAILABLE, not_leader_body(&forward))
                }
                Err(error) => Answer::failed(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": error.to_string()})),
            });
        }
        Ok::<_, openraft::error::Fatal<TypeConfig>>(answers)
    })
    .await;
    match answered {
        Ok(Ok(answers)) => Json(answers).into_response(),
        Ok(Err(fatal)) => failure(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": fatal.to_string()})),
        Err(timeout) => timeout,
    }
}

#[derive(Deserialize)]
struct Key {
    key: String,
}

/// A linearizable read: the leader confirms it still leads (openraft's read
/// index) and waits until its machine applied that far, then reads.
async fn read(State(app): State<App>, Query(Key { key }): Query<Key>) -> Response {
    if app.unsafe_reads {
        return value(&app, key);
    }
    match bounded(app.raft.ensure_linearizable(ReadPolicy::ReadIndex)).await {
        Ok(Ok(read_log_id)) => {
            let served = format!("node {} read index {read_log_id} applied {:?}", app.id, app.machine.last_applied());
            let mut response = value(&app, key);
            if let Ok(header) = axum::http::HeaderValue::from_str(&served) {
                response.headers_mut().insert("x-served", header);
            }
            response
        }
        Ok(Err(error)) => raft_failure(error),
        Err(timeout) => timeout,
    }
}

/// A read of this node's machine as it is: possibly stale.
async fn local(State(app): State<App>, Query(Key { key }): Query<Key>) -> Response {
    value(&app, key)
}

fn value(app: &App, key: String) -> Response {
    match app.machine.get(&key) {
        Some(value) => Json(json!({"key": key, "value": value})).into_response(),
        None => failure(StatusCode::NOT_FOUND, json!({"error": "unknown key", "key": key})),
    }
}

/// This node's whole map as it is (for convergence checks).
async fn dump(State(app): State<App>) -> Response {
    Json(app.machine.data()).into_response()
}

// ---- Membership ----

/// `{"members": {"1": "127.0.0.1:21001", …}}`: the first voters.
#[derive(Deserialize)]
struct Init {
    members: BTreeMap<u64, String>,
}

/// Initializes the cluster through this node: its identity first (KV-9:
/// drawn and kept if it has none), then Raft's first membership. A node
/// that is not among the members, or whose Raft is initialized already, is
/// refused before it draws one: an init sent to the wrong node must not
/// leave it belonging to a cluster of its own.
async fn init(State(app): State<App>, Json(Init { members }): Json<Init>) -> Response {
    if !members.contains_key(&app.id) {
        let error = format!("node {} is not among the members: initialize a cluster through one of them", app.id);
        return failure(StatusCode::BAD_REQUEST, json!({"error": error}));
    }
    match app.raft.is_initialized().await {
        Ok(true) => {} // openraft refuses it below, 409
        Ok(false) => {
            if let Err(error) = app.identity.get_or_draw().await {
                return failure(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": error.to_string()}));
            }
        }
        Err(fatal) => return failure(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": fatal.to_string()})),
    }
    let members: BTreeMap<u64, BasicNode> = members.into_iter().map(|(id, addr)| (id, BasicNode { addr })).collect();
    match bounded(app.raft.initialize(members)).await {
        Ok(Ok(())) => Json(json!({"initialized": true})).into_response(),
        Ok(Err(error)) => failure(StatusCode::CONFLICT, json!({"error": error.to_string()})),
        Err(timeout) => timeout,
    }
}

#[derive(Deserialize)]
struct Learner {
    id: u64,
    addr: String,
}

async fn add_learner(State(app): State<App>, Json(Learner { id, addr }): Json<Learner>) -> Response {
    match bounded(app.raft.add_learner(id, BasicNode { addr }, true)).await {
        Ok(Ok(written)) => Json(json!({"log_index": written.log_id.index})).into_response(),
        Ok(Err(error)) => raft_failure(error),
        Err(timeout) => timeout,
    }
}

/// `[1, 2, 3]`: the voters from now on (learners not named stay learners).
async fn change_membership(State(app): State<App>, Json(voters): Json<BTreeSet<u64>>) -> Response {
    match bounded(app.raft.change_membership(voters, true)).await {
        Ok(Ok(written)) => Json(json!({"log_index": written.log_id.index})).into_response(),
        Ok(Err(error)) => raft_failure(error),
        Err(timeout) => timeout,
    }
}

/// What a monitor or the test script asks: who leads, what is applied.
#[derive(Serialize)]
struct Metrics {
    id: u64,
    state: String,
    current_leader: Option<u64>,
    term: u64,
    last_log_index: Option<u64>,
    last_applied: Option<u64>,
    /// The last entry in this node's snapshot, and the last one its log
    /// purged.
    snapshot: Option<u64>,
    purged: Option<u64>,
    voters: Vec<u64>,
}

async fn metrics(State(app): State<App>) -> Response {
    let metrics = app.raft.metrics().borrow_watched().clone();
    Json(Metrics {
        id: app.id,
        state: format!("{:?}", metrics.state),
        current_leader: metrics.current_leader,
        term: metrics.current_term,
        last_log_index: metrics.last_log_index,
        last_applied: metrics.last_applied.map(|id| id.index),
        snapshot: metrics.snapshot.map(|id| id.index),
        purged: metrics.purged.map(|id| id.index),
        voters: metrics.membership_config.membership().voter_ids().collect(),
    })
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Response as Applied;

    fn log_id(index: u64) -> openraft::alias::LogIdOf<TypeConfig> {
        openraft::testing::log_id::<TypeConfig>(3, 2, index)
    }

    #[test]
    fn a_typed_answer_is_the_json_the_clients_read() {
        let response = Applied { previous: Some("old".into()), applied: true, replayed: false, stale: false };
        let Ok(written) = written_body(log_id(41), 2, response.clone()) else { panic!("not stale") };
        let text = serde_json::to_value(Answer::Written(written)).expect("encode");
        let expected = json!({"log_index": 41, "log_id": log_id(41).to_string(), "node": 2, "response": response});
        assert_eq!(text, expected);
    }

    #[test]
    fn a_stale_write_is_409_naming_its_index() {
        let response = Applied { previous: None, applied: false, replayed: false, stale: true };
        let Err((status, body)) = written_body(log_id(7), 1, response) else { panic!("stale") };
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body, json!({"error": STALE, "log_index": 7}));
    }
}
