//! Opening a log: creating it, or validating it, finding its end and handing the
//! recovered groups to the caller ([DESIGN §4](crate::docs::design#4-recovery)).

pub mod inspect;
mod open;
mod reader;
mod scan;

use std::sync::Arc;

pub(crate) use open::{
    create_after, files_of, finish_resize_renames, lock, open_or_create, read_header, write_new_file, Opened,
};
pub use reader::Group;
pub(crate) use reader::{BlockReader, GroupReader, Step, StreamEnd};
pub use scan::LogEnd;

use crate::error::Result;
use crate::lsn::Lsn;
use crate::writer::Files;

/// The record groups found after the last checkpoint, in LSN order, and how the
/// log ended. Returned by [`crate::Log::open`]; iterate it to replay.
///
/// Groups are read lazily from the files. Finish iterating before checkpointing
/// past `end_lsn()`: a checkpoint lets the log reuse that space.
///
/// ```
/// use redolog::{Config, Durability, Log, LogEnd};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default().with_capacity_bytes(1 << 20);
/// let (log, _) = Log::open(dir.path(), config.clone()).unwrap();
/// for value in 0..3u8 {
///     log.commit(&[value], Durability::Synced).unwrap();
/// }
/// log.close().unwrap(); // without it (a crash): `LogEnd::Unclosed`, the same groups
/// drop(log);
/// let (_, recovery) = Log::open(dir.path(), config).unwrap();
/// assert_eq!(recovery.end(), LogEnd::CleanShutdown);
/// let values: Vec<u8> = recovery.map(|group| group.unwrap().records().next().unwrap()[0]).collect();
/// assert_eq!(values, [0, 1, 2]);
/// ```
pub struct Recovery {
    checkpoint_lsn: Lsn,
    start: Lsn,
    end: Lsn,
    log_end: LogEnd,
    reader: Option<GroupReader>,
}

impl std::fmt::Debug for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("checkpoint_lsn", &self.checkpoint_lsn)
            .field("start", &self.start)
            .field("end", &self.end)
            .field("log_end", &self.log_end)
            .finish_non_exhaustive()
    }
}

impl Recovery {
    pub(crate) fn new(files: Arc<Files>, checkpoint_lsn: Lsn, (start, end): (Lsn, Lsn), log_end: LogEnd) -> Self {
        let reader = (start < end).then(|| GroupReader::new(BlockReader::new(files), start, true).with_limit(end));
        Recovery { checkpoint_lsn, start, end, log_end, reader }
    }

    /// The checkpoint recovery started from.
    pub fn checkpoint_lsn(&self) -> Lsn {
        self.checkpoint_lsn
    }

    /// The start of the first recovered group (the checkpoint, or the first group
    /// start after it).
    pub fn start_lsn(&self) -> Lsn {
        self.start
    }

    /// The end of the last recovered group: where new appends continue.
    pub fn end_lsn(&self) -> Lsn {
        self.end
    }

    /// How the log ended.
    pub fn end(&self) -> LogEnd {
        self.log_end
    }
}

impl Iterator for Recovery {
    type Item = Result<Group>;

    fn next(&mut self) -> Option<Result<Group>> {
        let reader = self.reader.as_mut()?;
        let step = reader.next_step();
        match step {
            Ok(Step::Group(group)) => Some(Ok(group)),
            // Damage in the range recovery found sound at open: the files
            // changed under the log, or the disk returned other bytes.
            Ok(Step::Damaged(damage)) => {
                self.reader = None;
                Some(Err(damage.into_corruption()))
            }
            Ok(Step::End { at, why, .. }) => {
                let error = (why != StreamEnd::Limit || at != self.end)
                    .then(|| reader.blocks.corruption(at, format!("the log changed since it was opened ({why:?})")));
                self.reader = None;
                error.map(Err)
            }
            Err(error) => {
                self.reader = None;
                Some(Err(error))
            }
        }
    }
}
