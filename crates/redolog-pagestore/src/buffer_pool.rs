//! The buffer pool: instances, each with a mutex over its page hash and LRU
//! order and another over its flush list ([PAGESTORE §6](crate::docs::pagestore#6-the-buffer-pool)).
//!
//! Lock order: a frame's latch, then its instance's mutex or its flush-list
//! mutex (never both). A thread holding an instance mutex only tries frame
//! latches (eviction, the LRU flush), never waits for one.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use redolog::{Durability, Log, Lsn};

use crate::datafile::DataFile;
use crate::page::{Page, PageNo};
use crate::Result;

/// A page in the pool: its bytes and its oldest modification, behind the
/// page latch.
#[derive(Debug)]
pub struct Frame {
    no: PageNo,
    latch: Arc<RwLock<FrameData>>,
    /// Set while a flush has copied the page and not yet finished with it
    /// (InnoDB's io-fix): a second flush skips the page, or it could write
    /// an older copy over a newer one and the newer flush mark it clean.
    flushing: std::sync::atomic::AtomicBool,
}

/// The io-fixes a flush holds; cleared when it ends, on every path.
struct IoFixes(Vec<(Arc<Frame>, Lsn)>);

impl Drop for IoFixes {
    fn drop(&mut self) {
        for (frame, _) in &self.0 {
            frame.flushing.store(false, std::sync::atomic::Ordering::Release);
        }
    }
}

/// What the page latch protects. Only the crate changes it — a
/// mini-transaction through its redo records (PS-1), a flush through the
/// io-fix (PS-6); callers outside read it through [`Frame::read`].
#[derive(Debug)]
pub struct FrameData {
    /// The page.
    pub(crate) page: Page,
    /// The start LSN of the first group that dirtied the page since it was
    /// last written; `None`: clean.
    pub(crate) oldest: Option<Lsn>,
}

impl FrameData {
    /// The page.
    pub fn page(&self) -> &Page {
        &self.page
    }

    /// The start LSN of the first group that dirtied the page since it was
    /// last written; `None`: clean.
    pub fn oldest(&self) -> Option<Lsn> {
        self.oldest
    }
}

impl Frame {
    /// The page's number.
    pub fn no(&self) -> PageNo {
        self.no
    }

    /// The page latch. A mini-transaction takes it exclusive (`Mtr::latch`);
    /// outside the crate the page is read through [`read`](Self::read).
    pub(crate) fn latch(&self) -> &Arc<RwLock<FrameData>> {
        &self.latch
    }

    /// The page and its oldest modification, the latch held shared while
    /// the guard lives.
    pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, FrameData> {
        self.latch.read()
    }
}

/// One instance's state, behind its mutex.
#[derive(Default)]
struct InstanceState {
    frames: HashMap<PageNo, (Arc<Frame>, u64)>,
    /// Frames by last use: `(tick, page)`.
    lru: BTreeSet<(u64, PageNo)>,
    tick: u64,
}

/// A buffer pool instance.
struct Instance {
    /// The page hash and LRU (InnoDB's buffer pool mutex and page hash
    /// latch), taken by every page lookup.
    state: Mutex<InstanceState>,
    /// Dirty frames by oldest modification, under its own mutex (InnoDB's
    /// `flush_list_mutex`): a mini-transaction adds its pages here while it
    /// holds the closed window, so it must not queue behind page lookups.
    flush_list: Mutex<BTreeSet<(Lsn, PageNo)>>,
    frames_max: usize,
}

/// The buffer pool: `instances` instances over one data file.
pub struct BufferPool {
    instances: Vec<Instance>,
    data: Arc<DataFile>,
    /// Pages that went from clean to dirty: each would be a full-page
    /// image in a log that protected torn pages that way (§4.1).
    dirtied: std::sync::atomic::AtomicU64,
    /// The page latch and index lock wait counters.
    pub(crate) waits: crate::waits::PoolWaits,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool").field("instances", &self.instances.len()).finish_non_exhaustive()
    }
}

impl BufferPool {
    /// A pool of `instances` instances holding `frames` pages in all (at
    /// least one per instance).
    pub fn new(data: Arc<DataFile>, instances: usize, frames: usize) -> BufferPool {
        let instances = instances.max(1);
        let frames_max = frames.div_ceil(instances).max(1);
        let instances = (0..instances)
            .map(|_| Instance {
                state: Mutex::new(InstanceState::default()),
                flush_list: Mutex::new(BTreeSet::new()),
                frames_max,
            })
            .collect();
        BufferPool {
            instances,
            data,
            dirtied: std::sync::atomic::AtomicU64::new(0),
            waits: crate::waits::PoolWaits::default(),
        }
    }

    fn instance(&self, no: PageNo) -> &Instance {
        &self.instances[no as usize % self.instances.len()]
    }

    /// The frame of page `no`, read from the data file if it is not in the
    /// pool. A full instance first evicts its least recently used clean page
    /// that nobody holds (looking at most [`LRU_SCAN_DEPTH`] pages deep);
    /// when there is none, the instance grows past its size until a page
    /// cleaner's LRU flush ([`lru_dirty`](Self::lru_dirty)) writes some.
    pub fn get(&self, no: PageNo) -> Result<Arc<Frame>> {
        let instance = self.instance(no);
        let mut state = instance.state.lock();
        state.tick += 1;
        let tick = state.tick;
        if let Some((frame, used)) = state.frames.get_mut(&no) {
            let (frame, old) = (frame.clone(), std::mem::replace(used, tick));
            state.lru.remove(&(old, no));
            state.lru.insert((tick, no));
            return Ok(frame);
        }
        // Back to the instance's size after an overshoot, as far as clean
        // frames allow.
        while state.frames.len() >= instance.frames_max && evict_one(&mut state) {}
        // Read under the instance mutex: simple, and a concurrent `get` of
        // the same page cannot read it twice. (A cached workload reads
        // each page once.)
        let page = self.data.read(no)?;
        let frame = Arc::new(Frame {
            no,
            latch: Arc::new(RwLock::new(FrameData { page, oldest: None })),
            flushing: std::sync::atomic::AtomicBool::new(false),
        });
        state.frames.insert(no, (frame.clone(), tick));
        state.lru.insert((tick, no));
        Ok(frame)
    }

    /// Records that `frame` (latched by the caller, who passes what the
    /// latch protects) was first dirtied by the group starting at `start`:
    /// it joins its instance's flush list (PS-5).
    pub(crate) fn note_modification(&self, frame: &Frame, data: &mut FrameData, start: Lsn) {
        if data.oldest.is_none() {
            self.dirtied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            data.oldest = Some(start);
            self.instance(frame.no).flush_list.lock().insert((start, frame.no));
        }
    }

    /// Pages that went from clean to dirty since the pool was made. Every
    /// checkpoint lies at or below each dirty page's oldest modification,
    /// so a page's first change after a checkpoint finds it clean: this
    /// bounds the full-page images PostgreSQL-style torn-page protection
    /// would log ([PAGESTORE §4.1](crate::docs::pagestore#41-torn-pages-the-doublewrite-file)).
    pub fn pages_dirtied(&self) -> u64 {
        self.dirtied.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The oldest modification over every instance's flush list, if any
    /// page is dirty.
    pub fn oldest_modification(&self) -> Option<Lsn> {
        self.instances.iter().filter_map(|instance| instance.flush_list.lock().first().map(|(lsn, _)| *lsn)).min()
    }

    /// Dirty pages over every instance.
    pub fn dirty_pages(&self) -> usize {
        self.instances.iter().map(|instance| instance.flush_list.lock().len()).sum()
    }

    /// Where a checkpoint may go (PS-4): below the oldest modification of
    /// any dirty page and the closed LSN, every change is in the data file
    /// or in no group still open. Sync the data file before checkpointing.
    pub fn checkpoint_lsn(&self, log: &Log) -> Lsn {
        let closed = log.closed_lsn();
        self.oldest_modification().map_or(closed, |oldest| oldest.min(closed))
    }

    /// Writes page `no` if it is dirty (see [`flush_pages`](Self::flush_pages)).
    pub fn flush_page(&self, log: &Log, no: PageNo) -> Result<bool> {
        Ok(self.flush_pages(log, &[no])? == 1)
    }

    /// Writes the dirty ones of `pages` as one batch; returns how many.
    /// Latches are not held across the I/O ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)):
    /// 1. under each page's latch, a copy and its page LSN, if no other
    ///    flush holds the page (its io-fix: a page another flush copied is
    ///    skipped, so copies of one page reach the file in order);
    /// 2. the log made durable up to the highest of those LSNs (PS-1);
    /// 3. the copies written through the doublewrite file (durable after);
    /// 4. under each latch again: a page still at its copied LSN is clean;
    ///    one changed meanwhile stays dirty with the copied LSN as its oldest
    ///    modification (or its own, if later) — a lower bound, since the
    ///    change that followed the copy started at or after it. The flush
    ///    list entry is replaced by what `oldest` now holds: two flushes of
    ///    one page that overlap never leave a stale entry behind.
    pub fn flush_pages(&self, log: &Log, pages: &[PageNo]) -> Result<usize> {
        use std::sync::atomic::Ordering;
        let mut copies = Vec::new();
        let mut frames = IoFixes(Vec::new());
        for &no in pages {
            let Some(frame) = self.instance(no).state.lock().frames.get(&no).map(|(frame, _)| frame.clone()) else {
                continue;
            };
            let data = frame.latch.read();
            if data.oldest.is_some()
                && frame.flushing.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                copies.push(data.page.clone());
                frames.0.push((frame.clone(), data.page.lsn()));
            }
        }
        let Some(newest) = frames.0.iter().map(|&(_, lsn)| lsn).max() else { return Ok(0) };
        log.wait(newest, Durability::Synced)?;
        // PS-1, checked on every flush (one load; the write costs far more).
        let durable = log.durable_lsn();
        for copy in &copies {
            assert!(
                copy.lsn() <= durable,
                "PS-1 (WAL rule): page {} at LSN {} written with the log durable to {durable}",
                copy.page_no(),
                copy.lsn()
            );
        }
        self.data.write_pages(&mut copies)?;
        for (frame, copied) in &frames.0 {
            let mut data = frame.latch.write();
            // What the page is now, not what it was at the copy: another
            // flush may have cleaned it meanwhile and a statement dirtied it
            // again. The flush list always mirrors `oldest`.
            let Some(current) = data.oldest else { continue };
            let still = if data.page.lsn() == *copied { None } else { Some(current.max(*copied)) };
            data.oldest = still;
            let mut flush_list = self.instance(frame.no).flush_list.lock();
            flush_list.remove(&(current, frame.no));
            if let Some(lsn) = still {
                flush_list.insert((lsn, frame.no));
            }
        }
        #[cfg(debug_assertions)]
        self.check_flush_lists();
        Ok(frames.0.len())
    }

    /// Debug builds, after every flush: each flush list holds each page at
    /// most once, and a page it holds that is in the pool and not being
    /// changed right now has that LSN as its oldest modification (InnoDB
    /// validates its flush list so in debug builds). A latch someone holds
    /// is skipped, not waited for: the lock order is latch, then list.
    #[cfg(debug_assertions)]
    fn check_flush_lists(&self) {
        for instance in &self.instances {
            let entries: Vec<(Lsn, PageNo)> = instance.flush_list.lock().iter().copied().collect();
            let mut pages: Vec<PageNo> = entries.iter().map(|&(_, no)| no).collect();
            pages.sort_unstable();
            let count = pages.len();
            pages.dedup();
            assert_eq!(pages.len(), count, "a flush list holds a page twice: {entries:?}");
            for (lsn, no) in entries {
                let Some(frame) = instance.state.lock().frames.get(&no).map(|(frame, _)| frame.clone()) else {
                    continue;
                };
                let Some(data) = frame.latch.try_read() else { continue };
                let listed = instance.flush_list.lock().contains(&(lsn, no));
                if listed {
                    assert_eq!(
                        data.oldest,
                        Some(lsn),
                        "page {no} is on its flush list at {lsn}, its oldest says otherwise"
                    );
                }
            }
        }
    }

    /// Up to `count` of the oldest dirty pages of the instances `first`,
    /// `first + step`, … (a page cleaner's share), oldest first.
    pub fn oldest_dirty(&self, first: usize, step: usize, count: usize) -> Vec<PageNo> {
        self.oldest_dirty_below(first, step, count, Lsn::from_u64(u64::MAX))
    }

    /// [`oldest_dirty`](Self::oldest_dirty), only pages whose oldest
    /// modification is below `limit`.
    pub fn oldest_dirty_below(&self, first: usize, step: usize, count: usize, limit: Lsn) -> Vec<PageNo> {
        let mut oldest: Vec<(Lsn, PageNo)> = self
            .instances
            .iter()
            .skip(first)
            .step_by(step.max(1))
            .flat_map(|instance| {
                let flush_list = instance.flush_list.lock();
                flush_list.iter().take(count).take_while(|(lsn, _)| *lsn < limit).copied().collect::<Vec<_>>()
            })
            .collect();
        oldest.sort_unstable();
        oldest.into_iter().take(count).map(|(_, no)| no).collect()
    }

    /// Buffer pool instances.
    pub fn instances(&self) -> usize {
        self.instances.len()
    }

    /// The pages on the flush lists, oldest modification first.
    pub fn flush_list(&self) -> Vec<(Lsn, PageNo)> {
        let mut all: Vec<_> = self.instances.iter().flat_map(|instance| instance.flush_list.lock().clone()).collect();
        all.sort_unstable();
        all
    }

    /// InnoDB's LRU flush, for a page cleaner: if instance `instance` is
    /// full and its [`LRU_SCAN_DEPTH`] least recently used pages hold no
    /// clean one to evict, up to `count` of the dirty ones among them,
    /// least recently used first; otherwise none.
    pub fn lru_dirty(&self, instance: usize, count: usize) -> Vec<PageNo> {
        let Some(instance) = self.instances.get(instance) else { return Vec::new() };
        let state = instance.state.lock();
        if state.frames.len() < instance.frames_max {
            return Vec::new();
        }
        let mut dirty = Vec::new();
        for &(_, no) in state.lru.iter().take(LRU_SCAN_DEPTH) {
            let Some((frame, _)) = state.frames.get(&no) else { continue };
            match frame.latch.try_read().map(|data| data.oldest.is_some()) {
                Some(false) => return Vec::new(),
                Some(true) => dirty.push(no),
                None => {}
            }
            if dirty.len() >= count {
                break;
            }
        }
        dirty
    }

    /// Frames in the pool now, over every instance.
    pub fn frames(&self) -> usize {
        self.instances.iter().map(|instance| instance.state.lock().frames.len()).sum()
    }

    /// The data file.
    pub fn data(&self) -> &DataFile {
        &self.data
    }
}

/// How deep eviction and the LRU flush look from the least recently used
/// end (InnoDB's `innodb_lru_scan_depth` is 1024 for a larger pool).
pub const LRU_SCAN_DEPTH: usize = 256;

/// Drops the least recently used frame that is clean and that nobody holds
/// or latches, among the [`LRU_SCAN_DEPTH`] least recently used. Only tries
/// latches: the caller holds the instance mutex. False if there was none.
fn evict_one(state: &mut InstanceState) -> bool {
    let victim = state.lru.iter().take(LRU_SCAN_DEPTH).find_map(|&(tick, no)| {
        let (frame, _) = state.frames.get(&no)?;
        let unheld = Arc::strong_count(frame) == 1 && Arc::strong_count(&frame.latch) == 1;
        let clean = frame.latch.try_read().is_some_and(|data| data.oldest.is_none());
        (unheld && clean).then_some((tick, no))
    });
    let Some((tick, no)) = victim else { return false };
    state.lru.remove(&(tick, no));
    state.frames.remove(&no);
    true
}
