//! [FORMAT §2](crate::docs::format#2-file-header-offset-0-one-512-byte-block): the file header, block 0 of every file.

use std::mem::size_of;

use super::{read_u32, read_u64, write_u32, write_u64, Geometry, BLOCK_BYTES, CRC_OFFSET};

const MAGIC: [u8; 8] = *b"redolog\0";

// docs/FORMAT.md §2
const MAGIC_OFFSET: usize = 0;
const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
const FILE_NO_OFFSET: usize = VERSION_OFFSET + size_of::<u32>();
const FILE_COUNT_OFFSET: usize = FILE_NO_OFFSET + size_of::<u32>();
const BLOCK_BYTES_OFFSET: usize = FILE_COUNT_OFFSET + size_of::<u32>();
const LOG_ID_OFFSET: usize = BLOCK_BYTES_OFFSET + size_of::<u32>();
const FILE_BYTES_OFFSET: usize = LOG_ID_OFFSET + size_of::<u128>();
const FIRST_LSN_OFFSET: usize = FILE_BYTES_OFFSET + size_of::<u64>();
const UNSYNCED_MAX_OFFSET: usize = FIRST_LSN_OFFSET + size_of::<u64>();
const CIPHER_OFFSET: usize = UNSYNCED_MAX_OFFSET + size_of::<u64>();
const OLDEST_LSN_OFFSET: usize = CIPHER_OFFSET + size_of::<u32>();
const HEADER_END: usize = OLDEST_LSN_OFFSET + size_of::<u64>();
const _: () = assert!(OLDEST_LSN_OFFSET == 68);
const _: () = assert!(HEADER_END <= CRC_OFFSET);

/// Bytes at the start of every file before its first log block: the header block,
/// then the two checkpoint slots, each 4 KiB apart ([FORMAT §1](crate::docs::format#1-directory)).
pub(crate) const FILE_HEADER_AREA_BYTES: u64 = 3 * 4096;

/// The decoded file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub(crate) format_version: u32,
    pub(crate) file_no: u32,
    pub(crate) file_count: u32,
    pub(crate) block_bytes: u32,
    pub(crate) log_id: u128,
    pub(crate) file_bytes: u64,
    pub(crate) first_lsn: u64,
    pub(crate) unsynced_bytes_max: u64,
    /// The blocks' cipher: [`CIPHER_NONE`] (format version 1) or
    /// [`CIPHER_AES_256_GCM`] (format version 3, [FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3)).
    pub(crate) cipher: u32,
    /// The oldest LSN the files hold: the floor when a resize created them
    /// ([DESIGN §1.18](crate::docs::design#118-online-resize)); 0 for files made with the log.
    pub(crate) oldest_lsn: u64,
}

/// No encryption: format version 1.
pub(crate) const CIPHER_NONE: u32 = 0;
/// Blocks sealed whole with AES-256-GCM: format version 3.
pub(crate) const CIPHER_AES_256_GCM: u32 = 1;

/// Why a file header could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileHeaderError {
    /// The magic bytes are not redolog's: this is not a redolog file.
    NotALog,
    /// Magic present but the CRC does not match.
    BadChecksum,
}

impl FileHeader {
    /// How many data bytes the log's blocks hold: 492 in clear (version 1),
    /// 460 in a block sealed whole (version 3, [FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3)).
    pub(crate) fn geometry(&self) -> Geometry {
        #[cfg(test)]
        if self.format_version == super::FORMAT_VERSION_TEST_SEALED_GEOMETRY {
            return Geometry::Sealed;
        }
        if self.format_version == super::FORMAT_VERSION_ENCRYPTED {
            return Geometry::Sealed;
        }
        Geometry::Clear
    }

    pub(crate) fn encode(&self) -> [u8; BLOCK_BYTES] {
        let mut block = [0u8; BLOCK_BYTES];
        block[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()].copy_from_slice(&MAGIC);
        write_u32(&mut block, VERSION_OFFSET, self.format_version);
        write_u32(&mut block, FILE_NO_OFFSET, self.file_no);
        write_u32(&mut block, FILE_COUNT_OFFSET, self.file_count);
        write_u32(&mut block, BLOCK_BYTES_OFFSET, self.block_bytes);
        block[LOG_ID_OFFSET..LOG_ID_OFFSET + 16].copy_from_slice(&self.log_id.to_le_bytes());
        write_u64(&mut block, FILE_BYTES_OFFSET, self.file_bytes);
        write_u64(&mut block, FIRST_LSN_OFFSET, self.first_lsn);
        write_u64(&mut block, UNSYNCED_MAX_OFFSET, self.unsynced_bytes_max);
        write_u32(&mut block, CIPHER_OFFSET, self.cipher);
        write_u64(&mut block, OLDEST_LSN_OFFSET, self.oldest_lsn);
        let crc = crc32c::crc32c(&block[..CRC_OFFSET]);
        write_u32(&mut block, CRC_OFFSET, crc);
        block
    }

    /// Decodes a header block. The version is returned as read; the caller
    /// decides whether it is supported.
    pub(crate) fn decode(block: &[u8]) -> Result<Self, FileHeaderError> {
        if block.len() < BLOCK_BYTES || block[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()] != MAGIC {
            return Err(FileHeaderError::NotALog);
        }
        if read_u32(block, CRC_OFFSET) != crc32c::crc32c(&block[..CRC_OFFSET]) {
            return Err(FileHeaderError::BadChecksum);
        }
        let mut log_id = [0u8; 16];
        log_id.copy_from_slice(&block[LOG_ID_OFFSET..LOG_ID_OFFSET + 16]);
        Ok(FileHeader {
            format_version: read_u32(block, VERSION_OFFSET),
            file_no: read_u32(block, FILE_NO_OFFSET),
            file_count: read_u32(block, FILE_COUNT_OFFSET),
            block_bytes: read_u32(block, BLOCK_BYTES_OFFSET),
            log_id: u128::from_le_bytes(log_id),
            file_bytes: read_u64(block, FILE_BYTES_OFFSET),
            first_lsn: read_u64(block, FIRST_LSN_OFFSET),
            unsynced_bytes_max: read_u64(block, UNSYNCED_MAX_OFFSET),
            cipher: read_u32(block, CIPHER_OFFSET),
            oldest_lsn: read_u64(block, OLDEST_LSN_OFFSET),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> FileHeader {
        FileHeader {
            format_version: 1,
            file_no: 2,
            file_count: 4,
            block_bytes: 512,
            log_id: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
            file_bytes: 1 << 28,
            first_lsn: 8208,
            unsynced_bytes_max: 1 << 24,
            cipher: CIPHER_NONE,
            oldest_lsn: 1 << 20,
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(FileHeader::decode(&header().encode()), Ok(header()));
    }

    #[test]
    fn foreign_bytes_are_not_a_log() {
        assert_eq!(FileHeader::decode(&[0u8; 512]), Err(FileHeaderError::NotALog));
        assert_eq!(FileHeader::decode(b"short"), Err(FileHeaderError::NotALog));
    }

    #[test]
    fn corrupted_header_is_a_checksum_error() {
        let mut block = header().encode();
        block[45] ^= 0x10;
        assert_eq!(FileHeader::decode(&block), Err(FileHeaderError::BadChecksum));
    }
}
