//! `archived` and `archived-sync`: redolog (Pipeline::Auto) with an
//! `Archiver` copying every durable group into an archive beside the log —
//! what continuous archiving costs the committers (docs/DESIGN.md §1.17).
//! `archived-sync` acknowledges each commit once it is synced in the log and
//! in the archive (`Archiver::wait`, PostgreSQL's `pg_receivewal
//! --synchronous`). Under
//! `--device sim:<latency>` the archive's fdatasyncs take the latency too.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redolog::archive::Archiver;
use redolog::{Config, Durability, Log, Lsn};

use super::systems::{Role, System, SystemRow};
use crate::harness::BoxError;

/// The registry's rows of the archiving systems (log/registry.rs).
pub const ARCHIVED: &[SystemRow] = &[
    SystemRow {
        name: "archived",
        aliases: &[],
        role: Role::Redolog,
        about: "redolog with an Archiver copying every durable group into an archive beside the log \
                (asynchronous: commits do not wait for it; Pipeline::Auto)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(ArchivedSystem::open(dir, false)?)),
    },
    SystemRow {
        name: "archived-sync",
        aliases: &[],
        role: Role::Redolog,
        about: "archived, and each Synced commit also waits until it is in the synced archive (Archiver::wait)",
        one_thread_only: false,
        open: |dir| Ok(Arc::new(ArchivedSystem::open(dir, true)?)),
    },
];

pub struct ArchivedSystem {
    log: Arc<Log>,
    archiver: Option<Archiver>,
    archive: PathBuf,
    /// Commits wait for the archive too.
    synchronous: bool,
}

impl ArchivedSystem {
    /// The log in `dir`, its archive in `dir` + `.archive`.
    pub fn open(dir: &Path, synchronous: bool) -> Result<Self, BoxError> {
        std::fs::create_dir_all(dir)?;
        let (log, _) = Log::open(dir, Config::default())?;
        let log = Arc::new(log);
        let archive = dir.with_extension("archive");
        let archiver = Archiver::start(&log, &archive)?;
        Ok(ArchivedSystem { log, archiver: Some(archiver), archive, synchronous })
    }

    fn archiver(&self) -> &Archiver {
        self.archiver.as_ref().expect("the archiver runs until drop")
    }
}

impl System for ArchivedSystem {
    fn append(&self, record: &[u8]) -> Result<u64, BoxError> {
        Ok(self.log.append(record)?.as_u64())
    }

    fn wait(&self, token: u64, durability: Durability) -> Result<(), BoxError> {
        let lsn = Lsn::from_u64(token);
        if self.synchronous && durability == Durability::Synced {
            // Synced in the log and in the archive.
            return Ok(self.archiver().wait(lsn)?);
        }
        Ok(self.log.wait(lsn, durability)?)
    }

    fn maintain(&self) {
        // Everything durable is "flushed to pages"; the archive's closed
        // segments are "shipped" (deleted), as a retention job would, so a
        // long run does not fill /dev/shm.
        let _ = self.log.checkpoint(self.log.durable_lsn());
        if let Ok(entries) = std::fs::read_dir(&self.archive) {
            let mut segments: Vec<PathBuf> = entries.filter_map(|entry| Some(entry.ok()?.path())).collect();
            segments.sort();
            segments.pop();
            for segment in segments {
                let _ = std::fs::remove_file(segment);
            }
        }
    }

    fn metrics(&self) -> Option<redolog::Metrics> {
        Some(self.log.metrics())
    }
}

impl Drop for ArchivedSystem {
    fn drop(&mut self) {
        let _ = self.log.close();
        if let Some(archiver) = self.archiver.take() {
            let _ = archiver.stop();
        }
    }
}
