//! The link buffer (MySQL's `recent_written`): which reserved ranges of the ring
//! are completely copied, and the end of the longest completed prefix (`tail`).
//!
//! [DESIGN §1.4](crate::docs::design#14-publish-the-link-buffer-mysqls-recent_written). A slot holds the end of the link that starts in its
//! granule: 8 positions, the shortest link (a group header), so two links never
//! start in one granule. Slot `i` serves the granules congruent to `i` modulo the
//! capacity. Any thread may advance the tail
//! (no closer thread). The model `tests/loom_link_buf.rs` compiles this very file
//! against loom, so it may use only `crate::sync`, `core` and the `Arc` that
//! shares a head line (built before any thread sees it).

use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{fence, AtomicU64, Ordering};

/// log2 of the positions per slot. A slot per position (as MySQL's
/// recent_written) made the default array 8 MiB, and every append read or wrote
/// a line of it that had long left the cache; per 8 positions it is 1 MiB for
/// the same reach (no-wait bench: 10.0 → 10.5 M appends/s, docs/BENCHMARKS.md).
pub(crate) const GRANULE_SHIFT: u32 = 3;

/// Completion tracking for concurrently copied ranges `[from, to)`.
pub(crate) struct LinkBuf {
    slots: Box<[AtomicU64]>,
    mask: u64,
    /// The end of the longest completed prefix, the owner's reservation
    /// counter and a second buffer's tail, on one cache line (`Head`).
    head: Arc<CachePadded<Head>>,
    /// Which of the head's tails is this buffer's.
    which: usize,
}

/// Every append reserves with a read-modify-write of the reservation counter,
/// then reads and usually moves the tail, then reads the counter again (`add`);
/// a committed group then does the same with the closed LSN's tail (the
/// second buffer, `beside`). On two cores each of those found its line in the
/// other core's cache: a transfer of ~200 ns per line per append; on one line
/// the later accesses usually hit ([DESIGN §1.4](crate::docs::design#14-publish-the-link-buffer-mysqls-recent_written)).
struct Head {
    reserved: AtomicU64,
    tails: [AtomicU64; 2],
}

impl LinkBuf {
    /// A buffer of `capacity` slots (a power of two) whose prefix ends at `start`;
    /// it reaches `capacity << GRANULE_SHIFT` positions past the tail.
    /// `reserved` starts the reservation counter (see [`LinkBuf::reserved`]).
    pub(crate) fn new(capacity: usize, start: u64, reserved: u64) -> Self {
        let head = Head { reserved: AtomicU64::new(reserved), tails: [AtomicU64::new(start), AtomicU64::new(0)] };
        Self::with_head(capacity, Arc::new(CachePadded::new(head)), 0)
    }

    /// A buffer of `capacity` slots (a power of two) whose tail is
    /// `head.tails[which]`.
    fn with_head(capacity: usize, head: Arc<CachePadded<Head>>, which: usize) -> Self {
        assert!(capacity.is_power_of_two(), "link buffer capacity {capacity} is not a power of two");
        let slots = (0..capacity).map(|_| AtomicU64::new(0)).collect();
        LinkBuf { slots, mask: capacity as u64 - 1, head, which }
    }

    /// A second buffer of `capacity` slots whose prefix ends at `start`, with
    /// its tail on this buffer's head line (the closed LSN beside `ready`,
    /// §1.4 "The head line"). Its `add`s read this buffer's reservation
    /// counter through their `reserved_end`, which then hits the same line.
    /// Call it before any thread uses this buffer, and once.
    pub(crate) fn beside(&self, capacity: usize, start: u64) -> Self {
        assert_eq!(self.which, 0, "a head line holds two tails");
        // Relaxed: the buffer is not shared yet; whoever shares it publishes it.
        self.head.tails[1].store(start, Ordering::Relaxed);
        Self::with_head(capacity, self.head.clone(), 1)
    }

    /// This buffer's tail on the head line.
    #[inline]
    fn tail_cell(&self) -> &AtomicU64 {
        // `& 1`: no bounds check on the append path (`which` is 0 or 1).
        &self.head.tails[self.which & 1]
    }

    /// The owner's reservation counter, kept on the tail's cache line. The link
    /// buffer itself never touches it: `add`'s `reserved_end` reads it.
    pub(crate) fn reserved(&self) -> &AtomicU64 {
        &self.head.reserved
    }

    /// The end of the longest completed prefix (`ready_lsn`).
    pub(crate) fn tail(&self) -> u64 {
        // SeqCst: pairs with the tail store/CAS in `advance` (INV-2, INV-10).
        self.tail_cell().load(Ordering::SeqCst)
    }

    /// Whether a link starting at `from` can be recorded without overwriting a
    /// slot that the tail has not consumed yet.
    pub(crate) fn has_space(&self, from: u64) -> bool {
        (from >> GRANULE_SHIFT) - (self.tail() >> GRANULE_SHIFT) <= self.mask
    }

    /// The lowest tail at which a link starting at `from` has space.
    pub(crate) fn space_target(&self, from: u64) -> u64 {
        ((from >> GRANULE_SHIFT) - self.mask) << GRANULE_SHIFT
    }

    fn index(&self, position: u64) -> usize {
        ((position >> GRANULE_SHIFT) & self.mask) as usize
    }

    /// Records that `[from, to)` is completely copied and advances the tail as far
    /// as possible. Returns the stretch `(old, new)` by which this call moved the
    /// tail, if it moved it. Precondition: `to - from >= 8` (one granule) and
    /// `has_space(from)`, and
    /// the caller reserved `[from, to)` with a SeqCst read-modify-write of the
    /// counter `reserved_end` reads.
    ///
    /// `reserved_end` returns an upper bound of the start of every link reserved
    /// so far. It lets the head skip reading the slot at `to` when nobody reserved
    /// past `to`: that slot is a cache line another core usually just wrote, and
    /// reading it cost about 200 ns on this machine ([DESIGN §1.4](crate::docs::design#14-publish-the-link-buffer-mysqls-recent_written)).
    ///
    /// Every store-then-load pair below is separated by `fence(SeqCst)`, the form
    /// of the store-buffering rule that loom models (it treats SeqCst loads and
    /// stores as AcqRel); on x86 each fence is one `mfence`.
    pub(crate) fn add(&self, from: u64, to: u64, reserved_end: impl FnOnce() -> u64) -> Option<(u64, u64)> {
        // F1: our reservation (program order: before this call) precedes our
        // tail read. Pairs with F2 of the link that ends at `from`.
        fence(Ordering::SeqCst);
        self.add_after_fence(from, to, reserved_end)
    }

    /// `add` for a caller that already executed a `fence(SeqCst)` (or a SeqCst
    /// read-modify-write) after its reservation: that is F1. The closed link
    /// buffer's adds come after the group's add to the first buffer, whose F1
    /// serves (one `mfence` fewer per append).
    pub(crate) fn add_after_fence(&self, from: u64, to: u64, reserved_end: impl FnOnce() -> u64) -> Option<(u64, u64)> {
        debug_assert!(to - from >= 1 << GRANULE_SHIFT, "link {from}..{to} shorter than a granule");
        debug_assert!(self.has_space(from), "link {from} without space, tail {}", self.tail());
        // Fast path: we are the head. Nobody else can move the tail while it sits
        // at `from` (our link is the only one that starts there and it is not in
        // its slot), so a plain store suffices.
        let tail = self.tail_cell();
        if tail.load(Ordering::Acquire) == from {
            // Release: the ring bytes of our link happen-before any reader that
            // sees the new tail (INV-2).
            tail.store(to, Ordering::Release);
            // F2: store-buffering with the appender of the link that starts at
            // `to`, which reserved (then F1) before it reads the tail. Either
            // our read of the reservation counter sees its reservation, and we
            // look at its slot, or its F1 comes after our F2 and its tail read
            // sees `to`: it takes this fast path itself.
            fence(Ordering::SeqCst);
            if reserved_end() <= to {
                return Some((from, to));
            }
            let moved = self.advance_from(to).map_or(to, |(_, new)| new);
            return Some((from, moved));
        }
        // Release: pairs with the Acquire slot read of whoever consumes the link.
        self.slots[self.index(from)].store(to, Ordering::Release);
        // F3: store-buffering with a concurrent advancer, which moves the tail
        // (then F4) and reads our slot. Either it sees our slot, or our tail
        // read below sees its move and we consume our link ourselves.
        fence(Ordering::SeqCst);
        self.advance()
    }

    /// Consumes completed links at the tail. Returns the stretch this call moved
    /// the tail by, if any.
    pub(crate) fn advance(&self) -> Option<(u64, u64)> {
        self.advance_from(self.tail_cell().load(Ordering::Acquire))
    }

    /// `advance`, starting from a tail value the caller just read or stored.
    fn advance_from(&self, mut tail: u64) -> Option<(u64, u64)> {
        let mut moved: Option<(u64, u64)> = None;
        loop {
            // Acquire: pairs with the Release slot store; the link's ring bytes
            // happen-before our tail move publishes them.
            let next = self.slots[self.index(tail)].load(Ordering::Acquire);
            // A slot value <= tail is a link of an earlier lap or granule, already
            // consumed (its end was <= the tail when it was consumed). Only a
            // link that starts exactly at `tail` can hold a larger value: links
            // tile the stream and span at least a granule, so the next link
            // after the one at `tail` starts in a later granule; and a future
            // link in a congruent granule needs `has_space`, which requires the
            // tail to have moved past `tail`'s granule first.
            if next <= tail {
                return moved;
            }
            // AcqRel: Release publishes the consumed link's bytes to readers of
            // the tail; Acquire orders our next slot read after a competing move.
            match self.tail_cell().compare_exchange(tail, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    moved = Some((moved.map_or(tail, |(old, _)| old), next));
                    // F4: pairs with F3 of the appender whose slot we read next.
                    fence(Ordering::SeqCst);
                    tail = next;
                }
                // Another thread moved the tail; continue from where it stands.
                Err(current) => tail = current,
            }
        }
    }
}
