//! A synchronous archive's acknowledgement ([DESIGN §1.17](crate::docs::design#117-continuous-archiving), INV-36):
//! a commit waiting in `Archiver::wait` alongside others parks once, on event
//! slots keyed by its LSN, and is woken by whichever ends last — the
//! archiver's sync of its copy or the log's sync, which the archiver asked
//! for (`Log::on_durable`). A commit waiting alone waits for the log itself
//! (leading its group commit), publishes what the log synced, and then waits
//! for the archive.
//!
//! Written only against `crate::sync` and `crate::wait`, so
//! `tests/loom_archive.rs` compiles this file as it is against loom.

use crate::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use crate::wait::{EventSlots, Spin};

/// What the archiver and its waiters share to acknowledge a commit.
pub(crate) struct Acks {
    /// Every group ending at or before this LSN is archived and synced.
    archived: AtomicU64,
    /// The log has synced every group ending at or before this LSN: what the
    /// log's answers to the archiver's requests said.
    log_synced: AtomicU64,
    /// `min(archived, log_synced)`, raised by whichever of the two moves
    /// last: a synchronous commit's acknowledgement.
    acknowledged: AtomicU64,
    /// The log answered a request with an error (poisoned, or closed):
    /// waiters ask the log itself.
    log_failed: AtomicBool,
    /// The archiver has ended (stopped or failed): waiters stop waiting.
    ended: AtomicBool,
    /// Threads between `arrive` and `leave`.
    waiters: AtomicU64,
    /// Those of them that rely on the archiver to ask the log (between
    /// `park` and `unpark`).
    parked: AtomicU64,
    /// Waiters park on the slot of their LSN.
    events: EventSlots,
}

/// How a wait for an LSN ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Synced in the archive and in the log.
    Acknowledged,
    /// In the synced archive already when the waiter arrived: the archiver
    /// may not have asked the log for it, so the waiter waits for the log.
    AskTheLog,
    /// The archiver ended or the log failed: the waiter takes the log's own
    /// answer, then waits for the archive alone (`wait_archived`).
    Settle,
}

impl Acks {
    /// Nothing acknowledged yet; the archive synced up to `archived`.
    pub(crate) fn new(archived: u64, slots: usize) -> Acks {
        Acks {
            archived: AtomicU64::new(archived),
            log_synced: AtomicU64::new(0),
            acknowledged: AtomicU64::new(0),
            log_failed: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            waiters: AtomicU64::new(0),
            parked: AtomicU64::new(0),
            events: EventSlots::new(slots),
        }
    }

    /// Where the synced archive ends.
    pub(crate) fn archived(&self) -> u64 {
        self.archived.load(Ordering::SeqCst)
    }

    /// Whether `lsn` is synced in the archive and in the log.
    pub(crate) fn acknowledged(&self, lsn: u64) -> bool {
        self.acknowledged.load(Ordering::SeqCst) >= lsn
    }

    /// Whether a thread waits: the archiver then writes its batches at once
    /// and asks the log to sync them.
    pub(crate) fn waiting(&self) -> bool {
        self.waiters.load(Ordering::SeqCst) > 0
    }

    /// Whether a parked waiter relies on the archiver to ask the log.
    pub(crate) fn asking(&self) -> bool {
        self.parked.load(Ordering::SeqCst) > 0
    }

    /// A waiter arrives; whether it is the only one (it then waits for the
    /// log itself: `log_synced`, then `wait_archived`).
    pub(crate) fn arrive(&self) -> bool {
        self.waiters.fetch_add(1, Ordering::SeqCst) == 0
    }

    /// A waiter leaves.
    pub(crate) fn leave(&self) {
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Parks for `lsn` (between `park` and `unpark`): the archiver asks the
    /// log for it. The waiter's `parked` store comes before its `archived`
    /// load; the archiver's `archived` store before its `parked` load
    /// (`archive_synced`): one of them sees the other, so a group a parked
    /// waiter needs is asked of the log by the archiver, or by the waiter
    /// itself (`AskTheLog`).
    pub(crate) fn park(&self, lsn: u64) -> Outcome {
        self.parked.fetch_add(1, Ordering::SeqCst);
        // A1: the store before the `archived` load (store buffering: SeqCst
        // alone, as loom models it, would let both sides read stale).
        fence(Ordering::SeqCst);
        let outcome = self.wait(lsn);
        self.parked.fetch_sub(1, Ordering::SeqCst);
        outcome
    }

    fn wait(&self, lsn: u64) -> Outcome {
        if self.archived() >= lsn && !self.acknowledged(lsn) {
            return Outcome::AskTheLog;
        }
        let over = || self.ended.load(Ordering::SeqCst) || self.log_failed.load(Ordering::SeqCst);
        self.events.wait(lsn, Spin::NONE, || self.acknowledged(lsn) || over());
        if self.acknowledged(lsn) {
            Outcome::Acknowledged
        } else {
            Outcome::Settle
        }
    }

    /// Once the log's own wait covered `lsn` (a waiter alone, or after
    /// `Outcome::Settle`): waits until the archive holds `lsn` synced (true)
    /// or the archiver ended (false). A waiter alone published `log_synced`
    /// first, so the acknowledgement that passes `lsn` wakes it; after a
    /// failure of the log, every archive sync wakes all waiters.
    pub(crate) fn wait_archived(&self, lsn: u64) -> bool {
        let reached = || self.archived() >= lsn;
        self.events.wait(lsn, Spin::NONE, || reached() || self.ended.load(Ordering::SeqCst));
        reached()
    }

    /// The archiver synced its copy up to `end`. Returns whether a waiter
    /// is parked: then the archiver asks the log to sync `end` too.
    pub(crate) fn archive_synced(&self, end: u64) -> bool {
        self.archived.store(end, Ordering::SeqCst);
        fence(Ordering::SeqCst); // A2: the store before the `parked` load
        let waiting = self.asking();
        self.acknowledge();
        if self.log_failed.load(Ordering::SeqCst) {
            // Waiters past the log's answer wait for `archived` alone.
            self.events.notify_all();
        }
        waiting
    }

    /// The log synced up to `end` (its answer to the archiver's request, or
    /// what a waiter alone learnt from its own wait).
    pub(crate) fn log_synced(&self, end: u64) {
        self.log_synced.fetch_max(end, Ordering::SeqCst);
        self.acknowledge();
    }

    /// The log answered a request with an error.
    pub(crate) fn log_failed(&self) {
        self.log_failed.store(true, Ordering::SeqCst);
        self.events.notify_all();
    }

    /// The archiver ended.
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.events.notify_all();
    }

    /// Raises `acknowledged` to `min(archived, log_synced)` and wakes the
    /// waiters it passes. Each side stores its own value first, so the side
    /// that comes second reads both. The caller — the archiver with its next
    /// batch to copy, or a log thread — wakes one waiter, which wakes the
    /// others (`notify_range_delegated`, as the log's own passes do).
    fn acknowledge(&self) {
        fence(Ordering::SeqCst); // A3: the caller's store before both loads
        let both = self.archived.load(Ordering::SeqCst).min(self.log_synced.load(Ordering::SeqCst));
        let old = self.acknowledged.fetch_max(both, Ordering::SeqCst);
        if both > old {
            self.events.notify_range_delegated(old, both);
        }
    }
}
