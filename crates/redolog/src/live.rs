//! Reading an open log: the groups from an LSN up to the durable LSN, while
//! appends, checkpoints and the pipelines go on ([DESIGN §4.1](crate::docs::design#41-reading-an-open-log-logread_from),
//! INV-23..INV-25).
//!
//! The reader reads the files (the OS page cache, for what was written
//! recently) with recovery's own group reader, so it returns the groups,
//! boundaries and bytes recovery would. Three things make that safe on a log
//! that is being written:
//! - **a limit**: it reads only below `synced`, so every group it returns is
//!   durable, and every block wholly below the limit is final (INV-23);
//! - **a stale tail**: the block holding the limit may be rewritten as it
//!   fills, so when the limit moves the reader forgets what it read from that
//!   block on, and a block that fails its checksum there (a read that raced
//!   the rewrite) is read again (INV-24);
//! - **a reuse check**: the space of a block older than the checkpoint's may
//!   be written over, so a group is returned only if, after it was read, its
//!   first block is still at or past the oldest readable block; otherwise the
//!   reader fails with [`Error::Reused`], never with bytes from another lap
//!   (INV-25).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::core::Core;
use crate::error::{Error, Result};
use crate::format::BlockState;
use crate::log::{Log, LogRef};
use crate::lsn::{BlockNo, Lsn};
use crate::recovery::{BlockReader, Group, GroupReader, Step, StreamEnd};

/// Reads of a block that failed its checksum at the sync frontier before the
/// reader calls it damage: a read races the writer's rewrite of the partial
/// last block for microseconds, so a few retries always see it whole.
const TORN_READ_RETRIES: u32 = 64;

/// A reader on an open log: the groups from an LSN up to the durable LSN,
/// read while the log is written. Made by [`crate::Log::read_from`].
///
/// `try_next` (and the `Iterator`) returns the next durable group or, once
/// the reader has caught up, `None`; `next_timeout` waits for one, for
/// tailing. Every group returned is the one recovery would return at that
/// LSN, with the same boundaries and bytes, and is durable (synced).
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// let start = log.end_lsn();
/// log.commit(b"first", Durability::Synced).unwrap();
/// log.commit(b"second", Durability::Synced).unwrap();
/// let records: Vec<Vec<u8>> = log
///     .read_from(start)
///     .unwrap()
///     .map(|group| group.unwrap().records().next().unwrap().to_vec())
///     .collect();
/// assert_eq!(records, [b"first".to_vec(), b"second".to_vec()]);
/// ```
pub struct LogReader<'a> {
    log: LogRef<'a>,
    groups: GroupReader,
    /// The files generation the reader reads ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    generation: u64,
    /// The start of the next group to return.
    position: Lsn,
    /// The sync frontier the reader last read up to.
    limit: Lsn,
    /// Whether `position` was checked to be a group boundary (`read_from`
    /// takes any LSN; the check needs the bytes before it to be durable).
    checked: bool,
    /// Read up to `written` rather than `synced`: the archiver's reader
    /// ([DESIGN §1.17](crate::docs::design#117-continuous-archiving)), never the public one (INV-23).
    to_written: bool,
    /// The `Stream`'s last look at a closed or poisoned log, and its end.
    stream_last_look: bool,
    stream_done: bool,
}

impl std::fmt::Debug for LogReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader").field("position", &self.position).field("limit", &self.limit).finish()
    }
}

/// The reader as an asynchronous stream, for tailing from a task: each item
/// the next durable group (or the error `try_next` gives); the stream
/// waits, registered with the log, while nothing more is durable — it
/// demands no sync, as `next_timeout` does not — and ends once a closed
/// log was read to its end. A poisoned log gives its poison once, then the
/// end. Waiting costs the log one fence and one load per sync pass while no
/// task waits.
///
/// ```
/// use std::future::poll_fn;
/// use std::pin::Pin;
/// use std::sync::Arc;
/// use futures_core::Stream;
/// use redolog::{Config, Durability, Log};
/// # let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// let log = Arc::new(log);
/// let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
/// let mut tail = log.read_from_owned(log.end_lsn()).unwrap();
/// let follower = runtime.spawn(async move {
///     let mut shipped = Vec::new();
///     while let Some(group) = poll_fn(|cx| Pin::new(&mut tail).poll_next(cx)).await {
///         shipped.push(group.unwrap().records().next().unwrap().to_vec());
///     }
///     shipped // the stream ended: the log was closed and read to its end
/// });
/// log.commit(b"one", Durability::Synced).unwrap();
/// log.commit(b"two", Durability::Synced).unwrap();
/// log.close().unwrap();
/// assert_eq!(runtime.block_on(follower).unwrap(), [b"one".to_vec(), b"two".to_vec()]);
/// ```
impl futures_core::Stream for LogReader<'_> {
    type Item = Result<Group>;

    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Result<Group>>> {
        let this = self.get_mut();
        loop {
            if this.stream_done {
                return Poll::Ready(None);
            }
            match this.try_next() {
                Ok(Some(group)) => return Poll::Ready(Some(Ok(group))),
                Err(error) => return Poll::Ready(Some(Err(error))),
                Ok(None) => {}
            }
            if let Some(poll) = this.poll_caught_up(context) {
                return poll;
            }
        }
    }
}

// The readers' constructors live here, with the reader, as `durable.rs`
// keeps the futures' (`log` does not import this module).
impl Log {
    /// A reader of the groups from `from` on, while the log is written
    /// ([DESIGN §4.1](crate::docs::design#41-reading-an-open-log-logread_from)): it returns the groups recovery would return,
    /// byte for byte, up to the durable LSN, and never one that is not
    /// durable. `from` must be a group boundary: an LSN `append_group`,
    /// `begin_group` or `end_lsn` returned, or a group's start from recovery
    /// or from an earlier reader. Groups stay readable until a checkpoint
    /// past them lets the log write over their space: reading there fails
    /// with [`Error::Reused`](crate::Error::Reused), never with other bytes.
    ///
    /// ```
    /// use redolog::{Config, Durability, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let first = log.append_group(&[b"page 7: set x", b"page 9: set y"]).unwrap();
    /// let second = log.commit(b"page 7: set z", Durability::Synced).unwrap();
    /// // From the end of the first group: the second one.
    /// let groups: Vec<_> = log.read_from(first).unwrap().map(Result::unwrap).collect();
    /// assert_eq!(groups.len(), 1);
    /// assert_eq!((groups[0].start_lsn(), groups[0].end_lsn()), (first, second));
    /// ```
    pub fn read_from(&self, from: Lsn) -> Result<LogReader<'_>> {
        LogReader::new(LogRef::Borrowed(self), from)
    }

    /// [`read_from`](Log::read_from) on a shared log: the reader holds its
    /// own `Arc` (and keeps the log open while it lives), so it can be kept
    /// in a struct or a task beside the `Arc` — a replica's session, say.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use redolog::{Config, Durability, Log, LogReader};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let log = Arc::new(log);
    /// struct Replica { tail: LogReader<'static> }
    /// let mut replica = Replica { tail: log.read_from_owned(log.end_lsn()).unwrap() };
    /// log.commit(b"shipped", Durability::Synced).unwrap();
    /// let group = replica.tail.try_next().unwrap().unwrap();
    /// assert_eq!(group.records().next().unwrap(), b"shipped");
    /// ```
    pub fn read_from_owned(self: &Arc<Self>, from: Lsn) -> Result<LogReader<'static>> {
        LogReader::new(LogRef::Shared(Arc::clone(self)), from)
    }
}

/// What may still come to a reader that has caught up
/// (`LogReader::after_catching_up`).
enum Coming {
    /// The log is open: more may be written and synced.
    More,
    /// Closed or poisoned, but a group may have become readable since the
    /// reader looked: look once more.
    LastLook,
    /// Closed or poisoned, and everything readable was read.
    Nothing,
}

/// What one attempt to read the next group found.
enum Attempt {
    Group(Group),
    /// Nothing durable past the position yet.
    CaughtUp,
    /// A block at the frontier did not read whole: read again.
    Again,
    /// The group at the position was torn by the crash before this session,
    /// which began inside it: the reader went on at the session's start
    /// (INV-46).
    Skipped,
}

impl<'a> LogReader<'a> {
    pub(crate) fn new(log: LogRef<'a>, from: Lsn) -> Result<Self> {
        let core = log.core();
        core.check_appended(from)?;
        if !from.is_data_position(core.files().seal.geometry()) {
            return Err(Error::InvalidLsn { lsn: from, reason: "it points into a block header or trailer" });
        }
        // The generation before the files: a switch in between is seen at
        // the first read, which then reads the new files again.
        let generation = core.files_generation();
        let groups = GroupReader::new(BlockReader::new(core.files()), from, true).in_session_from(core.session_start);
        let reader = LogReader {
            log,
            groups,
            generation,
            position: from,
            limit: from,
            checked: false,
            to_written: false,
            stream_last_look: false,
            stream_done: false,
        };
        reader.check_not_reused(from)?;
        Ok(reader)
    }

    /// A reader that also returns groups written but not yet synced: they
    /// are final in this session (the writer rewrites only the block holding
    /// `written`, INV-24 handles it as it handles `synced`'s), but a crash may
    /// lose them. For the archiver, which syncs its copy while the log syncs
    /// its own ([DESIGN §1.17](crate::docs::design#117-continuous-archiving)).
    pub(crate) fn reading_written(mut self) -> Self {
        self.to_written = true;
        self
    }

    /// How far the reader may read now.
    fn frontier(&self) -> Lsn {
        let stages = &self.log.core().stages;
        if self.to_written {
            stages.written()
        } else {
            stages.synced()
        }
    }

    /// The start of the next group the reader returns: after a group, its end.
    pub fn position(&self) -> Lsn {
        self.position
    }

    /// The next durable group, or `None` once the reader has caught up with
    /// the durable LSN. Fails with [`Error::Reused`] if a checkpoint let the
    /// log write over the position, [`Error::InvalidLsn`] if the LSN given to
    /// `read_from` is not a group boundary, and [`Error::Corruption`] if
    /// durable bytes do not read back.
    ///
    /// Groups follow each other without a gap, with one exception: a reader
    /// from before the end a crash's recovery found, when that recovery
    /// resumed inside a group the crash tore, skips the torn group and goes
    /// on where this session's groups begin, so the next group returned
    /// starts past the end of the one before it; [`position`](Self::position)
    /// moves there with it.
    pub fn try_next(&mut self) -> Result<Option<Group>> {
        let mut torn = 0;
        loop {
            match self.attempt()? {
                Attempt::Group(group) => return Ok(Some(group)),
                Attempt::CaughtUp => return Ok(None),
                Attempt::Skipped => {}
                Attempt::Again if torn < TORN_READ_RETRIES => {
                    torn += 1;
                    std::thread::yield_now();
                }
                Attempt::Again => return Err(self.damage_at_frontier()),
            }
        }
    }

    /// The next group, waiting up to `timeout` for one to become durable
    /// (tailing: the reader demands no sync; it follows the log's own).
    /// `Ok(None)`: the time ran out. Once the reader has caught up with a log
    /// that was closed or poisoned, nothing more will come: `Error::Closed` or
    /// the poison.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redolog::{Config, Durability, Error, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let mut tail = log.read_from(log.end_lsn()).unwrap();
    /// assert!(tail.next_timeout(Duration::from_millis(1)).unwrap().is_none());
    /// log.commit(b"news", Durability::Synced).unwrap();
    /// let group = tail.next_timeout(Duration::from_secs(5)).unwrap().unwrap();
    /// assert_eq!(group.records().next().unwrap(), b"news");
    /// log.close().unwrap();
    /// assert!(matches!(tail.next_timeout(Duration::from_secs(5)), Err(Error::Closed)));
    /// ```
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Group>> {
        let deadline = Instant::now() + timeout;
        let mut last_look = false;
        loop {
            if let Some(group) = self.try_next()? {
                return Ok(Some(group));
            }
            let stages = &self.log.core().stages;
            match self.after_catching_up(last_look) {
                Coming::Nothing => {
                    stages.check()?;
                    return Err(Error::Closed);
                }
                Coming::LastLook => {
                    last_look = true;
                    continue;
                }
                Coming::More => {}
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            // Wait for the frontier to move past what was read: `synced` past
            // the position is not enough when the frontier stops inside the
            // next group (the writer waits for file space there); waiting for
            // that alone spun for ever, past any time limit.
            stages.wait_synced_past(self.position.max(self.limit), deadline);
        }
    }

    /// What may still come to a reader that has caught up (`try_next` found
    /// nothing), `looked`: whether it took its last look already. A log
    /// neither closed nor poisoned may write more. Once it is, nothing more
    /// comes when everything readable was read — at the frontier, or before
    /// a group the frontier cuts (a poisoned log's frontier can stop inside
    /// one) — but one more look first, for a group that became readable
    /// meanwhile. `next_timeout` and the `Stream` both follow this rule.
    fn after_catching_up(&self, looked: bool) -> Coming {
        let stages = &self.log.core().stages;
        if !stages.is_poisoned() && !stages.is_shutdown() {
            Coming::More
        } else if self.frontier() <= self.position || looked {
            Coming::Nothing
        } else {
            Coming::LastLook
        }
    }

    /// What the `Stream` returns once `try_next` found nothing: the end (a
    /// closed log read to its end, or after the poison was returned once),
    /// the poison, `None` to look again (something became readable, or this
    /// is the last look at a closed log), or pending with the task's waker
    /// registered (INV-47).
    fn poll_caught_up(&mut self, context: &mut Context<'_>) -> Option<Poll<Option<Result<Group>>>> {
        let stages = &self.log.core().stages;
        match self.after_catching_up(self.stream_last_look) {
            // The poison (once: the stream is done after it) or the end.
            Coming::Nothing => {
                self.stream_done = true;
                return Some(Poll::Ready(stages.check().err().map(Err)));
            }
            Coming::LastLook => {
                self.stream_last_look = true;
                return None;
            }
            Coming::More => {}
        }
        let past = self.position.max(self.limit);
        stages.register_tail_waker(context.waker());
        // INV-47: the second look, after the registration.
        if stages.synced() > past || stages.is_poisoned() || stages.is_shutdown() {
            return None;
        }
        Some(Poll::Pending)
    }

    /// One try at the next group.
    fn attempt(&mut self) -> Result<Attempt> {
        let synced = self.frontier();
        if synced <= self.position {
            return Ok(Attempt::CaughtUp);
        }
        // §1.18: a frontier a pass stored after a resize's switch comes with
        // the new files; the old ones keep everything below older frontiers.
        let generation = self.log.core().files_generation();
        if generation != self.generation {
            self.generation = generation;
            self.groups.blocks.switch_files(self.log.core().files());
            self.groups.restart_at(self.position, self.position.block());
        }
        // INV-46: before the session's start, no further than it: a group
        // that runs past it was torn by the crash before this session, and
        // the bytes past it are this session's.
        let session_start = self.log.core().session_start;
        let limit = if self.position < session_start { synced.min(session_start) } else { synced };
        if limit != self.limit {
            // INV-24: from the old frontier's block on, blocks were partial or
            // unwritten when read; read them again.
            self.groups.restart_at(self.position, self.limit.block());
            self.groups.set_limit(limit);
            self.limit = limit;
        }
        if !self.checked {
            if !self.check_boundary()? {
                return Ok(Attempt::Again);
            }
            self.checked = true;
        }
        let step = self.groups.next_step()?;
        let oldest = self.log.core().oldest_readable_block();
        match step {
            Step::Group(group) => {
                // INV-25: the group's space was not reused before or while it
                // was read. Its blocks lie in one lap: the oldest block is its
                // first.
                self.check_not_reused_since(group.start_lsn(), oldest)?;
                self.position = group.end_lsn();
                Ok(Attempt::Group(group))
            }
            // The group runs past the session's start: torn (INV-46). This
            // session's groups begin there.
            Step::End { why: StreamEnd::Limit, .. } if self.position < session_start => {
                self.position = session_start;
                self.checked = true;
                self.groups.restart_at(session_start, session_start.block());
                Ok(Attempt::Skipped)
            }
            // The group runs past the durable LSN: it is not returned yet.
            Step::End { why: StreamEnd::Limit, .. } => {
                self.groups.restart_at(self.position, self.limit.block());
                Ok(Attempt::CaughtUp)
            }
            // Durable bytes that did not read back: a checkpoint reused the
            // space (a block of a later lap), or a read raced the rewrite of
            // the frontier's block.
            Step::End { at, .. } => self.unreadable(at, oldest),
            Step::Damaged(damage) => self.unreadable(damage.lsn, oldest),
        }
    }

    /// Durable bytes at `at` did not read back: `Error::Reused` if a checkpoint
    /// let the log write over them, a read again if `at` lies in the block at
    /// the sync frontier (INV-24), corruption otherwise.
    fn unreadable(&mut self, at: Lsn, oldest: BlockNo) -> Result<Attempt> {
        self.check_not_reused_since(self.position, oldest)?;
        self.groups.restart_at(self.position, self.position.block());
        if at.block() >= self.limit.block() {
            return Ok(Attempt::Again);
        }
        Err(self.groups.blocks.corruption(at, "durable log bytes do not read back".into()))
    }

    /// `Error::Reused` if the space of `lsn` may have been written over.
    fn check_not_reused(&self, lsn: Lsn) -> Result<()> {
        self.check_not_reused_since(lsn, self.log.core().oldest_readable_block())
    }

    fn check_not_reused_since(&self, lsn: Lsn, oldest: BlockNo) -> Result<()> {
        if lsn.block() < oldest {
            return Err(Error::Reused { lsn, oldest: self.log.core().checkpoints.floor() });
        }
        Ok(())
    }

    /// The error for a block at the frontier that never read back whole.
    fn damage_at_frontier(&self) -> Error {
        self.groups.blocks.corruption(self.position, "the block at the durable LSN never read back whole".into())
    }

    /// Checks that `position` is a group boundary: a block records its first
    /// boundary (INV-9), so the groups from there to `position` must end
    /// exactly at it. The byte at `position` is durable (the caller read
    /// `synced`). `Ok(false)`: the block did not read whole; read again.
    fn check_boundary(&mut self) -> Result<bool> {
        let from = self.position;
        let mut blocks = BlockReader::new(self.log.core().files());
        // An encrypted block's `first_group` is trusted once its tag verified.
        let state = blocks.state(from.block())?;
        let authentic = matches!(state, BlockState::Valid(_)) && blocks.opened(from.block())?.is_ok();
        let (BlockState::Valid(header), true) = (state, authentic) else {
            let oldest = self.log.core().oldest_readable_block();
            // Reused, or damaged, or (at the frontier) read again.
            self.unreadable(from, oldest)?;
            return Ok(false);
        };
        let mut first = Lsn(from.block().start().0 + header.first_group as u64);
        let start = self.log.core().session_start;
        let forced = header.first_group == 0 || first > from;
        if forced && from < start && from.block() == start.block() {
            // INV-46: this block's `first_group` may point at the session's
            // start, past the earlier session's groups in it: walk from an
            // earlier block's.
            match group_start_before(self.log.core(), &mut blocks, from.block())? {
                Some(earlier) => first = earlier,
                None => return Err(not_a_boundary(from)),
            }
        } else if forced {
            return Err(not_a_boundary(from));
        }
        let mut walk = GroupReader::new(blocks, first, false).in_session_from(start).with_limit(from);
        while walk.position() < from {
            match walk.next_step()? {
                Step::Group(_) => {}
                // A group runs over `position`.
                Step::End { why: StreamEnd::Limit, .. } | Step::Damaged(_) => return Err(not_a_boundary(from)),
                Step::End { .. } => return Ok(false),
            }
        }
        // The limit stops a group only before it begins: a group that
        // starts before `position` and ends after it is read whole, and
        // `position` lies inside it (found by a check from outside the
        // project: the reader then parsed from inside a group).
        if walk.position() != from {
            return Err(not_a_boundary(from));
        }
        Ok(true)
    }
}

/// The first group start recorded in a block before `block` (its
/// `first_group`), still readable; `None` if none is.
fn group_start_before(core: &Core, blocks: &mut BlockReader, block: BlockNo) -> Result<Option<Lsn>> {
    let oldest = core.oldest_readable_block();
    let mut block = block;
    while block > oldest {
        block = BlockNo(block.0 - 1);
        match blocks.checked_state(block)? {
            BlockState::Valid(header) if header.first_group != 0 => {
                return Ok(Some(Lsn(block.start().0 + header.first_group as u64)));
            }
            BlockState::Valid(_) => {}
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// The first group boundary at or after `from`, a durable data position:
/// `from` itself if a group starts or ends there, else the end of the group
/// that holds it (a checkpoint may lie inside a group; an archive starts at
/// whole groups, [DESIGN §1.17](crate::docs::design#117-continuous-archiving)). Waits, up to `timeout`, for the log
/// to sync that far; `Ok(None)` if it did not.
pub(crate) fn next_boundary(core: &Core, from: Lsn, timeout: Duration) -> Result<Option<Lsn>> {
    let start = core.session_start;
    if from < start {
        // INV-46: durable; a group that runs past the session's start was
        // torn, and the boundary after it is the session's start.
        return Ok(Some(boundary_in(core, from, start)?.unwrap_or(start)));
    }
    let deadline = Instant::now() + timeout;
    loop {
        let synced = core.stages.synced();
        if from >= synced && core.appender.reserved_end() == from {
            // Nothing appended past it: the end of the last group.
            return Ok(Some(from));
        }
        if from < synced {
            if let Some(boundary) = boundary_in(core, from, synced)? {
                return Ok(Some(boundary));
            }
            // Everything appended is durable: the end is the end of the last
            // group, the boundary after `from` even when that group ends at
            // a block's last data byte (no block after it records it).
            if core.appender.reserved_end() == synced {
                return Ok(Some(synced));
            }
        }
        core.stages.check()?;
        if core.stages.is_shutdown() {
            return Err(Error::Closed);
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        // Have what appenders finished made durable (a `Synced` wait, not
        // counted), then look again: only as far as the files have room. A
        // full log writes on only after a checkpoint, which the caller's own
        // consumer may hold back (the simulation found `Archiver::start` on
        // a full log waiting for ever, past its timeout).
        let target = core.appender.ready().min(core.checkpoints.file_limit().data_start());
        if target > synced {
            core.wait_synced(target)?;
        } else {
            core.stages.wait_synced_past(synced, deadline);
        }
    }
}

/// `next_boundary` within the log durable below `synced`: `None` if the
/// boundary is not there yet.
fn boundary_in(core: &Core, from: Lsn, synced: Lsn) -> Result<Option<Lsn>> {
    let mut blocks = BlockReader::new(core.files());
    let mut block = from.block();
    // Up to the sync frontier's block; what lies past `synced` is not final
    // (INV-24): a boundary found there is looked for again later.
    while block <= synced.block() {
        let BlockState::Valid(header) = blocks.checked_state(block)? else {
            if block == synced.block() {
                // The frontier's block, not written yet.
                return Ok(None);
            }
            // Durable, and held by the caller's consumer: damage.
            return Err(blocks.corruption(block.data_start(), "a durable block does not read back".into()));
        };
        if header.first_group != 0 {
            let first = Lsn(block.start().0 + header.first_group as u64);
            if first >= from {
                // The bytes from `from` to `first` end the group that holds it.
                return Ok((first <= synced).then_some(first));
            }
            let mut walk =
                GroupReader::new(blocks, first, false).in_session_from(core.session_start).with_limit(synced);
            loop {
                match walk.next_step()? {
                    Step::Group(group) if group.end_lsn() >= from => return Ok(Some(group.end_lsn())),
                    Step::Group(_) => {}
                    Step::End { .. } => return Ok(None),
                    Step::Damaged(damage) => return Err(damage.into_corruption()),
                }
            }
        }
        block = BlockNo(block.0 + 1);
    }
    Ok(None)
}

impl Iterator for LogReader<'_> {
    type Item = Result<Group>;

    /// `try_next`: ends once the reader has caught up with the durable LSN.
    fn next(&mut self) -> Option<Result<Group>> {
        self.try_next().transpose()
    }
}

fn not_a_boundary(lsn: Lsn) -> Error {
    Error::InvalidLsn { lsn, reason: "no group starts there (read from a group's start or end)" }
}
