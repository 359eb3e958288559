//! Configuration and durability levels.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::{BLOCK_BYTES, FILE_COUNT, FILE_HEADER_AREA_BYTES};

/// How long `commit` and `wait` wait: mirrors `innodb_flush_log_at_trx_commit`.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
/// log.commit(b"fast, survives nothing yet", Durability::Buffered).unwrap();
/// log.commit(b"in the page cache", Durability::Written).unwrap();
/// log.commit(b"on stable storage", Durability::Synced).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Return at once (0). A background thread writes and syncs at least every
    /// `Config::flush_interval`; a process crash loses what it has not written.
    Buffered,
    /// Return once the bytes were handed to the OS (2): survives a process crash,
    /// not a power loss.
    Written,
    /// Return once an fdatasync covering the LSN returned Ok (1): survives a power
    /// loss, provided the device honours flushes.
    Synced,
}

/// Who writes and syncs the log (docs/DESIGN.md §1.5, §1.11, §1.12).
///
/// ```
/// use redolog::{Config, Log, Pipeline};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config { pipeline: Pipeline::Dedicated, ..Config::default() };
/// let (log, _) = Log::open(dir.path(), config).unwrap();
/// assert_eq!(log.active_pipeline(), Pipeline::Dedicated);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pipeline {
    /// Committing threads write and sync for each other (leader/follower group
    /// commit, `innodb_log_writer_threads=OFF`, RocksDB's WriteThread). Best when
    /// CPUs are few or commits are not concurrent.
    GroupCommit,
    /// A log writer thread writes whatever appenders completed, a log flusher
    /// thread fdatasyncs whatever was written, and committing threads only wait
    /// (MySQL 8.0's dedicated log threads). Best with many concurrent commits and
    /// CPUs to spare for the two threads.
    Dedicated,
    /// Choose between the two at run time — from the usable CPUs, the measured
    /// time of a sync pass, the number of committers waiting and how much of
    /// their waiting is for a sync (docs/DESIGN.md §1.12) — and switch as they
    /// change.
    Auto,
}

/// Settings of a log. Every field has a default that suits most users.
///
/// ```
/// use redolog::Config;
/// let config = Config { capacity_bytes: 64 << 20, ..Config::default() };
/// assert_eq!(config.buffer_bytes, 16 << 20);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Total size of the log files (default 1 GiB, like `innodb_redo_log_capacity`).
    /// Fixed when the log is created; reopening uses the size found on disk. The
    /// log holds at most this much between the checkpoint and its end; appends
    /// past that wait for `checkpoint`.
    pub capacity_bytes: u64,
    /// Size of the in-memory ring appenders copy into (default 16 MiB, like
    /// `innodb_log_buffer_size`), rounded up to a power of two. Appenders wait for
    /// the writer when the ring holds this much unwritten log.
    pub buffer_bytes: usize,
    /// Largest group `append_group` accepts (default 64 MiB); larger ones get
    /// `Error::GroupTooLarge`. Groups larger than the ring are copied in pieces.
    pub group_bytes_max: u64,
    /// Longest time a `Durability::Buffered` group stays unsynced (default 1 s,
    /// like `innodb_flush_log_at_timeout`).
    pub flush_interval: Duration,
    /// Who writes and syncs (default `Auto`).
    pub pipeline: Pipeline,
    /// CPUs to pin the dedicated log threads to (default: none, the scheduler
    /// decides). As the blog post "MySQL 8.0 redo log write performance analysis"
    /// found, on a busy machine pinning the log threads away from
    /// the committing threads keeps them from being starved. If the system
    /// refuses, a warning is logged and the threads run unpinned.
    pub log_thread_cpus: Vec<usize>,
    /// Nice value for the dedicated log threads (default: none, inherit). Lower is
    /// more favoured; below 0 usually needs `CAP_SYS_NICE`. If the system refuses,
    /// a warning is logged and the threads keep the inherited priority.
    pub log_thread_nice: Option<i32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity_bytes: 1 << 30,
            buffer_bytes: 16 << 20,
            group_bytes_max: 64 << 20,
            flush_interval: Duration::from_secs(1),
            pipeline: Pipeline::Auto,
            log_thread_cpus: Vec::new(),
            log_thread_nice: None,
        }
    }
}

/// Smallest share of the ring a file may hold: 32 blocks.
pub(crate) const FILE_DATA_BYTES_MIN: u64 = 32 * BLOCK_BYTES as u64;
/// Smallest ring: 8 blocks.
pub(crate) const BUFFER_BYTES_MIN: usize = 8 * BLOCK_BYTES;
/// Largest unsynced stretch of written log (docs/FORMAT.md §6): 16 MiB is a few
/// milliseconds of writing at full speed, and what recovery scans past the end.
const UNSYNCED_BYTES_MAX: u64 = 16 << 20;

impl Config {
    /// The smallest `capacity_bytes` accepted.
    pub const CAPACITY_BYTES_MIN: u64 = FILE_COUNT as u64 * (FILE_HEADER_AREA_BYTES + FILE_DATA_BYTES_MIN);
    /// The smallest `buffer_bytes` accepted: 8 blocks (4 KiB). The link buffer
    /// that orders concurrent copies is sized from the ring, so this is also
    /// its smallest size.
    ///
    /// ```
    /// use redolog::Config;
    /// let tiny = Config { buffer_bytes: Config::BUFFER_BYTES_MIN, ..Config::default() };
    /// # let dir = tempfile::tempdir()?;
    /// let (log, _) = redolog::Log::open(dir.path(), tiny)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const BUFFER_BYTES_MIN: usize = BUFFER_BYTES_MIN;

    pub(crate) fn validate(&self) -> Result<()> {
        if self.capacity_bytes < Self::CAPACITY_BYTES_MIN {
            return Err(Error::InvalidConfig(format!(
                "capacity_bytes {} is below the minimum {}",
                self.capacity_bytes,
                Self::CAPACITY_BYTES_MIN
            )));
        }
        if self.buffer_bytes < BUFFER_BYTES_MIN || self.buffer_bytes % BLOCK_BYTES != 0 {
            return Err(Error::InvalidConfig(format!(
                "buffer_bytes {} must be a multiple of {BLOCK_BYTES} and at least {BUFFER_BYTES_MIN}",
                self.buffer_bytes
            )));
        }
        if self.group_bytes_max == 0 || self.group_bytes_max > u64::from(u32::MAX) {
            return Err(Error::InvalidConfig(format!(
                "group_bytes_max {} must be between 1 and {}",
                self.group_bytes_max,
                u32::MAX
            )));
        }
        if self.flush_interval.is_zero() {
            return Err(Error::InvalidConfig("flush_interval must be positive".into()));
        }
        if let Some(nice) = self.log_thread_nice {
            if !(-20..=19).contains(&nice) {
                return Err(Error::InvalidConfig(format!("log_thread_nice {nice} is outside -20..=19")));
            }
        }
        Ok(())
    }

    /// The ring's real size: `buffer_bytes` rounded up to a power of two.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.buffer_bytes.next_power_of_two()
    }

    /// Size of each of the four files for a new log: a multiple of 4 KiB.
    pub(crate) fn file_bytes(&self) -> u64 {
        (self.capacity_bytes / u64::from(FILE_COUNT)) / 4096 * 4096
    }

    /// The unsynced bound recorded in the header of a new log of `ring_bytes`.
    pub(crate) fn unsynced_bytes_max(ring_bytes: u64) -> u64 {
        (ring_bytes / 4).min(UNSYNCED_BYTES_MAX) / BLOCK_BYTES as u64 * BLOCK_BYTES as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        Config::default().validate().expect("default config");
        assert_eq!(Config::default().file_bytes(), 256 << 20);
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        let too_small = Config { capacity_bytes: 1000, ..Config::default() };
        assert!(matches!(too_small.validate(), Err(Error::InvalidConfig(_))));
        let odd_buffer = Config { buffer_bytes: 5000, ..Config::default() };
        assert!(matches!(odd_buffer.validate(), Err(Error::InvalidConfig(_))));
        let huge_group = Config { group_bytes_max: 1 << 33, ..Config::default() };
        assert!(matches!(huge_group.validate(), Err(Error::InvalidConfig(_))));
        let no_interval = Config { flush_interval: Duration::ZERO, ..Config::default() };
        assert!(matches!(no_interval.validate(), Err(Error::InvalidConfig(_))));
        let bad_nice = Config { log_thread_nice: Some(-21), ..Config::default() };
        assert!(matches!(bad_nice.validate(), Err(Error::InvalidConfig(_))));
    }
}
