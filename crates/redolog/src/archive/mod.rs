//! Continuous archiving: a thread in the process that holds the log copies
//! every durable group into an archive directory, in segments with checksums
//! named by LSN, and keeps the log's space through a consumer until the copy
//! is synced (docs/DESIGN.md §1.17, FORMAT.md §9).

mod segment;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use segment::{encode_entry_header, encode_header, segment_name, ENTRY_HEADER_BYTES, HEADER_BYTES};
pub use segment::{Archive, ArchiveReader, ArchiveSummary};

use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::log::Log;
use crate::lsn::Lsn;
use crate::recovery::Group;

/// The consumer an archiver keeps its place in the log with.
pub const CONSUMER_NAME: &str = "archiver";

/// A segment is closed, and the next one begun, once it holds this much
/// (PostgreSQL's WAL segment size): [`Archiver::start`]'s choice.
pub const SEGMENT_BYTES: u64 = 16 << 20;

/// The most an archiver writes before it syncs: a batch's bound. A crash
/// leaves at most one batch unsynced, so a damaged entry further than this
/// (and a group) from the end of the last segment is damage, not a torn tail.
const BATCH_BYTES: u64 = 1 << 20;

/// How long the archiver waits for a group before it looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Copies every durable group of a log into an archive directory, from the
/// thread it starts, and keeps the log's space until the copy is synced
/// (docs/DESIGN.md §1.17).
///
/// Asynchronous by default: commits go on while the archiver follows. A
/// commit that must also be archived before it is acknowledged (PostgreSQL's
/// `pg_receivewal --synchronous`) waits with [`Archiver::wait`] after the
/// log's own wait. Either way the archiver syncs each batch it writes and
/// then wakes its waiters, so under load one archive fsync covers many
/// commits.
///
/// The archiver resumes where its archive ends: stop it, restart the process,
/// start it on the same directory, and it continues with the next group (the
/// consumer [`CONSUMER_NAME`] kept the log from reusing it meanwhile).
///
/// ```
/// use std::sync::Arc;
/// use redolog::archive::Archiver;
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config { capacity_bytes: 1 << 20, ..Config::default() };
/// let log = Arc::new(Log::open(dir.path().join("redo"), config).unwrap().0);
/// let archiver = Archiver::start(&log, dir.path().join("archive")).unwrap();
/// let end = log.commit(b"page 7: set x", Durability::Synced).unwrap();
/// archiver.wait(end).unwrap(); // synchronous: archived and synced too
/// assert!(archiver.archived_lsn() >= end);
/// log.close().unwrap();
/// assert_eq!(archiver.stop().unwrap(), end);
/// ```
pub struct Archiver {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What the archiver thread and its handle share.
struct Shared {
    dir: PathBuf,
    state: Mutex<State>,
    moved: Condvar,
    stop: AtomicBool,
}

struct State {
    /// Every group ending at or before this is archived and synced.
    archived: Lsn,
    /// The first failure, after which the archiver archives nothing more.
    failure: Option<Error>,
    /// The thread has ended.
    stopped: bool,
}

impl Archiver {
    /// Starts archiving `log` into `dir`, created with mode 0700 if it does
    /// not exist; an existing directory must not be readable by others
    /// (`UnsafeArchive`). A new archive starts at the archiver's consumer: the
    /// last checkpoint when it is created. An existing one continues from its
    /// end, after truncating a torn last entry; if the log no longer keeps the
    /// groups after that end, `ArchiveGap`. `EncryptedArchive` for an
    /// encrypted log.
    pub fn start(log: &Arc<Log>, dir: impl AsRef<Path>) -> Result<Archiver> {
        Self::start_with_segments(log, dir, SEGMENT_BYTES)
    }

    /// [`Archiver::start`] with segments closed once they hold
    /// `segment_bytes` (at least 4096) instead of [`SEGMENT_BYTES`]: smaller
    /// segments ship and expire sooner, larger ones make fewer files.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use redolog::archive::{Archive, Archiver};
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let log = Arc::new(Log::open(dir.path().join("redo"), Config { capacity_bytes: 1 << 20, ..Config::default() }).unwrap().0);
    /// let archiver = Archiver::start_with_segments(&log, dir.path().join("archive"), 4096).unwrap();
    /// for _ in 0..20 {
    ///     log.commit(&[7u8; 1000], Durability::Synced).unwrap();
    /// }
    /// log.close().unwrap();
    /// archiver.stop().unwrap();
    /// assert!(Archive::open(dir.path().join("archive")).unwrap().segment_count() >= 4);
    /// ```
    pub fn start_with_segments(log: &Arc<Log>, dir: impl AsRef<Path>, segment_bytes: u64) -> Result<Archiver> {
        let dir = dir.as_ref().to_path_buf();
        if segment_bytes < 4096 {
            let value = segment_bytes.to_string();
            return Err(Error::InvalidConfig { field: "segment_bytes", value, allowed: "4096 or more".into() });
        }
        if log.core().config.encryption.is_some() {
            return Err(Error::EncryptedArchive { path: dir });
        }
        prepare_dir(&dir)?;
        let consumer = match log.consumer(CONSUMER_NAME) {
            Err(Error::UnknownConsumer { .. }) => log.create_consumer(CONSUMER_NAME)?,
            other => other?,
        };
        let log_id = log.core().checkpoints.log_id();
        let segment = SegmentWriter::resume(&dir, log_id, &consumer, log.durable_lsn())?;
        let shared = Arc::new(Shared {
            dir,
            state: Mutex::new(State { archived: segment.end, failure: None, stopped: false }),
            moved: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let advance_every = (log.core().layout.group_bytes_max() / 8).max(1);
        let worker = Worker {
            log: Arc::downgrade(log),
            shared: shared.clone(),
            consumer,
            segment,
            advance_every,
            segment_bytes,
        };
        let thread = std::thread::Builder::new()
            .name("redolog-archiver".into())
            .spawn(move || worker.run())
            .map_err(|source| Error::io("spawn the archiver thread", &shared.dir, source))?;
        Ok(Archiver { shared, thread: Some(thread) })
    }

    /// Every group ending at or before this LSN is archived and synced.
    pub fn archived_lsn(&self) -> Lsn {
        self.shared.state.lock().archived
    }

    /// Waits until every group ending at or before `lsn` is archived and
    /// synced: a synchronous archive's acknowledgement. Wait for the log's
    /// own durability first (`Log::commit` with `Synced`): the archiver copies
    /// durable groups only. `ArchiverFailed` if the archiver failed, `Closed`
    /// if it stopped (its log closed) before reaching `lsn`.
    pub fn wait(&self, lsn: Lsn) -> Result<()> {
        let mut state = self.shared.state.lock();
        loop {
            if state.archived >= lsn {
                return Ok(());
            }
            if let Some(failure) = &state.failure {
                return Err(failure.clone_failure());
            }
            if state.stopped {
                return Err(Error::Closed);
            }
            self.shared.moved.wait(&mut state);
        }
    }

    /// Stops the archiver once it has synced what it wrote; returns where the
    /// archive ends, or its failure. Close the log first to archive
    /// everything it made durable: the archiver then copies up to its end.
    pub fn stop(mut self) -> Result<Lsn> {
        self.halt();
        let state = self.shared.state.lock();
        match &state.failure {
            Some(failure) => Err(failure.clone_failure()),
            None => Ok(state.archived),
        }
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            // A panic in the thread left its state marked; nothing to add.
            let _ = thread.join();
        }
    }
}

impl Drop for Archiver {
    fn drop(&mut self) {
        self.halt();
    }
}

impl std::fmt::Debug for Archiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archiver")
            .field("dir", &self.shared.dir)
            .field("archived", &self.archived_lsn())
            .finish_non_exhaustive()
    }
}

impl Error {
    /// A copy of an archiver's failure for each waiter.
    fn clone_failure(&self) -> Error {
        match self {
            Error::ArchiverFailed { op, path, source } => {
                Error::ArchiverFailed { op, path: path.clone(), source: source.clone() }
            }
            other => Error::ArchiverFailed {
                op: "archive",
                path: PathBuf::new(),
                source: Arc::new(std::io::Error::other(other.to_string())),
            },
        }
    }
}

/// Creates `dir` with mode 0700, or checks that an existing one is a
/// directory nobody else may read, write or enter.
fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(source) => return Err(Error::io("create", dir, source)),
    }
    let metadata = std::fs::symlink_metadata(dir).map_err(|source| Error::io("stat", dir, source))?;
    if !metadata.is_dir() {
        return Err(Error::UnsafeArchive { path: dir.into(), reason: "it is not a directory".into() });
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o077 != 0 {
        let reason = format!("mode {mode:04o} lets others in: the archive holds every change to the data (chmod 700)");
        return Err(Error::UnsafeArchive { path: dir.into(), reason });
    }
    Ok(())
}

/// Whether a damaged entry at `offset` of the last segment, `len` bytes
/// long, can be what a crash tore: the archiver keeps its unsynced bytes
/// within `BATCH_BYTES`, or one entry, so the damage lies within
/// `BATCH_BYTES` of the end or is the one entry that runs past it.
fn could_be_torn(path: &Path, offset: u64, len: u64) -> bool {
    if len - offset <= BATCH_BYTES {
        return true;
    }
    let mut header = [0u8; ENTRY_HEADER_BYTES];
    let read = File::open(path).and_then(|file| std::os::unix::fs::FileExt::read_exact_at(&file, &mut header, offset));
    let body_len = u64::from(u32::from_le_bytes([header[20], header[21], header[22], header[23]]));
    read.is_ok() && offset + ENTRY_HEADER_BYTES as u64 + body_len > len
}

/// The segment the archiver appends to.
struct SegmentWriter {
    dir: PathBuf,
    log_id: u128,
    file: File,
    path: PathBuf,
    /// The segment's size.
    bytes: u64,
    /// The end of the last group written.
    end: Lsn,
    /// Bytes written since the last sync.
    unsynced: u64,
}

impl SegmentWriter {
    /// Opens the archive's last segment at its last whole group, or begins
    /// the archive at the consumer's position.
    /// A damaged last entry is cut off as a torn tail only within what one
    /// unsynced batch could leave (`could_be_torn`); further from the end it
    /// is `Corruption`.
    fn resume(dir: &Path, log_id: u128, consumer: &Consumer, durable: Lsn) -> Result<SegmentWriter> {
        let archive = match Archive::open(dir) {
            Err(Error::NotAnArchive { path, .. }) if path == dir => None,
            other => Some(other?),
        };
        let Some(archive) = archive else {
            return Self::create(dir, log_id, consumer.lsn());
        };
        if archive.log_id() != log_id {
            let path = archive.segments()[0].path.clone();
            return Err(Error::ForeignFile { path, expected: log_id, found: archive.log_id() });
        }
        let summary = archive.verify()?;
        let last = archive.segments().last().map(|segment| segment.path.clone()).unwrap_or_default();
        let file = OpenOptions::new().append(true).open(&last).map_err(|source| Error::io("open", &last, source))?;
        let len = file.metadata().map_err(|source| Error::io("stat", &last, source))?.len();
        if let Some((path, offset)) = &summary.torn_tail {
            if !could_be_torn(path, *offset, len) {
                let reason = format!(
                    "a damaged entry {} bytes before the end of the last segment: more than a crash leaves unsynced",
                    len - offset
                );
                return Err(Error::Corruption { path: path.clone(), offset: *offset, lsn: summary.end, reason });
            }
        }
        if summary.end < consumer.lsn() {
            return Err(Error::ArchiveGap { path: dir.into(), archived_end: summary.end, oldest: consumer.lsn() });
        }
        if summary.end > durable {
            let reason = format!(
                "it ends at LSN {}, past the log's durable end {durable}: it copies another history of the log",
                summary.end
            );
            return Err(Error::NotAnArchive { path: dir.into(), reason });
        }
        let bytes = match summary.torn_tail {
            Some((_, offset)) => {
                // A crash of the archiver cut its last entry: cut it off.
                file.set_len(offset).map_err(|source| Error::io("truncate", &last, source))?;
                file.sync_data().map_err(|source| Error::io("fdatasync", &last, source))?;
                offset
            }
            None => len,
        };
        Ok(SegmentWriter { dir: dir.into(), log_id, file, path: last, bytes, end: summary.end, unsynced: 0 })
    }

    /// A new, synced, empty segment whose first group starts at `start`.
    fn create(dir: &Path, log_id: u128, start: Lsn) -> Result<SegmentWriter> {
        let path = dir.join(segment_name(start));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| Error::io("create", &path, source))?;
        file.write_all(&encode_header(log_id, start)).map_err(|source| Error::io("write", &path, source))?;
        file.sync_data().map_err(|source| Error::io("fdatasync", &path, source))?;
        File::open(dir).and_then(|dir| dir.sync_all()).map_err(|source| Error::io("fsync", dir, source))?;
        Ok(SegmentWriter { dir: dir.into(), log_id, file, path, bytes: HEADER_BYTES as u64, end: start, unsynced: 0 })
    }

    fn append(&mut self, group: &Group) -> std::result::Result<(), (&'static str, PathBuf, std::io::Error)> {
        let header = encode_entry_header(group);
        let body = group.body();
        let mut pieces = [std::io::IoSlice::new(&header), std::io::IoSlice::new(body)];
        let mut pieces = &mut pieces[..];
        let mut left = ENTRY_HEADER_BYTES + body.len();
        // std's write_all_vectored is unstable: loop over write_vectored.
        while left > 0 {
            let written = self.file.write_vectored(pieces).map_err(|error| ("write", self.path.clone(), error))?;
            if written == 0 {
                return Err(("write", self.path.clone(), std::io::ErrorKind::WriteZero.into()));
            }
            left -= written;
            std::io::IoSlice::advance_slices(&mut pieces, written);
        }
        let bytes = (ENTRY_HEADER_BYTES + body.len()) as u64;
        self.bytes += bytes;
        self.unsynced += bytes;
        self.end = group.end_lsn();
        Ok(())
    }

    fn sync(&mut self) -> std::result::Result<(), (&'static str, PathBuf, std::io::Error)> {
        self.file.sync_data().map_err(|error| ("fdatasync", self.path.clone(), error))?;
        self.unsynced = 0;
        Ok(())
    }

    /// Begins the next segment once this one is full; the caller synced it.
    fn roll_if_full(&mut self, segment_bytes: u64) -> Result<()> {
        if self.bytes >= segment_bytes {
            *self = Self::create(&self.dir, self.log_id, self.end)?;
        }
        Ok(())
    }
}

/// The archiver thread's state.
struct Worker {
    /// Weak: dropping the last handle of the log closes it even while the
    /// archiver runs; the archiver then stops where it is.
    log: Weak<Log>,
    shared: Arc<Shared>,
    consumer: Consumer,
    segment: SegmentWriter,
    /// Advance the consumer once the archive is this far past it (an eighth
    /// of the log), or every second.
    advance_every: u64,
    /// Close a segment once it holds this much.
    segment_bytes: u64,
}

impl Worker {
    fn run(mut self) {
        let outcome = self.archive();
        let mut state = self.shared.state.lock();
        if let Err(error) = outcome {
            state.failure = Some(error.clone_failure());
        }
        state.stopped = true;
        self.shared.moved.notify_all();
    }

    fn archive(&mut self) -> Result<()> {
        let mut advanced_at = Instant::now();
        loop {
            // Asked to stop: copy what is durable now, without waiting, then stop.
            let stopping = self.shared.stop.load(Ordering::SeqCst);
            let Some(log) = self.log.upgrade() else { return Ok(()) };
            let (closed, copied) = self.batch(&log, if stopping { Duration::ZERO } else { POLL })?;
            drop(log);
            let done = closed || (stopping && copied == 0);
            let behind = self.segment.end.0.saturating_sub(self.consumer.lsn().0);
            if behind > 0 && (done || behind >= self.advance_every || advanced_at.elapsed() >= Duration::from_secs(1)) {
                match self.consumer.advance(self.segment.end) {
                    // After the log closed, the consumer stays where it was:
                    // the next start resumes at the archive's end anyway.
                    Ok(()) | Err(Error::Closed) => {}
                    Err(error) => return Err(error),
                }
                advanced_at = Instant::now();
            }
            self.segment.roll_if_full(self.segment_bytes)?;
            if done {
                return Ok(());
            }
        }
    }

    /// Copies what is durable, waiting up to `timeout` for the first group,
    /// syncs it and wakes the waiters. Returns whether the log has closed and
    /// everything it made durable is archived, and how many groups it copied.
    fn batch(&mut self, log: &Log, timeout: Duration) -> Result<(bool, usize)> {
        let mut reader = log.read_from(self.segment.end)?;
        let mut timeout = timeout;
        let mut closed = false;
        let mut copied = 0;
        let failed = |(op, path, source): (&'static str, PathBuf, std::io::Error)| Error::ArchiverFailed {
            op,
            path,
            source: Arc::new(source),
        };
        loop {
            match reader.next_timeout(timeout) {
                Ok(Some(group)) => {
                    // Unsynced bytes stay within BATCH_BYTES, or one entry:
                    // what a crash can tear (SegmentWriter::resume).
                    let entry = (ENTRY_HEADER_BYTES + group.body().len()) as u64;
                    if self.segment.unsynced > 0 && self.segment.unsynced + entry > BATCH_BYTES {
                        self.publish_synced().map_err(failed)?;
                    }
                    self.segment.append(&group).map_err(failed)?;
                    copied += 1;
                    timeout = Duration::ZERO;
                }
                Ok(None) => break,
                Err(Error::Closed) => {
                    closed = true;
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        if self.segment.unsynced > 0 {
            self.publish_synced().map_err(failed)?;
        }
        Ok((closed, copied))
    }

    /// Syncs the segment and wakes the waiters it covers.
    fn publish_synced(&mut self) -> std::result::Result<(), (&'static str, PathBuf, std::io::Error)> {
        self.segment.sync()?;
        let mut state = self.shared.state.lock();
        state.archived = self.segment.end;
        self.shared.moved.notify_all();
        Ok(())
    }
}
