//! The store's errors.

use redolog::Lsn;

/// Why the store could not open, read or write.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log failed: an I/O error (the log is then poisoned), corruption
    /// found by recovery, a log held by another process, a closed log.
    #[error(transparent)]
    Log(#[from] redolog::Error),
    /// A record that is not one of this store's: the log holds something else,
    /// or a newer version wrote it.
    #[error("record {record} of the group at LSN {lsn}: {reason}")]
    Corrupt {
        /// The group's start.
        lsn: Lsn,
        /// The record's number in its group, from 0.
        record: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// An entry, vote or log id failed to serialize.
    #[error("encoding a record: {source}")]
    Encode {
        /// serde_json's error.
        source: serde_json::Error,
    },
}
