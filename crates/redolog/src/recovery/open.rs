//! Creating a log directory, and opening an existing one: file headers, the
//! checkpoint, the scan.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Config, FILE_DATA_BYTES_MIN};
use crate::encryption::{Encryption, Opener, Session};
use crate::error::{Error, Result};
use crate::failpoint::failpoint;
use crate::format::{
    BlockSeal, CheckpointSlot, ConsumerTable, FileHeader, KeyTable, BLOCK_BYTES, CHECKPOINT_SLOT_OFFSETS,
    CHECKPOINT_TAIL_CUT, CIPHER_AES_256_GCM, CIPHER_NONE, FILE_COUNT, FILE_HEADER_AREA_BYTES, FORMAT_VERSION,
    FORMAT_VERSION_ENCRYPTED,
};
use crate::layout::{file_name, file_path, resize_file_name, temp_file_name, Layout};
use crate::lsn::{BlockNo, Lsn};
use crate::recovery::scan::{repair, scan, LogEnd, ScanResult};
use crate::storage::{DirLock, LockHandle, Storage, LOCK_FILE_NAME};
use crate::writer::Files;

/// The first block of a new log. Blocks 0..16 are never used, so an all-zero
/// header area can never be mistaken for block 0.
const FIRST_BLOCK: BlockNo = BlockNo(16);

/// Zero-fill chunk when creating files.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

/// An opened (or created) log, ready to start.
pub(crate) struct Opened {
    pub(crate) files: Arc<Files>,
    pub(crate) checkpoint: CheckpointSlot,
    pub(crate) scan: ScanResult,
    /// The header of `redo.0000` (log id, unsynced bound, ...); both checkpoint
    /// slots, for inspection.
    pub(crate) header: FileHeader,
    pub(crate) slots: [Option<CheckpointSlot>; 2],
    /// An encrypted log's session, once `begin_session` started it.
    pub(crate) session: Option<Session>,
}

impl Opened {
    /// The iterator over the groups the scan found.
    pub(crate) fn recovery(&self) -> crate::recovery::Recovery {
        let scan = &self.scan;
        crate::recovery::Recovery::new(
            self.files.clone(),
            Lsn(self.checkpoint.lsn),
            (scan.start, scan.end),
            scan.log_end,
        )
    }
}

/// What a directory holds, by file name.
pub(crate) struct DirContents {
    /// Which of redo.0000..redo.0003 exist.
    pub(crate) present: [bool; FILE_COUNT as usize],
    /// `*.tmp` files of an interrupted creation.
    pub(crate) leftovers: Vec<PathBuf>,
    /// Which `redo.NNNN.resize` files of a resize exist ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    pub(crate) resizing: [bool; FILE_COUNT as usize],
    /// Whether the directory existed.
    pub(crate) existed: bool,
}

/// Lists `dir` and sorts its entries into log files and leftovers; any other file
/// makes it not a redolog directory.
pub(crate) fn read_dir_contents(dir: &Path, storage: &Arc<dyn Storage>) -> Result<DirContents> {
    let (names, existed) = match storage.list_dir(dir) {
        Ok(names) => (names, true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => (Vec::new(), false),
        Err(source) => return Err(Error::io("list directory", dir, source)),
    };
    let mut contents = DirContents {
        present: [false; FILE_COUNT as usize],
        leftovers: Vec::new(),
        resizing: [false; FILE_COUNT as usize],
        existed,
    };
    for name in &names {
        if name == LOCK_FILE_NAME {
            continue;
        }
        if let Some(index) = (0..FILE_COUNT as usize).find(|&index| *name == file_name(index)) {
            contents.present[index] = true;
        } else if (0..FILE_COUNT as usize).any(|index| *name == temp_file_name(index)) {
            contents.leftovers.push(dir.join(name));
        } else if let Some(index) = (0..FILE_COUNT as usize).find(|&index| *name == resize_file_name(index)) {
            contents.resizing[index] = true;
        } else {
            let reason = format!("it holds {name:?}, which is not a redolog file");
            return Err(Error::NotALog { path: dir.to_path_buf(), reason });
        }
    }
    Ok(contents)
}

/// Mode of a new log's directory and files when the group may read them.
const GROUP_READABLE_DIR: u32 = 0o750;
const GROUP_READABLE_FILE: u32 = 0o640;

/// INV-19: takes `dir`'s exclusive lock before the log is read or written;
/// another holder is `Error::Locked`. A directory holding other files is
/// refused first, so no lock file is ever left in it. Creates the directory
/// (`0700`, or `0750` for a group-readable log) if missing.
pub(crate) fn lock(dir: &Path, config: &Config, storage: &Arc<dyn Storage>) -> Result<LockHandle> {
    if !read_dir_contents(dir, storage)?.existed {
        storage.create_dir_all(dir).map_err(|source| Error::io("create directory", dir, source))?;
        if config.group_readable {
            storage.set_permissions(dir, GROUP_READABLE_DIR).map_err(|source| Error::io("chmod", dir, source))?;
        }
    }
    let lock_path = dir.join(LOCK_FILE_NAME);
    match storage.lock_dir(dir).map_err(|source| Error::io("lock", &lock_path, source))? {
        DirLock::Acquired(handle) => Ok(handle),
        DirLock::Held { pid } => Err(Error::Locked { dir: dir.to_path_buf(), pid }),
    }
}

/// INV-20 (PostgreSQL's rule): the log directory and its files (`present`)
/// may be written by their owner only; anything group- or world-writable is
/// refused.
fn check_permissions(dir: &Path, present: &[bool], storage: &Arc<dyn Storage>) -> Result<()> {
    let files = (0..present.len()).filter(|&index| present[index]).map(|index| file_path(dir, index));
    for path in std::iter::once(dir.to_path_buf()).chain(files) {
        let mode = storage.permissions(&path).map_err(|source| Error::io("stat", &path, source))?;
        if let Some(mode) = mode.filter(|mode| mode & 0o022 != 0) {
            return Err(Error::UnsafePermissions { path, mode });
        }
    }
    Ok(())
}

/// Opens the log in `dir`, creating it if the directory is empty or holds
/// only the leftovers of a creation that crashed before `redo.0000` was
/// renamed into place; finishes a creation that crashed after it. The caller
/// holds the directory's lock (`lock`, which made the directory if missing).
/// First of all, refuses a directory or file others can write (INV-20).
pub(crate) fn open_or_create(dir: &Path, config: &Config, storage: &Arc<dyn Storage>) -> Result<Opened> {
    let contents = read_dir_contents(dir, storage)?;
    check_permissions(dir, &contents.present, storage)?;
    settle_resize(dir, storage, &contents)?;
    let DirContents { present, mut leftovers, .. } = contents;
    // INV-16: the log exists iff redo.0000 does. Creation never leaves files
    // 1..3 under their final names without it, so finding them means the log
    // lost its first file: refuse, rather than create a new log over its data.
    if !present[0] {
        if let Some(index) = (1..FILE_COUNT as usize).find(|&index| present[index]) {
            return Err(Error::MissingFile {
                path: file_path(dir, 0),
                reason: format!("not found, but {} is: the log lost its first file", file_name(index)),
            });
        }
        remove_leftovers(dir, storage, &leftovers)?;
        let mut opened = create(dir, config, storage, FIRST_BLOCK)?;
        begin_session(&mut opened, false)?;
        return Ok(opened);
    }
    // redo.0000 was renamed first, after every file was synced under its
    // temporary name: roll the other renames forward.
    let mut renamed = false;
    for (index, &found) in present.iter().enumerate().skip(1) {
        let temp = dir.join(temp_file_name(index));
        if !found && leftovers.contains(&temp) {
            let to = file_path(dir, index);
            failpoint("rollforward.rename")
                .and_then(|()| storage.rename(&temp, &to))
                .map_err(|source| Error::io("rename", &temp, source))?;
            leftovers.retain(|path| *path != temp);
            renamed = true;
        }
    }
    if renamed && leftovers.is_empty() {
        failpoint("rollforward.sync_dir")
            .and_then(|()| storage.sync_dir(dir))
            .map_err(|source| Error::io("fsync directory", dir, source))?;
    }
    remove_leftovers(dir, storage, &leftovers)?;
    let mut opened = open_existing(dir, storage, ScanMode::Repair, config.encryption.as_ref())?;
    // INV-41: a torn tail that holds synced bytes of a group that never
    // completed (the slot or a block says the log was synced past its last
    // whole group) is cut only once a slot no longer claims them; and a cut
    // a crash interrupted is finished before anything is appended.
    let cut = opened.checkpoint.flags & CHECKPOINT_TAIL_CUT != 0
        || (opened.scan.repair.is_some() && opened.scan.frontier > opened.scan.end);
    // The session first, then the repair under its cipher: the block the
    // repair rewrites is sealed by the new session, never again by the one
    // that crashed (docs/DESIGN.md §1.15, INV-29).
    begin_session(&mut opened, cut)?;
    if let Some(plan) = &opened.scan.repair {
        repair(&opened.files, plan, opened.session.as_ref().map(|session| &*session.cipher))?;
    }
    if cut {
        // The tail is gone: the next slot claims the log up to its end,
        // with no cut, before anything is appended (INV-41).
        let slot = CheckpointSlot { number: opened.checkpoint.number + 1, flags: 0, ..opened.checkpoint.clone() };
        put_open_slot(&mut opened, slot, ["cut.clear_write", "cut.clear_sync"])?;
    }
    sync_recovered(&opened)?;
    Ok(opened)
}

/// Creates a new log in `dir` whose first group starts after `after`: at
/// the first data byte of the next block (a restored engine's log goes on
/// from the LSNs its pages carry). `dir` must hold no log, not even the
/// leftovers of one (`LogExists`). The caller holds the directory's lock.
pub(crate) fn create_after(dir: &Path, config: &Config, storage: &Arc<dyn Storage>, after: Lsn) -> Result<Opened> {
    let contents = read_dir_contents(dir, storage)?;
    check_permissions(dir, &contents.present, storage)?;
    if contents.present.contains(&true) || contents.resizing.contains(&true) || !contents.leftovers.is_empty() {
        return Err(Error::LogExists { dir: dir.to_path_buf() });
    }
    let first = BlockNo(after.block().0 + 1).max(FIRST_BLOCK);
    let mut opened = create(dir, config, storage, first)?;
    begin_session(&mut opened, false)?;
    Ok(opened)
}

/// The opening's slot, written and synced before the repair: an encrypted
/// log's new session ([DESIGN §1.15](crate::docs::design#115-encryption-at-rest)), an epoch larger than any the
/// log recorded and the key table, so no group is sealed before it (INV-29,
/// INV-31); and, with `cut`, the claim lowered to where the log will end
/// (INV-41). The checkpoint itself does not move. Neither: nothing written.
fn begin_session(opened: &mut Opened, cut: bool) -> Result<()> {
    let opener = opened.files.opener.clone();
    if opener.is_none() && !cut {
        return Ok(());
    }
    let mut slot =
        CheckpointSlot { number: opened.checkpoint.number + 1, resize_file_bytes: 0, ..opened.checkpoint.clone() };
    if let Some(opener) = opener {
        let recorded = opened.slots.iter().flatten().map(|slot| slot.epoch).max().unwrap_or(0);
        let epoch = recorded.checked_add(1).ok_or_else(|| Error::Corruption {
            path: opened.files.paths[0].clone(),
            offset: CHECKPOINT_SLOT_OFFSETS[0],
            lsn: Lsn(0),
            reason: "the session epoch is at its maximum: copy the log's contents into a new log".into(),
        })?;
        let session = opener.begin_session(epoch, &opened.scan.key_ids)?;
        (slot.epoch, slot.keys) = (epoch, session.keys);
        opened.session = Some(session);
    }
    if cut {
        // Until the erase below is synced and the next slot written, the
        // blocks past the end claim nothing (INV-41).
        (slot.durable_lsn, slot.flags) = (opened.scan.end.0, CHECKPOINT_TAIL_CUT);
    }
    // Otherwise the clean-shutdown mark stays: it still says where the log
    // ends until a group is appended, and recovery holds a cleanly closed
    // log to that end.
    put_open_slot(opened, slot, ["session.write", "session.sync"])
}

/// INV-45: what recovery returns is durable before the log goes on. A
/// process that crashed may have left written groups in the page cache
/// only; recovery reads and returns them (the engine replays them into its
/// pages), and the new session syncs only the files it writes. So the
/// files holding the log it keeps, from the oldest block a checkpoint or
/// consumer keeps to the end's, are synced here (PostgreSQL syncs its data directory after a
/// crash for the same reason). After a clean shutdown they hold nothing
/// unsynced, and the fdatasyncs cost little.
fn sync_recovered(opened: &Opened) -> Result<()> {
    let files = &opened.files;
    // From the oldest group the log keeps: a consumer's may lie before the
    // checkpoint, and `read_from` returns those groups as durable too.
    let floor =
        opened.checkpoint.consumers.floor().map_or(opened.checkpoint.lsn, |held| held.min(opened.checkpoint.lsn));
    let first = Lsn(floor).block();
    let last = crate::writer::last_data_block(opened.scan.end).max(first);
    // And `redo.0000`, whose slot recovery started from: a slot written
    // before a crash may be in the page cache only, and the writer's limit
    // is a lap past it (INV-7).
    let files_to_sync = std::iter::once(0).chain(files.layout.files_between(first, last).filter(|index| *index != 0));
    for index in files_to_sync {
        failpoint("recovery.sync")
            .and_then(|()| files.handles[index].sync_data())
            .map_err(|source| Error::io("fdatasync", &files.paths[index], source))?;
    }
    Ok(())
}

/// Writes `slot` into its place in `redo.0000` and syncs it; it becomes the
/// opened log's checkpoint.
fn put_open_slot(opened: &mut Opened, slot: CheckpointSlot, [write_fp, sync_fp]: [&'static str; 2]) -> Result<()> {
    let path = &opened.files.paths[0];
    let index = CheckpointSlot::slot_index(slot.number);
    let file = &opened.files.handles[0];
    failpoint(write_fp)
        .and_then(|()| file.write_all_at(&[&slot.encode()], CHECKPOINT_SLOT_OFFSETS[index]))
        .map_err(|source| Error::io("write", path, source))?;
    failpoint(sync_fp).and_then(|()| file.sync_data()).map_err(|source| Error::io("fdatasync", path, source))?;
    opened.slots[index] = Some(slot.clone());
    opened.checkpoint = slot;
    Ok(())
}

fn remove_leftovers(dir: &Path, storage: &Arc<dyn Storage>, leftovers: &[PathBuf]) -> Result<()> {
    if leftovers.is_empty() {
        return Ok(());
    }
    for path in leftovers {
        failpoint("leftovers.remove")
            .and_then(|()| storage.remove_file(path))
            .map_err(|source| Error::io("remove", path, source))?;
    }
    failpoint("leftovers.sync_dir")
        .and_then(|()| storage.sync_dir(dir))
        .map_err(|source| Error::io("fsync directory", dir, source))
}

/// The version a new log in clear is written with: 1, or in a test that asked
/// for it the test-only version of 460-byte blocks.
fn clear_format_version() -> u32 {
    #[cfg(test)]
    if crate::format::CREATE_WITH_SEALED_GEOMETRY.get() {
        return crate::format::FORMAT_VERSION_TEST_SEALED_GEOMETRY;
    }
    FORMAT_VERSION
}

fn random_log_id() -> Result<u128> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| Error::io("getrandom", "", io::Error::other(error.to_string())))?;
    Ok(u128::from_le_bytes(bytes))
}

/// The file header and first checkpoint of a new log of `layout` whose first
/// group starts at block `first`'s first data byte.
fn new_log_header(config: &Config, layout: &Layout, first: BlockNo) -> Result<(FileHeader, CheckpointSlot)> {
    let encrypted = config.encryption.is_some();
    let header = FileHeader {
        format_version: if encrypted { FORMAT_VERSION_ENCRYPTED } else { clear_format_version() },
        file_no: 0,
        file_count: FILE_COUNT,
        block_bytes: BLOCK_BYTES as u32,
        log_id: random_log_id()?,
        file_bytes: layout.file_bytes,
        first_lsn: first.data_start().0,
        unsynced_bytes_max: Config::unsynced_bytes_max(layout.ring_blocks * BLOCK_BYTES as u64),
        cipher: if encrypted { CIPHER_AES_256_GCM } else { CIPHER_NONE },
        oldest_lsn: 0,
    };
    let checkpoint = CheckpointSlot {
        log_id: header.log_id,
        number: 0,
        lsn: header.first_lsn,
        durable_lsn: header.first_lsn,
        flags: 0,
        epoch: 0,
        keys: KeyTable::default(),
        consumers: ConsumerTable::default(),
        resize_file_bytes: 0,
    };
    Ok((header, checkpoint))
}

/// Failpoint names of a new file's I/O: open, write, sync.
type FileFailpoints = [&'static str; 3];

/// Creates file `index` of a log at `path`: zero-filled to `header.file_bytes`,
/// its header, `slot` in the first checkpoint slot if given, synced. `mode`:
/// its permission bits, if not the storage's default.
pub(crate) fn write_new_file(
    storage: &Arc<dyn Storage>,
    path: &Path,
    (header, index, slot): (&FileHeader, usize, Option<&CheckpointSlot>),
    mode: Option<u32>,
    [open_fp, write_fp, sync_fp]: FileFailpoints,
) -> Result<Arc<dyn crate::storage::StorageFile>> {
    let file = failpoint(open_fp)
        .and_then(|()| storage.open_file(path, true))
        .map_err(|source| Error::io("create", path, source))?;
    if let Some(mode) = mode {
        storage.set_permissions(path, mode).map_err(|source| Error::io("chmod", path, source))?;
    }
    let write = |bytes: &[u8], offset: u64| {
        failpoint(write_fp)
            .and_then(|()| file.write_all_at(&[bytes], offset))
            .map_err(|source| Error::io("write", path, source))
    };
    // Zero-filled, not fallocated: a later write into an unwritten extent makes
    // fdatasync commit metadata (docs/DESIGN.md §6 measured 1.5× the latency).
    let zeros = vec![0u8; ZERO_CHUNK_BYTES];
    let mut offset = 0;
    while offset < header.file_bytes {
        let len = (header.file_bytes - offset).min(ZERO_CHUNK_BYTES as u64) as usize;
        write(&zeros[..len], offset)?;
        offset += len as u64;
    }
    write(&FileHeader { file_no: index as u32, ..*header }.encode(), 0)?;
    if let Some(slot) = slot {
        write(&slot.encode(), CHECKPOINT_SLOT_OFFSETS[CheckpointSlot::slot_index(slot.number)])?;
    }
    // The content must be durable before a name can make it part of the log.
    failpoint(sync_fp).and_then(|()| file.sync_data()).map_err(|source| Error::io("fdatasync", path, source))?;
    Ok(file)
}

/// Creates the four files under temporary names, fills them with zeros, syncs
/// them, and renames them into place with `redo.0000` first (INV-16).
fn create(dir: &Path, config: &Config, storage: &Arc<dyn Storage>, first: BlockNo) -> Result<Opened> {
    let layout = Layout::new(config.file_bytes());
    let (header, checkpoint) = new_log_header(config, &layout, first)?;
    let mode = config.group_readable.then_some(GROUP_READABLE_FILE);
    for index in 0..FILE_COUNT as usize {
        let path = dir.join(temp_file_name(index));
        let slot = (index == 0).then_some(&checkpoint);
        write_new_file(storage, &path, (&header, index, slot), mode, ["create.open", "create.write", "create.sync"])?;
    }
    let sync_dir = || {
        failpoint("create.sync_dir")
            .and_then(|()| storage.sync_dir(dir))
            .map_err(|source| Error::io("fsync directory", dir, source))
    };
    sync_dir()?;
    // redo.0000 first, made durable before the others are renamed: a crash at any
    // point leaves either no redo.0000 (created again) or redo.0000 with the
    // rest under final or temporary names (the next open finishes the renames).
    for index in 0..FILE_COUNT as usize {
        let (from, to) = (dir.join(temp_file_name(index)), file_path(dir, index));
        failpoint("create.rename")
            .and_then(|()| storage.rename(&from, &to))
            .map_err(|source| Error::io("rename", &from, source))?;
        if index == 0 {
            sync_dir()?;
        }
    }
    sync_dir()?;
    let mut files = files_of(open_handles(&log_paths(dir), storage)?, log_paths(dir), &header);
    files.opener = config
        .encryption
        .as_ref()
        .map(|keys| Opener::new(keys, header.log_id, KeyTable::default()))
        .transpose()?
        .map(Arc::new);
    let files = Arc::new(files);
    let end = Lsn(header.first_lsn);
    let scan = ScanResult {
        start: end,
        end,
        log_end: LogEnd::Created,
        last_block: empty_first_block(),
        repair: None,
        key_ids: Vec::new(),
        frontier: end,
    };
    let slots = [Some(checkpoint.clone()), None];
    Ok(Opened { files, checkpoint, scan, header, slots, session: None })
}

/// The ring image of the first block of a new log: its first group starts at
/// its first data byte (INV-9).
fn empty_first_block() -> Vec<u8> {
    let mut image = vec![0u8; BLOCK_BYTES];
    crate::buffer::set_first_group_in(&mut image, crate::format::BLOCK_HEADER_BYTES as u16);
    image
}

/// The paths of the four files of the log in `dir`.
fn log_paths(dir: &Path) -> Vec<PathBuf> {
    (0..FILE_COUNT as usize).map(|index| file_path(dir, index)).collect()
}

/// Opens the files at `paths` for reading and writing.
pub(crate) fn open_handles(
    paths: &[PathBuf],
    storage: &Arc<dyn Storage>,
) -> Result<Vec<Arc<dyn crate::storage::StorageFile>>> {
    paths
        .iter()
        .map(|path| {
            let handle = failpoint("files.open").and_then(|()| storage.open_file(path, false));
            handle.map_err(|source| match source.kind() {
                io::ErrorKind::NotFound => Error::MissingFile { path: path.clone(), reason: "not found".into() },
                _ => Error::io("open", path, source),
            })
        })
        .collect()
}

/// The files of a log whose header is `header`: its seal, its layout, the
/// oldest block they hold. No keys yet: the caller sets the opener.
pub(crate) fn files_of(
    handles: Vec<Arc<dyn crate::storage::StorageFile>>,
    paths: Vec<PathBuf>,
    header: &FileHeader,
) -> Files {
    Files {
        handles,
        paths,
        seal: BlockSeal::for_log(header.log_id).with_geometry(header.geometry()),
        encrypted: header.cipher != CIPHER_NONE,
        opener: None,
        layout: Layout::new(header.file_bytes),
        oldest: if header.oldest_lsn == 0 { BlockNo(0) } else { Lsn(header.oldest_lsn).block() },
    }
}

/// Reads and validates the header of file `index`.
pub(crate) fn read_header(
    handle: &Arc<dyn crate::storage::StorageFile>,
    path: &Path,
    index: usize,
) -> Result<FileHeader> {
    let path = &path.to_path_buf();
    let mut block = [0u8; BLOCK_BYTES];
    handle.read_exact_at(&mut block, 0).map_err(|source| match source.kind() {
        io::ErrorKind::UnexpectedEof => Error::NotALog { path: path.clone(), reason: "shorter than a header".into() },
        _ => Error::io("read", path, source),
    })?;
    let header = FileHeader::decode(&block).map_err(|reason| match reason {
        crate::format::FileHeaderError::NotALog => {
            Error::NotALog { path: path.clone(), reason: "no redolog file header".into() }
        }
        crate::format::FileHeaderError::BadChecksum => Error::Corruption {
            path: path.clone(),
            offset: 0,
            lsn: Lsn(0),
            reason: "file header checksum mismatch".into(),
        },
    })?;
    let cipher_ok = match header.format_version {
        FORMAT_VERSION => header.cipher == CIPHER_NONE,
        #[cfg(test)]
        crate::format::FORMAT_VERSION_TEST_SEALED_GEOMETRY => header.cipher == CIPHER_NONE,
        FORMAT_VERSION_ENCRYPTED => header.cipher == CIPHER_AES_256_GCM,
        found => {
            return Err(Error::UnsupportedVersion { path: path.clone(), found, supported: FORMAT_VERSION_ENCRYPTED })
        }
    };
    if !cipher_ok {
        let reason = format!("format version {} with cipher {}", header.format_version, header.cipher);
        return Err(Error::Corruption { path: path.clone(), offset: 0, lsn: Lsn(0), reason });
    }
    let shape_ok = header.file_no == index as u32
        && header.file_count == FILE_COUNT
        && header.block_bytes == BLOCK_BYTES as u32
        && header.file_bytes % 4096 == 0
        && header.file_bytes >= FILE_HEADER_AREA_BYTES + FILE_DATA_BYTES_MIN;
    if !shape_ok {
        let reason = format!(
            "file header describes file {} of {}, {} bytes, blocks of {}",
            header.file_no, header.file_count, header.file_bytes, header.block_bytes
        );
        return Err(Error::Corruption { path: path.clone(), offset: 0, lsn: Lsn(0), reason });
    }
    Ok(header)
}

/// Whether opening may write: open repairs a torn tail, inspection only reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanMode {
    Repair,
    ReadOnly,
}

/// Opens an existing log and scans it; writes nothing (a torn tail comes
/// back as `scan.repair`, for the opener to apply). An encrypted log's
/// blocks open with `encryption`'s keys; `ScanMode::Repair` (open for
/// writing) needs them exactly when the log is encrypted.
pub(crate) fn open_existing(
    dir: &Path,
    storage: &Arc<dyn Storage>,
    mode: ScanMode,
    encryption: Option<&Encryption>,
) -> Result<Opened> {
    let paths = current_paths(dir, storage)?;
    let handles = open_handles(&paths, storage)?;
    let header = read_header(&handles[0], &paths[0], 0)?;
    let mut files = files_of(handles, paths, &header);
    match (mode, files.encrypted, encryption) {
        (ScanMode::Repair, true, None) => return Err(Error::KeyRequired { path: dir.to_path_buf() }),
        (ScanMode::Repair, false, Some(_)) => return Err(Error::NotEncrypted { path: dir.to_path_buf() }),
        _ => {}
    }
    for index in 0..FILE_COUNT as usize {
        let path = &files.paths[index];
        let other = if index == 0 { header } else { read_header(&files.handles[index], path, index)? };
        if other.log_id != header.log_id {
            return Err(Error::ForeignFile { path: path.clone(), expected: header.log_id, found: other.log_id });
        }
        let len = files.handles[index].size().map_err(|source| Error::io("stat", path, source))?;
        if other.file_bytes != header.file_bytes || len < header.file_bytes {
            let reason = format!("{len} bytes, header says {}, redo.0000 says {}", other.file_bytes, header.file_bytes);
            return Err(Error::MissingFile { path: path.clone(), reason });
        }
    }
    let layout = files.layout;
    let unsynced_ok = header.unsynced_bytes_max % BLOCK_BYTES as u64 == 0
        && header.unsynced_bytes_max <= layout.ring_blocks * BLOCK_BYTES as u64;
    let geometry = header.geometry();
    let oldest_ok = header.oldest_lsn == 0 || Lsn(header.oldest_lsn).is_data_position(geometry);
    if !unsynced_ok || !oldest_ok || !Lsn(header.first_lsn).is_data_position(geometry) {
        let reason = format!(
            "implausible unsynced bound {}, first LSN {} or oldest LSN {}",
            header.unsynced_bytes_max, header.first_lsn, header.oldest_lsn
        );
        return Err(Error::Corruption { path: files.paths[0].clone(), offset: 0, lsn: Lsn(0), reason });
    }
    let (checkpoint, slots) = read_checkpoint(&files.handles[0], &files.paths[0], &header)?;
    if files.encrypted {
        files.opener =
            encryption.map(|keys| Opener::new(keys, header.log_id, checkpoint.keys)).transpose()?.map(Arc::new);
    }
    let files = Arc::new(files);
    // The scan reports; `open_or_create` repairs once its session began (INV-14).
    let scan = scan(&files, &checkpoint, header.unsynced_bytes_max / BLOCK_BYTES as u64)?;
    Ok(Opened { files, checkpoint, scan, header, slots, session: None })
}

/// Whether the resize that left `redo.NNNN.resize` files in `dir` committed:
/// the newest valid slot of `redo.0000` names their size (INV-34).
fn resize_committed(dir: &Path, storage: &Arc<dyn Storage>) -> Result<bool> {
    let path = file_path(dir, 0);
    let handle = open_handles(std::slice::from_ref(&path), storage)?.remove(0);
    let header = read_header(&handle, &path, 0)?;
    let (slot, _) = read_checkpoint(&handle, &path, &header)?;
    Ok(slot.resize_file_bytes != 0)
}

/// The paths of the files that are the log in `dir` now: where a committed
/// resize left a file under its `.resize` name, that one (read-only opens,
/// which do not finish the renames).
fn current_paths(dir: &Path, storage: &Arc<dyn Storage>) -> Result<Vec<PathBuf>> {
    let contents = read_dir_contents(dir, storage)?;
    let committed = contents.resizing.contains(&true) && resize_committed(dir, storage)?;
    Ok((0..FILE_COUNT as usize)
        .map(|index| {
            if committed && contents.resizing[index] {
                dir.join(resize_file_name(index))
            } else {
                file_path(dir, index)
            }
        })
        .collect())
}

/// INV-34 at open: finishes a committed resize's renames (`redo.0000` last,
/// after the others are durable), or removes the files of one that did not
/// commit.
fn settle_resize(dir: &Path, storage: &Arc<dyn Storage>, contents: &DirContents) -> Result<()> {
    if !contents.resizing.contains(&true) {
        return Ok(());
    }
    let sync_dir = || {
        failpoint("resize.settle_sync_dir")
            .and_then(|()| storage.sync_dir(dir))
            .map_err(|source| Error::io("fsync directory", dir, source))
    };
    if contents.present[0] && resize_committed(dir, storage)? {
        finish_resize_renames(dir, storage, contents.resizing)
    } else {
        for index in (0..FILE_COUNT as usize).filter(|&index| contents.resizing[index]) {
            let path = dir.join(resize_file_name(index));
            failpoint("resize.settle_remove")
                .and_then(|()| storage.remove_file(&path))
                .map_err(|source| Error::io("remove", &path, source))?;
        }
        sync_dir()
    }
}

/// Renames the `.resize` files in `pending` over the log's: files 1..3,
/// the directory synced, then `redo.0000`, the directory synced (INV-34: a
/// crash between two renames still finds the committed slot in `redo.0000`).
pub(crate) fn finish_resize_renames(
    dir: &Path,
    storage: &Arc<dyn Storage>,
    pending: [bool; FILE_COUNT as usize],
) -> Result<()> {
    let sync_dir = || {
        failpoint("resize.rename_sync_dir")
            .and_then(|()| storage.sync_dir(dir))
            .map_err(|source| Error::io("fsync directory", dir, source))
    };
    for index in (1..FILE_COUNT as usize).chain(std::iter::once(0)) {
        if pending[index] {
            let (from, to) = (dir.join(resize_file_name(index)), file_path(dir, index));
            failpoint("resize.rename")
                .and_then(|()| storage.rename(&from, &to))
                .map_err(|source| Error::io("rename", &from, source))?;
        }
        if index == FILE_COUNT as usize - 1 || index == 0 {
            sync_dir()?;
        }
    }
    Ok(())
}

/// The valid checkpoint slot with the larger number (INV-15), and both slots.
fn read_checkpoint(
    handle: &Arc<dyn crate::storage::StorageFile>,
    path: &Path,
    header: &FileHeader,
) -> Result<(CheckpointSlot, [Option<CheckpointSlot>; 2])> {
    let mut best: Option<CheckpointSlot> = None;
    let mut slots: [Option<CheckpointSlot>; 2] = [None, None];
    for (index, offset) in CHECKPOINT_SLOT_OFFSETS.into_iter().enumerate() {
        let mut block = [0u8; BLOCK_BYTES];
        handle.read_exact_at(&mut block, offset).map_err(|source| Error::io("read", path, source))?;
        let slot = CheckpointSlot::decode(&block).filter(|slot| slot.log_id == header.log_id);
        if let Some(slot) = &slot {
            if best.as_ref().is_none_or(|best| slot.number > best.number) {
                best = Some(slot.clone());
            }
        }
        slots[index] = slot;
    }
    let corrupt = |reason: String| Error::Corruption {
        path: path.to_path_buf(),
        offset: CHECKPOINT_SLOT_OFFSETS[0],
        lsn: Lsn(0),
        reason,
    };
    let slot = best.ok_or_else(|| corrupt("neither checkpoint slot is valid".into()))?;
    if !Lsn(slot.lsn).is_data_position(header.geometry()) || slot.lsn < header.first_lsn {
        return Err(corrupt(format!("checkpoint LSN {} is not a position of this log", slot.lsn)));
    }
    Ok((slot, slots))
}
