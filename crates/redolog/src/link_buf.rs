//! The link buffer (MySQL's `recent_written`): which reserved ranges of the ring
//! are completely copied, and the end of the longest completed prefix (`tail`).
//!
//! docs/DESIGN.md §1.4. A slot holds the end of the link that starts at a position
//! congruent to the slot index modulo the capacity. Any thread may advance the tail
//! (no closer thread). The model `tests/loom_link_buf.rs` compiles this very file
//! against loom, so it may use only `crate::sync` and `core`.

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{AtomicU64, Ordering};

/// Completion tracking for concurrently copied ranges `[from, to)`.
pub(crate) struct LinkBuf {
    slots: Box<[AtomicU64]>,
    mask: u64,
    /// The end of the longest completed prefix. Only grows. Padded: every append
    /// moves it, and the slot pointer next to it is read by every append.
    tail: CachePadded<AtomicU64>,
}

impl LinkBuf {
    /// A buffer of `capacity` slots (a power of two) whose prefix ends at `start`.
    pub(crate) fn new(capacity: usize, start: u64) -> Self {
        assert!(capacity.is_power_of_two(), "link buffer capacity {capacity} is not a power of two");
        let slots = (0..capacity).map(|_| AtomicU64::new(0)).collect();
        LinkBuf { slots, mask: capacity as u64 - 1, tail: CachePadded::new(AtomicU64::new(start)) }
    }

    /// The end of the longest completed prefix (`ready_lsn`).
    pub(crate) fn tail(&self) -> u64 {
        // SeqCst: pairs with the tail store/CAS in `advance` (INV-2, INV-10).
        self.tail.load(Ordering::SeqCst)
    }

    /// Whether a link starting at `from` can be recorded without overwriting a
    /// slot that the tail has not consumed yet.
    pub(crate) fn has_space(&self, from: u64) -> bool {
        from - self.tail() <= self.mask
    }

    /// Records that `[from, to)` is completely copied and advances the tail as far
    /// as possible. Returns the stretch `(old, new)` by which this call moved the
    /// tail, if it moved it. Precondition: `from < to` and `has_space(from)`.
    pub(crate) fn add(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        debug_assert!(from < to, "empty link {from}..{to}");
        debug_assert!(self.has_space(from), "link {from} without space, tail {}", self.tail());
        // Fast path: we are the head. Nobody else can move the tail while it sits
        // at `from` (our link is the only one that starts there and it is not in
        // its slot), so a plain store suffices. SeqCst: the same store-buffering
        // argument as in `advance` (a link at `to` may be stored concurrently).
        if self.tail.load(Ordering::SeqCst) == from {
            self.tail.store(to, Ordering::SeqCst);
            let moved = self.advance().map_or(to, |(_, new)| new);
            return Some((from, moved));
        }
        // SeqCst: store-buffering with the tail CAS of a concurrent advancer. We
        // store the slot then read the tail; the advancer moves the tail then
        // reads the slot. With SeqCst at least one of us sees the other.
        self.slots[(from & self.mask) as usize].store(to, Ordering::SeqCst);
        self.advance()
    }

    /// Consumes completed links at the tail. Returns the stretch this call moved
    /// the tail by, if any.
    pub(crate) fn advance(&self) -> Option<(u64, u64)> {
        let mut moved: Option<(u64, u64)> = None;
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let next = self.slots[(tail & self.mask) as usize].load(Ordering::SeqCst);
            // A slot value <= tail is a link of an earlier lap, already consumed
            // (its end was <= the tail when it was consumed). Only a link that
            // starts exactly at `tail` can hold a larger value: links tile the
            // stream, and a future link congruent to `tail` needs `has_space`,
            // which requires the tail to have moved past `tail` first.
            if next <= tail {
                return moved;
            }
            if self.tail.compare_exchange(tail, next, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                moved = Some((moved.map_or(tail, |(old, _)| old), next));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_links_complete_the_prefix() {
        let links = LinkBuf::new(16, 100);
        assert_eq!(links.add(110, 120), None);
        assert_eq!(links.tail(), 100);
        assert_eq!(links.add(105, 110), None);
        assert_eq!(links.add(100, 105), Some((100, 120)));
        assert_eq!(links.tail(), 120);
    }

    #[test]
    fn stale_slots_from_an_earlier_lap_are_ignored() {
        let links = LinkBuf::new(4, 0);
        // Links of length 1 fill every slot; then the ring laps.
        for position in 0..10 {
            assert_eq!(links.add(position, position + 1), Some((position, position + 1)));
        }
        // Slot of position 12 holds 9 (from position 8): stale, so no advance.
        assert_eq!(links.add(11, 12), None);
        assert_eq!(links.tail(), 10);
        assert_eq!(links.add(10, 11), Some((10, 12)));
    }

    #[test]
    fn space_is_bounded_by_capacity() {
        let links = LinkBuf::new(8, 0);
        assert!(links.has_space(7));
        assert!(!links.has_space(8));
        links.add(0, 1);
        assert!(links.has_space(8));
    }

    #[test]
    fn long_links_may_exceed_the_capacity() {
        let links = LinkBuf::new(4, 0);
        assert_eq!(links.add(0, 100), Some((0, 100)));
        assert_eq!(links.add(101, 102), None);
        assert_eq!(links.add(100, 101), Some((100, 102)));
    }

    #[test]
    fn concurrent_links_complete_to_the_end() {
        let links = std::sync::Arc::new(LinkBuf::new(1 << 10, 0));
        let next = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (links, next) = (links.clone(), next.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let from = next.fetch_add(3, Ordering::Relaxed);
                        while !links.has_space(from) {
                            std::thread::yield_now();
                        }
                        links.add(from, from + 3);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("thread");
        }
        assert_eq!(links.tail(), 4 * 10_000 * 3);
    }
}
