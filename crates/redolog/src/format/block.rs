//! [FORMAT §5](crate::docs::format#5-block-512-bytes): the 512-byte block.

use super::{read_u16, read_u32, write_u16, write_u32};
use crate::lsn::BlockNo;

pub(crate) use crate::geometry::*;

const _: () = assert!(BLOCK_HEADER_BYTES == 16);
const _: () = assert!(BLOCK_DATA_BYTES == 492);
const _: () = assert!(SEALED_BLOCK_DATA_BYTES == 460);
const _: () = assert!(CRC_OFFSET == 508);
// data_len and first_group are u16.
const _: () = assert!(BLOCK_BYTES <= u16::MAX as usize);

/// The CRC seed of one log's blocks: CRC-32C of its 16-byte `log_id`. A block's
/// CRC covers the id and bytes 0..508 ([FORMAT §5](crate::docs::format#5-block-512-bytes)), so a block of another
/// log never passes for one of this log, even at the same place and lap (found
/// by the mutated_log fuzzer, which spliced such a block in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockSeal {
    seed: u32,
    /// How many data bytes this log's blocks hold.
    geometry: Geometry,
}

impl BlockSeal {
    /// The blocks of log `log_id`, in clear (format versions 1 and 2).
    pub(crate) fn for_log(log_id: u128) -> Self {
        BlockSeal { seed: crc32c::crc32c(&log_id.to_le_bytes()), geometry: Geometry::Clear }
    }

    /// The same log's blocks holding `geometry`'s data bytes.
    pub(crate) const fn with_geometry(self, geometry: Geometry) -> Self {
        BlockSeal { geometry, ..self }
    }

    /// How many data bytes this log's blocks hold.
    #[inline]
    pub(crate) const fn geometry(self) -> Geometry {
        self.geometry
    }

    /// The CRC of `block` as this log writes it.
    pub(crate) fn crc(self, block: &[u8]) -> u32 {
        crc32c::crc32c_append(self.seed, &block[..CRC_OFFSET])
    }

    /// Writes `block`'s CRC, over everything before it.
    pub(crate) fn write_crc(self, block: &mut [u8]) {
        write_u32(block, CRC_OFFSET, self.crc(block));
    }
}

/// The decoded header of a block whose CRC matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    pub(crate) number: BlockNo,
    /// Data bytes used, 0..=492 (0..=460 in a block sealed whole).
    pub(crate) data_len: usize,
    /// Offset of the first group header starting in the block, or 0.
    pub(crate) first_group: usize,
    /// Distance back to the block of the sync frontier when this block was written.
    pub(crate) synced_back: u32,
}

impl BlockHeader {
    /// Writes the header fields and the CRC into `block` of a log in clear
    /// (an encrypted log's blocks: `encryption::block::seal_block`).
    /// `first_group` is left as it is: appenders own it ([DESIGN INV-9](crate::docs::design#2-invariants)).
    #[cfg(test)]
    pub(crate) fn seal(block: &mut [u8], seal: BlockSeal, number: BlockNo, data_len: usize, synced_back: u32) {
        Self::write_fields(block, seal, number, data_len, synced_back);
        seal.write_crc(block);
    }

    /// Writes the header fields into `block`, all but `first_group`.
    pub(crate) fn write_fields(block: &mut [u8], seal: BlockSeal, number: BlockNo, data_len: usize, synced_back: u32) {
        debug_assert_eq!(block.len(), BLOCK_BYTES);
        debug_assert!(data_len <= seal.geometry.data_bytes());
        write_u32(block, BLOCK_NO_OFFSET, number.low());
        write_u16(block, DATA_LEN_OFFSET, data_len as u16);
        write_u32(block, EPOCH_OFFSET, number.epoch());
        write_u32(block, SYNCED_BACK_OFFSET, synced_back);
    }

    /// The absolute block number of the sync frontier this block vouches for.
    pub(crate) fn synced_block(&self) -> BlockNo {
        BlockNo(self.number.0.saturating_sub(u64::from(self.synced_back)))
    }
}

/// What a block read from its place in the ring turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockState {
    /// CRC matches and the block number is the one expected here.
    Valid(BlockHeader),
    /// All 512 bytes are zero: never written since the file was created.
    Unused,
    /// CRC matches but the block belongs to another place or lap of the ring.
    Misplaced(BlockHeader),
    /// CRC mismatch, or a header field out of range.
    Bad,
}

/// Classifies `block` of the log sealed with `seal`, expected to hold block
/// number `expected`. Never panics.
pub(crate) fn read_block_header(block: &[u8], seal: BlockSeal, expected: BlockNo) -> BlockState {
    debug_assert_eq!(block.len(), BLOCK_BYTES);
    if read_u32(block, CRC_OFFSET) != seal.crc(block) {
        if block.iter().all(|&byte| byte == 0) {
            return BlockState::Unused;
        }
        return BlockState::Bad;
    }
    let number = BlockNo::from_parts(read_u32(block, BLOCK_NO_OFFSET), read_u32(block, EPOCH_OFFSET));
    let data_len = usize::from(read_u16(block, DATA_LEN_OFFSET));
    let first_group = usize::from(read_u16(block, FIRST_GROUP_OFFSET));
    // A group may start right after the last data byte of a partial block: the
    // group before it ended there and recorded where the next one begins.
    let first_group_ok = first_group == 0
        || ((BLOCK_HEADER_BYTES..=BLOCK_HEADER_BYTES + data_len).contains(&first_group) && first_group < CRC_OFFSET);
    if data_len > seal.geometry.data_bytes() || !first_group_ok {
        return BlockState::Bad;
    }
    let header = BlockHeader { number, data_len, first_group, synced_back: read_u32(block, SYNCED_BACK_OFFSET) };
    if number == expected {
        BlockState::Valid(header)
    } else {
        BlockState::Misplaced(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEAL: BlockSeal = BlockSeal { seed: 0x1234_5678, geometry: Geometry::Clear };

    fn sealed(number: u64, data_len: usize, first_group: u16) -> Vec<u8> {
        let mut block = vec![0u8; BLOCK_BYTES];
        write_u16(&mut block, FIRST_GROUP_OFFSET, first_group);
        for byte in &mut block[BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + data_len] {
            *byte = 0xAB;
        }
        BlockHeader::seal(&mut block, SEAL, BlockNo(number), data_len, 3);
        block
    }

    #[test]
    fn sealed_block_reads_back() {
        let block = sealed((1 << 32) + 5, 100, 16);
        let state = read_block_header(&block, SEAL, BlockNo((1 << 32) + 5));
        let BlockState::Valid(header) = state else { panic!("{state:?}") };
        assert_eq!(header.data_len, 100);
        assert_eq!(header.first_group, 16);
        assert_eq!(header.synced_block(), BlockNo((1 << 32) + 2));
    }

    #[test]
    fn block_from_another_lap_is_misplaced() {
        let block = sealed(5, BLOCK_DATA_BYTES, 0);
        assert!(matches!(read_block_header(&block, SEAL, BlockNo(5 + 1024)), BlockState::Misplaced(_)));
    }

    #[test]
    fn block_of_another_log_is_bad() {
        let block = sealed(5, BLOCK_DATA_BYTES, 0);
        assert_eq!(read_block_header(&block, BlockSeal::for_log(7), BlockNo(5)), BlockState::Bad);
        assert_ne!(BlockSeal::for_log(7), BlockSeal::for_log(8));
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let block = sealed(9, 300, 40);
        for bit in 0..BLOCK_BYTES * 8 {
            let mut flipped = block.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(read_block_header(&flipped, SEAL, BlockNo(9)), BlockState::Bad, "bit {bit}");
        }
    }

    #[test]
    fn zero_block_is_unused() {
        assert_eq!(read_block_header(&[0u8; BLOCK_BYTES], SEAL, BlockNo(1)), BlockState::Unused);
    }

    #[test]
    fn out_of_range_fields_are_bad_even_with_a_good_crc() {
        let mut block = sealed(9, 10, 0);
        write_u16(&mut block, DATA_LEN_OFFSET, 493);
        let crc = SEAL.crc(&block);
        write_u32(&mut block, CRC_OFFSET, crc);
        assert_eq!(read_block_header(&block, SEAL, BlockNo(9)), BlockState::Bad);

        // first_group pointing past the data.
        let mut block = sealed(9, 10, 30);
        let crc = SEAL.crc(&block);
        write_u32(&mut block, CRC_OFFSET, crc);
        assert_eq!(read_block_header(&block, SEAL, BlockNo(9)), BlockState::Bad);
    }

    #[test]
    fn a_sealed_log_block_holds_at_most_460_data_bytes() {
        let sealed_log = SEAL.with_geometry(Geometry::Sealed);
        for (data_len, valid) in [(460, true), (461, false), (492, false)] {
            let mut block = vec![0u8; BLOCK_BYTES];
            write_u16(&mut block, DATA_LEN_OFFSET, data_len);
            write_u32(&mut block, BLOCK_NO_OFFSET, 9);
            let crc = sealed_log.crc(&block);
            write_u32(&mut block, CRC_OFFSET, crc);
            let state = read_block_header(&block, sealed_log, BlockNo(9));
            assert_eq!(matches!(state, BlockState::Valid(_)), valid, "data_len {data_len}: {state:?}");
        }
    }
}
