//! The closed LSN (MySQL's `recent_closed`): which groups their callers have
//! closed — registered the pages they dirtied — and the end of the longest
//! closed prefix ([DESIGN §1.13](crate::docs::design#113-mini-transactions-and-the-closed-lsn-mysqls-recent_closed), INV-21, INV-22).
//!
//! A mini-transaction commit is reserve → copy → publish to the link buffer
//! (`ready`) → wait for space in the closed window → the caller adds its dirty
//! pages with the group's start LSN → close. A second link buffer tracks the
//! closes exactly as the first tracks the copies: any thread advances its tail,
//! nobody sleeps on a timer (MySQL bug #95390 was user threads waiting for
//! `recent_closed` space while its only advancer slept until a timeout). A
//! group may start at most the window past the closed LSN; one that would
//! start further waits on the appenders' events, which every move of the
//! closed tail notifies. An engine's checkpoint may advance to
//! `min(oldest dirty page, closed_lsn, durable_lsn)`.
//!
//! Depends only on `link_buf`, `pipeline`, `lsn`, `wait` and `error`, so the
//! loom model compiles it too.

use crate::error::Result;
use crate::link_buf::LinkBuf;
use crate::lsn::Lsn;
use crate::pipeline::Stages;
use crate::wait::Waited;

/// The closed groups and the closed LSN.
pub(crate) struct Closer {
    links: LinkBuf,
}

impl Closer {
    /// A closer whose prefix ends at `end` (everything before it closed), with
    /// a window of `window_bytes` (a power of two, at least a granule). Its
    /// tail sits on the head line of `ready`'s link buffer (`LinkBuf::beside`):
    /// an append then finds the reservation counter, `ready`'s tail and the
    /// closed tail on one cache line.
    pub(crate) fn beside(ready: &LinkBuf, window_bytes: u64, end: Lsn) -> Self {
        let slots = (window_bytes >> crate::link_buf::GRANULE_SHIFT).max(1) as usize;
        Closer { links: ready.beside(slots, end.0) }
    }

    /// Every group that ends at or before this LSN is closed (INV-21).
    pub(crate) fn closed_lsn(&self) -> Lsn {
        Lsn(self.links.tail())
    }

    /// Whether a group starting at `start` lies within the window.
    pub(crate) fn has_space(&self, start: Lsn) -> bool {
        self.links.has_space(start.0)
    }

    /// Waits, on the appenders' events and never by a sleep loop, until a group
    /// starting at `start` lies within the window (INV-22), or the log is
    /// poisoned. Returns what the wait cost, `None` if there was room at once.
    pub(crate) fn wait_for_window<W>(&self, start: Lsn, stages: &Stages<W>) -> Result<Option<Waited>> {
        if self.has_space(start) {
            return Ok(None);
        }
        let target = Lsn(self.links.space_target(start.0));
        let waited = stages.wait_ready_space(target, || self.has_space(start));
        stages.check()?;
        Ok(Some(waited))
    }

    /// Closes the group `[start, end)`: the closed LSN passes it once every
    /// earlier group is closed too. `reserved_end` is the appender's
    /// reservation counter (the link buffer's contract). The caller waited for
    /// the window first, and published the group to the first link buffer,
    /// whose F1 fence after the reservation serves this add too. Returns the
    /// stretch the closed tail moved by: the caller wakes the groups waiting
    /// for window space (`Stages::ready_moved`), merged with its own notice.
    #[must_use = "the waiters for window space the move made must be woken"]
    pub(crate) fn close(&self, (start, end): (Lsn, Lsn), reserved_end: impl FnOnce() -> u64) -> Option<(Lsn, Lsn)> {
        debug_assert!(self.has_space(start), "INV-22: group {start} closed without window space");
        self.links.add_after_fence(start.0, end.0, reserved_end).map(|(old, new)| (Lsn(old), Lsn(new)))
    }
}
