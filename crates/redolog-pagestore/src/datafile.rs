//! The data file: page `n` at offset `n × PAGE_BYTES`, all I/O through
//! redolog's `Storage` trait so the crash tests run the log and the pages on
//! one `CrashStorage` ([PAGESTORE §4](crate::docs::pagestore#4-the-data-file)); and its doublewrite file,
//! which keeps a page write that a power loss tears from costing the page
//! (§4.1).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redolog::storage::{Storage, StorageFile};

use crate::page::{Page, PageNo, PAGE_BYTES};
use crate::{Error, Result};

/// The data file's name in the store's directory.
pub const DATA_FILE_NAME: &str = "pages.db";
/// The doublewrite file's name in the store's directory.
pub const DOUBLEWRITE_FILE_NAME: &str = "doublewrite.db";
/// Pages the doublewrite file holds: a batch of page writes goes through it
/// this many at a time (InnoDB's doublewrite buffer holds 128).
pub const DOUBLEWRITE_PAGES: usize = 64;

/// The file of pages.
pub struct DataFile {
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    doublewrite: Arc<dyn StorageFile>,
    /// One batch at a time through the doublewrite file.
    doublewrite_lock: parking_lot::Mutex<()>,
    /// Measurement only: pages written in place without the doublewrite
    /// copy (`Options::unprotected_page_writes`).
    unprotected: std::sync::atomic::AtomicBool,
}

/// Opens `dir/name`, creating it if it is not there (`open_file` with
/// `create` truncates, so only then), the directory synced after a create.
fn open_or_create(storage: &dyn Storage, dir: &Path, name: &str) -> std::io::Result<Arc<dyn StorageFile>> {
    let exists = storage.list_dir(dir)?.iter().any(|entry| entry == name);
    let file = storage.open_file(&dir.join(name), !exists)?;
    if !exists {
        // A crash right after creating the file must not lose its name.
        storage.sync_dir(dir)?;
    }
    Ok(file)
}

impl std::fmt::Debug for DataFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataFile").field("path", &self.path).finish_non_exhaustive()
    }
}

impl DataFile {
    /// Opens (or creates) `dir/pages.db` and `dir/doublewrite.db` on
    /// `storage`, and repairs any page a crash tore from its doublewrite
    /// copy (§4.1).
    pub fn open(dir: &Path, storage: &dyn Storage) -> Result<DataFile> {
        let path = dir.join(DATA_FILE_NAME);
        let io = |source| Error::Io { path: path.clone(), source };
        storage.create_dir_all(dir).map_err(io)?;
        let file = open_or_create(storage, dir, DATA_FILE_NAME).map_err(io)?;
        let doublewrite = open_or_create(storage, dir, DOUBLEWRITE_FILE_NAME)
            .map_err(|source| Error::Io { path: dir.join(DOUBLEWRITE_FILE_NAME), source })?;
        let data = DataFile {
            path,
            file,
            doublewrite,
            doublewrite_lock: parking_lot::Mutex::new(()),
            unprotected: std::sync::atomic::AtomicBool::new(false),
        };
        data.repair_torn()?;
        Ok(data)
    }

    /// Puts back, from the doublewrite file, every page whose write in place
    /// a crash tore: its doublewrite copy verifies and the page in place
    /// does not. A copy that does not verify was itself torn, so its page
    /// was never written in place (the copy is synced first) and is whole.
    fn repair_torn(&self) -> Result<u64> {
        let dw_io = |source| Error::Io { path: self.path.with_file_name(DOUBLEWRITE_FILE_NAME), source };
        let size = self.doublewrite.size().map_err(dw_io)?;
        let mut repaired = 0;
        for slot in 0..(size / PAGE_BYTES as u64).min(DOUBLEWRITE_PAGES as u64) {
            let mut copy = Page::zeroed();
            self.doublewrite.read_exact_at(copy.bytes_mut(), slot * PAGE_BYTES as u64).map_err(dw_io)?;
            let no = copy.page_no();
            if copy.bytes().iter().all(|&byte| byte == 0) || copy.verify(no).is_err() {
                continue;
            }
            if let Err(Error::CorruptPage { .. }) = self.read(no) {
                self.write_one(&mut copy)?;
                repaired += 1;
            }
        }
        if repaired > 0 {
            self.sync()?;
        }
        Ok(repaired)
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io { path: self.path.clone(), source }
    }

    /// Pages the file holds room for (a torn last page counts).
    pub fn pages(&self) -> Result<u64> {
        let size = self.file.size().map_err(|error| self.io(error))?;
        Ok(size.div_ceil(PAGE_BYTES as u64))
    }

    /// Reads page `no` and checks it (PS-3). Where no page was ever written
    /// the file holds zeroes, or nothing: both read as a zeroed page.
    pub fn read(&self, no: PageNo) -> Result<Page> {
        let mut page = Page::zeroed();
        let offset = u64::from(no) * PAGE_BYTES as u64;
        let size = self.file.size().map_err(|error| self.io(error))?;
        let present = size.saturating_sub(offset).min(PAGE_BYTES as u64) as usize;
        if present > 0 {
            self.file.read_exact_at(&mut page.bytes_mut()[..present], offset).map_err(|error| self.io(error))?;
        }
        page.verify(no).map_err(|reason| Error::CorruptPage { page: no, reason })?;
        Ok(page)
    }

    /// Writes `pages` at their places through the doublewrite file, up to
    /// [`DOUBLEWRITE_PAGES`] at a time: each batch sealed (checksums),
    /// written to the doublewrite file and synced, then written in place and
    /// the data file synced — so a power loss tears at most one of the two
    /// copies of a page (PS-3). Durable when this returns. The caller has
    /// made the log durable up to each page's LSN first (PS-1).
    pub fn write_pages(&self, pages: &mut [Page]) -> Result<()> {
        let dw_io = |source| Error::Io { path: self.path.with_file_name(DOUBLEWRITE_FILE_NAME), source };
        if self.unprotected.load(std::sync::atomic::Ordering::Relaxed) {
            for page in pages.iter_mut() {
                self.write_one(page)?;
            }
            return self.sync();
        }
        for batch in pages.chunks_mut(DOUBLEWRITE_PAGES) {
            let _one_batch = self.doublewrite_lock.lock();
            for page in batch.iter_mut() {
                page.seal();
            }
            let bytes: Vec<&[u8]> = batch.iter().map(|page| &page.bytes()[..]).collect();
            self.doublewrite.write_all_at(&bytes, 0).map_err(dw_io)?;
            self.doublewrite.sync_data().map_err(dw_io)?;
            for page in batch.iter() {
                let offset = u64::from(page.page_no()) * PAGE_BYTES as u64;
                self.file.write_all_at(&[page.bytes()], offset).map_err(|error| self.io(error))?;
            }
            self.sync()?;
        }
        Ok(())
    }

    /// Seals `page` and writes it at its place, without the doublewrite
    /// file: a power loss during this write can tear the page for good. For
    /// the repair itself and for tests; the store writes through
    /// [`write_pages`](Self::write_pages).
    pub fn write_one(&self, page: &mut Page) -> Result<()> {
        page.seal();
        let offset = u64::from(page.page_no()) * PAGE_BYTES as u64;
        self.file.write_all_at(&[page.bytes()], offset).map_err(|error| self.io(error))
    }

    /// Measurement only (`Options::unprotected_page_writes`): from now on
    /// [`write_pages`](Self::write_pages) writes in place, without the
    /// doublewrite copy, so a power loss can tear a page for good.
    #[doc(hidden)]
    pub fn set_unprotected(&self, unprotected: bool) {
        self.unprotected.store(unprotected, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes every page written so far durable.
    pub fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|error| self.io(error))
    }
}
