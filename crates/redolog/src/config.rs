//! Configuration and durability levels.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::{BLOCK_BYTES, FILE_COUNT, FILE_HEADER_AREA_BYTES};

/// How long `commit` and `wait` wait: mirrors `innodb_flush_log_at_trx_commit`.
///
/// Exhaustive on purpose (not `#[non_exhaustive]`, unlike the other public
/// enums): the three are the three places a byte can be — the log's ring,
/// the OS, the device — so an engine may `match` on them; a fourth would
/// change what a commit promises, a breaking change whatever the attribute.
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

/// Who writes and syncs the log ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline), §1.11, §1.12).
///
/// ```
/// use redolog::{Config, Log, Pipeline};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default().with_pipeline(Pipeline::Dedicated);
/// let (log, _) = Log::open(dir.path(), config).unwrap();
/// assert_eq!(log.active_pipeline(), Pipeline::Dedicated);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// Choose between the two at run time: group commit where it wins by
    /// construction (a sync pass under 20 µs, fewer than 3 committers waiting,
    /// commits waiting for `write()` only); elsewhere run each for a few
    /// hundred milliseconds, keep the one that writes more, and measure again
    /// when the load changes ([DESIGN §1.12](crate::docs::design#112-choosing-the-pipeline-auto)).
    Auto,
}

/// Settings of a log. Every field has a default that suits most users.
///
/// Start from [`Config::default`] and change what you need with the `with_`
/// methods (or assign the public fields): the struct is `#[non_exhaustive]`,
/// so a setting added in a later version breaks no caller.
///
/// ```
/// use redolog::Config;
/// let config = Config::default().with_capacity_bytes(64 << 20);
/// assert_eq!(config.buffer_bytes, 16 << 20);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Total size of the log files (default 100 MiB, `innodb_redo_log_capacity`'s
    /// default since MySQL 8.0.30: a new log's zero-filled files take about
    /// 0.1 s to create on this project's test disk, 1 GiB took 0.7–8.7 s;
    /// grow it with [`Log::resize`](crate::Log::resize), online, for a log
    /// written faster than the engine checkpoints;
    /// from [`Config::CAPACITY_BYTES_MIN`] (112 KiB) to
    /// [`Config::CAPACITY_BYTES_MAX`] (128 GiB, that setting's maximum)).
    /// Fixed when the log is created; reopening uses the size found on disk. The
    /// log holds at most this much between the checkpoint and its end; appends
    /// past that wait for `checkpoint`.
    pub capacity_bytes: u64,
    /// Size of the in-memory ring appenders copy into (default 16 MiB, like
    /// `innodb_log_buffer_size`; a multiple of 512 from
    /// [`Config::BUFFER_BYTES_MIN`] (4 KiB) to [`Config::BUFFER_BYTES_MAX`]
    /// (4 GiB, that setting's maximum)), rounded up to a power of two.
    /// Appenders wait for the writer when the ring holds this much unwritten log.
    pub buffer_bytes: usize,
    /// Largest group `append_group` accepts (default 64 MiB; from 1 to
    /// [`Config::GROUP_BYTES_MAX`], the format's 32-bit length); larger ones get
    /// `Error::GroupTooLarge`. Groups larger than the ring are copied in pieces.
    pub group_bytes_max: u64,
    /// Longest time a `Durability::Buffered` group stays unsynced (default 1 s,
    /// like `innodb_flush_log_at_timeout`; from
    /// [`Config::FLUSH_INTERVAL_MIN`] (1 ms) to [`Config::FLUSH_INTERVAL_MAX`]
    /// (1 day)).
    pub flush_interval: Duration,
    /// Who writes and syncs (default `Auto`).
    pub pipeline: Pipeline,
    /// CPUs to pin the dedicated log threads to (default: none, the scheduler
    /// decides). As the blog post "MySQL 8.0 redo log write performance analysis"
    /// found, on a busy machine pinning the log threads away from
    /// the committing threads keeps them from being starved. If the system
    /// refuses, a warning is logged and the threads run unpinned. Each CPU
    /// number is below [`Config::CPU_NUMBER_LIMIT`] (the kernel's CPU set size).
    pub log_thread_cpus: Vec<usize>,
    /// Nice value for the dedicated log threads (default: none, inherit; from
    /// -20 to 19). Lower is more favoured; below 0 usually needs
    /// `CAP_SYS_NICE`. If the system refuses, a warning is logged and the
    /// threads keep the inherited priority.
    pub log_thread_nice: Option<i32>,
    /// Let the owner's group read the log (default `false`): a new log's
    /// directory is then `0750` and its files `0640` instead of `0700` and
    /// `0600` ([DESIGN INV-20](crate::docs::design#2-invariants)). For a backup or CDC process running as
    /// another user of the same group. Never writable by others: opening a
    /// log whose directory or files are group- or world-writable fails with
    /// `Error::UnsafePermissions`.
    pub group_readable: bool,
    /// How far past the closed LSN a group may start (default 2 MiB, like
    /// `innodb_log_recent_closed_size`; from [`Config::CLOSED_WINDOW_BYTES_MIN`]
    /// (4 KiB) to [`Config::CLOSED_WINDOW_BYTES_MAX`] (1 GiB)), rounded up to a
    /// power of two: `begin_group` waits, on an event, while its group would
    /// start further ([DESIGN §1.13](crate::docs::design#113-mini-transactions-and-the-closed-lsn-mysqls-recent_closed)).
    pub closed_window_bytes: u64,
    /// Encrypt the log at rest (default: no): a new log is created with its
    /// blocks sealed by AES-256-GCM under the provider's keys, and an
    /// encrypted log opens only with them (`Error::KeyRequired`); giving it
    /// for a log created without it is `Error::NotEncrypted`. See
    /// [`crate::encryption`].
    pub encryption: Option<crate::encryption::Encryption>,
    /// How long an append or a `Written`/`Synced` wait waits for a checkpoint
    /// when the log is full (default: no bound — wait, as InnoDB's
    /// `log_free_check` does; at most [`Config::FLUSH_INTERVAL_MAX`]). With a
    /// bound, an append whose group would end past what the files can take
    /// before the next checkpoint, and a wait for an LSN past it, wait that
    /// long for a checkpoint (or a consumer's advance) to free the space, then
    /// fail with `Error::LogFull`, naming the checkpoint and the bytes
    /// needed: the append reserved nothing, the waited-for group stays
    /// appended and becomes durable once space is freed ([DESIGN](crate::docs::design)
    /// §1.8, INV-44). For a service that would rather answer "busy" than
    /// stall. Whatever the bound, a full log is logged once per episode and
    /// counted (`Metrics::log_full_episodes`), and [`crate::Log::space`]
    /// says when a checkpoint is wanted, before the log is full.
    pub log_full_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity_bytes: 100 << 20,
            buffer_bytes: 16 << 20,
            group_bytes_max: 64 << 20,
            flush_interval: Duration::from_secs(1),
            pipeline: Pipeline::Auto,
            log_thread_cpus: Vec::new(),
            log_thread_nice: None,
            group_readable: false,
            closed_window_bytes: 2 << 20,
            encryption: None,
            log_full_timeout: None,
        }
    }
}

/// One `with_` method per field: the builder form of a struct a caller cannot
/// write as a literal (`#[non_exhaustive]`). An `Option` field's method takes
/// the value or `None`.
macro_rules! with_methods {
    ($($field:ident: $ty:ty => $method:ident;)*) => {
        impl Config {
            $(
                #[doc = concat!("Sets `", stringify!($field), "` (see the field).")]
                #[must_use]
                pub fn $method(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
    (@option $($field:ident: $ty:ty => $method:ident;)*) => {
        impl Config {
            $(
                #[doc = concat!("Sets `", stringify!($field), "` (see the field): a value, or `None`.")]
                #[must_use]
                pub fn $method(mut self, value: impl Into<Option<$ty>>) -> Self {
                    self.$field = value.into();
                    self
                }
            )*
        }
    };
}

with_methods! {
    capacity_bytes: u64 => with_capacity_bytes;
    buffer_bytes: usize => with_buffer_bytes;
    group_bytes_max: u64 => with_group_bytes_max;
    flush_interval: Duration => with_flush_interval;
    pipeline: Pipeline => with_pipeline;
    log_thread_cpus: Vec<usize> => with_log_thread_cpus;
    group_readable: bool => with_group_readable;
    closed_window_bytes: u64 => with_closed_window_bytes;
}

with_methods! {
    @option
    log_thread_nice: i32 => with_log_thread_nice;
    encryption: crate::encryption::Encryption => with_encryption;
    log_full_timeout: Duration => with_log_full_timeout;
}

/// Smallest share of the ring a file may hold: 32 blocks.
pub(crate) const FILE_DATA_BYTES_MIN: u64 = 32 * BLOCK_BYTES as u64;
/// Smallest ring: 8 blocks.
pub(crate) const BUFFER_BYTES_MIN: usize = 8 * BLOCK_BYTES;
/// Largest unsynced stretch of written log ([FORMAT §6](crate::docs::format#6-groups-and-records)): 16 MiB is a few
/// milliseconds of writing at full speed, and what recovery scans past the end.
const UNSYNCED_BYTES_MAX: u64 = 16 << 20;

impl Config {
    /// The smallest `capacity_bytes` accepted: 112 KiB, four files of a
    /// 12 KiB header area and 32 blocks each.
    ///
    /// ```
    /// assert_eq!(redolog::Config::CAPACITY_BYTES_MIN, 112 << 10);
    /// ```
    pub const CAPACITY_BYTES_MIN: u64 = FILE_COUNT as u64 * (FILE_HEADER_AREA_BYTES + FILE_DATA_BYTES_MIN);
    /// The smallest `buffer_bytes` accepted: 8 blocks (4 KiB). The link buffer
    /// that orders concurrent copies is sized from the ring, so this is also
    /// its smallest size.
    ///
    /// ```
    /// use redolog::Config;
    /// let tiny = Config::default().with_buffer_bytes(Config::BUFFER_BYTES_MIN);
    /// # let dir = tempfile::tempdir()?;
    /// let (log, _) = redolog::Log::open(dir.path(), tiny)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const BUFFER_BYTES_MIN: usize = BUFFER_BYTES_MIN;

    /// The largest `capacity_bytes`: 128 GiB, `innodb_redo_log_capacity`'s maximum.
    pub const CAPACITY_BYTES_MAX: u64 = 128 << 30;
    /// The largest `buffer_bytes`: 4 GiB, `innodb_log_buffer_size`'s maximum.
    pub const BUFFER_BYTES_MAX: usize = 4 << 30;
    /// The largest `group_bytes_max`: the format's 32-bit group length.
    pub const GROUP_BYTES_MAX: u64 = u32::MAX as u64;
    /// The shortest `flush_interval`.
    pub const FLUSH_INTERVAL_MIN: Duration = Duration::from_millis(1);
    /// The longest `flush_interval`.
    pub const FLUSH_INTERVAL_MAX: Duration = Duration::from_secs(24 * 3600);
    /// CPU numbers in `log_thread_cpus` are below this (`CPU_SETSIZE`).
    pub const CPU_NUMBER_LIMIT: usize = 1024;
    /// The smallest `closed_window_bytes`.
    pub const CLOSED_WINDOW_BYTES_MIN: u64 = 4 << 10;
    /// The largest `closed_window_bytes`.
    pub const CLOSED_WINDOW_BYTES_MAX: u64 = 1 << 30;

    /// Checks every field against its range, in one place, before anything is
    /// created or opened: the first field out of range is an
    /// `Error::InvalidConfig` naming it, its value and what is allowed.
    ///
    /// ```
    /// use redolog::{Config, Error};
    /// let config = Config::default().with_buffer_bytes(5000);
    /// let Err(Error::InvalidConfig { field, value, .. }) = config.validate() else { panic!() };
    /// assert_eq!((field, value.as_str()), ("Config::buffer_bytes", "5000"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        // Here, before anything is created: a new log's opener (which refuses
        // too, for the tools' `inspect_with`) is made after its files, from
        // their log id.
        if self.encryption.is_some() && !cfg!(feature = "encryption") {
            return Err(Error::EncryptionNotBuilt);
        }
        fn check(field: &'static str, ok: bool, value: String, allowed: String) -> Result<()> {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidConfig { field, value, allowed })
            }
        }
        let (capacity, buffer, group) = (self.capacity_bytes, self.buffer_bytes, self.group_bytes_max);
        check(
            "Config::capacity_bytes",
            (Self::CAPACITY_BYTES_MIN..=Self::CAPACITY_BYTES_MAX).contains(&capacity),
            capacity.to_string(),
            format!("{}..={}", Self::CAPACITY_BYTES_MIN, Self::CAPACITY_BYTES_MAX),
        )?;
        check(
            "Config::buffer_bytes",
            (BUFFER_BYTES_MIN..=Self::BUFFER_BYTES_MAX).contains(&buffer) && buffer % BLOCK_BYTES == 0,
            buffer.to_string(),
            format!("a multiple of {BLOCK_BYTES} in {BUFFER_BYTES_MIN}..={}", Self::BUFFER_BYTES_MAX),
        )?;
        check(
            "Config::group_bytes_max",
            (1..=Self::GROUP_BYTES_MAX).contains(&group),
            group.to_string(),
            format!("1..={}", Self::GROUP_BYTES_MAX),
        )?;
        check(
            "Config::flush_interval",
            (Self::FLUSH_INTERVAL_MIN..=Self::FLUSH_INTERVAL_MAX).contains(&self.flush_interval),
            format!("{:?}", self.flush_interval),
            format!("{:?}..={:?}", Self::FLUSH_INTERVAL_MIN, Self::FLUSH_INTERVAL_MAX),
        )?;
        if let Some(&cpu) = self.log_thread_cpus.iter().find(|&&cpu| cpu >= Self::CPU_NUMBER_LIMIT) {
            check(
                "Config::log_thread_cpus",
                false,
                cpu.to_string(),
                format!("CPU numbers 0..{}", Self::CPU_NUMBER_LIMIT),
            )?;
        }
        check(
            "Config::closed_window_bytes",
            (Self::CLOSED_WINDOW_BYTES_MIN..=Self::CLOSED_WINDOW_BYTES_MAX).contains(&self.closed_window_bytes),
            self.closed_window_bytes.to_string(),
            format!("{}..={}", Self::CLOSED_WINDOW_BYTES_MIN, Self::CLOSED_WINDOW_BYTES_MAX),
        )?;
        if let Some(nice) = self.log_thread_nice {
            check("Config::log_thread_nice", (-20..=19).contains(&nice), nice.to_string(), "-20..=19".into())?;
        }
        if let Some(timeout) = self.log_full_timeout {
            check(
                "Config::log_full_timeout",
                timeout <= Self::FLUSH_INTERVAL_MAX,
                format!("{timeout:?}"),
                format!("at most {:?}", Self::FLUSH_INTERVAL_MAX),
            )?;
        }
        Ok(())
    }

    /// The closed window's real size: rounded up to a power of two.
    pub(crate) fn closed_window(&self) -> u64 {
        self.closed_window_bytes.next_power_of_two()
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
        assert_eq!(Config::default().file_bytes(), 25 << 20);
    }

    /// Every field at its edges: 0, 1, the minimum, the maximum and one past
    /// each, accepted or refused naming the field.
    #[test]
    // A table, one row per edge: longer than 70 lines, and clearer whole.
    #[allow(clippy::too_many_lines)]
    fn every_field_is_checked_at_its_edges() {
        let (cap_min, cap_max) = (Config::CAPACITY_BYTES_MIN, Config::CAPACITY_BYTES_MAX);
        let (buf_min, buf_max) = (Config::BUFFER_BYTES_MIN, Config::BUFFER_BYTES_MAX);
        let (flush_min, flush_max) = (Config::FLUSH_INTERVAL_MIN, Config::FLUSH_INTERVAL_MAX);
        let ms = Duration::from_millis(1);
        type Case = (&'static str, fn(&mut Config, u64), u64, bool);
        let cases: Vec<Case> = vec![
            ("Config::capacity_bytes", |c, v| c.capacity_bytes = v, 0, false),
            ("Config::capacity_bytes", |c, v| c.capacity_bytes = v, 1, false),
            ("Config::capacity_bytes", |c, v| c.capacity_bytes = v, cap_min - 1, false),
            ("Config::capacity_bytes", |c, v| c.capacity_bytes = v, cap_min, true),
            ("Config::capacity_bytes", |c, v| c.capacity_bytes = v, cap_max, true),
            ("Config::capacity_bytes", |c, v| c.capacity_bytes = v, cap_max + 1, false),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, 0, false),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, 1, false),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, buf_min as u64 - 512, false),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, buf_min as u64 + 1, false),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, buf_min as u64, true),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, buf_max as u64, true),
            ("Config::buffer_bytes", |c, v| c.buffer_bytes = v as usize, buf_max as u64 + 512, false),
            ("Config::group_bytes_max", |c, v| c.group_bytes_max = v, 0, false),
            ("Config::group_bytes_max", |c, v| c.group_bytes_max = v, 1, true),
            ("Config::group_bytes_max", |c, v| c.group_bytes_max = v, Config::GROUP_BYTES_MAX, true),
            ("Config::group_bytes_max", |c, v| c.group_bytes_max = v, Config::GROUP_BYTES_MAX + 1, false),
            ("Config::flush_interval", |c, v| c.flush_interval = Duration::from_nanos(v), 0, false),
            ("Config::flush_interval", |c, v| c.flush_interval = Duration::from_nanos(v), 1, false),
            (
                "Config::flush_interval",
                |c, v| c.flush_interval = Duration::from_nanos(v),
                (flush_min - Duration::from_nanos(1)).as_nanos() as u64,
                false,
            ),
            (
                "Config::flush_interval",
                |c, v| c.flush_interval = Duration::from_nanos(v),
                flush_min.as_nanos() as u64,
                true,
            ),
            (
                "Config::flush_interval",
                |c, v| c.flush_interval = Duration::from_nanos(v),
                flush_max.as_nanos() as u64,
                true,
            ),
            (
                "Config::flush_interval",
                |c, v| c.flush_interval = Duration::from_nanos(v),
                (flush_max + ms).as_nanos() as u64,
                false,
            ),
            ("Config::log_thread_cpus", |c, v| c.log_thread_cpus = vec![v as usize], 0, true),
            ("Config::log_thread_cpus", |c, v| c.log_thread_cpus = vec![v as usize], 1, true),
            (
                "Config::log_thread_cpus",
                |c, v| c.log_thread_cpus = vec![v as usize],
                Config::CPU_NUMBER_LIMIT as u64 - 1,
                true,
            ),
            (
                "Config::log_thread_cpus",
                |c, v| c.log_thread_cpus = vec![v as usize],
                Config::CPU_NUMBER_LIMIT as u64,
                false,
            ),
            ("Config::closed_window_bytes", |c, v| c.closed_window_bytes = v, 0, false),
            ("Config::closed_window_bytes", |c, v| c.closed_window_bytes = v, 1, false),
            (
                "Config::closed_window_bytes",
                |c, v| c.closed_window_bytes = v,
                Config::CLOSED_WINDOW_BYTES_MIN - 1,
                false,
            ),
            ("Config::closed_window_bytes", |c, v| c.closed_window_bytes = v, Config::CLOSED_WINDOW_BYTES_MIN, true),
            ("Config::closed_window_bytes", |c, v| c.closed_window_bytes = v, Config::CLOSED_WINDOW_BYTES_MAX, true),
            (
                "Config::closed_window_bytes",
                |c, v| c.closed_window_bytes = v,
                Config::CLOSED_WINDOW_BYTES_MAX + 1,
                false,
            ),
            ("Config::log_thread_nice", |c, v| c.log_thread_nice = Some(v as i32 - 100), 80, true),
            ("Config::log_thread_nice", |c, v| c.log_thread_nice = Some(v as i32 - 100), 79, false),
            ("Config::log_thread_nice", |c, v| c.log_thread_nice = Some(v as i32 - 100), 119, true),
            ("Config::log_thread_nice", |c, v| c.log_thread_nice = Some(v as i32 - 100), 120, false),
            ("Config::log_thread_nice", |c, v| c.log_thread_nice = Some(v as i32 - 100), 100, true),
            ("Config::log_thread_nice", |c, v| c.log_thread_nice = Some(v as i32 - 100), 101, true),
        ];
        for (field, set, value, valid) in cases {
            let mut config = Config::default();
            set(&mut config, value);
            match config.validate() {
                Ok(()) => assert!(valid, "{field} = {value} accepted"),
                Err(Error::InvalidConfig { field: named, value: shown, allowed }) => {
                    assert!(!valid, "{field} = {value} refused: {shown}, allowed {allowed}");
                    assert_eq!(named, field);
                    assert!(!allowed.is_empty());
                }
                Err(other) => panic!("{field} = {value}: {other}"),
            }
        }
    }
}
