//! Unit tests of the link buffer. They live outside `link_buf.rs` because the
//! loom model (`tests/loom_link_buf.rs`) compiles that file against loom's atomics,
//! which only work inside a model. Positions are in granules of 8 (`G`): a link
//! spans at least one.

use crate::link_buf::{LinkBuf, GRANULE_SHIFT};
use crate::sync::atomic::{AtomicU64, Ordering};

const G: u64 = 1 << GRANULE_SHIFT;

#[test]
fn out_of_order_links_complete_the_prefix() {
    let links = LinkBuf::new(16, 100 * G, 0);
    assert_eq!(links.add(110 * G, 120 * G, || 120 * G), None);
    assert_eq!(links.tail(), 100 * G);
    assert_eq!(links.add(105 * G, 110 * G, || 120 * G), None);
    assert_eq!(links.add(100 * G, 105 * G, || 120 * G), Some((100 * G, 120 * G)));
    assert_eq!(links.tail(), 120 * G);
}

#[test]
fn links_of_odd_lengths_share_no_slot() {
    // Starts 0, 9, 20, 28: granules 0, 1, 2, 3.
    let links = LinkBuf::new(4, 0, 0);
    assert_eq!(links.add(20, 28, || 36), None);
    assert_eq!(links.add(9, 20, || 36), None);
    assert_eq!(links.add(28, 36, || 36), None);
    assert_eq!(links.add(0, 9, || 36), Some((0, 36)));
}

#[test]
fn stale_slots_from_an_earlier_lap_are_ignored() {
    let links = LinkBuf::new(4, 0, 0);
    // Links of one granule fill every slot; then the ring laps.
    for granule in 0..10 {
        let (from, to) = (granule * G, (granule + 1) * G);
        assert_eq!(links.add(from, to, || u64::MAX), Some((from, to)));
    }
    // The slot of granule 12 holds 9·G (from granule 8): stale, so no advance.
    assert_eq!(links.add(11 * G, 12 * G, || 12 * G), None);
    assert_eq!(links.tail(), 10 * G);
    assert_eq!(links.add(10 * G, 11 * G, || 12 * G), Some((10 * G, 12 * G)));
}

#[test]
fn space_is_bounded_by_capacity() {
    let links = LinkBuf::new(8, 0, 0);
    assert!(links.has_space(7 * G + 7));
    assert!(!links.has_space(8 * G));
    assert_eq!(links.space_target(8 * G), G);
    links.add(0, G, || G);
    assert!(links.has_space(8 * G));
}

#[test]
fn long_links_may_exceed_the_capacity() {
    let links = LinkBuf::new(4, 0, 0);
    assert_eq!(links.add(0, 100 * G, || 102 * G), Some((0, 100 * G)));
    assert_eq!(links.add(101 * G, 102 * G, || 102 * G), None);
    assert_eq!(links.add(100 * G, 101 * G, || 102 * G), Some((100 * G, 102 * G)));
}

#[test]
fn concurrent_links_complete_to_the_end() {
    let links = std::sync::Arc::new(LinkBuf::new(1 << 10, 0, 0));
    let next = std::sync::Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let (links, next) = (links.clone(), next.clone());
            std::thread::spawn(move || {
                for index in 0..10_000u64 {
                    let len = 8 + (thread + index) % 13;
                    let from = next.fetch_add(len, Ordering::SeqCst);
                    while !links.has_space(from) {
                        std::thread::yield_now();
                    }
                    links.add(from, from + len, || next.load(Ordering::SeqCst));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread");
    }
    assert_eq!(links.tail(), next.load(Ordering::SeqCst));
}
