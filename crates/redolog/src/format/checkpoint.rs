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
const EPOCH_OFFSET: usize = FLAGS_OFFSET + size_of::<u32>();
const KEY_COUNT_OFFSET: usize = EPOCH_OFFSET + size_of::<u32>();
const KEYS_OFFSET: usize = KEY_COUNT_OFFSET + size_of::<u32>();
const KEY_ENTRY_BYTES: usize = 2 * size_of::<u32>();
const SLOT_END: usize = KEYS_OFFSET + KEYS_MAX * KEY_ENTRY_BYTES;
const _: () = assert!(FLAGS_OFFSET + size_of::<u32>() == 52);
const _: () = assert!(SLOT_END == 316);
const _: () = assert!(SLOT_END <= CRC_OFFSET);

/// File offsets of slot A and slot B in `redo.0000`: 4 KiB apart, so a torn
/// write of one cannot touch the other on a 4 KiB-sector device.
pub(crate) const CHECKPOINT_SLOT_OFFSETS: [u64; 2] = [4096, 8192];

/// Flag: the log was closed cleanly and ends exactly at `durable_lsn`.
pub(crate) const CHECKPOINT_CLEAN_SHUTDOWN: u32 = 1;

/// Most keys an encrypted log's slot records (docs/FORMAT.md §3).
pub(crate) const KEYS_MAX: usize = 32;

/// The keys an encrypted log's groups from the checkpoint on were sealed
/// with: `(key_id, key_check)` each (docs/FORMAT.md §3, §6.1). Empty in an
/// unencrypted log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyTable {
    len: usize,
    entries: [(u32, u32); KEYS_MAX],
}

impl KeyTable {
    pub(crate) fn entries(&self) -> &[(u32, u32)] {
        &self.entries[..self.len]
    }

    /// The check recorded for `key_id`, if the table holds it.
    pub(crate) fn check_of(&self, key_id: u32) -> Option<u32> {
        self.entries().iter().find(|(id, _)| *id == key_id).map(|(_, check)| *check)
    }

    /// Adds `(key_id, check)` unless the id is there; `false` when full.
    pub(crate) fn insert(&mut self, key_id: u32, check: u32) -> bool {
        if self.check_of(key_id).is_some() {
            return true;
        }
        if self.len == KEYS_MAX {
            return false;
        }
        self.entries[self.len] = (key_id, check);
        self.len += 1;
        true
    }
}

/// A decoded checkpoint slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CheckpointSlot {
    pub(crate) log_id: u128,
    pub(crate) number: u64,
    pub(crate) lsn: u64,
    pub(crate) durable_lsn: u64,
    pub(crate) flags: u32,
    /// An encrypted log's session epoch (the nonces' high part, INV-29); 0
    /// in an unencrypted log.
    pub(crate) epoch: u32,
    pub(crate) keys: KeyTable,
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
        write_u32(&mut block, EPOCH_OFFSET, self.epoch);
        write_u32(&mut block, KEY_COUNT_OFFSET, self.keys.len as u32);
        for (index, (key_id, check)) in self.keys.entries().iter().enumerate() {
            write_u32(&mut block, KEYS_OFFSET + index * KEY_ENTRY_BYTES, *key_id);
            write_u32(&mut block, KEYS_OFFSET + index * KEY_ENTRY_BYTES + 4, *check);
        }
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
        let key_count = read_u32(block, KEY_COUNT_OFFSET) as usize;
        if key_count > KEYS_MAX {
            return None;
        }
        let mut keys = KeyTable::default();
        for index in 0..key_count {
            let at = KEYS_OFFSET + index * KEY_ENTRY_BYTES;
            keys.insert(read_u32(block, at), read_u32(block, at + 4));
        }
        Some(CheckpointSlot {
            log_id: u128::from_le_bytes(log_id),
            number: read_u64(block, NUMBER_OFFSET),
            lsn: read_u64(block, LSN_OFFSET),
            durable_lsn: read_u64(block, DURABLE_LSN_OFFSET),
            flags: read_u32(block, FLAGS_OFFSET),
            epoch: read_u32(block, EPOCH_OFFSET),
            keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_slot() {
        let mut keys = KeyTable::default();
        assert!(keys.insert(4, 0xdead_beef) && keys.insert(9, 1) && keys.insert(4, 0));
        assert_eq!(keys.entries(), [(4, 0xdead_beef), (9, 1)]);
        let slot = CheckpointSlot { log_id: 7, number: 3, lsn: 9000, durable_lsn: 9100, flags: 1, epoch: 5, keys };
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
