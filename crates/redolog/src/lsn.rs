//! Log sequence numbers and the arithmetic between data bytes, LSNs and blocks.
//!
//! [FORMAT §4](crate::docs::format#4-lsns-and-the-block-stream): an LSN is a byte address in the stream of 512-byte blocks,
//! counting block headers and trailers. `Sn` counts data bytes only; reservation
//! works in `Sn` (one `fetch_add`), everything else in `Lsn`.

use std::fmt;

use crate::geometry::{Geometry, BLOCK_BYTES, BLOCK_HEADER_BYTES};

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

    /// Whether this LSN names a data position in a log of `geometry` (offset
    /// 16..508 of its block in clear).
    #[inline]
    pub(crate) fn is_data_position(self, geometry: Geometry) -> bool {
        let offset = self.offset_in_block();
        (BLOCK_HEADER_BYTES..geometry.data_end()).contains(&offset)
    }

    /// The data-byte count of a data position. Precondition: `is_data_position`.
    #[inline]
    pub(crate) fn to_sn(self, geometry: Geometry) -> Sn {
        debug_assert!(self.is_data_position(geometry), "{self} is not a data position");
        let block = self.0 / BLOCK_BYTES as u64;
        let offset = self.offset_in_block() - BLOCK_HEADER_BYTES;
        Sn(block * geometry.data_bytes() as u64 + offset as u64)
    }
}

/// A count of data bytes: the position in the log's payload stream, headers excluded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Sn(pub u64);

impl Sn {
    /// The LSN of this data position in a log of `geometry`; a multiple of
    /// the data bytes per block (492 in clear) maps to offset 16 of the next
    /// block ([FORMAT §4](crate::docs::format#4-lsns-and-the-block-stream)). Inlined, so a constant `geometry` divides by
    /// a constant.
    #[inline]
    pub(crate) fn to_lsn(self, geometry: Geometry) -> Lsn {
        let data_bytes = geometry.data_bytes() as u64;
        let block = self.0 / data_bytes;
        let offset = self.0 % data_bytes;
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
            let lsn = Sn(sn).to_lsn(Geometry::Clear);
            assert!(lsn.is_data_position(Geometry::Clear), "{sn} -> {lsn}");
            assert_eq!(lsn.to_sn(Geometry::Clear), Sn(sn));
        }
        // A multiple of the payload size is the start of the next block's data.
        assert_eq!(Sn(492).to_lsn(Geometry::Clear), Lsn(512 + 16));
        assert_eq!(Sn(491).to_lsn(Geometry::Clear), Lsn(507));
    }

    #[test]
    fn sealed_blocks_hold_460_data_bytes() {
        let sealed = Geometry::Sealed;
        for sn in [0, 1, 459, 460, 461, 919, 920, 10_000_000] {
            let lsn = Sn(sn).to_lsn(sealed);
            assert!(lsn.is_data_position(sealed), "{sn} -> {lsn}");
            assert_eq!(lsn.to_sn(sealed), Sn(sn));
        }
        assert_eq!(Sn(459).to_lsn(sealed), Lsn(16 + 459));
        assert_eq!(Sn(460).to_lsn(sealed), Lsn(512 + 16));
        // The seal's 32 bytes and the CRC are not data positions.
        assert!(!Lsn(512 + 476).is_data_position(sealed));
        assert!(Lsn(512 + 476).is_data_position(Geometry::Clear));
    }

    proptest::proptest! {
        /// Every data byte count converts to a data position and back, and
        /// consecutive counts map to increasing LSNs, in both geometries.
        #[test]
        fn sn_lsn_round_trip(sn in 0u64..1 << 50, sealed: bool) {
            let geometry = if sealed { Geometry::Sealed } else { Geometry::Clear };
            let lsn = Sn(sn).to_lsn(geometry);
            proptest::prop_assert!(lsn.is_data_position(geometry));
            proptest::prop_assert_eq!(lsn.to_sn(geometry), Sn(sn));
            proptest::prop_assert!(Sn(sn + 1).to_lsn(geometry) > lsn);
        }
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
        let clear = Geometry::Clear;
        assert!(!Lsn(512).is_data_position(clear));
        assert!(!Lsn(512 + 15).is_data_position(clear));
        assert!(Lsn(512 + 16).is_data_position(clear));
        assert!(Lsn(512 + 507).is_data_position(clear));
        assert!(!Lsn(512 + 508).is_data_position(clear));
    }
}
