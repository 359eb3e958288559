//! The cluster's identity (KV-9, [RAFT](redolog_raft::docs::raft)): 128 random bits drawn when
//! a node is initialized, kept in `<dir>/cluster-id`, carried by every Raft
//! RPC in the [`HEADER`] header. A node hands openraft only the RPCs of its
//! own cluster: a node of another — a test cluster pointed at this one's
//! address, a node of an old deployment on the same host — would depose
//! its leader with a higher committed vote and overwrite its log.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The header every Raft RPC carries its cluster's identity in.
pub const HEADER: &str = "redolog-cluster";

/// A cluster's identity: 32 lowercase hex digits in the header and the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterId(u128);

impl ClusterId {
    /// A new identity from the operating system's random source.
    fn draw() -> Result<ClusterId, IdentityError> {
        let mut bytes = [0; 16];
        getrandom::fill(&mut bytes).map_err(|error| IdentityError::Random(error.to_string()))?;
        Ok(ClusterId(u128::from_le_bytes(bytes)))
    }

    /// Parses the 32 hex digits of a header or of the file's line.
    pub fn parse(digits: &str) -> Option<ClusterId> {
        if digits.len() != 32 || !digits.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(digits, 16).ok().map(ClusterId)
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Why a Raft RPC was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// The request named another cluster, or none. What the answer says
    /// does not give away `ours` (the node's log does); `None` for a node
    /// that has no identity yet.
    #[error("another cluster: the request {theirs}, this node belongs to another or to none yet (a node joins another cluster only with its directory wiped)")]
    Foreign { ours: Option<ClusterId>, theirs: String },
    /// The header was not 32 hex digits.
    #[error("malformed {HEADER} header {0:?}: expected 32 hex digits")]
    Malformed(String),
}

/// Why the identity could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cluster identity file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("cluster identity file {path}: expected 32 hex digits and a newline, found {found:?}")]
    Malformed { path: PathBuf, found: String },
    #[error("no cluster identity at {path}, but the node's log holds Raft state (a vote or entries): restore the file, or wipe the node's directory and add the node again (its data comes back from the leader)")]
    Missing { path: PathBuf },
    #[error("drawing a cluster identity from the operating system's random source: {0}")]
    Random(String),
}

/// A node's identity: none until the node is initialized or a Raft RPC
/// names its cluster, then fixed for the life of its directory.
pub struct Identity {
    path: PathBuf,
    id: OnceLock<ClusterId>,
    /// Held while an identity is drawn or taken and kept: one wins.
    choosing: tokio::sync::Mutex<()>,
}

impl Identity {
    /// The identity kept in `dir/cluster-id`, if any. A file that does not
    /// hold one is an error naming it: a node must not forget its cluster.
    pub fn open(dir: &Path) -> Result<Identity, IdentityError> {
        let path = dir.join("cluster-id");
        let id = OnceLock::new();
        match fs::read_to_string(&path) {
            Ok(text) => {
                let parsed = text
                    .strip_suffix('\n')
                    .and_then(ClusterId::parse)
                    .ok_or_else(|| IdentityError::Malformed { path: path.clone(), found: text.clone() })?;
                let _ = id.set(parsed);
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(IdentityError::Io { path, source }),
        }
        Ok(Identity { path, id, choosing: tokio::sync::Mutex::new(()) })
    }

    /// The identity, if the node has one: what its RPCs carry.
    pub fn get(&self) -> Option<ClusterId> {
        self.id.get().copied()
    }

    /// Checks, at start, that a node whose log holds Raft state
    /// (`initialized`: a vote or entries) has its identity: a node that
    /// lost the file would take the next cluster that reaches it, and that
    /// cluster's leader would overwrite its log.
    pub fn check_kept(&self, initialized: bool) -> Result<(), IdentityError> {
        match self.get() {
            None if initialized => Err(IdentityError::Missing { path: self.path.clone() }),
            _ => Ok(()),
        }
    }

    /// The node's identity, drawn and kept first if it has none: what
    /// `/cluster/init` does before it initializes Raft.
    pub async fn get_or_draw(&self) -> Result<ClusterId, IdentityError> {
        self.get_or_keep(ClusterId::draw).await
    }

    /// The node's identity; if it has none, `new()`'s, kept on disk first.
    /// Of callers that race, the first to take `choosing` decides.
    async fn get_or_keep(
        &self,
        new: impl FnOnce() -> Result<ClusterId, IdentityError>,
    ) -> Result<ClusterId, IdentityError> {
        if let Some(id) = self.get() {
            return Ok(id);
        }
        let _choosing = self.choosing.lock().await;
        if let Some(id) = self.get() {
            return Ok(id);
        }
        self.keep(new()?).await
    }

    /// Whether a Raft RPC whose [`HEADER`] is `header` may go to openraft.
    /// A node without an identity takes the one named, kept on disk before
    /// this returns. A request that names none is refused, identity or not:
    /// every node that sends Raft's RPCs has one (it drew it at `init` or
    /// took it before it had any Raft state), so only a stranger names none.
    pub async fn admit(&self, header: Option<&[u8]>) -> Result<Result<(), Refusal>, IdentityError> {
        let named = match header {
            None => None,
            Some(bytes) => match std::str::from_utf8(bytes).ok().and_then(ClusterId::parse) {
                Some(id) => Some(id),
                None => return Ok(Err(Refusal::Malformed(String::from_utf8_lossy(bytes).into_owned()))),
            },
        };
        let ours = match named {
            Some(named) => Some(self.get_or_keep(|| Ok(named)).await?),
            None => self.get(),
        };
        Ok(match (named, ours) {
            (Some(named), Some(ours)) if named == ours => Ok(()),
            (named, ours) => Err(Refusal::Foreign {
                ours,
                theirs: named.map_or_else(|| "names none".to_string(), |id| format!("names {id}")),
            }),
        })
    }

    /// Writes `id` durably (a temporary file, fsync, rename, the directory
    /// fsynced), then holds it. Called by `get_or_keep` under `choosing`,
    /// once.
    async fn keep(&self, id: ClusterId) -> Result<ClusterId, IdentityError> {
        let path = self.path.clone();
        let failed = |source| IdentityError::Io { path: self.path.clone(), source };
        tokio::task::spawn_blocking(move || write_durably(&path, &format!("{id}\n")))
            .await
            .map_err(|joined| failed(io::Error::other(joined)))?
            .map_err(failed)?;
        let _ = self.id.set(id);
        Ok(id)
    }
}

fn write_durably(path: &Path, text: &str) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("no parent directory"))?;
    crate::machine::private_dir(dir)?;
    let temporary = path.with_extension("tmp");
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        File::options().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?
    };
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    fs::rename(&temporary, path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_new_node_takes_the_first_identity_named_and_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = Identity::open(dir.path()).expect("open");
        assert_eq!(identity.get(), None);
        let unnamed = identity.admit(None).await.expect("no I/O");
        assert!(matches!(unnamed, Err(Refusal::Foreign { ours: None, .. })), "{unnamed:?}");
        let (first, second) = (ClusterId(7), ClusterId(8));
        let named = |id: ClusterId| id.to_string().into_bytes();
        assert_eq!(identity.admit(Some(&named(first))).await.expect("kept"), Ok(()));
        assert_eq!(identity.get(), Some(first));
        let refused = identity.admit(Some(&named(second))).await.expect("no I/O");
        assert!(matches!(refused, Err(Refusal::Foreign { ours, .. }) if ours == Some(first)), "{refused:?}");
        let unnamed = identity.admit(None).await.expect("no I/O");
        assert!(matches!(unnamed, Err(Refusal::Foreign { .. })), "{unnamed:?}");

        let reopened = Identity::open(dir.path()).expect("reopen");
        assert_eq!(reopened.get(), Some(first), "the identity outlives the process");
        assert_eq!(reopened.get_or_draw().await.expect("kept"), first, "init keeps the identity it has");
        assert_eq!(fs::read_to_string(dir.path().join("cluster-id")).expect("file"), format!("{first}\n"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn of_two_first_requests_naming_different_clusters_one_wins() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().expect("tempdir");
            let identity = Arc::new(Identity::open(dir.path()).expect("open"));
            let named = |id: u128| ClusterId(id).to_string().into_bytes();
            let racers: Vec<_> = [1, 2]
                .map(|id| {
                    let identity = identity.clone();
                    tokio::spawn(async move { (id, identity.admit(Some(&named(id))).await.expect("no I/O error")) })
                })
                .into_iter()
                .collect();
            let mut admitted = Vec::new();
            for racer in racers {
                let (id, answer) = racer.await.expect("joined");
                if answer.is_ok() {
                    admitted.push(id);
                }
            }
            let [winner] = admitted[..] else { panic!("admitted: {admitted:?}") };
            assert_eq!(identity.get(), Some(ClusterId(winner)));
            assert_eq!(Identity::open(dir.path()).expect("reopen").get(), Some(ClusterId(winner)), "kept: the winner");
        }
    }

    #[test]
    fn a_node_with_raft_state_and_no_identity_is_refused_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = Identity::open(dir.path()).expect("open");
        assert!(identity.check_kept(false).is_ok(), "a new node");
        let error = identity.check_kept(true).expect_err("state without an identity");
        assert!(matches!(&error, IdentityError::Missing { path } if path.ends_with("cluster-id")), "{error}");
    }

    #[tokio::test]
    async fn init_draws_an_identity_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = Identity::open(dir.path()).expect("open");
        let drawn = identity.get_or_draw().await.expect("drawn");
        assert_eq!(identity.get_or_draw().await.expect("kept"), drawn);
        assert_eq!(Identity::open(dir.path()).expect("reopen").get(), Some(drawn));
        let other = Identity::open(tempfile::tempdir().expect("tempdir").path()).expect("open");
        assert_ne!(other.get_or_draw().await.expect("drawn"), drawn, "two clusters, two identities");
    }

    #[tokio::test]
    async fn a_malformed_header_is_refused_and_taken_by_nobody() {
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = Identity::open(dir.path()).expect("open");
        for header in [&b"not hex at all, thirty-two bytes"[..], b"", b"00ff", &[0xff; 32]] {
            let refused = identity.admit(Some(header)).await.expect("no I/O");
            assert!(matches!(refused, Err(Refusal::Malformed(_))), "{header:?}: {refused:?}");
        }
        assert_eq!(identity.get(), None);
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        for text in [
            "",
            "0123",
            "0123456789abcdef0123456789abcdeg\n",
            "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef\n\n",
        ] {
            fs::write(dir.path().join("cluster-id"), text).expect("write");
            let error = Identity::open(dir.path()).err().expect("a damaged file is refused");
            let message = error.to_string();
            assert!(message.contains("cluster-id") && message.contains("32 hex digits"), "{text:?}: {message}");
        }
    }
}
