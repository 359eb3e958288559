//! Goal: the hand-offs between the dedicated log writer, the log flusher and a
//! committing thread lose no wake-up and acknowledge nothing before the covering
//! sync, also while the pipeline switches (docs/DESIGN.md §1.11, INV-5, INV-10,
//! INV-11, INV-17).
//! Method: a loom model of the protocol in `commit/{group,dedicated}.rs` and
//! `wait/event.rs`: the same atomics with the same orderings, and an event that
//! parks like `parking_lot_core::park` (the waiter counts itself in, then
//! re-checks its predicate under the event's lock; a notifier publishes its value,
//! then reads the count). parking_lot itself cannot run under loom, so the
//! model restates those ~40 lines; everything else is one-to-one. A lost wake-up
//! shows as loom's deadlock report (every thread parked), an early acknowledgement
//! as a failed assertion.
//!
//! Store-then-load pairs (a notifier stores a value, then reads the waiter count;
//! a waiter counts itself in, then reads the value) are ordered by explicit
//! `fence(SeqCst)` E1, E2 and R1, as in the real code: loom treats SeqCst loads
//! and stores like acquire/release and would otherwise report the store-buffering
//! outcome that the SeqCst total order excludes.
//!
//! The default preemption bound (1) keeps `cargo test` fast (5 s in debug). Other bounds:
//! `REDOLOG_LOOM_BOUND=2 cargo test --release -p redolog --test loom_pipeline` (106 s);
//! `REDOLOG_LOOM_BOUND=none` for no bound (figures in docs/DESIGN.md §1.11).

mod common;

use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::SeqCst};
use loom::sync::{Arc, Condvar, Mutex};

/// Runs `model` at the default preemption bound 1 (`REDOLOG_LOOM_BOUND` overrides).
fn check(model: impl Fn() + Sync + Send + 'static) {
    common::loom_check(1, model);
}

/// `EventSlots` with one slot: count in, validate under the lock, park.
#[derive(Default)]
struct Event {
    waiters: AtomicU32,
    lock: Mutex<()>,
    parked: Condvar,
}

impl Event {
    fn wait(&self, ready: impl Fn() -> bool) {
        self.waiters.fetch_add(1, SeqCst);
        fence(SeqCst); // E1: count in before reading the predicate's values
        let mut guard = self.lock.lock().expect("event lock");
        while !ready() {
            guard = self.parked.wait(guard).expect("event lock");
        }
        drop(guard);
        self.waiters.fetch_sub(1, SeqCst);
    }

    /// `notify_range` / `notify_all` / `kick`: one load when nobody waits.
    fn notify(&self) {
        fence(SeqCst); // E2: publish the value before reading the count
        if self.waiters.load(SeqCst) > 0 {
            let _guard = self.lock.lock().expect("event lock");
            self.parked.notify_all();
        }
    }
}

const GROUP: u8 = 0;
const DEDICATED: u8 = 1;

/// The shared state: LSNs, roles, the active pipeline, the events.
#[derive(Default)]
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
    ready_events: Event,
    write_events: Event,
    sync_events: Event,
    flusher_event: Event,
    pipeline_events: Event,
}

impl Log {
    fn users_lead(&self) -> bool {
        self.active.load(SeqCst) != DEDICATED
    }

    fn take(role: &AtomicBool) -> bool {
        role.compare_exchange(false, true, SeqCst, SeqCst).is_ok()
    }

    /// An appender completes its bytes: the link buffer's tail moves.
    fn append(&self, end: u64) {
        self.ready.store(end, SeqCst);
        self.ready_events.notify();
    }

    /// `write_range`: publish `written`, wake the flusher and the writers' waiters.
    fn write(&self) -> bool {
        let (written, ready) = (self.written.load(SeqCst), self.ready.load(SeqCst));
        if ready <= written {
            return false;
        }
        self.written.store(ready, SeqCst);
        self.flusher_event.notify();
        self.write_events.notify();
        true
    }

    /// `sync_written`: the fdatasync returned Ok, then `synced` moves.
    fn sync(&self) -> bool {
        let (synced, written) = (self.synced.load(SeqCst), self.written.load(SeqCst));
        if written <= synced {
            return false;
        }
        self.synced.store(written, SeqCst);
        self.sync_events.notify();
        true
    }

    /// Role release: clear, then kick a successor (INV-11) and a log thread
    /// waiting to take the role over (INV-17).
    fn release_sync(&self) {
        self.sync_held.store(false, SeqCst);
        fence(SeqCst); // R1: clear the role before reading the demand
        if self.sync_demand.load(SeqCst) > self.synced.load(SeqCst) && !self.sync_held.load(SeqCst) {
            self.sync_events.notify();
        }
        if !self.users_lead() {
            self.pipeline_events.notify();
        }
    }

    fn release_write(&self) {
        self.write_held.store(false, SeqCst);
        fence(SeqCst); // R1
        if self.write_demand.load(SeqCst) > self.written.load(SeqCst) && !self.write_held.load(SeqCst) {
            self.write_events.notify();
        }
        if !self.users_lead() {
            self.pipeline_events.notify();
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
            self.sync_events
                .wait(|| self.synced.load(SeqCst) >= target || (!self.sync_held.load(SeqCst) && self.users_lead()));
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
            self.write_events
                .wait(|| self.written.load(SeqCst) >= target || (!self.write_held.load(SeqCst) && self.users_lead()));
        }
    }

    fn log_thread_waits_for_mode_or_role(&self, held: &AtomicBool) {
        self.pipeline_events.wait(|| self.stop.load(SeqCst) || (!self.users_lead() && !held.load(SeqCst)));
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
                self.pipeline_events.wait(|| self.stop.load(SeqCst) || !self.users_lead());
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
                self.ready_events
                    .wait(|| self.stop.load(SeqCst) || self.users_lead() || self.ready.load(SeqCst) > written);
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
                self.pipeline_events.wait(|| self.stop.load(SeqCst) || !self.users_lead());
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
                self.flusher_event
                    .wait(|| self.stop.load(SeqCst) || self.users_lead() || self.written.load(SeqCst) > synced);
            }
        }
        if holding {
            self.release_sync();
        }
    }

    /// `set_active`: store, then wake every thread that may wait on the mode.
    fn set_active(&self, mode: u8) {
        self.active.store(mode, SeqCst);
        for event in [&self.pipeline_events, &self.ready_events, &self.flusher_event] {
            event.notify();
        }
        if mode == GROUP {
            self.write_events.notify();
            self.sync_events.notify();
        }
    }

    /// `stop_log_threads`.
    fn shut_down(&self) {
        self.set_active(GROUP);
        self.stop.store(true, SeqCst);
        for event in [&self.pipeline_events, &self.ready_events, &self.flusher_event] {
            event.notify();
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

#[test]
fn dedicated_threads_wake_the_committer_only_after_the_sync() {
    check(|| {
        let log = Arc::new(Log { active: AtomicU8::new(DEDICATED), ..Log::default() });
        let stop = start_log_threads(&log);
        // The committer appends its group (end LSN 1) and waits for Synced.
        log.append(1);
        log.commit_wait(1);
        assert!(log.synced.load(SeqCst) >= 1, "acknowledged before the covering sync");
        stop();
    });
}

#[test]
fn switching_to_group_commit_while_a_committer_waits_loses_no_wake_up() {
    check(|| {
        let log = Arc::new(Log { active: AtomicU8::new(DEDICATED), ..Log::default() });
        let stop = start_log_threads(&log);
        let switcher = {
            let log = log.clone();
            loom::thread::spawn(move || log.set_active(GROUP))
        };
        log.append(1);
        log.commit_wait(1);
        assert!(log.synced.load(SeqCst) >= 1, "acknowledged before the covering sync");
        switcher.join().expect("switcher");
        stop();
    });
}

#[test]
fn switching_to_dedicated_while_a_committer_leads_loses_no_wake_up() {
    check(|| {
        let log = Arc::new(Log::default());
        let stop = start_log_threads(&log);
        let switcher = {
            let log = log.clone();
            loom::thread::spawn(move || log.set_active(DEDICATED))
        };
        log.append(1);
        log.commit_wait(1);
        assert!(log.synced.load(SeqCst) >= 1, "acknowledged before the covering sync");
        switcher.join().expect("switcher");
        stop();
    });
}
