//! The on-disk format, mirroring docs/FORMAT.md section by section.
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
    read_block_header, BlockHeader, BlockSeal, BlockState, BLOCK_BYTES, BLOCK_DATA_BYTES, BLOCK_HEADER_BYTES,
    CRC_OFFSET, FIRST_GROUP_OFFSET,
};
pub(crate) use bytes::{read_u16, read_u32, read_u64, write_u16, write_u32, write_u64};
pub(crate) use checkpoint::{
    consumer_name_problem, CheckpointSlot, ConsumerTable, KeyTable, CHECKPOINT_CLEAN_SHUTDOWN, CHECKPOINT_SLOT_OFFSETS,
    CONSUMERS_MAX, KEYS_MAX,
};
pub(crate) use file_header::{FileHeader, FileHeaderError, CIPHER_AES_256_GCM, CIPHER_NONE, FILE_HEADER_AREA_BYTES};
pub(crate) use group::{
    encoded_group_bytes, write_group_header, GroupHeader, GROUP_HEADER_BYTES, RECORD_HEADER_BYTES, SEAL_HEADER_BYTES,
    SEAL_OVERHEAD_BYTES, SEAL_TAG_BYTES,
};

/// The format version of an unencrypted log, written in every file header.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The format version of an encrypted log (docs/FORMAT.md §6.1): a build
/// that reads only version 1 refuses it instead of misreading its groups.
pub(crate) const FORMAT_VERSION_ENCRYPTED: u32 = 2;

/// Number of files a log consists of (docs/FORMAT.md §1).
pub(crate) const FILE_COUNT: u32 = 4;
