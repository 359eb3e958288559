//! The real file system: `pread`, `pwritev`, `fdatasync`, directory `fsync`,
//! and the directory's lock file.
//!
//! Files are created `0600` and directories `0700` ([DESIGN INV-20](crate::docs::design#2-invariants)); a
//! log opened for its group sets group-read afterwards. Every file is opened
//! with `O_CLOEXEC` (std's default) and `O_NOFOLLOW`: a symlink planted in
//! place of a log file is an error (`ELOOP`), never followed.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use super::{DirLock, LockHandle, Storage, StorageFile};

/// The lock file of a log directory: `flock`ed exclusively by the one `Log`
/// that owns the directory, holding its process id.
pub const LOCK_FILE_NAME: &str = "redo.lock";

/// Mode of new files: the owner's only.
const FILE_MODE: u32 = 0o600;
/// Mode of new directories: the owner's only.
const DIR_MODE: u32 = 0o700;

/// `O_NOFOLLOW` for `OpenOptionsExt::custom_flags`.
fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Real files through the OS. The default storage of [`crate::Log::open`].
///
/// ```
/// use redolog::storage::{FsStorage, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// let file = FsStorage.open_file(&dir.path().join("f"), true).unwrap();
/// file.write_all_at(&[b"x"], 0).unwrap();
/// file.sync_data().unwrap();
/// FsStorage.sync_dir(dir.path()).unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct FsStorage;

#[derive(Debug)]
struct FsFile {
    file: File,
}

impl Storage for FsStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .mode(FILE_MODE)
            .custom_flags(no_follow())
            .open(path)?;
        Ok(Arc::new(FsFile { file }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    /// `flock(LOCK_EX | LOCK_NB)` on `dir/redo.lock`, created if missing; the
    /// holder writes its pid there. The lock belongs to the open file
    /// description, so a second `Log` in the same process is refused as
    /// another process is, and the kernel releases it when the holder dies.
    fn lock_dir(&self, dir: &Path) -> io::Result<DirLock> {
        let path = dir.join(LOCK_FILE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .custom_flags(no_follow())
            .open(&path)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(DirLock::Held { pid: read_pid(&file) }),
            Err(errno) => return Err(errno.into()),
        }
        let pid = format!("{}\n", std::process::id());
        file.set_len(0)?;
        file.write_all_at(pid.as_bytes(), 0)?;
        Ok(DirLock::Acquired(LockHandle::new(file)))
    }

    /// Tries a shared lock on `dir/redo.lock` and lets it go at once: it fails
    /// only while a `Log` holds the exclusive one. Creates and writes nothing.
    fn lock_holder(&self, dir: &Path) -> io::Result<Option<Option<u32>>> {
        let path = dir.join(LOCK_FILE_NAME);
        let file = match OpenOptions::new().read(true).custom_flags(no_follow()).open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared) {
            Ok(()) => Ok(None),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(Some(read_pid(&file))),
            Err(errno) => Err(errno.into()),
        }
    }

    /// A symlink is `ELOOP`, as opening it with `O_NOFOLLOW` would be: its own
    /// mode says nothing, and a log file is never one.
    fn permissions(&self, path: &Path) -> io::Result<Option<u32>> {
        let metadata = std::fs::symlink_metadata(path)?;
        if metadata.file_type().is_symlink() {
            return Err(rustix::io::Errno::LOOP.into());
        }
        Ok(Some(metadata.mode() & 0o7777))
    }

    fn set_permissions(&self, path: &Path, mode: u32) -> io::Result<()> {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
}

/// The pid a lock holder wrote into its lock file, if readable.
fn read_pid(file: &File) -> Option<u32> {
    let mut bytes = [0u8; 16];
    let len = file.read_at(&mut bytes, 0).ok()?;
    std::str::from_utf8(&bytes[..len]).ok()?.trim().parse().ok()
}

impl StorageFile for FsFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        // One slice (the partial block of a small commit): plain pwrite, which skips
        // the iovec copy-in of pwritev (perf: copy_iovec_from_user 1.2% at 1 thread).
        if let [single] = bufs {
            return self.file.write_all_at(single, offset);
        }
        write_all_vectored(bufs, offset, |slices, at| rustix::io::pwritev(&self.file, slices, at))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// Writes all of `bufs` at `offset` through `pwritev`, looping over short
/// writes and `EINTR`; any other error (and a write of 0 bytes) is returned, so
/// a write is either complete or an `Err` (docs/RELIABILITY.md E6).
fn write_all_vectored(
    bufs: &[&[u8]],
    offset: u64,
    mut pwritev: impl FnMut(&[IoSlice<'_>], u64) -> rustix::io::Result<usize>,
) -> io::Result<()> {
    let mut done: usize = 0;
    let total: usize = bufs.iter().map(|buf| buf.len()).sum();
    while done < total {
        let mut slices = [IoSlice::new(&[]); SLICES_MAX];
        let count = remaining_slices(bufs, done, &mut slices);
        match pwritev(&slices[..count], offset + done as u64) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote 0 bytes")),
            Ok(written) => done += written,
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}

/// Slices per `pwritev` call: the writer passes at most three (two ring pieces and
/// the partial block); more are written in further calls.
const SLICES_MAX: usize = 8;

/// Fills `out` with the slices still to write after `done` bytes of `bufs` were
/// written; returns how many. No allocation: this is on every commit's path.
fn remaining_slices<'a>(bufs: &[&'a [u8]], mut done: usize, out: &mut [IoSlice<'a>; SLICES_MAX]) -> usize {
    let mut count = 0;
    for buf in bufs {
        if done >= buf.len() {
            done -= buf.len();
            continue;
        }
        out[count] = IoSlice::new(&buf[done..]);
        done = 0;
        count += 1;
        if count == SLICES_MAX {
            break;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_slices_skip_what_was_written() {
        let bufs: [&[u8]; 3] = [b"abc", b"de", b"fgh"];
        let mut slices = [IoSlice::new(&[]); SLICES_MAX];
        let count = remaining_slices(&bufs, 4, &mut slices);
        let joined: Vec<u8> = slices[..count].iter().flat_map(|slice| slice.iter().copied()).collect();
        assert_eq!(joined, b"efgh");
    }

    /// E6: short writes and EINTR are looped over until every byte landed in
    /// place; EAGAIN and a zero-byte write are errors, never a partial success.
    #[test]
    fn short_writes_and_eintr_complete_the_write() {
        let bufs: [&[u8]; 4] = [b"redo", b"", b"log-", b"0123456789"];
        let expected: Vec<u8> = bufs.concat();
        for step in 1..=expected.len() {
            let mut file = vec![0u8; 5 + expected.len()];
            let mut calls = 0;
            write_all_vectored(&bufs, 5, |slices, at| {
                calls += 1;
                if calls % 3 == 0 {
                    return Err(rustix::io::Errno::INTR);
                }
                let landed: Vec<u8> = slices.iter().flat_map(|slice| slice.iter().copied()).take(step).collect();
                file[at as usize..at as usize + landed.len()].copy_from_slice(&landed);
                let written = landed.len();
                Ok(written)
            })
            .expect("write");
            assert_eq!(&file[5..], &expected[..], "{step} bytes per call");
        }
        for (errno, kind) in
            [(Some(rustix::io::Errno::AGAIN), io::ErrorKind::WouldBlock), (None, io::ErrorKind::WriteZero)]
        {
            let mut calls = 0;
            let error = write_all_vectored(&bufs, 0, |_, _| {
                calls += 1;
                match (calls, errno) {
                    (1, _) => Ok(3),
                    (_, Some(errno)) => Err(errno),
                    (_, None) => Ok(0),
                }
            })
            .expect_err("an error after a short write");
            assert_eq!(error.kind(), kind, "{error}");
        }
    }

    #[test]
    fn vectored_write_lands_contiguously() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = FsStorage.open_file(&dir.path().join("f"), true).expect("open");
        file.write_all_at(&[b"hello ", b"world"], 3).expect("write");
        let mut back = [0u8; 14];
        file.read_exact_at(&mut back, 0).expect("read");
        assert_eq!(&back, b"\0\0\0hello world");
    }
}
