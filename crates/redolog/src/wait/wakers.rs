//! Waker slots: asynchronous waiters — a future's `Waker`, or a callback —
//! kept in LSN-keyed slots like the parked threads of `event.rs`, so that a
//! pass wakes exactly the waiters it covered, with no thread per waiter
//! ([DESIGN §1.14](crate::docs::design#114-asynchronous-waiters-futures-and-callbacks), INV-26).
//!
//! A waiter for LSN `L` is kept in slot `((L − 1) / 512) mod slots` (the
//! `slot_of` of `event.rs`: the same slots the threads use). The
//! registrar inserts its entry and counts it under the slot's lock, then (A1)
//! re-reads the value it waits for; the notifier publishes the value, then
//! (E2, its caller's) reads the counts: store-buffering, so one of the two sees
//! the other. A notifier that sees a count takes the slot's lock, so it sees
//! the entry inserted before the count.

use std::task::Waker;

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::sync::Mutex;
use crate::wait::{slot_of, slots_covering};

/// A callback waiting for an outcome.
pub(crate) type Callback<E> = Box<dyn FnOnce(Result<(), E>) + Send>;

/// The waiters of one slot.
type Slot<E> = CachePadded<Mutex<Vec<Entry<E>>>>;

/// What completes an asynchronous waiter.
pub(crate) enum Completion<E> {
    /// A future's task: woken, it polls and reads the outcome itself.
    Waker(Waker),
    /// A callback, called once with the outcome.
    Callback(Callback<E>),
}

/// One waiter: its LSN, its registration id and what completes it.
struct Entry<E> {
    lsn: u64,
    id: u64,
    completion: Completion<E>,
}

/// The callbacks a notifier took out of the slots, to call after it let go
/// of their locks (a callback may register another). Wakers are woken in
/// place: waking is short and never blocks (the executor's contract), and
/// taking them needs no allocation.
#[must_use = "the callbacks taken must be called"]
pub(crate) struct Taken<E>(Vec<(u64, Callback<E>)>);

impl<E> Taken<E> {
    /// Calls every callback taken with what `outcome` returns for its LSN.
    pub(crate) fn complete(self, outcome: impl Fn(u64) -> Result<(), E>) {
        for (lsn, callback) in self.0 {
            callback(outcome(lsn));
        }
    }
}

/// Waiters each slot has room for from the first registration on (a
/// pass covers a slot's block at a time; more than this in one block grow it).
const SLOT_CAPACITY: usize = 4;

/// LSN-keyed slots of asynchronous waiters.
pub(crate) struct WakerSlots<E> {
    slots: Box<[Slot<E>]>,
    /// Entries per slot, changed under the slot's lock: a notifier skips a
    /// slot without locking it.
    counts: Box<[AtomicU32]>,
    /// Entries in all slots: a notifier skips everything with one load.
    total: CachePadded<AtomicU32>,
    /// The next registration id.
    next_id: AtomicU64,
    /// Whether every slot has its capacity reserved (at the first
    /// registration): a log that never waits asynchronously pays nothing, one
    /// that does never allocates in a slot again.
    reserved: AtomicBool,
    mask: u64,
}

impl<E> WakerSlots<E> {
    /// `count` slots, a power of two.
    pub(crate) fn new(count: usize) -> Self {
        assert!(count.is_power_of_two());
        WakerSlots {
            slots: (0..count).map(|_| CachePadded::new(Mutex::new(Vec::new()))).collect(),
            counts: (0..count).map(|_| AtomicU32::new(0)).collect(),
            total: CachePadded::new(AtomicU32::new(0)),
            next_id: AtomicU64::new(1),
            reserved: AtomicBool::new(false),
            mask: count as u64 - 1,
        }
    }

    /// Waiters registered now (for the mode: INV-27).
    pub(crate) fn pending(&self) -> u32 {
        self.total.load(Ordering::SeqCst)
    }

    /// A new registration id (never 0).
    pub(crate) fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers (or, for a known `id`, updates) the waiter for `lsn`, then
    /// executes A1: the caller re-reads the value it waits for after this
    /// returns, and `cancel`s if it is already covered.
    pub(crate) fn register(&self, lsn: u64, id: u64, completion: Completion<E>) {
        // Relaxed: only who reserves is decided here; the slots' locks order
        // the rest.
        if !self.reserved.load(Ordering::Relaxed) && !self.reserved.swap(true, Ordering::Relaxed) {
            self.reserve_all();
        }
        let index = slot_of(lsn, self.mask);
        {
            let mut slot = self.slots[index].lock();
            if let Some(entry) = slot.iter_mut().find(|entry| entry.id == id) {
                entry.completion = completion;
            } else {
                slot.push(Entry { lsn, id, completion });
                // Under the lock: a notifier that sees the count then locks the
                // slot sees the entry. SeqCst: store-buffering with the
                // notifier's value (INV-26).
                self.counts[index].fetch_add(1, Ordering::SeqCst);
                self.total.fetch_add(1, Ordering::SeqCst);
            }
        }
        fence(Ordering::SeqCst); // A1: our count before our read of the value
    }

    /// Gives every slot room for a few waiters, so that no registration
    /// allocates later: which slots a workload first fills depends on which
    /// futures its syncs beat to the first poll.
    fn reserve_all(&self) {
        for slot in &*self.slots {
            slot.lock().reserve(SLOT_CAPACITY);
        }
    }

    /// Removes the waiter `id` for `lsn` if a notifier has not taken it yet
    /// (a future completed by its own check, or dropped) and returns what
    /// would have completed it; `None` if a notifier took it.
    pub(crate) fn cancel(&self, lsn: u64, id: u64) -> Option<Completion<E>> {
        let index = slot_of(lsn, self.mask);
        let mut slot = self.slots[index].lock();
        let position = slot.iter().position(|entry| entry.id == id)?;
        let entry = slot.swap_remove(position);
        self.counts[index].fetch_sub(1, Ordering::SeqCst);
        self.total.fetch_sub(1, Ordering::SeqCst);
        Some(entry.completion)
    }

    /// Wakes the waiters whose LSN is in `(old, new]` and takes their
    /// callbacks, after the caller published `new` and executed a SeqCst fence
    /// (E2). Visits only the slots of those blocks.
    pub(crate) fn take_range(&self, old: u64, new: u64) -> Taken<E> {
        let mut taken = Vec::new();
        if new <= old || self.total.load(Ordering::SeqCst) == 0 {
            return Taken(taken);
        }
        for index in slots_covering(old, new, self.mask) {
            if self.counts[index].load(Ordering::SeqCst) == 0 {
                continue;
            }
            self.take_from(index, |lsn| lsn <= new, &mut taken);
        }
        Taken(taken)
    }

    /// Wakes every waiter and takes every callback (poison, shutdown).
    pub(crate) fn take_all(&self) -> Taken<E> {
        let mut taken = Vec::new();
        fence(Ordering::SeqCst); // E2: the caller's poison or shutdown flag before the counts
        if self.total.load(Ordering::SeqCst) == 0 {
            return Taken(taken);
        }
        for index in 0..self.slots.len() {
            if self.counts[index].load(Ordering::SeqCst) > 0 {
                self.take_from(index, |_| true, &mut taken);
            }
        }
        Taken(taken)
    }

    fn take_from(&self, index: usize, covered: impl Fn(u64) -> bool, callbacks: &mut Vec<(u64, Callback<E>)>) {
        let mut slot = self.slots[index].lock();
        let before = slot.len();
        let mut kept = 0;
        // In place, keeping the Vec's capacity: no allocation per pass.
        for position in 0..slot.len() {
            if covered(slot[position].lsn) {
                continue;
            }
            slot.swap(kept, position);
            kept += 1;
        }
        for entry in slot.drain(kept..) {
            match entry.completion {
                Completion::Waker(waker) => waker.wake(),
                Completion::Callback(callback) => callbacks.push((entry.lsn, callback)),
            }
        }
        let removed = (before - kept) as u32;
        if removed > 0 {
            self.counts[index].fetch_sub(removed, Ordering::SeqCst);
            self.total.fetch_sub(removed, Ordering::SeqCst);
        }
    }
}
