//! Where each block lives: file names and the block → (file, offset) mapping of
//! [FORMAT §4](crate::docs::format#4-lsns-and-the-block-stream).

use std::path::{Path, PathBuf};

use crate::format::{Geometry, BLOCK_BYTES, FILE_COUNT, FILE_HEADER_AREA_BYTES};
use crate::lsn::BlockNo;

/// The geometry of a log's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) file_bytes: u64,
    /// Log blocks per file.
    pub(crate) file_blocks: u64,
    /// Log blocks in all files: the length of the on-disk ring.
    pub(crate) ring_blocks: u64,
}

/// A stretch of consecutive blocks that is contiguous in one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) first: BlockNo,
    pub(crate) count: u64,
    pub(crate) file_index: usize,
    pub(crate) offset: u64,
}

impl Layout {
    /// Precondition: `file_bytes` leaves room for at least one block after the header area.
    pub(crate) fn new(file_bytes: u64) -> Self {
        assert!(file_bytes > FILE_HEADER_AREA_BYTES + BLOCK_BYTES as u64);
        let file_blocks = (file_bytes - FILE_HEADER_AREA_BYTES) / BLOCK_BYTES as u64;
        Layout { file_bytes, file_blocks, ring_blocks: file_blocks * u64::from(FILE_COUNT) }
    }

    /// The largest group the ring of files holds in blocks of `geometry`:
    /// all its blocks' data but two (the partial blocks a group may start and
    /// end in). Appends refuse a larger group; readers take a larger header
    /// for damage.
    pub(crate) fn group_bytes_max(&self, geometry: Geometry) -> u64 {
        (self.ring_blocks - 2) * geometry.data_bytes() as u64
    }

    /// The file index and byte offset of block `block`.
    pub(crate) fn place(&self, block: BlockNo) -> (usize, u64) {
        let slot = block.0 % self.ring_blocks;
        let file_index = (slot / self.file_blocks) as usize;
        let offset = FILE_HEADER_AREA_BYTES + (slot % self.file_blocks) * BLOCK_BYTES as u64;
        (file_index, offset)
    }

    /// Splits `count` blocks from `first` into runs contiguous in one file.
    pub(crate) fn runs(&self, first: BlockNo, count: u64) -> impl Iterator<Item = Run> + '_ {
        let mut next = first.0;
        let end = first.0 + count;
        std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let (file_index, offset) = self.place(BlockNo(next));
            let left_in_file = self.file_blocks - (next % self.ring_blocks) % self.file_blocks;
            let count = left_in_file.min(end - next);
            let run = Run { first: BlockNo(next), count, file_index, offset };
            next += count;
            Some(run)
        })
    }

    /// Indexes of the files holding any block in `[first, last]`.
    pub(crate) fn files_between(&self, first: BlockNo, last: BlockNo) -> impl Iterator<Item = usize> + '_ {
        let count = last.0.saturating_sub(first.0) + 1;
        let mut seen = [false; FILE_COUNT as usize];
        self.runs(first, count.min(self.ring_blocks)).filter_map(move |run| {
            let new = !seen[run.file_index];
            seen[run.file_index] = true;
            new.then_some(run.file_index)
        })
    }
}

/// The name of file `index` ([FORMAT §1](crate::docs::format#1-directory)).
pub(crate) fn file_name(index: usize) -> String {
    format!("redo.{index:04}")
}

/// The name a file has while the log is being created.
pub(crate) fn temp_file_name(index: usize) -> String {
    format!("redo.{index:04}.tmp")
}

/// The name a file of a resize's new set has until the switch's renames
/// ([DESIGN §1.18](crate::docs::design#118-online-resize)).
pub(crate) fn resize_file_name(index: usize) -> String {
    format!("redo.{index:04}.resize")
}

pub(crate) fn file_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(file_name(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Layout {
        // 10 blocks per file, 40 in the ring.
        Layout::new(FILE_HEADER_AREA_BYTES + 10 * BLOCK_BYTES as u64)
    }

    #[test]
    fn placement_wraps_over_files_and_laps() {
        let layout = small();
        assert_eq!(layout.ring_blocks, 40);
        assert_eq!(layout.place(BlockNo(0)), (0, FILE_HEADER_AREA_BYTES));
        assert_eq!(layout.place(BlockNo(9)), (0, FILE_HEADER_AREA_BYTES + 9 * 512));
        assert_eq!(layout.place(BlockNo(10)), (1, FILE_HEADER_AREA_BYTES));
        assert_eq!(layout.place(BlockNo(39)), (3, FILE_HEADER_AREA_BYTES + 9 * 512));
        assert_eq!(layout.place(BlockNo(40)), (0, FILE_HEADER_AREA_BYTES));
    }

    #[test]
    fn runs_split_at_file_and_ring_ends() {
        let layout = small();
        let runs: Vec<(u64, u64, usize)> =
            layout.runs(BlockNo(35), 12).map(|run| (run.first.0, run.count, run.file_index)).collect();
        assert_eq!(runs, vec![(35, 5, 3), (40, 7, 0)]);
        let files: Vec<usize> = layout.files_between(BlockNo(8), BlockNo(12)).collect();
        assert_eq!(files, vec![0, 1]);
    }

    #[test]
    fn names() {
        assert_eq!(file_name(3), "redo.0003");
        assert_eq!(temp_file_name(0), "redo.0000.tmp");
        assert_eq!(resize_file_name(2), "redo.0002.resize");
    }
}
