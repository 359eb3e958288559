//! Goal: the link buffer (MySQL's recent_written) never strands a completed link
//! and never moves its tail over a hole (docs/DESIGN.md §1.4, INV-1, INV-2).
//! Method: loom compiles `src/link_buf.rs` itself against loom's atomics (this
//! file provides the `crate::sync` shim it imports) and explores every
//! interleaving of appenders that reserve with one `fetch_add`, then publish.
//! After all appenders return, the tail must equal the end of every reservation:
//! a link left in its slot with nobody to consume it would be a lost wake-up for
//! the writer. While they run, the tail must only ever stop at link boundaries.
//!
//! The default preemption bound (3) keeps `cargo test` fast. Other bounds:
//! `REDOLOG_LOOM_BOUND=5 cargo test --release -p redolog --test loom_link_buf`;
//! `REDOLOG_LOOM_BOUND=none` for no bound (figures in docs/DESIGN.md §1.4).

#![allow(dead_code)]

mod sync {
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};
    }
}

mod common;

#[path = "../src/link_buf.rs"]
mod link_buf;

use link_buf::LinkBuf;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Runs `model` at the default preemption bound 3 (`REDOLOG_LOOM_BOUND` overrides).
fn check(model: impl Fn() + Sync + Send + 'static) {
    common::loom_check(3, model);
}

/// One appender: reserve `len` positions and publish the link.
fn append(links: &LinkBuf, reserved: &AtomicU64, len: u64) -> (u64, u64) {
    let from = reserved.fetch_add(len, Ordering::SeqCst);
    assert!(links.has_space(from), "the model's capacity is large enough");
    let to = from + len;
    // The stretch this call moved need not contain our link: another thread may
    // consume it while we consume earlier ones. It is never empty or backwards.
    if let Some((old, new)) = links.add(from, to, || reserved.load(Ordering::SeqCst)) {
        assert!(old < new, "the tail 'moved' by {old}..{new}");
    }
    (from, to)
}

#[test]
fn two_appenders_never_strand_a_link() {
    check(|| {
        let links = Arc::new(LinkBuf::new(16, 0, 0));
        let reserved = Arc::new(AtomicU64::new(0));
        let other = {
            let (links, reserved) = (links.clone(), reserved.clone());
            loom::thread::spawn(move || append(&links, &reserved, 24))
        };
        let mine = append(&links, &reserved, 40);
        let theirs = other.join().expect("appender");
        assert_eq!(links.tail(), 64, "links {mine:?} and {theirs:?} completed but the tail stopped short");
    });
}

#[test]
fn three_appenders_never_strand_a_link() {
    check(|| {
        let links = Arc::new(LinkBuf::new(16, 0, 0));
        let reserved = Arc::new(AtomicU64::new(0));
        let others: Vec<_> = [16u64, 24]
            .into_iter()
            .map(|len| {
                let (links, reserved) = (links.clone(), reserved.clone());
                loom::thread::spawn(move || append(&links, &reserved, len))
            })
            .collect();
        append(&links, &reserved, 9);
        for other in others {
            other.join().expect("appender");
        }
        assert_eq!(links.tail(), 49);
    });
}

#[test]
fn a_reader_never_sees_the_tail_past_a_hole() {
    check(|| {
        let links = Arc::new(LinkBuf::new(16, 0, 0));
        let reserved = Arc::new(AtomicU64::new(0));
        // Two links whose boundaries are known: [0, 32) then [32, 48).
        let first = reserved.fetch_add(32, Ordering::SeqCst);
        let second = reserved.fetch_add(16, Ordering::SeqCst);
        assert_eq!((first, second), (0, 32));
        let publisher = {
            let (links, reserved) = (links.clone(), reserved.clone());
            loom::thread::spawn(move || {
                links.add(32, 48, || reserved.load(Ordering::SeqCst));
            })
        };
        let reader = {
            let links = links.clone();
            loom::thread::spawn(move || {
                let tail = links.tail();
                // Only the first link is still being copied: the tail may not pass 0.
                assert_eq!(tail, 0, "the tail passed the unfinished link [0, 32)");
            })
        };
        publisher.join().expect("publisher");
        reader.join().expect("reader");
        links.add(0, 32, || reserved.load(Ordering::SeqCst));
        assert_eq!(links.tail(), 48);
    });
}

/// `ready` and the closed LSN on one head line (`LinkBuf::beside`), as an
/// append and its close use them: each appender reserves on the counter the
/// line holds, publishes its group to `ready` (with F1), then closes it in
/// the second buffer (F1 served by the first add). Sharing the line must not
/// mix the two tails: both reach the end of every reservation, and the
/// closed tail never passes `ready`'s (a group is closed after it is ready).
#[test]
fn two_buffers_on_one_head_line_keep_their_tails_apart() {
    check(|| {
        let ready = Arc::new(LinkBuf::new(16, 0, 0));
        let closed = Arc::new(ready.beside(16, 0));
        let group = |ready: &LinkBuf, closed: &LinkBuf, len: u64| {
            let from = ready.reserved().fetch_add(len, Ordering::SeqCst);
            let to = from + len;
            ready.add(from, to, || ready.reserved().load(Ordering::SeqCst));
            closed.add_after_fence(from, to, || ready.reserved().load(Ordering::SeqCst));
            assert!(closed.tail() <= ready.tail(), "the closed tail passed ready's");
        };
        let other = {
            let (ready, closed) = (ready.clone(), closed.clone());
            loom::thread::spawn(move || group(&ready, &closed, 24))
        };
        group(&ready, &closed, 16);
        other.join().expect("appender");
        assert_eq!(ready.tail(), 40, "ready stopped short");
        assert_eq!(closed.tail(), 40, "the closed LSN stopped short");
    });
}
