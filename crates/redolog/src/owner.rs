//! The directory's lock as the log's one write gate ([DESIGN INV-19](crate::docs::design#2-invariants),
//! INV-43): every write or sync of the log's files holds it shared, and
//! close takes it exclusively to release the lock, so nothing touches the
//! directory after its lock is released.

use parking_lot::{RwLock, RwLockReadGuard};

use crate::error::{Error, Result};
use crate::storage::LockHandle;

/// The log's hold on its directory: the lock `Log::open` took, until close,
/// drop or a simulated crash releases it.
pub(crate) struct Owner {
    lock: RwLock<Option<LockHandle>>,
}

/// Proof that the directory's lock is held, and stays held while this
/// lives: what a write or sync of the log's files takes first.
pub(crate) struct Owned<'a> {
    _lock: RwLockReadGuard<'a, Option<LockHandle>>,
}

impl Owner {
    pub(crate) fn new(lock: LockHandle) -> Self {
        Owner { lock: RwLock::new(Some(lock)) }
    }

    /// The gate, shared: `Error::Closed` once the lock was released.
    /// Recursive: a holder (a resize) may enter again for a slot write.
    pub(crate) fn enter(&self) -> Result<Owned<'_>> {
        let lock = self.lock.read_recursive();
        if lock.is_none() {
            return Err(Error::Closed);
        }
        Ok(Owned { _lock: lock })
    }

    /// Whether the lock was released: the log is closed to writes.
    pub(crate) fn is_released(&self) -> bool {
        self.lock.read_recursive().is_none()
    }

    /// Waits for every write in flight, then releases the lock: from here
    /// on every `enter` fails.
    pub(crate) fn release(&self) {
        drop(self.lock.write().take());
    }
}
