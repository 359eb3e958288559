//! Consumers: named positions the log keeps for the readers behind its writer
//! (an archiver, a replica, a backup), so their groups are never written over
//! before they have read them ([DESIGN §1.16](crate::docs::design#116-consumers-readers-that-hold-the-logs-space), INV-32).

use std::sync::Arc;

use crate::core::Core;
use crate::error::Result;
use crate::lsn::Lsn;

/// A consumer the log keeps, as [`Log::consumers`](crate::Log::consumers)
/// lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerInfo {
    /// Its name.
    pub name: String,
    /// Its durable position: every group from it on is kept.
    pub lsn: Lsn,
}

/// A handle on a consumer: advances the position the log keeps for it. One
/// handle per consumer at a time; dropping it leaves the consumer (and its
/// hold on the log) in place, for a later [`Log::consumer`](crate::Log::consumer)
/// — after a restart too. [`Log::drop_consumer`](crate::Log::drop_consumer)
/// ends the hold.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default().with_capacity_bytes(1 << 20);
/// let (log, _) = Log::open(dir.path(), config.clone()).unwrap();
/// let mut replica = log.create_consumer("replica").unwrap();
/// let end = log.commit(b"page 7: set x", Durability::Synced).unwrap();
/// // The replica reads from its position, ships the groups, then advances.
/// let shipped: Vec<_> = log.read_from(replica.lsn()).unwrap().map(Result::unwrap).collect();
/// assert_eq!(shipped.last().unwrap().end_lsn(), end);
/// replica.advance(end).unwrap();
/// drop((replica, log));
/// // The position survives the restart.
/// let (log, _) = Log::open(dir.path(), config).unwrap();
/// assert_eq!(log.consumer("replica").unwrap().lsn(), end);
/// ```
pub struct Consumer {
    core: Arc<Core>,
    name: String,
    lsn: Lsn,
    /// This handle's attachment: a handle from before the consumer was
    /// dropped (and perhaps created again) moves nothing.
    token: u64,
}

impl Consumer {
    pub(crate) fn new(core: Arc<Core>, name: &str, (lsn, token): (Lsn, u64)) -> Self {
        Consumer { core, name: name.to_owned(), lsn, token }
    }

    /// The consumer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its durable position: the log keeps every group from here on.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// Declares everything before `lsn` consumed: once this returns, the
    /// position is durable and the writer may reuse the space before it. Takes
    /// a group boundary at or below [`Log::durable_lsn`](crate::Log::durable_lsn)
    /// (a [`Group`](crate::Group)'s end), so the consumer can resume there
    /// with `read_from` after a restart. A position at or before the current
    /// one changes nothing. Costs one slot write and one fdatasync of
    /// `redo.0000`: advance in batches, not per group.
    ///
    /// Errors: `LsnOutOfRange` past the durable log, `InvalidLsn` inside a
    /// block header, `UnknownConsumer` once an operator dropped it, `Closed`
    /// after the log closed, and the log's poison.
    pub fn advance(&mut self, lsn: Lsn) -> Result<()> {
        let core = &self.core;
        self.lsn = core.checkpoints.advance_consumer((&self.name, self.token), lsn, &core.stages, &core.metrics)?;
        Ok(())
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.core.checkpoints.detach_consumer(&self.name, self.token);
    }
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer").field("name", &self.name).field("lsn", &self.lsn).finish_non_exhaustive()
    }
}
