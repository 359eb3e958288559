//! Log sequence numbers and the arithmetic between data bytes, LSNs and blocks.
//!
//! docs/FORMAT.md §4: an LSN is a byte address in the stream of 512-byte blocks,
//! counting block headers and trailers. `Sn` counts data bytes only; reservation
//! works in `Sn` (one `fetch_add`), everything else in `Lsn`.

use std::fmt;

use crate::geometry::{BLOCK_BYTES, BLOCK_DATA_BYTES, BLOCK_HEADER_BYTES};

/// A log sequence number: the byte address of a position in the log's block stream.
///
/// `append` returns the end LSN of the group it wrote; pass it to `wait` or
/// `checkpoint`. LSNs only grow, and a later group always has a larger LSN.
///
/// An `Lsn` comes from the log (`append`, `end_lsn`, recovery); building one
/// from an integer takes the named [`Lsn::from_u64`], so a length or a record
/// count is never passed where a log position belongs.
///
/// ```
/// use redolog::Lsn;
/// let a = Lsn::from_u64(8229);
/// assert!(a > Lsn::from_u64(8208));
/// assert_eq!(a.to_string(), "8229");
/// assert_eq!(a.as_u64(), 8229);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub(crate) u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Lsn {
    /// The LSN at byte address `value` of the log's block stream: one that an
    /// earlier run returned and the caller stored, say.
    pub const fn from_u64(value: u64) -> Lsn {
        Lsn(value)
    }

    /// The byte address, to store or print.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The absolute number of the block this LSN falls in.
    pub(crate) fn block(self) -> BlockNo {
        BlockNo(self.0 / BLOCK_BYTES as u64)
    }

    /// The offset of this LSN inside its block.
    pub(crate) fn offset_in_block(self) -> usize {
        (self.0 % BLOCK_BYTES as u64) as usize
    }

    /// Whether this LSN names a data position (offset 16..508 in its block).
    pub(crate) fn is_data_position(self) -> bool {
        let offset = self.offset_in_block();
        (BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + BLOCK_DATA_BYTES).contains(&offset)
    }

    /// The data-byte count of a data position. Precondition: `is_data_position`.
    pub(crate) fn to_sn(self) -> Sn {
        debug_assert!(self.is_data_position(), "{self} is not a data position");
        let block = self.0 / BLOCK_BYTES as u64;
        let offset = self.offset_in_block() - BLOCK_HEADER_BYTES;
        Sn(block * BLOCK_DATA_BYTES as u64 + offset as u64)
    }
}

/// A count of data bytes: the position in the log's payload stream, headers excluded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Sn(pub u64);

impl Sn {
    /// The LSN of this data position; a multiple of 492 maps to offset 16 of the
    /// next block (docs/FORMAT.md §4).
    pub(crate) fn to_lsn(self) -> Lsn {
        let block = self.0 / BLOCK_DATA_BYTES as u64;
        let offset = self.0 % BLOCK_DATA_BYTES as u64;
        Lsn(block * BLOCK_BYTES as u64 + offset + BLOCK_HEADER_BYTES as u64)
    }
}

/// The absolute number of a block: `lsn / 512`. Its low and high 32 bits are the
/// `block_no` and `epoch` fields of the block header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockNo(pub u64);

impl BlockNo {
    /// The LSN of the block's first data byte.
    pub(crate) fn data_start(self) -> Lsn {
        Lsn(self.0 * BLOCK_BYTES as u64 + BLOCK_HEADER_BYTES as u64)
    }

    /// The LSN of the block's first byte (its header).
    pub(crate) fn start(self) -> Lsn {
        Lsn(self.0 * BLOCK_BYTES as u64)
    }

    /// The low 32 bits, stored as `block_no`.
    pub(crate) fn low(self) -> u32 {
        self.0 as u32
    }

    /// The high 32 bits, stored as `epoch`.
    pub(crate) fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// Reassembles an absolute number from the header's two halves.
    pub(crate) fn from_parts(block_no: u32, epoch: u32) -> Self {
        BlockNo((u64::from(epoch) << 32) | u64::from(block_no))
    }
}

impl fmt::Display for BlockNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sn_lsn_round_trip_at_block_edges() {
        for sn in [0, 1, 491, 492, 493, 983, 984, 10_000_000] {
            let lsn = Sn(sn).to_lsn();
            assert!(lsn.is_data_position(), "{sn} -> {lsn}");
            assert_eq!(lsn.to_sn(), Sn(sn));
        }
        // A multiple of the payload size is the start of the next block's data.
        assert_eq!(Sn(492).to_lsn(), Lsn(512 + 16));
        assert_eq!(Sn(491).to_lsn(), Lsn(507));
    }

    #[test]
    fn block_number_halves() {
        let b = BlockNo((7u64 << 32) | 42);
        assert_eq!(b.low(), 42);
        assert_eq!(b.epoch(), 7);
        assert_eq!(BlockNo::from_parts(42, 7), b);
    }

    #[test]
    fn header_and_trailer_are_not_data_positions() {
        assert!(!Lsn(512).is_data_position());
        assert!(!Lsn(512 + 15).is_data_position());
        assert!(Lsn(512 + 16).is_data_position());
        assert!(Lsn(512 + 507).is_data_position());
        assert!(!Lsn(512 + 508).is_data_position());
    }
}
