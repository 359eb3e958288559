//! The page store's errors.

use redolog::Lsn;

use crate::page::PageNo;

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
