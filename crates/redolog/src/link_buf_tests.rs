//! Unit tests of the link buffer. They live outside `link_buf.rs` because the
//! loom model (`tests/loom_link_buf.rs`) compiles that file against loom's atomics,
//! which only work inside a model.

use crate::link_buf::LinkBuf;
use crate::sync::atomic::{AtomicU64, Ordering};

#[test]
fn out_of_order_links_complete_the_prefix() {
    let links = LinkBuf::new(16, 100);
    assert_eq!(links.add(110, 120, || 120), None);
    assert_eq!(links.tail(), 100);
    assert_eq!(links.add(105, 110, || 120), None);
    assert_eq!(links.add(100, 105, || 120), Some((100, 120)));
    assert_eq!(links.tail(), 120);
}

#[test]
fn stale_slots_from_an_earlier_lap_are_ignored() {
    let links = LinkBuf::new(4, 0);
    // Links of length 1 fill every slot; then the ring laps.
    for position in 0..10 {
        assert_eq!(links.add(position, position + 1, || u64::MAX), Some((position, position + 1)));
    }
    // Slot of position 12 holds 9 (from position 8): stale, so no advance.
    assert_eq!(links.add(11, 12, || 12), None);
    assert_eq!(links.tail(), 10);
    assert_eq!(links.add(10, 11, || 12), Some((10, 12)));
}

#[test]
fn space_is_bounded_by_capacity() {
    let links = LinkBuf::new(8, 0);
    assert!(links.has_space(7));
    assert!(!links.has_space(8));
    links.add(0, 1, || 1);
    assert!(links.has_space(8));
}

#[test]
fn long_links_may_exceed_the_capacity() {
    let links = LinkBuf::new(4, 0);
    assert_eq!(links.add(0, 100, || 102), Some((0, 100)));
    assert_eq!(links.add(101, 102, || 102), None);
    assert_eq!(links.add(100, 101, || 102), Some((100, 102)));
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
                    let from = next.fetch_add(3, Ordering::SeqCst);
                    while !links.has_space(from) {
                        std::thread::yield_now();
                    }
                    links.add(from, from + 3, || next.load(Ordering::SeqCst));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread");
    }
    assert_eq!(links.tail(), 4 * 10_000 * 3);
}
