//! A block's geometry ([FORMAT §5](crate::docs::format#5-block-512-bytes)): its size and the offsets of its
//! header fields. Below `lsn` and `format`, which both use it; a file with no
//! imports of the crate, so the loom models (tests/loom_*.rs) compile the real
//! constants.

use std::mem::size_of;

/// Every block is 512 bytes: one sector on every device we target.
pub(crate) const BLOCK_BYTES: usize = 512;

// docs/FORMAT.md §5: block_no (4) | data_len (2) | first_group (2) | epoch (4) | synced_back (4)
pub(crate) const BLOCK_NO_OFFSET: usize = 0;
pub(crate) const DATA_LEN_OFFSET: usize = BLOCK_NO_OFFSET + size_of::<u32>();
pub(crate) const FIRST_GROUP_OFFSET: usize = DATA_LEN_OFFSET + size_of::<u16>();
pub(crate) const EPOCH_OFFSET: usize = FIRST_GROUP_OFFSET + size_of::<u16>();
pub(crate) const SYNCED_BACK_OFFSET: usize = EPOCH_OFFSET + size_of::<u32>();
pub(crate) const BLOCK_HEADER_BYTES: usize = SYNCED_BACK_OFFSET + size_of::<u32>();
pub(crate) const BLOCK_TRAILER_BYTES: usize = size_of::<u32>();
pub(crate) const CRC_OFFSET: usize = BLOCK_BYTES - BLOCK_TRAILER_BYTES;
pub(crate) const BLOCK_DATA_BYTES: usize = BLOCK_BYTES - BLOCK_HEADER_BYTES - BLOCK_TRAILER_BYTES;

/// Data bytes in a block that carries its own AES-GCM seal (format version 3,
/// [FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3)): the 16-byte tag and the 16 bytes of key fields come
/// out of the data area.
pub(crate) const SEALED_BLOCK_DATA_BYTES: usize = BLOCK_DATA_BYTES - 32;

/// How many data bytes each block of a log holds. Every position in the log's
/// stream converts between data bytes (`Sn`) and LSNs through it. Version 1
/// holds [`BLOCK_DATA_BYTES`]; a block sealed whole (version 3) holds
/// [`SEALED_BLOCK_DATA_BYTES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Geometry {
    /// 492 data bytes: format version 1.
    Clear,
    /// 460 data bytes: format version 3, blocks sealed whole.
    #[cfg_attr(not(test), allow(dead_code))]
    Sealed,
}

impl Geometry {
    /// Data bytes per block.
    #[inline(always)]
    pub(crate) const fn data_bytes(self) -> usize {
        match self {
            Geometry::Clear => BLOCK_DATA_BYTES,
            Geometry::Sealed => SEALED_BLOCK_DATA_BYTES,
        }
    }

    /// The offset just past a block's last data byte.
    #[inline(always)]
    pub(crate) const fn data_end(self) -> usize {
        BLOCK_HEADER_BYTES + self.data_bytes()
    }
}

/// A geometry known when the code is compiled: the append path is built once
/// per geometry, so its conversions divide by a constant (a multiply and a
/// shift) instead of by a value read at run time.
pub(crate) trait FixedGeometry {
    const GEOMETRY: Geometry;
}

/// [`Geometry::Clear`] at compile time.
pub(crate) struct ClearBlocks;

impl FixedGeometry for ClearBlocks {
    const GEOMETRY: Geometry = Geometry::Clear;
}

/// [`Geometry::Sealed`] at compile time.
pub(crate) struct SealedBlocks;

impl FixedGeometry for SealedBlocks {
    const GEOMETRY: Geometry = Geometry::Sealed;
}
