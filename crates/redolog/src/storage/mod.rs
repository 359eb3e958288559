//! All file I/O goes through [`Storage`], so tests can substitute in-memory and
//! fault-injecting implementations for the real file system.
//!
//! Implementations: [`FsStorage`] (the default: real files, `pwritev`,
//! `fdatasync`), and behind the cargo feature `testkit`, for the tests of
//! redolog and of engines built on it: `MemStorage` (in memory),
//! `FaultyStorage` (fails chosen operations, for poisoning tests) and
//! `CrashStorage` (records every operation and builds the images a crash after
//! any prefix of them can leave). Each documents its fault model at the top.

#[cfg(feature = "testkit")]
mod crash;
#[cfg(feature = "testkit")]
mod faulty;
mod fs;
#[cfg(feature = "testkit")]
mod mem;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub use crash::{CrashImage, CrashMode, CrashOp, CrashState, CrashStorage, SECTOR_BYTES};
#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub use faulty::{FaultKind, FaultyStorage};
pub use fs::{FsStorage, LOCK_FILE_NAME};
#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub use mem::MemStorage;

/// A directory tree of files. Paths are those the log builds under its directory.
///
/// The log's I/O seam: implement it to run an engine's tests on a storage of
/// your own (a wrapper that delays a sync, fails the n-th write, records what
/// reached the disk), as the `testkit` storages do. A method added in a later
/// version comes with a default, so an implementation keeps compiling; the
/// six without one are what any file system answers.
///
/// ```
/// use std::path::Path;
/// use redolog::storage::{MemStorage, Storage};
/// let storage = MemStorage::new();
/// storage.create_dir_all(Path::new("/log")).unwrap();
/// let file = storage.open_file(Path::new("/log/a"), true).unwrap();
/// file.write_all_at(&[b"hello"], 0).unwrap();
/// let mut back = [0u8; 5];
/// file.read_exact_at(&mut back, 0).unwrap();
/// assert_eq!(&back, b"hello");
/// assert_eq!(storage.list_dir(Path::new("/log")).unwrap(), vec!["a".to_string()]);
/// ```
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries in `dir`, sorted.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens `path` for reading and writing; with `create`, creates it or
    /// truncates it to length 0.
    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file at `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of `dir` (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes the exclusive lock of the log directory `dir` ([DESIGN](crate::docs::design)
    /// INV-19), without blocking: `Acquired` holds it until dropped, `Held`
    /// says another holder has it. The default takes nothing and always
    /// succeeds: for storages no other process can see.
    fn lock_dir(&self, dir: &Path) -> io::Result<DirLock> {
        let _ = dir;
        Ok(DirLock::Acquired(LockHandle::new(())))
    }
    /// Whether another holder has `dir`'s lock, and its process id if known,
    /// without taking the lock or changing anything (the read-only tools).
    fn lock_holder(&self, dir: &Path) -> io::Result<Option<Option<u32>>> {
        let _ = dir;
        Ok(None)
    }
    /// The permission bits of `path` (`st_mode & 0o7777`, not following a
    /// symlink), if the storage has any; `None` by default.
    fn permissions(&self, path: &Path) -> io::Result<Option<u32>> {
        let _ = path;
        Ok(None)
    }
    /// Sets the permission bits of `path`; nothing by default.
    fn set_permissions(&self, path: &Path, mode: u32) -> io::Result<()> {
        let _ = (path, mode);
        Ok(())
    }
}

/// A shared storage is the storage it shares: what holds an
/// `Arc<dyn Storage>` (a page store beside its log, an archive on the log's
/// storage) hands it on where a `Storage` is asked for.
impl<S: Storage + ?Sized> Storage for Arc<S> {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        (**self).create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        (**self).list_dir(dir)
    }
    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        (**self).open_file(path, create)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        (**self).rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        (**self).remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        (**self).sync_dir(dir)
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<DirLock> {
        (**self).lock_dir(dir)
    }
    fn lock_holder(&self, dir: &Path) -> io::Result<Option<Option<u32>>> {
        (**self).lock_holder(dir)
    }
    fn permissions(&self, path: &Path) -> io::Result<Option<u32>> {
        (**self).permissions(path)
    }
    fn set_permissions(&self, path: &Path, mode: u32) -> io::Result<()> {
        (**self).set_permissions(path, mode)
    }
}

/// The outcome of [`Storage::lock_dir`].
#[derive(Debug)]
pub enum DirLock {
    /// The lock is ours until the handle is dropped.
    Acquired(LockHandle),
    /// Another holder has it; its process id, if it wrote one.
    Held {
        /// The holder's process id.
        pid: Option<u32>,
    },
}

/// A held directory lock: released when dropped (for files, by closing the
/// locked descriptor).
///
/// ```
/// use redolog::storage::{DirLock, LockHandle};
/// // A storage no other process sees holds nothing: its lock is a unit.
/// let lock = DirLock::Acquired(LockHandle::new(()));
/// # drop(lock);
/// ```
pub struct LockHandle(#[allow(dead_code)] /* held, never read: its drop releases */ Box<dyn Send + Sync>);

impl LockHandle {
    /// A lock held while `holder` lives: whatever releases the lock when
    /// dropped (a locked file, a guard), or `()` for none.
    pub fn new(holder: impl Send + Sync + 'static) -> Self {
        LockHandle(Box::new(holder))
    }
}

impl fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockHandle")
    }
}

/// An open file.
///
/// ```
/// use std::path::Path;
/// use redolog::storage::{MemStorage, Storage};
/// let storage = MemStorage::new();
/// let file = storage.open_file(Path::new("f"), true).unwrap();
/// file.write_all_at(&[b"ab", b"cd"], 4).unwrap();
/// assert_eq!(file.size().unwrap(), 8);
/// file.sync_data().unwrap();
/// ```
pub trait StorageFile: Send + Sync + fmt::Debug {
    /// Current length in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an
    /// `UnexpectedEof` error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes the concatenation of `bufs` at `offset`, looping over short writes.
    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()>;
    /// fdatasync: makes the file's data (and the metadata needed to read it) durable.
    fn sync_data(&self) -> io::Result<()>;
}
