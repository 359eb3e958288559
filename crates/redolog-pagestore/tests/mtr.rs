//! Goal: mini-transactions through the buffer pool leave pages that a crash
//! and a replay reproduce byte for byte, whatever pages were flushed before
//! the crash (PS-1, PS-2, PS-5); an uncommitted mini-transaction leaves no
//! trace; the checkpoint LSN never passes a dirty page's oldest
//! modification (PS-4), and after a checkpoint with every page flushed
//! nothing is left to replay.
//! Method: threads run mini-transactions on their own page and a shared one
//! (latched in page order), flushing pages now and then as a cleaner would;
//! then the log is crashed, reopened and replayed onto the data file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use redolog::storage::FsStorage;
use redolog::{Config, Durability, Log};
use redolog_pagestore::{replay, BufferPool, DataFile, Error, Mtr, Page, PageKind, PageNo, Redo, HEADER_BYTES};

const SHARED: PageNo = 1;
const THREADS: u32 = 4;

fn config() -> Config {
    // Small rings: a debug build fills the default 16 MiB ring at each open.
    Config::default().with_capacity_bytes(4 << 20).with_buffer_bytes(64 << 10).with_closed_window_bytes(64 << 10)
}

fn init(page: PageNo) -> Redo {
    Redo::Init { page, kind: PageKind::Leaf, level: 0, key_bytes: 8, value_bytes: 8, next: None, tree: 1 }
}

fn open(dir: &Path, instances: usize, frames: usize) -> (Log, BufferPool) {
    let (log, _) = Log::open(dir.join("log"), config()).expect("log");
    let data = DataFile::open(dir, &FsStorage).expect("data file");
    (log, BufferPool::new(Arc::new(data), instances, frames))
}

/// Formats `pages` in one mini-transaction.
fn format(pool: &BufferPool, log: &Log, pages: &[PageNo]) {
    let mut mtr = Mtr::new(pool, log);
    for &no in pages {
        mtr.latch(no).expect("latch");
        mtr.apply(init(no)).expect("init");
    }
    mtr.commit().expect("commit");
}

/// The pages as the pool holds them, sealed as the data file stores them.
fn pool_pages(pool: &BufferPool, pages: &[PageNo]) -> BTreeMap<PageNo, Page> {
    pages
        .iter()
        .map(|&no| {
            let mut page = pool.get(no).expect("get").read().page().clone();
            page.seal();
            (no, page)
        })
        .collect()
}

/// Crashes the log, reopens it and replays onto the data file; returns the
/// replay's counts and the pages read back.
fn crash_and_replay(dir: &Path, log: Log, pages: &[PageNo]) -> (redolog_pagestore::Replayed, BTreeMap<PageNo, Page>) {
    log.simulate_crash();
    let (_, recovery) = Log::open(dir.join("log"), config()).expect("reopen");
    let data = DataFile::open(dir, &FsStorage).expect("data file");
    let replayed = replay(recovery, &data).expect("replay");
    (replayed, pages.iter().map(|&no| (no, data.read(no).expect("read"))).collect())
}

/// One thread's work: `count` mini-transactions, each inserting into its own
/// page and writing its counter into the shared page.
fn work(pool: &BufferPool, log: &Log, thread: u32, count: u64) {
    let own = 10 + thread;
    for i in 0..count {
        let mut mtr = Mtr::new(pool, log);
        mtr.latch(SHARED).expect("latch shared");
        let slot = mtr.latch(own).expect("latch own").count() as u16;
        let record = [i.to_be_bytes(), (i * 7).to_le_bytes()].concat();
        mtr.apply(Redo::Insert { page: own, slot, record }).expect("insert");
        let offset = (HEADER_BYTES + thread as usize * 8) as u16;
        mtr.apply(Redo::Write { page: SHARED, offset, bytes: i.to_le_bytes().to_vec() }).expect("write");
        let end = mtr.commit().expect("commit").expect("a change");
        if i % 4 == 0 {
            log.wait(end, Durability::Synced).expect("durable");
        }
        if i % 50 == 25 {
            pool.flush_page(log, own).expect("flush own");
            pool.flush_page(log, SHARED).expect("flush shared");
        }
    }
}

#[test]
fn concurrent_mini_transactions_replay_to_the_pages_in_the_pool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, pool) = open(dir.path(), 3, 64);
    let pages: Vec<PageNo> = std::iter::once(SHARED).chain((0..THREADS).map(|t| 10 + t)).collect();
    format(&pool, &log, &pages);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (pool, log) = (&pool, &log);
            scope.spawn(move || work(pool, log, thread, 300));
        }
    });
    // The flush lists: ordered, and the checkpoint LSN at or below them all.
    let flush_list = pool.flush_list();
    assert!(!flush_list.is_empty(), "some pages are dirty");
    assert!(pool.checkpoint_lsn(&log) <= flush_list[0].0);
    log.wait(log.end_lsn(), Durability::Synced).expect("durable");
    let expected = pool_pages(&pool, &pages);
    assert_eq!(expected[&10].count(), 300);
    let (replayed, recovered) = crash_and_replay(dir.path(), log, &pages);
    assert!(replayed.skipped > 0, "the flushed pages had seen some groups: {replayed:?}");
    assert_eq!(recovered, expected);
}

#[test]
fn an_uncommitted_mini_transaction_leaves_no_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, pool) = open(dir.path(), 1, 8);
    format(&pool, &log, &[3]);
    let end = log.end_lsn();
    {
        let mut mtr = Mtr::new(&pool, &log);
        mtr.latch(3).expect("latch");
        mtr.apply(Redo::Insert { page: 3, slot: 0, record: vec![1; 16] }).expect("insert");
        assert_eq!(mtr.page(3).expect("latched").count(), 1);
        // A change that does not fit: refused, the page as it was.
        match mtr.apply(Redo::Delete { page: 3, slot: 5 }) {
            Err(Error::Change { page: 3, reason }) => assert!(reason.contains("slot 5"), "{reason}"),
            other => panic!("expected Error::Change, got {other:?}"),
        }
        assert!(matches!(mtr.apply(Redo::Delete { page: 4, slot: 0 }), Err(Error::Change { page: 4, .. })));
    } // dropped, not committed
    assert_eq!(pool.get(3).expect("get").read().page().count(), 0);
    assert_eq!(log.end_lsn(), end, "nothing logged");
}

#[test]
fn a_checkpoint_after_flushing_every_page_leaves_nothing_to_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, pool) = open(dir.path(), 2, 16);
    let pages: Vec<PageNo> = std::iter::once(SHARED).chain((0..2).map(|t| 10 + t)).collect();
    format(&pool, &log, &pages);
    work(&pool, &log, 0, 40);
    work(&pool, &log, 1, 40);
    // One page dirty: the checkpoint may not pass its oldest modification.
    for (_, no) in pool.flush_list().into_iter().filter(|&(_, no)| no != 11) {
        pool.flush_page(&log, no).expect("flush");
    }
    let [(oldest, 11)] = pool.flush_list()[..] else { panic!("page 11 alone is dirty: {:?}", pool.flush_list()) };
    assert_eq!(pool.checkpoint_lsn(&log), oldest);
    pool.flush_page(&log, 11).expect("flush");
    assert_eq!(pool.dirty_pages(), 0);
    let checkpoint = pool.checkpoint_lsn(&log);
    assert_eq!(checkpoint, log.closed_lsn());
    pool.data().sync().expect("sync the pages before the checkpoint relies on them");
    log.checkpoint(checkpoint).expect("checkpoint");
    let expected = pool_pages(&pool, &pages);
    let (replayed, recovered) = crash_and_replay(dir.path(), log, &pages);
    assert_eq!((replayed.groups, replayed.applied), (0, 0), "{replayed:?}");
    assert_eq!(replayed.end_lsn, checkpoint);
    assert_eq!(recovered, expected);
}

#[test]
fn a_full_instance_evicts_its_least_recently_used_clean_page_and_never_a_dirty_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, pool) = open(dir.path(), 1, 2);
    format(&pool, &log, &[1]); // page 1: dirty
    let dirty = Arc::downgrade(&pool.get(1).expect("get"));
    let clean = Arc::downgrade(&pool.get(2).expect("get"));
    pool.get(1).expect("get"); // page 1 is now the most recently used
    let held = pool.get(3).expect("get"); // full: one must go
    assert!(clean.upgrade().is_none(), "the clean page 2 was evicted");
    assert!(dirty.upgrade().is_some(), "the dirty page 1 stays");
    // A page someone holds is not evicted either: the instance grows.
    let _page_4 = pool.get(4).expect("get");
    assert!(dirty.upgrade().is_some());
    assert!(Arc::ptr_eq(&held, &pool.get(3).expect("get")), "page 3, held, kept its frame");
}

/// A full instance whose pages are all dirty has nothing to evict and
/// grows; the LRU flush names its least recently used dirty pages, and once
/// they are written the next reads evict them until the instance is back to
/// its size.
#[test]
fn an_all_dirty_instance_is_flushed_from_its_lru_and_stops_growing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, pool) = open(dir.path(), 1, 8);
    let first: Vec<PageNo> = (1..=20).collect();
    format(&pool, &log, &first);
    assert_eq!(pool.frames(), 20, "every page dirty: the instance grew past its 8 frames");
    let lru = pool.lru_dirty(0, 64);
    assert_eq!(lru, first, "the dirty pages, least recently used first");
    assert_eq!(pool.lru_dirty(0, 5).len(), 5, "at most the count asked for");
    assert_eq!(pool.flush_pages(&log, &lru).expect("flush"), 20);
    assert!(pool.lru_dirty(0, 64).is_empty(), "clean pages to evict: no LRU flush needed");
    for no in 100..140 {
        drop(pool.get(no).expect("get"));
    }
    assert_eq!(pool.frames(), 8, "40 more reads evicted clean pages: the instance is back to its size");
    // An instance below its size is never LRU-flushed.
    let (log, small) = open(&dir.path().join("other"), 1, 64);
    format(&small, &log, &[1, 2, 3]);
    assert!(small.lru_dirty(0, 64).is_empty());
}

/// The storage of the data file, with a gate: once armed, the first write
/// to a file holds until the test opens the gate — a sync point inside
/// `flush_pages`, between its copy of a page and its write of that copy.
#[derive(Clone, Debug, Default)]
struct GatedStorage(Arc<Gate>);

#[derive(Debug, Default)]
struct Gate {
    /// 0: open; 1: armed (the next write stops); 2: a write waits; 3: released.
    state: std::sync::Mutex<u8>,
    changed: std::sync::Condvar,
}

impl Gate {
    fn set(&self, state: u8) {
        *self.state.lock().expect("gate") = state;
        self.changed.notify_all();
    }

    fn wait_for(&self, wanted: u8) {
        let state = self.state.lock().expect("gate");
        drop(self.changed.wait_while(state, |state| *state != wanted).expect("gate"));
    }

    /// At a write: if armed, stop here until released.
    fn pass(&self) {
        let mut state = self.state.lock().expect("gate");
        if *state == 1 {
            *state = 2;
            self.changed.notify_all();
            state = self.changed.wait_while(state, |state| *state != 3).expect("gate");
            *state = 0;
        }
    }
}

#[derive(Debug)]
struct GatedFile(Arc<dyn redolog::storage::StorageFile>, Arc<Gate>);

impl redolog::storage::StorageFile for GatedFile {
    fn size(&self) -> std::io::Result<u64> {
        self.0.size()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.1.pass();
        self.0.write_all_at(bufs, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
}

impl redolog::storage::Storage for GatedStorage {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        FsStorage.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        FsStorage.list_dir(dir)
    }
    fn open_file(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn redolog::storage::StorageFile>> {
        Ok(Arc::new(GatedFile(FsStorage.open_file(path, create)?, self.0.clone())))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        FsStorage.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        FsStorage.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        FsStorage.sync_dir(dir)
    }
}

/// PS-6, deterministically: flush A copies a page and stops before its
/// write (the gate); a statement changes the page; flush B runs whole;
/// then A writes. Without the io-fix B writes the newer copy and marks the
/// page clean, and A then writes the older copy over it: the pool says
/// clean, the data file holds the old page — a lost change after the next
/// checkpoint. With it, B leaves the page A holds, and the page stays dirty
/// until a flush writes what it is now.
#[test]
fn a_flush_never_writes_an_older_copy_over_a_newer_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path().join("log"), config()).expect("log");
    let storage = GatedStorage::default();
    let data = DataFile::open(dir.path(), &storage).expect("data file");
    // Pages written in place: the gate then holds A inside its write with
    // no lock taken, where a real flush can be overtaken between its copy
    // and its write (the doublewrite lock would make B wait behind A).
    data.set_unprotected(true);
    let pool = BufferPool::new(Arc::new(data), 1, 64);
    let page: PageNo = 3;
    format(&pool, &log, &[page]);
    let change = |value: u64| {
        let mut mtr = Mtr::new(&pool, &log);
        mtr.latch(page).expect("latch");
        mtr.apply(Redo::Write { page, offset: HEADER_BYTES as u16, bytes: value.to_le_bytes().to_vec() })
            .expect("write");
        mtr.commit().expect("commit");
    };
    change(1);
    storage.0.set(1);
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| pool.flush_pages(&log, &[page]).expect("flush A"));
        storage.0.wait_for(2);
        change(2);
        let second = pool.flush_pages(&log, &[page]);
        // Open the gate before any check: a failed one must not leave A stuck.
        storage.0.set(3);
        (first.join().expect("flush A"), second.expect("flush B"))
    });
    assert_eq!((first, second), (1, 0), "flush B must leave the page flush A is writing");
    let frame = pool.get(page).expect("get");
    assert!(frame.read().oldest().is_some(), "the page changed after A's copy: still dirty");
    drop(frame);
    assert_eq!(pool.flush_pages(&log, &[page]).expect("flush"), 1);
    let now = pool.get(page).expect("get").read().page().lsn();
    assert_eq!(pool.data().read(page).expect("read").lsn(), now, "the data file holds the page as it is");
}

/// Two flushers on the same pages while statements dirty them: every flush
/// list entry matches its page's oldest modification, one entry per dirty
/// page, none for a clean one (overlapping flushes of one page once left a
/// stale entry behind, which pinned the checkpoint and made the free
/// check's coordinator spin); and every clean page is in the data file as
/// in the pool (two flushes of one page once wrote the older copy last and
/// marked the page clean: a lost change after a checkpoint).
#[test]
fn overlapping_flushes_leave_the_flush_list_mirroring_the_pages() {
    // A race: without the io-fix, one round in four left an older copy in
    // the data file; eight rounds catch it nearly always. The same bug,
    // deterministically: a_flush_never_writes_an_older_copy_over_a_newer_one.
    for _ in 0..8 {
        overlapping_flush_round();
    }
}

fn overlapping_flush_round() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, pool) = open(dir.path(), 2, 64);
    let pages: Vec<PageNo> = std::iter::once(SHARED).chain((0..THREADS).map(|t| 10 + t)).collect();
    format(&pool, &log, &pages);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (pool, log, pages, done) = (&pool, &log, &pages, &done);
            scope.spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    pool.flush_pages(log, pages).expect("flush");
                }
            });
        }
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (pool, log) = (&pool, &log);
                scope.spawn(move || work(pool, log, thread, 150))
            })
            .collect();
        for worker in workers {
            worker.join().expect("worker");
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let flush_list = pool.flush_list();
    for &no in &pages {
        let oldest = pool.get(no).expect("get").read().oldest();
        let entries: Vec<_> = flush_list.iter().filter(|(_, page)| *page == no).map(|(lsn, _)| *lsn).collect();
        assert_eq!(entries, oldest.into_iter().collect::<Vec<_>>(), "page {no}");
    }
    // A clean page is in the data file as it is in the pool: a flush that
    // copied a page before another flush copied a newer version must not
    // write its older copy after the newer one.
    for &no in &pages {
        let frame = pool.get(no).expect("get");
        let data = frame.read();
        if data.oldest().is_none() {
            let on_disk = pool.data().read(no).expect("read");
            assert_eq!(on_disk.lsn(), data.page().lsn(), "page {no}: clean in the pool, older in the data file");
        }
    }
}
