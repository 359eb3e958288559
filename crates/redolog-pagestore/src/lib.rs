//! A small transactional page store on redolog, built the way InnoDB drives
//! its redo log: 16 KiB pages with a page LSN and a checksum, every change a
//! physiological redo record, a mini-transaction one redolog group (recovery
//! sees all of it or none), and recovery that replays redo onto pages
//! idempotently through their page LSNs ([PAGESTORE](crate::docs::pagestore)).
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
//! `redolog-bench bench --workload oltp_*` runs sysbench's write workloads on it.
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

/// The document the rustdoc cites, shipped with the crate so the citations
/// resolve wherever the docs are read: pages, redo records, recovery, the
/// buffer pool and the checkpointer.
pub mod docs {
    #[doc = include_str!("../docs/PAGESTORE.md")]
    pub mod pagestore {}
}

mod background;
mod backup;
mod btree;
mod buffer_pool;
mod cleaners;
mod datafile;
mod engine;
mod error;
mod free_check;
mod latch_order;
mod mtr;
mod page;
mod policy;
mod recovery;
mod redo;
mod stats;
mod store;
mod table;
mod waits;

pub use backup::{read_meta, restore, restore_with_storage, Backup, RestoreTo, Restored, BACKUP_META_NAME};
pub use btree::{allocate, format_meta, BTree, Index, Outcome};
pub use buffer_pool::{BufferPool, Frame, FrameData, LRU_SCAN_DEPTH};
pub use datafile::{DataFile, DATA_FILE_NAME, DOUBLEWRITE_FILE_NAME, DOUBLEWRITE_PAGES};
#[doc(hidden)]
pub use engine::{Space, SpacePolicy};
pub use error::{Error, Result};
pub use mtr::Mtr;
pub use page::{Format, Page, PageKind, PageNo, HEADER_BYTES, META_PAGE, NEXT_OFFSET, PAGE_BYTES};
pub use recovery::{replay, Replayed};
pub use redo::Redo;
pub use stats::EngineStats;
pub use store::{Options, PageStore, TABLES_MAX};
pub use table::{Row, Scan, Table, C_BYTES, PAD_BYTES, ROW_BYTES};
pub use waits::Waits;
