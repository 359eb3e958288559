//! The state every thread of a log shares, and the small operations on it.
//!
//! Lock order (written once): `checkpoint` coordinator → write role → sync role.
//! A thread holding the sync role never takes the write role; the writer may wait
//! for a sync while holding the write role (INV-8), never the other way round.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};

use crate::buffer::RingBuffer;
use crate::config::Config;
use crate::cpu::CpuMonitor;
use crate::error::Error;
use crate::layout::Layout;
use crate::link_buf::LinkBuf;
use crate::lsn::{BlockNo, Lsn, Sn};
use crate::metrics::{LsnLevels, Metrics, MetricsRecorder};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use crate::wait::{EventSlots, PassTime, Spin};
use crate::writer::{Files, IoFailure, Writer};

/// Bit 63 of `sn`: the log is closed; appends fail with `Error::Closed`.
pub(crate) const SN_CLOSED: u64 = 1 << 63;

/// Wait slots per event array, as MySQL's 2048 write/flush events but halved:
/// at 1024 slots × 512 bytes a lap spans 512 KiB of log, more than any commit
/// group we measured (docs/BENCHMARKS.md).
const EVENT_SLOTS: usize = 1024;

/// A role of the commit protocol (docs/DESIGN.md §1.5): held by at most one
/// thread, taken only with `try_take`.
pub(crate) struct Role<T> {
    held: AtomicBool,
    state: Mutex<T>,
}

impl<T> Role<T> {
    fn new(state: T) -> Self {
        Role { held: AtomicBool::new(false), state: Mutex::new(state) }
    }

    /// Takes the role if nobody holds it.
    pub(crate) fn try_take(&self) -> Option<MutexGuard<'_, T>> {
        // SeqCst: waiters read `held` in their predicates after registering
        // demand; releasers read demand after clearing `held` (INV-11).
        self.held.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).ok()?;
        // Never blocks: the previous holder unlocked before clearing `held`.
        Some(self.state.lock())
    }

    /// Gives the role up. The caller then kicks a successor (INV-11).
    pub(crate) fn release(&self, guard: MutexGuard<'_, T>) {
        drop(guard);
        self.held.store(false, Ordering::SeqCst);
    }

    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
}

/// The first I/O failure, kept to report on every later call (INV-6).
#[derive(Debug)]
pub(crate) struct Poison {
    op: &'static str,
    path: PathBuf,
    source: Arc<io::Error>,
}

/// The shared state of an open log.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) layout: Layout,
    pub(crate) files: Files,
    pub(crate) log_id: u128,
    /// Blocks the writer may run ahead of the sync frontier (INV-8).
    pub(crate) unsynced_blocks: u64,
    pub(crate) ring: RingBuffer,
    pub(crate) link: LinkBuf,
    /// End of what was handed to the OS (INV-4).
    pub(crate) written: CachePadded<AtomicU64>,
    /// End of what was synced (INV-5).
    pub(crate) synced: CachePadded<AtomicU64>,
    /// Largest LSN a parked thread needs written / synced. Only grows.
    pub(crate) write_demand: CachePadded<AtomicU64>,
    pub(crate) sync_demand: CachePadded<AtomicU64>,
    pub(crate) write_role: Role<Writer>,
    pub(crate) sync_role: Role<()>,
    /// The writer may write blocks below this (INV-7).
    pub(crate) file_limit_block: CachePadded<AtomicU64>,
    pub(crate) checkpoint_lsn: AtomicU64,
    /// The checkpoint coordinator (docs/DESIGN.md §1.8). First in the lock order.
    pub(crate) checkpoint_state: Mutex<crate::checkpoint::CheckpointState>,
    /// Waiters for `ready` (the writer waiting for appenders, link-space waiters).
    pub(crate) ready_events: EventSlots,
    /// Waiters for `written` (Written commits, ring-space waiters).
    pub(crate) write_events: EventSlots,
    /// Waiters for `synced`.
    pub(crate) sync_events: EventSlots,
    /// The writer waiting for a checkpoint.
    pub(crate) space_events: EventSlots,
    /// How long a write pass and a sync pass take: the waiters' spin budgets.
    pub(crate) write_pass: PassTime,
    pub(crate) sync_pass: PassTime,
    /// The dedicated log flusher waiting for `written` to pass `synced`.
    pub(crate) flusher_event: EventSlots,
    /// Dedicated log threads waiting for their mode or their role (§1.11).
    pub(crate) pipeline_events: EventSlots,
    /// The pipeline the user asked for (`PIPELINE_*`).
    pub(crate) requested_pipeline: AtomicU8,
    /// The pipeline running now: `PIPELINE_GROUP` or `PIPELINE_DEDICATED`.
    pub(crate) active_pipeline: CachePadded<AtomicU8>,
    /// `Pipeline::Auto`'s state (commit/auto.rs), and when it is next due (ns
    /// since the CPU monitor's epoch).
    pub(crate) auto: Mutex<crate::commit::AutoState>,
    pub(crate) auto_due_ns: AtomicU64,
    /// Usable CPUs and the process's CPU load: gates spinning (§1.10).
    pub(crate) cpu: CpuMonitor,
    poison: OnceLock<Poison>,
    poisoned: AtomicBool,
    /// Set when the log shuts down: stops the flusher and a writer waiting for space.
    pub(crate) shutdown: AtomicBool,
    pub(crate) metrics: MetricsRecorder,
}

/// The positions a log starts from (after creation or recovery).
pub(crate) struct StartState {
    pub(crate) end: Lsn,
    pub(crate) checkpoint_lsn: Lsn,
    pub(crate) checkpoint_no: u64,
    /// The image of the block holding `end`, to load into the ring.
    pub(crate) last_block: Vec<u8>,
}

impl Shared {
    pub(crate) fn new(
        config: Config,
        layout: Layout,
        files: Files,
        (log_id, unsynced_bytes_max): (u128, u64),
        start: StartState,
    ) -> Self {
        let mut ring = RingBuffer::new(config.ring_bytes());
        ring.load_block(start.end.block(), &start.last_block);
        // Reach 1/16 of the ring, as MySQL sizes recent_written (1 MiB by default).
        let link_capacity = (config.ring_bytes() >> (4 + crate::link_buf::GRANULE_SHIFT)).max(256);
        let end = start.end.0;
        Shared {
            layout,
            files,
            log_id,
            unsynced_blocks: unsynced_bytes_max / crate::format::BLOCK_BYTES as u64,
            ring,
            link: LinkBuf::new(link_capacity, end, start.end.to_sn().0),
            written: CachePadded::new(AtomicU64::new(end)),
            synced: CachePadded::new(AtomicU64::new(end)),
            write_demand: CachePadded::new(AtomicU64::new(end)),
            sync_demand: CachePadded::new(AtomicU64::new(end)),
            write_role: Role::new(Writer::new()),
            sync_role: Role::new(()),
            file_limit_block: CachePadded::new(AtomicU64::new(start.checkpoint_lsn.block().0 + layout.ring_blocks)),
            checkpoint_lsn: AtomicU64::new(start.checkpoint_lsn.0),
            checkpoint_state: Mutex::new(crate::checkpoint::CheckpointState {
                number: start.checkpoint_no,
                lsn: start.checkpoint_lsn,
            }),
            ready_events: EventSlots::new(EVENT_SLOTS),
            write_events: EventSlots::new(EVENT_SLOTS),
            sync_events: EventSlots::new(EVENT_SLOTS),
            space_events: EventSlots::new(1),
            write_pass: PassTime::default(),
            sync_pass: PassTime::default(),
            flusher_event: EventSlots::new(1),
            pipeline_events: EventSlots::new(1),
            requested_pipeline: AtomicU8::new(crate::commit::pipeline_code(config.pipeline)),
            active_pipeline: CachePadded::new(AtomicU8::new(crate::commit::initial_active(config.pipeline))),
            auto: Mutex::new(crate::commit::AutoState::new()),
            auto_due_ns: AtomicU64::new(0),
            cpu: CpuMonitor::new(),
            poison: OnceLock::new(),
            poisoned: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            metrics: MetricsRecorder::new(),
            config,
        }
    }

    pub(crate) fn written(&self) -> Lsn {
        Lsn(self.written.load(Ordering::SeqCst))
    }

    pub(crate) fn synced(&self) -> Lsn {
        Lsn(self.synced.load(Ordering::SeqCst))
    }

    pub(crate) fn ready(&self) -> Lsn {
        Lsn(self.link.tail())
    }

    /// Next data byte to reserve; bit 63 is `SN_CLOSED` (INV-1). It lives on
    /// the link buffer's tail line: every append touches both.
    pub(crate) fn sn(&self) -> &AtomicU64 {
        self.link.reserved()
    }

    pub(crate) fn reserved_end(&self) -> Lsn {
        Sn(self.sn().load(Ordering::SeqCst) & !SN_CLOSED).to_lsn()
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    fn poison_error(&self) -> Error {
        match self.poison.get() {
            Some(poison) => Error::Poisoned { op: poison.op, path: poison.path.clone(), source: poison.source.clone() },
            None => Error::Closed,
        }
    }

    pub(crate) fn check_poison(&self) -> Result<(), Error> {
        if self.is_poisoned() {
            return Err(self.poison_error());
        }
        Ok(())
    }

    /// Records the first I/O failure, wakes every waiter so it sees the poison,
    /// and returns the error for the failing call (INV-6).
    pub(crate) fn poison(&self, failure: IoFailure) -> Error {
        self.poison.get_or_init(|| Poison { op: failure.op, path: failure.path, source: Arc::new(failure.source) });
        self.poisoned.store(true, Ordering::SeqCst);
        self.wake_everyone();
        self.poison_error()
    }

    /// Poisons the log if the calling thread is panicking: a panic while holding
    /// a role (a failing `Storage`, say) leaves state nobody can vouch for, such
    /// as whether an fdatasync happened or how far a write got, so it fails the
    /// log like an I/O error (INV-6) instead of letting a successor retry the
    /// operation, and wakes every waiter instead of leaving them parked.
    pub(crate) fn poison_if_panicking(&self, op: &'static str) {
        if std::thread::panicking() {
            let thread = std::thread::current().name().unwrap_or("an unnamed thread").to_owned();
            let source = std::io::Error::other(format!("the thread panicked during {op}"));
            self.poison(IoFailure { op, path: thread.into(), source });
        }
    }
}

/// Calls [`Shared::poison_if_panicking`] when dropped: held across a stretch of
/// code that does I/O outside the write and sync roles (a checkpoint) or for a
/// log thread's whole life.
pub(crate) struct PoisonOnPanic<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) op: &'static str,
}

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        self.shared.poison_if_panicking(self.op);
    }
}

impl Shared {
    pub(crate) fn wake_everyone(&self) {
        self.ready_events.notify_all();
        self.write_events.notify_all();
        self.sync_events.notify_all();
        self.space_events.notify_all();
        self.flusher_event.notify_all();
        self.pipeline_events.notify_all();
    }

    /// Whether the log is shutting down (the background threads stop).
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// How a thread waiting on a pass of `pass` may spin: not at all unless the
    /// CPU monitor sees spare CPU (§1.10), then about two passes if a pass is
    /// shorter than a park.
    pub(crate) fn spin_for(&self, pass: &PassTime) -> Spin {
        if !self.cpu.spin_allowed() {
            return Spin::NONE;
        }
        Spin { budget: pass.spin_budget(), spinners_max: self.cpu.spinners_max() }
    }

    /// The first block the writer may not write yet (INV-7).
    pub(crate) fn file_limit(&self) -> BlockNo {
        BlockNo(self.file_limit_block.load(Ordering::SeqCst))
    }

    pub(crate) fn metrics(&self) -> Metrics {
        let lsns = LsnLevels {
            log_lsn_current: self.reserved_end().0,
            log_lsn_ready: self.ready().0,
            log_lsn_last_write: self.written().0,
            log_lsn_last_flush: self.synced().0,
            log_lsn_last_checkpoint: self.checkpoint_lsn.load(Ordering::SeqCst),
        };
        let mut metrics = self.metrics.snapshot(lsns);
        let cpu = self.cpu.sample();
        metrics.cpu_usable = cpu.usable;
        metrics.cpu_busy_pct = cpu.busy_pct;
        metrics.pipeline = self.active();
        metrics.pipeline_reason = self.auto.lock().reason;
        metrics
    }
}
