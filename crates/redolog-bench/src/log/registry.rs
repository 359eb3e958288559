//! The registry of systems `--systems` can name: the built-in rows
//! (`systems.rs`) and, with the cargo feature `peers`, the peers' (`peers.rs`).
//! Both tables are data; this module only joins them, so neither imports the
//! other.

use std::path::Path;
use std::sync::Arc;

use super::systems::{Role, System, SystemRow, SYSTEMS};
use crate::harness::BoxError;

/// Every system of this build: the built-in rows, the archiving ones, then
/// the peers' if the `peers` feature is on.
pub fn registry() -> impl Iterator<Item = &'static SystemRow> {
    #[cfg(feature = "peers")]
    let peers = super::peers::PEERS;
    #[cfg(not(feature = "peers"))]
    let peers: &[SystemRow] = &[];
    SYSTEMS.iter().chain(super::archived::ARCHIVED).chain(peers)
}

/// A system named on the command line: a row of the registry.
#[derive(Clone, Copy)]
pub struct SystemKind(&'static SystemRow);

impl SystemKind {
    /// The row named `name` (or one of its aliases).
    pub fn named(name: &str) -> Option<SystemKind> {
        registry().find(|row| row.name == name || row.aliases.contains(&name)).map(SystemKind)
    }

    /// The clap parser of `--systems`: the registry's names, with their help.
    pub fn parser() -> impl clap::builder::TypedValueParser<Value = SystemKind> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
        let values = registry().map(|row| PossibleValue::new(row.name).help(row.about).aliases(row.aliases.iter()));
        PossibleValuesParser::new(values)
            .map(|name| SystemKind::named(&name).unwrap_or_else(|| unreachable!("clap accepted only registry names")))
    }

    pub fn row(self) -> &'static SystemRow {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Whether this is redolog (under some pipeline) rather than a baseline or peer.
    pub fn is_redolog(self) -> bool {
        self.0.role == Role::Redolog
    }

    pub fn open(self, dir: &Path) -> Result<Arc<dyn System>, BoxError> {
        let dir = dir.join(self.name());
        std::fs::create_dir_all(&dir)?;
        (self.0.open)(&dir)
    }
}

impl std::fmt::Debug for SystemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
