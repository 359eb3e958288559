//! The append path: reserve, wait for space, copy, publish ([DESIGN §1.1–1.4](crate::docs::design#11-reserve)).
//!
//! No lock is taken here. The only shared writes are the `fetch_add` on `sn`, the
//! appender's own ring bytes and link slot, and the link-buffer tail.

use crate::buffer::RingBuffer;

use crate::error::{Error, Result};
use crate::format::{
    encoded_group_bytes, write_group_header, ClearBlocks, FixedGeometry, Geometry, SealedBlocks, GROUP_HEADER_BYTES,
    RECORD_HEADER_BYTES,
};
use crate::link_buf::LinkBuf;
use crate::lsn::{BlockNo, Lsn, Sn};
use crate::metrics::MetricsRecorder;
use crate::pipeline::{PoisonOnPanic, Port, Site, Stages};
use crate::sync::atomic::Ordering;
use std::marker::PhantomData;

/// A group in clear, produced piece by piece without building a buffer.
struct ClearGroup<'a> {
    header: [u8; GROUP_HEADER_BYTES],
    records: &'a [&'a [u8]],
}

impl ClearGroup<'_> {
    /// Copies encoded bytes `[skip, skip + len)` of the group into the ring at
    /// `at`, in blocks of `B`'s geometry.
    fn copy_range<B: FixedGeometry>(&self, ring: &RingBuffer, at: Lsn, skip: u64, len: u64) -> Lsn {
        let mut cursor = Cursor::<B> { ring, at, position: 0, skip, end: skip + len, geometry: PhantomData };
        let (header, records) = (&self.header, self.records);
        // The group header and the first record's length go out as one piece: a
        // single-record group (the common commit) is then two copies, not three.
        let mut head = [0u8; GROUP_HEADER_BYTES + RECORD_HEADER_BYTES];
        head[..GROUP_HEADER_BYTES].copy_from_slice(header);
        let Some((first, rest)) = records.split_first() else {
            cursor.emit(header);
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

/// Walks the encoded group, copying the part inside `[skip, end)` into
/// blocks of `B`'s geometry.
struct Cursor<'a, B> {
    ring: &'a RingBuffer,
    at: Lsn,
    position: u64,
    skip: u64,
    end: u64,
    geometry: PhantomData<B>,
}

impl<B: FixedGeometry> Cursor<'_, B> {
    fn emit(&mut self, piece: &[u8]) {
        let piece_start = self.position;
        self.position += piece.len() as u64;
        if self.position <= self.skip || piece_start >= self.end {
            return;
        }
        let from = self.skip.saturating_sub(piece_start) as usize;
        let to = (self.end - piece_start).min(piece.len() as u64) as usize;
        // SAFETY: the appender reserved these bytes (INV-1) and waited for their
        // ring space (INV-3) before copying: nobody else touches them.
        #[allow(unsafe_code)]
        let at = unsafe { self.ring.copy_in(self.at, &piece[from..to], B::GEOMETRY) };
        self.at = at;
    }
}

/// How far a publish moved `ready`, `(old, new)`, for the caller to notify.
pub(crate) type Moved = Option<(Lsn, Lsn)>;

/// Bit 63 of the reservation counter: the log is closed; appends fail with
/// `Error::Closed`.
const SN_CLOSED: u64 = 1 << 63;

/// The append stage: the reservation counter, the ring the groups are copied
/// into, and the link buffer (MySQL's `recent_written`) that publishes the
/// completed prefix, `ready`.
pub(crate) struct Appender {
    ring: RingBuffer,
    link: LinkBuf,
    /// `Config::group_bytes_max`.
    group_bytes_max: u64,
    /// The most data a group may hold: the writable ring of files less a block
    /// at each end (INV-7). Lowered by a shrinking resize (§1.18).
    capacity: crate::sync::atomic::AtomicU64,
    /// How many data bytes a block holds: the append path is compiled once
    /// per geometry and picks its copy here, once per group.
    geometry: Geometry,
}

impl Appender {
    /// An appender whose next group starts at `end`; `last_block` is the image
    /// of the block holding `end`.
    /// `group_bytes_max` is the configured limit, `capacity` the files' own
    /// (`Layout::group_bytes_max`), `geometry` their blocks'.
    pub(crate) fn new(
        ring_bytes: usize,
        (end, last_block): (Lsn, &[u8]),
        group_bytes_max: u64,
        capacity: u64,
        geometry: Geometry,
    ) -> Self {
        let mut ring = RingBuffer::new(ring_bytes);
        ring.load_block(end.block(), last_block);
        // Reach 1/16 of the ring, as MySQL sizes recent_written (1 MiB by default).
        let link_capacity = (ring_bytes >> (4 + crate::link_buf::GRANULE_SHIFT)).max(256);
        Appender {
            ring,
            link: LinkBuf::new(link_capacity, end.0, end.to_sn(geometry).0),
            group_bytes_max,
            capacity: crate::sync::atomic::AtomicU64::new(capacity),
            geometry,
        }
    }

    /// Sets the largest group the files hold: a resize lowers it before a
    /// shrink and sets the new files' after its switch ([DESIGN §1.18](crate::docs::design#118-online-resize)).
    pub(crate) fn set_capacity(&self, capacity: u64) {
        self.capacity.store(capacity, Ordering::Relaxed);
    }

    /// The largest group the files hold now.
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity.load(Ordering::Relaxed)
    }

    /// The ring the writer reads from.
    pub(crate) fn ring(&self) -> &RingBuffer {
        &self.ring
    }

    /// The link buffer that publishes `ready` (the closed LSN's sits beside it).
    pub(crate) fn link(&self) -> &LinkBuf {
        &self.link
    }

    /// End of the completed prefix: every byte before it is copied (INV-2).
    pub(crate) fn ready(&self) -> Lsn {
        Lsn(self.link.tail())
    }

    /// Next data byte to reserve (INV-1). The counter lives on the link
    /// buffer's tail line: every append touches both.
    fn sn(&self) -> &std::sync::atomic::AtomicU64 {
        self.link.reserved()
    }

    /// Where a group of `records` would end if it were reserved now, or
    /// `None` if it is too large to append (the append says why).
    pub(crate) fn end_after(&self, records: &[&[u8]]) -> Option<Lsn> {
        let bytes = encoded_group_bytes(records)?;
        let sn = self.sn().load(Ordering::SeqCst) & !SN_CLOSED;
        Some(Sn(sn + bytes).to_lsn(self.geometry))
    }

    /// End of everything reserved so far.
    pub(crate) fn reserved_end(&self) -> Lsn {
        self.reserved_end_in(self.geometry)
    }

    /// `reserved_end` in blocks of `geometry`: the append path passes its
    /// constant.
    #[inline(always)]
    fn reserved_end_in(&self, geometry: Geometry) -> Lsn {
        Sn(self.sn().load(Ordering::SeqCst) & !SN_CLOSED).to_lsn(geometry)
    }

    /// Closes the log to appends; returns the end of what was reserved, or
    /// `None` if it was closed already.
    pub(crate) fn close(&self) -> Option<Lsn> {
        let previous = self.sn().fetch_or(SN_CLOSED, Ordering::SeqCst);
        (previous & SN_CLOSED == 0).then(|| Sn(previous).to_lsn(self.geometry))
    }

    /// Appends one group; returns its start and end LSNs, and the stretch the
    /// last publish moved `ready` by, which the caller must notify
    /// (`Stages::ready_moved`, merged with the closed tail's). Never waits for
    /// durability, only for ring space (through the write stage) or
    /// link-buffer space. The caller closes the group (`closed.rs`).
    pub(crate) fn append_group<W, P: Port<Writer = W>>(
        &self,
        records: &[&[u8]],
        stages: &Stages<W>,
        port: &P,
        metrics: &MetricsRecorder,
    ) -> Result<(Lsn, Lsn, Moved)> {
        match self.geometry {
            Geometry::Clear => self.append_in::<ClearBlocks, W, P>(records, stages, port, metrics),
            Geometry::Sealed => self.append_in::<SealedBlocks, W, P>(records, stages, port, metrics),
        }
    }

    /// `append_group` in blocks of `B`'s geometry, so every conversion between
    /// data bytes and LSNs divides by a constant.
    #[inline(always)]
    fn append_in<B: FixedGeometry, W, P: Port<Writer = W>>(
        &self,
        records: &[&[u8]],
        stages: &Stages<W>,
        port: &P,
        metrics: &MetricsRecorder,
    ) -> Result<(Lsn, Lsn, Moved)> {
        let bytes = self.check_group_size(records)?;
        stages.check()?;
        let start_sn = self.reserve(bytes)?;
        let guard = PoisonOnPanic { stages, op: "append" };
        let group = ClearGroup { header: write_group_header(records, bytes), records };
        let end = self.copy_group::<B, W, P>(&group, Sn(start_sn), bytes, stages, port, metrics);
        std::mem::forget(guard);
        let (end, moved) = end?;
        // One counter update per group in the common case of one record: the
        // no-wait profile showed the metrics' read-modify-writes at 10% of an append.
        metrics.groups.add(1);
        match records.len() {
            1 => {}
            0 => metrics.empty_groups.add(1),
            count => metrics.records_beyond_one.add(count as u64 - 1),
        }
        Ok((Sn(start_sn).to_lsn(B::GEOMETRY), end, moved))
    }

    /// INV-1: one fetch_add reserves `bytes`; returns their start. SeqCst: the
    /// link buffer's head skips its slot check when no reservation lies past
    /// its link, which needs reservations in the same total order as its tail
    /// store (link_buf.rs). The bytes themselves are published through the link
    /// buffer. The caller must publish what it reserved: until then a hole
    /// blocks every later commit, so it poisons the log if it unwinds
    /// (`PoisonOnPanic`; forgotten on the way out, so the common path pays
    /// nothing for it).
    fn reserve(&self, bytes: u64) -> Result<u64> {
        let start_sn = self.sn().fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        if start_sn & SN_CLOSED != 0 {
            // Given back: a closed log's end stays where its close left it
            // (the simulation found a checkpoint at a closed log's end,
            // moved by a refused append, waiting for bytes nobody writes).
            self.sn().fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
            return Err(Error::Closed);
        }
        Ok(start_sn)
    }

    fn check_group_size(&self, records: &[&[u8]]) -> Result<u64> {
        let format_limit = u64::from(u32::MAX);
        let Some(bytes) =
            encoded_group_bytes(records).filter(|bytes| *bytes - GROUP_HEADER_BYTES as u64 <= format_limit)
        else {
            let bytes = records.iter().map(|record| 4 + record.len() as u64).sum::<u64>() + 8;
            return Err(Error::GroupTooLarge { bytes, limit: format_limit, limit_name: "the format's 32-bit length" });
        };
        if bytes > self.group_bytes_max {
            return Err(Error::GroupTooLarge {
                bytes,
                limit: self.group_bytes_max,
                limit_name: "Config::group_bytes_max",
            });
        }
        // The whole group must fit between a checkpoint at its start and the end of
        // the writable ring (INV-7), with a block to spare at each end.
        let capacity = self.capacity.load(Ordering::Relaxed);
        if bytes > capacity {
            return Err(Error::GroupTooLarge {
                bytes,
                limit: capacity,
                limit_name: "the largest group the log's files hold (Log::usable_bytes less a block at each end and each block's framing)",
            });
        }
        Ok(bytes)
    }

    /// Copies the group in chunks of at most half the ring, each published as its
    /// own link, so a group larger than the ring streams through it. Returns the
    /// group's end and, if publishing its last chunk moved `ready`, the stretch
    /// it moved by, which the caller must notify (`Stages::ready_moved`).
    fn copy_group<B: FixedGeometry, W, P: Port<Writer = W>>(
        &self,
        group: &ClearGroup<'_>,
        start: Sn,
        bytes: u64,
        stages: &Stages<W>,
        port: &P,
        metrics: &MetricsRecorder,
    ) -> Result<(Lsn, Moved)> {
        let group_end = Sn(start.0 + bytes).to_lsn(B::GEOMETRY);
        let chunk_max = (self.ring.ring_blocks() / 2).max(1) * B::GEOMETRY.data_bytes() as u64;
        // Equal chunks, so none is shorter than a link-buffer granule (the last
        // of `chunk_max`-sized chunks could be one byte).
        let chunks = bytes.div_ceil(chunk_max);
        let chunk_len = bytes.div_ceil(chunks);
        let mut done = 0;
        while done < bytes {
            if done > 0 {
                metrics.extra_chunks.add(1);
            }
            let len = chunk_len.min(bytes - done);
            let chunk_start = Sn(start.0 + done).to_lsn(B::GEOMETRY);
            let chunk_end = Sn(start.0 + done + len).to_lsn(B::GEOMETRY);
            self.wait_ring_space(chunk_end.block(), stages, port)?;
            self.wait_link_space(chunk_start, stages, metrics)?;
            let copied_to = group.copy_range::<B>(&self.ring, chunk_start, done, len);
            debug_assert_eq!(copied_to, chunk_end);
            self.set_first_groups(chunk_start, chunk_end, group_end);
            // INV-1: the chunk lies in this appender's reservation. Per append, so
            // checked in debug builds only (the release hot path is ~70 ns).
            debug_assert!(group_end <= self.reserved_end(), "INV-1: group end {group_end} past the reserved end");
            let moved = self.link.add(chunk_start.0, chunk_end.0, || self.reserved_end_in(B::GEOMETRY).0);
            done += len;
            match moved {
                // The last chunk's notice goes to the caller, to merge with
                // the closed tail's (one notification per group, not two).
                Some((old, new)) if done >= bytes => return Ok((group_end, Some((Lsn(old), Lsn(new))))),
                Some((old, new)) => stages.ready_moved(Lsn(old), Lsn(new)),
                None => {}
            }
        }
        Ok((group_end, None))
    }

    /// INV-9: `first_group` of every block whose first data byte is in
    /// `(chunk_start, chunk_end]` — the group ends in it, or passes through it.
    fn set_first_groups(&self, chunk_start: Lsn, chunk_end: Lsn, group_end: Lsn) {
        for block in chunk_start.block().0 + 1..=chunk_end.block().0 {
            let block = BlockNo(block);
            let first_group = if group_end.block() == block { group_end.offset_in_block() as u16 } else { 0 };
            // SAFETY: INV-9 gives this field to the appender whose chunk holds the
            // block's first data byte, and it has ring space (INV-3).
            #[allow(unsafe_code)]
            unsafe {
                self.ring.set_first_group(block, first_group);
            }
        }
    }

    /// INV-3: waits until ring block `last` may be written.
    fn wait_ring_space<W, P: Port<Writer = W>>(&self, last: BlockNo, stages: &Stages<W>, port: &P) -> Result<()> {
        let ring_blocks = self.ring.ring_blocks();
        if last.0 < stages.written().block().0 + ring_blocks {
            // Not counted: `no_waits` is derived from the chunk count (metrics.rs).
            return Ok(());
        }
        // Free when `written` reaches the block that shares the ring slot with `last`
        // plus one: then the whole previous lap of that slot is written.
        let target = BlockNo(last.0 + 1 - ring_blocks).start();
        stages.wait_written(port, target, Site::BufferSpace)
    }

    /// Waits until the link buffer has a slot for a link starting at `from`.
    fn wait_link_space<W>(&self, from: Lsn, stages: &Stages<W>, metrics: &MetricsRecorder) -> Result<()> {
        if self.link.has_space(from.0) {
            // Not counted: `no_waits` is derived from the chunk count (metrics.rs).
            return Ok(());
        }
        let target = Lsn(self.link.space_target(from.0));
        let waited = stages.wait_ready_space(target, || self.link.has_space(from.0));
        metrics.on_recent_written.record(true, waited);
        stages.check()
    }
}
