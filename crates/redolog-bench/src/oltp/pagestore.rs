//! The page store as a benchmark system: its options from the command line,
//! sysbench's `prepare`, and one transaction's statements; alone
//! (`pagestore`) or with an `Archiver` on its log (`--archiver`: `archived`,
//! commits wait for the log only, and `archived-sync`, commits wait with
//! `Archiver::wait`, synced in the log and in the archive; docs/DESIGN.md
//! §1.17).

use std::time::Instant;

use redolog::archive::Archiver;
use redolog::Lsn;
use redolog_pagestore::{EngineStats, Options, Outcome, PageStore};

use super::options::OltpOptions;
use super::system::{prepared_rows, OltpSystem, Statement};
use crate::harness::BoxError;

/// The store's options from the command line.
pub(super) fn store_options(options: &OltpOptions) -> Options {
    Options {
        buffer_pool_instances: options.buffer_pool_instances,
        buffer_pool_bytes: options.buffer_pool_bytes,
        io_capacity: options.io_capacity,
        log: redolog::Config::default().with_capacity_bytes(options.log_capacity),
        unprotected_page_writes: options.no_doublewrite,
        ..Options::default()
    }
}

/// sysbench's `prepare`: every table filled with `--table-size` rows, the
/// tables loaded in parallel, the commits not waited for until the end.
pub(super) fn prepare(store: &mut PageStore, options: &OltpOptions) -> Result<(), BoxError> {
    while store.tables() < options.tables {
        store.create_table()?;
    }
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), BoxError> {
        let loaders: Vec<_> = (0..options.tables)
            .map(|table| {
                let store = &*store;
                scope.spawn(move || -> Result<(), redolog_pagestore::Error> {
                    for row in prepared_rows(table, options.table_size) {
                        store.table(table).insert(&row)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for loader in loaders {
            loader.join().map_err(|_| "a loader panicked")??;
        }
        Ok(())
    })?;
    store.log().wait(store.log().end_lsn(), redolog::Durability::Synced)?;
    // A clean pool for the runs: sysbench's prepare is followed by a run on
    // a server that had time to flush it.
    store.flush_all()?;
    println!(
        "prepared {} tables of {} rows in {:.1} s",
        options.tables,
        options.table_size,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The page store as an [`OltpSystem`], under a name (the scenarios run
/// several configurations).
pub struct PageStoreSystem {
    name: &'static str,
    /// The archiver and whether commits wait for it (`archived-sync`);
    /// stopped on drop, after the store's log is closed.
    archiver: Option<(Archiver, bool)>,
    store: PageStore,
}

impl PageStoreSystem {
    /// Opens the store `name` in `dir/name`.
    pub(super) fn open(dir: &std::path::Path, name: &'static str, options: Options) -> Result<Self, BoxError> {
        Ok(PageStoreSystem { name, archiver: None, store: PageStore::open(dir.join(name), options)?.0 })
    }

    /// Opens `archived` (or with `sync`, `archived-sync`) in `dir`, archiving
    /// into `dir/<name>-archive`.
    pub(super) fn open_archived(dir: &std::path::Path, options: Options, sync: bool) -> Result<Self, BoxError> {
        let name = if sync { "archived-sync" } else { "archived" };
        let mut system = Self::open(dir, name, options)?;
        system.archiver = Some((Archiver::start(system.store.log(), dir.join(format!("{name}-archive")))?, sync));
        Ok(system)
    }
}

impl Drop for PageStoreSystem {
    fn drop(&mut self) {
        if let Some((archiver, _)) = self.archiver.take() {
            let _ = self.store.log().close();
            let _ = archiver.stop();
        }
    }
}

impl OltpSystem for PageStoreSystem {
    fn name(&self) -> &'static str {
        self.name
    }

    fn prepare(&mut self, options: &OltpOptions) -> Result<(), BoxError> {
        prepare(&mut self.store, options)
    }

    fn run(&self, statements: &[Statement], flush_log_at_trx_commit: u8) -> Result<(), BoxError> {
        match (run_statements(&self.store, statements)?, &self.archiver) {
            // A synchronous archive acknowledges at durability 1 only once the
            // archive has the commit too (`pg_receivewal --synchronous`).
            (Some(end), Some((archiver, true))) if flush_log_at_trx_commit == 1 => Ok(archiver.wait(end)?),
            (end, _) => Ok(self.store.commit_wait(end, flush_log_at_trx_commit)?),
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

/// Runs one transaction's statements on `store`; returns the end of its
/// last change, if any, for the commit wait.
pub(super) fn run_statements(store: &PageStore, statements: &[Statement]) -> Result<Option<Lsn>, BoxError> {
    let mut end = None;
    for statement in statements {
        let (_, last): (Outcome, _) = match statement {
            Statement::Insert { table, row } => store.table(*table).insert(row)?,
            Statement::UpdateC { table, id, c } => store.table(*table).update_c(*id, c)?,
            Statement::IncrementK { table, id } => store.table(*table).increment_k(*id)?,
            Statement::Delete { table, id } => store.table(*table).delete(*id)?,
        };
        end = last.or(end);
    }
    Ok(end)
}
