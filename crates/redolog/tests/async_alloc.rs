//! Goal: a durable commit through a future allocates nothing in the steady
//! state (docs/DESIGN.md §1.14): its entry lives in a slot's reused vector,
//! its waker is the executor's, and the pass wakes it in place.
//! Method: a counting global allocator (this test binary only) over 20,000
//! `commit_async` calls after a warm-up, on the committing thread and in the
//! whole process.

// A global allocator cannot be written without `unsafe`.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};

use redolog::storage::MemStorage;
use redolog::{Durability, Log, Pipeline};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Allocations by this thread (const-initialised: reading it never allocates).
    static MINE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    MINE.with(|mine| mine.set(mine.get() + 1));
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

#[test]
fn a_durable_commit_through_a_future_allocates_nothing_in_the_steady_state() {
    let config = common::config(8192, 1 << 20).with_pipeline(Pipeline::Dedicated);
    let (log, _) = Log::open_with_storage(Path::new("/log"), config, MemStorage::new()).expect("open");
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut context = Context::from_waker(&waker);
    let mut commit = |index: u32| {
        let record = index.to_le_bytes();
        let mut future = std::pin::pin!(log.commit_async(&record, Durability::Synced));
        loop {
            if let Poll::Ready(result) = future.as_mut().poll(&mut context) {
                break result.expect("commit");
            }
            std::thread::park();
        }
    };
    // Warm-up. The first registration reserves every waker slot's room
    // (without that, a slot first filled in the measured window allocated:
    // which slots fill depends on which futures their syncs beat to the
    // first poll, and 3 runs in 16 counted 1-5 allocations).
    for index in 0..2_000 {
        commit(index);
    }
    let (before, mine_before) = (ALLOCATIONS.load(Ordering::Relaxed), MINE.with(std::cell::Cell::get));
    let commits = 20_000u32;
    for index in 0..commits {
        commit(index);
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let mine = MINE.with(std::cell::Cell::get) - mine_before;
    eprintln!(
        "{allocations} allocations in {commits} durable commits through futures, {mine} by the committing thread"
    );
    // The committing thread registers and completes: nothing at all.
    assert_eq!(mine, 0, "the committing thread allocated");
    // The process: the CPU monitor's periodic sample (/proc reads, every
    // 100 ms) allocates, not the commits; one per 20 commits would be per-pass work.
    assert!(
        allocations * 20 <= u64::from(commits),
        "{allocations} allocations in {commits} commits: more than one per 20"
    );
}
