//! The public handle: [`Log`].

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::config::{Config, Durability, Pipeline};
use crate::consumer::{Consumer, ConsumerInfo};
use crate::core::{Core, StartState};
use crate::error::Result;
use crate::format::CHECKPOINT_CLEAN_SHUTDOWN;
use crate::log_threads::spawn_log_threads;
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::recovery::{lock, open_or_create, Recovery};
use crate::storage::{FsStorage, LockHandle, Storage};
use crate::writer::last_data_block;

/// A redo log: many threads append record groups concurrently and wait until
/// they are written or durable.
///
/// `Log` is `Send + Sync`; share it through an `Arc`.
///
/// ```
/// use std::sync::Arc;
/// use redolog::{Config, Durability, Log};
///
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default().with_capacity_bytes(4 << 20);
/// let (log, recovery) = Log::open(dir.path(), config).unwrap();
/// assert_eq!(recovery.count(), 0);
/// let log = Arc::new(log);
/// let threads: Vec<_> = (0..4)
///     .map(|thread| {
///         let log = log.clone();
///         std::thread::spawn(move || {
///             // Durable when commit returns: survives a power loss.
///             log.commit(format!("thread {thread}").as_bytes(), Durability::Synced).unwrap()
///         })
///     })
///     .collect();
/// for thread in threads {
///     thread.join().unwrap();
/// }
/// log.close().unwrap();
/// ```
pub struct Log {
    core: Arc<Core>,
    /// The `Buffered` timer thread.
    timer: Mutex<Option<JoinHandle<()>>>,
    /// Wakes the timer early (shutdown). The flag it guards is the stages' shutdown flag.
    timer_wake: Arc<(Mutex<()>, Condvar)>,
    /// The dedicated log writer and flusher, once a pipeline needed them.
    log_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Where the files live: a resize creates and renames files there.
    storage: Arc<dyn Storage>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("end", &self.core.appender.reserved_end())
            .field("synced", &self.core.stages.synced())
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Opens the log in directory `dir`, creating it (and the directory) if it does
    /// not exist. Returns the log, ready for appends, and the groups recovered
    /// after the last checkpoint.
    ///
    /// A new log gets `config.capacity_bytes` of zero-filled files; an existing one
    /// keeps the capacity it was created with.
    ///
    /// ```
    /// use redolog::{Config, Log, LogEnd};
    /// let dir = tempfile::tempdir().unwrap();
    /// let config = Config::default().with_capacity_bytes(1 << 20);
    /// let (_log, recovery) = Log::open(dir.path().join("redo"), config).unwrap();
    /// assert_eq!(recovery.end(), LogEnd::Created);
    /// ```
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<(Log, Recovery)> {
        Self::open_with_storage(dir.as_ref(), config, FsStorage)
    }

    /// Like [`Log::open`], on another [`Storage`] (in-memory, fault-injecting, ...).
    pub fn open_with_storage(dir: &Path, config: Config, storage: impl Storage + 'static) -> Result<(Log, Recovery)> {
        config.validate()?;
        let storage: Arc<dyn Storage> = Arc::new(storage);
        // INV-19: the directory is ours before anything of the log is read or
        // written (open_or_create then checks INV-20 first).
        let dir_lock = lock(dir, &config, &storage)?;
        let opened = open_or_create(dir, &config, &storage)?;
        Self::start(config, storage, dir_lock, opened)
    }

    /// Creates a new log in `dir` whose first group starts after `lsn` (at
    /// the next block's first data byte), for an engine restored to `lsn`:
    /// its pages carry LSNs up to `lsn`, and the log's must go on from there
    /// (`redolog-pagestore`'s point-in-time restore). `Error::LogExists` if
    /// `dir` holds a log.
    ///
    /// ```
    /// use redolog::{Config, Log, Lsn};
    /// let dir = tempfile::tempdir().unwrap();
    /// let config = Config::default().with_capacity_bytes(1 << 20);
    /// let log = Log::create_after(dir.path(), config.clone(), Lsn::from_u64(1 << 30)).unwrap();
    /// assert!(log.end_lsn() > Lsn::from_u64(1 << 30));
    /// drop(log);
    /// assert!(matches!(Log::create_after(dir.path(), config, Lsn::from_u64(0)), Err(redolog::Error::LogExists { .. })));
    /// ```
    pub fn create_after(dir: impl AsRef<Path>, config: Config, lsn: Lsn) -> Result<Log> {
        Self::create_after_with_storage(dir.as_ref(), config, FsStorage, lsn)
    }

    /// [`Log::create_after`] on another [`Storage`].
    pub fn create_after_with_storage(
        dir: &Path,
        config: Config,
        storage: impl Storage + 'static,
        lsn: Lsn,
    ) -> Result<Log> {
        config.validate()?;
        let storage: Arc<dyn Storage> = Arc::new(storage);
        let dir_lock = lock(dir, &config, &storage)?;
        let opened = crate::recovery::create_after(dir, &config, &storage, lsn)?;
        Self::start(config, storage, dir_lock, opened).map(|(log, _)| log)
    }

    /// Starts an opened (or created) log: its core, timer and pipeline.
    fn start(
        config: Config,
        storage: Arc<dyn Storage>,
        dir_lock: LockHandle,
        opened: crate::recovery::Opened,
    ) -> Result<(Log, Recovery)> {
        let recovery = opened.recovery();
        let scan = opened.scan;
        let start = StartState {
            end: scan.end,
            checkpoint_lsn: Lsn(opened.checkpoint.lsn),
            checkpoint_no: opened.checkpoint.number,
            consumers: opened.checkpoint.consumers.clone(),
            session: opened.session,
            last_block: scan.last_block,
        };
        // INV-19, INV-43: the directory's lock, held from before the first
        // read until close or drop, is the gate of every write.
        let owner = Arc::new(crate::owner::Owner::new(dir_lock));
        let header = (opened.header.log_id, opened.header.unsynced_bytes_max);
        let core = Arc::new(Core::new(config, opened.files, header, start, owner));
        let timer_wake = Arc::new((Mutex::new(()), Condvar::new()));
        let timer = spawn_timer(core.clone(), timer_wake.clone())?;
        let log =
            Log { core, timer: Mutex::new(Some(timer)), timer_wake, log_threads: Mutex::new(Vec::new()), storage };
        log.set_pipeline(log.core.config.pipeline)?;
        Ok((log, recovery))
    }

    /// Changes the log's capacity to `capacity_bytes` (rounded down to four
    /// files of a multiple of 4 KiB, as [`Config::capacity_bytes`] at
    /// creation) while committers, readers, consumers and checkpoints go on
    /// ([DESIGN §1.18](crate::docs::design#118-online-resize)). Returns once the new files are the log: a
    /// crash at any point leaves a log that opens at the old or the new
    /// capacity with every acknowledged group.
    ///
    /// Growing copies the live log (from the oldest position a checkpoint or
    /// consumer keeps) into four new files and switches to them; commits
    /// wait only while the last stretch is copied. Shrinking first lowers
    /// the writer's limit to the new size and waits until the log written
    /// since the checkpoint fits it: it finishes once the application
    /// checkpoints (or a consumer advances), as MySQL's shrink waits for
    /// its page cleaners. A capacity `Config::validate` refuses is
    /// `Error::InvalidConfig`, a second resize at once `Error::ResizeBusy`;
    /// on a closed log `Error::Closed`.
    ///
    /// ```
    /// use redolog::{Config, Durability, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let lsn = log.commit(b"before", Durability::Synced).unwrap();
    /// log.resize(4 << 20).unwrap();
    /// assert_eq!(log.capacity_bytes(), 4 << 20);
    /// log.commit(b"after", Durability::Synced).unwrap();
    /// log.checkpoint(lsn).unwrap();
    /// log.resize(1 << 20).unwrap();
    /// log.close().unwrap();
    /// let (log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
    /// assert_eq!(log.capacity_bytes(), 1 << 20);
    /// assert_eq!(recovery.map(|group| group.unwrap().records().next().unwrap().to_vec()).collect::<Vec<_>>(), [b"after".to_vec()]);
    /// ```
    pub fn resize(&self, capacity_bytes: u64) -> Result<()> {
        crate::resize::resize(&self.core, &self.storage, capacity_bytes)
    }

    /// The log's capacity: the size of its four files together.
    ///
    /// ```
    /// use redolog::{Config, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// assert_eq!(log.capacity_bytes(), 1 << 20);
    /// ```
    pub fn capacity_bytes(&self) -> u64 {
        self.core.files().layout.file_bytes * u64::from(crate::format::FILE_COUNT)
    }

    /// The log bytes the files hold between a checkpoint and the writer's
    /// limit: the capacity less each file's header and checkpoint slots (12
    /// KiB per file, [FORMAT §1](crate::docs::format#1-directory)). What an engine's free check
    /// measures its checkpoint age against.
    ///
    /// ```
    /// use redolog::{Config, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// assert_eq!(log.usable_bytes(), (1 << 20) - 4 * 12288);
    /// ```
    pub fn usable_bytes(&self) -> u64 {
        self.core.files().layout.ring_blocks * crate::format::BLOCK_BYTES as u64
    }

    /// Appends one record as a group of its own; returns the group's end LSN.
    /// Does not wait for durability (see [`Log::wait`], [`Log::commit`]).
    ///
    /// ```
    /// # use redolog::{Config, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let first = log.append(b"one").unwrap();
    /// let second = log.append(b"two").unwrap();
    /// assert!(second > first);
    /// ```
    pub fn append(&self, record: &[u8]) -> Result<Lsn> {
        Ok(self.core.append_group(&[record])?.1)
    }

    /// Appends a group of records — a mini-transaction, recovered all or nothing —
    /// and returns its end LSN. Lock-free: one atomic reservation, then a copy.
    /// Waits only when the in-memory ring is full.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let end = log.append_group(&[b"undo", b"redo page 3", b"redo page 4"]).unwrap();
    /// log.wait(end, Durability::Synced).unwrap();
    /// ```
    pub fn append_group(&self, records: &[&[u8]]) -> Result<Lsn> {
        Ok(self.core.append_group(records)?.1)
    }

    /// [`append_group`](Self::append_group), returning where the group went:
    /// its start and its end LSN. For engines that index their groups (a Raft
    /// log store keeps each entry's group start, where `read_from` finds it):
    /// the start is the log's own answer, whoever else appends meanwhile.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let (start, end) = log.append_group_range(&[b"entry 7", b"entry 8"]).unwrap();
    /// log.wait(end, Durability::Synced).unwrap();
    /// let group = log.read_from(start).unwrap().next().unwrap().unwrap();
    /// assert_eq!((group.start_lsn(), group.end_lsn()), (start, end));
    /// ```
    pub fn append_group_range(&self, records: &[&[u8]]) -> Result<(Lsn, Lsn)> {
        self.core.append_group(records)
    }

    /// Waits until everything up to `lsn` has the given durability. With
    /// `Buffered` it returns at once. The calling thread may do the write and the
    /// fdatasync itself for everybody waiting (group commit).
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let end = log.append(b"x").unwrap();
    /// log.wait(end, Durability::Written).unwrap();
    /// log.wait(end, Durability::Synced).unwrap();
    /// assert!(log.durable_lsn() >= end);
    /// ```
    pub fn wait(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        self.core.wait_durable(lsn, durability)
    }

    /// Appends `record` and waits for `durability`: `append` + `wait`.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let end = log.commit(b"transaction 1 commits", Durability::Synced).unwrap();
    /// assert!(log.durable_lsn() >= end);
    /// ```
    pub fn commit(&self, record: &[u8], durability: Durability) -> Result<Lsn> {
        let end = self.append(record)?;
        self.wait(end, durability)?;
        Ok(end)
    }

    /// Declares that everything before `lsn` is persistent elsewhere (the pages it
    /// describes were flushed): recovery will start at `lsn`, and the log may reuse
    /// the space before it. Pass an LSN `append` returned (a group boundary).
    /// The log is first made durable up to `lsn` if it is not yet (the WAL
    /// rule, INV-18: one fdatasync, as a `Synced` wait would do), then one of
    /// two alternating checksummed slots is written and synced. An LSN inside a
    /// group that straddles it makes recovery start at the next group boundary
    /// after it ([FORMAT §7](crate::docs::format#7-reading-rules-summary-designmd-4-has-the-argument)), so that group is not replayed: checkpoint
    /// at group ends.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let config = Config::default().with_capacity_bytes(1 << 20);
    /// # let (log, _) = Log::open(dir.path(), config.clone()).unwrap();
    /// let flushed = log.commit(b"applied to pages", Durability::Synced).unwrap();
    /// log.commit(b"not applied yet", Durability::Synced).unwrap();
    /// log.checkpoint(flushed).unwrap();
    /// drop(log);
    /// let (_, recovery) = Log::open(dir.path(), config).unwrap();
    /// assert_eq!(recovery.count(), 1);
    /// ```
    pub fn checkpoint(&self, lsn: Lsn) -> Result<()> {
        self.core.checkpoint(lsn)
    }

    /// Changes the pipeline while the log runs (MySQL's dynamic
    /// `innodb_log_writer_threads`). Starts the log writer and flusher threads
    /// the first time a pipeline needs them. Switching never loses a wake-up or
    /// an acknowledgement: committers in flight complete under either pipeline
    /// ([DESIGN INV-17](crate::docs::design#2-invariants)).
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log, Pipeline};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let config = Config::default().with_pipeline(Pipeline::GroupCommit);
    /// let (log, _) = Log::open(dir.path(), config).unwrap();
    /// log.set_pipeline(Pipeline::Dedicated).unwrap();
    /// log.commit(b"written by the log threads", Durability::Synced).unwrap();
    /// log.set_pipeline(Pipeline::GroupCommit).unwrap();
    /// assert_eq!(log.active_pipeline(), Pipeline::GroupCommit);
    /// ```
    pub fn set_pipeline(&self, pipeline: Pipeline) -> Result<()> {
        self.core.stages.check()?;
        if self.core.owner.is_released() {
            return Err(crate::Error::Closed);
        }
        if pipeline != Pipeline::GroupCommit {
            let mut threads = self.log_threads.lock();
            if threads.is_empty() {
                *threads = spawn_log_threads(&self.core)?;
            }
        }
        self.core.request_pipeline(pipeline);
        Ok(())
    }

    /// The log's owners (for the asynchronous waiters, `durable.rs`).
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// Where the log's files live: the file system, or the storage it was
    /// opened with (a test's `CrashStorage`). An engine keeps the files it
    /// writes beside the log there too — the archiver its archive, a page
    /// store its pages and backups — so that one crash image holds them all.
    ///
    /// ```
    /// # use std::path::Path;
    /// # use redolog::{Config, Log};
    /// use redolog::storage::{CrashStorage, Storage};
    /// let (log, _) = Log::open_with_storage(Path::new("/db/log"), Config::default(), CrashStorage::new()).unwrap();
    /// log.storage().create_dir_all(Path::new("/db/pages")).unwrap();
    /// assert!(log.storage().list_dir(Path::new("/db/log")).unwrap().contains(&"redo.0000".to_string()));
    /// ```
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The log's owners, shared (the archiver's handle).
    pub(crate) fn core_arc(&self) -> Arc<Core> {
        self.core.clone()
    }

    /// INV-27: asynchronous waiters are registered and committers lead, so no
    /// thread would write or sync for them: start the log threads if there are
    /// none, and hand them the roles.
    pub(crate) fn start_async_io(&self) -> Result<()> {
        {
            let mut threads = self.log_threads.lock();
            if threads.is_empty() {
                self.core.stages.check()?;
                if self.core.stages.is_shutdown() {
                    return Err(crate::Error::Closed);
                }
                *threads = spawn_log_threads(&self.core)?;
            }
        }
        self.core.set_dedicated(true);
        Ok(())
    }

    /// The pipeline running now: `GroupCommit` or `Dedicated` (with `Auto`,
    /// whichever it chose).
    pub fn active_pipeline(&self) -> Pipeline {
        self.core.active()
    }

    /// How much of the log is in use: the checkpoint age, what the writer
    /// may still write before the next checkpoint, and whether a checkpoint
    /// is wanted ([DESIGN §1.8](crate::docs::design#18-checkpoints-and-file-space)). See [`crate::LogSpace`].
    pub fn space(&self) -> crate::LogSpace {
        self.core.space()
    }

    /// Whether the checkpoint age is past the checkpoint-wanted level (3/4 of
    /// [`Log::usable_bytes`]): an engine's free check, cheap enough for every
    /// statement (InnoDB's `log_free_check`). Flush pages and checkpoint
    /// while it is true, before appends wait for the log to have room.
    ///
    /// ```
    /// # use redolog::{Config, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// assert!(!log.checkpoint_wanted());
    /// ```
    pub fn checkpoint_wanted(&self) -> bool {
        self.core.checkpoint_wanted()
    }

    /// A snapshot of the counters and latency histograms.
    pub fn metrics(&self) -> Metrics {
        self.core.metrics()
    }

    /// Publishes the log's counters and gauges through the `metrics` facade
    /// (cargo feature `metrics`), labelled `log` = its directory; see
    /// [`crate::export`] for the names. Reads the log's counters once, as
    /// [`Log::metrics`] does: call it before each scrape, or every second.
    ///
    /// ```
    /// use redolog::{Config, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
    /// log.publish_metrics();
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn publish_metrics(&self) {
        let name = self.core.files().dir().display().to_string();
        self.core.metrics().publish(&[("log", &name)]);
    }

    /// The end of everything appended so far: the LSN the next group starts at.
    pub fn end_lsn(&self) -> Lsn {
        self.core.appender.reserved_end()
    }

    /// The last checkpoint's LSN: recovery starts there.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let end = log.commit(b"flushed", Durability::Synced).unwrap();
    /// log.checkpoint(end).unwrap();
    /// assert_eq!(log.checkpoint_lsn(), end);
    /// ```
    pub fn checkpoint_lsn(&self) -> Lsn {
        self.core.checkpoints.lsn()
    }

    /// The log's id ([FORMAT §2](crate::docs::format#2-file-header-offset-0-one-512-byte-block)): an archive of this log carries it.
    pub fn log_id(&self) -> u128 {
        self.core.checkpoints.log_id()
    }

    /// Everything before this LSN is synced.
    pub fn durable_lsn(&self) -> Lsn {
        self.core.stages.synced()
    }

    /// Appends a group as the first phase of a mini-transaction commit, the
    /// way InnoDB's `mtr_t::commit` does ([DESIGN §1.13](crate::docs::design#113-mini-transactions-and-the-closed-lsn-mysqls-recent_closed)): reserve, copy,
    /// publish, and wait — on an event, never a sleep — for space in the
    /// closed window (`Config::closed_window_bytes`). The group's LSNs are
    /// known at once; the caller adds the pages it dirtied to its flush lists
    /// with `start_lsn()`, then closes it. Until it is closed, `closed_lsn()`
    /// stays at or below its start, so a checkpointer that takes the minimum of
    /// its flush lists and `closed_lsn()` never misses its pages. Dropping it
    /// closes it (a panic cannot stall the closed LSN). Do not begin another
    /// group on the same thread while holding one open: with a small window it
    /// would wait for itself. Nor block, while it is open, on anything another
    /// thread holds while it waits on this log: the open group holds back the
    /// closed LSN (so every checkpoint), and the log writer learns of its
    /// bytes only when it closes (INV-39: nobody is woken inside the window).
    /// Waiting on the log itself is fine: a waiter wakes the writer.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let mtr = log.begin_group(&[b"page 7: insert row 42"]).unwrap();
    /// assert!(log.closed_lsn() <= mtr.start_lsn());
    /// // ... add page 7 to a flush list with mtr.start_lsn() ...
    /// let end = mtr.end_lsn();
    /// mtr.close();
    /// assert!(log.closed_lsn() >= end);
    /// log.wait(end, Durability::Synced).unwrap();
    /// ```
    pub fn begin_group(&self, records: &[&[u8]]) -> Result<MiniTransaction<'_>> {
        let (start, end, moved) = self.core.begin_group(records)?;
        Ok(MiniTransaction { log: LogRef::Borrowed(self), start, end, open: true, moved })
    }

    /// [`begin_group`](Log::begin_group) on a shared log: the
    /// mini-transaction holds its own `Arc` (and keeps the log open), so it
    /// can be kept in a struct or a task beside the `Arc`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use redolog::{Config, Log, MiniTransaction};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let log = Arc::new(log);
    /// struct Page { mtr: MiniTransaction<'static> }
    /// let page = Page { mtr: log.begin_group_owned(&[b"page 3: split"]).unwrap() };
    /// let end = page.mtr.end_lsn();
    /// drop(page); // closes the group
    /// assert!(log.closed_lsn() >= end);
    /// ```
    pub fn begin_group_owned(self: &Arc<Self>, records: &[&[u8]]) -> Result<MiniTransaction<'static>> {
        let (start, end, moved) = self.core.begin_group(records)?;
        Ok(MiniTransaction { log: LogRef::Shared(Arc::clone(self)), start, end, open: true, moved })
    }

    /// Creates consumer `name` at the last checkpoint and returns its handle
    /// ([DESIGN §1.16](crate::docs::design#116-consumers-readers-that-hold-the-logs-space)): from now on, and across restarts, the writer
    /// never writes over a group at or after the consumer's position; when
    /// the log is full up to it, the writer waits for it to advance
    /// (`Metrics::log_on_consumer`). A log keeps at most 7 consumers, named
    /// by 1 to 16 bytes of UTF-8.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Error, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let archive = log.create_consumer("archive").unwrap();
    /// assert_eq!(archive.lsn().as_u64(), log.metrics().lsns.log_lsn_last_checkpoint);
    /// assert!(matches!(log.create_consumer("archive"), Err(Error::ConsumerExists { .. })));
    /// ```
    pub fn create_consumer(&self, name: &str) -> Result<Consumer> {
        let core = &self.core;
        let attached = core.checkpoints.create_consumer(name, &core.stages, &core.metrics)?;
        Ok(Consumer::new(self.core.clone(), name, attached))
    }

    /// Attaches to consumer `name`, which the log keeps (created in this
    /// session or an earlier one). `ConsumerBusy` while another handle on it
    /// is alive; `UnknownConsumer` if the log keeps none of that name.
    ///
    /// ```
    /// # use redolog::{Config, Error, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// drop(log.create_consumer("replica").unwrap());
    /// let replica = log.consumer("replica").unwrap();
    /// assert!(matches!(log.consumer("replica"), Err(Error::ConsumerBusy { .. })));
    /// assert!(matches!(log.consumer("nobody"), Err(Error::UnknownConsumer { .. })));
    /// # drop(replica);
    /// ```
    pub fn consumer(&self, name: &str) -> Result<Consumer> {
        let attached = self.core.checkpoints.attach_consumer(name)?;
        Ok(Consumer::new(self.core.clone(), name, attached))
    }

    /// Removes consumer `name`, attached or not: the space it held is the
    /// writer's again at once. The operator's way to cut off a consumer that
    /// stopped advancing; its handle's next `advance` gets `UnknownConsumer`.
    ///
    /// ```
    /// # use redolog::{Config, Error, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let mut stuck = log.create_consumer("stuck").unwrap();
    /// log.drop_consumer("stuck").unwrap();
    /// assert!(log.consumers().is_empty());
    /// assert!(matches!(stuck.advance(log.durable_lsn()), Err(Error::UnknownConsumer { .. })));
    /// ```
    pub fn drop_consumer(&self, name: &str) -> Result<()> {
        let core = &self.core;
        core.checkpoints.drop_consumer(name, &core.stages, &core.metrics)
    }

    /// The consumers the log keeps, with their positions, in creation order.
    ///
    /// ```
    /// # use redolog::{Config, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let replica = log.create_consumer("replica").unwrap();
    /// let listed = log.consumers();
    /// assert_eq!((listed[0].name.as_str(), listed[0].lsn), ("replica", replica.lsn()));
    /// ```
    pub fn consumers(&self) -> Vec<ConsumerInfo> {
        self.core.checkpoints.consumers().into_iter().map(|(name, lsn)| ConsumerInfo { name, lsn }).collect()
    }

    /// Every group that ends at or before this LSN is closed: appended with
    /// `append`/`append_group`, or begun with `begin_group` and closed (MySQL's
    /// `recent_closed` tail, INV-21). An engine's checkpoint may advance to
    /// `min(oldest dirty page, closed_lsn(), durable_lsn())`.
    ///
    /// ```
    /// # use redolog::{Config, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let end = log.append(b"closed at once").unwrap();
    /// assert_eq!(log.closed_lsn(), end);
    /// ```
    pub fn closed_lsn(&self) -> Lsn {
        self.core.closer.closed_lsn()
    }

    /// Writes and syncs everything appended, records a clean shutdown, and stops
    /// the background flusher. Later appends fail with `Error::Closed`. Reports the
    /// first error; a poisoned log reports its poison. Closing twice is harmless.
    /// Needs file space for what is still unwritten: checkpoint first if the log
    /// is full.
    ///
    /// ```
    /// # use redolog::{Config, Error, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// log.append(b"last words").unwrap();
    /// log.close().unwrap();
    /// assert!(matches!(log.append(b"too late"), Err(Error::Closed)));
    /// ```
    pub fn close(&self) -> Result<()> {
        let result = match self.core.appender.close() {
            None => self.core.stages.check(),
            Some(end) => self.core.wait_synced(end).and_then(|()| {
                self.core.checkpoints.rewrite_last(CHECKPOINT_CLEAN_SHUTDOWN, &self.core.stages, &self.core.metrics)
            }),
        };
        self.stop_threads();
        // INV-19, INV-43: the directory is free once nothing more will be
        // written, and nothing is after this.
        self.core.owner.release();
        result
    }

    /// Behaves as if the process died here, for tests of crash recovery
    /// (cargo feature `testkit`): nothing more is written — the log is
    /// poisoned and its threads stop — nothing is closed or marked clean, and
    /// the directory's lock is released as the kernel releases a dead
    /// process's. What reached the storage stays. Takes `&self`, so a log
    /// shared through an `Arc` (with an archiver, or threads still waiting
    /// on it: they wake to the poison) crashes too; dropping it afterwards
    /// writes nothing.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let config = Config::default().with_capacity_bytes(1 << 20);
    /// let (log, _) = Log::open(dir.path(), config.clone()).unwrap();
    /// log.commit(b"durable", Durability::Synced).unwrap();
    /// log.simulate_crash();
    /// let (_, recovery) = Log::open(dir.path(), config).unwrap();
    /// assert_eq!(recovery.count(), 1);
    /// ```
    #[cfg(feature = "testkit")]
    #[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
    pub fn simulate_crash(&self) {
        let source = std::io::Error::other("the process crashed here (Log::simulate_crash)");
        self.core.stages.poison(crate::error::IoFailure { op: "simulated crash", path: "".into(), source });
        self.stop_threads();
        // INV-43: from here on nothing of this log writes, dropped or not
        // (a drop's close finds the poison and the lock released).
        self.core.owner.release();
    }

    fn stop_threads(&self) {
        {
            let _guard = self.timer_wake.0.lock();
            // Also wakes a writer parked for file space: it gives up.
            self.core.stages.shut_down();
            self.timer_wake.1.notify_all();
        }
        // The threads only return; a panic in one has already poisoned nothing
        // we could report here.
        if let Some(timer) = self.timer.lock().take() {
            let _ = timer.join();
        }
        for thread in self.log_threads.lock().drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Log {
    /// Best effort `close`: writes and syncs what fits in the file space. If the
    /// log is full, it stops without waiting for a checkpoint that cannot come.
    fn drop(&mut self) {
        self.close_as_dropped();
    }
}

impl Log {
    /// Whether everything appended fits in the file space the checkpoint
    /// and the consumers leave: a `close` need not wait for a checkpoint.
    pub(crate) fn unwritten_fits(&self) -> bool {
        last_data_block(self.core.appender.reserved_end()) < self.core.checkpoints.file_limit()
    }

    /// What dropping the last handle does: `close` if what is unwritten
    /// fits, else stop without waiting for a checkpoint that cannot come.
    pub(crate) fn close_as_dropped(&self) {
        if self.unwritten_fits() {
            let _ = self.close();
        } else {
            self.stop_threads();
            // INV-43: a consumer's or archiver's handle may keep the core;
            // it writes nothing more from here on.
            self.core.owner.release();
        }
    }
}

/// Starts the thread that writes and syncs `Buffered` groups at least every
/// `flush_interval` ([DESIGN §1.7](crate::docs::design#17-buffered-durability-and-the-timer-thread)). A timer is its whole purpose.
fn spawn_timer(core: Arc<Core>, wake: Arc<(Mutex<()>, Condvar)>) -> Result<JoinHandle<()>> {
    let interval = core.config.flush_interval;
    std::thread::Builder::new()
        .name("redolog-timer".into())
        .spawn(move || loop {
            {
                let mut guard = wake.0.lock();
                if core.stages.is_shutdown() {
                    return;
                }
                wake.1.wait_for(&mut guard, interval);
            }
            if core.stages.is_shutdown() || core.stages.is_poisoned() {
                return;
            }
            let ready = core.appender.ready();
            if ready > core.stages.synced() && core.wait_synced(ready).is_err() {
                return;
            }
        })
        .map_err(|source| crate::error::Error::io("spawn timer thread", "", source))
}

/// A group begun with [`Log::begin_group`] and not closed yet: its LSN range is
/// known, and the closed LSN waits for it. Closed by [`MiniTransaction::close`]
/// or when dropped.
///
/// ```
/// # use redolog::{Config, Log};
/// # let dir = tempfile::tempdir().unwrap();
/// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// let first = log.begin_group(&[b"a"]).unwrap();
/// let second = log.begin_group(&[b"b"]).unwrap();
/// second.close(); // closed, but behind an open group
/// assert_eq!(log.closed_lsn(), first.start_lsn());
/// drop(first); // closes
/// assert!(log.closed_lsn() >= log.end_lsn());
/// ```
#[must_use = "a mini-transaction closes when dropped; keep it while adding its pages"]
pub struct MiniTransaction<'a> {
    log: LogRef<'a>,
    start: Lsn,
    end: Lsn,
    open: bool,
    /// The notice of the move of `ready` the group's publish made, given
    /// when it closes (INV-39).
    moved: crate::append::Moved,
}

/// The log a reader, a durable future or a mini-transaction works on:
/// borrowed from a `Log`, or an `Arc` of its own (the `_owned` methods).
pub(crate) enum LogRef<'a> {
    Borrowed(&'a Log),
    Shared(Arc<Log>),
}

impl std::ops::Deref for LogRef<'_> {
    type Target = Log;

    fn deref(&self) -> &Log {
        match self {
            LogRef::Borrowed(log) => log,
            LogRef::Shared(log) => log,
        }
    }
}

impl MiniTransaction<'_> {
    /// The LSN the group starts at: the one to store as its pages' oldest
    /// modification.
    pub fn start_lsn(&self) -> Lsn {
        self.start
    }

    /// The LSN the group ends at: the one to `wait` for.
    pub fn end_lsn(&self) -> Lsn {
        self.end
    }

    /// Closes the group: once every earlier group is closed too, `closed_lsn`
    /// passes it.
    pub fn close(mut self) {
        self.close_now();
    }

    fn close_now(&mut self) {
        if std::mem::take(&mut self.open) {
            self.log.core.close_group((self.start, self.end), self.moved.take());
        }
    }
}

impl Drop for MiniTransaction<'_> {
    fn drop(&mut self) {
        self.close_now();
    }
}

impl std::fmt::Debug for MiniTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniTransaction").field("start", &self.start).field("end", &self.end).finish()
    }
}
