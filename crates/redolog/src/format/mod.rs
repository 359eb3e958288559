//! The on-disk format, mirroring [FORMAT](crate::docs::format) section by section.
//!
//! Each submodule encodes and decodes one structure. Decoders never panic on any
//! input: they return a typed reason that the caller turns into an error naming
//! the file and offset.

mod block;
mod bytes;
mod checkpoint;
mod file_header;
mod group;

pub(crate) use block::{
    read_block_header, BlockHeader, BlockSeal, BlockState, ClearBlocks, FixedGeometry, Geometry, SealedBlocks,
    BLOCK_BYTES, BLOCK_HEADER_BYTES, CRC_OFFSET, FIRST_GROUP_OFFSET,
};
pub(crate) use bytes::{read_u16, read_u32, read_u64, write_u16, write_u32, write_u64};
#[cfg(feature = "encryption")]
pub(crate) use checkpoint::KEYS_MAX;
pub(crate) use checkpoint::{
    consumer_name_problem, CheckpointSlot, ConsumerTable, KeyTable, CHECKPOINT_CLEAN_SHUTDOWN, CHECKPOINT_SLOT_OFFSETS,
    CHECKPOINT_TAIL_CUT, CONSUMERS_MAX,
};
pub(crate) use file_header::{FileHeader, FileHeaderError, CIPHER_AES_256_GCM, CIPHER_NONE, FILE_HEADER_AREA_BYTES};
pub(crate) use group::{encoded_group_bytes, write_group_header, GroupHeader, GROUP_HEADER_BYTES, RECORD_HEADER_BYTES};

/// The format version of an unencrypted log, written in every file header.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The format version of an encrypted log, its blocks sealed whole
/// ([FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3)): a build that reads only version 1 refuses it
/// instead of misreading its blocks. Version 2 (groups sealed one by one)
/// was replaced by it before any release, and is refused.
pub(crate) const FORMAT_VERSION_ENCRYPTED: u32 = 3;
/// Tests only: a log in clear whose blocks hold 460 data bytes, format
/// version 3's geometry ([DESIGN §1.15.1](crate::docs::design#1151-why-blocks-not-groups-format-version-3-replaced-version-2)), so the geometry is tested
/// end to end apart from the cipher. No build writes it outside tests.
#[cfg(test)]
pub(crate) const FORMAT_VERSION_TEST_SEALED_GEOMETRY: u32 = 0x7E57_0003;

#[cfg(test)]
thread_local! {
    /// Set by a test on its own thread: the next log it creates in clear is
    /// written as [`FORMAT_VERSION_TEST_SEALED_GEOMETRY`].
    pub(crate) static CREATE_WITH_SEALED_GEOMETRY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Number of files a log consists of ([FORMAT §1](crate::docs::format#1-directory)).
pub(crate) const FILE_COUNT: u32 = 4;
