//! The node's state machine: a key-value map with set, delete and
//! compare-and-set; client sessions, so a write retried after an unknown
//! outcome is applied once (the Raft dissertation, §6.3); and snapshots kept
//! in the node's directory, so a node that restarts after its log was purged
//! starts from its own snapshot and a node that fell behind the leader's
//! purge point catches up by the leader's.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use imbl::OrdMap;

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

/// What the machine has applied: also a snapshot's contents. The maps are
/// persistent (`imbl`): a clone shares every node with the original, and a
/// write after it copies only the path it changes — so a snapshot takes the
/// machine's state in O(1) under the lock and encodes it on a thread of its
/// own while writes go on (KV-10).
#[derive(Clone, Default, Serialize, Deserialize)]
struct Applied {
    last: Option<LogIdOf<TypeConfig>>,
    membership: StoredMembershipOf<TypeConfig>,
    data: OrdMap<String, String>,
    /// Per client, its last write's number and answer. (Kept for every
    /// client ever seen: a service with many short-lived clients would
    /// expire them, deterministically, by log position.)
    #[serde(default)]
    sessions: OrdMap<u64, (u64, Response)>,
}

impl Applied {
    fn meta(&self) -> SnapshotMetaOf<TypeConfig> {
        SnapshotMetaOf::<TypeConfig> { last_log_id: self.last, last_membership: self.membership.clone() }
    }
}

/// A snapshot as the node used to keep it (`snapshot.json`): read once, at
/// open, and written again as a `snapshot.bin`.
#[derive(Deserialize)]
struct LegacyStored {
    data: Vec<u8>,
}

/// A snapshot's bytes in a file of the node's state directory: the node's
/// own (`snapshot.bin`, to send to a follower: an open file, so a newer
/// snapshot renamed over it meanwhile does not change what is sent) or one
/// received from a leader (a temporary file, removed unless it is
/// installed). The bytes travel as they lie on disk (`snapshot::write`), never
/// whole in memory.
#[derive(Debug)]
pub struct SnapshotFile {
    file: Option<std::fs::File>,
    /// A received file's path: removed on drop unless installed.
    received: Option<PathBuf>,
}

impl SnapshotFile {
    /// The open file, to read from its start.
    pub fn into_file(mut self) -> std::fs::File {
        self.file.take().expect("a snapshot file is taken once")
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if let Some(path) = self.received.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

struct Inner {
    applied: Applied,
    /// The meta of the snapshot in `snapshot.bin`.
    snapshot: Option<SnapshotMetaOf<TypeConfig>>,
}

/// The key-value state machine of one node.
#[derive(Clone)]
pub struct Machine {
    inner: Arc<Mutex<Inner>>,
    /// Held by whoever writes the snapshot file, from choosing what to write
    /// to making it the machine's snapshot, and by whoever opens it to send:
    /// a snapshot built while another is installed is written before or
    /// after it, never into the same temporary file at once, and never
    /// replaces a newer one (KV-2); a sent file is the one its meta names.
    persisting: Arc<tokio::sync::Mutex<()>>,
    /// The node's state directory and its snapshot file.
    dir: PathBuf,
    path: PathBuf,
    /// Numbers the received snapshots' temporary files.
    received: Arc<AtomicU64>,
}

impl Machine {
    /// Opens the machine in `dir` (made 0700, as the log's): from its
    /// snapshot if it has one. Temporary files a crash left are removed.
    pub fn open(dir: &Path) -> io::Result<Machine> {
        private_dir(dir)?;
        let path = dir.join(snapshot::FILE);
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            if name.to_str().is_some_and(|name| name.ends_with(".tmp")) {
                std::fs::remove_file(dir.join(name))?;
            }
        }
        let legacy = dir.join("snapshot.json");
        let applied = match std::fs::File::open(&path) {
            Ok(file) => Some(snapshot::read(file, &path)?),
            Err(error) if error.kind() == io::ErrorKind::NotFound => match std::fs::read(&legacy) {
                Ok(bytes) => {
                    let stored: LegacyStored = serde_json::from_slice(&bytes)?;
                    let applied: Applied = serde_json::from_slice(&stored.data)?;
                    snapshot::write(dir, &path, &applied)?;
                    std::fs::remove_file(&legacy)?;
                    Some(applied)
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => None,
                Err(error) => return Err(error),
            },
            Err(error) => return Err(error),
        };
        let snapshot = applied.as_ref().map(Applied::meta);
        let inner = Arc::new(Mutex::new(Inner { applied: applied.unwrap_or_default(), snapshot }));
        Ok(Machine { inner, persisting: Arc::default(), dir: dir.to_path_buf(), path, received: Arc::default() })
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
        self.inner().applied.data.iter().map(|(key, value)| (key.clone(), value.clone())).collect()
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every update is whole under the lock.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes a snapshot a leader sends into a temporary file of the state
    /// directory (0600) as its bytes arrive; `install_snapshot` checks and
    /// installs it.
    pub async fn receive<S, B, E>(&self, mut body: S) -> io::Result<SnapshotFile>
    where
        S: Stream<Item = Result<B, E>> + Unpin,
        B: AsRef<[u8]>,
        E: std::error::Error + Send + Sync + 'static,
    {
        use tokio::io::AsyncWriteExt;
        let number = self.received.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("received-{number}.tmp"));
        let file = snapshot::create_private(&path)?;
        let mut received = SnapshotFile { file: None, received: Some(path) };
        let mut file = tokio::io::BufWriter::new(tokio::fs::File::from_std(file));
        while let Some(chunk) = body.try_next().await.map_err(io::Error::other)? {
            file.write_all(chunk.as_ref()).await?;
        }
        file.flush().await?;
        received.file = Some(file.into_inner().into_std().await);
        Ok(received)
    }
}

/// Makes `dir` (and its parents) and keeps it private to the node's user:
/// 0700, an existing directory made so too.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The snapshot file (KV-10): `magic`, the applied state in MessagePack,
/// then the CRC-32C of everything before it; written once, streamed to disk
/// from the state a snapshot took, read back the same way.
mod snapshot {
    use std::fs::File;
    use std::io::{self, BufReader, BufWriter, Read, Write};
    use std::path::Path;

    use super::Applied;

    pub(super) const FILE: &str = "snapshot.bin";
    const MAGIC: &[u8; 8] = b"rkvsnap1";

    /// A writer that checksums what passes through it.
    struct Summed<W> {
        inner: W,
        crc: u32,
    }

    impl<W: Write> Write for Summed<W> {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let written = self.inner.write(bytes)?;
            self.crc = crc32c::crc32c_append(self.crc, &bytes[..written]);
            Ok(written)
        }

        fn flush(&mut self) -> io::Result<()> {
            self.inner.flush()
        }
    }

    /// A reader that checksums what passes through it.
    struct Checked<R> {
        inner: R,
        crc: u32,
    }

    impl<R: Read> Read for Checked<R> {
        fn read(&mut self, bytes: &mut [u8]) -> io::Result<usize> {
            let read = self.inner.read(bytes)?;
            self.crc = crc32c::crc32c_append(self.crc, &bytes[..read]);
            Ok(read)
        }
    }

    /// A new file of mode 0600.
    pub(super) fn create_private(path: &Path) -> io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        File::options().write(true).read(true).create_new(true).mode(0o600).open(path)
    }

    /// Writes `applied` as the snapshot `path` in `dir`: a temporary file,
    /// synced, renamed over the old one, the directory synced — a crash
    /// leaves the old snapshot or the new one. Returns the new file, open
    /// for reading.
    pub(super) fn write(dir: &Path, path: &Path, applied: &Applied) -> io::Result<File> {
        let temporary = path.with_extension("bin.tmp");
        let _ = std::fs::remove_file(&temporary);
        let file = create_private(&temporary)?;
        let file = encode(BufWriter::with_capacity(1 << 20, file), applied)?;
        file.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()?;
        install(dir, &temporary, path)?;
        File::open(path)
    }

    /// Writes `applied` into `out` as a snapshot file's bytes, flushed.
    pub(super) fn encode<W: Write>(out: W, applied: &Applied) -> io::Result<W> {
        let mut out = Summed { inner: out, crc: 0 };
        out.write_all(MAGIC)?;
        rmp_serde::encode::write(&mut out, applied).map_err(io::Error::other)?;
        let crc = out.crc;
        let mut out = out.inner;
        out.write_all(&crc.to_le_bytes())?;
        out.flush()?;
        Ok(out)
    }

    /// Renames `from` over `to`, then syncs `dir`.
    pub(super) fn install(dir: &Path, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)?;
        File::open(dir)?.sync_all()
    }

    /// Reads a snapshot from `file` (`path` names it in errors): bad magic,
    /// a checksum that fails, a malformed body or bytes after the checksum
    /// are `InvalidData`, naming the file.
    pub(super) fn read(file: File, path: &Path) -> io::Result<Applied> {
        let invalid =
            |what: String| io::Error::new(io::ErrorKind::InvalidData, format!("snapshot {}: {what}", path.display()));
        let mut input = Checked { inner: BufReader::with_capacity(1 << 20, file), crc: 0 };
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic).map_err(|error| invalid(format!("no header: {error}")))?;
        if &magic != MAGIC {
            return Err(invalid(format!("not a snapshot: it begins {magic:02x?}")));
        }
        let applied: Applied =
            rmp_serde::decode::from_read(&mut input).map_err(|error| invalid(format!("malformed: {error}")))?;
        let mut trailer = [0u8; 4];
        let mut rest = input.inner;
        rest.read_exact(&mut trailer).map_err(|error| invalid(format!("no checksum: {error}")))?;
        if u32::from_le_bytes(trailer) != input.crc {
            return Err(invalid("its checksum does not match its bytes".into()));
        }
        if rest.read(&mut [0u8; 1])? != 0 {
            return Err(invalid("bytes after its checksum".into()));
        }
        Ok(applied)
    }
}

/// Applies `command` once per session number (KV-1, [RAFT](redolog_raft::docs::raft)).
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

fn apply(data: &mut OrdMap<String, String>, request: Request) -> Response {
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

/// Runs `work` on a blocking thread: off the runtime's threads, which serve
/// Raft and the clients (with `--threads 1`, its only one).
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(io::Error::other)?
}

impl RaftSnapshotBuilder<TypeConfig> for Machine {
    type SnapshotData = SnapshotFile;

    /// KV-10: the state is taken under the lock in O(1) (a clone of the
    /// persistent maps) and written on a blocking thread; applying goes on
    /// meanwhile.
    async fn build_snapshot(&mut self) -> Result<SnapshotOf<TypeConfig, SnapshotFile>, io::Error> {
        let _persisting = self.persisting.clone().lock_owned().await;
        let applied = self.inner().applied.clone();
        let meta = applied.meta();
        let (dir, path, keys) = (self.dir.clone(), self.path.clone(), applied.data.len());
        let started = std::time::Instant::now();
        let file = blocking(move || snapshot::write(&dir, &path, &applied)).await?;
        // What a snapshot costs against the data set (`RUST_LOG=redolog_kv=info`).
        let bytes = file.metadata().map_or(0, |metadata| metadata.len());
        tracing::info!(keys, bytes, ms = started.elapsed().as_millis() as u64, index = ?meta.last_log_id, "snapshot written");
        self.inner().snapshot = Some(meta.clone());
        Ok(SnapshotOf::<TypeConfig, SnapshotFile> { meta, snapshot: SnapshotFile { file: Some(file), received: None } })
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotData = SnapshotFile;
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

    /// Checks the received file (its checksum, and that it holds what its
    /// meta says), makes it the node's snapshot, then the machine's state.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        mut snapshot: SnapshotFile,
    ) -> Result<(), io::Error> {
        let _persisting = self.persisting.clone().lock_owned().await;
        let from = snapshot.received.clone().ok_or_else(|| io::Error::other("installing the node's own snapshot"))?;
        let file = snapshot.file.take().ok_or_else(|| io::Error::other("a snapshot without its file"))?;
        let (dir, path, expected) = (self.dir.clone(), self.path.clone(), meta.last_log_id);
        let applied = blocking(move || {
            file.sync_all()?;
            let mut file = file;
            io::Seek::rewind(&mut file)?;
            let applied = snapshot::read(file, &from)?;
            if applied.last != expected {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("snapshot {} holds {:?}, its meta says {expected:?}", from.display(), applied.last),
                ));
            }
            snapshot::install(&dir, &from, &path)?;
            Ok(applied)
        })
        .await?;
        snapshot.received = None;
        let mut inner = self.inner();
        inner.applied = Applied { last: meta.last_log_id, membership: meta.last_membership.clone(), ..applied };
        inner.snapshot = Some(meta.clone());
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<SnapshotOf<TypeConfig, SnapshotFile>>, io::Error> {
        let _persisting = self.persisting.clone().lock_owned().await;
        let Some(meta) = self.inner().snapshot.clone() else { return Ok(None) };
        let file = std::fs::File::open(&self.path)?;
        Ok(Some(SnapshotOf::<TypeConfig, SnapshotFile> {
            meta,
            snapshot: SnapshotFile { file: Some(file), received: None },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_and_set_applies_only_when_the_value_is_the_expected_one() {
        let mut data = OrdMap::new();
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
            let data = snapshot::encode(Vec::new(), &newer).expect("encode");
            let (mut builder, mut installer) = (machine.clone(), machine.clone());
            let build = runtime.spawn(async move { builder.build_snapshot().await.map(|_| ()) });
            let install = runtime.spawn(async move {
                let chunks = futures_util::stream::iter([Ok::<_, io::Error>(data)]);
                let received = installer.receive(chunks).await?;
                installer.install_snapshot(&meta, received).await
            });
            runtime.block_on(async {
                build.await.expect("build task").expect("build");
                install.await.expect("install task").expect("install");
            });
            let reopened = Machine::open(dir.path()).expect("reopen");
            let last = reopened.inner().applied.last;
            assert_eq!(last, Some(new), "round {round}: the snapshot file went back to {last:?}");
        }
    }

    fn filled(keys: u64) -> Applied {
        let mut applied = Applied { last: Some(log_id(keys)), ..Applied::default() };
        for key in 0..keys {
            applied.data.insert(format!("key-{key}"), format!("value-{key}"));
        }
        applied.sessions.insert(7, (3, Response { applied: true, ..Response::default() }));
        applied
    }

    /// KV-10: the snapshot file reads back as written, and a file that is
    /// not whole — a flipped byte anywhere, cut short, bytes after its
    /// checksum, another file — is `InvalidData` naming it, never a map
    /// with keys missing.
    #[test]
    fn a_snapshot_file_reads_back_and_any_damage_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(snapshot::FILE);
        let applied = filled(500);
        let file = snapshot::write(dir.path(), &path, &applied).expect("write");
        let back = snapshot::read(file, &path).expect("read");
        assert_eq!((back.last, &back.data, &back.sessions), (applied.last, &applied.data, &applied.sessions));
        let bytes = std::fs::read(&path).expect("bytes");
        let mut damaged: Vec<Vec<u8>> = (0..bytes.len())
            .step_by(97)
            .map(|at| {
                let mut copy = bytes.clone();
                copy[at] ^= 0x20;
                copy
            })
            .collect();
        damaged.push(bytes[..bytes.len() - 1].to_vec());
        damaged.push(bytes[..bytes.len() / 2].to_vec());
        damaged.push([bytes.as_slice(), b"x"].concat());
        damaged.push(b"{\"meta\": {}}".to_vec());
        for (index, copy) in damaged.iter().enumerate() {
            let path = dir.path().join(format!("damaged-{index}"));
            std::fs::write(&path, copy).expect("write a damaged copy");
            let error = snapshot::read(std::fs::File::open(&path).expect("open"), &path).err();
            let error = error.unwrap_or_else(|| panic!("damaged copy {index} read as a snapshot"));
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "copy {index}: {error}");
            assert!(error.to_string().contains(&path.display().to_string()), "copy {index}: {error}");
        }
    }

    /// Files are the node's user's alone: the state directory 0700 (an
    /// existing one made so), a snapshot 0600, a received one too; the
    /// snapshot a node kept as JSON before KV-10 is read and written again
    /// as a `snapshot.bin`.
    #[test]
    fn the_state_is_private_and_an_old_json_snapshot_is_carried_over() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777;
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).expect("mkdir");
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let old = filled(20);
        let inner = serde_json::to_vec(&old).expect("encode");
        let stored = serde_json::json!({"meta": old.meta(), "data": inner});
        std::fs::write(state.join("snapshot.json"), serde_json::to_vec(&stored).expect("encode")).expect("write");
        let mut machine = Machine::open(&state).expect("open");
        assert_eq!(mode(&state), 0o700);
        assert!(!state.join("snapshot.json").exists(), "the old snapshot was left beside the new one");
        assert_eq!(mode(&state.join(snapshot::FILE)), 0o600);
        assert_eq!(machine.get("key-3").as_deref(), Some("value-3"));
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let current = runtime.block_on(machine.get_current_snapshot()).expect("current").expect("a snapshot");
        assert_eq!(current.meta.last_log_id, old.last);
        let bytes = snapshot::encode(Vec::new(), &filled(3)).expect("encode");
        let received = runtime
            .block_on(machine.receive(futures_util::stream::iter([Ok::<_, io::Error>(bytes)])))
            .expect("receive");
        let path = received.received.clone().expect("a received file");
        assert_eq!(mode(&path), 0o600);
        drop(received);
        assert!(!path.exists(), "a received snapshot not installed was left behind");
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
