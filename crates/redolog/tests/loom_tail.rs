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
    pub(crate) use crate::loom_mutex::Mutex;
}

#[path = "common/loom_mutex.rs"]
mod loom_mutex;

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

/// What a tailer found: whether a look saw the frontier move, and the flag
/// its waker sets.
struct Tailed {
    saw: bool,
    woken: std::sync::Arc<Flag>,
}

impl Tailed {
    /// Whether the tailer goes on: it saw the move, or it was woken.
    fn freed(&self) -> bool {
        self.saw || self.woken.0.load(Ordering::SeqCst)
    }
}

/// The tailer's part, as `LogReader::poll_next` does it: look, register a
/// waker, look again, for the frontier past `read`.
fn tail(frontier: &AtomicU64, wakers: &TailWakers, read: u64) -> Tailed {
    let woken = std::sync::Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(std::sync::Arc::clone(&woken));
    let saw = frontier.load(Ordering::Acquire) > read || {
        wakers.register(&waker);
        frontier.load(Ordering::Acquire) > read
    };
    Tailed { saw, woken }
}

/// The sync pass's part, on a thread of its own: the frontier moves to 1,
/// 2, … `moves`, each move followed by `wake_all`.
fn mover(wakers: &Arc<TailWakers>, frontier: &Arc<AtomicU64>, moves: u64) -> loom::thread::JoinHandle<()> {
    let (wakers, frontier) = (Arc::clone(wakers), Arc::clone(frontier));
    loom::thread::spawn(move || {
        for to in 1..=moves {
            frontier.store(to, Ordering::Release);
            wakers.wake_all();
        }
    })
}

#[test]
fn a_tailer_sees_the_move_or_is_woken() {
    common::loom_check(3, || {
        let wakers = Arc::new(TailWakers::default());
        let frontier = Arc::new(AtomicU64::new(0));
        let mover = mover(&wakers, &frontier, 1);
        let tailed = tail(&frontier, &wakers, 0);
        mover.join().expect("mover");
        assert!(tailed.freed(), "INV-47: a lost wake-up");
    });
}

/// Two tailers, two moves: a registration taken by the first `wake_all`
/// does not hide one made after it from the second.
#[test]
fn two_tailers_and_two_moves_lose_no_wake_up() {
    common::loom_check(2, || {
        let wakers = Arc::new(TailWakers::default());
        let frontier = Arc::new(AtomicU64::new(0));
        let mover = mover(&wakers, &frontier, 2);
        let other = {
            let (wakers, frontier) = (Arc::clone(&wakers), Arc::clone(&frontier));
            // This tailer has read up to 1: only the second move frees it.
            loom::thread::spawn(move || tail(&frontier, &wakers, 1))
        };
        let first = tail(&frontier, &wakers, 0);
        mover.join().expect("mover");
        let second = other.join().expect("other");
        assert!(first.freed(), "INV-47: the first tailer lost its wake-up");
        assert!(second.freed(), "INV-47: the second tailer lost its wake-up");
    });
}
