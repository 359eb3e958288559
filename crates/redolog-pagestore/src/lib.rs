//! A small transactional page store on redolog, built the way InnoDB drives
//! its redo log: 16 KiB pages with a page LSN and a checksum, every change a
//! physiological redo record, a mini-transaction one redolog group (recovery
//! sees all of it or none), and recovery that replays redo onto pages
//! idempotently through their page LSNs (docs/PAGESTORE.md).
//!
//! No SQL, no MVCC, no undo: a transaction is one mini-transaction plus its
//! commit wait.
//!
//! The parts: the page format ([`Page`]), the redo records ([`Redo`]), the
//! data file with its doublewrite file ([`DataFile`]), page recovery
//! ([`replay`]), the buffer pool instances with their flush lists
//! ([`BufferPool`]), the mini-transaction ([`Mtr`]), the B+tree
//! ([`BTree`]), sysbench-shaped tables ([`Table`]) and the store
//! ([`PageStore`]) with its page cleaners, checkpointer and log free check.
//! `redolog bench --workload oltp_*` runs sysbench's write workloads on it.
//!
//! ```
//! use redolog_pagestore::{Page, PageKind, Redo};
//! let mut page = Page::zeroed();
//! let init = Redo::Init { page: 3, kind: PageKind::Leaf, level: 0, key_bytes: 8, value_bytes: 4, next: None, tree: 1 };
//! let insert = Redo::Insert { page: 3, slot: 0, record: [7u64.to_be_bytes().as_slice(), b"row!"].concat() };
//! for redo in [&init, &insert] {
//!     redo.apply(&mut page).unwrap();
//! }
//! assert_eq!(page.count(), 1);
//! assert_eq!(page.record(0), b"\0\0\0\0\0\0\0\x07row!");
//! ```

#![cfg_attr(not(test), deny(clippy::expect_used))]
#![warn(missing_docs)]

mod background;
mod btree;
mod buffer_pool;
mod datafile;
mod mtr;
mod page;
mod recovery;
mod redo;
mod store;
mod table;
mod waits;

pub use background::{EngineStats, FreeCheck};
pub use btree::{allocate, format_meta, BTree, Outcome, META_PAGE};
pub use buffer_pool::{BufferPool, Frame, FrameData, LRU_SCAN_DEPTH};
pub use datafile::{DataFile, DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, DOUBLEWRITE_PAGES};
pub use mtr::Mtr;
pub use page::{Format, Page, PageKind, PageNo, HEADER_BYTES, NEXT_OFFSET, PAGE_BYTES};
pub use recovery::{replay, Replayed};
pub use redo::Redo;
pub use store::{Options, PageStore, TABLES_MAX};
pub use table::{Row, Scan, Table, C_BYTES, PAD_BYTES, ROW_BYTES};
pub use waits::Waits;

use redolog::Lsn;

/// Why the page store could not read, write or recover.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log failed (its error says how).
    #[error(transparent)]
    Log(#[from] redolog::Error),
    /// Reading, writing or syncing the data file failed.
    #[error("data file {path}: {source}")]
    Io {
        /// The data file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A page read from the data file is not a sound page.
    #[error("page {page}: {reason}")]
    CorruptPage {
        /// The page's number.
        page: PageNo,
        /// What is wrong with it.
        reason: String,
    },
    /// A change a mini-transaction asked for that does not fit its page (or
    /// names a page it did not latch); the page is unchanged.
    #[error("page {page}: {reason}")]
    Change {
        /// The page.
        page: PageNo,
        /// Why the change does not fit.
        reason: String,
    },
    /// A redo record that cannot be decoded, or that does not fit the page
    /// it names.
    #[error("redo record {record} of the group at LSN {lsn}: {reason}")]
    BadRedo {
        /// The group's start.
        lsn: Lsn,
        /// The record's number in its group, from 0.
        record: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// The page store's result.
pub type Result<T> = std::result::Result<T, Error>;
