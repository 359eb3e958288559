//! The data file: page `n` at offset `n × PAGE_BYTES`, all I/O through
//! redolog's `Storage` trait so the crash tests run the log and the pages on
//! one `CrashStorage` (docs/PAGESTORE.md §4).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redolog::storage::{Storage, StorageFile};

use crate::page::{Page, PageNo, PAGE_BYTES};
use crate::{Error, Result};

/// The data file's name in the store's directory.
pub const DATA_FILE_NAME: &str = "pages.db";

/// The file of pages.
pub struct DataFile {
    path: PathBuf,
    file: Arc<dyn StorageFile>,
}

impl std::fmt::Debug for DataFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataFile").field("path", &self.path).finish_non_exhaustive()
    }
}

impl DataFile {
    /// Opens (or creates) `dir/pages.db` on `storage`.
    pub fn open(dir: &Path, storage: &dyn Storage) -> Result<DataFile> {
        let path = dir.join(DATA_FILE_NAME);
        let io = |source| Error::Io { path: path.clone(), source };
        storage.create_dir_all(dir).map_err(io)?;
        // `open_file` with `create` truncates: only for a file not there yet.
        let exists = storage.list_dir(dir).map_err(io)?.iter().any(|name| name == DATA_FILE_NAME);
        let file = storage.open_file(&path, !exists).map_err(io)?;
        if !exists {
            // A crash right after creating the file must not lose its name.
            storage.sync_dir(dir).map_err(io)?;
        }
        Ok(DataFile { path, file })
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

    /// Seals `page` (its checksum) and writes it at its place. It is not
    /// durable until [`sync`](Self::sync) returns; the caller has made the
    /// log durable up to the page's LSN first (PS-1).
    pub fn write(&self, page: &mut Page) -> Result<()> {
        page.seal();
        let offset = u64::from(page.page_no()) * PAGE_BYTES as u64;
        self.file.write_all_at(&[page.bytes()], offset).map_err(|error| self.io(error))
    }

    /// Makes every page written so far durable.
    pub fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|error| self.io(error))
    }
}
