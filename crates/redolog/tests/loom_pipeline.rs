//! Goal: the hand-offs between the dedicated log writer, the log flusher and a
//! committing thread lose no wake-up and acknowledge nothing before the covering
//! sync, also while the pipeline switches; a committer waiting for ring space
//! or a writer waiting for a checkpoint to free file space is woken; and a
//! failed fdatasync reaches every waiter as an error, never as an
//! acknowledgement (docs/DESIGN.md §1.11, INV-5 to INV-8, INV-10, INV-11,
//! INV-17; docs/RELIABILITY.md K1).
//! Method: loom compiles the real event slots (`src/wait/event.rs`: count in,
//! fence E1, validate under the lot's lock, park; publish, fence E2, read the
//! counts, unpark the covered tokens; delegated notification; successor kicks)
//! against loom's atomics and a loom `ParkingLot` with `parking_lot_core`'s
//! contract (tests/common/loom_lot.rs). The role and pipeline logic of
//! `commit/{group,dedicated,mod}.rs` is restated below step for step — same
//! atomics, same orderings, same event calls — because it is written against
//! the whole `Shared` (storage, ring, metrics). A lost wake-up shows as loom's
//! deadlock report (every thread parked; the lot ignores park deadlines), an
//! early acknowledgement as a failed assertion.
//!
//! Store-then-load pairs (a notifier stores a value, then reads the waiter count;
//! a waiter counts itself in, then reads the value) are ordered by explicit
//! `fence(SeqCst)` E1, E2 and R1, as in the real code: loom treats SeqCst loads
//! and stores like acquire/release and would otherwise report the store-buffering
//! outcome that the SeqCst total order excludes.
//!
//! The default preemption bound (1) keeps `cargo test` fast. Other bounds:
//! `REDOLOG_LOOM_BOUND=2 cargo test --release -p redolog --test loom_pipeline`;
//! `REDOLOG_LOOM_BOUND=none` for no bound (figures in docs/DESIGN.md §1.11).

#![allow(dead_code)]

mod common;

/// The `crate::sync` shim `event.rs` imports, on loom.
mod sync {
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
    }
    pub(crate) use crate::loom_lot::ParkingLot;
}

/// `crate::format::BLOCK_BYTES` (docs/FORMAT.md §2): the slot key's unit.
mod format {
    pub(crate) const BLOCK_BYTES: usize = 512;
}

#[path = "common/loom_lot.rs"]
mod loom_lot;

#[path = "../src/wait/event.rs"]
mod event;

use event::{EventSlots, Spin};
use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering::SeqCst};
use loom::sync::Arc;

/// Runs `model` at the default preemption bound 1 (`REDOLOG_LOOM_BOUND` overrides).
fn check(model: impl Fn() + Sync + Send + 'static) {
    common::loom_check(1, model);
}

/// Slots per event array in the model (the real log has 1024; the model's LSNs
/// all fall in the first block, so more slots would only add atomics).
const SLOTS: usize = 2;

const GROUP: u8 = 0;
/// `commit/group.rs`: passes a leader makes for others' demand.
const LEADER_ROUNDS_MAX: u32 = 4;
const DEDICATED: u8 = 1;

/// The shared state: LSNs, roles, the active pipeline, the events.
struct Log {
    ready: AtomicU64,
    written: AtomicU64,
    synced: AtomicU64,
    write_demand: AtomicU64,
    sync_demand: AtomicU64,
    write_held: AtomicBool,
    sync_held: AtomicBool,
    active: AtomicU8,
    stop: AtomicBool,
    /// Set by a failed fdatasync (`Shared::poison`).
    poisoned: AtomicBool,
    /// The next fdatasync fails.
    fail_sync: AtomicBool,
    /// The writer may write below this LSN (the checkpoint's file limit, INV-7).
    file_limit: AtomicU64,
    ready_events: EventSlots,
    write_events: EventSlots,
    sync_events: EventSlots,
    flusher_event: EventSlots,
    pipeline_events: EventSlots,
    space_events: EventSlots,
}

impl Log {
    /// A fresh log (LSN 0) running `mode`.
    fn new(mode: u8) -> Self {
        Log {
            ready: AtomicU64::new(0),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            write_demand: AtomicU64::new(0),
            sync_demand: AtomicU64::new(0),
            write_held: AtomicBool::new(false),
            sync_held: AtomicBool::new(false),
            active: AtomicU8::new(mode),
            stop: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            fail_sync: AtomicBool::new(false),
            file_limit: AtomicU64::new(u64::MAX),
            ready_events: EventSlots::new(SLOTS),
            write_events: EventSlots::new(SLOTS),
            sync_events: EventSlots::new(SLOTS),
            flusher_event: EventSlots::new(1),
            pipeline_events: EventSlots::new(1),
            space_events: EventSlots::new(1),
        }
    }

    fn poisoned(&self) -> bool {
        self.poisoned.load(SeqCst)
    }

    /// `Shared::poison`: set the flag, then `wake_everyone`.
    fn poison(&self) {
        self.poisoned.store(true, SeqCst);
        self.wake_everyone();
    }

    fn wake_everyone(&self) {
        for event in [
            &self.ready_events,
            &self.write_events,
            &self.sync_events,
            &self.space_events,
            &self.flusher_event,
            &self.pipeline_events,
        ] {
            event.notify_all();
        }
    }

    /// A checkpoint completes: the file limit moves, file-space waiters wake.
    fn checkpoint(&self, limit: u64) {
        self.file_limit.store(limit, SeqCst);
        self.space_events.notify_all();
    }

    fn users_lead(&self) -> bool {
        self.active.load(SeqCst) != DEDICATED
    }

    fn take(role: &AtomicBool) -> bool {
        role.compare_exchange(false, true, SeqCst, SeqCst).is_ok()
    }

    /// An appender completes its bytes: the link buffer's tail moves.
    fn append(&self, end: u64) {
        let old = self.ready.load(SeqCst);
        self.ready.store(end, SeqCst);
        self.ready_events.notify_range(old, end);
    }

    /// `writable_end` and `write_range`: write what is ready below the file
    /// limit, publish `written`, wake the flusher and the writers' waiters.
    fn write(&self) -> bool {
        let (written, ready) = (self.written.load(SeqCst), self.ready.load(SeqCst));
        let upto = ready.min(self.file_limit.load(SeqCst));
        if upto <= written {
            return false;
        }
        self.written.store(upto, SeqCst);
        self.flusher_event.notify_all();
        self.write_events.notify_range_delegated(written, upto);
        true
    }

    /// One pass of a write-role holder (`lead_writes`, `run_log_writer`): write
    /// what is ready, or, if the file limit stops it, wait for a checkpoint to
    /// move the limit (`wait_for_writable`: the limit it waits on is the one it
    /// found too low, read once). Returns whether anything was ready.
    fn write_or_wait_for_space(&self) -> bool {
        let (written, ready) = (self.written.load(SeqCst), self.ready.load(SeqCst));
        if ready <= written {
            return false;
        }
        let limit = self.file_limit.load(SeqCst);
        if limit <= written {
            self.space_events.wait(limit, Spin::NONE, || {
                self.poisoned() || self.stop.load(SeqCst) || self.file_limit.load(SeqCst) > limit
            });
            return true;
        }
        self.write();
        true
    }

    /// `sync_written`: the fdatasync returned Ok, then `synced` moves; a failed
    /// one poisons the log and `synced` stays.
    fn sync(&self) -> bool {
        let (synced, written) = (self.synced.load(SeqCst), self.written.load(SeqCst));
        if written <= synced {
            return false;
        }
        if self.fail_sync.swap(false, SeqCst) {
            self.poison();
            return false;
        }
        self.synced.store(written, SeqCst);
        self.sync_events.notify_range_delegated(synced, written);
        true
    }

    /// Role release: clear, then kick a successor (INV-11) and a log thread
    /// waiting to take the role over (INV-17).
    fn release_sync(&self) {
        self.sync_held.store(false, SeqCst);
        fence(SeqCst); // R1: clear the role before reading the demand
        let (synced, demand) = (self.synced.load(SeqCst), self.sync_demand.load(SeqCst));
        if demand > synced && !self.sync_held.load(SeqCst) {
            self.sync_events.kick(demand, synced);
        }
        if !self.users_lead() {
            self.pipeline_events.notify_all();
        }
    }

    fn release_write(&self) {
        self.write_held.store(false, SeqCst);
        fence(SeqCst); // R1
        let (written, demand) = (self.written.load(SeqCst), self.write_demand.load(SeqCst));
        if demand > written && !self.write_held.load(SeqCst) {
            self.write_events.kick(demand, written);
        }
        if !self.users_lead() {
            self.pipeline_events.notify_all();
        }
    }

    /// `wait_synced(target)` of a committing thread, leading in group mode.
    /// `Err` means the log was poisoned.
    fn commit_wait(&self, target: u64) -> Result<(), ()> {
        loop {
            if self.poisoned() {
                return Err(());
            }
            if self.synced.load(SeqCst) >= target {
                return Ok(());
            }
            if self.users_lead() && Log::take(&self.sync_held) {
                // lead_syncs: check the poison under the role (no sync after a
                // failed one, INV-6), write what is ready if the write role is
                // free, sync.
                if self.poisoned() {
                    self.release_sync();
                    return Err(());
                }
                if Log::take(&self.write_held) {
                    self.write();
                    self.release_write();
                }
                self.sync();
                self.release_sync();
                if !self.poisoned() && self.synced.load(SeqCst) < target && self.written.load(SeqCst) < target {
                    // NeedsWrite: through the write role (wait_written_for).
                    self.commit_wait_written(target)?;
                }
                continue;
            }
            self.sync_demand.fetch_max(target, SeqCst);
            self.sync_events.wait(target, Spin::NONE, || {
                self.poisoned()
                    || self.synced.load(SeqCst) >= target
                    || (!self.sync_held.load(SeqCst) && self.users_lead())
            });
        }
    }

    /// `wait_written_for(target)`: also an appender's wait for ring space.
    fn commit_wait_written(&self, target: u64) -> Result<(), ()> {
        loop {
            if self.poisoned() {
                return Err(());
            }
            if self.written.load(SeqCst) >= target {
                return Ok(());
            }
            if self.users_lead() && Log::take(&self.write_held) {
                let led = self.lead_writes(target);
                self.release_write();
                led?;
                continue;
            }
            self.write_demand.fetch_max(target, SeqCst);
            self.write_events.wait(target, Spin::NONE, || {
                self.poisoned()
                    || self.written.load(SeqCst) >= target
                    || (!self.write_held.load(SeqCst) && self.users_lead())
            });
        }
    }

    /// `lead_writes(target)`, holding the write role: write until `target` is
    /// written, then keep writing (up to `LEADER_ROUNDS_MAX` passes) while
    /// parked threads demand more and their bytes are ready.
    fn lead_writes(&self, target: u64) -> Result<(), ()> {
        let mut rounds = 0;
        loop {
            if self.poisoned() {
                return Err(());
            }
            let (written, demand) = (self.written.load(SeqCst), self.write_demand.load(SeqCst));
            if written >= target && (demand <= written || rounds >= LEADER_ROUNDS_MAX) {
                return Ok(());
            }
            let ready = self.ready.load(SeqCst);
            if ready <= written {
                if written >= target {
                    // Only others' demand is left: never wait for bytes that
                    // may be this very thread's reservation.
                    return Ok(());
                }
                self.ready_events
                    .wait(written + 1, Spin::NONE, || self.poisoned() || self.ready.load(SeqCst) > written);
                continue;
            }
            if self.write_or_wait_for_space() && self.written.load(SeqCst) > written {
                rounds += 1;
            }
        }
    }

    /// `log_threads_stop`.
    fn threads_stop(&self) -> bool {
        self.stop.load(SeqCst) || self.poisoned()
    }

    fn log_thread_waits_for_mode_or_role(&self, held: &AtomicBool) {
        self.pipeline_events.wait(1, Spin::NONE, || self.threads_stop() || (!self.users_lead() && !held.load(SeqCst)));
    }

    /// `run_log_writer`.
    fn run_writer(&self) {
        let mut holding = false;
        while !self.threads_stop() {
            if self.users_lead() {
                if holding {
                    holding = false;
                    self.release_write();
                }
                self.pipeline_events.wait(1, Spin::NONE, || self.threads_stop() || !self.users_lead());
                continue;
            }
            if !holding {
                holding = Log::take(&self.write_held);
                if !holding {
                    self.log_thread_waits_for_mode_or_role(&self.write_held);
                }
                continue;
            }
            if !self.write_or_wait_for_space() {
                let written = self.written.load(SeqCst);
                self.ready_events.wait(written + 1, Spin::NONE, || {
                    self.threads_stop() || self.users_lead() || self.ready.load(SeqCst) > written
                });
            }
        }
        if holding {
            self.release_write();
        }
    }

    /// `run_log_flusher`.
    fn run_flusher(&self) {
        let mut holding = false;
        while !self.threads_stop() {
            if self.users_lead() {
                if holding {
                    holding = false;
                    self.release_sync();
                }
                self.pipeline_events.wait(1, Spin::NONE, || self.threads_stop() || !self.users_lead());
                continue;
            }
            if !holding {
                holding = Log::take(&self.sync_held);
                if !holding {
                    self.log_thread_waits_for_mode_or_role(&self.sync_held);
                }
                continue;
            }
            if !self.sync() {
                let synced = self.synced.load(SeqCst);
                self.flusher_event.wait(1, Spin::NONE, || {
                    self.threads_stop() || self.users_lead() || self.written.load(SeqCst) > synced
                });
            }
        }
        if holding {
            self.release_sync();
        }
    }

    /// `set_active`: store, then wake every thread that may wait on the mode.
    fn set_active(&self, mode: u8) {
        if self.active.swap(mode, SeqCst) == mode {
            return;
        }
        for event in [&self.pipeline_events, &self.ready_events, &self.flusher_event] {
            event.notify_all();
        }
        if mode == GROUP {
            self.write_events.notify_all();
            self.sync_events.notify_all();
        }
    }

    /// `stop_log_threads`.
    fn shut_down(&self) {
        self.set_active(GROUP);
        self.stop.store(true, SeqCst);
        self.wake_everyone();
    }
}

/// Starts the two log threads; returns a closure that stops and joins them.
fn start_log_threads(log: &Arc<Log>) -> impl FnOnce() {
    let writer = {
        let log = log.clone();
        loom::thread::spawn(move || log.run_writer())
    };
    let flusher = {
        let log = log.clone();
        loom::thread::spawn(move || log.run_flusher())
    };
    let log = log.clone();
    move || {
        log.shut_down();
        writer.join().expect("writer");
        flusher.join().expect("flusher");
    }
}

/// Starts the log threads in mode `start`, switches to `switch_to` (if any) on a
/// thread of its own while a committer appends its group (end LSN 1) and waits
/// for Synced; the committer must return, and only after the covering sync.
fn commit_while_switching(start: u8, switch_to: Option<u8>) {
    check(move || {
        let log = Arc::new(Log::new(start));
        let stop = start_log_threads(&log);
        let switcher = switch_to.map(|mode| {
            let log = log.clone();
            loom::thread::spawn(move || log.set_active(mode))
        });
        log.append(1);
        log.commit_wait(1).expect("not poisoned");
        assert!(log.synced.load(SeqCst) >= 1, "acknowledged before the covering sync");
        if let Some(switcher) = switcher {
            switcher.join().expect("switcher");
        }
        stop();
    });
}

#[test]
fn dedicated_threads_wake_the_committer_only_after_the_sync() {
    commit_while_switching(DEDICATED, None);
}

#[test]
fn switching_to_group_commit_while_a_committer_waits_loses_no_wake_up() {
    commit_while_switching(DEDICATED, Some(GROUP));
}

#[test]
fn switching_to_dedicated_while_a_committer_leads_loses_no_wake_up() {
    commit_while_switching(GROUP, Some(DEDICATED));
}

#[test]
fn a_delegated_wake_up_reaches_every_covered_committer() {
    check(|| {
        let log = Arc::new(Log::new(DEDICATED));
        let stop = start_log_threads(&log);
        // Two committers whose groups end in one block (appended together):
        // the flusher unparks the first covered waiter only
        // (notify_range_delegated); that helper wakes the other.
        log.append(2);
        let other = {
            let log = log.clone();
            loom::thread::spawn(move || {
                log.commit_wait(1).expect("not poisoned");
                assert!(log.synced.load(SeqCst) >= 1, "acknowledged before the covering sync");
            })
        };
        log.commit_wait(2).expect("not poisoned");
        assert!(log.synced.load(SeqCst) >= 2, "acknowledged before the covering sync");
        other.join().expect("committer");
        stop();
    });
}

/// An appender whose ring slot still holds unwritten bytes waits for `written`
/// (`wait_ring_space` → `wait_written_for`) and must be woken: in group commit
/// by a first committer that leads the write, with the dedicated pipeline by
/// the log writer (no first committer: it would only add states).
fn appender_waits_for_ring_space(mode: u8) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        let stop = start_log_threads(&log);
        log.append(1);
        let first = (mode == GROUP).then(|| {
            let log = log.clone();
            loom::thread::spawn(move || log.commit_wait(1).expect("not poisoned"))
        });
        // A ring of one unit: the bytes up to 2 need everything up to 1 written.
        log.commit_wait_written(1).expect("not poisoned");
        log.append(2);
        log.commit_wait(2).expect("not poisoned");
        assert!(log.synced.load(SeqCst) >= 2, "acknowledged before the covering sync");
        if let Some(first) = first {
            first.join().expect("first committer");
        }
        stop();
    });
}

#[test]
fn an_appender_waiting_for_ring_space_is_woken_in_group_commit() {
    appender_waits_for_ring_space(GROUP);
}

#[test]
fn an_appender_waiting_for_ring_space_is_woken_by_the_log_writer() {
    appender_waits_for_ring_space(DEDICATED);
}

/// The file limit stops the writer at 1 (the checkpoint has not freed the
/// space); a checkpoint on another thread moves it. The write-role holder
/// waiting for file space must be woken, and the commit complete.
fn writer_waits_for_checkpoint_space(mode: u8) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        log.file_limit.store(1, SeqCst);
        let stop = start_log_threads(&log);
        let checkpointer = {
            let log = log.clone();
            loom::thread::spawn(move || log.checkpoint(2))
        };
        log.append(2);
        log.commit_wait(2).expect("not poisoned");
        assert!(log.synced.load(SeqCst) >= 2, "acknowledged before the covering sync");
        checkpointer.join().expect("checkpointer");
        stop();
    });
}

#[test]
fn a_writer_waiting_for_checkpoint_space_is_woken_in_group_commit() {
    writer_waits_for_checkpoint_space(GROUP);
}

#[test]
fn the_log_writer_waiting_for_checkpoint_space_is_woken() {
    writer_waits_for_checkpoint_space(DEDICATED);
}

/// The fdatasync covering two committers fails: both must return an error
/// (no acknowledgement, no hang), whoever ran the sync.
fn a_failed_sync_reaches_every_waiter(mode: u8) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        log.fail_sync.store(true, SeqCst);
        let stop = start_log_threads(&log);
        log.append(2);
        let other = {
            let log = log.clone();
            loom::thread::spawn(move || {
                assert_eq!(log.commit_wait(1), Err(()), "acknowledged over a failed sync");
            })
        };
        assert_eq!(log.commit_wait(2), Err(()), "acknowledged over a failed sync");
        assert_eq!(log.synced.load(SeqCst), 0, "synced moved over a failed sync");
        other.join().expect("committer");
        stop();
    });
}

#[test]
fn a_failed_sync_reaches_every_waiter_in_group_commit() {
    a_failed_sync_reaches_every_waiter(GROUP);
}

#[test]
fn a_failed_sync_of_the_log_flusher_reaches_every_waiter() {
    a_failed_sync_reaches_every_waiter(DEDICATED);
}

/// The self-deadlock `stress_faults` found: an appender that reserved [1, 2)
/// and is short of ring space leads writes before it copies its group; a
/// committer whose group [2, 3) is copied but not ready (it lies behind the
/// appender's gap) demands more. The leader must not park waiting for `ready`
/// on the committer's behalf — the next ready bytes are its own.
#[test]
fn an_appender_leading_writes_never_waits_for_its_own_bytes() {
    check(|| {
        let log = Arc::new(Log::new(GROUP));
        log.append(1); // [0, 1): copied by someone, not written
        let committer = {
            let log = log.clone();
            loom::thread::spawn(move || {
                log.commit_wait(3).expect("not poisoned");
                assert!(log.synced.load(SeqCst) >= 3, "acknowledged before the covering sync");
            })
        };
        // The appender: ring space needs [0, 1) written (wait_ring_space), then
        // it copies [1, 2), and the link buffer makes [1, 3) ready at once.
        log.commit_wait_written(1).expect("not poisoned");
        log.append(3);
        committer.join().expect("committer");
    });
}
