//! What `--workload oltp_*` takes: the run's options and the page store's.

use crate::harness::run::RunOptions;

/// `--log-capacity`'s default: InnoDB's `innodb_redo_log_capacity` default.
pub const DEFAULT_LOG_CAPACITY: u64 = 100 << 20;

/// sysbench's write workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OltpWorkload {
    /// `oltp_insert`: one INSERT of a new row.
    Insert,
    /// `oltp_update_index`: `SET k = k + 1 WHERE id = ?`.
    UpdateIndex,
    /// `oltp_update_non_index`: `SET c = ? WHERE id = ?`.
    UpdateNonIndex,
    /// `oltp_write_only`: index update, non-index update, delete and insert.
    WriteOnly,
}

impl OltpWorkload {
    /// sysbench's name.
    pub fn name(self) -> &'static str {
        match self {
            OltpWorkload::Insert => "oltp_insert",
            OltpWorkload::UpdateIndex => "oltp_update_index",
            OltpWorkload::UpdateNonIndex => "oltp_update_non_index",
            OltpWorkload::WriteOnly => "oltp_write_only",
        }
    }
}

/// The options of `--workload oltp_*`.
#[derive(Clone, Debug)]
pub struct OltpOptions {
    pub run: RunOptions,
    pub workload: OltpWorkload,
    /// sysbench's `--tables`.
    pub tables: usize,
    /// sysbench's `--table-size`.
    pub table_size: u64,
    /// InnoDB's `innodb_flush_log_at_trx_commit`: 1, 2 or 0.
    pub flush_log_at_trx_commit: u8,
    pub buffer_pool_instances: usize,
    pub buffer_pool_bytes: u64,
    /// InnoDB's `innodb_io_capacity`.
    pub io_capacity: u64,
    /// The log's capacity in bytes.
    pub log_capacity: u64,
    /// Measurement only: pages written in place without the doublewrite file.
    pub no_doublewrite: bool,
    /// Also the store with an asynchronous and a synchronous archiver.
    pub archiver: bool,
}
