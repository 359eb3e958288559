//! A client of the service that gathers its callers' concurrent writes into
//! batches: the network's group commit. A write costs the service one HTTP
//! request to parse, route and answer, and on two cores that — not the log —
//! is what caps a cluster of processes (docs/BENCHMARKS.md, "A cluster of
//! processes"). So the client keeps one queue for every task that writes
//! through it: a write waits in the queue while `IN_FLIGHT` batches are on
//! their way, and the next request takes everything queued (up to
//! `MAX_BATCH`) to `/api/writes`, where the leader proposes them to Raft in
//! one message (openraft's `client_write_many`). A lone write goes at once,
//! alone. TiKV's clients batch their requests to a store the same way
//! (`BatchCommands`).
//!
//! Each write keeps its own answer: its log position, or why it failed. A
//! write a follower refuses ("not leader") was never proposed, so the client
//! sends it again to the leader that follower names, and sends later
//! batches there too. A client that knows several nodes
//! ([`Client::with_fallbacks`]) moves on to the next when the one it sends
//! to refuses the connection, does not answer in time, or knows no leader.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::machine::{Command, Response};

/// Batches on their way at once: while this many wait for their answers,
/// new writes queue and go together in the next.
pub const IN_FLIGHT: usize = 4;

/// Writes in one request at most.
pub const MAX_BATCH: usize = 512;

/// How many times a write follows "not leader" to the node named before the
/// client gives up on it.
const MAX_HOPS: u8 = 3;

/// How long the client waits for a batch's answer: past the node's own
/// `TIMEOUT`, after which the node answers `504`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(crate::api::TIMEOUT.as_secs() + 2);

/// A write the cluster applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its position in the log.
    pub log_index: u64,
    /// Its log id (`T<term>-N<node>-<index>`, openraft's form).
    pub log_id: String,
    /// The node that answered (the leader).
    pub node: u64,
    /// What applying it returned.
    pub response: Response,
}

/// Why a write has no [`Written`] answer, and whether it may still have
/// taken effect ([`ClientError::may_have_applied`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Not proposed: the node is not the leader (after following the
    /// leaders named, a few times), and knows no other.
    #[error("not leader (leader named: {leader:?})")]
    NotLeader { leader: Option<u64> },
    /// Not applied: its session had already applied a later write.
    #[error("stale session number: the session already applied a later write (log index {log_index})")]
    Stale { log_index: u64 },
    /// No answer within the node's timeout: the outcome is unknown.
    #[error("timeout: node {addr} gave no answer within {:?}", crate::api::TIMEOUT)]
    Timeout { addr: String },
    /// The node answered with an error: HTTP `status` and its message (a
    /// `500` for an entry the leader discarded: outcome unknown).
    #[error("node {addr}: HTTP {status}: {message}")]
    Refused { addr: String, status: u16, message: String },
    /// The request failed on the way.
    #[error("node {addr}: {source}")]
    Network {
        addr: String,
        #[source]
        source: Arc<reqwest::Error>,
    },
    /// The client was dropped, or its task ended, before the write was
    /// sent.
    #[error("the client is closed")]
    Closed,
}

impl ClientError {
    /// Whether the write may have taken effect anyway: true unless the
    /// cluster surely did not propose or apply it. Retry such a write only
    /// with a [`Session`](crate::Session) number, which makes the retry
    /// apply at most once.
    pub fn may_have_applied(&self) -> bool {
        match self {
            ClientError::NotLeader { .. } | ClientError::Stale { .. } | ClientError::Closed => false,
            ClientError::Network { source, .. } => !source.is_connect(),
            ClientError::Timeout { .. } | ClientError::Refused { .. } => true,
        }
    }
}

/// How many requests carried how many writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests sent to `/api/writes`.
    pub requests: u64,
    /// Writes they carried (a write sent again to the leader counts twice).
    pub writes: u64,
}

/// A write waiting for its batch.
struct Pending {
    command: Command,
    hops: u8,
    answer: oneshot::Sender<Result<Written, ClientError>>,
}

struct Shared {
    http: reqwest::Client,
    /// The node batches go to: the one given, then the leader named.
    addr: Mutex<String>,
    /// Every node the client knows: where it turns when the node it sends
    /// to is down, or knows no leader.
    nodes: Vec<String>,
    in_flight: Arc<Semaphore>,
    requests: AtomicU64,
    writes: AtomicU64,
}

/// A client that gathers concurrent writes into batches (the module's
/// documentation says how). Cheap to clone: clones share one queue.
///
/// ```no_run
/// use redolog_kv::{Client, Command, Request};
///
/// # async fn run() -> Result<(), redolog_kv::ClientError> {
/// let client = Client::new("127.0.0.1:21001");
/// let set = Request::Set { key: "a".into(), value: "1".into() };
/// let written = client.write(Command { request: set, session: None }).await?;
/// println!("applied at {}", written.log_index);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    queue: mpsc::UnboundedSender<Pending>,
}

impl Client {
    /// A client of the node at `addr` (`host:port`); it follows the leader
    /// that node names. Call it within a Tokio runtime: the client's task,
    /// which sends the batches, runs there until every clone is dropped.
    pub fn new(addr: impl Into<String>) -> Client {
        Client::with_fallbacks(addr, std::iter::empty::<String>())
    }

    /// A client of the node at `addr` that also knows `others`: when the
    /// node it sends to refuses the connection, does not answer in time,
    /// or knows no leader, later batches go to the next node it knows (a
    /// write refused as "not leader" goes there at once: it was never
    /// proposed).
    pub fn with_fallbacks(addr: impl Into<String>, others: impl IntoIterator<Item = impl Into<String>>) -> Client {
        let addr = addr.into();
        let nodes = std::iter::once(addr.clone()).chain(others.into_iter().map(Into::into)).collect();
        let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().unwrap_or_default();
        let shared = Arc::new(Shared {
            http,
            addr: Mutex::new(addr),
            nodes,
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            requests: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        });
        let (queue, queued) = mpsc::unbounded_channel();
        tokio::spawn(pump(shared.clone(), queued, queue.downgrade()));
        Client { shared, queue }
    }

    /// Applies `command` through the leader: its answer, or why there is
    /// none.
    pub async fn write(&self, command: Command) -> Result<Written, ClientError> {
        let (answer, answered) = oneshot::channel();
        self.queue.send(Pending { command, hops: 0, answer }).map_err(|_| ClientError::Closed)?;
        answered.await.map_err(|_| ClientError::Closed)?
    }

    /// The requests sent so far and the writes they carried.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            requests: self.shared.requests.load(Ordering::Relaxed),
            writes: self.shared.writes.load(Ordering::Relaxed),
        }
    }
}

impl Shared {
    /// Later batches go to `to` — or, `None`, to the node after `from` in
    /// the list — unless a batch since has moved them from `from` already.
    /// Whether they go elsewhere now.
    fn move_on(&self, from: &str, to: Option<String>) -> bool {
        let next = to.or_else(|| {
            let at = self.nodes.iter().position(|node| node == from)?;
            Some(self.nodes[(at + 1) % self.nodes.len()].clone()).filter(|next| next != from)
        });
        let mut current = self.addr.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match next {
            Some(next) if current.as_str() == from => {
                *current = next;
                true
            }
            _ => current.as_str() != from,
        }
    }
}

/// The client's task: takes a free slot, then everything queued, and sends
/// it; ends when every `Client` clone is gone and the queue is empty.
async fn pump(
    shared: Arc<Shared>,
    mut queued: mpsc::UnboundedReceiver<Pending>,
    queue: mpsc::WeakUnboundedSender<Pending>,
) {
    loop {
        let Ok(slot) = shared.in_flight.clone().acquire_owned().await else { return };
        let Some(first) = queued.recv().await else { return };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queued.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
        tokio::spawn(send(shared.clone(), batch, queue.clone(), slot));
    }
}

/// One element of `/api/writes`' answer.
#[derive(Deserialize)]
struct Answer {
    status: Option<u16>,
    error: Option<String>,
    leader: Option<Leader>,
    log_index: Option<u64>,
    log_id: Option<String>,
    node: Option<u64>,
    response: Option<Response>,
}

#[derive(Deserialize)]
struct Leader {
    id: u64,
    addr: Option<String>,
}

/// Sends one batch and hands each write its answer; the slot is free again
/// when this ends.
async fn send(
    shared: Arc<Shared>,
    batch: Vec<Pending>,
    queue: mpsc::WeakUnboundedSender<Pending>,
    _slot: OwnedSemaphorePermit,
) {
    let addr = shared.addr.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    shared.requests.fetch_add(1, Ordering::Relaxed);
    shared.writes.fetch_add(batch.len() as u64, Ordering::Relaxed);
    let commands: Vec<&Command> = batch.iter().map(|pending| &pending.command).collect();
    let sent = async {
        let response = shared.http.post(format!("http://{addr}/api/writes")).json(&commands).send().await?;
        let status = response.status().as_u16();
        if status == 200 {
            Ok(Ok(response.json::<Vec<Answer>>().await?))
        } else {
            Ok(Err((status, response.text().await.unwrap_or_default())))
        }
    };
    let sent: Result<Result<Vec<Answer>, (u16, String)>, reqwest::Error> = sent.await;
    match sent {
        Ok(Ok(answers)) if answers.len() == batch.len() => {
            for (pending, answer) in batch.into_iter().zip(answers) {
                answered(&shared, &addr, &queue, pending, answer);
            }
        }
        Ok(Ok(answers)) => {
            let message = format!("{} answers for {} writes", answers.len(), batch.len());
            fail_all(batch, || ClientError::Refused { addr: addr.clone(), status: 200, message: message.clone() });
        }
        Ok(Err((504, _))) => {
            shared.move_on(&addr, None);
            fail_all(batch, || ClientError::Timeout { addr: addr.clone() });
        }
        Ok(Err((status, message))) => {
            fail_all(batch, || ClientError::Refused { addr: addr.clone(), status, message: message.clone() })
        }
        Err(error) if error.is_timeout() => {
            shared.move_on(&addr, None);
            fail_all(batch, || ClientError::Timeout { addr: addr.clone() });
        }
        Err(error) => {
            if error.is_connect() {
                shared.move_on(&addr, None);
            }
            let source = Arc::new(error);
            fail_all(batch, || ClientError::Network { addr: addr.clone(), source: source.clone() });
        }
    }
}

fn fail_all(batch: Vec<Pending>, error: impl Fn() -> ClientError) {
    for pending in batch {
        let _ = pending.answer.send(Err(error()));
    }
}

/// Hands one write its answer — or, refused by a follower that names the
/// leader, sends it there (and later batches with it).
fn answered(shared: &Shared, addr: &str, queue: &mpsc::WeakUnboundedSender<Pending>, pending: Pending, answer: Answer) {
    let result = match answer {
        Answer { status: None, log_index: Some(log_index), log_id, node, response: Some(response), .. } => {
            Ok(Written { log_index, log_id: log_id.unwrap_or_default(), node: node.unwrap_or_default(), response })
        }
        Answer { status: Some(503), leader, .. } => {
            let named = leader.as_ref().and_then(|leader| leader.addr.clone()).filter(|named| named != addr);
            // Only the node this batch went to is replaced: a later batch
            // may already have learnt a newer leader. With no leader named,
            // the next node known.
            let elsewhere = pending.hops < MAX_HOPS && shared.move_on(addr, named);
            match queue.upgrade() {
                Some(queue) if elsewhere => {
                    let again = Pending { hops: pending.hops + 1, ..pending };
                    if let Err(mpsc::error::SendError(again)) = queue.send(again) {
                        let _ = again.answer.send(Err(ClientError::Closed));
                    }
                    return;
                }
                _ => Err(ClientError::NotLeader { leader: leader.map(|leader| leader.id) }),
            }
        }
        Answer { status: Some(409), log_index, .. } => {
            Err(ClientError::Stale { log_index: log_index.unwrap_or_default() })
        }
        Answer { status, error, .. } => Err(ClientError::Refused {
            addr: addr.to_string(),
            status: status.unwrap_or(200),
            message: error.unwrap_or_else(|| "an answer without a log index".to_string()),
        }),
    };
    let _ = pending.answer.send(result);
}
