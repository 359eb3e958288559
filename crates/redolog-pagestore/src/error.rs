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
    /// A backup that cannot be taken or restored from: the archive is not
    /// the log's or starts too late, the directory is not empty, or the
    /// backup's description is missing or damaged.
    #[error("backup {path}: {reason}")]
    BadBackup {
        /// The directory or file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A restore to an LSN before the backup's consistent point: pages
    /// copied later already hold changes from after it.
    #[error("cannot restore to LSN {target}: the backup is consistent from LSN {earliest} on")]
    RestoreTooEarly {
        /// The LSN asked for.
        target: Lsn,
        /// The backup's consistent LSN.
        earliest: Lsn,
    },
    /// A restore to an LSN past the archive's last group.
    #[error("cannot restore to LSN {target}: the archive ends at LSN {archived}")]
    RestorePastArchive {
        /// The LSN asked for.
        target: Lsn,
        /// The archive's end.
        archived: Lsn,
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

impl Error {
    /// Whether a restore point was refused (too early, or past the archive).
    pub fn is_restore_point(&self) -> bool {
        matches!(self, Error::RestoreTooEarly { .. } | Error::RestorePastArchive { .. })
    }
}

/// The page store's result.
pub type Result<T> = std::result::Result<T, Error>;
