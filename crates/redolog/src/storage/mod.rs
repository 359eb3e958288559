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
pub use crash::{CrashImage, CrashMode, CrashOp, CrashState, CrashStorage, SECTOR_BYTES};
#[cfg(feature = "testkit")]
pub use faulty::{FaultKind, FaultyStorage};
pub use fs::FsStorage;
#[cfg(feature = "testkit")]
pub use mem::MemStorage;

/// A directory tree of files. Paths are those the log builds under its directory.
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
