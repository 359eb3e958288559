//! What the engine counts: the free check's wait triad, what the page
//! cleaners and the checkpointer did, the checkpoint age.

/// The wait triad of the free check, and what the background did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Statements that had to wait in the free check.
    pub free_check_waits: u64,
    /// Their total wait, µs.
    pub free_check_wait_us: u64,
    /// The longest, µs.
    pub free_check_wait_us_max: u64,
    /// Pages written by the cleaners and the free check's coordinator.
    pub pages_flushed: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Of `pages_flushed`, those the cleaners' LRU flush wrote: the least
    /// recently used pages of a full instance that had no clean page to
    /// evict.
    pub lru_pages_flushed: u64,
    /// Pages that went from clean to dirty (each a full-page image, were
    /// torn pages cured that way: [PAGESTORE §4.1](crate::docs::pagestore#41-torn-pages-the-doublewrite-file)).
    pub pages_dirtied: u64,
    /// The log's end LSN: bytes logged since it was created.
    pub log_end: u64,
    /// Page latch waits: a mini-transaction's exclusive latch or a
    /// descent's shared one found the page latched.
    pub page_latch: crate::Waits,
    /// Index lock waits: a statement found an index lock held (shared:
    /// a split runs; exclusive: any statement runs).
    pub index_lock: crate::Waits,
    /// Whether the page cleaners and the checkpointer run at a raised
    /// priority (nice -10; refused without `CAP_SYS_NICE`).
    pub background_prioritized: bool,
    /// Statements that took the free check's slow path, as a benchmark's
    /// policy counts them (`bench --scenario seed-convoy`'s copy of MySQL
    /// 5.6.10); the engine's own slow path is its waits.
    pub free_check_slow_paths: u64,
    /// The checkpoint age now: end LSN minus the last checkpoint, bytes.
    pub checkpoint_age: u64,
}

impl EngineStats {
    /// The counters since `earlier` (a snapshot of the same store): every
    /// count and total minus its earlier value; the gauges — the longest
    /// wait since open, the checkpoint age, the priority — as they are now.
    pub fn since(&self, earlier: &EngineStats) -> EngineStats {
        EngineStats {
            free_check_waits: self.free_check_waits - earlier.free_check_waits,
            free_check_wait_us: self.free_check_wait_us - earlier.free_check_wait_us,
            pages_flushed: self.pages_flushed - earlier.pages_flushed,
            checkpoints: self.checkpoints - earlier.checkpoints,
            lru_pages_flushed: self.lru_pages_flushed - earlier.lru_pages_flushed,
            pages_dirtied: self.pages_dirtied - earlier.pages_dirtied,
            log_end: self.log_end - earlier.log_end,
            page_latch: self.page_latch - earlier.page_latch,
            index_lock: self.index_lock - earlier.index_lock,
            free_check_slow_paths: self.free_check_slow_paths - earlier.free_check_slow_paths,
            ..self.clone()
        }
    }
}
