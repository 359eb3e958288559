//! A block's geometry (docs/FORMAT.md §5): its size and the offsets of its
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
