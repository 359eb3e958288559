//! The block geometry end to end: a log whose blocks hold 460 data bytes
//! (format version 3's geometry, [DESIGN §1.15.1](crate::docs::design#1151-why-blocks-not-groups-format-version-3-replaced-version-2)) with groups in
//! clear, through the append path, the writer, checkpoints, recovery and
//! `read_from`. The log is written with a version only tests write
//! (`FORMAT_VERSION_TEST_SEALED_GEOMETRY`), which every later open reads
//! back from its header.

use std::path::Path;

use crate::format::{CREATE_WITH_SEALED_GEOMETRY, FILE_COUNT, FILE_HEADER_AREA_BYTES};
use crate::geometry::{BLOCK_BYTES, CRC_OFFSET, DATA_LEN_OFFSET};
use crate::{Config, Durability, Error, Log, Lsn};

/// Creates the log in `dir` with 460-byte blocks; the flag is cleared on
/// every path, so no other log of this thread is created so.
fn create_sealed_geometry(dir: &Path, config: Config) -> Log {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CREATE_WITH_SEALED_GEOMETRY.set(false);
        }
    }
    CREATE_WITH_SEALED_GEOMETRY.set(true);
    let _reset = Reset;
    Log::open(dir, config).expect("create").0
}

/// Records of lengths around the block's data size and its multiples.
fn records() -> Vec<Vec<u8>> {
    let lengths = [0, 1, 100, 443, 444, 447, 448, 459, 460, 461, 907, 920, 1500, 4000, 9];
    (0..300).map(|index| vec![(index % 251) as u8; lengths[index % lengths.len()] + index / 50]).collect()
}

#[test]
fn a_log_of_460_byte_blocks_appends_reads_and_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config { capacity_bytes: 4 << 20, buffer_bytes: 16 << 10, ..Config::default() };
    let expected = records();
    let log = create_sealed_geometry(dir.path(), config.clone());
    let mut starts = Vec::new();
    let mut end = Lsn(0);
    for (index, record) in expected.iter().enumerate() {
        let (start, group_end) = log.append_group_range(&[record]).expect("append");
        assert!(start >= end, "group {index} starts at {start}, before the last end {end}");
        // A group never starts or ends in a block's last 32 bytes: they are the seal's.
        for lsn in [start, group_end] {
            let offset = lsn.offset_in_block();
            assert!((16..476).contains(&offset), "group {index}: LSN {lsn} at offset {offset}");
        }
        starts.push(start);
        end = group_end;
        if index % 37 == 0 {
            log.commit(b"", Durability::Synced).expect("commit");
        }
    }
    let middle = starts[150];
    log.checkpoint(middle).expect("checkpoint at a group start");
    // Offset 480 is a data position in clear, not in these blocks.
    let in_seal = Lsn(middle.block().0 * BLOCK_BYTES as u64 + 480);
    let refused = log.checkpoint(in_seal);
    assert!(matches!(refused, Err(Error::InvalidLsn { .. })), "{refused:?}");
    log.commit(b"last", Durability::Synced).expect("commit");
    let end = log.end_lsn();
    drop(log);

    // What the writer wrote: no block uses more than 460 data bytes, and no
    // appender wrote into the seal's 32 bytes.
    let mut blocks_seen = 0;
    for index in 0..FILE_COUNT {
        let bytes = std::fs::read(dir.path().join(format!("redo.{index:04}"))).expect("read file");
        for block in bytes[FILE_HEADER_AREA_BYTES as usize..].chunks_exact(BLOCK_BYTES) {
            if block.iter().all(|&byte| byte == 0) {
                continue;
            }
            blocks_seen += 1;
            let data_len = u16::from_le_bytes([block[DATA_LEN_OFFSET], block[DATA_LEN_OFFSET + 1]]);
            assert!(data_len <= 460, "a block with {data_len} data bytes");
            assert!(block[476..CRC_OFFSET].iter().all(|&byte| byte == 0), "data in a block's seal bytes");
        }
    }
    let log_blocks = end.block().0 - starts[0].block().0 + 1;
    assert_eq!(blocks_seen, log_blocks, "blocks holding data");

    // A reopen reads the geometry from the header: recovery from the
    // checkpoint, then the whole log again with `read_from`.
    let (log, recovery) = Log::open(dir.path(), config).expect("reopen");
    assert_eq!(log.end_lsn(), end);
    let recovered: Vec<Vec<u8>> = recovery
        .into_iter()
        .map(|group| group.expect("recovered group").records().flat_map(<[u8]>::to_vec).collect())
        .filter(|record: &Vec<u8>| !record.is_empty() && record != b"last")
        .collect();
    let nonempty_after_middle: Vec<Vec<u8>> =
        expected[150..].iter().filter(|record| !record.is_empty()).cloned().collect();
    assert_eq!(recovered, nonempty_after_middle);
    let read: Vec<(Lsn, Vec<u8>)> = log
        .read_from(starts[0])
        .expect("read_from")
        .map(|group| {
            let group = group.expect("group");
            (group.start_lsn(), group.records().flat_map(<[u8]>::to_vec).collect())
        })
        .filter(|(start, _)| starts.contains(start))
        .collect();
    assert_eq!(read.len(), expected.len());
    for ((start, record), (expected_start, expected_record)) in read.iter().zip(starts.iter().zip(&expected)) {
        assert_eq!(start, expected_start);
        assert_eq!(record, expected_record, "group at {start}");
    }
    // A position in the seal's bytes is no position of this log.
    assert!(matches!(log.read_from(in_seal), Err(Error::InvalidLsn { .. })));
    log.close().expect("close");
}
