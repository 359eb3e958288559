//! The page store: its log, its data file, its buffer pool and its tables
//! ([PAGESTORE §9](crate::docs::pagestore#9-tables-and-the-store)). Opening replays the log onto the pages first.

use std::path::Path;
use std::sync::Arc;

use redolog::storage::{FsStorage, Storage};
use redolog::{Durability, Log, Lsn};

use crate::background::Background;
use crate::btree::{format_meta, BTree};
use crate::buffer_pool::BufferPool;
use crate::datafile::DataFile;
use crate::engine::{Engine, SpacePolicy};
use crate::mtr::Mtr;
use crate::page::{PageKind, HEADER_BYTES, META_PAGE, PAGE_BYTES};
use crate::recovery::{replay, Replayed};
use crate::redo::Redo;
use crate::stats::EngineStats;
use crate::table::{Table, Trees, ROW_BYTES};
use crate::Result;

// The catalog on the meta page, after its next free page number:
// table count (4) | per table: primary root (4) | secondary root (4).
const TABLE_COUNT_OFFSET: usize = HEADER_BYTES + size_of::<u32>();
const ROOTS_OFFSET: usize = TABLE_COUNT_OFFSET + size_of::<u32>();
/// Tables a store holds at most: their roots fit the meta page.
pub const TABLES_MAX: usize = (PAGE_BYTES - ROOTS_OFFSET) / 8;

/// How a store is opened.
#[derive(Clone, Debug)]
pub struct Options {
    /// Buffer pool instances (InnoDB's `innodb_buffer_pool_instances`):
    /// default 1, InnoDB's for a pool under 1 GiB.
    pub buffer_pool_instances: usize,
    /// Buffer pool bytes (InnoDB's `innodb_buffer_pool_size`): default 128
    /// MiB, InnoDB's default.
    pub buffer_pool_bytes: u64,
    /// Pages per second the page cleaners write at a low checkpoint age
    /// (InnoDB's `innodb_io_capacity`, default 200); up to ten times that as
    /// the log fills.
    pub io_capacity: u64,
    /// The log's configuration.
    pub log: redolog::Config,
    /// Measurement only (`redolog-bench bench --scenario seed-convoy`): a
    /// free check and page cleaners in place of the engine's. Leave it
    /// `None`.
    #[doc(hidden)]
    pub space_policy: Option<Arc<dyn SpacePolicy>>,
    /// Measurement only (`redolog-bench bench --no-doublewrite`, [PAGESTORE](crate::docs::pagestore)
    /// §4.1): pages written in place without the doublewrite copy, which a
    /// power loss can tear for good. Never set it for data you keep.
    #[doc(hidden)]
    pub unprotected_page_writes: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            buffer_pool_instances: 1,
            buffer_pool_bytes: 128 << 20,
            io_capacity: 200,
            log: redolog::Config::default(),
            space_policy: None,
            unprotected_page_writes: false,
        }
    }
}

/// A page store: tables of sysbench-shaped rows on pages, every change
/// logged in redolog; page cleaners and a checkpointer run behind it.
pub struct PageStore {
    engine: Arc<Engine>,
    background: Option<Background>,
    tables: Vec<Trees>,
}

impl std::fmt::Debug for PageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageStore").field("tables", &self.tables.len()).finish_non_exhaustive()
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap_or_default())
}

impl PageStore {
    /// Opens (or creates) the store in `dir`: the log in `dir/log`, the pages
    /// in `dir/pages.db`. What the log holds past its checkpoint is replayed
    /// onto the pages, which are synced, and the log checkpointed.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<(PageStore, Replayed)> {
        Self::open_with_storage(dir.as_ref(), options, FsStorage)
    }

    /// [`open`](Self::open) on another storage, for both the log and the
    /// data file: redolog's `CrashStorage` in crash tests.
    pub fn open_with_storage<S: Storage + Clone + 'static>(
        dir: &Path,
        options: Options,
        storage: S,
    ) -> Result<(PageStore, Replayed)> {
        Self::open_inner(dir, options, storage, true)
    }

    /// [`open`](Self::open) with no page cleaner and no checkpointer: only
    /// the free check makes room in the log, so a test sees it do so on
    /// every run (cargo feature `testkit`).
    #[cfg(feature = "testkit")]
    pub fn open_without_background(dir: &Path, options: Options) -> Result<(PageStore, Replayed)> {
        Self::open_inner(dir, options, FsStorage, false)
    }

    fn open_inner<S: Storage + Clone + 'static>(
        dir: &Path,
        options: Options,
        storage: S,
        background: bool,
    ) -> Result<(PageStore, Replayed)> {
        let (log, recovery) = Log::open_with_storage(&dir.join("log"), options.log.clone(), storage.clone())?;
        let data = DataFile::open(dir, &storage)?;
        let replayed = replay(recovery, &data)?;
        data.set_unprotected(options.unprotected_page_writes);
        if replayed.groups > 0 {
            // The replayed pages are synced: nothing before the end needs
            // the log any more.
            log.checkpoint(replayed.end_lsn)?;
        }
        let frames = (options.buffer_pool_bytes / PAGE_BYTES as u64).max(1) as usize;
        let pool = BufferPool::new(Arc::new(data), options.buffer_pool_instances, frames);
        let tables = Self::catalog(&pool)?;
        // The log's own: a log reopened keeps its size, not the
        // configuration's; and the bytes it can hold, without its files'
        // headers (a 256 KiB log holds 208 KiB: a free check at three
        // quarters of 256 KiB let statements fill it, and the oldest page
        // then needed log past the writer's limit to be flushed).
        let capacity = log.usable_bytes();
        let engine =
            Arc::new(Engine::new(log, pool, replayed.end_lsn, capacity, options.io_capacity, options.space_policy));
        let background = background
            .then(|| Background::start(&engine))
            .transpose()
            .map_err(|source| crate::Error::Io { path: dir.to_path_buf(), source })?;
        Ok((PageStore { engine, background, tables }, replayed))
    }

    /// The tables the meta page lists.
    fn catalog(pool: &BufferPool) -> Result<Vec<Trees>> {
        let meta = pool.get(META_PAGE)?;
        let data = meta.latch().read();
        if data.page.kind() != Some(PageKind::Meta) {
            return Ok(Vec::new());
        }
        let bytes = data.page.bytes();
        let count = u32_at(bytes, TABLE_COUNT_OFFSET) as usize;
        Ok((0..count.min(TABLES_MAX))
            .map(|table| {
                let (primary, secondary) =
                    (u32_at(bytes, ROOTS_OFFSET + table * 8), u32_at(bytes, ROOTS_OFFSET + table * 8 + 4));
                Trees {
                    primary: BTree::open(2 * table as u32 + 1, primary, 8, ROW_BYTES),
                    secondary: BTree::open(2 * table as u32 + 2, secondary, 16, 0),
                }
            })
            .collect())
    }

    /// Adds an empty table (both trees, and its catalog entry, in one
    /// mini-transaction, durable when this returns); returns its number.
    pub fn create_table(&mut self) -> Result<usize> {
        let number = self.tables.len();
        let mut mtr = self.mtr();
        if mtr.latch(META_PAGE)?.kind() != Some(PageKind::Meta) {
            format_meta(&mut mtr)?;
        }
        let primary = BTree::create(&mut mtr, 2 * number as u32 + 1, 8, ROW_BYTES)?;
        let secondary = BTree::create(&mut mtr, 2 * number as u32 + 2, 16, 0)?;
        let roots = [primary.root().to_le_bytes(), secondary.root().to_le_bytes()].concat();
        let offset = (ROOTS_OFFSET + number * 8) as u16;
        mtr.apply(Redo::Write { page: META_PAGE, offset, bytes: roots })?;
        let count = (number as u32 + 1).to_le_bytes().to_vec();
        mtr.apply(Redo::Write { page: META_PAGE, offset: TABLE_COUNT_OFFSET as u16, bytes: count })?;
        if let Some(end) = mtr.commit()? {
            self.engine.log.wait(end, Durability::Synced)?;
        }
        self.tables.push(Trees { primary, secondary });
        Ok(number)
    }

    /// Table `number`.
    pub fn table(&self, number: usize) -> Table<'_> {
        Table::new(&self.tables[number], &self.engine)
    }

    /// The tables.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }

    /// Waits for a statement's end LSN as InnoDB's
    /// `innodb_flush_log_at_trx_commit` says: 1 synced, 2 written, 0 not at
    /// all (the log's background flush makes it durable within its
    /// `flush_interval`).
    pub fn commit_wait(&self, end: Option<Lsn>, flush_log_at_trx_commit: u8) -> Result<()> {
        let durability = match flush_log_at_trx_commit {
            1 => Durability::Synced,
            2 => Durability::Written,
            _ => return Ok(()),
        };
        match end {
            Some(end) => Ok(self.engine.log.wait(end, durability)?),
            None => Ok(()),
        }
    }

    /// A mini-transaction on this store.
    pub fn mtr(&self) -> Mtr<'_> {
        Mtr::new(&self.engine.pool, &self.engine.log)
    }

    /// InnoDB's `log_free_check`, which every statement makes first: waits,
    /// on an event, while the log is short of space and one thread flushes
    /// pages and checkpoints to make room ([PAGESTORE §10](crate::docs::pagestore#10-page-cleaners-the-checkpointer-the-free-check)).
    pub fn free_check(&self) -> Result<()> {
        self.engine.free_check()
    }

    /// A sharp checkpoint: writes every dirty page (oldest first, through
    /// the doublewrite file) and checkpoints at the closed LSN, so the log
    /// holds nothing recovery would replay. Changes made meanwhile stay
    /// dirty. What InnoDB does at a slow shutdown; the benchmark's prepare
    /// ends with it, so every run starts from a clean pool.
    ///
    /// ```
    /// # use redolog_pagestore::{Options, PageStore, Row, C_BYTES, PAD_BYTES};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let log = redolog::Config::default().with_buffer_bytes(1 << 20).with_closed_window_bytes(1 << 20);
    /// let (mut store, _) = PageStore::open(dir.path(), Options { log, ..Options::default() }).unwrap();
    /// let table = store.create_table().unwrap();
    /// let row = Row { id: 1, k: 7, c: [b'c'; C_BYTES], pad: [b'p'; PAD_BYTES] };
    /// store.table(table).insert(&row).unwrap();
    /// store.flush_all().unwrap();
    /// assert_eq!(store.pool().dirty_pages(), 0);
    /// assert_eq!(store.stats().checkpoint_age, 0);
    /// ```
    pub fn flush_all(&self) -> Result<()> {
        self.engine.flush_all()
    }

    /// The free check's wait triad, pages flushed, checkpoints, and the
    /// checkpoint age.
    pub fn stats(&self) -> EngineStats {
        self.engine.stats()
    }

    /// The buffer pool.
    pub fn pool(&self) -> &BufferPool {
        &self.engine.pool
    }

    /// The log, shared: an archiver holds it too
    /// (`redolog::archive::Archiver::start(store.log(), dir)`).
    pub fn log(&self) -> &Arc<Log> {
        &self.engine.log
    }

    /// Stops the background threads and returns the log alone, the buffer
    /// pool dropped with its dirty pages unwritten: a crash test then
    /// crashes the log (redolog's `simulate_crash`, cargo feature
    /// `testkit`). `None` if something still holds the engine.
    pub fn into_log(self) -> Option<Log> {
        let PageStore { engine, background, .. } = self;
        drop(background);
        Arc::try_unwrap(engine).ok().and_then(|engine| Arc::try_unwrap(engine.log).ok())
    }
}
