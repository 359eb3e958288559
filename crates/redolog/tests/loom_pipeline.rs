//! Goal: the hand-offs between the dedicated log writer, the log flusher and a
//! committing thread lose no wake-up and acknowledge nothing before the covering
//! sync, also while the pipeline switches (docs/DESIGN.md §1.11, INV-5, INV-10,
//! INV-11, INV-17).
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
    ready_events: EventSlots,
    write_events: EventSlots,
    sync_events: EventSlots,
    flusher_event: EventSlots,
    pipeline_events: EventSlots,
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
            ready_events: EventSlots::new(SLOTS),
            write_events: EventSlots::new(SLOTS),
            sync_events: EventSlots::new(SLOTS),
            flusher_event: EventSlots::new(1),
            pipeline_events: EventSlots::new(1),
        }
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

    /// `write_range`: publish `written`, wake the flusher and the writers' waiters.
    fn write(&self) -> bool {
        let (written, ready) = (self.written.load(SeqCst), self.ready.load(SeqCst));
        if ready <= written {
            return false;
        }
        self.written.store(ready, SeqCst);
        self.flusher_event.notify_all();
        self.write_events.notify_range_delegated(written, ready);
        true
    }

    /// `sync_written`: the fdatasync returned Ok, then `synced` moves.
    fn sync(&self) -> bool {
        let (synced, written) = (self.synced.load(SeqCst), self.written.load(SeqCst));
        if written <= synced {
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
    fn commit_wait(&self, target: u64) {
        loop {
            if self.synced.load(SeqCst) >= target {
                return;
            }
            if self.users_lead() && Log::take(&self.sync_held) {
                // lead_syncs: write what is ready if the write role is free, sync.
                if Log::take(&self.write_held) {
                    self.write();
                    self.release_write();
                }
                self.sync();
                self.release_sync();
                if self.synced.load(SeqCst) < target && self.written.load(SeqCst) < target {
                    // NeedsWrite: through the write role (wait_written_for).
                    self.commit_wait_written(target);
                }
                continue;
            }
            self.sync_demand.fetch_max(target, SeqCst);
            self.sync_events.wait(target, Spin::NONE, || {
                self.synced.load(SeqCst) >= target || (!self.sync_held.load(SeqCst) && self.users_lead())
            });
        }
    }

    fn commit_wait_written(&self, target: u64) {
        while self.written.load(SeqCst) < target {
            if self.users_lead() && Log::take(&self.write_held) {
                self.write();
                self.release_write();
                continue;
            }
            self.write_demand.fetch_max(target, SeqCst);
            self.write_events.wait(target, Spin::NONE, || {
                self.written.load(SeqCst) >= target || (!self.write_held.load(SeqCst) && self.users_lead())
            });
        }
    }

    fn log_thread_waits_for_mode_or_role(&self, held: &AtomicBool) {
        self.pipeline_events
            .wait(1, Spin::NONE, || self.stop.load(SeqCst) || (!self.users_lead() && !held.load(SeqCst)));
    }

    /// `run_log_writer`.
    fn run_writer(&self) {
        let mut holding = false;
        while !self.stop.load(SeqCst) {
            if self.users_lead() {
                if holding {
                    holding = false;
                    self.release_write();
                }
                self.pipeline_events.wait(1, Spin::NONE, || self.stop.load(SeqCst) || !self.users_lead());
                continue;
            }
            if !holding {
                holding = Log::take(&self.write_held);
                if !holding {
                    self.log_thread_waits_for_mode_or_role(&self.write_held);
                }
                continue;
            }
            if !self.write() {
                let written = self.written.load(SeqCst);
                self.ready_events.wait(written + 1, Spin::NONE, || {
                    self.stop.load(SeqCst) || self.users_lead() || self.ready.load(SeqCst) > written
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
        while !self.stop.load(SeqCst) {
            if self.users_lead() {
                if holding {
                    holding = false;
                    self.release_sync();
                }
                self.pipeline_events.wait(1, Spin::NONE, || self.stop.load(SeqCst) || !self.users_lead());
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
                    self.stop.load(SeqCst) || self.users_lead() || self.written.load(SeqCst) > synced
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
        // `wake_everyone`.
        for event in
            [&self.ready_events, &self.write_events, &self.sync_events, &self.flusher_event, &self.pipeline_events]
        {
            event.notify_all();
        }
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
        log.commit_wait(1);
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
                log.commit_wait(1);
                assert!(log.synced.load(SeqCst) >= 1, "acknowledged before the covering sync");
            })
        };
        log.commit_wait(2);
        assert!(log.synced.load(SeqCst) >= 2, "acknowledged before the covering sync");
        other.join().expect("committer");
        stop();
    });
}
