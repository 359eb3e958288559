//! The write and sync stages: turning the ring's completed prefix into file writes,
//! and file writes into durable data ([DESIGN §1.5](crate::docs::design#15-write-and-sync-roles-the-group-commit-pipeline)).
//!
//! Only the holder of the write role calls `Writer::write`; only the holder of the
//! sync role calls `Files::sync_range`. Neither decides *when*: that is the commit
//! protocol's job (`pipeline/group.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::buffer::RingBuffer;
use crate::clock::Moment;
use crate::encryption::block::{seal_block, BlockCipher};
use crate::error::IoFailure;
use crate::failpoint::failpoint;
use crate::format::{BlockSeal, BLOCK_BYTES, BLOCK_HEADER_BYTES};
use crate::layout::Layout;
use crate::lsn::{BlockNo, Lsn};
use crate::storage::StorageFile;

/// The open log files, in file-number order, and how their blocks are sealed.
#[derive(Clone, Debug)]
pub(crate) struct Files {
    pub(crate) handles: Vec<Arc<dyn StorageFile>>,
    pub(crate) paths: Vec<PathBuf>,
    /// The log's block CRC seed (its id): set once the file header is read.
    pub(crate) seal: BlockSeal,
    /// An encrypted log's blocks are sealed whole (format version 3).
    pub(crate) encrypted: bool,
    /// What opens them, when the keys were given ([DESIGN §1.15](crate::docs::design#115-encryption-at-rest)).
    pub(crate) opener: Option<Arc<crate::encryption::Opener>>,
    /// Where each block lives in these files.
    pub(crate) layout: Layout,
    /// The oldest block these files hold: the floor's block when a resize
    /// created them ([DESIGN §1.18](crate::docs::design#118-online-resize)), 0 otherwise.
    pub(crate) oldest: BlockNo,
}

/// What one `Writer::write` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WriteDone {
    pub(crate) calls: u64,
    pub(crate) bytes: u64,
}

/// The last block holding data below `end`: the block of `end`, unless `end` is
/// the first data position of its block.
pub(crate) fn last_data_block(end: Lsn) -> BlockNo {
    if end.offset_in_block() == BLOCK_HEADER_BYTES {
        BlockNo(end.block().0 - 1)
    } else {
        end.block()
    }
}

/// `synced_back` for block `block` when the sync frontier is `synced`
/// ([FORMAT §5](crate::docs::format#5-block-512-bytes)): saturating, so a far frontier only weakens the proof.
fn synced_back(block: BlockNo, synced: Lsn) -> u32 {
    u32::try_from(block.0.saturating_sub(synced.block().0)).unwrap_or(u32::MAX)
}

impl Files {
    /// The largest group these files hold (`Layout::group_bytes_max` in
    /// their blocks' geometry).
    pub(crate) fn group_bytes_max(&self) -> u64 {
        self.layout.group_bytes_max(self.seal.geometry())
    }

    /// The log's directory (the files' parent).
    pub(crate) fn dir(&self) -> PathBuf {
        self.paths.first().and_then(|path| path.parent()).map(Path::to_path_buf).unwrap_or_default()
    }

    /// fdatasyncs every file holding a block of `[from, to)`. `started` is when
    /// the caller last read the clock; each fdatasync's duration goes to `on_sync`.
    pub(crate) fn sync_range(
        &self,
        (from, to): (Lsn, Lsn),
        started: Moment,
        mut on_sync: impl FnMut(u64),
    ) -> Result<SyncDone, IoFailure> {
        debug_assert!(from < to);
        let mut done = SyncDone { calls: 0, finished: started };
        for file_index in self.layout.files_between(from.block(), last_data_block(to)) {
            // INV-5: `synced` moves only after this returns Ok for every file.
            // A failure is never retried (INV-6): the caller poisons the log.
            let result = failpoint("writer.sync").and_then(|()| self.handles[file_index].sync_data());
            result.map_err(|source| IoFailure { op: "fdatasync", path: self.paths[file_index].clone(), source })?;
            let now = Moment::now();
            on_sync(now.ns_since(done.finished));
            done.finished = now;
            done.calls += 1;
        }
        Ok(done)
    }
}

/// What one `Files::sync_range` did.
pub(crate) struct SyncDone {
    pub(crate) calls: u64,
    /// When the last fdatasync returned.
    pub(crate) finished: Moment,
}

/// The state the write role owns.
pub(crate) struct Writer {
    /// The partial last block, sealed aside so appenders can keep filling the
    /// ring's copy (InnoDB's write-ahead buffer).
    partial: Box<[u8; BLOCK_BYTES]>,
    /// An encrypted log's session cipher: every block is sealed with it as it
    /// is written ([DESIGN §1.15](crate::docs::design#115-encryption-at-rest)).
    cipher: Option<Arc<BlockCipher>>,
    /// The full blocks below this one were sealed in place in the ring: a
    /// pass that writes them again (after a failed write left `written`
    /// behind) writes them as they are. Sealing an encrypted block twice
    /// would decrypt it under the same nonce (INV-29).
    sealed_below: u64,
    /// The partial block the side buffer holds, and its `data_len`.
    partial_of: Option<(BlockNo, usize)>,
}

impl Writer {
    /// The write role's state; `cipher` seals an encrypted log's blocks.
    pub(crate) fn new(cipher: Option<Arc<BlockCipher>>) -> Self {
        Writer { partial: Box::new([0u8; BLOCK_BYTES]), cipher, sealed_below: 0, partial_of: None }
    }

    /// Writes every block holding data of `[from, to)`, whole blocks from the block
    /// of `from`: full blocks sealed in place in the ring, the partial last block
    /// from the side buffer. One vectored write per file touched.
    ///
    /// In an encrypted log a full block is encrypted in place, once: the ring's
    /// copy of a block below `written` is never read again, and a pass that
    /// writes it again writes it as sealed. The partial block is sealed in the
    /// side buffer each time it grows, with a larger `data_len`; written again
    /// at the same length, the side buffer goes out as it is. So no
    /// `(b, data_len)` is sealed twice (INV-29).
    ///
    /// Preconditions (the write role's): `to <= ready` (INV-2), `from == written`.
    pub(crate) fn write(
        &mut self,
        ring: &RingBuffer,
        files: &Files,
        (from, to): (Lsn, Lsn),
        synced: Lsn,
    ) -> Result<WriteDone, IoFailure> {
        debug_assert!(from < to);
        let first = from.block();
        let full_end = to.block();
        let partial_len = to.offset_in_block() - BLOCK_HEADER_BYTES;
        let seal = (files.seal, self.cipher.as_deref());
        for block in first.0.max(self.sealed_below)..full_end.0 {
            // SAFETY: we hold the write role and the block lies below `ready`, so
            // no appender touches it (INV-2, INV-3).
            #[allow(unsafe_code)]
            unsafe {
                ring.seal_full_block(BlockNo(block), seal, synced_back(BlockNo(block), synced));
            }
        }
        self.sealed_below = self.sealed_below.max(full_end.0);
        if partial_len > 0 && self.partial_of != Some((full_end, partial_len)) {
            debug_assert!(
                self.partial_of.is_none_or(|(block, len)| block != full_end || len < partial_len),
                "the partial block shrank"
            );
            let used = BLOCK_HEADER_BYTES + partial_len;
            // SAFETY: we hold the write role and the partial block's bytes lie
            // below `ready` (the caller's range), so no appender writes them.
            #[allow(unsafe_code)]
            unsafe {
                ring.copy_out(full_end, used, &mut self.partial[..]);
            }
            self.partial[used..].fill(0);
            let synced_back = synced_back(full_end, synced);
            seal_block(&mut self.partial[..], seal, full_end, partial_len, synced_back);
            self.partial_of = Some((full_end, partial_len));
        }
        let block_count = full_end.0 - first.0 + u64::from(partial_len > 0);
        let mut done = WriteDone::default();
        for run in files.layout.runs(first, block_count) {
            let run_end = run.first.0 + run.count;
            let full_run_end = run_end.min(full_end.0);
            // At most two ring pieces (split at the ring's end) and the partial block.
            let mut slices: [&[u8]; 3] = [&[]; 3];
            let mut count = 0;
            let mut block = run.first.0;
            while block < full_run_end {
                let to_ring_end = ring.ring_blocks() - block % ring.ring_blocks();
                let blocks = to_ring_end.min(full_run_end - block);
                // SAFETY: as above; these blocks stay below `ready` and unwritten by
                // appenders until we publish `written`, after the slices are gone.
                #[allow(unsafe_code)]
                let piece = unsafe { ring.blocks(BlockNo(block), blocks) };
                slices[count] = piece;
                count += 1;
                block += blocks;
            }
            if block < run_end {
                debug_assert_eq!(block, full_end.0);
                slices[count] = &self.partial[..];
                count += 1;
            }
            let file = &files.handles[run.file_index];
            let result = failpoint("writer.write").and_then(|()| file.write_all_at(&slices[..count], run.offset));
            result.map_err(|source| IoFailure { op: "write", path: files.paths[run.file_index].clone(), source })?;
            done.calls += 1;
            done.bytes += run.count * BLOCK_BYTES as u64;
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{read_block_header, BlockState, FILE_HEADER_AREA_BYTES};
    use crate::geometry::BLOCK_DATA_BYTES;
    use crate::storage::{MemStorage, Storage};

    fn files(layout: &Layout) -> Files {
        let storage = MemStorage::new();
        let mut handles = Vec::new();
        let mut paths = Vec::new();
        for index in 0..4 {
            let path = PathBuf::from(format!("f{index}"));
            let file = storage.open_file(&path, true).expect("open");
            file.write_all_at(&[&vec![0u8; layout.file_bytes as usize]], 0).expect("size");
            handles.push(file);
            paths.push(path);
        }
        Files {
            handles,
            paths,
            seal: BlockSeal::for_log(1),
            encrypted: false,
            opener: None,
            layout: *layout,
            oldest: BlockNo(0),
        }
    }

    fn read_block(files: &Files, layout: &Layout, block: BlockNo) -> Vec<u8> {
        let (index, offset) = layout.place(block);
        let mut image = vec![0u8; BLOCK_BYTES];
        files.handles[index].read_exact_at(&mut image, offset).expect("read");
        image
    }

    #[test]
    fn writes_full_and_partial_blocks_across_a_file_boundary() {
        let layout = Layout::new(FILE_HEADER_AREA_BYTES + 4 * BLOCK_BYTES as u64);
        let files = files(&layout);
        let ring = RingBuffer::new(8 * BLOCK_BYTES);
        let start = BlockNo(3).data_start();
        let data = vec![7u8; BLOCK_DATA_BYTES + 10];
        // SAFETY: the test's one thread owns the whole ring.
        #[allow(unsafe_code)]
        let end = unsafe { ring.copy_in(start, &data, files.seal.geometry()) };
        let mut writer = Writer::new(None);
        let done = writer.write(&ring, &files, (start, end), start).expect("write");
        // Block 3 is the last of file 0, block 4 the first of file 1.
        assert_eq!(done, WriteDone { calls: 2, bytes: 2 * BLOCK_BYTES as u64 });
        let full = read_block(&files, &layout, BlockNo(3));
        assert!(matches!(read_block_header(&full, files.seal, BlockNo(3)), BlockState::Valid(h) if h.data_len == 492));
        let partial = read_block(&files, &layout, BlockNo(4));
        let BlockState::Valid(header) = read_block_header(&partial, files.seal, BlockNo(4)) else { panic!("partial") };
        assert_eq!(header.data_len, 10);
        assert_eq!(header.synced_back, 1);
        assert!(partial[26..508].iter().all(|&byte| byte == 0));
    }

    /// A pass that writes blocks again — a write failed and left `written`
    /// behind, or a leader wrote after a poison — writes an encrypted log's
    /// blocks as they were sealed. Sealing a full block a second time in
    /// place would run the keystream over its ciphertext: the records would
    /// reach the disk in clear under a valid tag (INV-29; found by review).
    #[test]
    #[cfg(feature = "encryption")]
    fn blocks_written_again_are_not_sealed_again() {
        use crate::encryption::block::{BlockCipher, BlockKeyId};
        use crate::encryption::Key;
        use crate::format::Geometry;
        let layout = Layout::new(FILE_HEADER_AREA_BYTES + 8 * BLOCK_BYTES as u64);
        let mut files = files(&layout);
        files.seal = files.seal.with_geometry(Geometry::Sealed);
        files.encrypted = true;
        let id = BlockKeyId { key_id: 1, session: 1, salt: 9 };
        let cipher = Arc::new(BlockCipher::new(&Key::from_bytes([3; 32]), 1, id));
        let ring = RingBuffer::new(8 * BLOCK_BYTES);
        let start = BlockNo(2).data_start();
        let data: Vec<u8> = (0..700u32).map(|index| b"PLAINTEXT"[index as usize % 9]).collect();
        // SAFETY: the test's one thread owns the whole ring.
        #[allow(unsafe_code)]
        let end = unsafe { ring.copy_in(start, &data, Geometry::Sealed) };
        let mut writer = Writer::new(Some(cipher.clone()));
        let on_disk = |files: &Files| [2, 3].map(|block| read_block(files, &layout, BlockNo(block)));
        writer.write(&ring, &files, (start, end), start).expect("write");
        let first = on_disk(&files);
        writer.write(&ring, &files, (start, end), start).expect("write again");
        assert_eq!(on_disk(&files), first, "the same blocks went out differently");
        for (index, image) in first.iter().enumerate() {
            assert!(!image.windows(9).any(|window| window == b"PLAINTEXT"), "block {index} holds records in clear");
            let mut plain = [0u8; 460];
            cipher.open(image, BlockNo(2 + index as u64), &mut plain).expect("the block opens");
        }
    }

    #[test]
    fn last_data_block_excludes_an_empty_block() {
        assert_eq!(last_data_block(BlockNo(5).data_start()), BlockNo(4));
        assert_eq!(last_data_block(Lsn(5 * 512 + 17)), BlockNo(5));
    }
}
