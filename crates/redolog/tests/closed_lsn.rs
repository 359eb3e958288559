//! Goal: the closed LSN (MySQL's recent_closed, docs/DESIGN.md §1.13) never
//! passes a group that has not been closed (INV-21), a group waits for the
//! closed window on an event and is always woken (INV-22, no lost wake-up:
//! MySQL bug #95390 was such a wait that only a timeout ended), and once every
//! group is closed the closed LSN is the end of the log.
//! Method: 64 threads begin groups of 512 bytes against a 16 KiB window, hold
//! each open a moment, and close it; an open-set guarded by a mutex (held while
//! a group closes) lets a checker thread compare `closed_lsn()` with the
//! oldest open group at any instant. The wait triad must show waits, and no
//! timeout that found its condition true.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use redolog::{Config, Durability, Log, Lsn};

const THREADS: usize = 64;
const GROUPS_PER_THREAD: usize = 100;

#[test]
fn sixty_four_threads_never_see_the_closed_lsn_pass_an_open_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::default().with_capacity_bytes(64 << 20).with_closed_window_bytes(16 << 10);
    let (log, _) = Log::open(dir.path(), config).expect("create");
    let log = Arc::new(log);
    let open: Arc<Mutex<BTreeSet<(Lsn, Lsn)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let checker = {
        let (log, open, done) = (log.clone(), open.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut checks, mut last) = (0u64, Lsn::default());
            while !done.load(Ordering::SeqCst) {
                let open = open.lock().expect("open set");
                let closed = log.closed_lsn();
                if let Some(&(start, end)) = open.first() {
                    assert!(closed <= start, "INV-21: closed LSN {closed} passed the open group {start}..{end}");
                }
                assert!(closed >= last, "the closed LSN went back from {last} to {closed}");
                last = closed;
                checks += 1;
            }
            checks
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (log, open) = (log.clone(), open.clone());
            std::thread::spawn(move || {
                for index in 0..GROUPS_PER_THREAD {
                    let record = vec![(thread + index) as u8; 500];
                    let mtr = log.begin_group(&[&record]).expect("begin");
                    let range = (mtr.start_lsn(), mtr.end_lsn());
                    open.lock().expect("open set").insert(range);
                    // The pages would be added to the flush lists here.
                    for _ in 0..(thread + index) % 7 {
                        std::thread::yield_now();
                    }
                    let mut open = open.lock().expect("open set");
                    open.remove(&range);
                    mtr.close();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    done.store(true, Ordering::SeqCst);
    let checks = checker.join().expect("checker");
    assert!(checks > 0, "the checker ran");
    assert_eq!(log.closed_lsn(), log.end_lsn(), "every group closed: the closed LSN is the end of the log");
    let waits = log.metrics().log_on_recent_closed;
    assert!(waits.waits > 0, "a 16 KiB window under 64 threads of 512-byte groups made some wait: {waits:?}");
    assert_eq!(waits.timeouts_with_work, 0, "a lost wake-up: {waits:?}");
    assert_eq!(waits.no_waits + waits.waits, (THREADS * GROUPS_PER_THREAD) as u64);
    log.wait(log.end_lsn(), Durability::Synced).expect("sync");
    eprintln!("{checks} checks; closed-window waits {waits:?}");
}
