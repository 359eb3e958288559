//! The node's state machine: a key-value map with set, delete and
//! compare-and-set; client sessions, so a write retried after an unknown
//! outcome is applied once (the Raft dissertation, §6.3); and snapshots kept
//! in the node's directory, so a node that restarts after its log was purged
//! starts from its own snapshot and a node that fell behind the leader's
//! purge point catches up by the leader's.

use std::collections::BTreeMap;
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::{Stream, TryStreamExt};
use redolog_raft::openraft_0_10::openraft;
use serde::{Deserialize, Serialize};

use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};

openraft::declare_raft_types!(
    /// The service's types: key-value writes and their responses, `u64` node
    /// ids, nodes known by their HTTP address.
    pub TypeConfig:
        D = Command,
        R = Response,
);

/// What the cluster replicates: a write and, if the client numbers its
/// writes, its place in the client's session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FlatCommand")]
pub struct Command {
    /// The write: `{"op": "set" | "delete" | "cas", …}` in JSON.
    #[serde(flatten)]
    pub request: Request,
    /// `{"client": …, "seq": …}`: absent for a client that does not retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Session>,
}

/// A client's numbering of its writes: `seq` goes up by one per write, and a
/// write whose outcome the client did not learn (a timeout, a broken
/// connection) is sent again with the same number — to any node — until it
/// is answered. The machine keeps each client's last number and answer, so
/// the retry gets the first application's answer instead of applying twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The client's id, unique among the service's clients.
    pub client: u64,
    /// The write's number in the client's session.
    pub seq: u64,
}

/// A command as its JSON reads: one flat object. Every node decodes every
/// replicated entry, and serde's derived form of `Command` (a flattened,
/// internally tagged enum) buffers each field before it decodes it: a
/// quarter of a follower's CPU went there (`perf`, docs/BENCHMARKS.md "A
/// cluster of processes"). This struct reads the same JSON in one pass.
#[derive(Deserialize)]
struct FlatCommand {
    op: Op,
    key: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    expected: Option<String>,
    #[serde(default)]
    new: Option<String>,
    #[serde(default)]
    session: Option<Session>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Op {
    Set,
    Delete,
    Cas,
}

impl TryFrom<FlatCommand> for Command {
    type Error = &'static str;

    fn try_from(flat: FlatCommand) -> Result<Command, &'static str> {
        let FlatCommand { op, key, value, expected, new, session } = flat;
        let request = match op {
            Op::Set => Request::Set { key, value: value.ok_or("op \"set\": missing field `value`")? },
            Op::Delete => Request::Delete { key },
            Op::Cas => Request::Cas { key, expected, new: new.ok_or("op \"cas\": missing field `new`")? },
        };
        Ok(Command { request, session })
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.session {
            Some(Session { client, seq }) => write!(f, "{} (client {client} #{seq})", self.request),
            None => self.request.fmt(f),
        }
    }
}

/// A write: what a client asks the cluster to apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Sets `key` to `value`.
    Set { key: String, value: String },
    /// Removes `key`.
    Delete { key: String },
    /// Sets `key` to `new` if its value is `expected` (`None`: absent).
    Cas { key: String, expected: Option<String>, new: String },
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Set { key, value } => write!(f, "set {key}={value}"),
            Request::Delete { key } => write!(f, "delete {key}"),
            Request::Cas { key, expected, new } => write!(f, "cas {key}: {expected:?} -> {new}"),
        }
    }
}

/// What applying a write returned: the key's value before it, and whether
/// the write took effect (a compare-and-set whose expectation failed did
/// not).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The key's value before the write.
    pub previous: Option<String>,
    /// Whether the write changed the map (a compare-and-set whose
    /// expectation failed did not).
    pub applied: bool,
    /// The answer of the session's earlier application of this write: this
    /// copy changed nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// Refused: the session had already applied a later write (the client
    /// sent a write while an earlier one was unanswered).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

/// What the machine has applied: also a snapshot's contents.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Applied {
    last: Option<LogIdOf<TypeConfig>>,
    membership: StoredMembershipOf<TypeConfig>,
    data: BTreeMap<String, String>,
    /// Per client, its last write's number and answer. (Kept for every
    /// client ever seen: a service with many short-lived clients would
    /// expire them, deterministically, by log position.)
    #[serde(default)]
    sessions: BTreeMap<u64, (u64, Response)>,
}

/// A snapshot as the node keeps it on disk.
#[derive(Serialize, Deserialize)]
struct Stored {
    meta: SnapshotMetaOf<TypeConfig>,
    data: Vec<u8>,
}

struct Inner {
    applied: Applied,
    snapshot: Option<Stored>,
}

/// The key-value state machine of one node.
#[derive(Clone)]
pub struct Machine {
    inner: Arc<Mutex<Inner>>,
    /// Held by whoever writes the snapshot file, from choosing what to write
    /// to making it the machine's snapshot: a snapshot built while another
    /// is installed is written before or after it, never into the same
    /// temporary file at once, and never replaces a newer one (KV-2).
    persisting: Arc<tokio::sync::Mutex<()>>,
    /// The snapshot file.
    path: PathBuf,
}

impl Machine {
    /// Opens the machine in `dir`: from its snapshot if it has one.
    pub fn open(dir: &Path) -> io::Result<Machine> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("snapshot.json");
        let (applied, snapshot) = match std::fs::read(&path) {
            Ok(bytes) => {
                let stored: Stored = serde_json::from_slice(&bytes)?;
                let applied: Applied = serde_json::from_slice(&stored.data)?;
                (applied, Some(stored))
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => (Applied::default(), None),
            Err(error) => return Err(error),
        };
        let inner = Arc::new(Mutex::new(Inner { applied, snapshot }));
        Ok(Machine { inner, persisting: Arc::default(), path })
    }

    /// A key's value.
    pub fn get(&self, key: &str) -> Option<String> {
        self.inner().applied.data.get(key).cloned()
    }

    /// The last entry applied.
    pub fn last_applied(&self) -> Option<String> {
        self.inner().applied.last.map(|id| id.to_string())
    }

    /// Every key and value.
    pub fn data(&self) -> BTreeMap<String, String> {
        self.inner().applied.data.clone()
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every update is whole under the lock.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes the snapshot file: a temporary file, synced, renamed over the
    /// old one, the directory synced — a crash leaves the old snapshot or
    /// the new one.
    fn persist(&self, stored: &Stored) -> io::Result<()> {
        let temporary = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&serde_json::to_vec(stored)?)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &self.path)?;
        let dir = self.path.parent().ok_or_else(|| io::Error::other("snapshot path has no directory"))?;
        std::fs::File::open(dir)?.sync_all()
    }
}

/// Applies `command` once per session number (KV-1, docs/RAFT.md).
fn apply_once(applied: &mut Applied, command: Command) -> Response {
    let Some(Session { client, seq }) = command.session else {
        return apply(&mut applied.data, command.request);
    };
    match applied.sessions.get(&client) {
        Some((last, answer)) if *last == seq => Response { replayed: true, ..answer.clone() },
        Some((last, _)) if *last > seq => Response { stale: true, ..Response::default() },
        _ => {
            let answer = apply(&mut applied.data, command.request);
            applied.sessions.insert(client, (seq, answer.clone()));
            answer
        }
    }
}

/// KV-3: the machine applies the log without a gap — each entry the one
/// after the last applied. openraft reads the entries to apply from the log
/// and tolerates a range that starts below what the log keeps (purged); a
/// machine behind its log's purge point would skip entries silently and
/// serve a map that misses acknowledged writes. Here it stops the node with
/// an error instead.
fn follows(last: Option<&LogIdOf<TypeConfig>>, next: &LogIdOf<TypeConfig>) -> Result<(), io::Error> {
    match last {
        Some(last) if next.index != last.index + 1 => Err(io::Error::other(format!(
            "the state machine applied up to {last} and was handed {next}: entries in between are missing \
             (the log was purged past the machine's snapshot)"
        ))),
        _ => Ok(()),
    }
}

fn apply(data: &mut BTreeMap<String, String>, request: Request) -> Response {
    match request {
        Request::Set { key, value } => {
            Response { previous: data.insert(key, value), applied: true, ..Response::default() }
        }
        Request::Delete { key } => Response { previous: data.remove(&key), applied: true, ..Response::default() },
        Request::Cas { key, expected, new } => {
            let previous = data.get(&key).cloned();
            let applied = previous == expected;
            if applied {
                data.insert(key, new);
            }
            Response { previous, applied, ..Response::default() }
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for Machine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<SnapshotOf<TypeConfig, Cursor<Vec<u8>>>, io::Error> {
        let _persisting = self.persisting.clone().lock_owned().await;
        let (meta, data) = {
            let inner = self.inner();
            let meta = SnapshotMetaOf::<TypeConfig> {
                last_log_id: inner.applied.last,
                last_membership: inner.applied.membership.clone(),
            };
            (meta, serde_json::to_vec(&inner.applied)?)
        };
        let stored = Stored { meta: meta.clone(), data: data.clone() };
        self.persist(&stored)?;
        self.inner().snapshot = Some(stored);
        Ok(SnapshotOf::<TypeConfig, Cursor<Vec<u8>>> { meta, snapshot: Cursor::new(data) })
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
            let response = {
                let mut inner = self.inner();
                follows(inner.applied.last.as_ref(), &entry.log_id)?;
                inner.applied.last = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => Response::default(),
                    EntryPayload::Normal(command) => apply_once(&mut inner.applied, command),
                    EntryPayload::Membership(membership) => {
                        inner.applied.membership =
                            StoredMembershipOf::<TypeConfig>::new(Some(entry.log_id), membership);
                        Response::default()
                    }
                }
            };
            if let Some(responder) = responder {
                responder.send(response);
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
        let data = snapshot.into_inner();
        let applied: Applied = serde_json::from_slice(&data)?;
        let _persisting = self.persisting.clone().lock_owned().await;
        let stored = Stored { meta: meta.clone(), data };
        self.persist(&stored)?;
        let mut inner = self.inner();
        inner.applied = Applied { last: meta.last_log_id, membership: meta.last_membership.clone(), ..applied };
        inner.snapshot = Some(stored);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<SnapshotOf<TypeConfig, Cursor<Vec<u8>>>>, io::Error> {
        let inner = self.inner();
        Ok(inner.snapshot.as_ref().map(|stored| SnapshotOf::<TypeConfig, Cursor<Vec<u8>>> {
            meta: stored.meta.clone(),
            snapshot: Cursor::new(stored.data.clone()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_and_set_applies_only_when_the_value_is_the_expected_one() {
        let mut data = BTreeMap::new();
        let cas = |expected: Option<&str>, new: &str| Request::Cas {
            key: "k".into(),
            expected: expected.map(str::to_string),
            new: new.into(),
        };
        let answer = |previous: Option<&str>, applied| Response {
            previous: previous.map(str::to_string),
            applied,
            ..Response::default()
        };
        assert_eq!(apply(&mut data, cas(None, "a")), answer(None, true));
        assert_eq!(apply(&mut data, cas(None, "b")), answer(Some("a"), false));
        assert_eq!(apply(&mut data, cas(Some("a"), "c")), answer(Some("a"), true));
        assert_eq!(data.get("k").map(String::as_str), Some("c"));
    }

    #[test]
    fn a_retried_write_is_applied_once_and_answered_as_the_first_time() {
        let mut applied = Applied::default();
        let set = |value: &str, seq| Command {
            request: Request::Set { key: "k".into(), value: value.into() },
            session: Some(Session { client: 7, seq }),
        };
        let first = apply_once(&mut applied, set("a", 1));
        assert!(first.applied && !first.replayed);
        // Another client writes in between; then client 7's retry of #1.
        let other = Command { request: Request::Set { key: "k".into(), value: "b".into() }, session: None };
        apply_once(&mut applied, other);
        let retry = apply_once(&mut applied, set("a", 1));
        assert_eq!(retry, Response { replayed: true, ..first });
        assert_eq!(applied.data["k"], "b", "the retry wrote again");
        // The next write applies; an older number is refused.
        assert!(apply_once(&mut applied, set("c", 2)).applied);
        let stale = apply_once(&mut applied, set("a", 1));
        assert!(stale.stale && !stale.applied);
        assert_eq!(applied.data["k"], "c");
        // A snapshot keeps the sessions.
        let copy: Applied = serde_json::from_slice(&serde_json::to_vec(&applied).expect("encode")).expect("decode");
        assert_eq!(copy.sessions, applied.sessions);
    }

    fn log_id(index: u64) -> LogIdOf<TypeConfig> {
        openraft::testing::log_id::<TypeConfig>(1, 1, index)
    }

    #[test]
    fn the_machine_refuses_an_entry_that_does_not_follow_the_last_applied() {
        assert!(follows(None, &log_id(7)).is_ok(), "a machine that applied nothing takes any first entry");
        assert!(follows(Some(&log_id(6)), &log_id(7)).is_ok());
        let gap = follows(Some(&log_id(5)), &log_id(7)).expect_err("a skipped entry");
        assert!(gap.to_string().contains("missing"), "{gap}");
        assert!(follows(Some(&log_id(7)), &log_id(7)).is_err(), "an entry applied twice");
    }

    /// KV-2: openraft builds a snapshot on a task of its own while the
    /// machine may install a newer one; the file must end at the newer one.
    /// Without the `persisting` lock a build that read the machine before
    /// the install wrote its older snapshot over the installed one.
    #[test]
    fn a_snapshot_built_while_a_newer_one_is_installed_never_replaces_it() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        for round in 1..=100u64 {
            let machine = Machine::open(dir.path()).expect("open");
            let (old, new) = (log_id(3 * round), log_id(3 * round + 1));
            machine.inner().applied.last = Some(old);
            let newer = Applied { last: Some(new), ..Applied::default() };
            let meta = SnapshotMetaOf::<TypeConfig> { last_log_id: Some(new), last_membership: Default::default() };
            let data = serde_json::to_vec(&newer).expect("encode");
            let (mut builder, mut installer) = (machine.clone(), machine.clone());
            let build = runtime.spawn(async move { builder.build_snapshot().await.map(|_| ()) });
            let install = runtime.spawn(async move { installer.install_snapshot(&meta, Cursor::new(data)).await });
            runtime.block_on(async {
                build.await.expect("build task").expect("build");
                install.await.expect("install task").expect("install");
            });
            let reopened = Machine::open(dir.path()).expect("reopen");
            let last = reopened.inner().applied.last;
            assert_eq!(last, Some(new), "round {round}: the snapshot file went back to {last:?}");
        }
    }

    #[test]
    fn a_command_reads_the_documented_json() {
        let plain: Command = serde_json::from_str(r#"{"op": "set", "key": "a", "value": "1"}"#).expect("plain");
        assert_eq!(plain.session, None);
        let numbered: Command = serde_json::from_str(
            r#"{"op": "cas", "key": "a", "expected": null, "new": "2", "session": {"client": 3, "seq": 9}}"#,
        )
        .expect("with a session");
        assert_eq!(numbered.session, Some(Session { client: 3, seq: 9 }));
        assert!(matches!(numbered.request, Request::Cas { expected: None, .. }));
        let delete: Command = serde_json::from_str(r#"{"op": "delete", "key": "b"}"#).expect("delete");
        assert_eq!(delete.request, Request::Delete { key: "b".into() });
    }

    #[test]
    fn a_command_reads_back_as_written() {
        let commands = [
            Command { request: Request::Set { key: "a".into(), value: "1".into() }, session: None },
            Command { request: Request::Delete { key: "a".into() }, session: Some(Session { client: 1, seq: 2 }) },
            Command {
                request: Request::Cas { key: "a".into(), expected: Some("1".into()), new: "2".into() },
                session: None,
            },
            Command { request: Request::Cas { key: "a".into(), expected: None, new: "2".into() }, session: None },
        ];
        for command in commands {
            let text = serde_json::to_string(&command).expect("encode");
            let back: Command = serde_json::from_str(&text).expect("decode");
            assert_eq!(back, command, "{text}");
        }
    }

    #[test]
    fn a_malformed_command_says_what_is_missing() {
        let error = serde_json::from_str::<Command>(r#"{"op": "set", "key": "a"}"#).expect_err("no value");
        assert!(error.to_string().contains("missing field `value`"), "{error}");
        let error =
            serde_json::from_str::<Command>(r#"{"op": "cas", "key": "a", "expected": "1"}"#).expect_err("no new");
        assert!(error.to_string().contains("missing field `new`"), "{error}");
        let error = serde_json::from_str::<Command>(r#"{"op": "put", "key": "a"}"#).expect_err("unknown op");
        assert!(error.to_string().contains("put"), "{error}");
    }
}
