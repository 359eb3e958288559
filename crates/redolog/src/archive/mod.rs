//! Continuous archiving: a thread in the process that holds the log copies
//! every group the log writes into an archive directory, in segments with
//! checksums named by LSN, and keeps the log's space through a consumer until
//! the copy is synced ([DESIGN §1.17](crate::docs::design#117-continuous-archiving), [FORMAT §9](crate::docs::format#9-archive-directory-redologarchive)).

mod ack;
mod segment;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use ack::{Acks, Outcome};
use segment::{
    encode_entry_header, encode_header, encode_torn_span, segment_name, BATCH_BYTES, ENTRY_HEADER_BYTES, HEADER_BYTES,
};
pub use segment::{Archive, ArchiveReader, ArchiveSummary};

use crate::config::Durability;
use crate::consumer::Consumer;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::failpoint::failpoint;
use crate::live::LogReader;
use crate::log::Log;
use crate::lsn::Lsn;
use crate::recovery::Group;
use crate::storage::{Storage, StorageFile};

/// The consumer an archiver keeps its place in the log with.
pub const CONSUMER_NAME: &str = "archiver";

/// A segment is closed, and the next one begun, once it holds this much
/// (PostgreSQL's WAL segment size): [`Archiver::start`]'s choice.
pub const SEGMENT_BYTES: u64 = 16 << 20;

/// With nobody waiting in [`Archiver::wait`], how long the archiver gathers
/// groups before it writes and syncs them, and how long it sleeps when the
/// log has written nothing new: one batch and one fsync per 10 ms instead of
/// one per log sync (the cost of an asynchronous archive at 64 committers on
/// `sim:100us`: docs/BENCHMARKS.md). A waiter ends either at once.
const LINGER: Duration = Duration::from_millis(10);

/// Copies every group a log writes into an archive directory, from the
/// thread it starts, syncing its copy while the log syncs its own, and keeps
/// the log's space until the copy is synced ([DESIGN §1.17](crate::docs::design#117-continuous-archiving)).
///
/// Asynchronous by default: commits go on while the archiver follows (within
/// 10 ms). A commit that must also be archived before it is acknowledged
/// (PostgreSQL's `pg_receivewal --synchronous`) waits with
/// [`Archiver::wait`] instead of the log's `Synced` wait; one archive sync
/// covers every commit waiting then.
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
/// let config = Config::default().with_capacity_bytes(1 << 20);
/// let log = Arc::new(Log::open(dir.path().join("redo"), config).unwrap().0);
/// let archiver = Archiver::start(&log, dir.path().join("archive")).unwrap();
/// let end = log.append(b"page 7: set x").unwrap();
/// archiver.wait(end).unwrap(); // synchronous: synced in the log and the archive
/// assert!(archiver.archived_lsn() >= end && log.durable_lsn() >= end);
/// log.close().unwrap();
/// assert_eq!(archiver.stop().unwrap(), end);
/// ```
pub struct Archiver {
    shared: Arc<Shared>,
    /// The log's owners, for the log's half of `wait` (not the `Log`: the
    /// archiver must not keep it open).
    core: Arc<Core>,
    thread: Option<JoinHandle<()>>,
}

/// What the archiver thread and its handle share.
struct Shared {
    dir: PathBuf,
    /// Where the archive is synced, where the log is, the commits waiting
    /// for both (INV-36). While a commit waits, a batch is written as soon
    /// as the log has nothing more written (`LINGER`).
    acks: Acks,
    /// The archiver sleeps in `idle`: a waiter that registers wakes it.
    idle: AtomicBool,
    state: Mutex<State>,
    /// The archiver, gathering a batch, waits here for a waiter to arrive.
    waiter_arrived: Condvar,
    stop: AtomicBool,
}

struct State {
    /// The first failure, after which the archiver archives nothing more.
    failure: Option<Error>,
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
    /// # let log = Arc::new(Log::open(dir.path().join("redo"), Config::default().with_capacity_bytes(1 << 20)).unwrap().0);
    /// let archiver = Archiver::start_with_segments(&log, dir.path().join("archive"), 4096).unwrap();
    /// for _ in 0..20 {
    ///     let end = log.append(&[7u8; 1000]).unwrap();
    ///     archiver.wait(end).unwrap(); // one batch each: a segment every ~4
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
        // The archive lives where the log does: the file system, or a
        // test's storage (a crash image then holds both, consistent).
        let storage = log.storage().clone();
        prepare_dir(&*storage, &dir)?;
        let consumer = match log.consumer(CONSUMER_NAME) {
            Err(Error::UnknownConsumer { .. }) => log.create_consumer(CONSUMER_NAME)?,
            other => other?,
        };
        let segment = SegmentWriter::resume((&dir, &storage), log, &consumer)?;
        let shared = Arc::new(Shared {
            dir,
            acks: Acks::new(segment.end.as_u64(), 64),
            idle: AtomicBool::new(false),
            state: Mutex::new(State { failure: None }),
            waiter_arrived: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let advance_every = (log.core().files().group_bytes_max() / 8).max(1);
        // The consumer moves lazily, so after a crash the archive may already
        // hold groups past it: the consumer may move to the archive's end (a
        // group end, synced by `resume`) once the log has it durable, with
        // nothing new copied — the next group may wait for that very space.
        let ends = std::iter::once(segment.end).filter(|end| *end > consumer.lsn()).collect();
        let worker = Worker {
            log: Some(log.clone()),
            shared: shared.clone(),
            consumer,
            segment,
            advance_every,
            segment_bytes,
            ends,
            asked_log: Lsn(0),
        };
        let thread = std::thread::Builder::new()
            .name("redolog-archiver".into())
            .spawn(move || worker.run())
            .map_err(|source| Error::io("spawn the archiver thread", &shared.dir, source))?;
        Ok(Archiver { shared, core: log.core_arc(), thread: Some(thread) })
    }

    /// The archive directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Every group ending at or before this LSN is archived and synced.
    pub fn archived_lsn(&self) -> Lsn {
        Lsn(self.shared.acks.archived())
    }

    /// `Ok` while the archiver runs (or stopped cleanly); its failure once it
    /// stopped on one (`ArchiverFailed`). A failed archiver's consumer keeps
    /// holding the log, so nothing is lost from the archive's continuity:
    /// start the archiver again (it resumes at the archive's end) or, to
    /// give the archive up, drop the consumer
    /// ([`CONSUMER_NAME`]). A health check that never waits.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use redolog::archive::Archiver;
    /// # use redolog::{Config, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let log = Arc::new(Log::open(dir.path().join("redo"), Config::default()).unwrap().0);
    /// let archiver = Archiver::start(&log, dir.path().join("archive")).unwrap();
    /// assert!(archiver.check().is_ok());
    /// ```
    pub fn check(&self) -> Result<()> {
        match &self.shared.state.lock().failure {
            Some(failure) => Err(failure.clone_failure()),
            None => Ok(()),
        }
    }

    /// Waits until every group ending at or before `lsn` is synced in the log
    /// and in the archive: a synchronous archive's acknowledgement, in place
    /// of the log's own `Synced` wait (`log.append`, then `archiver.wait`).
    /// The archiver, told of the waiter, copies the groups as the log writes
    /// them and syncs its copy meanwhile. A commit alone waits for the log
    /// itself, then for the archive; among others it parks once and is woken
    /// by whichever of the two syncs ends last, the archiver asking the log
    /// for it (`on_durable`; [DESIGN §1.17](crate::docs::design#117-continuous-archiving), INV-36).
    /// `ArchiverFailed` if the archiver failed, `Closed` if it stopped before
    /// reaching `lsn`, and the log's own errors. A wait on an archiver that
    /// failed already returns its failure at once, without waiting for the
    /// log (which may be full, held by a consumer).
    pub fn wait(&self, lsn: Lsn) -> Result<()> {
        let shared = &self.shared;
        if shared.acks.acknowledged(lsn.as_u64()) {
            return Ok(());
        }
        // The archive will never hold `lsn`: say so now (the simulation, seed
        // 1827: a wait on a failed archiver sat behind a full log).
        self.check()?;
        // The archiver writes a batch it gathers for later now, and asks the
        // log for what is appended (LINGER).
        let alone = shared.acks.arrive();
        if alone || shared.idle.load(Ordering::SeqCst) {
            let _state = shared.state.lock();
            shared.waiter_arrived.notify_one();
        }
        let outcome = if alone { self.wait_log_then_archive(lsn) } else { self.wait_parked(lsn) };
        shared.acks.leave();
        outcome
    }

    /// Alone, or parked without the acknowledgement (`Outcome::AskTheLog`,
    /// `Outcome::Settle`): waits for the log itself (alone, it leads
    /// its group commit, with no hand-off to the log threads), publishes
    /// what it synced, then waits for the archive, which has been copying
    /// and syncing meanwhile; or says why the archive will never hold `lsn`.
    fn wait_log_then_archive(&self, lsn: Lsn) -> Result<()> {
        self.core.wait_durable(lsn, Durability::Synced)?;
        self.shared.acks.log_synced(lsn.as_u64());
        if self.shared.acks.wait_archived(lsn.as_u64()) {
            return Ok(());
        }
        match &self.shared.state.lock().failure {
            Some(failure) => Err(failure.clone_failure()),
            None => Err(Error::Closed),
        }
    }

    /// Alongside others: parks once, until both syncs cover `lsn` (INV-36).
    fn wait_parked(&self, lsn: Lsn) -> Result<()> {
        match self.shared.acks.park(lsn.as_u64()) {
            Outcome::Acknowledged => Ok(()),
            // Archived already (the archiver may not have asked the log),
            // or the archiver ended or the log failed.
            Outcome::AskTheLog | Outcome::Settle => self.wait_log_then_archive(lsn),
        }
    }

    /// Stops the archiver once it has copied and synced what the log has
    /// written; returns where the archive ends, or its failure. Close the log
    /// first to archive everything: the archiver then copies up to its end.
    pub fn stop(mut self) -> Result<Lsn> {
        self.halt();
        match &self.shared.state.lock().failure {
            Some(failure) => Err(failure.clone_failure()),
            None => Ok(self.archived_lsn()),
        }
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _state = self.shared.state.lock();
            self.shared.waiter_arrived.notify_one();
        }
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
fn prepare_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    match storage.list_dir(dir) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            storage.create_dir_all(dir).map_err(|source| Error::io("create", dir, source))?;
            storage.set_permissions(dir, 0o700).map_err(|source| Error::io("chmod", dir, source))?;
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::UnsafeArchive { path: dir.into(), reason: "it is not a directory".into() });
        }
        Err(source) => return Err(Error::io("list", dir, source)),
    }
    let mode = storage.permissions(dir).map_err(|source| match source.raw_os_error() {
        Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => {
            Error::UnsafeArchive { path: dir.into(), reason: "it is not a directory".into() }
        }
        _ => Error::io("stat", dir, source),
    })?;
    if let Some(mode) = mode.filter(|mode| mode & 0o077 != 0) {
        let reason = format!("mode {mode:04o} lets others in: the archive holds every change to the data (chmod 700)");
        return Err(Error::UnsafeArchive { path: dir.into(), reason });
    }
    Ok(())
}

/// The segment the archiver appends to.
struct SegmentWriter {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    log_id: u128,
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    /// The segment's size, with the batch not yet written.
    bytes: u64,
    /// The end of the last group written.
    end: Lsn,
    /// Entries not yet written: the batch, written and synced together.
    pending: Vec<u8>,
    /// Bytes appended since the last sync.
    unsynced: u64,
}

impl SegmentWriter {
    /// Opens the archive's last segment at its last whole group, or begins
    /// the archive at the consumer's position.
    /// A damaged last entry is cut off as a torn tail only within what one
    /// unsynced batch could leave (`could_be_torn`); further from the end it
    /// is `Corruption`.
    ///
    /// Where the archive and the log disagree — the archive copies what the
    /// log wrote before the log synced it, and a crash can lose that from the
    /// log, which may since have written other groups there — the archive is
    /// cut back to their last common group first, at most the log's unsynced
    /// bound back.
    fn resume((dir, storage): (&Path, &Arc<dyn Storage>), log: &Log, consumer: &Consumer) -> Result<SegmentWriter> {
        let log_id = log.core().checkpoints.log_id();
        let archive = match Archive::open_in(dir, storage.clone()) {
            Err(Error::NotAnArchive { path, .. }) if path == dir => None,
            other => Some(other?),
        };
        let Some(archive) = archive else {
            // The consumer may sit inside a group (a checkpoint there): the
            // archive starts at whole groups, at the next boundary.
            let from = consumer.lsn();
            let start =
                crate::live::next_boundary(log.core(), from, Duration::from_secs(10))?.ok_or(Error::InvalidLsn {
                    lsn: from,
                    reason: "no group ended after it within 10 s (a mini-transaction open?)",
                })?;
            return Self::create((dir, storage), log_id, start);
        };
        if archive.log_id() != log_id {
            let path = archive.segments()[0].path.clone();
            return Err(Error::ForeignFile { path, expected: log_id, found: archive.log_id() });
        }
        let summary = archive.verify()?;
        if summary.end < consumer.lsn() {
            return Err(Error::ArchiveGap { path: dir.into(), archived_end: summary.end, oldest: consumer.lsn() });
        }
        let agreed = Self::agreed_end(&archive, log, consumer.lsn(), summary.end)?;
        if agreed < summary.end {
            // What the log lost in a crash after the archive copied it (§1.17,
            // INV-33); anything further back is another history of the log.
            let unsynced_bound = log.core().unsynced_bytes_bound();
            if summary.end.0 - agreed.0 > unsynced_bound {
                let reason = format!(
                    "it ends at LSN {} but agrees with the log only up to {agreed}, further back than the log ever \
                     leaves unsynced: it copies another history of the log",
                    summary.end
                );
                return Err(Error::NotAnArchive { path: dir.into(), reason });
            }
        }
        if agreed < summary.end || summary.torn_tail.is_some() {
            // Cut back to the agreed group, and off a torn last entry (what a
            // crash of the archiver leaves), then resume from the result.
            segment::cut_after(&archive, agreed)?;
            return Self::resume((dir, storage), log, consumer);
        }
        let last = archive.segments().last().map(|segment| segment.path.clone()).unwrap_or_default();
        let file = failpoint("archive.open")
            .and_then(|()| storage.open_file(&last, false))
            .map_err(|source| Error::io("open", &last, source))?;
        let bytes = file.size().map_err(|source| Error::io("stat", &last, source))?;
        // What a killed archiver wrote may be in the page cache only: synced
        // now, before the consumer moves past it.
        failpoint("archive.sync")
            .and_then(|()| file.sync_data())
            .map_err(|source| Error::io("fdatasync", &last, source))?;
        Ok(SegmentWriter {
            dir: dir.into(),
            storage: storage.clone(),
            log_id,
            file,
            path: last,
            bytes,
            end: summary.end,
            pending: Vec::new(),
            unsynced: 0,
        })
    }

    /// The end of the archive's last group that the log holds too, byte for
    /// byte, comparing from the consumer's position (the log keeps every
    /// group from there) to the archive's `end`.
    fn agreed_end(archive: &Archive, log: &Log, from: Lsn, end: Lsn) -> Result<Lsn> {
        let from = from.max(archive.start_lsn());
        if from >= end {
            return Ok(end);
        }
        let mut theirs = log.read_from(from)?;
        let mut agreed = from;
        for ours in archive.read_from(from)? {
            let ours = ours?;
            match theirs.try_next()? {
                Some(group)
                    if (group.start_lsn(), group.end_lsn(), group.body())
                        == (ours.start_lsn(), ours.end_lsn(), ours.body()) =>
                {
                    agreed = ours.end_lsn();
                }
                _ => break,
            }
        }
        Ok(agreed)
    }

    /// A new, synced, empty segment whose first group starts at `start`.
    fn create((dir, storage): (&Path, &Arc<dyn Storage>), log_id: u128, start: Lsn) -> Result<SegmentWriter> {
        // Written whole under a temporary name, then renamed: a crash never
        // leaves a segment without its header (`Archive::open` skips and the
        // next start writes over a `.tmp`).
        let path = dir.join(segment_name(start));
        let temporary = path.with_extension("seg.tmp");
        let file = failpoint("archive.create")
            .and_then(|()| storage.open_file(&temporary, true))
            .map_err(|source| Error::io("create", &temporary, source))?;
        storage.set_permissions(&temporary, 0o600).map_err(|source| Error::io("chmod", &temporary, source))?;
        failpoint("archive.write")
            .and_then(|()| file.write_all_at(&[&encode_header(log_id, start)], 0))
            .map_err(|source| Error::io("write", &temporary, source))?;
        failpoint("archive.create")
            .and_then(|()| file.sync_data())
            .map_err(|source| Error::io("fdatasync", &temporary, source))?;
        failpoint("archive.rename")
            .and_then(|()| storage.rename(&temporary, &path))
            .map_err(|source| Error::io("rename", &temporary, source))?;
        segment::sync_dir(&**storage, dir)?;
        Ok(SegmentWriter {
            dir: dir.into(),
            storage: storage.clone(),
            log_id,
            file,
            path,
            bytes: HEADER_BYTES as u64,
            end: start,
            pending: Vec::new(),
            unsynced: 0,
        })
    }

    /// Adds `group` to the batch (written by the next `sync`).
    fn append(&mut self, group: &Group) {
        let header = encode_entry_header(group);
        self.pending.extend_from_slice(&header);
        self.pending.extend_from_slice(group.body());
        let bytes = (ENTRY_HEADER_BYTES + group.body().len()) as u64;
        self.bytes += bytes;
        self.unsynced += bytes;
        self.end = group.end_lsn();
    }

    /// Adds the entry of a span a crash tore, up to `end`, where the log
    /// went on (INV-46).
    fn append_torn_span(&mut self, end: Lsn) {
        self.pending.extend_from_slice(&encode_torn_span(self.end, end));
        self.bytes += ENTRY_HEADER_BYTES as u64;
        self.unsynced += ENTRY_HEADER_BYTES as u64;
        self.end = end;
    }

    /// Writes the batch in one call and syncs it.
    fn sync(&mut self) -> std::result::Result<(), (&'static str, PathBuf, std::io::Error)> {
        let at = self.bytes - self.pending.len() as u64;
        failpoint("archive.write")
            .and_then(|()| self.file.write_all_at(&[&self.pending], at))
            .map_err(|error| ("write", self.path.clone(), error))?;
        self.pending.clear();
        failpoint("archive.sync")
            .and_then(|()| self.file.sync_data())
            .map_err(|error| ("fdatasync", self.path.clone(), error))?;
        self.unsynced = 0;
        Ok(())
    }

    /// Begins the next segment once this one is full; the caller synced it.
    fn roll_if_full(&mut self, segment_bytes: u64) -> Result<()> {
        if self.bytes >= segment_bytes {
            *self = Self::create((&self.dir, &self.storage.clone()), self.log_id, self.end)?;
        }
        Ok(())
    }
}

/// The archiver thread's state.
struct Worker {
    /// Held from `start` on, so a log whose last other handle is dropped
    /// before the thread runs is still archived: the thread closes the log
    /// (and archives to its end) once nobody else holds it. Taken by the
    /// thread when it runs.
    log: Option<Arc<Log>>,
    shared: Arc<Shared>,
    consumer: Consumer,
    segment: SegmentWriter,
    /// Advance the consumer once the archive is this far past it (an eighth
    /// of the log), or every second.
    advance_every: u64,
    /// Close a segment once it holds this much.
    segment_bytes: u64,
    /// Ends of the groups archived since the consumer last moved (from
    /// `start`: the archive's end, if past the consumer): where it may move
    /// once the log has synced them.
    ends: std::collections::VecDeque<Lsn>,
    /// The furthest LSN the archiver asked the log to sync (`on_durable`).
    asked_log: Lsn,
}

/// Nobody but the archiver holds the log: closes it as dropping it would
/// (`close`, or a stop without waiting if the log is full behind its
/// checkpoint), so the archiver archives to its end. On a thread of its
/// own, which waits while the archiver's own consumer holds the room the
/// close needs: the archiver frees it as it goes on (the simulation, seed
/// 1832: closing on the archiver's thread, with the log full behind its
/// consumer, hung). Inline if no thread can be made.
fn close_beside(log: &Arc<Log>, shared: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    let (closer, shared) = (log.clone(), shared.clone());
    let spawned = std::thread::Builder::new().name("redolog-archive-close".into()).spawn(move || {
        while !closer.unwritten_fits()
            && closer.space().held_by.as_deref() == Some(CONSUMER_NAME)
            && shared.state.lock().failure.is_none()
            && !closer.core().stages.is_poisoned()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        closer.close_as_dropped();
    });
    match spawned {
        Ok(closer) => Some(closer),
        Err(_) => {
            log.close_as_dropped();
            None
        }
    }
}

impl Worker {
    fn run(mut self) {
        let outcome = self.archive();
        if let Err(error) = outcome {
            log::error!(
                "{}: {error}; its consumer holds the log from LSN {}: start the archiver again to resume, or drop \
                 consumer {CONSUMER_NAME:?} to give the archive up",
                self.shared.dir.display(),
                self.consumer.lsn()
            );
            self.shared.state.lock().failure = Some(error.clone_failure());
        }
        self.shared.acks.end();
    }

    fn archive(&mut self) -> Result<()> {
        let Some(log) = self.log.take() else { return Ok(()) };
        let mut reader = log.read_from(self.segment.end)?.reading_written();
        let mut advanced_at = Instant::now();
        // Once asked to stop: what the log had written then, the last stretch.
        let mut stop_at = None;
        let mut closing = None;
        loop {
            if stop_at.is_none() && self.shared.stop.load(Ordering::SeqCst) {
                stop_at = Some(log.core().stages.written());
            }
            if closing.is_none() && Arc::strong_count(&log) == 1 {
                closing = Some(close_beside(&log, &self.shared));
            }
            let (mut closed, copied) = self.batch(&log, &mut reader, stop_at)?;
            let close_running = matches!(&closing, Some(Some(closer)) if !closer.is_finished());
            if closed && close_running {
                // Closed, and still writing what was appended: it may need
                // the room this consumer holds. Archive on, then read again.
                closed = false;
                std::thread::sleep(Duration::from_millis(1));
            }
            // A stop waits for a close in flight: only this archiver can
            // free the room the close may need (seed 1832 again: `stop` right
            // after the drop joined the close, which waited for that room).
            let stopped = stop_at.is_some_and(|at| copied == 0 || self.segment.end >= at);
            let done = closed || (stopped && !close_running);
            self.advance_consumer(&log, done || close_running, &mut advanced_at)?;
            self.segment.roll_if_full(self.segment_bytes)?;
            if done {
                if let Some(Some(closer)) = closing {
                    let _ = closer.join();
                }
                return Ok(());
            }
        }
    }

    /// Moves the consumer to the last archived group end the log has made
    /// durable (the archive may run ahead of the log's sync): once it is an
    /// eighth of the log behind, every second, when the log has less than
    /// that left before the consumer's limit (the writer may be waiting for
    /// it), and at the end.
    fn advance_consumer(&mut self, log: &Log, done: bool, advanced_at: &mut Instant) -> Result<()> {
        let core = log.core();
        let room = core.checkpoints.file_limit().data_start().0.saturating_sub(core.stages.written().0);
        let durable = log.durable_lsn();
        let mut target = None;
        // A batch ends synced: every end in `ends` is in the synced archive.
        debug_assert_eq!(self.segment.unsynced, 0, "the consumer moves only past a synced archive");
        while self.ends.front().is_some_and(|end| *end <= durable) {
            target = self.ends.pop_front();
        }
        let Some(target) = target.filter(|target| *target > self.consumer.lsn()) else { return Ok(()) };
        let behind = target.0 - self.consumer.lsn().0;
        if done
            || behind >= self.advance_every
            || room < self.advance_every
            || advanced_at.elapsed() >= Duration::from_secs(1)
        {
            match self.consumer.advance(target) {
                // After the log closed, the consumer stays where it was: the
                // next start resumes at the archive's end anyway.
                Ok(()) | Err(Error::Closed) => {}
                Err(error) => return Err(error),
            }
            *advanced_at = Instant::now();
        } else {
            // Not yet: keep the target for the next time.
            self.ends.push_front(target);
        }
        Ok(())
    }

    /// Copies what the log has written, writes and syncs it in one batch and
    /// wakes the waiters. Returns whether the log has closed and everything
    /// it wrote is archived, and how many groups it copied. With `stop_at`,
    /// copies up to there without waiting.
    fn batch(&mut self, log: &Log, reader: &mut LogReader<'_>, stop_at: Option<Lsn>) -> Result<(bool, usize)> {
        let mut closed = false;
        let mut copied = 0;
        let mut asked_for_write = false;
        let gathering = Instant::now();
        let failed = |(op, path, source): (&'static str, PathBuf, std::io::Error)| Error::ArchiverFailed {
            op,
            path,
            source: Arc::new(source),
        };
        loop {
            if stop_at.is_some_and(|at| self.segment.end >= at) {
                break;
            }
            let next = reader.next_timeout(Duration::ZERO);
            if !matches!(next, Ok(Some(_))) && self.follow_torn_span(LogReader::position(reader)) {
                copied += 1;
            }
            match next {
                Ok(Some(group)) => {
                    self.append(log, &group).map_err(failed)?;
                    copied += 1;
                    continue;
                }
                Ok(None) => {}
                Err(Error::Closed) => {
                    closed = true;
                    break;
                }
                Err(error) => return Err(error),
            }
            if copied > 0 {
                if self.linger(gathering) {
                    continue;
                }
                break;
            }
            if stop_at.is_some() {
                break;
            }
            // Nothing written past the archive yet. With a thread waiting for
            // the archive, have the log write what appenders have finished
            // (as for a `Written` committer): the archive's write and sync
            // then overlap the log's own sync. Never past the file limit (the
            // writer may wait there for this archiver's own consumer) and
            // never for a group still open (`begin_group`).
            let core = log.core();
            let target = core.appender.ready().min(core.checkpoints.file_limit().data_start());
            let waiting = self.shared.acks.waiting();
            if waiting && target > LogReader::position(reader) && !asked_for_write {
                asked_for_write = true;
                match core.wait_written(target) {
                    Ok(()) | Err(Error::Closed) => continue,
                    Err(error) => return Err(error),
                }
            }
            self.idle(log, LogReader::position(reader));
            break;
        }
        if self.segment.unsynced > 0 {
            self.publish_synced(log).map_err(failed)?;
        }
        Ok((closed, copied))
    }

    /// Nothing to copy: sleeps until a waiter arrives (one registering while
    /// `idle` is set notifies), or `LINGER`. Looks once more, after setting
    /// `idle`, at whether appenders finished a group past `position`: a
    /// waiter for it registered before that look and saw `idle` clear.
    fn idle(&self, log: &Log, position: Lsn) {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        shared.idle.store(true, Ordering::SeqCst);
        let work = shared.acks.waiting() && log.core().appender.ready() > position;
        if !work && !shared.stop.load(Ordering::SeqCst) {
            shared.waiter_arrived.wait_for(&mut state, LINGER);
        }
        shared.idle.store(false, Ordering::SeqCst);
    }

    /// Adds `group` to the batch: first writing and syncing the batch if the
    /// group would take its unsynced bytes past `BATCH_BYTES` (or one entry),
    /// the most a crash can tear (`SegmentWriter::resume`).
    fn append(&mut self, log: &Log, group: &Group) -> std::result::Result<(), (&'static str, PathBuf, std::io::Error)> {
        self.follow_torn_span(group.start_lsn());
        let entry = (ENTRY_HEADER_BYTES + group.body().len()) as u64;
        if self.segment.unsynced > 0 && self.segment.unsynced + entry > BATCH_BYTES {
            self.publish_synced(log)?;
        }
        self.segment.append(group);
        self.ends.push_back(group.end_lsn());
        Ok(())
    }

    /// The reader went on at `position`, past the archive's end, without a
    /// group between: the log resumed there after a crash tore the group
    /// from the archive's end (INV-46). The archive records the span, so its
    /// entries still follow each other without a gap. Whether it did.
    fn follow_torn_span(&mut self, position: Lsn) -> bool {
        let torn = position > self.segment.end;
        if torn {
            self.segment.append_torn_span(position);
            self.ends.push_back(position);
        }
        torn
    }

    /// With a batch gathered and nothing more durable yet: whether to gather
    /// on (after a pause of at most a millisecond) rather than write it now.
    /// Only while nobody waits for the archive, the archiver is not stopping,
    /// and the batch is younger than `LINGER`.
    fn linger(&self, since: Instant) -> bool {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        let elapsed = since.elapsed();
        if shared.acks.waiting() || shared.stop.load(Ordering::SeqCst) || elapsed >= LINGER {
            return false;
        }
        let pause = (LINGER - elapsed).min(Duration::from_millis(1));
        shared.waiter_arrived.wait_for(&mut state, pause);
        !shared.acks.waiting()
    }

    /// Syncs the segment and wakes the waiters it covers. With a waiter, the
    /// log is asked first to sync the batch too, so its fdatasync and the
    /// archive's run at once; and asked after, if a waiter arrived meanwhile
    /// (INV-36).
    fn publish_synced(&mut self, log: &Log) -> std::result::Result<(), (&'static str, PathBuf, std::io::Error)> {
        let end = self.segment.end;
        if self.shared.acks.asking() {
            self.ask_log(log, end);
        }
        self.segment.sync()?;
        if self.shared.acks.archive_synced(end.as_u64()) {
            self.ask_log(log, end);
        }
        Ok(())
    }

    /// Asks the log to sync up to `end` and to raise `log_synced` once it has.
    fn ask_log(&mut self, log: &Log, end: Lsn) {
        if end <= self.asked_log {
            return;
        }
        self.asked_log = end;
        let shared = self.shared.clone();
        log.on_durable(end, Durability::Synced, move |outcome| match outcome {
            Ok(()) => shared.acks.log_synced(end.as_u64()),
            Err(_) => shared.acks.log_failed(),
        });
    }
}
