//! [FORMAT §3](crate::docs::format#3-checkpoint-slot-offsets-4096-and-8192-of-redo0000-512-bytes-each): the two checkpoint slots in `redo.0000`.

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
const CONSUMER_COUNT_OFFSET: usize = KEYS_OFFSET + KEYS_MAX * KEY_ENTRY_BYTES;
const CONSUMERS_OFFSET: usize = CONSUMER_COUNT_OFFSET + size_of::<u32>();
const CONSUMER_ENTRY_BYTES: usize = CONSUMER_NAME_MAX + size_of::<u64>();
const RESIZE_OFFSET: usize = CONSUMERS_OFFSET + CONSUMERS_MAX * CONSUMER_ENTRY_BYTES;
const SLOT_END: usize = RESIZE_OFFSET + size_of::<u64>();
const _: () = assert!(FLAGS_OFFSET + size_of::<u32>() == 52);
const _: () = assert!(CONSUMER_COUNT_OFFSET == 316);
const _: () = assert!(RESIZE_OFFSET == 488);
const _: () = assert!(SLOT_END == 496);
const _: () = assert!(SLOT_END <= CRC_OFFSET);

/// Most consumers a log keeps ([FORMAT §3](crate::docs::format#3-checkpoint-slot-offsets-4096-and-8192-of-redo0000-512-bytes-each), [DESIGN §1.16](crate::docs::design#116-consumers-readers-that-hold-the-logs-space)).
pub(crate) const CONSUMERS_MAX: usize = 7;
/// Longest consumer name, in bytes.
pub(crate) const CONSUMER_NAME_MAX: usize = 16;

/// File offsets of slot A and slot B in `redo.0000`: 4 KiB apart, so a torn
/// write of one cannot touch the other on a 4 KiB-sector device.
pub(crate) const CHECKPOINT_SLOT_OFFSETS: [u64; 2] = [4096, 8192];

/// Flag: the log was closed cleanly and ends exactly at `durable_lsn`.
pub(crate) const CHECKPOINT_CLEAN_SHUTDOWN: u32 = 1;

/// Flag: a recovery is cutting a torn tail at `durable_lsn` ([DESIGN](crate::docs::design)
/// INV-41): the valid blocks past it are the tail it erases, and what their
/// `synced_back` says was synced no longer holds. Written before the erase,
/// cleared by the slot written after it, before the log appends again.
pub(crate) const CHECKPOINT_TAIL_CUT: u32 = 2;

/// Most keys an encrypted log's slot records ([FORMAT §3](crate::docs::format#3-checkpoint-slot-offsets-4096-and-8192-of-redo0000-512-bytes-each)).
pub(crate) const KEYS_MAX: usize = 32;

/// The keys an encrypted log's groups from the checkpoint on were sealed
/// with: `(key_id, key_check)` each ([FORMAT §3](crate::docs::format#3-checkpoint-slot-offsets-4096-and-8192-of-redo0000-512-bytes-each), §6.1). Empty in an
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

/// The consumers a log keeps: a name and the position the writer must not
/// pass a lap beyond (INV-32), in creation order. Empty in a log created
/// before consumers existed: those bytes were reserved and zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConsumerTable {
    entries: Vec<(String, u64)>,
}

impl ConsumerTable {
    pub(crate) fn entries(&self) -> &[(String, u64)] {
        &self.entries
    }

    /// The position of consumer `name`.
    pub(crate) fn get(&self, name: &str) -> Option<u64> {
        self.entries.iter().find(|(entry, _)| entry == name).map(|(_, lsn)| *lsn)
    }

    /// The smallest position, if any consumer is kept.
    pub(crate) fn floor(&self) -> Option<u64> {
        self.entries.iter().map(|(_, lsn)| *lsn).min()
    }

    /// Adds `name` at `lsn`; `false` when the table is full. The caller
    /// checked that the name is new and valid.
    pub(crate) fn insert(&mut self, name: &str, lsn: u64) -> bool {
        if self.entries.len() == CONSUMERS_MAX {
            return false;
        }
        self.entries.push((name.to_owned(), lsn));
        true
    }

    /// Sets an existing consumer's position; `false` if there is none.
    pub(crate) fn set(&mut self, name: &str, lsn: u64) -> bool {
        match self.entries.iter_mut().find(|(entry, _)| entry == name) {
            Some(entry) => {
                entry.1 = lsn;
                true
            }
            None => false,
        }
    }

    /// Removes `name`; `false` if there is none.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(entry, _)| entry != name);
        self.entries.len() != before
    }
}

/// Why `name` cannot name a consumer, if it cannot: 1 to 16 bytes of UTF-8
/// without NUL (the slot pads names with NUL).
pub(crate) fn consumer_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > CONSUMER_NAME_MAX {
        Some("it is longer than 16 bytes")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else {
        None
    }
}

/// A decoded checkpoint slot.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// The consumers (INV-32).
    pub(crate) consumers: ConsumerTable,
    /// Nonzero: a resize committed here; the log is the `redo.NNNN.resize`
    /// files, each this long ([DESIGN §1.18](crate::docs::design#118-online-resize), INV-34).
    pub(crate) resize_file_bytes: u64,
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
        write_u32(&mut block, CONSUMER_COUNT_OFFSET, self.consumers.entries.len() as u32);
        for (index, (name, lsn)) in self.consumers.entries.iter().enumerate() {
            let at = CONSUMERS_OFFSET + index * CONSUMER_ENTRY_BYTES;
            block[at..at + name.len()].copy_from_slice(name.as_bytes());
            write_u64(&mut block, at + CONSUMER_NAME_MAX, *lsn);
        }
        write_u64(&mut block, RESIZE_OFFSET, self.resize_file_bytes);
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
        let consumer_count = read_u32(block, CONSUMER_COUNT_OFFSET) as usize;
        if consumer_count > CONSUMERS_MAX {
            return None;
        }
        let mut consumers = ConsumerTable::default();
        for index in 0..consumer_count {
            let at = CONSUMERS_OFFSET + index * CONSUMER_ENTRY_BYTES;
            let field = &block[at..at + CONSUMER_NAME_MAX];
            let len = field.iter().position(|byte| *byte == 0).unwrap_or(CONSUMER_NAME_MAX);
            let name = std::str::from_utf8(&field[..len]).ok()?;
            if consumer_name_problem(name).is_some() || consumers.get(name).is_some() {
                return None;
            }
            consumers.insert(name, read_u64(block, at + CONSUMER_NAME_MAX));
        }
        Some(CheckpointSlot {
            log_id: u128::from_le_bytes(log_id),
            number: read_u64(block, NUMBER_OFFSET),
            lsn: read_u64(block, LSN_OFFSET),
            durable_lsn: read_u64(block, DURABLE_LSN_OFFSET),
            flags: read_u32(block, FLAGS_OFFSET),
            epoch: read_u32(block, EPOCH_OFFSET),
            keys,
            consumers,
            resize_file_bytes: read_u64(block, RESIZE_OFFSET),
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
        let mut consumers = ConsumerTable::default();
        assert!(consumers.insert("archive", 8000) && consumers.insert("sixteen-bytes-ok", 9000));
        let slot = CheckpointSlot {
            log_id: 7,
            number: 3,
            lsn: 9000,
            durable_lsn: 9100,
            flags: 1,
            epoch: 5,
            keys,
            consumers,
            resize_file_bytes: 1 << 20,
        };
        let mut block = slot.encode();
        assert_eq!(CheckpointSlot::decode(&block), Some(slot.clone()));
        assert_eq!(slot.consumers.floor(), Some(8000));
        block[40] ^= 1;
        assert_eq!(CheckpointSlot::decode(&block), None);
        assert_eq!(CheckpointSlot::decode(&[0u8; 512]), None);
    }

    #[test]
    fn a_slot_with_a_bad_consumer_table_is_no_slot() {
        let mut consumers = ConsumerTable::default();
        assert!(consumers.insert("a", 1));
        let slot = CheckpointSlot {
            log_id: 7,
            number: 3,
            lsn: 9,
            durable_lsn: 9,
            flags: 0,
            epoch: 0,
            keys: KeyTable::default(),
            consumers,
            resize_file_bytes: 0,
        };
        let reseal = |block: &mut [u8; BLOCK_BYTES]| {
            let crc = crc32c::crc32c(&block[..CRC_OFFSET]);
            write_u32(block, CRC_OFFSET, crc);
        };
        let mut too_many = slot.encode();
        write_u32(&mut too_many, CONSUMER_COUNT_OFFSET, CONSUMERS_MAX as u32 + 1);
        reseal(&mut too_many);
        assert_eq!(CheckpointSlot::decode(&too_many), None);
        let mut unnamed = slot.encode();
        unnamed[CONSUMERS_OFFSET] = 0;
        reseal(&mut unnamed);
        assert_eq!(CheckpointSlot::decode(&unnamed), None);
        let mut twice = slot.encode();
        write_u32(&mut twice, CONSUMER_COUNT_OFFSET, 2);
        twice.copy_within(
            CONSUMERS_OFFSET..CONSUMERS_OFFSET + CONSUMER_ENTRY_BYTES,
            CONSUMERS_OFFSET + CONSUMER_ENTRY_BYTES,
        );
        reseal(&mut twice);
        assert_eq!(CheckpointSlot::decode(&twice), None);
        // A log from before consumers: the bytes were reserved and zero.
        assert_eq!(
            CheckpointSlot::decode(&{
                let mut old = slot.encode();
                old[CONSUMER_COUNT_OFFSET..CRC_OFFSET].fill(0);
                reseal(&mut old);
                old
            })
            .map(|slot| slot.consumers),
            Some(ConsumerTable::default())
        );
        assert_eq!(consumer_name_problem(""), Some("it is empty"));
        assert_eq!(consumer_name_problem("seventeen-bytes-x"), Some("it is longer than 16 bytes"));
        assert_eq!(consumer_name_problem("a\0b"), Some("it contains a NUL byte"));
    }

    #[test]
    fn slots_alternate() {
        assert_eq!(CheckpointSlot::slot_index(0), 0);
        assert_eq!(CheckpointSlot::slot_index(1), 1);
        assert_eq!(CheckpointSlot::slot_index(2), 0);
    }
}
