//! The store's view of the log — the vote, the committed id, the purge point
//! and the position index of the entries, with a cache of the newest — and
//! the one path that appends to the log, which keeps that view in step with
//! it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use redolog::{Log, Lsn};

use crate::error::Error;
use crate::line::Line;

/// Entries kept in memory beyond those not yet durable: reads of the newest
/// entries (replication to followers that keep up) never touch the files.
pub(crate) const CACHED_ENTRIES: usize = 4096;

/// Where an entry lives, and the entry itself while it is cached.
pub(crate) struct Slot<L: Line> {
    pub log_id: L::LogId,
    /// The start of its group: where the live reader starts.
    pub group: Lsn,
    /// The end of its group: the entry is durable once the log is.
    pub end: Lsn,
    /// Its record number in the group.
    pub record: usize,
    pub cached: Option<L::Entry>,
}

/// The store's view of the log, behind one mutex (never held across I/O or
/// an await).
pub(crate) struct State<L: Line> {
    pub vote: Option<L::Vote>,
    pub committed: Option<L::LogId>,
    pub purged: Option<L::LogId>,
    pub entries: BTreeMap<u64, Slot<L>>,
    /// The end of the newest group the store appended or recovered: where a
    /// purge with no entry left checkpoints.
    pub end: Lsn,
    /// The last checkpoint: recovery starts here.
    pub checkpoint: Lsn,
    /// Entries below this index hold no cached entry.
    pub uncached_below: u64,
    /// The committed id `save_committed` was given, encoded, not yet in the
    /// log: it goes first in the next group the store appends (or is
    /// appended when the store closes), so it costs no fdatasync of its own.
    pub pending_committed: Option<Vec<u8>>,
}

impl<L: Line> State<L> {
    pub fn truncate(&mut self, since: u64) {
        // The common case, an append past the last entry, has nothing to cut:
        // `split_off` would still walk and rebuild the tree's right edge.
        if self.entries.last_key_value().is_some_and(|(&last, _)| last >= since) {
            drop(self.entries.split_off(&since));
        }
    }

    /// An entry at `index` replaces the one there and every one after it
    /// (Raft's log matching: a new entry at an index ends the old suffix).
    pub fn insert(&mut self, index: u64, slot: Slot<L>) {
        self.truncate(index);
        self.entries.insert(index, slot);
    }

    pub fn purge(&mut self, upto: L::LogId) {
        self.entries = self.entries.split_off(&(L::index(&upto) + 1));
        if self.purged.as_ref().is_none_or(|purged| L::index(purged) < L::index(&upto)) {
            self.purged = Some(upto);
        }
    }

    /// Drops cached entries that are durable, oldest first, down to
    /// `CACHED_ENTRIES`.
    pub fn evict(&mut self, durable: Lsn) {
        let Some((&last, _)) = self.entries.last_key_value() else { return };
        let keep_from = last.saturating_sub(CACHED_ENTRIES as u64 - 1);
        for (&index, slot) in self.entries.range_mut(self.uncached_below..keep_from) {
            if slot.end > durable {
                break;
            }
            slot.cached = None;
            self.uncached_below = index + 1;
        }
    }
}

/// What the clones of a store share.
pub(crate) struct Shared<L: Line> {
    pub log: Log,
    state: Mutex<State<L>>,
    /// The log's capacity: a purge checkpoints once an eighth of it is free
    /// to reclaim.
    pub capacity: u64,
}

impl<L: Line> Drop for Shared<L> {
    /// Appends the pending committed id; the log's own drop then writes and
    /// syncs it.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(record) = state.pending_committed.take() {
            // Best effort, as the log's drop is: the committed id is a hint
            // (docs/RAFT.md, "Durability").
            let _ = self.log.append_group(&[&record]);
        }
    }
}

/// Where a group went.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Appended {
    pub start: Lsn,
    pub end: Lsn,
    /// The number, in the group, of the first record the caller gave (1
    /// when the pending committed id went first).
    pub first: usize,
}

impl<L: Line> Shared<L> {
    pub fn new(log: Log, state: State<L>, capacity: u64) -> Self {
        Shared { log, state: Mutex::new(state), capacity }
    }

    /// The view, locked (never across I/O or an await).
    pub fn state(&self) -> MutexGuard<'_, State<L>> {
        // A panic while holding the lock leaves maps that are still whole:
        // every update is one map operation.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `records` as one group, after the pending committed id if
    /// there is one, and hands `update` the locked view and where the group
    /// went.
    ///
    /// RS-1 ([RAFT, "Appends"](crate::docs::raft#appends)): the group's start and end are the
    /// log's own answer (`Log::append_group_range`), not the end of the group
    /// the view saw last, so the position index is true whoever appends
    /// meanwhile — a clone of the store, a purge's checkpoint record, the
    /// close-time committed id. The view's lock is not held across the
    /// append. (A failed append poisons the log: the pending id has nowhere
    /// left to go.)
    pub fn append_group<R>(
        &self,
        records: &[Vec<u8>],
        update: impl FnOnce(&mut State<L>, Appended) -> R,
    ) -> Result<R, Error> {
        let pending = self.state().pending_committed.take();
        let refs: Vec<&[u8]> = pending.iter().chain(records).map(Vec::as_slice).collect();
        let (start, end) = self.log.append_group_range(&refs)?;
        let mut state = self.state();
        state.end = state.end.max(end);
        Ok(update(&mut state, Appended { start, end, first: usize::from(pending.is_some()) }))
    }
}
