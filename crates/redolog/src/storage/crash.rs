//! Crash-image storage: records every storage operation and builds the images a
//! crash after any prefix of them could leave on disk.
//!
//! Fault model (a disk with a volatile write cache, a file system that journals
//! names in order; docs/RELIABILITY.md):
//! - **File data** is volatile until `sync_data` of that file returns. On a
//!   crash each file keeps its synced bytes plus, by [`CrashMode`], none, all, or
//!   a random prefix or random subset of its unsynced writes, cut into 512-byte
//!   sectors and applied in random order. Where an unsynced write extended the
//!   file and its sectors were not kept, the file may keep the new length with
//!   zeros or garbage in it (the size persisted without the data), or not.
//! - **Names** (create, rename, remove) are volatile until `sync_dir` of their
//!   directory. On a crash a prefix, in program order, of the unsynced name
//!   operations survives: none with [`CrashMode::DropUnsynced`], all with
//!   [`CrashMode::KeepAll`], a random one otherwise. A file whose name was lost
//!   is gone; a rename that was lost leaves the target's previous file.
//! - Not modelled: directories themselves (`create_dir_all` is durable at
//!   once), I/O errors (see [`FaultyStorage`](super::FaultyStorage)), a sector
//!   written in part.
//!
//! Operations are serialised by one lock, so the recorded trace of a
//! concurrent workload is the order in which they took effect.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::mem::{names_in, not_found, read_at, write_at};
use super::{MemStorage, Storage, StorageFile};

/// The unit in which unsynced writes reach the disk, or do not.
pub const SECTOR_BYTES: u64 = 512;

/// One recorded storage operation. Files are numbered by creation (`inode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrashOp {
    /// `open_file(path, create = true)`: a new empty file named `path`.
    Create {
        /// The name.
        path: PathBuf,
        /// The new file's number.
        inode: usize,
    },
    /// `write_all_at` of `len` bytes at `offset` of file `inode`.
    Write {
        /// The file.
        inode: usize,
        /// Byte offset.
        offset: u64,
        /// Bytes written.
        len: usize,
    },
    /// `sync_data` of file `inode`.
    SyncData {
        /// The file.
        inode: usize,
    },
    /// `rename(from, to)`.
    Rename {
        /// The old name.
        from: PathBuf,
        /// The new name, replaced if it exists.
        to: PathBuf,
    },
    /// `remove_file(path)`.
    Remove {
        /// The name removed.
        path: PathBuf,
    },
    /// `sync_dir(dir)`.
    SyncDir {
        /// The directory.
        dir: PathBuf,
    },
}

/// What survives a crash (see the module's fault model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Only what was synced: a power loss with nothing of the cache written.
    DropUnsynced,
    /// Everything: a process crash, where the page cache survives.
    KeepAll,
    /// A power loss with part of the cache written, chosen by the seed: per file
    /// a prefix or a subset of the unsynced sectors in any order, zeros or
    /// garbage where extended, a prefix of the unsynced name operations.
    Random(u64),
}

/// The files a crash left: their names and bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashImage {
    /// Directories.
    pub dirs: BTreeSet<PathBuf>,
    /// Every file that survived, by path.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
}

impl CrashImage {
    /// The image as in-memory storage, to reopen a log from.
    pub fn to_storage(&self) -> MemStorage {
        let storage = MemStorage::new();
        self.fill(&storage);
        storage
    }

    /// The image as the durable starting state of a new recording: to crash
    /// again, e.g. during recovery.
    pub fn to_recording(&self) -> CrashStorage {
        let mut state = CrashState::default();
        state.dirs.clone_from(&self.dirs);
        for (path, bytes) in &self.files {
            let inode = state.inodes.len();
            state.inodes.push(Inode { durable: bytes.clone(), current: bytes.clone(), pending: Vec::new() });
            state.names.insert(path.clone(), inode);
        }
        state.durable_names.clone_from(&state.names);
        let recorder = Recorder { initial: state.clone(), state, trace: Vec::new(), written: Vec::new() };
        CrashStorage { shared: Arc::new(Mutex::new(recorder)) }
    }

    fn fill(&self, storage: &MemStorage) {
        let fill = || -> io::Result<()> {
            for dir in &self.dirs {
                storage.create_dir_all(dir)?;
            }
            for (path, bytes) in &self.files {
                storage.open_file(path, true)?.write_all_at(&[bytes], 0)?;
            }
            Ok(())
        };
        #[allow(clippy::expect_used)] // MemStorage has no failure to report
        fill().expect("in-memory storage does not fail");
    }
}

#[derive(Clone, Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    current: Vec<u8>,
    /// Unsynced writes, in order: offset and bytes.
    pending: Vec<(u64, Vec<u8>)>,
}

#[derive(Clone, Debug)]
enum NameOp {
    Link { path: PathBuf, inode: usize },
    Rename { from: PathBuf, to: PathBuf },
    Unlink { path: PathBuf },
}

impl NameOp {
    fn dir(&self) -> Option<&Path> {
        match self {
            NameOp::Link { path, .. } | NameOp::Unlink { path } => path.parent(),
            NameOp::Rename { to, .. } => to.parent(),
        }
    }

    fn apply(&self, names: &mut BTreeMap<PathBuf, usize>) {
        match self {
            NameOp::Link { path, inode } => {
                names.insert(path.clone(), *inode);
            }
            NameOp::Rename { from, to } => {
                if let Some(inode) = names.remove(from) {
                    names.insert(to.clone(), inode);
                }
            }
            NameOp::Unlink { path } => {
                names.remove(path);
            }
        }
    }
}

/// The storage after some prefix of a recorded trace: what is durable and what
/// is still volatile. [`CrashState::crash`] builds what a crash leaves.
#[derive(Clone, Debug, Default)]
pub struct CrashState {
    inodes: Vec<Inode>,
    dirs: BTreeSet<PathBuf>,
    /// The names as the running program sees them.
    names: BTreeMap<PathBuf, usize>,
    /// The names a crash keeps for sure.
    durable_names: BTreeMap<PathBuf, usize>,
    /// Name operations not yet made durable by a `sync_dir`, in order.
    pending_names: Vec<NameOp>,
}

impl CrashState {
    /// Unsynced writes, over all files: 0 means a crash now loses nothing.
    pub fn unsynced_writes(&self) -> usize {
        self.inodes.iter().map(|inode| inode.pending.len()).sum::<usize>() + self.pending_names.len()
    }

    fn apply(&mut self, op: &CrashOp, bytes: &[u8]) {
        match op {
            CrashOp::Create { path, inode } => {
                debug_assert_eq!(*inode, self.inodes.len());
                self.inodes.push(Inode::default());
                self.link(NameOp::Link { path: path.clone(), inode: *inode });
            }
            CrashOp::Write { inode, offset, .. } => {
                let file = &mut self.inodes[*inode];
                write_at(&mut file.current, *offset, bytes);
                file.pending.push((*offset, bytes.to_vec()));
            }
            CrashOp::SyncData { inode } => {
                let file = &mut self.inodes[*inode];
                file.durable.clone_from(&file.current);
                file.pending.clear();
            }
            CrashOp::Rename { from, to } => self.link(NameOp::Rename { from: from.clone(), to: to.clone() }),
            CrashOp::Remove { path } => self.link(NameOp::Unlink { path: path.clone() }),
            CrashOp::SyncDir { dir } => {
                let (synced, pending): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut self.pending_names).into_iter().partition(|op| op.dir() == Some(dir));
                for op in &synced {
                    op.apply(&mut self.durable_names);
                }
                self.pending_names = pending;
            }
        }
    }

    fn link(&mut self, op: NameOp) {
        op.apply(&mut self.names);
        self.pending_names.push(op);
    }

    /// The files a crash in this state leaves, as `mode` decides.
    ///
    /// ```
    /// use std::path::Path;
    /// use redolog::storage::{CrashMode, CrashStorage, Storage};
    /// let storage = CrashStorage::new();
    /// storage.create_dir_all(Path::new("/d")).unwrap();
    /// let file = storage.open_file(Path::new("/d/f"), true).unwrap();
    /// file.write_all_at(&[b"synced"], 0).unwrap();
    /// file.sync_data().unwrap();
    /// storage.sync_dir(Path::new("/d")).unwrap();
    /// file.write_all_at(&[b"lost"], 0).unwrap();
    /// let image = storage.state().crash(CrashMode::DropUnsynced);
    /// assert_eq!(image.files[Path::new("/d/f")], b"synced");
    /// let image = storage.state().crash(CrashMode::KeepAll);
    /// assert_eq!(image.files[Path::new("/d/f")], b"losted");
    /// ```
    pub fn crash(&self, mode: CrashMode) -> CrashImage {
        let mut rng = match mode {
            CrashMode::Random(seed) => fastrand::Rng::with_seed(seed),
            _ => fastrand::Rng::with_seed(0),
        };
        let mut names = self.durable_names.clone();
        let kept_names = match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::KeepAll => self.pending_names.len(),
            CrashMode::Random(_) => rng.usize(0..=self.pending_names.len()),
        };
        for op in &self.pending_names[..kept_names] {
            op.apply(&mut names);
        }
        let files = names
            .into_iter()
            .map(|(path, inode)| {
                let file = &self.inodes[inode];
                let bytes = match mode {
                    CrashMode::DropUnsynced => file.durable.clone(),
                    CrashMode::KeepAll => file.current.clone(),
                    CrashMode::Random(_) => torn_image(file, &mut rng),
                };
                (path, bytes)
            })
            .collect();
        CrashImage { dirs: self.dirs.clone(), files }
    }
}

/// A file's content after a crash that wrote part of its unsynced sectors.
fn torn_image(file: &Inode, rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut sectors: Vec<(u64, &[u8])> = Vec::new();
    for (offset, bytes) in &file.pending {
        let mut at = 0usize;
        while at < bytes.len() {
            let position = offset + at as u64;
            let len = ((SECTOR_BYTES - position % SECTOR_BYTES) as usize).min(bytes.len() - at);
            sectors.push((position, &bytes[at..at + len]));
            at += len;
        }
    }
    let kept: Vec<(u64, &[u8])> = if rng.bool() {
        // The cache wrote back in order and stopped.
        let count = rng.usize(0..=sectors.len());
        sectors.truncate(count);
        sectors
    } else {
        // Any subset, in any order (an overlapping later write may land first).
        let mut kept: Vec<_> = sectors.into_iter().filter(|_| rng.bool()).collect();
        rng.shuffle(&mut kept);
        kept
    };
    let mut data = file.durable.clone();
    if file.current.len() > data.len() {
        // The size may have persisted without the data: zeros or garbage.
        match rng.u8(0..3) {
            0 => data.resize(file.current.len(), 0),
            1 => data.extend((data.len()..file.current.len()).map(|_| rng.u8(..))),
            _ => {}
        }
    }
    for (offset, bytes) in kept {
        write_at(&mut data, offset, bytes);
    }
    data
}

#[derive(Debug)]
struct Recorder {
    initial: CrashState,
    state: CrashState,
    trace: Vec<CrashOp>,
    /// The bytes of each `Write` in `trace`, by index (empty for other ops).
    written: Vec<Vec<u8>>,
}

/// Storage that records every operation and keeps durable and volatile state
/// apart, to build the image a crash after any prefix of the operations leaves.
///
/// ```
/// use std::path::Path;
/// use redolog::{Config, Durability, Log};
/// use redolog::storage::{CrashMode, CrashStorage};
/// let storage = CrashStorage::new();
/// let config = Config::default().with_capacity_bytes(1 << 20).with_buffer_bytes(64 << 10);
/// let (log, _) = Log::open_with_storage(Path::new("/log"), config.clone(), storage.clone()).unwrap();
/// log.commit(b"acknowledged", Durability::Synced).unwrap();
/// // Every state the trace passed through, and a power loss in each.
/// let mut states = 0;
/// storage.replay(|_ops, state| {
///     let image = state.crash(CrashMode::DropUnsynced);
///     states += 1;
/// });
/// assert_eq!(states, storage.op_count() + 1);
/// drop(log);
/// ```
#[derive(Clone, Debug)]
pub struct CrashStorage {
    shared: Arc<Mutex<Recorder>>,
}

impl Default for CrashStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl CrashStorage {
    /// An empty disk.
    pub fn new() -> Self {
        let recorder = Recorder {
            initial: CrashState::default(),
            state: CrashState::default(),
            trace: Vec::new(),
            written: Vec::new(),
        };
        CrashStorage { shared: Arc::new(Mutex::new(recorder)) }
    }

    /// Operations recorded so far.
    pub fn op_count(&self) -> usize {
        self.shared.lock().trace.len()
    }

    /// The recorded operations.
    pub fn trace(&self) -> Vec<CrashOp> {
        self.shared.lock().trace.clone()
    }

    /// The state now (after every recorded operation).
    pub fn state(&self) -> CrashState {
        self.shared.lock().state.clone()
    }

    /// Calls `visit(n, state)` with the state after the first `n` operations, for
    /// every `n` from 0 to [`op_count`](Self::op_count).
    pub fn replay(&self, mut visit: impl FnMut(usize, &CrashState)) {
        let (mut state, trace, written) = {
            let recorder = self.shared.lock();
            (recorder.initial.clone(), recorder.trace.clone(), recorder.written.clone())
        };
        visit(0, &state);
        for (index, op) in trace.iter().enumerate() {
            state.apply(op, &written[index]);
            visit(index + 1, &state);
        }
    }

    fn record(&self, op: CrashOp, bytes: Vec<u8>) {
        #[allow(clippy::expect_used)] // the closure returns Ok
        self.record_with(|_| Ok(op), bytes).map(|_| ()).expect("infallible");
    }

    /// Records the operation `make` builds from the state, under one lock (so
    /// concurrent callers see and number files consistently); returns it.
    fn record_with(
        &self,
        make: impl FnOnce(&CrashState) -> io::Result<CrashOp>,
        bytes: Vec<u8>,
    ) -> io::Result<CrashOp> {
        let mut recorder = self.shared.lock();
        let op = make(&recorder.state)?;
        recorder.state.apply(&op, &bytes);
        recorder.trace.push(op.clone());
        recorder.written.push(bytes);
        Ok(op)
    }
}

impl Storage for CrashStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut recorder = self.shared.lock();
        for ancestor in dir.ancestors() {
            recorder.state.dirs.insert(ancestor.to_path_buf());
            recorder.initial.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let recorder = self.shared.lock();
        if !recorder.state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(names_in(dir, recorder.state.names.keys()))
    }

    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inode = if create {
            let create =
                |state: &CrashState| Ok(CrashOp::Create { path: path.to_path_buf(), inode: state.inodes.len() });
            match self.record_with(create, Vec::new())? {
                CrashOp::Create { inode, .. } => inode,
                _ => unreachable!("record_with returns the operation built"),
            }
        } else {
            let recorder = self.shared.lock();
            *recorder.state.names.get(path).ok_or_else(|| not_found(path))?
        };
        Ok(Arc::new(CrashFile { storage: self.clone(), inode }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let rename = |state: &CrashState| match state.names.contains_key(from) {
            true => Ok(CrashOp::Rename { from: from.to_path_buf(), to: to.to_path_buf() }),
            false => Err(not_found(from)),
        };
        self.record_with(rename, Vec::new()).map(|_| ())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let remove = |state: &CrashState| match state.names.contains_key(path) {
            true => Ok(CrashOp::Remove { path: path.to_path_buf() }),
            false => Err(not_found(path)),
        };
        self.record_with(remove, Vec::new()).map(|_| ())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.record(CrashOp::SyncDir { dir: dir.to_path_buf() }, Vec::new());
        Ok(())
    }
}

#[derive(Debug)]
struct CrashFile {
    storage: CrashStorage,
    inode: usize,
}

impl StorageFile for CrashFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.storage.shared.lock().state.inodes[self.inode].current.len() as u64)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_at(&self.storage.shared.lock().state.inodes[self.inode].current, buf, offset)
    }

    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let bytes = bufs.concat();
        self.storage.record(CrashOp::Write { inode: self.inode, offset, len: bytes.len() }, bytes);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.storage.record(CrashOp::SyncData { inode: self.inode }, Vec::new());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk() -> (CrashStorage, Arc<dyn StorageFile>) {
        let storage = CrashStorage::new();
        storage.create_dir_all(Path::new("/d")).expect("dir");
        let file = storage.open_file(Path::new("/d/f"), true).expect("create");
        (storage, file)
    }

    #[test]
    fn an_unsynced_name_is_lost_and_a_synced_one_kept() {
        let (storage, file) = disk();
        file.write_all_at(&[b"data"], 0).expect("write");
        file.sync_data().expect("sync");
        assert!(storage.state().crash(CrashMode::DropUnsynced).files.is_empty(), "name not synced");
        storage.sync_dir(Path::new("/d")).expect("sync dir");
        assert_eq!(storage.state().crash(CrashMode::DropUnsynced).files[Path::new("/d/f")], b"data");
    }

    #[test]
    fn a_lost_rename_leaves_the_previous_target() {
        let (storage, file) = disk();
        file.write_all_at(&[b"old"], 0).expect("write");
        file.sync_data().expect("sync");
        let new = storage.open_file(Path::new("/d/f.tmp"), true).expect("create");
        new.write_all_at(&[b"new"], 0).expect("write");
        new.sync_data().expect("sync");
        storage.sync_dir(Path::new("/d")).expect("sync dir");
        storage.rename(Path::new("/d/f.tmp"), Path::new("/d/f")).expect("rename");
        let lost = storage.state().crash(CrashMode::DropUnsynced);
        assert_eq!(lost.files[Path::new("/d/f")], b"old");
        assert_eq!(lost.files[Path::new("/d/f.tmp")], b"new");
        let kept = storage.state().crash(CrashMode::KeepAll);
        assert_eq!(kept.files[Path::new("/d/f")], b"new");
        assert!(!kept.files.contains_key(Path::new("/d/f.tmp")));
    }

    #[test]
    fn random_crashes_keep_synced_bytes_and_only_written_sectors() {
        let (storage, file) = disk();
        storage.sync_dir(Path::new("/d")).expect("sync dir");
        file.write_all_at(&[&[1u8; 1024]], 0).expect("write");
        file.sync_data().expect("sync");
        file.write_all_at(&[&[2u8; 1536]], 512).expect("write");
        let state = storage.state();
        let (mut sizes, mut middles) = (BTreeSet::new(), BTreeSet::new());
        for seed in 0..200 {
            let image = &state.crash(CrashMode::Random(seed)).files[Path::new("/d/f")];
            assert_eq!(&image[..512], &[1u8; 512], "synced sector changed (seed {seed})");
            // Inside the synced size a sector is wholly old or wholly new.
            let middle = &image[512..1024];
            assert!(middle == [1u8; 512] || middle == [2u8; 512], "torn sector (seed {seed})");
            middles.insert(middle[0]);
            sizes.insert(image.len());
        }
        assert_eq!(middles, BTreeSet::from([1, 2]), "unsynced sectors sometimes land, sometimes not");
        assert!(sizes.contains(&1024) && sizes.contains(&2048), "the size sometimes persists: {sizes:?}");
    }

    #[test]
    fn replay_visits_every_prefix() {
        let (storage, file) = disk();
        file.write_all_at(&[b"a"], 0).expect("write");
        file.sync_data().expect("sync");
        let mut unsynced = Vec::new();
        storage.replay(|ops, state| unsynced.push((ops, state.unsynced_writes())));
        assert_eq!(unsynced, vec![(0, 0), (1, 1), (2, 2), (3, 1)]);
    }
}
