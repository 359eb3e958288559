//! Read-only inspection of a log directory: what `redolog dump` and `redolog
//! verify` print. The same validation as `Log::open`, without writing anything.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::encryption::Encryption;
use crate::error::{Error, Result};
use crate::format::{BlockState, CheckpointSlot, BLOCK_BYTES, BLOCK_HEADER_BYTES, CHECKPOINT_CLEAN_SHUTDOWN};
use crate::lsn::{BlockNo, Lsn};
use crate::recovery::open::ScanMode;
use crate::recovery::open::{open_existing, read_dir_contents};
use crate::recovery::reader::BlockReader;
use crate::recovery::{LogEnd, Recovery};
use crate::storage::{FsStorage, Storage, LOCK_FILE_NAME};
use crate::writer::Files;

/// One checkpoint slot as found on disk.
///
/// ```
/// # use redolog::inspect::CheckpointInfo;
/// # use redolog::Lsn;
/// let slot = CheckpointInfo { number: 1, lsn: Lsn::from_u64(8208), durable_lsn: Lsn::from_u64(9000), clean_shutdown: false };
/// assert!(slot.durable_lsn >= slot.lsn);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Sequence number; the larger valid one is current.
    pub number: u64,
    /// Recovery starts here.
    pub lsn: Lsn,
    /// Everything below was synced when the slot was written.
    pub durable_lsn: Lsn,
    /// The log was closed cleanly at `durable_lsn`.
    pub clean_shutdown: bool,
}

impl From<CheckpointSlot> for CheckpointInfo {
    fn from(slot: CheckpointSlot) -> Self {
        CheckpointInfo {
            number: slot.number,
            lsn: Lsn(slot.lsn),
            durable_lsn: Lsn(slot.durable_lsn),
            clean_shutdown: slot.flags & CHECKPOINT_CLEAN_SHUTDOWN != 0,
        }
    }
}

/// What a log directory holds, validated as `Log::open` would, without writing.
///
/// `end` reports a torn tail as `LogEnd::TornTail` with the number of blocks
/// `Log::open` would erase. Iterate `groups` to read (and check) every group.
///
/// ```
/// use redolog::{inspect, Config, Durability, Log, LogEnd};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default().with_capacity_bytes(1 << 20);
/// let (log, _) = Log::open(dir.path(), config).unwrap();
/// log.commit(b"hello", Durability::Synced).unwrap();
/// log.close().unwrap();
/// let inspection = inspect::inspect(dir.path()).unwrap();
/// assert_eq!(inspection.end, LogEnd::CleanShutdown);
/// assert_eq!(inspection.groups.count(), 1);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Inspection {
    /// The random id every file and checkpoint of this log carries.
    pub log_id: u128,
    /// The on-disk format version.
    pub format_version: u32,
    /// The four files.
    pub files: Vec<PathBuf>,
    /// Length of each file.
    pub file_bytes: u64,
    /// Blocks in the on-disk ring.
    pub ring_blocks: u64,
    /// The LSN the log was created at.
    pub first_lsn: Lsn,
    /// Bound on written-but-unsynced log ([FORMAT §6](crate::docs::format#6-groups-and-records)).
    pub unsynced_bytes_max: u64,
    /// Slot A and slot B, if valid.
    pub checkpoint_slots: [Option<CheckpointInfo>; 2],
    /// The checkpoint recovery starts from.
    pub checkpoint: CheckpointInfo,
    /// The first recovered group's start.
    pub start_lsn: Lsn,
    /// The end of the last complete group.
    pub end_lsn: Lsn,
    /// How the log ends.
    pub end: LogEnd,
    /// The groups in `[start_lsn, end_lsn)`, read lazily.
    pub groups: Recovery,
    /// A `Log` holds the directory right now ([DESIGN INV-19](crate::docs::design#2-invariants)): what was
    /// read is a snapshot of a log being written, and its end may be moving.
    pub in_use: bool,
    /// The holder's process id, if it wrote one.
    pub holder_pid: Option<u32>,
    /// The files and their geometry, for [`Inspection::sync_frontiers`].
    handles: Arc<Files>,
}

/// What the blocks of a range recorded about the syncs made while they were
/// written (each block's `synced_back`, [FORMAT §5](crate::docs::format#5-block-512-bytes)).
///
/// ```
/// use redolog::inspect::SyncFrontiers;
/// let frontiers = SyncFrontiers { blocks: 10, distinct: 4 };
/// assert_eq!(frontiers.syncs_at_least(), 3);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncFrontiers {
    /// Valid blocks read.
    pub blocks: u64,
    /// Distinct sync frontiers they recorded: the writer's synced LSN moved
    /// `distinct - 1` times, at least, while they were written.
    pub distinct: u64,
}

impl SyncFrontiers {
    /// A lower bound on the syncs made while the range was written: a sync
    /// no later block recorded (the writer wrote no new block after it) leaves
    /// no trace.
    pub fn syncs_at_least(&self) -> u64 {
        self.distinct.saturating_sub(1)
    }
}

impl Inspection {
    /// Reads the block headers of `[from, to)` and counts the distinct sync
    /// frontiers they recorded (`redolog dump --stats`: groups per fsync).
    /// Stops at the first block that is not a valid block of this lap (a
    /// live log's moving tail).
    ///
    /// ```
    /// use redolog::{inspect, Config, Durability, Log};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
    /// for _ in 0..3 {
    ///     log.commit(&[7; 600], Durability::Synced).unwrap(); // each fills a block
    /// }
    /// log.close().unwrap();
    /// let inspection = inspect::inspect(dir.path()).unwrap();
    /// let frontiers = inspection.sync_frontiers(inspection.start_lsn, inspection.end_lsn).unwrap();
    /// assert!(frontiers.syncs_at_least() >= 2);
    /// ```
    pub fn sync_frontiers(&self, from: Lsn, to: Lsn) -> Result<SyncFrontiers> {
        let mut reader = BlockReader::new(self.handles.clone());
        let mut frontiers = SyncFrontiers::default();
        let mut last = None;
        if to <= from {
            return Ok(frontiers);
        }
        // The block of the range's last data byte: `to` may be the first data
        // position of the next block (FORMAT.md §4).
        let last_block = (to.0 - BLOCK_HEADER_BYTES as u64 - 1) / BLOCK_BYTES as u64;
        let mut block = from.block();
        while block.0 <= last_block {
            let BlockState::Valid(header) = reader.checked_state(block)? else { break };
            frontiers.blocks += 1;
            if last != Some(header.synced_block()) {
                frontiers.distinct += 1;
                last = Some(header.synced_block());
            }
            block = BlockNo(block.0 + 1);
        }
        Ok(frontiers)
    }
}

/// Inspects the log in `dir` on the real file system.
pub fn inspect(dir: &Path) -> Result<Inspection> {
    inspect_with_storage(dir, FsStorage)
}

/// Inspects the log in `dir` on `storage`.
pub fn inspect_with_storage(dir: &Path, storage: impl Storage + 'static) -> Result<Inspection> {
    inspect_with(dir, storage, None)
}

/// Inspects the encrypted log in `dir` with its keys, on the real file
/// system. Without them ([`inspect`]) an encrypted log is
/// `Error::KeyRequired`: its groups, and so the end of the last complete
/// one, are sealed in its blocks ([FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3)).
///
/// ```
/// use redolog::encryption::{Encryption, Key, Keys};
/// use redolog::{inspect, Config, Durability, Error, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let keys = Encryption::new(Keys::new().with_key(1, Key::from_bytes([3; 32])));
/// let (log, _) = Log::open(dir.path(), Config::default().with_encryption(keys.clone())).unwrap();
/// log.commit(b"secret", Durability::Synced).unwrap();
/// log.close().unwrap();
/// assert!(matches!(inspect::inspect(dir.path()), Err(Error::KeyRequired { .. })));
/// let mut groups = inspect::inspect_with_keys(dir.path(), &keys).unwrap().groups;
/// assert_eq!(groups.next().unwrap().unwrap().records().next().unwrap(), b"secret");
/// ```
pub fn inspect_with_keys(dir: &Path, encryption: &Encryption) -> Result<Inspection> {
    inspect_with(dir, FsStorage, Some(encryption))
}

/// Inspects the log in `dir` on `storage`, with an encrypted log's keys.
pub fn inspect_with(
    dir: &Path,
    storage: impl Storage + 'static,
    encryption: Option<&Encryption>,
) -> Result<Inspection> {
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let contents = read_dir_contents(dir, &storage)?;
    if !contents.present[0] {
        let reason = if contents.existed { "it holds no redo.0000" } else { "it does not exist" };
        return Err(Error::NotALog { path: dir.to_path_buf(), reason: reason.into() });
    }
    // Read-only: never takes the lock, only asks whether someone holds it.
    let holder =
        storage.lock_holder(dir).map_err(|source| Error::io("check lock", dir.join(LOCK_FILE_NAME), source))?;
    let opened = open_existing(dir, &storage, ScanMode::ReadOnly, encryption)?;
    let groups = opened.recovery();
    let scan = &opened.scan;
    Ok(Inspection {
        log_id: opened.header.log_id,
        format_version: opened.header.format_version,
        files: opened.files.paths.clone(),
        file_bytes: opened.files.layout.file_bytes,
        ring_blocks: opened.files.layout.ring_blocks,
        first_lsn: Lsn(opened.header.first_lsn),
        unsynced_bytes_max: opened.header.unsynced_bytes_max,
        checkpoint_slots: opened.slots.map(|slot| slot.map(CheckpointInfo::from)),
        checkpoint: opened.checkpoint.into(),
        start_lsn: scan.start,
        end_lsn: scan.end,
        end: scan.log_end,
        groups,
        in_use: holder.is_some(),
        holder_pid: holder.flatten(),
        handles: opened.files.clone(),
    })
}
