//! The hot paths, reachable by the criterion benchmarks (`benches/hot_paths.rs`).
//! Not part of the API: compiled only with the `bench-internals` feature, which
//! this crate's dev-dependency on itself turns on for its tests and benches.

use std::sync::atomic::Ordering;

use crate::buffer::RingBuffer;
use crate::format::BlockSeal;
use crate::link_buf::LinkBuf;
use crate::lsn::{BlockNo, Lsn};

/// The link buffer with its reservation counter, as an appender uses them.
pub struct Links {
    links: LinkBuf,
}

impl Links {
    /// A link buffer of `capacity` slots, empty at 0.
    pub fn new(capacity: usize) -> Self {
        Links { links: LinkBuf::new(capacity, 0, 0) }
    }

    /// The reservation (INV-1): one `fetch_add`; returns the range's start.
    pub fn reserve(&self, bytes: u64) -> u64 {
        self.links.reserved().fetch_add(bytes, Ordering::SeqCst)
    }

    /// Reserves `bytes` and completes the link at once: the head's fast path.
    pub fn reserve_and_add(&self, bytes: u64) -> u64 {
        let from = self.reserve(bytes);
        self.links.add(from, from + bytes, || self.links.reserved().load(Ordering::SeqCst));
        self.links.tail()
    }

    /// Reserves two links, completes the second first (it waits in its slot),
    /// then the first, whose `add` advances the tail over both.
    pub fn add_out_of_order(&self, bytes: u64) -> u64 {
        let first = self.reserve(bytes);
        let second = self.reserve(bytes);
        let reserved = || self.links.reserved().load(Ordering::SeqCst);
        self.links.add(second, second + bytes, reserved);
        self.links.add(first, first + bytes, reserved);
        self.links.tail()
    }
}

/// The CRC-32C of one 512-byte block as a log seals it (FORMAT §5).
pub fn block_crc(log_id: u128, block: &[u8; 512]) -> u32 {
    BlockSeal::for_log(log_id).crc(block)
}

/// The in-memory ring appenders copy into.
pub struct Ring {
    ring: RingBuffer,
    at: std::cell::Cell<Lsn>,
}

impl Ring {
    /// A ring of `bytes` (a power of two).
    pub fn new(bytes: usize) -> Self {
        Ring { ring: RingBuffer::new(bytes), at: std::cell::Cell::new(BlockNo(0).data_start()) }
    }

    /// Copies `data` in after the previous copy, skipping block headers and
    /// trailers, wrapping around the ring; returns the position after it.
    pub fn copy_in(&self, data: &[u8]) -> Lsn {
        // SAFETY: a `Ring` is used by one thread (it is not `Sync`: `Cell`).
        #[allow(unsafe_code)]
        let end = unsafe { self.ring.copy_in(self.at.get(), data, crate::geometry::Geometry::Clear) };
        // The next data position: a copy ending exactly at a block's data end
        // already returns the next block's data start.
        self.at.set(end);
        end
    }
}
