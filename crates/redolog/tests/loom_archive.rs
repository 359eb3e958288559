//! Goal: a synchronous archive's commit is acknowledged only once the archive
//! and the log have both synced it, and is never left parked — whichever of
//! the two syncs ends last wakes it, and a group a waiter needs is always
//! asked of the log, by the archiver or by the waiter itself; a log that
//! fails or an archiver that ends wakes it too (docs/DESIGN.md §1.17,
//! INV-36).
//! Method: loom compiles the real acknowledgement (`src/archive/ack.rs`) and
//! the real event slots (`src/wait/event.rs`) against loom's atomics and the
//! loom `ParkingLot` (tests/common/loom_lot.rs). A model archiver syncs its
//! copy of one batch and asks the model log as the real one does
//! (`Worker::publish_synced`); the model log syncs once and answers the
//! requests made before then from its thread, later ones at once on the
//! caller's thread — `Log::on_durable`'s contract. A lost wake-up shows as
//! loom's deadlock report, an early acknowledgement as a failed assertion;
//! `an_archiver_that_does_not_ask_after_its_sync_is_caught` shows the model
//! finds the hang the second request prevents.
//!
//! `REDOLOG_LOOM_BOUND=none cargo test --release -p redolog --test
//! loom_archive` explores without a preemption bound.

#![allow(dead_code)]

mod common;

/// The `crate::sync` shim, on loom.
mod sync {
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
    }
    pub(crate) use crate::loom_lot::ParkingLot;
}

#[path = "../src/geometry.rs"]
mod geometry;

#[path = "../src/lsn.rs"]
mod lsn;

#[path = "../src/clock.rs"]
mod clock;

#[path = "common/loom_lot.rs"]
mod loom_lot;

#[path = "../src/wait/event.rs"]
mod event;

/// `crate::wait`.
mod wait {
    pub(crate) use crate::event::{EventSlots, Spin};
}

#[path = "../src/archive/ack.rs"]
mod ack;

use ack::{Acks, Outcome};
use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};
use lsn::BlockNo;

/// The first data byte of block `k`: the model's LSNs (the event slots are
/// per block, as in the log).
fn at(k: u64) -> u64 {
    BlockNo(k).data_start().as_u64()
}

/// The model log: one sync, and the archiver's requests (`on_durable`).
struct ModelLog {
    /// `(synced, requests not yet answered)`.
    state: Mutex<(u64, Vec<u64>)>,
    /// The sync fails: every request is answered with an error.
    fails: bool,
    synced: AtomicU64,
}

impl ModelLog {
    fn new(fails: bool) -> ModelLog {
        ModelLog { state: Mutex::new((0, Vec::new())), fails, synced: AtomicU64::new(0) }
    }

    /// `Log::on_durable(end, Synced, …)` with the archiver's callback:
    /// answered at once if covered, by the log's sync otherwise.
    fn ask(&self, acks: &Acks, end: u64) {
        let covered = {
            let mut state = self.state.lock().expect("model log");
            if state.0 < end {
                state.1.push(end);
            }
            state.0 >= end
        };
        if covered {
            self.answer(acks, end);
        }
    }

    fn answer(&self, acks: &Acks, end: u64) {
        if self.fails {
            acks.log_failed();
        } else {
            acks.log_synced(end);
        }
    }

    /// The log thread's pass: syncs up to `end`, then answers the requests
    /// it covers.
    fn sync(&self, acks: &Acks, end: u64) {
        let pending = {
            let mut state = self.state.lock().expect("model log");
            state.0 = end;
            if !self.fails {
                self.synced.store(end, SeqCst);
            }
            std::mem::take(&mut state.1)
        };
        for request in pending {
            self.answer(acks, request);
        }
    }
}

/// The model archiver's sync of one batch ending at `end`, as
/// `Worker::publish_synced` does it: ask the log first if a commit waits,
/// sync, publish, and ask again if a commit arrived meanwhile (unless
/// `ask_after` is off: the mutation the model must catch).
fn archive_batch(acks: &Acks, log: &ModelLog, end: u64, ask_after: bool) {
    let asked_before = acks.asking();
    if asked_before {
        log.ask(acks, end);
    }
    let waiting = acks.archive_synced(end);
    if waiting && ask_after && !asked_before {
        log.ask(acks, end);
    }
}

/// Starts the model archiver, archiving `batches` one after the other, and
/// the model log, syncing once up to the last of them; returns what joins
/// both.
fn start_archiver_and_log(acks: &Arc<Acks>, log: &Arc<ModelLog>, batches: Vec<u64>, ask_after: bool) -> impl FnOnce() {
    let last = *batches.last().expect("a batch");
    let archiver = {
        let (acks, log) = (acks.clone(), log.clone());
        loom::thread::spawn(move || {
            for end in batches {
                archive_batch(&acks, &log, end, ask_after);
            }
        })
    };
    let log_thread = {
        let (acks, log) = (acks.clone(), log.clone());
        loom::thread::spawn(move || log.sync(&acks, last))
    };
    move || {
        archiver.join().expect("archiver");
        log_thread.join().expect("log");
    }
}

/// One commit waiting for `end` while the archiver archives it and the log
/// syncs it. Returns how the wait ended and what the log had synced then.
fn commit_while_archiving(log_fails: bool, ask_after: bool) {
    let end = at(1);
    let acks = Arc::new(Acks::new(at(0), 2));
    let log = Arc::new(ModelLog::new(log_fails));
    let join = start_archiver_and_log(&acks, &log, vec![end], ask_after);
    acks.arrive();
    match acks.park(end) {
        Outcome::Acknowledged => {
            assert!(acks.archived() >= end, "acknowledged before the archive synced it");
            assert!(log.synced.load(SeqCst) >= end, "acknowledged before the log synced it");
        }
        // The waiter's own `Log::wait` (proved in loom_pipeline) follows.
        Outcome::AskTheLog => assert!(acks.archived() >= end),
        Outcome::Settle => {
            assert!(log_fails, "settled though the log never failed and the archiver runs");
            assert!(acks.wait_archived(end), "the archiver ran to the end, so the archive holds it");
        }
    }
    acks.leave();
    join();
}

#[test]
fn a_commit_is_acknowledged_once_both_syncs_cover_it_and_never_left_parked() {
    common::loom_check(2, || commit_while_archiving(false, true));
}

#[test]
fn a_failed_log_wakes_the_commit_which_then_waits_for_the_archive_alone() {
    common::loom_check(2, || commit_while_archiving(true, true));
}

/// The archiver that asks the log only before its sync leaves a commit that
/// arrived during the sync parked for ever: the model must say so.
#[test]
#[should_panic(expected = "deadlock")]
fn an_archiver_that_does_not_ask_after_its_sync_is_caught() {
    common::loom_check(2, || commit_while_archiving(false, false));
}

/// Two commits parked in the same block: the one the notifier wakes wakes
/// the other (the delegated wake-up), whichever side publishes last.
#[test]
fn two_parked_commits_are_both_woken_through_the_delegated_wake_up() {
    common::loom_check(1, || {
        let end = at(1);
        let acks = Arc::new(Acks::new(at(0), 2));
        let log = Arc::new(ModelLog::new(false));
        let join = start_archiver_and_log(&acks, &log, vec![end], true);
        acks.arrive();
        let other = {
            let acks = acks.clone();
            loom::thread::spawn(move || {
                acks.arrive();
                let outcome = acks.park(end);
                acks.leave();
                outcome
            })
        };
        let mine = acks.park(end);
        acks.leave();
        for outcome in [mine, other.join().expect("other commit")] {
            assert_ne!(outcome, Outcome::Settle, "nothing failed");
        }
        join();
    });
}

/// A commit alone waits for the log itself, publishes it, and parks for
/// the archive: the archiver's sync wakes it, whichever of the two
/// publishes first.
#[test]
fn a_commit_alone_is_woken_by_the_archive_after_its_own_log_wait() {
    common::loom_check(2, || {
        let end = at(1);
        let acks = Arc::new(Acks::new(at(0), 2));
        let archiver = {
            let acks = acks.clone();
            loom::thread::spawn(move || {
                let asked = acks.archive_synced(end);
                assert!(!asked, "a commit alone is not parked: the archiver need not ask the log");
            })
        };
        assert!(acks.arrive(), "alone");
        acks.log_synced(end); // after its own `Log::wait`
        assert!(acks.wait_archived(end));
        assert!(acks.archived() >= end);
        acks.leave();
        archiver.join().expect("archiver");
    });
}

/// The archiver ends before it reaches the commit's group: the commit is
/// woken, and learns the archive does not hold it.
#[test]
fn an_archiver_that_ends_wakes_the_commit() {
    common::loom_check(2, || {
        let end = at(1);
        let acks = Arc::new(Acks::new(at(0), 2));
        let archiver = {
            let acks = acks.clone();
            loom::thread::spawn(move || acks.end())
        };
        acks.arrive();
        assert_eq!(acks.park(end), Outcome::Settle);
        assert!(!acks.wait_archived(end));
        acks.leave();
        archiver.join().expect("archiver");
    });
}

/// Two batches, two commits: the second batch's acknowledgement wakes only
/// the commit it covers after both syncs, and the first is never woken
/// early by the second's request.
#[test]
fn two_commits_over_two_batches_are_each_acknowledged_after_both_syncs() {
    common::loom_check(1, || {
        let (first, second) = (at(1), at(2));
        let acks = Arc::new(Acks::new(at(0), 2));
        let log = Arc::new(ModelLog::new(false));
        let join = start_archiver_and_log(&acks, &log, vec![first, second], true);
        acks.arrive();
        if acks.park(first) == Outcome::Acknowledged {
            assert!(acks.archived() >= first && log.synced.load(SeqCst) >= first);
        }
        acks.leave();
        acks.arrive();
        if acks.park(second) == Outcome::Acknowledged {
            assert!(acks.archived() >= second && log.synced.load(SeqCst) >= second);
        }
        acks.leave();
        join();
    });
}
