//! The mini-transaction ([PAGESTORE §7](crate::docs::pagestore#7-the-mini-transaction)): latch pages, change them
//! through redo records, commit as one redolog group.
//!
//! Pages are latched in the order the caller asks and held to the end;
//! callers latch in one global order (a B+tree's: top-down, left to right),
//! as InnoDB's do, or two mini-transactions can wait for each other.

use std::sync::Arc;

use parking_lot::{ArcRwLockWriteGuard, RawRwLock};
use redolog::{Log, Lsn};

use crate::buffer_pool::{BufferPool, Frame, FrameData};
#[cfg(debug_assertions)]
use crate::latch_order::LatchOrder;
use crate::page::{Page, PageNo};
use crate::redo::Redo;
use crate::{Error, Result};

/// A page this mini-transaction holds.
struct Latched {
    frame: Arc<Frame>,
    guard: ArcRwLockWriteGuard<RawRwLock, FrameData>,
    /// The page as it was before the first change, to put back if the
    /// mini-transaction does not commit.
    before: Option<Page>,
    /// Where the latch stands in the latch order (debug builds).
    #[cfg(debug_assertions)]
    order: LatchOrder,
}

/// A mini-transaction: InnoDB's `mtr_t`.
pub struct Mtr<'a> {
    pool: &'a BufferPool,
    log: &'a Log,
    latched: Vec<Latched>,
    redo: Vec<Redo>,
    /// Pages allocated in this mini-transaction (`allocate`).
    allocated: Vec<PageNo>,
}

impl<'a> Mtr<'a> {
    /// Starts a mini-transaction on `pool`, logging to `log`.
    pub fn new(pool: &'a BufferPool, log: &'a Log) -> Mtr<'a> {
        Mtr { pool, log, latched: Vec::new(), redo: Vec::new(), allocated: Vec::new() }
    }

    /// Notes that page `no` was allocated in this mini-transaction: nobody
    /// else can reach it before the commit.
    pub(crate) fn allocated(&mut self, no: PageNo) {
        self.allocated.push(no);
    }

    /// X-latches page `no` (reading it into the pool if needed) and returns
    /// it. Latching a page twice returns it again.
    pub fn latch(&mut self, no: PageNo) -> Result<&Page> {
        if let Some(index) = self.position(no) {
            return Ok(&self.latched[index].guard.page);
        }
        let frame = self.pool.get(no)?;
        let latch = frame.latch();
        let guard = self.pool.waits.page_latch.take(|| latch.try_write_arc(), || latch.write_arc());
        #[cfg(debug_assertions)]
        let order =
            LatchOrder::check(no, &guard.page, &self.allocated, self.latched.iter().map(|latched| latched.order));
        self.latched.push(Latched {
            frame,
            guard,
            before: None,
            #[cfg(debug_assertions)]
            order,
        });
        Ok(&self.latched[self.latched.len() - 1].guard.page)
    }

    /// A page this mini-transaction holds.
    pub fn page(&self, no: PageNo) -> Option<&Page> {
        self.position(no).map(|index| &self.latched[index].guard.page)
    }

    fn position(&self, no: PageNo) -> Option<usize> {
        self.latched.iter().position(|latched| latched.frame.no() == no)
    }

    /// Changes a latched page through `redo` and keeps the record for the
    /// group. A change that does not fit leaves the page as it was.
    pub fn apply(&mut self, redo: Redo) -> Result<()> {
        let no = redo.page();
        let index = self.position(no).ok_or_else(|| Error::Change { page: no, reason: "not latched".into() })?;
        let latched = &mut self.latched[index];
        if latched.before.is_none() {
            latched.before = Some(latched.guard.page.clone());
        }
        redo.apply(&mut latched.guard.page).map_err(|reason| Error::Change { page: no, reason })?;
        self.redo.push(redo);
        Ok(())
    }

    /// Writes the records as one group, stamps the changed pages with its
    /// end LSN and puts the newly dirty ones on their flush lists (PS-5),
    /// then closes the group and releases the latches. Returns the end LSN
    /// to wait for (`None`: nothing changed). If the log refuses the group
    /// (a poisoned log), the pages are put back as they were.
    pub fn commit(mut self) -> Result<Option<Lsn>> {
        if self.redo.is_empty() {
            return Ok(None);
        }
        let records: Vec<Vec<u8>> = self.redo.iter().map(Redo::encode).collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let group = self.log.begin_group(&refs)?;
        let (start, end) = (group.start_lsn(), group.end_lsn());
        for latched in &mut self.latched {
            if latched.before.take().is_some() {
                latched.guard.page.set_lsn(end);
                self.pool.note_modification(&latched.frame, &mut latched.guard, start);
            }
        }
        // PS-5: the pages are on their flush lists while the group is still
        // open, so no checkpoint (which goes to at most the closed LSN) can
        // pass their oldest modification.
        debug_assert!(
            self.log.closed_lsn() <= start,
            "PS-5: the closed LSN passed an open group at {start} before its pages joined the flush lists"
        );
        // Close before the latches go, as InnoDB's mtr commit does: the
        // group holds the closed window only while its pages join the flush
        // lists, not while the latch waiters are woken.
        group.close();
        self.latched.clear();
        Ok(Some(end))
    }
}

impl Drop for Mtr<'_> {
    /// An uncommitted mini-transaction puts its pages back: nothing it
    /// changed was logged, so nothing it changed may stay.
    fn drop(&mut self) {
        for latched in &mut self.latched {
            if let Some(before) = latched.before.take() {
                latched.guard.page = before;
            }
        }
    }
}
