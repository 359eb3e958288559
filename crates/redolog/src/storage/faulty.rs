//! Fault-injecting storage.
//!
//! Fault model: wraps another storage and fails chosen operations with an I/O
//! error, either the k-th operation of a kind once, or every operation of that
//! kind from the k-th on (persistent). A failed operation has no effect on the
//! wrapped storage. Nothing else is faked: successful operations behave exactly
//! like the wrapped storage.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Storage, StorageFile};

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
    /// Counts one operation of `kind`; `Err` if it is to fail.
    fn check(&self, kind: FaultKind) -> io::Result<()> {
        if kind != self.kind {
            return Ok(());
        }
        let index = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        let fail = if self.persistent { index >= self.nth } else { index == self.nth };
        if fail {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::other(format!("injected {kind:?} fault (operation {index})")));
        }
        Ok(())
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
        self.plan.check(FaultKind::SyncDir)?;
        self.inner.sync_dir(dir)
    }
}

impl StorageFile for FaultyFile {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.plan.check(FaultKind::Read)?;
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.plan.check(FaultKind::Write)?;
        self.inner.write_all_at(bufs, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.plan.check(FaultKind::Sync)?;
        self.inner.sync_data()
    }
}
