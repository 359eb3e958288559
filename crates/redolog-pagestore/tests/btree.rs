//! Goal: the B+tree holds what a sorted map holds through random inserts,
//! updates and deletes, splits included (root raises, internal splits); a
//! crash and a replay rebuild the same tree from the log alone; threads
//! inserting at once lose nothing.
//! Method: records of 1000-byte keys and values, so a leaf holds 8 and an
//! internal page 16 and a few thousand records make a tree of three or
//! four levels; a `BTreeMap` is the oracle.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use redolog::storage::FsStorage;
use redolog::{Config, Durability, Log};
use redolog_pagestore::{format_meta, replay, BTree, BufferPool, DataFile, Mtr, Outcome};

const KEY_BYTES: usize = 1000;
const VALUE_BYTES: usize = 1000;

fn config() -> Config {
    // Small rings: a debug build fills the default 16 MiB ring at each open.
    Config::default().with_capacity_bytes(64 << 20).with_buffer_bytes(1 << 20).with_closed_window_bytes(1 << 20)
}

fn key(id: u64) -> Vec<u8> {
    let mut key = vec![0; KEY_BYTES];
    key[..8].copy_from_slice(&id.to_be_bytes());
    key
}

fn value(id: u64, version: u8) -> Vec<u8> {
    let mut value = vec![version; VALUE_BYTES];
    value[..8].copy_from_slice(&id.to_le_bytes());
    value
}

struct Store {
    log: Log,
    pool: BufferPool,
    tree: BTree,
}

fn create(dir: &Path) -> Store {
    let (log, _) = Log::open(dir.join("log"), config()).expect("log");
    let pool = BufferPool::new(Arc::new(DataFile::open(dir, &FsStorage).expect("data file")), 4, 4096);
    let mut mtr = Mtr::new(&pool, &log);
    format_meta(&mut mtr).expect("meta");
    let tree = BTree::create(&mut mtr, 1, KEY_BYTES, VALUE_BYTES).expect("tree");
    mtr.commit().expect("commit");
    Store { log, pool, tree }
}

/// Crashes with no page written and replays the log alone onto the data
/// file; returns the tree as recovery rebuilt it, and its pool.
fn crash_and_replay(dir: &Path, store: Store) -> (BufferPool, BTree) {
    let root = store.tree.root();
    store.log.wait(store.log.end_lsn(), Durability::Synced).expect("durable");
    store.log.simulate_crash();
    let (_, recovery) = Log::open(dir.join("log"), config()).expect("reopen");
    let data = DataFile::open(dir, &FsStorage).expect("data file");
    replay(recovery, &data).expect("replay");
    (BufferPool::new(Arc::new(data), 2, 4096), BTree::open(1, root, KEY_BYTES, VALUE_BYTES))
}

/// Inserts optimistically, and pessimistically if the leaf is full.
fn insert(store: &Store, id: u64, version: u8) -> Outcome {
    {
        let shared = store.tree.shared();
        let mut mtr = Mtr::new(&store.pool, &store.log);
        let outcome = shared.insert(&mut mtr, &store.pool, &key(id), &value(id, version)).expect("insert");
        if outcome != Outcome::Full {
            mtr.commit().expect("commit");
            return outcome;
        }
    }
    let exclusive = store.tree.exclusive();
    let mut mtr = Mtr::new(&store.pool, &store.log);
    let outcome = exclusive.insert(&mut mtr, &store.pool, &key(id), &value(id, version)).expect("insert");
    mtr.commit().expect("commit");
    outcome
}

fn update(store: &Store, id: u64, version: u8) -> Outcome {
    let shared = store.tree.shared();
    let mut mtr = Mtr::new(&store.pool, &store.log);
    let outcome = shared.update(&mut mtr, &store.pool, &key(id), 8, &[version; 16]).expect("update");
    mtr.commit().expect("commit");
    outcome
}

fn delete(store: &Store, id: u64) -> Outcome {
    let shared = store.tree.shared();
    let mut mtr = Mtr::new(&store.pool, &store.log);
    let outcome = shared.delete(&mut mtr, &store.pool, &key(id)).expect("delete");
    mtr.commit().expect("commit");
    outcome
}

fn as_map(records: Vec<Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    records.into_iter().map(|record| (record[..KEY_BYTES].to_vec(), record[KEY_BYTES..].to_vec())).collect()
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    Update(u64, u8),
    Delete(u64),
}

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..400).prop_map(Op::Insert),
        2 => (0u64..400, any::<u8>()).prop_map(|(id, version)| Op::Update(id, version)),
        1 => (0u64..400).prop_map(Op::Delete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn the_tree_holds_what_a_sorted_map_holds_and_replay_rebuilds_it(ops in proptest::collection::vec(any_op(), 1..600)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = create(dir.path());
        let mut model = BTreeMap::new();
        for op in &ops {
            match *op {
                Op::Insert(id) => {
                    let fresh = !model.contains_key(&key(id));
                    prop_assert_eq!(insert(&store, id, 1), if fresh { Outcome::Done } else { Outcome::NotApplicable });
                    model.entry(key(id)).or_insert_with(|| value(id, 1));
                }
                Op::Update(id, version) => {
                    let outcome = update(&store, id, version);
                    match model.get_mut(&key(id)) {
                        Some(stored) => {
                            stored[8..24].fill(version);
                            prop_assert_eq!(outcome, Outcome::Done);
                        }
                        None => prop_assert_eq!(outcome, Outcome::NotApplicable),
                    }
                }
                Op::Delete(id) => {
                    let expected = if model.remove(&key(id)).is_some() { Outcome::Done } else { Outcome::NotApplicable };
                    prop_assert_eq!(delete(&store, id), expected);
                }
            }
        }
        prop_assert_eq!(&as_map(store.tree.scan(&store.pool).expect("scan")), &model);
        for id in [0, 7, 199, 399] {
            prop_assert_eq!(store.tree.get(&store.pool, &key(id)).expect("get"), model.get(&key(id)).cloned());
        }
        // Crash with no page written: the log alone must rebuild the tree.
        let (pool, tree) = crash_and_replay(dir.path(), store);
        prop_assert_eq!(as_map(tree.scan(&pool).expect("scan after replay")), model);
    }
}

#[test]
fn threads_inserting_at_once_lose_nothing_through_splits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = create(dir.path());
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let store = &store;
            scope.spawn(move || {
                for i in 0..300 {
                    // Interleaved keys: every thread splits every part of the tree.
                    assert_eq!(insert(store, i * 4 + thread, 2), Outcome::Done);
                }
            });
        }
    });
    let records = store.tree.scan(&store.pool).expect("scan");
    let ids: Vec<u64> =
        records.iter().map(|record| u64::from_be_bytes(record[..8].try_into().expect("8 bytes"))).collect();
    assert_eq!(ids, (0..1200).collect::<Vec<_>>());
    // 1200 records, 8 per leaf at most: at least three levels.
    let root = store.pool.get(store.tree.root()).expect("root");
    assert!(root.read().page().level() >= 2);
}

/// Ascending inserts split at the insert point, as InnoDB's do: every leaf
/// but the last is left full (a split in the middle would leave them half
/// full), and the log still rebuilds the tree.
#[test]
fn ascending_inserts_leave_full_leaves_and_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = create(dir.path());
    for id in 0..300 {
        assert_eq!(insert(&store, id, 3), Outcome::Done);
    }
    // Down the leftmost edge to the first leaf, then along the leaves.
    let mut no = store.tree.root();
    loop {
        let frame = store.pool.get(no).expect("page");
        let data = frame.read();
        if data.page().level() == 0 {
            break;
        }
        let pointer = &data.page().record(0)[KEY_BYTES..];
        no = u32::from_le_bytes(pointer.try_into().expect("child pointer"));
    }
    let mut leaves = Vec::new();
    let mut next = Some(no);
    while let Some(leaf) = next {
        let frame = store.pool.get(leaf).expect("leaf");
        let data = frame.read();
        leaves.push((data.page().count(), data.page().capacity()));
        next = data.page().next();
    }
    let (last, full) = leaves.split_last().expect("a leaf");
    assert!(full.iter().all(|(count, capacity)| count == capacity), "{leaves:?}");
    assert_eq!(leaves.iter().map(|(count, _)| count).sum::<usize>(), 300);
    assert!(last.0 >= 1);

    let (pool, tree) = crash_and_replay(dir.path(), store);
    let ids: Vec<u64> = tree
        .scan(&pool)
        .expect("scan after replay")
        .iter()
        .map(|record| u64::from_be_bytes(record[..8].try_into().expect("8 bytes")))
        .collect();
    assert_eq!(ids, (0..300).collect::<Vec<_>>());
}

/// A tree of three leaves under a root (ascending inserts of 20 records:
/// the root raised to page 1 over leaf 2, then leaves 3 and 4 split off
/// to the right): the pages the latch order tests below latch by number.
fn three_leaves(dir: &Path) -> Store {
    let store = create(dir);
    for id in 0..20 {
        assert_eq!(insert(&store, id, 0), Outcome::Done);
    }
    let mut mtr = Mtr::new(&store.pool, &store.log);
    assert_eq!(mtr.latch(1).expect("root").level(), 1, "page 1 is the root, one level up");
    for leaf in 2..=4 {
        assert_eq!(mtr.latch(leaf).expect("leaf").level(), 0, "page {leaf} is a leaf");
    }
    drop(mtr);
    store
}

/// Latches `pages` in this order in one mini-transaction of a
/// `three_leaves` tree, its index lock held shared.
fn latch_shared(pages: &[u32]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = three_leaves(dir.path());
    let _shared = store.tree.shared();
    let mut mtr = Mtr::new(&store.pool, &store.log);
    for &no in pages {
        mtr.latch(no).expect("latch");
    }
}

/// The page latch order (docs/PAGESTORE.md §8) as the debug check holds
/// it: top-down and then in page order passes, and so does any order in a
/// tree held exclusive.
#[test]
fn pages_in_latch_order_pass_the_check() {
    latch_shared(&[1, 2, 4]);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = three_leaves(dir.path());
    let _exclusive = store.tree.exclusive();
    let mut mtr = Mtr::new(&store.pool, &store.log);
    for no in [4, 2, 0, 3, 1] {
        mtr.latch(no).expect("latch");
    }
}

/// InnoDB's sync-order check for page latches: two leaves of a tree held
/// shared, latched against page order, is the order two statements could
/// deadlock on — caught in debug builds whether or not they race.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "page latch order: page 2 (tree 1, level 0) latched after page 3")]
fn leaves_against_page_order_panic_in_debug_builds() {
    latch_shared(&[3, 2]);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "page latch order: page 1 (tree 1, level 1) latched after page 2")]
fn a_parent_after_its_child_panics_in_debug_builds() {
    latch_shared(&[2, 1]);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "latched after the meta page or a new page 0")]
fn a_shared_tree_page_after_the_meta_page_panics_in_debug_builds() {
    latch_shared(&[0, 2]);
}
