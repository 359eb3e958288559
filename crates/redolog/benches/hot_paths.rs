//! Criterion micro-benchmarks of the append path's pieces, one thread:
//! `cargo bench -p redolog --bench hot_paths` (docs/BENCHMARKS.md, "Hot paths").
//!
//! - reservation: the `fetch_add` that gives an append its LSN range (INV-1);
//! - link buffer: a link completed at the head (the fast path), and two links
//!   completed out of order (the second waits in its slot; the first's `add`
//!   advances the tail over both);
//! - block CRC: CRC-32C of one 512-byte block, seeded with the log id;
//! - ring copy: 128 bytes and 4 KiB into the ring, skipping block headers;
//! - append: `Log::append` of 128 bytes on /dev/shm, everything together,
//!   in clear and encrypted;
//! - seal: AES-256-GCM (ring, the cipher an encrypted log seals each group
//!   with) of one group's body — a 128-byte record is 136 bytes sealed, with
//!   the 8-byte group header as associated data — and of larger bodies: the
//!   cipher's cost per message, which an encrypted append pays once.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use redolog::bench_internals::{block_crc, Links, Ring};
use redolog::encryption::{Encryption, Key, Keys};
use redolog::{Config, Log};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

fn reservation_and_links(c: &mut Criterion) {
    let links = Links::new(1 << 16);
    c.bench_function("reservation (fetch_add)", |b| b.iter(|| links.reserve(black_box(136))));
    let links = Links::new(1 << 16);
    c.bench_function("link buffer: add at the head", |b| b.iter(|| links.reserve_and_add(black_box(136))));
    let links = Links::new(1 << 16);
    c.bench_function("link buffer: two adds out of order", |b| b.iter(|| links.add_out_of_order(black_box(136))));
}

fn block_checksum(c: &mut Criterion) {
    let block = [0x5Au8; 512];
    let mut group = c.benchmark_group("block CRC");
    group.throughput(Throughput::Bytes(512));
    group.bench_function("512-byte block", |b| b.iter(|| block_crc(black_box(7), black_box(&block))));
    group.finish();
}

fn ring_copy(c: &mut Criterion) {
    let ring = Ring::new(16 << 20);
    let mut group = c.benchmark_group("ring copy");
    for bytes in [128usize, 4096] {
        let data = vec![0xA5u8; bytes];
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(format!("{bytes} bytes"), |b| b.iter(|| ring.copy_in(black_box(&data))));
    }
    group.finish();
}

fn append(c: &mut Criterion) {
    let key = || Encryption::new(Keys::new().with_key(1, Key::from_bytes([7; 32])));
    for (name, encryption) in
        [("Log::append 128 B (/dev/shm)", None), ("encrypted Log::append 128 B (/dev/shm)", Some(key()))]
    {
        let dir = tempfile::Builder::new().prefix("redolog-hot-paths-").tempdir_in("/dev/shm").expect("tempdir");
        let (log, _) = Log::open(dir.path(), Config::default().with_encryption(encryption)).expect("open");
        let record = [0x5Au8; 128];
        let mut appended = 0u64;
        c.bench_function(name, |b| {
            b.iter(|| {
                let end = log.append(black_box(&record)).expect("append");
                appended += 1;
                // The log never fills: checkpoint everything durable now and then.
                if appended % 4096 == 0 {
                    log.checkpoint(log.durable_lsn()).expect("checkpoint");
                }
                end
            })
        });
        log.close().expect("close");
    }
}

fn seal(c: &mut Criterion) {
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7; 32]).expect("a 32-byte key"));
    let header = [0u8; 8];
    let mut group = c.benchmark_group("AES-256-GCM seal (ring)");
    for bytes in [136usize, 512, 4096] {
        let mut body = vec![0xA5u8; bytes];
        let mut counter = 0u64;
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(format!("{bytes} bytes"), |b| {
            b.iter(|| {
                counter += 1;
                let mut nonce = [0u8; 12];
                nonce[4..].copy_from_slice(&counter.to_le_bytes());
                let nonce = Nonce::assume_unique_for_key(nonce);
                key.seal_in_place_separate_tag(nonce, Aad::from(&header), black_box(&mut body)).expect("seal")
            })
        });
    }
    group.finish();
}

criterion_group!(hot_paths, reservation_and_links, block_checksum, ring_copy, append, seal);
criterion_main!(hot_paths);
