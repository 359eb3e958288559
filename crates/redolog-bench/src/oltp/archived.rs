//! The page store with an `Archiver` on its log (`--archiver`): what
//! continuous archiving costs a sysbench workload, asynchronous and
//! synchronous, paired with the store alone (docs/DESIGN.md §1.17).

use std::path::Path;

use redolog::archive::Archiver;
use redolog_pagestore::{EngineStats, Options, PageStore};

use super::options::OltpOptions;
use super::pagestore::{prepare, run_statements};
use super::system::{OltpSystem, Statement};
use crate::harness::BoxError;

/// The store in `dir/<name>` and its archiver, archiving into
/// `dir/<name>-archive`.
pub struct ArchivedPageStore {
    name: &'static str,
    /// Commits wait with `Archiver::wait` (synced in the log and the archive).
    sync: bool,
    /// Dropped before the store: it holds the log.
    archiver: Option<Archiver>,
    store: PageStore,
}

impl ArchivedPageStore {
    /// `archived` or, with `sync`, `archived-sync`.
    pub fn open(dir: &Path, options: Options, sync: bool) -> Result<Self, BoxError> {
        let name = if sync { "archived-sync" } else { "archived" };
        let store = PageStore::open(dir.join(name), options)?.0;
        let archiver = Archiver::start(store.log(), dir.join(format!("{name}-archive")))?;
        Ok(ArchivedPageStore { name, sync, archiver: Some(archiver), store })
    }

    fn archiver(&self) -> &Archiver {
        self.archiver.as_ref().unwrap_or_else(|| unreachable!("the archiver lives until drop"))
    }
}

impl Drop for ArchivedPageStore {
    fn drop(&mut self) {
        if let Some(archiver) = self.archiver.take() {
            let _ = self.store.log().close();
            let _ = archiver.stop();
        }
    }
}

impl OltpSystem for ArchivedPageStore {
    fn name(&self) -> &'static str {
        self.name
    }

    fn prepare(&mut self, options: &OltpOptions) -> Result<(), BoxError> {
        prepare(&mut self.store, options)
    }

    fn run(&self, statements: &[Statement], flush_log_at_trx_commit: u8) -> Result<(), BoxError> {
        match run_statements(&self.store, statements)? {
            // A synchronous archive acknowledges at durability 1 only once the
            // archive has the commit too (`pg_receivewal --synchronous`).
            Some(end) if self.sync && flush_log_at_trx_commit == 1 => Ok(self.archiver().wait(end)?),
            end => Ok(self.store.commit_wait(end, flush_log_at_trx_commit)?),
        }
    }

    fn quiesce(&self) -> Result<(), BoxError> {
        Ok(self.store.flush_all()?)
    }

    fn engine_stats(&self) -> Option<EngineStats> {
        Some(self.store.stats())
    }

    fn log_counters(&self) -> Vec<(String, u64)> {
        self.store.log().metrics().counters()
    }
}
