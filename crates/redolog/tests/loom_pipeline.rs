//! Goal: the hand-offs between the dedicated log writer, the log flusher and a
//! committing thread lose no wake-up and acknowledge nothing before the covering
//! sync, also while the pipeline switches; a committer waiting for ring space
//! or a writer waiting for a checkpoint to free file space is woken; and a
//! failed fdatasync reaches every waiter as an error, never as an
//! acknowledgement, and freezes both frontiers though the other role's I/O
//! succeeds (docs/DESIGN.md §1.5, §1.11, INV-5 to INV-8, INV-10, INV-11,
//! INV-17; docs/RELIABILITY.md K1).
//! Method: loom compiles the real commit protocol — `src/pipeline/` (the
//! stages, roles, demands, kicks, the one wait loop and lead loop of group
//! commit, the dedicated log threads' loop, the mode switch, the poison) and
//! the real event slots (`src/wait/event.rs`) — against loom's atomics and a
//! loom `ParkingLot` with `parking_lot_core`'s contract
//! (tests/common/loom_lot.rs). The protocol reaches the rest of the log only
//! through its `Port` trait; the model port below stands in for the appenders
//! (`ready`), the checkpoint (the file limit) and the files (a write or a sync
//! fails when told to). A lost wake-up shows as loom's
//! deadlock report (every thread parked; the lot ignores park deadlines), an
//! early acknowledgement as a failed assertion.
//!
//! LSNs are real data positions: `at(k)` is the first data byte of block `k`,
//! so the file limit (a block number) and the event slots (one per block) work
//! as in the log.
//!
//! The default preemption bound (1) keeps `cargo test` fast. Other bounds:
//! `REDOLOG_LOOM_BOUND=2 cargo test --release -p redolog --test loom_pipeline`;
//! `REDOLOG_LOOM_BOUND=none` for no bound (figures in docs/DESIGN.md §1.11).

#![allow(dead_code)]

mod common;

// The modules of the crate that `src/pipeline/` imports, on loom: the `sync`
// shim, and the crate's own `geometry`, `lsn`, `error`, `clock` and `wait` files.

/// The `crate::sync` shim, on loom.
mod sync {
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
    }
    pub(crate) use crate::loom_lot::ParkingLot;
    pub(crate) use crate::loom_mutex::Mutex;
}

#[path = "common/loom_mutex.rs"]
mod loom_mutex;

#[path = "../src/geometry.rs"]
mod geometry;

#[path = "common/loom_lot.rs"]
mod loom_lot;

#[path = "../src/lsn.rs"]
mod lsn;

#[path = "../src/error.rs"]
mod error;

#[path = "../src/clock.rs"]
mod clock;

#[path = "../src/wait/event.rs"]
mod event;

/// `crate::wait`.
mod wait {
    pub(crate) use crate::event::{slot_of, slots_covering, EventSlots, PassTime, Spin, Waited};
    pub(crate) use crate::tail::TailWakers;
    pub(crate) use crate::wakers::{Completion, WakerSlots};
}

#[path = "../src/wait/wakers.rs"]
mod wakers;

#[path = "../src/wait/tail.rs"]
mod tail;

#[path = "../src/pipeline/mod.rs"]
mod pipeline;

#[path = "../src/link_buf.rs"]
mod link_buf;

#[path = "../src/closed.rs"]
mod closed;

use clock::Moment;
use error::IoFailure;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use loom::sync::Arc;
use lsn::{BlockNo, Lsn};
use pipeline::{Port, Site, Stages};
use wait::{PassTime, Spin, Waited};

/// Runs `model` at the default preemption bound 1 (`REDOLOG_LOOM_BOUND` overrides).
fn check(model: impl Fn() + Sync + Send + 'static) {
    common::loom_check(1, model);
}

/// Slots per event array in the model (the real log has 1024: more slots
/// would only add atomics).
const SLOTS: usize = 2;

const GROUP: bool = false;
const DEDICATED: bool = true;

/// The first data byte of block `k`: the model's LSNs.
fn at(k: u64) -> Lsn {
    BlockNo(k).data_start()
}

/// The real stages, and a model of what they reach through the port.
struct Log {
    stages: Stages<()>,
    /// End of what appenders completed (the link buffer's tail).
    ready: AtomicU64,
    /// The first block the writer may not write (the checkpoint's, INV-7).
    file_limit: AtomicU64,
    /// The next fdatasync fails.
    fail_sync: AtomicBool,
    /// A write whose range ends past this LSN fails.
    fail_write_past: AtomicU64,
    /// The I/O gate (docs/DESIGN.md §1.18): a write pass holds it shared
    /// from reading its limits to the end of its write.
    gate: loom::sync::RwLock<()>,
}

impl Port for Log {
    type Writer = ();
    type Gate<'a> = loom::sync::RwLockReadGuard<'a, ()>;

    fn gate(&self) -> Self::Gate<'_> {
        self.gate.read().expect("a model thread panicked holding the gate")
    }

    fn ready(&self) -> Lsn {
        Lsn(self.ready.load(SeqCst))
    }

    fn file_limit(&self) -> BlockNo {
        BlockNo(self.file_limit.load(SeqCst))
    }

    fn write(
        &self,
        _gate: &Self::Gate<'_>,
        _writer: &mut (),
        range: (Lsn, Lsn),
        _synced: Lsn,
    ) -> Result<(), IoFailure> {
        if range.1 .0 > self.fail_write_past.load(SeqCst) {
            let source = std::io::Error::other("injected");
            return Err(IoFailure { op: "write", path: "model".into(), source });
        }
        Ok(())
    }

    fn sync(&self, _range: (Lsn, Lsn), _started: Moment) -> Result<Moment, IoFailure> {
        if self.fail_sync.swap(false, SeqCst) {
            let source = std::io::Error::other("injected");
            return Err(IoFailure { op: "fdatasync", path: "model".into(), source });
        }
        Ok(Moment::now())
    }

    fn count_wait(&self, _site: Site, _had_to_wait: bool, _waited: Waited) {}

    fn spin_for(&self, _pass: &PassTime) -> Spin {
        Spin::NONE
    }

    fn tick(&self, _now: Moment) {}
}

impl Log {
    /// A fresh log at `at(0)`, in the dedicated mode or not.
    fn new(dedicated: bool) -> Self {
        Log {
            stages: Stages::with_slots(at(0), (), 1 << 40, dedicated, SLOTS),
            ready: AtomicU64::new(at(0).0),
            file_limit: AtomicU64::new(1 << 40),
            fail_sync: AtomicBool::new(false),
            fail_write_past: AtomicU64::new(u64::MAX),
            gate: loom::sync::RwLock::new(()),
        }
    }

    fn written(&self) -> Lsn {
        self.stages.written()
    }

    fn synced(&self) -> Lsn {
        self.stages.synced()
    }

    /// Appenders complete everything up to `at(k)`: the link buffer's tail
    /// moves and the appender that moved it notifies.
    fn append(&self, k: u64) {
        self.append_to(at(k));
    }

    /// Appenders complete everything up to `end`.
    fn append_to(&self, end: Lsn) {
        let old = self.publish_quietly(end);
        self.stages.ready_moved(old, end);
    }

    /// Appenders complete everything up to `end` and notify nobody: a
    /// mini-transaction's publish, whose notice waits for its close
    /// (INV-39). Returns where `ready` was, for the notice.
    fn publish_quietly(&self, end: Lsn) -> Lsn {
        let old = self.ready.swap(end.0, SeqCst);
        // The link buffer's F2: every tail move ends with it, and
        // `ready_moved` relies on it as E2.
        loom::sync::atomic::fence(SeqCst);
        Lsn(old)
    }

    /// A checkpoint completes: the file limit moves to block `k`, a writer
    /// waiting for file space wakes.
    fn checkpoint(&self, k: u64) {
        self.file_limit.store(k, SeqCst);
        self.stages.space_freed();
    }

    /// `Log::wait(at(k), Synced)`.
    fn commit_wait(&self, k: u64) -> Result<(), error::Error> {
        self.stages.wait_synced(self, at(k))
    }

    /// An appender waiting for ring space (`Appender::wait_ring_space`).
    fn wait_written(&self, k: u64) -> Result<(), error::Error> {
        self.stages.wait_written(self, at(k), Site::BufferSpace)
    }

    fn set_active(&self, dedicated: bool) {
        self.stages.set_dedicated(dedicated);
    }
}

/// Starts the two log threads; returns a closure that stops and joins them.
fn start_log_threads(log: &Arc<Log>) -> impl FnOnce() {
    let writer = {
        let log = log.clone();
        loom::thread::spawn(move || log.stages.run_log_writer(&*log))
    };
    let flusher = {
        let log = log.clone();
        loom::thread::spawn(move || log.stages.run_log_flusher(&*log))
    };
    let log = log.clone();
    move || {
        log.stages.shut_down();
        writer.join().expect("writer");
        flusher.join().expect("flusher");
    }
}

/// Starts the log threads in mode `start`, switches to `switch_to` (if any) on a
/// thread of its own while a committer appends its group (end LSN 1) and waits
/// for Synced; the committer must return, and only after the covering sync.
fn commit_while_switching(start: bool, switch_to: Option<bool>) {
    check(move || {
        let log = Arc::new(Log::new(start));
        let stop = start_log_threads(&log);
        let switcher = switch_to.map(|mode| {
            let log = log.clone();
            loom::thread::spawn(move || log.set_active(mode))
        });
        log.append(1);
        log.commit_wait(1).expect("not poisoned");
        assert!(log.synced() >= at(1), "acknowledged before the covering sync");
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

/// INV-37: a commit appended alone (end LSN 1), then a second one (end LSN
/// 2) from another thread, which first switches the mode to dedicated if
/// `switch`; both must be acknowledged, and only after their covering sync.
fn a_second_commit_after_a_lone_one(start: bool, switch: bool) {
    check(move || {
        let log = Arc::new(Log::new(start));
        let stop = start_log_threads(&log);
        log.append(1);
        let second = {
            let log = log.clone();
            loom::thread::spawn(move || {
                if switch {
                    log.set_active(DEDICATED);
                }
                log.append(2);
                log.commit_wait(2).expect("not poisoned");
                assert!(log.synced() >= at(2), "acknowledged before the covering sync");
            })
        };
        log.commit_wait(1).expect("not poisoned");
        assert!(log.synced() >= at(1), "acknowledged before the covering sync");
        second.join().expect("second committer");
        stop();
    });
}

/// With both log threads idle, the writer syncs a lone write itself (the
/// flusher let the sync role go). The second commit, appended before, during
/// or after that sync, must still be synced: by the writer's next pass or the
/// flusher it notifies.
#[test]
fn a_write_during_the_writers_own_sync_is_synced() {
    a_second_commit_after_a_lone_one(DEDICATED, false);
}

/// Across a switch: a committer leads the sync in group commit when the mode
/// turns dedicated; the log writer then writes the second commit and finds
/// the sync role held, so the idle flusher waits for a role that is not free.
/// The committer's release must tell it, or the second commit (which may not
/// lead in the dedicated mode) waits forever.
#[test]
fn a_committer_releasing_the_sync_role_after_a_switch_wakes_the_idle_flusher() {
    a_second_commit_after_a_lone_one(GROUP, true);
}

/// Two committers wait for one pass of the dedicated flusher, which wakes
/// the first covered waiter only (`notify_range_delegated`); that helper must
/// wake the other. `first` and `second` are the committers' LSNs.
fn a_delegated_wake_up_reaches_every_covered_committer(first: Lsn, second: Lsn) {
    check(move || {
        let log = Arc::new(Log::new(DEDICATED));
        let stop = start_log_threads(&log);
        log.append_to(second);
        let other = {
            let log = log.clone();
            loom::thread::spawn(move || {
                log.stages.wait_synced(&*log, first).expect("not poisoned");
                assert!(log.synced() >= first, "acknowledged before the covering sync");
            })
        };
        log.stages.wait_synced(&*log, second).expect("not poisoned");
        assert!(log.synced() >= second, "acknowledged before the covering sync");
        other.join().expect("committer");
        stop();
    });
}

#[test]
fn a_delegated_wake_up_reaches_every_covered_committer_of_a_block() {
    // Both in block 1: the helper wakes the other from its own block on.
    a_delegated_wake_up_reaches_every_covered_committer(at(1), Lsn(at(1).0 + 100));
}

#[test]
fn a_pass_over_more_blocks_than_slots_wakes_every_covered_committer() {
    // The pass covers blocks 0 to 2 and the model has two slots: blocks 0 and
    // 2 share one, so the waiter of block 2 is found before that of block 1.
    // Without the full notification of such a range, the helper (block 2)
    // never wakes block 1's waiter: loom reported the deadlock.
    a_delegated_wake_up_reaches_every_covered_committer(at(1), at(2));
}

/// An appender whose ring slot still holds unwritten bytes waits for `written`
/// (`wait_ring_space` → `wait_written_for`) and must be woken: in group commit
/// by a first committer that leads the write, with the dedicated pipeline by
/// the log writer (no first committer: it would only add states).
fn appender_waits_for_ring_space(mode: bool) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        let stop = start_log_threads(&log);
        log.append(1);
        let first = (mode == GROUP).then(|| {
            let log = log.clone();
            loom::thread::spawn(move || log.commit_wait(1).expect("not poisoned"))
        });
        // A ring of one unit: the bytes up to 2 need everything up to 1 written.
        log.wait_written(1).expect("not poisoned");
        log.append(2);
        log.commit_wait(2).expect("not poisoned");
        assert!(log.synced() >= at(2), "acknowledged before the covering sync");
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
fn writer_waits_for_checkpoint_space(mode: bool) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        log.file_limit.store(1, SeqCst); // the writer may write below at(1) only
        let stop = start_log_threads(&log);
        let checkpointer = {
            let log = log.clone();
            loom::thread::spawn(move || log.checkpoint(2))
        };
        log.append(2);
        log.commit_wait(2).expect("not poisoned");
        assert!(log.synced() >= at(2), "acknowledged before the covering sync");
        checkpointer.join().expect("checkpointer");
        stop();
    });
}

/// A shrinking resize lowers the file limit under the gate held exclusively
/// (docs/DESIGN.md §1.18), while a committer's group is being written: no
/// pass writes past a limit lowered before its write (the pass's INV-7
/// assertion would panic), and the committer is woken once a checkpoint
/// raises the limit again. With the gate a no-op, loom finds the pass that
/// read the old limit and wrote after the lowering.
fn a_limit_lowered_under_the_gate_is_never_passed(mode: bool) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        log.file_limit.store(4, SeqCst);
        let stop = start_log_threads(&log);
        let shrinker = {
            let log = log.clone();
            loom::thread::spawn(move || {
                {
                    let _gate = log.gate.write().expect("gate");
                    log.file_limit.store(2, SeqCst);
                }
                log.checkpoint(4);
            })
        };
        log.append(3);
        log.commit_wait(3).expect("not poisoned");
        assert!(log.synced() >= at(3), "acknowledged before the covering sync");
        shrinker.join().expect("shrinker");
        stop();
    });
}

#[test]
fn a_limit_lowered_under_the_gate_is_never_passed_in_group_commit() {
    a_limit_lowered_under_the_gate_is_never_passed(GROUP);
}

#[test]
fn a_limit_lowered_under_the_gate_is_never_passed_by_the_log_writer() {
    a_limit_lowered_under_the_gate_is_never_passed(DEDICATED);
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
fn a_failed_sync_reaches_every_waiter(mode: bool) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        log.fail_sync.store(true, SeqCst);
        let stop = start_log_threads(&log);
        log.append(2);
        let other = {
            let log = log.clone();
            loom::thread::spawn(move || {
                assert!(log.commit_wait(1).is_err(), "acknowledged over a failed sync");
            })
        };
        assert!(log.commit_wait(2).is_err(), "acknowledged over a failed sync");
        assert_eq!(log.synced(), at(0), "synced moved over a failed sync");
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

/// INV-6's seal (docs/DESIGN.md §1.5): the log threads run [0, 1)'s write
/// and then, in the flusher, its fdatasync, while the writer writes [1, 2) —
/// and one of the two I/Os fails (`fail_write`: the write of [1, 2); else the
/// first fdatasync). The committer of [1, 2) gets the error; from then on
/// neither frontier moves, though the other role's I/O succeeded: without the
/// seal the flusher publishes `synced` (or the writer `written`) after the
/// poison, which is how CI's I/O-error sweep once saw "durable LSN moved
/// after the fault". Finding that takes preemption bound 3
/// (`REDOLOG_LOOM_BOUND=3`); at the default bound these pass either way.
fn a_failure_of_one_role_freezes_the_other_s_frontier(fail_write: bool) {
    check(move || {
        let log = Arc::new(Log::new(DEDICATED));
        if fail_write {
            log.fail_write_past.store(at(1).0, SeqCst);
        } else {
            log.fail_sync.store(true, SeqCst);
        }
        log.append(1);
        let stop = start_log_threads(&log);
        log.append(2);
        assert!(log.commit_wait(2).is_err(), "acknowledged over a failed write or sync");
        let (written, synced) = (log.written(), log.synced());
        stop();
        assert_eq!(log.written(), written, "INV-6: written moved after the committer got the error");
        assert_eq!(log.synced(), synced, "INV-6: synced moved after the committer got the error");
    });
}

#[test]
fn a_failed_write_freezes_synced() {
    a_failure_of_one_role_freezes_the_other_s_frontier(true);
}

#[test]
fn a_failed_sync_freezes_written() {
    a_failure_of_one_role_freezes_the_other_s_frontier(false);
}

/// INV-6's seal in group commit, where committers hold the two roles: one
/// role's I/O is in flight when the other's fails. `fail_write`: this thread
/// syncs [0, 1) (writing it first) while another writes [1, 2) and fails;
/// else this thread writes [1, 2) while another's fdatasync of [0, 1) fails.
/// Whoever got the error reads the frontiers; they never move after that.
/// One preemption finds the late publication without the seal.
fn a_failure_while_the_other_role_publishes(fail_write: bool) {
    check(move || {
        let log = Arc::new(Log::new(GROUP));
        log.append(1);
        let failing = if fail_write {
            log.fail_write_past.store(at(1).0, SeqCst);
            let failing = {
                let log = log.clone();
                loom::thread::spawn(move || {
                    log.append(2);
                    assert!(log.wait_written(2).is_err(), "acknowledged over a failed write");
                    (log.written(), log.synced())
                })
            };
            let _ = log.commit_wait(1); // Ok if it published before the poison
            failing
        } else {
            log.fail_sync.store(true, SeqCst);
            log.wait_written(1).expect("nothing failed yet");
            log.append(2);
            let failing = {
                let log = log.clone();
                loom::thread::spawn(move || {
                    assert!(log.commit_wait(1).is_err(), "acknowledged over a failed sync");
                    (log.written(), log.synced())
                })
            };
            let _ = log.wait_written(2); // Ok if it published before the poison
            failing
        };
        let (written, synced) = failing.join().expect("the failing thread");
        assert_eq!(log.written(), written, "INV-6: written moved after a thread got the error");
        assert_eq!(log.synced(), synced, "INV-6: synced moved after a thread got the error");
    });
}

#[test]
fn a_failed_write_freezes_a_committer_s_sync() {
    a_failure_while_the_other_role_publishes(true);
}

#[test]
fn a_failed_sync_freezes_an_appender_s_write() {
    a_failure_while_the_other_role_publishes(false);
}

/// INV-6's seal when the poisoner holds no role (the checkpoint's slot
/// write, a resize's rename, a panicking appender: `Stages::poison` from a
/// third thread). It seals `written`, then `synced`, then sets the flag, one
/// after the other. Meanwhile, in group commit, one committer syncs [0, 1)
/// while another writes [1, 2). Whoever gets the error reads the frontiers,
/// and they never move after that; nor after the poisoner returns. A
/// publisher whose compare-and-swap met the first seal must finish the
/// second itself before it returns the error: else it reads `synced` while
/// the other committer can still publish it. Finding that takes three
/// threads preempted at once: `REDOLOG_LOOM_BOUND=4` (11 s to fail without
/// the rule, 198 s to pass with it, release build).
#[test]
fn a_poison_from_a_thread_without_a_role_freezes_both_frontiers() {
    check(|| {
        let log = Arc::new(Log::new(GROUP));
        log.append(1);
        log.wait_written(1).expect("nothing failed yet");
        log.append(2);
        let frontiers_if_failed =
            |log: &Log, outcome: Result<(), error::Error>| outcome.is_err().then(|| (log.written(), log.synced()));
        let poisoner = {
            let log = log.clone();
            loom::thread::spawn(move || {
                let source = std::io::Error::other("injected");
                log.stages.poison(IoFailure { op: "checkpoint", path: "model".into(), source });
                (log.written(), log.synced())
            })
        };
        let syncer = {
            let log = log.clone();
            loom::thread::spawn(move || {
                let outcome = log.commit_wait(1);
                frontiers_if_failed(&log, outcome)
            })
        };
        let writer = frontiers_if_failed(&log, log.wait_written(2));
        let syncer = syncer.join().expect("the syncer");
        let poisoned = poisoner.join().expect("the poisoner");
        let last = (log.written(), log.synced());
        assert_eq!(last, poisoned, "INV-6: a frontier moved after the poison returned");
        for seen in [writer, syncer].into_iter().flatten() {
            assert_eq!(last, seen, "INV-6: a frontier moved after a thread got the error");
        }
    });
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
                assert!(log.synced() >= at(3), "acknowledged before the covering sync");
            })
        };
        // The appender: ring space needs [0, 1) written (wait_ring_space), then
        // it copies [1, 2), and the link buffer makes [1, 3) ready at once.
        log.wait_written(1).expect("not poisoned");
        log.append(3);
        committer.join().expect("committer");
    });
}

/// A closed window of one granule: group B = [at(0) + 8, at(0) + 16) may not
/// be closed before group A = [at(0), at(0) + 8) is (INV-22). B's committer
/// waits for the window while another thread closes A — or poisons the log:
/// the waiter must be woken either way (no lost wake-up), get the window only
/// after A closed, and the closed LSN must never pass an open group (INV-21).
fn a_closed_window_waiter_is_woken(poison: bool) {
    check(move || {
        let log = Arc::new(Log::new(GROUP));
        let (a, b) = ((at(0), Lsn(at(0).0 + 8)), (Lsn(at(0).0 + 8), Lsn(at(0).0 + 16)));
        // Beside `ready`'s link buffer, as in the log (both groups reserved).
        let closer = Arc::new(closed::Closer::beside(&link_buf::LinkBuf::new(16, at(0).0, b.1 .0), 8, at(0)));
        let reserved = move || b.1 .0;
        let other = {
            let (log, closer) = (log.clone(), closer.clone());
            loom::thread::spawn(move || {
                if poison {
                    let source = std::io::Error::other("injected");
                    log.stages.poison(IoFailure { op: "fdatasync", path: "model".into(), source });
                } else {
                    if let Some((old, new)) = closer.close(a, reserved) {
                        log.stages.ready_moved(old, new);
                    }
                }
            })
        };
        match closer.wait_for_window(b.0, &log.stages) {
            Ok(_) => {
                assert_eq!(closer.closed_lsn(), a.1, "the window opened before A closed");
                let _ = closer.close(b, reserved);
                assert_eq!(closer.closed_lsn(), b.1);
            }
            Err(_) => {
                assert!(poison, "an error without a poison");
                assert!(closer.closed_lsn() <= a.0, "the closed LSN passed an open group");
            }
        }
        other.join().expect("other");
    });
}

#[test]
fn a_group_waiting_for_the_closed_window_is_woken_by_the_close_before_it() {
    a_closed_window_waiter_is_woken(false);
}

#[test]
fn a_group_waiting_for_the_closed_window_is_woken_by_a_poison() {
    a_closed_window_waiter_is_woken(true);
}

/// INV-39: a mini-transaction publishes its group (end LSN 1) without a
/// notice — it keeps it until it closes, so that nobody is woken inside the
/// closed window — and its owner waits on the log for the group before it
/// closes it. A thread is parked on `ready` meanwhile: in the dedicated mode
/// the log writer; in group commit another committer waiting for the same
/// group, which leads the write role and parks there until the group is
/// published. The owner's wait must wake it (`Stages::nudge_ready`; without
/// the nudge every thread parks for good: loom's deadlock report). Every
/// wait returns, and only after the covering sync.
fn an_open_mini_transaction_s_owner_waits(mode: bool) {
    check(move || {
        let log = Arc::new(Log::new(mode));
        let stop = (mode == DEDICATED).then(|| start_log_threads(&log));
        let other = (mode == GROUP).then(|| {
            let log = log.clone();
            loom::thread::spawn(move || {
                log.commit_wait(1).expect("not poisoned");
                assert!(log.synced() >= at(1), "acknowledged before the covering sync");
            })
        });
        let old = log.publish_quietly(at(1));
        log.commit_wait(1).expect("not poisoned");
        assert!(log.synced() >= at(1), "acknowledged before the covering sync");
        // The close gives the kept notice.
        log.stages.ready_moved(old, at(1));
        if let Some(other) = other {
            other.join().expect("other");
        }
        if let Some(stop) = stop {
            stop();
        }
    });
}

#[test]
fn an_open_mini_transaction_s_owner_waiting_on_the_log_wakes_the_log_writer() {
    an_open_mini_transaction_s_owner_waits(DEDICATED);
}

#[test]
fn an_open_mini_transaction_s_owner_waiting_on_the_log_wakes_the_leader_parked_on_ready() {
    an_open_mini_transaction_s_owner_waits(GROUP);
}

/// INV-28: a leader lets go of the role between two passes to wake the
/// waiters it covered; another committer may take the role and write
/// meanwhile. The first, when it takes the role back, must resume from the
/// stage's frontier, never from the one it read before letting go (a stale
/// frontier rewrites written bytes and trips `Stage::advance`'s check; the
/// first version of INV-28 did, found by `tests/concurrency.rs`).
#[test]
fn a_leader_resumes_from_the_frontier_after_letting_go_of_the_role() {
    // Bound 2: the other committer must be preempted between its look at the
    // role and its park while the leader is preempted in its quiet window.
    common::loom_check(2, || {
        let log = Arc::new(Log::new(GROUP));
        log.append(1);
        let other = {
            let log = log.clone();
            loom::thread::spawn(move || {
                log.append(2);
                log.wait_written(2).expect("not poisoned");
            })
        };
        log.wait_written(1).expect("not poisoned");
        other.join().expect("other");
        assert!(log.written() >= at(2), "a committer returned before its bytes were written");
    });
}

// ---- asynchronous waiters (docs/DESIGN.md §1.14, INV-26, INV-27) ----

/// A future over `Stages::wait_async`, as `DurableFuture` polls it; a log
/// that asks for the log threads is assumed to have them (the model's other
/// thread does the I/O).
struct AsyncSynced<'a> {
    log: &'a Log,
    lsn: Lsn,
    id: u64,
}

impl std::future::Future for AsyncSynced<'_> {
    type Output = Result<(), error::Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, context: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        let completion = wait::Completion::Waker(context.waker().clone());
        match this.log.stages.wait_async(this.lsn, true, &mut this.id, completion) {
            pipeline::AsyncWait::Ready(outcome, _) => std::task::Poll::Ready(outcome),
            pipeline::AsyncWait::Pending | pipeline::AsyncWait::NeedsLogThreads => std::task::Poll::Pending,
        }
    }
}

/// INV-26: a future registers while a committer's sync pass covers its LSN —
/// the future must complete (a lost wake-up is a loom deadlock), and only
/// after the sync; or a poison instead of the sync reaches it.
fn a_future_is_completed_by_the_pass_that_covers_it(poison: bool) {
    check(move || {
        let log = Arc::new(Log::new(GROUP));
        log.append(1);
        let other = {
            let log = log.clone();
            loom::thread::spawn(move || {
                if poison {
                    let source = std::io::Error::other("injected");
                    log.stages.poison(IoFailure { op: "fdatasync", path: "model".into(), source });
                } else {
                    log.commit_wait(1).expect("not poisoned");
                }
            })
        };
        let outcome = loom::future::block_on(AsyncSynced { log: &log, lsn: at(1), id: 0 });
        if poison {
            assert!(outcome.is_err(), "completed Ok over a poison");
        } else {
            outcome.expect("not poisoned");
            assert!(log.synced() >= at(1), "INV-26: completed before the covering sync");
        }
        other.join().expect("other");
        assert!(!log.stages.async_pending(), "a completed future left its registration");
    });
}

#[test]
fn a_future_registered_during_the_covering_sync_is_woken() {
    a_future_is_completed_by_the_pass_that_covers_it(false);
}

#[test]
fn a_poison_completes_a_pending_future() {
    a_future_is_completed_by_the_pass_that_covers_it(true);
}

/// A future polled once and dropped while the sync that covers it is in
/// flight: the registration is withdrawn or taken, never both, never left.
#[test]
fn a_future_dropped_during_the_covering_sync_leaves_nothing() {
    check(|| {
        let log = Arc::new(Log::new(GROUP));
        log.append(1);
        let committer = {
            let log = log.clone();
            loom::thread::spawn(move || log.commit_wait(1).expect("not poisoned"))
        };
        {
            let mut future = Box::pin(AsyncSynced { log: &log, lsn: at(1), id: 0 });
            let waker = std::task::Waker::noop();
            let polled = std::future::Future::poll(future.as_mut(), &mut std::task::Context::from_waker(waker));
            if polled.is_pending() {
                // What `DurableFuture`'s drop does.
                drop(log.stages.cancel_async(at(1), true, future.id));
            }
        }
        committer.join().expect("committer");
        assert!(!log.stages.async_pending(), "a dropped future left its registration");
    });
}

/// INV-27: a future registers while the mode switches to group commit. Either
/// the switch sees the registration and goes back to the log threads, or the
/// future sees group commit and asks for them: a pending future never waits
/// on a log nobody writes for.
#[test]
fn a_switch_to_group_commit_never_strands_a_future() {
    check(|| {
        let log = Arc::new(Log::new(DEDICATED));
        log.append(1);
        let switcher = {
            let log = log.clone();
            loom::thread::spawn(move || {
                log.stages.set_group_unless_async();
            })
        };
        let mut id = 0;
        let waker = std::task::Waker::noop().clone();
        let asked = match log.stages.wait_async(at(1), true, &mut id, wait::Completion::Waker(waker)) {
            pipeline::AsyncWait::NeedsLogThreads => {
                log.set_active(DEDICATED); // `Log::start_async_io`
                true
            }
            pipeline::AsyncWait::Pending => false,
            pipeline::AsyncWait::Ready(..) => unreachable!("nobody syncs in this model"),
        };
        switcher.join().expect("switcher");
        assert!(
            log.stages.dedicated_active(),
            "INV-27: a future is pending and committers lead (it asked for the log threads: {asked})"
        );
        drop(log.stages.cancel_async(at(1), true, id));
    });
}
