//! Goal: whatever groups are appended, recovery returns exactly them, in order,
//! byte-exact (INV-12), across block, file and ring-lap boundaries.
//! Method: proptest generates sequences of groups (0–4 records of 0–1500 bytes,
//! now and then one of up to 12 KiB), each waited for with a random durability,
//! with checkpoints now and then (and whenever half the log is used); the log lives in memory with small files so the
//! ring wraps. The log is then closed cleanly or abandoned (a process crash after
//! the last Synced wait), reopened, and the recovered groups must equal the ones
//! appended after the last checkpoint.

mod common;

use std::path::Path;

use proptest::prelude::*;
use redolog::storage::MemStorage;
use redolog::{Durability, Log};

#[derive(Clone, Debug)]
struct Step {
    records: Vec<Vec<u8>>,
    durability: Durability,
    checkpoint_after: bool,
}

fn record() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(any::<u8>(), 0..1500),
        1 => prop::collection::vec(any::<u8>(), 1500..12_000),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let durability = prop_oneof![Just(Durability::Buffered), Just(Durability::Written), Just(Durability::Synced)];
    (prop::collection::vec(record(), 0..5), durability, prop::bool::weighted(0.05))
        .prop_map(|(records, durability, checkpoint_after)| Step { records, durability, checkpoint_after })
}

fn run(steps: &[Step], clean_close: bool) -> Result<(), TestCaseError> {
    let storage = MemStorage::new();
    let dir = Path::new("/log");
    let config = common::config(64, 8192);
    let (log, _) = Log::open_with_storage(dir, config.clone(), storage.clone()).expect("open");
    let mut expected: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut checkpoint = log.end_lsn();
    for step in steps {
        let slices: Vec<&[u8]> = step.records.iter().map(Vec::as_slice).collect();
        let end = log.append_group(&slices).expect("append_group");
        log.wait(end, step.durability).expect("wait");
        expected.push(step.records.clone());
        // The log holds 256 blocks (128 KiB): like an engine that flushes its
        // pages, checkpoint before the log fills, or the next append would wait
        // for space forever.
        if step.checkpoint_after || end.as_u64() - checkpoint.as_u64() > 64 << 10 {
            log.checkpoint(end).expect("checkpoint");
            checkpoint = end;
            expected.clear();
        }
    }
    if clean_close {
        log.close().expect("close");
    } else {
        // A process crash after everything was written: MemStorage keeps every
        // write, so all groups must come back.
        let end = log.end_lsn();
        log.wait(end, Durability::Written).expect("write all");
        log.simulate_crash();
    }
    let (_, recovery) = Log::open_with_storage(dir, config, storage).expect("reopen");
    let recovered = common::records(&common::collect(recovery));
    prop_assert_eq!(recovered.len(), expected.len());
    prop_assert!(recovered == expected, "recovered groups differ from the appended ones");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_groups_recover_exactly(steps in prop::collection::vec(step(), 0..120), clean in any::<bool>()) {
        run(&steps, clean)?;
    }
}
