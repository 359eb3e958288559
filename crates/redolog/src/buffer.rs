//! The in-memory ring of blocks that appenders copy into and the writer writes from.
//!
//! [DESIGN §1.2–1.3](crate::docs::design#12-ring-space). The ring holds blocks in their on-disk layout: byte
//! `lsn` lives at ring offset `lsn mod ring_bytes`, and a block never straddles the
//! end of the ring. Many threads write disjoint byte ranges at once, so the memory
//! is `UnsafeCell` and every access states which protocol rule makes it exclusive.

use std::cell::UnsafeCell;

use crate::encryption::block::{seal_block, BlockCipher};
use crate::format::{write_u16, BlockSeal, Geometry, BLOCK_BYTES, FIRST_GROUP_OFFSET};
use crate::lsn::{BlockNo, Lsn};

/// A ring of `ring_bytes` bytes (a power of two, at least one block).
pub(crate) struct RingBuffer {
    bytes: Box<[UnsafeCell<u8>]>,
    ring_blocks: u64,
    /// `ring_blocks - 1`: block indexing is a mask, not a division, on every copy.
    block_mask: u64,
}

// SAFETY: all access to `bytes` goes through the methods below, each of which
// touches only bytes the calling thread owns under the log's protocol: an
// appender owns the data bytes of its reserved range and the `first_group`
// fields INV-9 assigns it, once INV-3 gave it ring space; the writer owns the
// blocks below `ready` (INV-2) until it stores `written`. No two threads ever own
// the same byte at the same time, and ownership passes through the SeqCst/Acquire/
// Release operations on the link buffer tail and on `written`.
#[allow(unsafe_code)]
unsafe impl Sync for RingBuffer {}

impl RingBuffer {
    pub(crate) fn new(ring_bytes: usize) -> Self {
        assert!(ring_bytes.is_power_of_two() && ring_bytes >= BLOCK_BYTES, "ring of {ring_bytes} bytes");
        let bytes = (0..ring_bytes).map(|_| UnsafeCell::new(0)).collect();
        let ring_blocks = (ring_bytes / BLOCK_BYTES) as u64;
        RingBuffer { bytes, ring_blocks, block_mask: ring_blocks - 1 }
    }

    /// Number of blocks the ring holds.
    pub(crate) fn ring_blocks(&self) -> u64 {
        self.ring_blocks
    }

    fn block_index(&self, block: BlockNo) -> usize {
        ((block.0 & self.block_mask) as usize) * BLOCK_BYTES
    }

    fn base(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.bytes.as_ptr())
    }

    /// Copies `data` into the data bytes starting at data position `at`, skipping
    /// block headers and trailers of blocks of `geometry`. Returns the data
    /// position after the last byte.
    ///
    /// # Safety
    /// The calling thread owns these bytes: it reserved them (INV-1) and has
    /// ring space for them (INV-3), so no other thread reads or writes them
    /// while it copies.
    #[allow(unsafe_code)]
    #[inline]
    pub(crate) unsafe fn copy_in(&self, mut at: Lsn, mut data: &[u8], geometry: Geometry) -> Lsn {
        debug_assert!(at.is_data_position(geometry));
        while !data.is_empty() {
            let offset = at.offset_in_block();
            let room = geometry.data_end() - offset;
            let count = room.min(data.len());
            let index = self.block_index(at.block()) + offset;
            debug_assert!(index + count <= self.bytes.len());
            // SAFETY: `index + count` lies inside the ring (a block never straddles
            // its end and `count` stays inside one block's data area), and the
            // caller owns these bytes (the contract above), so nobody reads or
            // writes them concurrently.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), self.base().add(index), count);
            }
            data = &data[count..];
            at = if count == room { BlockNo(at.block().0 + 1).data_start() } else { Lsn(at.0 + count as u64) };
        }
        at
    }

    /// Sets the `first_group` field of `block`.
    ///
    /// # Safety
    /// INV-9 assigns this field to the calling thread, and it has ring space
    /// for the block (INV-3): no other thread touches these two bytes.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn set_first_group(&self, block: BlockNo, first_group: u16) {
        let index = self.block_index(block) + FIRST_GROUP_OFFSET;
        // SAFETY: the two bytes are inside the ring and owned by the caller (INV-9).
        unsafe {
            std::ptr::copy_nonoverlapping(first_group.to_le_bytes().as_ptr(), self.base().add(index), 2);
        }
    }

    /// Seals a full block in place: header fields, an encrypted log's cipher
    /// (its data encrypted in place), CRC ([FORMAT §5](crate::docs::format#5-block-512-bytes), §6.1).
    ///
    /// # Safety
    /// The caller must own the block: it holds the write role and the block lies
    /// entirely below `ready` (INV-2), so no appender touches it.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn seal_full_block(
        &self,
        block: BlockNo,
        (seal, cipher): (BlockSeal, Option<&BlockCipher>),
        synced_back: u32,
    ) {
        let index = self.block_index(block);
        // SAFETY: in bounds; exclusivity is the caller's contract above, and the
        // slice does not outlive this call.
        let image = unsafe { std::slice::from_raw_parts_mut(self.base().add(index), BLOCK_BYTES) };
        seal_block(image, (seal, cipher), block, seal.geometry().data_bytes(), synced_back);
    }

    /// Shared access to `count` consecutive blocks from `first`, which must not
    /// wrap the ring end.
    ///
    /// # Safety
    /// As for `seal_full_block`: no thread may write these blocks while the slice lives.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn blocks(&self, first: BlockNo, count: u64) -> &[u8] {
        let index = self.block_index(first);
        let len = count as usize * BLOCK_BYTES;
        assert!(index + len <= self.bytes.len(), "block range wraps the ring");
        // SAFETY: in bounds (asserted); no concurrent writer by the caller's contract.
        unsafe { std::slice::from_raw_parts(self.base().add(index), len) }
    }

    /// Copies the first `len` bytes of `block` into `out`.
    ///
    /// # Safety
    /// The caller owns those bytes: it holds the write role and they lie below
    /// `ready` (INV-2), so no appender writes them while they are copied.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn copy_out(&self, block: BlockNo, len: usize, out: &mut [u8]) {
        assert!(len <= BLOCK_BYTES && out.len() >= len);
        let index = self.block_index(block);
        // SAFETY: in bounds; bytes below `ready` are no longer written by any
        // appender (the contract above), and bytes past `len` are not read.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base().add(index), out.as_mut_ptr(), len);
        }
    }

    /// Writes a whole block image (used to load the last block after recovery,
    /// before the log is shared).
    pub(crate) fn load_block(&mut self, block: BlockNo, image: &[u8]) {
        assert_eq!(image.len(), BLOCK_BYTES);
        let index = self.block_index(block);
        for (cell, byte) in self.bytes[index..index + BLOCK_BYTES].iter_mut().zip(image) {
            *cell.get_mut() = *byte;
        }
    }
}

/// Writes the first_group value into a block image (for tests and recovery).
pub(crate) fn set_first_group_in(image: &mut [u8], first_group: u16) {
    write_u16(image, FIRST_GROUP_OFFSET, first_group);
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    fn copy_in(ring: &RingBuffer, at: Lsn, data: &[u8]) -> Lsn {
        // SAFETY: the test's one thread owns the whole ring.
        unsafe { ring.copy_in(at, data, Geometry::Clear) }
    }

    fn copy_out(ring: &RingBuffer, block: BlockNo, out: &mut [u8]) {
        // SAFETY: as above.
        unsafe { ring.copy_out(block, BLOCK_BYTES, out) }
    }

    fn set_first_group(ring: &RingBuffer, block: BlockNo, first_group: u16) {
        // SAFETY: as above.
        unsafe { ring.set_first_group(block, first_group) }
    }

    #[test]
    fn copy_skips_headers_and_trailers() {
        let ring = RingBuffer::new(4 * BLOCK_BYTES);
        let data: Vec<u8> = (0..600u32).map(|value| value as u8).collect();
        let start = BlockNo(1).data_start();
        let end = copy_in(&ring, start, &data);
        assert_eq!(end, Lsn(2 * 512 + 16 + (600 - 492)));
        let mut block = [0u8; BLOCK_BYTES];
        copy_out(&ring, BlockNo(1), &mut block);
        assert_eq!(&block[16..508], &data[..492]);
        assert_eq!(&block[..16], &[0u8; 16]);
        copy_out(&ring, BlockNo(2), &mut block);
        assert_eq!(&block[16..16 + 108], &data[492..]);
    }

    #[test]
    fn sealed_blocks_leave_their_last_32_data_bytes_to_the_seal() {
        let ring = RingBuffer::new(4 * BLOCK_BYTES);
        let data = vec![0xAB; 600];
        let start = BlockNo(1).data_start();
        // SAFETY: the test's one thread owns the whole ring.
        let end = unsafe { ring.copy_in(start, &data, Geometry::Sealed) };
        assert_eq!(end, Lsn(2 * 512 + 16 + (600 - 460)));
        let mut block = [0u8; BLOCK_BYTES];
        copy_out(&ring, BlockNo(1), &mut block);
        assert!(block[16..476].iter().all(|&byte| byte == 0xAB));
        assert!(block[476..].iter().all(|&byte| byte == 0), "the seal's bytes and the CRC stay the writer's");
        copy_out(&ring, BlockNo(2), &mut block);
        assert!(block[16..16 + 140].iter().all(|&byte| byte == 0xAB));
        assert_eq!(block[16 + 140], 0);
    }

    #[test]
    fn ring_wraps_at_block_granularity() {
        let ring = RingBuffer::new(2 * BLOCK_BYTES);
        // Block 3 shares ring space with block 1.
        copy_in(&ring, BlockNo(3).data_start(), b"lap two");
        let mut block = [0u8; BLOCK_BYTES];
        copy_out(&ring, BlockNo(1), &mut block);
        assert_eq!(&block[16..23], b"lap two");
        set_first_group(&ring, BlockNo(3), 16);
        copy_out(&ring, BlockNo(1), &mut block);
        assert_eq!(&block[6..8], &16u16.to_le_bytes());
    }
}
