//! Page recovery: the groups redolog's recovery returns, replayed onto the
//! pages they name, each record applied only where the page has not seen
//! its group yet (PS-2), then the changed pages written back and synced
//! ([PAGESTORE §5](crate::docs::pagestore#5-recovery)).

use std::collections::{BTreeMap, BTreeSet};

use redolog::{Lsn, Recovery};

use crate::datafile::DataFile;
use crate::page::{Page, PageNo};
use crate::redo::Redo;
use crate::{Error, Result};

/// Pages recovery holds in memory before it writes them back and starts
/// again with none: 4096 × 16 KiB = 64 MiB. Writing early is safe, because
/// a page's LSN says which groups it has seen.
const REPLAY_PAGES_MAX: usize = 4096;

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Groups read from the log.
    pub groups: u64,
    /// Redo records applied to a page.
    pub applied: u64,
    /// Redo records skipped: their page had seen their group already.
    pub skipped: u64,
    /// Pages written back.
    pub pages_written: u64,
    /// The end of the last group replayed.
    pub end_lsn: Lsn,
}

/// The pages being replayed onto, and which of them changed.
struct Pages<'a> {
    data: &'a DataFile,
    pages: BTreeMap<PageNo, Page>,
    changed: BTreeSet<PageNo>,
}

impl Pages<'_> {
    fn get(&mut self, no: PageNo) -> Result<&mut Page> {
        if !self.pages.contains_key(&no) {
            let page = self.data.read(no)?;
            self.pages.insert(no, page);
        }
        Ok(self.pages.get_mut(&no).unwrap_or_else(|| unreachable!("inserted above")))
    }

    /// Writes the changed pages. The log they came from is durable (it is
    /// what recovery read), so the WAL rule holds (PS-1).
    fn write_back(&mut self) -> Result<u64> {
        let mut pages: Vec<Page> =
            std::mem::take(&mut self.changed).into_iter().filter_map(|no| self.pages.remove(&no)).collect();
        self.pages.clear();
        // Through the doublewrite file: a crash during recovery must not
        // tear a page whose log the next recovery still needs.
        self.data.write_pages(&mut pages)?;
        Ok(pages.len() as u64)
    }
}

/// Replays `recovery` onto the pages of `data`, writes the changed pages
/// and syncs the file. Replaying the same log twice changes nothing the
/// second time.
pub fn replay(recovery: Recovery, data: &DataFile) -> Result<Replayed> {
    let start = recovery.checkpoint_lsn();
    replay_groups(recovery, start, None, data)
}

/// Replays `groups` (from a log's recovery or an archive, starting at
/// `start`) onto the pages of `data`, stopping before the first group that
/// ends after `until` if given; writes the changed pages and syncs the
/// file. A group a page has seen (its LSN at or past the group's end) is
/// skipped on that page (PS-2), so any start at or before the pages'
/// checkpoint gives the same pages.
pub(crate) fn replay_groups(
    groups: impl Iterator<Item = redolog::Result<redolog::Group>>,
    start: Lsn,
    until: Option<Lsn>,
    data: &DataFile,
) -> Result<Replayed> {
    let mut replayed = Replayed { end_lsn: start, ..Replayed::default() };
    let mut pages = Pages { data, pages: BTreeMap::new(), changed: BTreeSet::new() };
    for group in groups {
        let group = group?;
        if until.is_some_and(|until| group.end_lsn() > until) {
            break;
        }
        let (start, end) = (group.start_lsn(), group.end_lsn());
        let mut touched = BTreeSet::new();
        for (number, bytes) in group.records().enumerate() {
            let bad = |reason: String| Error::BadRedo { lsn: start, record: number, reason };
            let redo = Redo::decode(bytes).map_err(bad)?;
            let page = pages.get(redo.page())?;
            // PS-2: a page stamped with this group's end (or a later one)
            // has every change of the group already.
            if page.lsn() >= end {
                replayed.skipped += 1;
                continue;
            }
            redo.apply(page).map_err(|reason| bad(format!("page {}: {reason}", redo.page())))?;
            touched.insert(redo.page());
            replayed.applied += 1;
        }
        for &no in &touched {
            pages.get(no)?.set_lsn(end);
        }
        pages.changed.extend(touched);
        replayed.groups += 1;
        replayed.end_lsn = end;
        if pages.pages.len() >= REPLAY_PAGES_MAX {
            replayed.pages_written += pages.write_back()?;
        }
    }
    replayed.pages_written += pages.write_back()?;
    data.sync()?;
    Ok(replayed)
}
