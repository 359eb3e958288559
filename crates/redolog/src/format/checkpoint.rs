//! docs/FORMAT.md §3: the two checkpoint slots in `redo.0000`.

use std::mem::size_of;

use super::{read_u32, read_u64, write_u32, write_u64, BLOCK_BYTES, CRC_OFFSET};

const MAGIC: [u8; 8] = *b"redockpt";

// docs/FORMAT.md §3
const MAGIC_OFFSET: usize = 0;
const LOG_ID_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
const NUMBER_OFFSET: usize = LOG_ID_OFFSET + size_of::<u128>();
const LSN_OFFSET: usize = NUMBER_OFFSET + size_of::<u64>();
const DURABLE_LSN_OFFSET: usize = LSN_OFFSET + size_of::<u64>();
const FLAGS_OFFSET: usize = DURABLE_LSN_OFFSET + size_of::<u64>();
const SLOT_END: usize = FLAGS_OFFSET + size_of::<u32>();
const _: () = assert!(SLOT_END == 52);
const _: () = assert!(SLOT_END <= CRC_OFFSET);

/// File offsets of slot A and slot B in `redo.0000`: 4 KiB apart, so a torn
/// write of one cannot touch the other on a 4 KiB-sector device.
pub(crate) const CHECKPOINT_SLOT_OFFSETS: [u64; 2] = [4096, 8192];

/// Flag: the log was closed cleanly and ends exactly at `durable_lsn`.
pub(crate) const CHECKPOINT_CLEAN_SHUTDOWN: u32 = 1;

/// A decoded checkpoint slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CheckpointSlot {
    pub(crate) log_id: u128,
    pub(crate) number: u64,
    pub(crate) lsn: u64,
    pub(crate) durable_lsn: u64,
    pub(crate) flags: u32,
}

impl CheckpointSlot {
    /// The slot (0 = A, 1 = B) checkpoint `number` is written to (INV-15).
    pub(crate) fn slot_index(number: u64) -> usize {
        (number % 2) as usize
    }

    pub(crate) fn encode(&self) -> [u8; BLOCK_BYTES] {
        let mut block = [0u8; BLOCK_BYTES];
        block[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()].copy_from_slice(&MAGIC);
        block[LOG_ID_OFFSET..LOG_ID_OFFSET + 16].copy_from_slice(&self.log_id.to_le_bytes());
        write_u64(&mut block, NUMBER_OFFSET, self.number);
        write_u64(&mut block, LSN_OFFSET, self.lsn);
        write_u64(&mut block, DURABLE_LSN_OFFSET, self.durable_lsn);
        write_u32(&mut block, FLAGS_OFFSET, self.flags);
        let crc = crc32c::crc32c(&block[..CRC_OFFSET]);
        write_u32(&mut block, CRC_OFFSET, crc);
        block
    }

    /// Decodes a slot; `None` if it is empty, torn or not a checkpoint.
    pub(crate) fn decode(block: &[u8]) -> Option<Self> {
        if block.len() < BLOCK_BYTES || block[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()] != MAGIC {
            return None;
        }
        if read_u32(block, CRC_OFFSET) != crc32c::crc32c(&block[..CRC_OFFSET]) {
            return None;
        }
        let mut log_id = [0u8; 16];
        log_id.copy_from_slice(&block[LOG_ID_OFFSET..LOG_ID_OFFSET + 16]);
        Some(CheckpointSlot {
            log_id: u128::from_le_bytes(log_id),
            number: read_u64(block, NUMBER_OFFSET),
            lsn: read_u64(block, LSN_OFFSET),
            durable_lsn: read_u64(block, DURABLE_LSN_OFFSET),
            flags: read_u32(block, FLAGS_OFFSET),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_slot() {
        let slot = CheckpointSlot { log_id: 7, number: 3, lsn: 9000, durable_lsn: 9100, flags: 1 };
        let mut block = slot.encode();
        assert_eq!(CheckpointSlot::decode(&block), Some(slot));
        block[40] ^= 1;
        assert_eq!(CheckpointSlot::decode(&block), None);
        assert_eq!(CheckpointSlot::decode(&[0u8; 512]), None);
    }

    #[test]
    fn slots_alternate() {
        assert_eq!(CheckpointSlot::slot_index(0), 0);
        assert_eq!(CheckpointSlot::slot_index(1), 1);
        assert_eq!(CheckpointSlot::slot_index(2), 0);
    }
}
