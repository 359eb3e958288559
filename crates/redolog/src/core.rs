//! An open log's owners, and the port through which the commit protocol
//! reaches them.
//!
//! Each stage owns its state: the [`Appender`] (reservations, ring, link
//! buffer), the [`Stages`] (the write and sync stages, their roles, events and
//! mode, the poison), the [`Checkpoints`] coordinator (slots and file limit) and
//! [`Auto`] (the pipeline mode's decision). `Core` holds one of each and the
//! read-only rest (configuration, layout, files), and implements
//! [`Port`] for the stages: the only place where they meet the appender's
//! progress, the checkpoint's limit and the files.
//!
//! Lock order: `pipeline/mod.rs` (the checkpoint coordinator → the write role →
//! the sync role).

use std::sync::Arc;

use crate::append::{Appender, Moved};
use crate::auto::{Auto, Readings};
use crate::checkpoint::Checkpoints;
use crate::clock::Moment;
use crate::closed::Closer;
use crate::config::{Config, Durability, Pipeline};
use crate::cpu::CpuMonitor;
use crate::error::{Error, IoFailure, Result};
use crate::format::KeyTable;
use crate::lsn::{BlockNo, Lsn};
use crate::metrics::{LsnLevels, Metrics, MetricsRecorder};
use crate::owner::Owner;
use crate::pipeline::{Port, Site, Stages};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::wait::{PassTime, Spin, Waited};
use crate::writer::{last_data_block, Files, Writer};

/// The positions a log starts from (after creation or recovery).
pub(crate) struct StartState {
    pub(crate) end: Lsn,
    pub(crate) checkpoint_lsn: Lsn,
    pub(crate) checkpoint_no: u64,
    /// The consumers the last checkpoint slot records (INV-32).
    pub(crate) consumers: crate::format::ConsumerTable,
    /// An encrypted log's session: epoch and key table for the checkpoint
    /// slots, the block cipher for the writer.
    pub(crate) session: Option<crate::encryption::Session>,
    /// The image of the block holding `end`, to load into the ring.
    pub(crate) last_block: Vec<u8>,
}

/// An open log.
pub(crate) struct Core {
    pub(crate) config: Config,
    /// Where this session's history began: the end recovery found. A group
    /// read from before it that does not end by it was torn by the crash
    /// (recovery resumed at a checkpoint inside it): this session's groups
    /// begin here (INV-46).
    pub(crate) session_start: Lsn,
    /// The directory's lock, and the write gate every write and sync of
    /// the files passes (INV-19, INV-43).
    pub(crate) owner: Arc<Owner>,
    /// The log's files, shared with the live readers (`live.rs`); the lock
    /// is the I/O gate: write passes hold it shared from reading their
    /// limits to the end of their write, sync passes for their fdatasyncs,
    /// and a resize exclusively to switch the files ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    files: parking_lot::RwLock<Arc<Files>>,
    /// Counts the switches of `files`: a reader that loaded a frontier and
    /// then sees a new count reads from the new files (§1.18).
    files_generation: AtomicU64,
    /// Held by a running resize (`Error::ResizeBusy` for another).
    pub(crate) resizing: parking_lot::Mutex<()>,
    pub(crate) appender: Appender,
    /// The closed LSN (MySQL's recent_closed).
    pub(crate) closer: Closer,
    pub(crate) stages: Stages<Writer>,
    pub(crate) checkpoints: Checkpoints,
    auto: Auto,
    /// Usable CPUs: gate spinning and feed `Auto` (§1.10).
    cpu: CpuMonitor,
    pub(crate) metrics: MetricsRecorder,
    /// The end of the write in flight, or of the last one: stored before each
    /// write, so no block of a lap past it was written over (INV-25).
    write_intent: crossbeam_utils::CachePadded<AtomicU64>,
    /// An asynchronous waiter registered since the last check (`tick`).
    pub(crate) async_seen: AtomicBool,
    /// Asynchronous waiters registered in the last interval `tick` checked.
    async_recent: AtomicBool,
    /// When `tick` next checks whether asynchronous waiters are gone.
    async_check_due_ns: AtomicU64,
    /// The file limit block (+ 1) the writer found the log full at, 0 when
    /// it is not: a full log is logged and counted once per episode (INV-44).
    full_at: AtomicU64,
    /// When the episode began (`Moment` ns).
    full_since_ns: AtomicU64,
    /// The checkpoint age is past the checkpoint-wanted level (§1.8): logged
    /// and counted once per episode.
    checkpoint_wanted: AtomicBool,
    /// That level for the files now (a resize changes it).
    checkpoint_wanted_age: AtomicU64,
}

/// The share of the usable bytes past which a checkpoint is wanted (§1.8,
/// InnoDB's `log_free_check` margin; the page store's free check): 3/4.
const CHECKPOINT_WANTED: (u64, u64) = (3, 4);

/// How long a log that asked for group commit keeps its log threads after the
/// last asynchronous waiter (INV-27).
const ASYNC_IDLE_BEFORE_GROUP: std::time::Duration = std::time::Duration::from_millis(100);

impl Core {
    pub(crate) fn new(
        config: Config,
        files: Arc<Files>,
        (log_id, unsynced_bytes_max): (u128, u64),
        start: StartState,
        owner: Arc<Owner>,
    ) -> Self {
        let (cipher, session) = match start.session {
            Some(session) => (Some(session.cipher), (session.epoch, session.keys)),
            None => (None, (0, KeyTable::default())),
        };
        let geometry = files.seal.geometry();
        let appender = Appender::new(
            config.ring_bytes(),
            (start.end, &start.last_block),
            config.group_bytes_max,
            files.group_bytes_max(),
            geometry,
        );
        let unsynced_blocks = unsynced_bytes_max / crate::format::BLOCK_BYTES as u64;
        let checkpoints = Checkpoints::new(
            (start.checkpoint_no, start.checkpoint_lsn, start.consumers),
            (files.layout.ring_blocks, geometry),
            (log_id, session),
            (files.handles[0].clone(), files.paths[0].clone()),
            owner.clone(),
        );
        let closer = Closer::beside(appender.link(), config.closed_window(), start.end);
        Core {
            session_start: start.end,
            closer,
            stages: Stages::new(
                start.end,
                Writer::new(cipher),
                unsynced_blocks,
                config.pipeline == Pipeline::Dedicated,
            ),
            appender,
            checkpoints,
            auto: Auto::new(),
            cpu: CpuMonitor::new(),
            metrics: MetricsRecorder::new(&files.dir().display().to_string()),
            write_intent: crossbeam_utils::CachePadded::new(AtomicU64::new(start.end.0)),
            async_seen: AtomicBool::new(false),
            async_recent: AtomicBool::new(false),
            async_check_due_ns: AtomicU64::new(0),
            full_at: AtomicU64::new(0),
            full_since_ns: AtomicU64::new(0),
            checkpoint_wanted: AtomicBool::new(false),
            checkpoint_wanted_age: AtomicU64::new(Self::wanted_age(files.layout.ring_blocks)),
            files: parking_lot::RwLock::new(files),
            files_generation: AtomicU64::new(0),
            resizing: parking_lot::Mutex::new(()),
            owner,
            config,
        }
    }

    /// Appends one group and closes it at once; returns its end LSN.
    pub(crate) fn append_group(&self, records: &[&[u8]]) -> Result<(Lsn, Lsn)> {
        let (start, end, ready_moved) = self.begin_group(records)?;
        self.close_group((start, end), ready_moved);
        Ok((start, end))
    }

    /// INV-44: with `Config::log_full_timeout`, waits at most that long for
    /// the writer's limit to take the log up to `end` (a group about to be
    /// appended ends there, or a waiter needs it written): `Error::LogFull`
    /// once the time is up. Without the setting, or with room, at once.
    pub(crate) fn wait_for_room(&self, end: Lsn) -> Result<()> {
        let Some(timeout) = self.config.log_full_timeout else { return Ok(()) };
        let mut limit = self.checkpoints.file_limit();
        if end <= limit.data_start() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let deadline = started + timeout;
        self.note_full(limit, end);
        loop {
            self.stages.check()?;
            if self.stages.is_shutdown() {
                return Err(Error::Closed);
            }
            let freed = self.stages.wait_space_freed_until(limit, deadline, || self.checkpoints.file_limit() > limit);
            limit = self.checkpoints.file_limit();
            if end <= limit.data_start() {
                return Ok(());
            }
            if !freed && std::time::Instant::now() >= deadline {
                self.metrics.log_full_refusals.add(1);
                let space = self.space();
                return Err(Error::LogFull {
                    checkpoint_lsn: space.checkpoint_lsn,
                    needed_bytes: end.0 - limit.data_start().0,
                    held_by: space.held_by,
                    waited: started.elapsed(),
                });
            }
        }
    }

    /// INV-44: the log is full — the writer stopped at `limit`, the file
    /// limit, or an append or wait needs the log up to `end` past it — once
    /// per episode: counted, and logged with the checkpoint age and the
    /// bytes needed.
    fn note_full(&self, limit: BlockNo, end: Lsn) {
        if self.full_at.swap(limit.0 + 1, Ordering::Relaxed) != 0 {
            return;
        }
        self.full_since_ns.store(Moment::now().as_ns(), Ordering::Relaxed);
        self.metrics.log_full_episodes.add(1);
        let space = self.space();
        let needed = end.0.saturating_sub(limit.data_start().0);
        log::warn!(
            "redolog {}: the log is full: the checkpoint at LSN {} is {} bytes behind the end (of {} usable){}; \
             {needed} bytes more are needed: waiting for a checkpoint{}",
            self.files().dir().display(),
            space.checkpoint_lsn,
            space.checkpoint_age(),
            space.usable_bytes,
            space.held_by.as_ref().map(|name| format!(", held by consumer {name:?}")).unwrap_or_default(),
            match self.config.log_full_timeout {
                Some(timeout) => format!(" (appends and waits give up after {timeout:?})"),
                None => String::new(),
            },
        );
    }

    /// How much of the log is in use, and whether a checkpoint is wanted.
    pub(crate) fn space(&self) -> crate::metrics::LogSpace {
        let usable = self.files().layout.ring_blocks * crate::format::BLOCK_BYTES as u64;
        let checkpoint = self.checkpoints.lsn();
        let oldest = self.checkpoints.floor();
        let held_by = (oldest < checkpoint)
            .then(|| self.checkpoints.consumers().into_iter().min_by_key(|(_, lsn)| *lsn).map(|(name, _)| name))
            .flatten();
        crate::metrics::LogSpace {
            checkpoint_lsn: checkpoint,
            oldest_lsn: oldest,
            end_lsn: self.appender.reserved_end(),
            writable_end_lsn: self.checkpoints.file_limit().data_start(),
            usable_bytes: usable,
            checkpoint_wanted_age: self.checkpoint_wanted_age.load(Ordering::Relaxed),
            held_by,
        }
    }

    /// Whether the checkpoint age is past the checkpoint-wanted level: three
    /// loads, for a free check on every statement.
    pub(crate) fn checkpoint_wanted(&self) -> bool {
        let age = self.appender.reserved_end().0.saturating_sub(self.checkpoints.lsn().0);
        age >= self.checkpoint_wanted_age.load(Ordering::Relaxed)
    }

    /// The checkpoint-wanted level of files of `ring_blocks` blocks.
    fn wanted_age(ring_blocks: u64) -> u64 {
        ring_blocks * crate::format::BLOCK_BYTES as u64 / CHECKPOINT_WANTED.1 * CHECKPOINT_WANTED.0
    }

    /// After a write pass up to `end`: ends a full-log episode the writer got
    /// past, and notes the checkpoint-wanted level once per episode (§1.8).
    fn after_write(&self, files: &Files, end: Lsn) {
        let full_at = self.full_at.load(Ordering::Relaxed);
        if full_at != 0 && end > BlockNo(full_at - 1).data_start() && self.full_at.swap(0, Ordering::Relaxed) != 0 {
            let waited_ms =
                Moment::now().as_ns().saturating_sub(self.full_since_ns.load(Ordering::Relaxed)) / 1_000_000;
            log::info!("redolog {}: log space freed, the writer goes on after {waited_ms} ms", files.dir().display());
        }
        let usable = files.layout.ring_blocks * crate::format::BLOCK_BYTES as u64;
        let age = end.0.saturating_sub(self.checkpoints.lsn().0);
        let wanted = age >= Self::wanted_age(files.layout.ring_blocks);
        if wanted != self.checkpoint_wanted.load(Ordering::Relaxed)
            && self.checkpoint_wanted.swap(wanted, Ordering::Relaxed) != wanted
            && wanted
        {
            self.metrics.checkpoint_wanted_episodes.add(1);
            log::info!(
                "redolog {}: a checkpoint is wanted: the checkpoint at LSN {} is {age} bytes behind the written end, \
                 past {}/{} of the {usable} usable bytes",
                files.dir().display(),
                self.checkpoints.lsn(),
                CHECKPOINT_WANTED.0,
                CHECKPOINT_WANTED.1,
            );
        }
    }

    /// Appends one group and waits for space in the closed window (§1.13).
    /// Returns the group's range and the notice of the move of `ready` its
    /// publish made, which the caller gives when it closes the group
    /// (`close_group`): nobody is woken while the group holds the closed
    /// window (INV-39).
    pub(crate) fn begin_group(&self, records: &[&[u8]]) -> Result<(Lsn, Lsn, Moved)> {
        if self.config.log_full_timeout.is_some() {
            // INV-44: before the group takes its LSNs.
            if let Some(end) = self.appender.end_after(records) {
                self.wait_for_room(end)?;
            }
        }
        let (start, end, mut ready_moved) = self.appender.append_group(records, &self.stages, self, &self.metrics)?;
        if !self.closer.has_space(start) {
            // The window is full: nobody may wait for our notice while we
            // wait for the groups before ours to close (they may wait for
            // ring space, hence for the writer).
            if let Some((old, new)) = ready_moved.take() {
                self.stages.ready_moved(old, new);
            }
            if let Some(waited) = self.closer.wait_for_window(start, &self.stages)? {
                self.metrics.on_recent_closed.record(true, waited);
            }
        }
        Ok((start, end, ready_moved))
    }

    /// Closes a group `begin_group` returned (INV-21), then gives one notice
    /// for the move of `ready` its publish made (`begin_group` kept it) and
    /// the closed tail's: the writer and the groups waiting for window space
    /// wake only now (INV-39).
    pub(crate) fn close_group(&self, range: (Lsn, Lsn), ready_moved: Moved) {
        let closed_moved = self.closer.close(range, || self.appender.reserved_end().0);
        if let Some((old, new)) = merge(ready_moved, closed_moved) {
            self.stages.ready_moved(old, new);
        }
    }

    /// Waits until `target` is synced (no counting; the timer, `close`).
    pub(crate) fn wait_synced(&self, target: Lsn) -> Result<()> {
        self.stages.wait_synced(self, target)
    }

    /// The most the written log may lie past `synced`, in LSN bytes: the
    /// writer never writes more than the unsynced bound past the sync
    /// frontier (INV-8), plus the block each end of that range touches.
    pub(crate) fn unsynced_bytes_bound(&self) -> u64 {
        (self.stages.unsynced_blocks() + 2) * crate::format::BLOCK_BYTES as u64
    }

    /// Waits until `target` is written (no counting: the archiver, which is
    /// no committer, [DESIGN §1.17](crate::docs::design#117-continuous-archiving)).
    pub(crate) fn wait_written(&self, target: Lsn) -> Result<()> {
        self.stages.wait_written(self, target, Site::Write)
    }

    /// `Error::LsnOutOfRange` for an LSN past what was appended (reserved).
    pub(crate) fn check_appended(&self, lsn: Lsn) -> Result<()> {
        let end = self.appender.reserved_end();
        if lsn > end {
            return Err(Error::LsnOutOfRange { lsn, end });
        }
        Ok(())
    }

    /// `wait` for the public API: validates, counts, times.
    pub(crate) fn wait_durable(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        self.check_appended(lsn)?;
        if durability == Durability::Buffered {
            return self.stages.check();
        }
        self.metrics.write_requests.add(1);
        // The fast path (already covered) records 0 µs without reading the clock.
        let covered = match durability {
            Durability::Written => self.stages.written() >= lsn,
            _ => self.stages.synced() >= lsn,
        };
        if covered {
            self.metrics.commit_wait_us.record_us(0);
            return self.stages.check();
        }
        let started = Moment::now();
        // INV-44: a bounded wait for room first, if the user asked for one.
        if let Err(error) = self.wait_for_room(lsn) {
            self.metrics.commit_wait_us.record_us(Moment::now().ns_since(started) / 1000);
            return Err(error);
        }
        let result = match durability {
            Durability::Written => self.stages.wait_written(self, lsn, Site::Write),
            _ => self.stages.wait_synced(self, lsn),
        };
        let waited_ns = Moment::now().ns_since(started);
        self.metrics.commit_wait_us.record_us(waited_ns / 1000);
        self.metrics.commit_wait_ns.add(waited_ns);
        if durability == Durability::Synced {
            self.metrics.commit_sync_wait_ns.add(waited_ns);
        }
        result
    }

    /// Records a checkpoint at `lsn` ([DESIGN §1.8](crate::docs::design#18-checkpoints-and-file-space)).
    pub(crate) fn checkpoint(&self, lsn: Lsn) -> Result<()> {
        self.checkpoints.checkpoint(lsn, self.appender.reserved_end(), (&self.stages, self), &self.metrics)
    }

    /// The oldest block no write has reused yet: writes reach at most the
    /// last block holding data before the write intent (a pass ending at a
    /// block's data start leaves that block alone), which reuses the block a
    /// lap before it (INV-25). Never past the floor's block: the file limit is
    /// a lap past it (INV-7, INV-32).
    /// After a resize, never before the oldest block the files hold (§1.18).
    pub(crate) fn oldest_readable_block(&self) -> BlockNo {
        let last_written = last_data_block(Lsn(self.write_intent.load(Ordering::SeqCst)));
        let files = self.files.read();
        BlockNo((last_written.0 + 1).saturating_sub(files.layout.ring_blocks)).max(files.oldest)
    }

    /// The end of the write in flight, or of the last one (INV-25).
    pub(crate) fn write_intent(&self) -> Lsn {
        Lsn(self.write_intent.load(Ordering::SeqCst))
    }

    /// The log's files now (a resize switches them, §1.18).
    pub(crate) fn files(&self) -> Arc<Files> {
        self.files.read().clone()
    }

    /// How many times a resize switched the files. SeqCst: a reader loads
    /// it after the frontier it reads up to (§1.18).
    pub(crate) fn files_generation(&self) -> u64 {
        self.files_generation.load(Ordering::SeqCst)
    }

    /// The I/O gate, exclusively: no write or sync pass runs while it is
    /// held (the resize's switch, §1.18).
    pub(crate) fn files_exclusive(&self) -> parking_lot::RwLockWriteGuard<'_, Arc<Files>> {
        self.files.write()
    }

    /// Replaces the files under the exclusive gate, and counts the switch
    /// before the gate is released.
    pub(crate) fn switch_files(&self, gate: &mut parking_lot::RwLockWriteGuard<'_, Arc<Files>>, files: Arc<Files>) {
        self.checkpoint_wanted_age.store(Self::wanted_age(files.layout.ring_blocks), Ordering::Relaxed);
        **gate = files;
        self.files_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Records what the user asked for; a fixed pipeline takes effect at once.
    /// The caller has started the log threads if `pipeline` needs them.
    pub(crate) fn request_pipeline(&self, pipeline: Pipeline) {
        self.auto.request(pipeline);
        match pipeline {
            Pipeline::GroupCommit => self.set_dedicated(false),
            Pipeline::Dedicated => self.set_dedicated(true),
            Pipeline::Auto => {}
        }
    }

    /// INV-38: an asynchronous waiter arriving now waits on its own thread —
    /// it would be alone on a fast device — unless the user asked for the log
    /// threads (`Pipeline::Dedicated`).
    pub(crate) fn async_waits_in_place(&self) -> bool {
        self.stages.alone_on_a_fast_device() && !self.auto.dedicated_requested()
    }

    /// Switches the mode; never to group commit while asynchronous waiters
    /// need the log threads (INV-27), nor while they came in the last
    /// interval (they would switch it back at once).
    pub(crate) fn set_dedicated(&self, dedicated: bool) {
        if !dedicated && self.async_recent.load(Ordering::Relaxed) {
            return;
        }
        let changed = if dedicated { self.stages.set_dedicated(true) } else { self.stages.set_group_unless_async() };
        if changed {
            self.metrics.pipeline_switches.add(1);
        }
    }

    /// The pipeline running now.
    pub(crate) fn active(&self) -> Pipeline {
        if self.stages.dedicated_active() {
            Pipeline::Dedicated
        } else {
            Pipeline::GroupCommit
        }
    }

    pub(crate) fn metrics(&self) -> Metrics {
        let lsns = LsnLevels {
            log_lsn_current: self.appender.reserved_end().0,
            log_lsn_ready: self.appender.ready().0,
            log_lsn_last_write: self.stages.written().0,
            log_lsn_last_flush: self.stages.synced().0,
            log_lsn_last_checkpoint: self.checkpoints.lsn().0,
        };
        let mut metrics = self.metrics.snapshot(lsns);
        metrics.log_write_time_us = self.stages.write_passes_ns() / 1000;
        let cpu = self.cpu.sample();
        metrics.cpu_usable = cpu.usable;
        metrics.cpu_busy_pct = cpu.busy_pct;
        metrics.pipeline = self.active();
        metrics.async_waiters = self.stages.async_waiters();
        metrics.pipeline_reason = self.auto.reason();
        metrics
    }
}

impl Port for Core {
    type Writer = Writer;
    type Gate<'a> = parking_lot::RwLockReadGuard<'a, Arc<Files>>;

    fn gate(&self) -> Self::Gate<'_> {
        self.files.read()
    }

    fn ready(&self) -> Lsn {
        self.appender.ready()
    }

    fn file_limit(&self) -> BlockNo {
        self.checkpoints.file_limit()
    }

    fn limit_held_by_consumer(&self) -> bool {
        self.checkpoints.held_by_consumer()
    }

    fn write(
        &self,
        files: &Self::Gate<'_>,
        writer: &mut Writer,
        range: (Lsn, Lsn),
        synced: Lsn,
    ) -> std::result::Result<(), IoFailure> {
        // INV-43: never once the directory's lock is released.
        let _owned = self.owner.enter().map_err(|_| released(files, "write"))?;
        // INV-25: readers learn which lap's blocks may be written over before
        // any is. SeqCst: a reader loads it after its read.
        self.write_intent.fetch_max(range.1 .0, Ordering::SeqCst);
        let done = writer.write(self.appender.ring(), files, range, synced)?;
        self.metrics.writes.add(done.calls);
        self.metrics.bytes_written.add(done.bytes);
        self.after_write(files, range.1);
        Ok(())
    }

    fn sync(&self, range: (Lsn, Lsn), started: Moment) -> std::result::Result<Moment, IoFailure> {
        // The gate, shared: a resize's switch waits for the fdatasyncs.
        let files = self.files.read();
        let _owned = self.owner.enter().map_err(|_| released(&files, "fdatasync"))?;
        let fsyncs = files.sync_range(range, started, |elapsed_ns| {
            self.metrics.fsync_us.record_us(elapsed_ns / 1000);
            // The sync role's own counter (one syncer at a time).
            self.metrics.fsync_ns.add_as_sole_writer(elapsed_ns);
        })?;
        self.metrics.fsyncs.add(fsyncs.calls);
        Ok(fsyncs.finished)
    }

    fn file_space_short(&self, limit: BlockNo) {
        self.note_full(limit, self.appender.ready());
    }

    fn count_wait(&self, site: Site, had_to_wait: bool, waited: Waited) {
        let counters = match site {
            Site::Write => &self.metrics.on_write,
            Site::BufferSpace => &self.metrics.on_buffer_space,
            Site::Flush => &self.metrics.on_flush,
            Site::Ready => &self.metrics.on_ready,
            Site::FileSpace => &self.metrics.on_file_space,
            Site::Consumer => &self.metrics.on_consumer,
            Site::LogWriter => &self.metrics.log_writer,
            Site::LogFlusher => &self.metrics.log_flusher,
        };
        counters.record(had_to_wait, waited);
    }

    /// Not at all unless the CPU monitor sees spare CPU (§1.10), then about two
    /// passes if a pass is shorter than a park.
    fn spin_for(&self, pass: &PassTime) -> Spin {
        if !self.cpu.spin_allowed() {
            return Spin::NONE;
        }
        Spin { budget: pass.spin_budget(), spinners_max: self.cpu.spinners_max() }
    }

    /// The CPU monitor's sample and `Auto`'s decision, each at most every
    /// 100 ms; what `Auto` reads is read only when it is due. Otherwise two
    /// loads.
    fn tick(&self, now: Moment) {
        self.cpu.maybe_sample(now);
        // Asynchronous waiters switched the log to its log threads (INV-27);
        // a log set to group commit goes back once none came for a whole
        // interval, not after each, and `Auto` leaves them alone meanwhile.
        if self.cpu.due(&self.async_check_due_ns, now, ASYNC_IDLE_BEFORE_GROUP) {
            let seen = self.async_seen.swap(false, Ordering::Relaxed);
            self.async_recent.store(seen, Ordering::Relaxed);
            if !seen && self.auto.group_requested() && self.stages.dedicated_active() {
                self.set_dedicated(false);
            }
        }
        let readings = || Readings {
            wait_ns: self.metrics.commit_wait_ns.get(),
            sync_wait_ns: self.metrics.commit_sync_wait_ns.get(),
            sync_pass_ns: self.stages.sync_pass_ns(),
            written: self.stages.written().0,
            active: self.active(),
        };
        if let Some(pipeline) = self.auto.evaluate(now, &self.cpu, readings) {
            self.set_dedicated(pipeline == Pipeline::Dedicated);
        }
    }
}

/// The failure of a write or sync attempted after the directory's lock was
/// released (INV-43): nothing more is written.
fn released(files: &Files, op: &'static str) -> IoFailure {
    let source = std::io::Error::other("the log was closed and its directory lock released: nothing more is written");
    IoFailure { op, path: files.dir(), source }
}

/// One stretch covering two tail moves (either may be absent): one
/// notification wakes the waiters of both.
fn merge(a: Moved, b: Moved) -> Moved {
    match (a, b) {
        (Some((a_old, a_new)), Some((b_old, b_new))) => Some((a_old.min(b_old), a_new.max(b_new))),
        (one, None) | (None, one) => one,
    }
}
