//! The on-disk format, mirroring docs/FORMAT.md section by section.
//!
//! Each submodule encodes and decodes one structure. Decoders never panic on any
//! input: they return a typed reason that the caller turns into an error naming
//! the file and offset.

mod block;
mod checkpoint;
mod file_header;
mod group;

pub(crate) use block::{
    read_block_header, BlockHeader, BlockSeal, BlockState, BLOCK_BYTES, BLOCK_DATA_BYTES, BLOCK_HEADER_BYTES,
    CRC_OFFSET, FIRST_GROUP_OFFSET,
};
pub(crate) use checkpoint::{CheckpointSlot, CHECKPOINT_CLEAN_SHUTDOWN, CHECKPOINT_SLOT_OFFSETS};
pub(crate) use file_header::{FileHeader, FileHeaderError, FILE_HEADER_AREA_BYTES};
pub(crate) use group::{encoded_group_bytes, write_group_header, GroupHeader, GROUP_HEADER_BYTES, RECORD_HEADER_BYTES};

/// The current format version, written in every file header.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Number of files a log consists of (docs/FORMAT.md §1).
pub(crate) const FILE_COUNT: u32 = 4;

pub(crate) fn read_u16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

pub(crate) fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(raw)
}

pub(crate) fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(raw)
}

pub(crate) fn write_u16(bytes: &mut [u8], offset: usize, value: u16) {
    bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn write_u32(bytes: &mut [u8], offset: usize, value: u32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn write_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}
