//! In-memory storage.
//!
//! Fault model: none. Every write is immediately durable and visible; `sync_data`
//! and `sync_dir` do nothing. Use it for logic tests and for measuring the CPU path.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Storage, StorageFile};

/// Files held in memory; clones share the same files.
///
/// ```
/// use std::path::Path;
/// use redolog::{Config, Durability, Log};
/// use redolog::storage::MemStorage;
/// let storage = MemStorage::new();
/// let config = Config::default().with_capacity_bytes(1 << 20).with_buffer_bytes(64 << 10);
/// let (log, _) = Log::open_with_storage(Path::new("/log"), config.clone(), storage.clone()).unwrap();
/// log.commit(b"kept in memory", Durability::Synced).unwrap();
/// log.close().unwrap();
/// let (_, recovery) = Log::open_with_storage(Path::new("/log"), config, storage).unwrap();
/// assert_eq!(recovery.count(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    inner: Arc<Mutex<MemTree>>,
}

#[derive(Debug, Default)]
struct MemTree {
    dirs: BTreeSet<PathBuf>,
    files: BTreeMap<PathBuf, Arc<MemFile>>,
}

#[derive(Debug, Default)]
struct MemFile {
    data: Mutex<Vec<u8>>,
}

impl MemStorage {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }
}

pub(super) fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

/// The names of the entries of `dir` among `paths` (sorted if `paths` is).
pub(super) fn names_in<'a>(dir: &Path, paths: impl Iterator<Item = &'a PathBuf>) -> Vec<String> {
    paths
        .filter(|path| path.parent() == Some(dir))
        .filter_map(|path| path.file_name().map(|name| name.to_string_lossy().into_owned()))
        .collect()
}

/// `read_exact_at` on bytes in memory.
pub(super) fn read_at(data: &[u8], buf: &mut [u8], offset: u64) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
    let end = start.checked_add(buf.len()).filter(|&end| end <= data.len());
    let Some(end) = end else {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"));
    };
    buf.copy_from_slice(&data[start..end]);
    Ok(())
}

/// Writes `bytes` at `offset`, growing `data` with zeros if needed.
pub(super) fn write_at(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    let end = start + bytes.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(bytes);
}

impl Storage for MemStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut tree = self.inner.lock();
        for ancestor in dir.ancestors() {
            tree.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let tree = self.inner.lock();
        if !tree.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(names_in(dir, tree.files.keys()))
    }

    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut tree = self.inner.lock();
        if create {
            let file = Arc::new(MemFile::default());
            tree.files.insert(path.to_path_buf(), file.clone());
            return Ok(file);
        }
        match tree.files.get(path) {
            Some(file) => Ok(file.clone()),
            None => Err(not_found(path)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut tree = self.inner.lock();
        let file = tree.files.remove(from).ok_or_else(|| not_found(from))?;
        tree.files.insert(to.to_path_buf(), file);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.inner.lock();
        tree.files.remove(path).map(|_| ()).ok_or_else(|| not_found(path))
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
}

impl StorageFile for MemFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.data.lock().len() as u64)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_at(&self.data.lock(), buf, offset)
    }

    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut data = self.data.lock();
        let mut position = offset;
        for buf in bufs {
            write_at(&mut data, position, buf);
            position += buf.len() as u64;
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}
