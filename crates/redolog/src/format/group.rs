//! [FORMAT §6](crate::docs::format#6-groups-and-records): groups and records in the data stream.
//!
//! `group := body_bytes:u32 record_count:u32 record*`, `record := len:u32 bytes`.

use std::mem::size_of;

use super::{read_u32, write_u32};

pub(crate) const GROUP_HEADER_BYTES: usize = 2 * size_of::<u32>();
pub(crate) const RECORD_HEADER_BYTES: usize = size_of::<u32>();

/// A decoded group header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupHeader {
    /// Bytes of record frames after the header.
    pub(crate) body_bytes: u64,
    pub(crate) record_count: u64,
}

impl GroupHeader {
    pub(crate) fn decode(bytes: &[u8; GROUP_HEADER_BYTES]) -> Self {
        GroupHeader { body_bytes: u64::from(read_u32(bytes, 0)), record_count: u64::from(read_u32(bytes, 4)) }
    }

    /// Whether the counts can describe a real group: every record needs at
    /// least its 4-byte length.
    pub(crate) fn is_plausible(&self) -> bool {
        self.record_count * RECORD_HEADER_BYTES as u64 <= self.body_bytes
    }

    pub(crate) fn total_bytes(&self) -> u64 {
        GROUP_HEADER_BYTES as u64 + self.body_bytes
    }
}

/// Encoded size of a group holding `records`, or `None` if it does not fit the
/// format's 32-bit fields.
pub(crate) fn encoded_group_bytes(records: &[&[u8]]) -> Option<u64> {
    let mut body: u64 = 0;
    for record in records {
        u32::try_from(record.len()).ok()?;
        body += (RECORD_HEADER_BYTES + record.len()) as u64;
    }
    u32::try_from(body).ok()?;
    u32::try_from(records.len()).ok()?;
    Some(GROUP_HEADER_BYTES as u64 + body)
}

/// The group header for `records`. Precondition: `encoded_group_bytes` is `Some`.
pub(crate) fn write_group_header(records: &[&[u8]], total_bytes: u64) -> [u8; GROUP_HEADER_BYTES] {
    let mut header = [0u8; GROUP_HEADER_BYTES];
    write_u32(&mut header, 0, (total_bytes - GROUP_HEADER_BYTES as u64) as u32);
    write_u32(&mut header, 4, records.len() as u32);
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_grammar() {
        assert_eq!(encoded_group_bytes(&[]), Some(8));
        assert_eq!(encoded_group_bytes(&[b"hello", b""]), Some(8 + 9 + 4));
        let header = write_group_header(&[b"hello", b""], 21);
        let decoded = GroupHeader::decode(&header);
        assert_eq!(decoded, GroupHeader { body_bytes: 13, record_count: 2 });
        assert!(decoded.is_plausible());
        assert_eq!(decoded.total_bytes(), 21);
    }

    #[test]
    fn implausible_counts_are_detected() {
        let header = GroupHeader { body_bytes: 7, record_count: 2 };
        assert!(!header.is_plausible());
    }
}
