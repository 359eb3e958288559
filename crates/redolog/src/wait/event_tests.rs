//! Unit tests of `event.rs`, kept apart so the loom model can include that
//! file without them.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::event::{EventSlots, Spin};
use crate::sync::atomic::Ordering;

#[test]
fn waiters_wake_exactly_when_covered() {
    let events = Arc::new(EventSlots::new(8));
    let value = Arc::new(AtomicU64::new(0));
    let waiters: Vec<_> = [600u64, 1200, 5000]
        .into_iter()
        .map(|lsn| {
            let (events, value) = (events.clone(), value.clone());
            std::thread::spawn(move || {
                let waited = events.wait(lsn, Spin::NONE, || value.load(Ordering::SeqCst) >= lsn);
                (lsn, value.load(Ordering::SeqCst), waited)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    value.store(1200, Ordering::SeqCst);
    events.notify_range(0, 1200);
    std::thread::sleep(Duration::from_millis(50));
    value.store(6000, Ordering::SeqCst);
    events.notify_range(1200, 6000);
    for waiter in waiters {
        let (lsn, seen, waited) = waiter.join().expect("waiter");
        assert!(seen >= lsn);
        assert_eq!(waited.timeouts, 0, "lost wake-up for {lsn}");
    }
}

#[test]
fn kick_wakes_one_unsatisfied_waiter() {
    let events = Arc::new(EventSlots::new(8));
    let go = Arc::new(AtomicU64::new(0));
    let woken = Arc::new(AtomicU64::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (events, go, woken) = (events.clone(), go.clone(), woken.clone());
            std::thread::spawn(move || {
                events.wait(700, Spin::NONE, || go.load(Ordering::SeqCst) > 0);
                woken.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    while events.slot_waiters(700) < 3 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    // A kick without a true predicate wakes one waiter, which parks again.
    events.kick(700, 0);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(woken.load(Ordering::SeqCst), 0);
    go.store(1, Ordering::SeqCst);
    events.notify_all();
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    assert_eq!(woken.load(Ordering::SeqCst), 3);
}
