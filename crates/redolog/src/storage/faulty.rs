//! Fault-injecting storage.
//!
//! Fault model: wraps another storage and fails chosen operations with an I/O
//! error, either the k-th operation of a kind once, or every operation of that
//! kind from the k-th on (persistent). A failed operation has no effect on the
//! wrapped storage, except a short write, which writes the first half of its
//! sectors before it fails (a write torn by ENOSPC or EIO part-way; whole
//! sectors, the medium assumption of [DESIGN §5](crate::docs::design#5-assumptions-about-the-storage-medium): the kernel copies a
//! write into the page cache page by page, and the log's writes are
//! sector-aligned). A full
//! device fails with `ENOSPC` (`io::ErrorKind::StorageFull`), every other fault
//! with a plain I/O error. Nothing else is faked: successful operations behave
//! exactly like the wrapped storage.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Storage, StorageFile, SECTOR_BYTES};

/// Which operations a [`FaultyStorage`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `write_all_at` on a file.
    Write,
    /// `sync_data` on a file.
    Sync,
    /// `sync_dir`.
    SyncDir,
    /// `read_exact_at` on a file.
    Read,
    /// `write_all_at` on a file, failing with `ENOSPC` (counts writes).
    NoSpace,
    /// `write_all_at` on a file, writing the first half of the whole sectors
    /// and then failing (counts writes).
    ShortWrite,
}

impl FaultKind {
    /// The operation a fault of this kind hits.
    fn operation(self) -> FaultKind {
        match self {
            FaultKind::NoSpace | FaultKind::ShortWrite => FaultKind::Write,
            kind => kind,
        }
    }
}

/// Storage that fails the `nth` operation of one kind (counting from 1).
///
/// ```
/// use std::path::Path;
/// use redolog::storage::{FaultKind, FaultyStorage, MemStorage, Storage};
/// let storage = FaultyStorage::new(MemStorage::new(), FaultKind::Sync, 2, false);
/// let file = storage.open_file(Path::new("f"), true).unwrap();
/// file.sync_data().unwrap();
/// assert!(file.sync_data().is_err());
/// file.sync_data().unwrap(); // failed once only
/// assert_eq!(storage.injected(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct FaultyStorage<S> {
    inner: S,
    plan: Arc<FaultPlan>,
}

#[derive(Debug)]
struct FaultPlan {
    kind: FaultKind,
    nth: u64,
    persistent: bool,
    seen: AtomicU64,
    injected: AtomicU64,
}

impl FaultPlan {
    /// Counts one `operation`; the error to fail it with, if it is to fail.
    fn check(&self, operation: FaultKind) -> Option<io::Error> {
        if operation != self.kind.operation() {
            return None;
        }
        let index = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        let fail = if self.persistent { index >= self.nth } else { index == self.nth };
        if !fail {
            return None;
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(match self.kind {
            FaultKind::NoSpace => io::Error::from(rustix::io::Errno::NOSPC),
            kind => io::Error::other(format!("injected {kind:?} fault (operation {index})")),
        })
    }

    /// Counts one `operation`; `Err` if it is to fail.
    fn pass(&self, operation: FaultKind) -> io::Result<()> {
        self.check(operation).map_or(Ok(()), Err)
    }
}

impl<S: Storage> FaultyStorage<S> {
    /// Wraps `inner`, failing the `nth` operation of `kind` (and all later ones if
    /// `persistent`).
    pub fn new(inner: S, kind: FaultKind, nth: u64, persistent: bool) -> Self {
        let plan = FaultPlan { kind, nth, persistent, seen: AtomicU64::new(0), injected: AtomicU64::new(0) };
        FaultyStorage { inner, plan: Arc::new(plan) }
    }

    /// How many faults were injected so far.
    pub fn injected(&self) -> u64 {
        self.plan.injected.load(Ordering::Relaxed)
    }

    /// How many operations of the chosen kind were attempted so far.
    pub fn attempted(&self) -> u64 {
        self.plan.seen.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: Arc<dyn StorageFile>,
    plan: Arc<FaultPlan>,
}

impl<S: Storage> Storage for FaultyStorage<S> {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(dir)
    }

    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open_file(path, create)?;
        Ok(Arc::new(FaultyFile { inner, plan: self.plan.clone() }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.plan.pass(FaultKind::SyncDir)?;
        self.inner.sync_dir(dir)
    }
}

impl StorageFile for FaultyFile {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.plan.pass(FaultKind::Read)?;
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let Some(error) = self.plan.check(FaultKind::Write) else {
            return self.inner.write_all_at(bufs, offset);
        };
        if self.plan.kind == FaultKind::ShortWrite {
            let bytes: Vec<u8> = bufs.concat();
            let sector = SECTOR_BYTES as usize;
            let landed = bytes.len() / 2 / sector * sector;
            self.inner.write_all_at(&[&bytes[..landed]], offset)?;
        }
        Err(error)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.plan.pass(FaultKind::Sync)?;
        self.inner.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStorage;

    const SECTOR: usize = SECTOR_BYTES as usize;

    #[test]
    fn a_short_write_lands_half_its_sectors_then_fails() {
        let memory = MemStorage::new();
        let storage = FaultyStorage::new(memory.clone(), FaultKind::ShortWrite, 1, false);
        let file = storage.open_file(Path::new("f"), true).expect("create");
        let (first, rest) = (vec![1u8; SECTOR + 100], vec![2u8; 2 * SECTOR]);
        assert!(file.write_all_at(&[&first, &rest], 0).is_err());
        let landed = memory.open_file(Path::new("f"), false).expect("open");
        assert_eq!(landed.size().expect("size"), SECTOR_BYTES, "one whole sector of 3.2");
        let mut bytes = vec![0u8; SECTOR];
        landed.read_exact_at(&mut bytes, 0).expect("read");
        assert_eq!(bytes, vec![1u8; SECTOR]);
    }

    #[test]
    fn a_full_device_fails_with_enospc() {
        let storage = FaultyStorage::new(MemStorage::new(), FaultKind::NoSpace, 2, true);
        let file = storage.open_file(Path::new("f"), true).expect("create");
        file.write_all_at(&[b"ok"], 0).expect("first write");
        for _ in 0..2 {
            let error = file.write_all_at(&[b"no"], 2).expect_err("device full");
            assert_eq!(error.kind(), io::ErrorKind::StorageFull, "{error}");
        }
        file.sync_data().expect("syncs are not faulted");
        assert_eq!(file.size().expect("size"), 2);
    }
}
