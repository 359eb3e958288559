//! The append path: reserve, wait for space, copy, publish (docs/DESIGN.md §1.1–1.4).
//!
//! No lock is taken here. The only shared writes are the `fetch_add` on `sn`, the
//! appender's own ring bytes and link slot, and the link-buffer tail.

use crate::core::{PoisonOnPanic, Shared, SN_CLOSED};
use crate::error::{Error, Result};
use crate::format::{
    encoded_group_bytes, write_group_header, BLOCK_DATA_BYTES, GROUP_HEADER_BYTES, RECORD_HEADER_BYTES,
};
use crate::lsn::{BlockNo, Lsn, Sn};

/// A group's encoded bytes, produced piece by piece without building a buffer.
struct GroupBytes<'a> {
    header: [u8; GROUP_HEADER_BYTES],
    records: &'a [&'a [u8]],
}

impl GroupBytes<'_> {
    /// Copies encoded bytes `[skip, skip + len)` of the group into the ring at `at`.
    fn copy_range(&self, shared: &Shared, at: Lsn, skip: u64, len: u64) -> Lsn {
        let mut cursor = Cursor { shared, at, position: 0, skip, end: skip + len };
        // The group header and the first record's length go out as one piece: a
        // single-record group (the common commit) is then two copies, not three.
        let mut head = [0u8; GROUP_HEADER_BYTES + RECORD_HEADER_BYTES];
        head[..GROUP_HEADER_BYTES].copy_from_slice(&self.header);
        let Some((first, rest)) = self.records.split_first() else {
            cursor.emit(&self.header);
            return cursor.at;
        };
        head[GROUP_HEADER_BYTES..].copy_from_slice(&(first.len() as u32).to_le_bytes());
        cursor.emit(&head);
        cursor.emit(first);
        for record in rest {
            if cursor.position >= cursor.end {
                break;
            }
            cursor.emit(&(record.len() as u32).to_le_bytes());
            cursor.emit(record);
        }
        cursor.at
    }
}

/// Walks the encoded group, copying the part inside `[skip, end)`.
struct Cursor<'a> {
    shared: &'a Shared,
    at: Lsn,
    position: u64,
    skip: u64,
    end: u64,
}

impl Cursor<'_> {
    fn emit(&mut self, piece: &[u8]) {
        let piece_start = self.position;
        self.position += piece.len() as u64;
        if self.position <= self.skip || piece_start >= self.end {
            return;
        }
        let from = self.skip.saturating_sub(piece_start) as usize;
        let to = (self.end - piece_start).min(piece.len() as u64) as usize;
        self.at = self.shared.ring.copy_in(self.at, &piece[from..to]);
    }
}

impl Shared {
    /// Appends one group; returns its end LSN. Never waits for durability, only
    /// for ring or link-buffer space.
    pub(crate) fn append_group(&self, records: &[&[u8]]) -> Result<Lsn> {
        let bytes = self.check_group_size(records)?;
        self.check_poison()?;
        // INV-1: one fetch_add reserves the range. SeqCst: the link buffer's head
        // skips its slot check when no reservation lies past its link, which needs
        // reservations in the same total order as its tail store (link_buf.rs).
        // The bytes themselves are published through the link buffer.
        let start_sn = self.sn().fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        if start_sn & SN_CLOSED != 0 {
            return Err(Error::Closed);
        }
        let group = GroupBytes { header: write_group_header(records, bytes), records };
        // Poisons the log if we unwind between reserving and publishing: the hole
        // would otherwise block every later commit forever. Forgotten on the way
        // out, so the common path pays nothing for it.
        let guard = PoisonOnPanic { shared: self, op: "append" };
        let end = self.copy_group(&group, Sn(start_sn), bytes);
        std::mem::forget(guard);
        let end = end?;
        // One counter update per group in the common case of one record: the
        // no-wait profile showed the metrics' read-modify-writes at 10% of an append.
        self.metrics.groups.add(1);
        match records.len() {
            1 => {}
            0 => self.metrics.empty_groups.add(1),
            count => self.metrics.records_beyond_one.add(count as u64 - 1),
        }
        Ok(end)
    }

    fn check_group_size(&self, records: &[&[u8]]) -> Result<u64> {
        let format_limit = u64::from(u32::MAX);
        let Some(bytes) = encoded_group_bytes(records) else {
            let bytes = records.iter().map(|record| 4 + record.len() as u64).sum::<u64>() + 8;
            return Err(Error::GroupTooLarge { bytes, limit: format_limit, limit_name: "the format's 32-bit length" });
        };
        if bytes > self.config.group_bytes_max {
            return Err(Error::GroupTooLarge {
                bytes,
                limit: self.config.group_bytes_max,
                limit_name: "Config::group_bytes_max",
            });
        }
        // The whole group must fit between a checkpoint at its start and the end of
        // the writable ring (INV-7), with a block to spare at each end.
        let capacity = (self.layout.ring_blocks - 2) * BLOCK_DATA_BYTES as u64;
        if bytes > capacity {
            return Err(Error::GroupTooLarge { bytes, limit: capacity, limit_name: "the log capacity" });
        }
        Ok(bytes)
    }

    /// Copies the group in chunks of at most half the ring, each published as its
    /// own link, so a group larger than the ring streams through it.
    fn copy_group(&self, group: &GroupBytes<'_>, start: Sn, bytes: u64) -> Result<Lsn> {
        let group_end = Sn(start.0 + bytes).to_lsn();
        let chunk_max = (self.ring.ring_blocks() / 2).max(1) * BLOCK_DATA_BYTES as u64;
        // Equal chunks, so none is shorter than a link-buffer granule (the last
        // of `chunk_max`-sized chunks could be one byte).
        let chunks = bytes.div_ceil(chunk_max);
        let chunk_len = bytes.div_ceil(chunks);
        let mut done = 0;
        while done < bytes {
            if done > 0 {
                self.metrics.extra_chunks.add(1);
            }
            let len = chunk_len.min(bytes - done);
            let chunk_start = Sn(start.0 + done).to_lsn();
            let chunk_end = Sn(start.0 + done + len).to_lsn();
            self.wait_ring_space(chunk_end.block())?;
            self.wait_link_space(chunk_start)?;
            let copied_to = group.copy_range(self, chunk_start, done, len);
            debug_assert_eq!(copied_to, chunk_end);
            self.set_first_groups(chunk_start, chunk_end, group_end);
            if let Some((old, new)) = self.link.add(chunk_start.0, chunk_end.0, || self.reserved_end().0) {
                self.ready_events.notify_range(old, new);
            }
            done += len;
        }
        Ok(group_end)
    }

    /// INV-9: `first_group` of every block whose first data byte is in
    /// `(chunk_start, chunk_end]` — the group ends in it, or passes through it.
    fn set_first_groups(&self, chunk_start: Lsn, chunk_end: Lsn, group_end: Lsn) {
        for block in chunk_start.block().0 + 1..=chunk_end.block().0 {
            let block = BlockNo(block);
            let first_group = if group_end.block() == block { group_end.offset_in_block() as u16 } else { 0 };
            self.ring.set_first_group(block, first_group);
        }
    }

    /// INV-3: waits until ring block `last` may be written.
    fn wait_ring_space(&self, last: BlockNo) -> Result<()> {
        let ring_blocks = self.ring.ring_blocks();
        if last.0 < self.written().block().0 + ring_blocks {
            // Not counted: `no_waits` is derived from the chunk count (metrics.rs).
            return Ok(());
        }
        // Free when `written` reaches the block that shares the ring slot with `last`
        // plus one: then the whole previous lap of that slot is written.
        let target = BlockNo(last.0 + 1 - ring_blocks).start();
        self.wait_written_for(target, &self.metrics.on_buffer_space)
    }

    /// Waits until the link buffer has a slot for a link starting at `from`.
    fn wait_link_space(&self, from: Lsn) -> Result<()> {
        if self.link.has_space(from.0) {
            // Not counted: `no_waits` is derived from the chunk count (metrics.rs).
            return Ok(());
        }
        let target = self.link.space_target(from.0);
        let waited = self
            .ready_events
            .wait(target, crate::wait::Spin::NONE, || self.is_poisoned() || self.link.has_space(from.0));
        self.metrics.on_recent_written.record(true, waited);
        self.check_poison()
    }
}
