//! Goal: a task tailing the log through the reader's `Stream` is never left
//! waiting while the sync frontier has moved past what it read (INV-47):
//! whichever way the frontier's move and the task's registration
//! interleave, the task either sees the move on its second look or is woken.
//! Method: loom compiles the real `src/wait/tail.rs` against loom's atomics
//! and mutex; a model frontier (an atomic) moves on other threads, each move
//! followed by `wake_all`, as the sync pass does; the tailer looks, registers
//! a waker, and looks again, as `LogReader::poll_next` does. A lost wake-up
//! is a failed assertion: neither look saw the move and no waker ran.
//!
//! Bounds: 3 preemptions for one tailer, 2 for two (`cargo test` time);
//! `REDOLOG_LOOM_BOUND=none cargo test --release -p redolog --test loom_tail`
//! explores every interleaving.

#![allow(dead_code)]

mod common;

/// The `crate::sync` shim, on loom.
mod sync {
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};
    }

    /// `crate::sync::Mutex` (parking_lot's, whose `lock` cannot fail) on loom.
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().expect("a model thread panicked holding the lock")
        }
    }
}

#[path = "../src/wait/tail.rs"]
mod tail;

use std::task::{Wake, Waker};

use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use tail::TailWakers;

/// A waker that records that it ran.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The tailer's part: look, register, look again; true if a look saw the
/// frontier past `read`.
fn tail(frontier: &AtomicU64, wakers: &TailWakers, waker: &Waker, read: u64) -> bool {
    if frontier.load(Ordering::Acquire) > read {
        return true;
    }
    wakers.register(waker);
    frontier.load(Ordering::Acquire) > read
}

#[test]
fn a_tailer_sees_the_move_or_is_woken() {
    common::loom_check(3, || {
        let wakers = Arc::new(TailWakers::default());
        let frontier = Arc::new(AtomicU64::new(0));
        let mover = {
            let (wakers, frontier) = (Arc::clone(&wakers), Arc::clone(&frontier));
            loom::thread::spawn(move || {
                frontier.store(1, Ordering::Release);
                wakers.wake_all();
            })
        };
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(std::sync::Arc::clone(&flag));
        let saw = tail(&frontier, &wakers, &waker, 0);
        mover.join().expect("mover");
        assert!(saw || flag.0.load(Ordering::SeqCst), "INV-47: a lost wake-up");
    });
}

/// Two tailers, two moves: a registration taken by the first `wake_all`
/// does not hide one made after it from the second.
#[test]
fn two_tailers_and_two_moves_lose_no_wake_up() {
    common::loom_check(2, || {
        let wakers = Arc::new(TailWakers::default());
        let frontier = Arc::new(AtomicU64::new(0));
        let mover = {
            let (wakers, frontier) = (Arc::clone(&wakers), Arc::clone(&frontier));
            loom::thread::spawn(move || {
                for to in 1..=2 {
                    frontier.store(to, Ordering::Release);
                    wakers.wake_all();
                }
            })
        };
        let other = {
            let (wakers, frontier) = (Arc::clone(&wakers), Arc::clone(&frontier));
            loom::thread::spawn(move || {
                let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
                let waker = Waker::from(std::sync::Arc::clone(&flag));
                // This tailer has read up to 1: only the second move frees it.
                (tail(&frontier, &wakers, &waker, 1), flag)
            })
        };
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(std::sync::Arc::clone(&flag));
        let saw = tail(&frontier, &wakers, &waker, 0);
        mover.join().expect("mover");
        let (other_saw, other_flag) = other.join().expect("other");
        assert!(saw || flag.0.load(Ordering::SeqCst), "INV-47: the first tailer lost its wake-up");
        assert!(other_saw || other_flag.0.load(Ordering::SeqCst), "INV-47: the second tailer lost its wake-up");
    });
}
