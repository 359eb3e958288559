//! Hot backup and point-in-time restore ([PAGESTORE §11](crate::docs::pagestore#11-hot-backup-and-point-in-time-restore)): the data
//! file copied page by page while the store runs, the log kept by an
//! archiver from the backup's checkpoint on; a restore copies the pages back
//! and replays the archive onto them up to the LSN asked for, as Percona
//! XtraBackup's `--prepare` applies the redo it copied, and PostgreSQL's
//! recovery replays archived WAL to a `recovery_target_lsn`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redolog::archive::{Archive, Archiver};
use redolog::storage::{FsStorage, Storage, StorageFile};
use redolog::{Log, Lsn};

use crate::datafile::{DataFile, DATA_FILE_NAME};
use crate::page::{PageNo, PAGE_BYTES};
use crate::recovery::{replay_groups, Replayed};
use crate::store::{Options, PageStore};
use crate::{Error, Result};

/// The backup's description, beside its copy of the pages.
pub const BACKUP_META_NAME: &str = "backup.meta";

/// The first line of [`BACKUP_META_NAME`]: what it is and its version.
const META_MAGIC: &str = "redolog-pagestore backup 1";

/// Reads of a page that fails its checksum before the copy gives up: a
/// page cleaner writing the page in place meanwhile tears the read, and the
/// next read sees it whole.
const TORN_READ_RETRIES: u32 = 200;

/// A finished backup: what a restore needs besides the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The log's id: the archive a restore reads must be this log's.
    pub log_id: u128,
    /// The store's checkpoint when the copy began: every change before it
    /// was in the data file, so replay starts here.
    pub start_lsn: Lsn,
    /// The earliest LSN a restore may stop at: the largest page LSN the copy
    /// saw (and at least `start_lsn`). Pages were copied at different times;
    /// only from here on does replay bring every one to the same point.
    pub consistent_lsn: Lsn,
    /// Pages copied.
    pub pages: u64,
}

/// Where a restore stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreTo {
    /// After the last group the archive holds.
    End,
    /// After the last group that ends at or before this LSN.
    Lsn(Lsn),
}

/// What a restore did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The replay of the archive onto the copied pages.
    pub replayed: Replayed,
    /// The restored store's state: every group ending at or before it, none
    /// after. Its new log starts after it.
    pub lsn: Lsn,
}

impl PageStore {
    /// Backs the running store up into `dir` (created with mode 0700; if it
    /// exists it must be empty): copies the data file page by page while
    /// statements, page cleaners and checkpoints go on, then waits until
    /// `archiver` — archiving this store's log (`Archiver::start(store.log(),
    /// ..)`), started before the backup — holds every group up to the
    /// backup's consistent point. The backup and that archive restore the
    /// store to any LSN from [`Backup::consistent_lsn`] to the archive's end
    /// ([`restore`]).
    ///
    /// ```
    /// use redolog::archive::Archiver;
    /// use redolog_pagestore::{restore, Options, PageStore, RestoreTo, Row, C_BYTES, PAD_BYTES};
    /// let dir = tempfile::tempdir().unwrap();
    /// let (mut store, _) = PageStore::open(dir.path().join("store"), Options::default()).unwrap();
    /// let table = store.create_table().unwrap();
    /// let archiver = Archiver::start(store.log(), dir.path().join("archive")).unwrap();
    /// let row = |id| Row { id, k: id, c: [1; C_BYTES], pad: [2; PAD_BYTES] };
    /// store.table(table).insert(&row(1)).unwrap();
    /// store.flush_all().unwrap(); // the backup's consistent point is after the insert
    /// let backup = store.backup(&archiver, dir.path().join("backup")).unwrap();
    /// let (_, second) = store.table(table).insert(&row(2)).unwrap();
    /// archiver.wait(second.unwrap()).unwrap();
    /// let restored =
    ///     restore(dir.path().join("backup"), dir.path().join("archive"), RestoreTo::Lsn(backup.consistent_lsn), dir.path().join("copy"), Options::default())
    ///         .unwrap();
    /// assert!(restored.lsn < second.unwrap());
    /// let (copy, _) = PageStore::open(dir.path().join("copy"), Options::default()).unwrap();
    /// assert_eq!(copy.table(table).scan().unwrap().0, vec![row(1)]);
    /// ```
    pub fn backup(&self, archiver: &Archiver, dir: impl AsRef<Path>) -> Result<Backup> {
        let dir = dir.as_ref();
        let log = self.log();
        let start_lsn = log.checkpoint_lsn();
        // Where the store's files live (the log's storage: the pages and the
        // archive beside it).
        let storage = log.storage();
        let archive = Archive::open_with_storage(archiver.dir(), storage.clone())?;
        if archive.log_id() != log.log_id() || archive.start_lsn() > start_lsn {
            return Err(Error::BadBackup {
                path: archiver.dir().to_path_buf(),
                reason: format!(
                    "the archive must be this log's and start at or before the checkpoint {start_lsn} \
                     (it starts at {})",
                    archive.start_lsn()
                ),
            });
        }
        make_empty_dir(&**storage, dir)?;
        let data = self.pool().data();
        let path = dir.join(DATA_FILE_NAME);
        let io = |source| Error::Io { path: path.clone(), source };
        let file = create_private(&**storage, &path).map_err(io)?;
        let mut highest = start_lsn;
        let mut copied = 0;
        // Until the file stops growing: a page allocated meanwhile is copied
        // too (replay would also make it from its `Init` record).
        while copied < data.pages()? {
            let page = read_whole(data, copied as PageNo)?;
            highest = highest.max(page.lsn());
            file.write_all_at(&[page.bytes()], copied * PAGE_BYTES as u64).map_err(io)?;
            copied += 1;
        }
        file.sync_data().and_then(|()| storage.sync_dir(dir)).map_err(io)?;
        // Every page copied was written after the log was durable to its
        // LSN (PS-1): the archive gets there.
        archiver.wait(highest)?;
        let backup = Backup { log_id: log.log_id(), start_lsn, consistent_lsn: highest, pages: copied };
        write_meta(&**storage, dir, &backup)?;
        Ok(backup)
    }
}

/// Restores the store backed up in `backup` into `into` (created; if it
/// exists it must be empty): copies the pages, replays the groups of the
/// archive in `archive` onto them up to `to`, and creates the restored
/// store's log, which starts after the restored state (so its pages' LSNs
/// stay below every new group's). Then `PageStore::open(into, options)`
/// opens it. A point before the backup's consistent LSN is
/// `RestoreTooEarly`; past the archive's end, `RestorePastArchive`.
pub fn restore(
    backup: impl AsRef<Path>,
    archive: impl AsRef<Path>,
    to: RestoreTo,
    into: impl AsRef<Path>,
    options: Options,
) -> Result<Restored> {
    restore_with_storage(FsStorage, backup.as_ref(), archive.as_ref(), to, into.as_ref(), options)
}

/// [`restore`] on another storage: the backup, the archive and the restored
/// store all on `storage` (a store opened with
/// [`PageStore::open_with_storage`] backs up onto its own).
pub fn restore_with_storage<S: Storage + Clone + 'static>(
    storage: S,
    backup: &Path,
    archive: &Path,
    to: RestoreTo,
    into: &Path,
    options: Options,
) -> Result<Restored> {
    let meta = read_meta_in(&storage, backup)?;
    let archive = Archive::open_with_storage(archive, storage.clone())?;
    if archive.log_id() != meta.log_id || archive.start_lsn() > meta.start_lsn {
        return Err(Error::BadBackup {
            path: backup.to_path_buf(),
            reason: format!(
                "the archive is not this backup's: log {:032x} from {}, the backup needs log {:032x} from {}",
                archive.log_id(),
                archive.start_lsn(),
                meta.log_id,
                meta.start_lsn
            ),
        });
    }
    let archived = archive.verify()?.end;
    let until = match to {
        RestoreTo::Lsn(target) if target < meta.consistent_lsn => {
            return Err(Error::RestoreTooEarly { target, earliest: meta.consistent_lsn })
        }
        RestoreTo::Lsn(target) if target > archived => return Err(Error::RestorePastArchive { target, archived }),
        RestoreTo::Lsn(target) => Some(target),
        RestoreTo::End => None,
    };
    make_empty_dir(&storage, into)?;
    copy_file(&storage, &backup.join(DATA_FILE_NAME), &into.join(DATA_FILE_NAME))?;
    let data = DataFile::open(into, &storage)?;
    let replayed = replay_groups(archive.read_from(archive.start_lsn())?, meta.start_lsn, until, &data)?;
    let lsn = replayed.end_lsn.max(meta.consistent_lsn);
    drop(data);
    let log = Log::create_after_with_storage(&into.join("log"), options.log, storage, lsn)?;
    log.close()?;
    Ok(Restored { replayed, lsn })
}

/// Reads page `no` whole: a read torn by a page cleaner's in-place write
/// (its checksum fails) is read again.
fn read_whole(data: &DataFile, no: PageNo) -> Result<crate::page::Page> {
    let mut tries = 0;
    loop {
        match data.read(no) {
            Err(Error::CorruptPage { .. }) if tries < TORN_READ_RETRIES => {
                tries += 1;
                std::thread::sleep(Duration::from_micros(500));
            }
            other => return other,
        }
    }
}

/// Creates `dir` with mode 0700, or checks that it is empty.
fn make_empty_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let io = |source| Error::Io { path: dir.to_path_buf(), source };
    match storage.list_dir(dir) {
        Ok(entries) if entries.is_empty() => Ok(()),
        Ok(_) => Err(Error::BadBackup { path: dir.to_path_buf(), reason: "the directory is not empty".into() }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            storage.create_dir_all(dir).and_then(|()| storage.set_permissions(dir, 0o700)).map_err(io)
        }
        Err(error) => Err(io(error)),
    }
}

/// Creates the file at `path` (truncating it), readable by its owner only.
fn create_private(storage: &dyn Storage, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
    let file = storage.open_file(path, true)?;
    storage.set_permissions(path, 0o600)?;
    Ok(file)
}

/// Copies the file `from` to `to` (created, mode 0600), synced with its
/// name.
fn copy_file(storage: &dyn Storage, from: &Path, to: &Path) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let source = storage.open_file(from, false).map_err(|source| Error::Io { path: from.to_path_buf(), source })?;
    let io = |source| Error::Io { path: to.to_path_buf(), source };
    let target = create_private(storage, to).map_err(io)?;
    let size = source.size().map_err(|source| Error::Io { path: from.to_path_buf(), source })?;
    let mut buf = vec![0u8; CHUNK.min(size) as usize];
    let mut offset = 0;
    while offset < size {
        let len = CHUNK.min(size - offset) as usize;
        source
            .read_exact_at(&mut buf[..len], offset)
            .map_err(|source| Error::Io { path: from.to_path_buf(), source })?;
        target.write_all_at(&[&buf[..len]], offset).map_err(io)?;
        offset += len as u64;
    }
    let dir = to.parent().unwrap_or(Path::new("."));
    target.sync_data().and_then(|()| storage.sync_dir(dir)).map_err(io)
}

/// The description's text: the magic line, then `name value` lines, then
/// the CRC-32C of everything before it.
fn meta_text(backup: &Backup) -> String {
    let body = format!(
        "{META_MAGIC}\nlog_id {:032x}\nstart_lsn {}\nconsistent_lsn {}\npages {}\n",
        backup.log_id,
        backup.start_lsn.as_u64(),
        backup.consistent_lsn.as_u64(),
        backup.pages
    );
    format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()))
}

/// Writes the description under a temporary name, syncs it and renames it
/// into place: a backup with a description is complete.
fn write_meta(storage: &dyn Storage, dir: &Path, backup: &Backup) -> Result<()> {
    let (temp, path) = (dir.join(format!("{BACKUP_META_NAME}.tmp")), dir.join(BACKUP_META_NAME));
    let io = |source| Error::Io { path: path.clone(), source };
    let file = create_private(storage, &temp).map_err(io)?;
    file.write_all_at(&[meta_text(backup).as_bytes()], 0).and_then(|()| file.sync_data()).map_err(io)?;
    storage.rename(&temp, &path).and_then(|()| storage.sync_dir(dir)).map_err(io)
}

/// Reads and checks the description of the backup in `dir`.
pub fn read_meta(dir: &Path) -> Result<Backup> {
    read_meta_in(&FsStorage, dir)
}

/// Reads the whole file at `path`, as text.
fn read_text(storage: &dyn Storage, path: &Path) -> std::io::Result<String> {
    let file = storage.open_file(path, false)?;
    let mut bytes = vec![0u8; file.size()? as usize];
    file.read_exact_at(&mut bytes, 0)?;
    String::from_utf8(bytes).map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}

/// [`read_meta`] on `storage`.
fn read_meta_in(storage: &dyn Storage, dir: &Path) -> Result<Backup> {
    let path = dir.join(BACKUP_META_NAME);
    let bad = |reason: String| Error::BadBackup { path: path.clone(), reason };
    let text = read_text(storage, &path).map_err(|error| bad(format!("cannot read it: {error}")))?;
    let Some((body, crc_line)) = text.trim_end_matches('\n').rsplit_once('\n') else {
        return Err(bad("it is not a backup description".into()));
    };
    let body = format!("{body}\n");
    let stored = crc_line.strip_prefix("crc32c ").and_then(|hex| u32::from_str_radix(hex, 16).ok());
    if stored != Some(crc32c::crc32c(body.as_bytes())) {
        return Err(bad("its checksum does not match: damaged or not a backup description".into()));
    }
    let mut lines = body.lines();
    if lines.next() != Some(META_MAGIC) {
        return Err(bad(format!("its first line is not {META_MAGIC:?}")));
    }
    let mut field = |name: &str, radix: u32| -> Result<u128> {
        let line = lines.next().unwrap_or_default();
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| u128::from_str_radix(value, radix).ok())
            .ok_or_else(|| bad(format!("expected `{name} <number>`, found {line:?}")))
    };
    let log_id = field("log_id", 16)?;
    let start_lsn = Lsn::from_u64(field("start_lsn", 10)? as u64);
    let consistent_lsn = Lsn::from_u64(field("consistent_lsn", 10)? as u64);
    let pages = field("pages", 10)? as u64;
    Ok(Backup { log_id, start_lsn, consistent_lsn, pages })
}
