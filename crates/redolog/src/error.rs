//! The one error type of the crate.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::lsn::Lsn;

/// Everything that can go wrong, each naming what and where.
///
/// ```
/// use redolog::{Config, Error, Log};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("notes.txt"), b"not a log").unwrap();
/// match Log::open(dir.path(), Config::default()) {
///     Err(Error::NotALog { path, .. }) => assert_eq!(path, dir.path()),
///     other => panic!("unexpected: {other:?}"),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O call failed while opening or recovering (the log is not poisoned
    /// because it never started).
    #[error("{op} failed on {path}: {source}")]
    Io {
        /// The operation: "read", "write", "fdatasync", "create", ...
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A write or fdatasync failed earlier (or in this call): the log accepts
    /// nothing more. Nothing appended after the last successful sync was
    /// acknowledged as durable. Restart and reopen; recovery reads the disk.
    #[error("log is poisoned: {op} failed on {path}: {source}")]
    Poisoned {
        /// The operation that failed first.
        op: &'static str,
        /// The file it failed on.
        path: PathBuf,
        /// The first failure.
        #[source]
        source: Arc<io::Error>,
    },

    /// The log was closed (by `close` or by dropping it).
    #[error("log is closed")]
    Closed,

    /// The log is full and no checkpoint freed space within
    /// `Config::log_full_timeout` ([DESIGN INV-44](crate::docs::design#2-invariants)). An append that
    /// got this reserved nothing; a wait that got it leaves its group
    /// appended, to become durable once space is freed. Checkpoint (flush
    /// the pages the log protects), or advance the consumer that holds it.
    #[error(
        "log is full: {needed_bytes} bytes more are needed than the files take before the next checkpoint \
         (checkpoint at LSN {checkpoint_lsn}{}; waited {waited:?})",
        held_by.as_ref().map(|name| format!(", space held by consumer {name:?}")).unwrap_or_default()
    )]
    LogFull {
        /// The last checkpoint: the log keeps everything after it.
        checkpoint_lsn: Lsn,
        /// How many bytes past the writer's limit the append or wait needs.
        needed_bytes: u64,
        /// The consumer whose position holds the space, if one does (the
        /// checkpoint is past it, §1.16).
        held_by: Option<String>,
        /// How long it waited for space.
        waited: std::time::Duration,
    },

    /// The directory holds files that are not a redolog log.
    #[error("{path} is not a redolog directory: {reason}")]
    NotALog {
        /// The directory or file.
        path: PathBuf,
        /// What was found.
        reason: String,
    },

    /// A file's header names another log than the rest of the directory.
    #[error("{path} belongs to another log (log id {found:032x}, expected {expected:032x})")]
    ForeignFile {
        /// The file.
        path: PathBuf,
        /// The log id of `redo.0000`.
        expected: u128,
        /// The log id found in this file.
        found: u128,
    },

    /// The log was written by a format version this build cannot read: a
    /// later one, or version 2 (encryption per group, replaced by version 3
    /// before any release).
    #[error("{path} has format version {found}; this build reads version 1 and the encrypted version {supported}")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in its header.
        found: u32,
        /// The encrypted version this build reads (it reads 1 in clear).
        supported: u32,
    },

    /// One of the log's files is missing or has the wrong size.
    #[error("log file {path} is missing or damaged: {reason}")]
    MissingFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// Data the log had made durable is damaged: the log cannot be recovered
    /// without losing acknowledged groups, so it is not opened.
    #[error("corrupt log: {reason} in {path} at offset {offset} (LSN {lsn})")]
    Corruption {
        /// The file holding the damaged block.
        path: PathBuf,
        /// Its byte offset in the file.
        offset: u64,
        /// The LSN of the damaged position.
        lsn: Lsn,
        /// What is damaged.
        reason: String,
    },

    /// A group is larger than the log accepts.
    #[error("group of {bytes} bytes is too large: {limit_name} is {limit} bytes")]
    GroupTooLarge {
        /// The encoded size of the group.
        bytes: u64,
        /// The limit it exceeds.
        limit: u64,
        /// Which limit: `Config::group_bytes_max`, the format's group length,
        /// or the largest group the log's files hold.
        limit_name: &'static str,
    },

    /// An LSN passed to `wait` or `checkpoint` lies beyond the end of the log.
    #[error("LSN {lsn} is beyond the end of the log ({end})")]
    LsnOutOfRange {
        /// The LSN passed.
        lsn: Lsn,
        /// The end of what was appended so far.
        end: Lsn,
    },

    /// An LSN passed to `checkpoint` does not name a position between groups
    /// (it points into a block header or trailer).
    #[error("LSN {lsn} is not a position in the log: {reason}")]
    InvalidLsn {
        /// The LSN passed.
        lsn: Lsn,
        /// Why it is not valid.
        reason: &'static str,
    },

    /// A reader's position lies in log space a checkpoint let the log write
    /// over: the groups there are gone ([DESIGN INV-25](crate::docs::design#2-invariants)). Read from
    /// `oldest` or later.
    #[error("LSN {lsn} can no longer be read: a checkpoint let the log reuse its space; the oldest readable LSN is {oldest}")]
    Reused {
        /// The position asked for.
        lsn: Lsn,
        /// The oldest position the log keeps (the last checkpoint, or an
        /// older consumer's): every group from it on can be read.
        oldest: Lsn,
    },

    /// A consumer name is not 1 to 16 bytes of UTF-8 without NUL.
    #[error("{name:?} cannot name a consumer: {reason}")]
    InvalidConsumerName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// `Log::create_consumer` with a name the log already keeps.
    #[error("the log already keeps a consumer named {name:?}")]
    ConsumerExists {
        /// The name.
        name: String,
    },

    /// The log keeps as many consumers as its checkpoint slot holds.
    #[error("the log keeps {limit} consumers already, the most its checkpoint slot holds; drop one first")]
    TooManyConsumers {
        /// The most consumers a log keeps.
        limit: usize,
    },

    /// No consumer of that name: never created, or dropped (an operator's
    /// `Log::drop_consumer` cuts an attached consumer off this way).
    #[error("the log keeps no consumer named {name:?} (never created, or dropped)")]
    UnknownConsumer {
        /// The name.
        name: String,
    },

    /// An archive directory others may read, or that is not a directory.
    #[error("archive {path} is unsafe: {reason}")]
    UnsafeArchive {
        /// The archive directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A directory holds files that are not a redolog archive.
    #[error("{path} is not a redolog archive: {reason}")]
    NotAnArchive {
        /// The directory or file.
        path: PathBuf,
        /// What was found.
        reason: String,
    },

    /// The archive cannot continue: it ends before the oldest group the log
    /// still keeps, so groups in between are in neither.
    #[error("archive {path} ends at LSN {archived_end} but the log keeps groups only from {oldest}: start a new archive (and a new base backup)")]
    ArchiveGap {
        /// The archive directory.
        path: PathBuf,
        /// Where the archive ends.
        archived_end: Lsn,
        /// The oldest position the log keeps.
        oldest: Lsn,
    },

    /// The archiver stopped on an I/O failure: nothing after `archived_lsn`
    /// was archived, and its consumer keeps holding the log.
    #[error("archiver failed: {op} failed on {path}: {source}")]
    ArchiverFailed {
        /// The operation that failed.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: Arc<io::Error>,
    },

    /// The archiver archives logs in clear only (the archive would hold an
    /// encrypted log's records in clear).
    #[error("{path}: archiving an encrypted log is not supported (the archive would hold its records in clear)")]
    EncryptedArchive {
        /// The archive directory.
        path: PathBuf,
    },

    /// Another handle of the consumer is alive in this process.
    #[error("consumer {name:?} is attached already; one handle per consumer at a time")]
    ConsumerBusy {
        /// The name.
        name: String,
    },

    /// `Log::create_after` found a log (or the leftovers of one) in the
    /// directory. Nothing was changed.
    #[error("{dir} holds a log already")]
    LogExists {
        /// The log directory.
        dir: PathBuf,
    },

    /// `Log::resize` was called while another resize of the log runs
    /// ([DESIGN §1.18](crate::docs::design#118-online-resize)). Nothing changed.
    #[error("{dir}: a resize of this log is already running")]
    ResizeBusy {
        /// The log directory.
        dir: PathBuf,
    },

    /// A `Config` field is out of its range; nothing was created or opened.
    #[error("invalid configuration: {field} = {value}: allowed {allowed}")]
    InvalidConfig {
        /// The field, as `Config::<name>`.
        field: &'static str,
        /// The value given.
        value: String,
        /// The allowed values.
        allowed: String,
    },

    /// Another `Log` — in another process, or in this one — owns the directory
    /// ([DESIGN INV-19](crate::docs::design#2-invariants)). Nothing was read or changed.
    ///
    /// The lock is `flock(2)` on `redo.lock`, which belongs to the open file:
    /// a child process forked while a log was open holds a copy until it
    /// execs. An application that spawns processes while it closes and reopens
    /// a log can see this error naming its own `pid` for that moment; retrying
    /// after a few milliseconds is right then, and only then.
    #[error("{dir} is in use by another log{}", pid.map_or(String::new(), |pid| format!(" (process {pid})")))]
    Locked {
        /// The log directory.
        dir: PathBuf,
        /// The holder's process id, if it could be read.
        pid: Option<u32>,
    },

    /// The log directory or a log file is writable by users other than its
    /// owner ([DESIGN INV-20](crate::docs::design#2-invariants), PostgreSQL's rule for its data directory):
    /// anyone who can write there can change what recovery replays.
    #[error("{path} is writable by others (mode {mode:04o}): allow only its owner (and group read) to change it")]
    UnsafePermissions {
        /// The directory or file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },

    /// An encrypted log's group, or its new groups, need a key the
    /// [`KeyProvider`](crate::encryption::KeyProvider) does not have. Nothing
    /// of that group was returned.
    #[error("the key provider has no key with id {key_id}, needed {needed}")]
    MissingKey {
        /// The key id the log names.
        key_id: u32,
        /// What needed it.
        needed: String,
    },

    /// The key the provider gave for `key_id` is not the one the log recorded
    /// under that id (its key check differs, [FORMAT §3](crate::docs::format#3-checkpoint-slot-offsets-4096-and-8192-of-redo0000-512-bytes-each)).
    #[error("the key with id {key_id} is not the one the log was written with, needed {needed}")]
    WrongKey {
        /// The key id.
        key_id: u32,
        /// What needed it.
        needed: String,
    },

    /// The log is encrypted, and no `Config::encryption` (or key for the
    /// tool) was given.
    #[error("{path} is an encrypted log: give its keys (Config::encryption, or --key-file)")]
    KeyRequired {
        /// The log directory.
        path: PathBuf,
    },

    /// The log needs the block cipher — `Config::encryption` is set, or an
    /// encrypted log was given its keys — and this build of redolog has none:
    /// its cargo feature `encryption` is off.
    #[error(
        "this log needs encryption at rest, and redolog was built without it: enable its cargo feature `encryption` (redolog = {{ version = \"0.1\", features = [\"encryption\"] }})"
    )]
    EncryptionNotBuilt,

    /// `Config::encryption` was given for a log created without it: an
    /// existing log cannot start encrypting (its groups are in clear).
    #[error("{path} is not an encrypted log: it was created without Config::encryption")]
    NotEncrypted {
        /// The log directory.
        path: PathBuf,
    },

    /// A key file that is not a regular file of this user's that nobody else
    /// may read or write.
    #[error("key file {path} is unsafe: {reason}")]
    UnsafeKeyFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// Keys that cannot be read.
    #[error("cannot read keys from {origin}: {reason}")]
    InvalidKeys {
        /// The file or environment variable.
        origin: String,
        /// Why.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io { op, path: path.into(), source }
    }
}

/// An I/O failure with the file it happened on.
#[derive(Debug)]
pub(crate) struct IoFailure {
    pub(crate) op: &'static str,
    pub(crate) path: PathBuf,
    pub(crate) source: io::Error,
}
