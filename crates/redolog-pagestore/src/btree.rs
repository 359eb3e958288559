//! B+trees of fixed-size records on the buffer pool ([PAGESTORE §8](crate::docs::pagestore#8-the-btree)):
//! every change is a redo record inside the caller's mini-transaction, a
//! split is part of the same mini-transaction, so recovery sees it whole.
//!
//! Concurrency is InnoDB 5.6's: each tree has an index lock. An optimistic
//! change holds it shared, reads its way down and x-latches the leaf; with
//! the lock shared no split can move the leaf's keys meanwhile. A change
//! that would split the leaf returns [`Outcome::Full`] without changing
//! anything, and is retried pessimistically: the lock exclusive, the whole
//! path x-latched root first, splits going up as far as needed. The root
//! page never moves: when it splits, its records move to a new child first
//! (InnoDB's root raise).

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::buffer_pool::BufferPool;
use crate::latch_order::LockOrder;
use crate::mtr::Mtr;
use crate::page::{Page, PageKind, PageNo, HEADER_BYTES, META_PAGE, NEXT_OFFSET};
use crate::redo::Redo;
use crate::{Error, Result};

const NEXT_FREE_OFFSET: usize = HEADER_BYTES;

/// Bytes of a child pointer in an internal record.
const CHILD_BYTES: usize = size_of::<u32>();

/// What an optimistic or pessimistic change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Changed.
    Done,
    /// Nothing to change: the key is there already (insert) or missing
    /// (update, delete).
    NotApplicable,
    /// The leaf is full: nothing changed; retry pessimistically.
    Full,
}

/// Formats the meta page of a new store: the next free page is 1.
pub fn format_meta(mtr: &mut Mtr<'_>) -> Result<()> {
    mtr.latch(META_PAGE)?;
    let init = Redo::Init {
        page: META_PAGE,
        kind: PageKind::Meta,
        level: 0,
        key_bytes: 0,
        value_bytes: 0,
        next: None,
        tree: 0,
    };
    mtr.apply(init)?;
    mtr.apply(Redo::Write { page: META_PAGE, offset: NEXT_FREE_OFFSET as u16, bytes: 1u32.to_le_bytes().to_vec() })
}

/// Takes the next free page number from the meta page (latched last: every
/// mini-transaction latches its tree pages before the meta page).
pub fn allocate(mtr: &mut Mtr<'_>) -> Result<PageNo> {
    let meta = mtr.latch(META_PAGE)?;
    let next = u32::from_le_bytes(meta.bytes()[NEXT_FREE_OFFSET..NEXT_FREE_OFFSET + 4].try_into().unwrap_or_default());
    if next == 0 {
        return Err(Error::Change { page: META_PAGE, reason: "the meta page is not formatted".into() });
    }
    let bytes = (next + 1).to_le_bytes().to_vec();
    mtr.apply(Redo::Write { page: META_PAGE, offset: NEXT_FREE_OFFSET as u16, bytes })?;
    mtr.allocated(next);
    Ok(next)
}

/// Where `key` goes below an internal page: the last record whose key is at
/// or below it (the first record's key is the lowest key there is).
fn child_for(page: &Page, key: &[u8]) -> PageNo {
    let slot = match page.search(key) {
        Ok(slot) => slot,
        Err(slot) => slot.saturating_sub(1),
    };
    let record = page.record(slot);
    let key_bytes = page.key_bytes();
    u32::from_le_bytes(record[key_bytes..key_bytes + CHILD_BYTES].try_into().unwrap_or_default())
}

/// One B+tree.
#[derive(Debug)]
pub struct BTree {
    tree: u32,
    root: PageNo,
    key_bytes: usize,
    value_bytes: usize,
    /// The index lock: shared for optimistic changes and reads, exclusive
    /// for splits.
    lock: RwLock<()>,
}

impl BTree {
    /// A tree whose root is `root` (from the store's catalog).
    pub fn open(tree: u32, root: PageNo, key_bytes: usize, value_bytes: usize) -> BTree {
        BTree { tree, root, key_bytes, value_bytes, lock: RwLock::new(()) }
    }

    /// Creates an empty tree: allocates its root and formats it as a leaf.
    pub fn create(mtr: &mut Mtr<'_>, tree: u32, key_bytes: usize, value_bytes: usize) -> Result<BTree> {
        let root = allocate(mtr)?;
        mtr.latch(root)?;
        mtr.apply(Self::init(root, PageKind::Leaf, 0, key_bytes, value_bytes, None, tree))?;
        Ok(BTree::open(tree, root, key_bytes, value_bytes))
    }

    fn init(
        page: PageNo,
        kind: PageKind,
        level: u8,
        key: usize,
        value: usize,
        next: Option<PageNo>,
        tree: u32,
    ) -> Redo {
        Redo::Init { page, kind, level, key_bytes: key as u16, value_bytes: value as u16, next, tree }
    }

    /// The root page.
    pub fn root(&self) -> PageNo {
        self.root
    }

    /// The index lock shared: an optimistic change, or a read inside a
    /// mini-transaction. Take several trees' locks in tree order (checked
    /// in debug builds).
    pub fn shared(&self) -> Index<'_> {
        let order = LockOrder::take(self.tree, false);
        Index { tree: self, held: Held::Shared(self.lock.read()), _order: order }
    }

    /// [`shared`](Self::shared) if the lock is free of an exclusive holder now.
    pub fn try_shared(&self) -> Option<Index<'_>> {
        let order = LockOrder::take(self.tree, false);
        Some(Index { tree: self, held: Held::Shared(self.lock.try_read()?), _order: order })
    }

    /// The index lock exclusive: a change that may split pages.
    pub fn exclusive(&self) -> Index<'_> {
        let order = LockOrder::take(self.tree, true);
        Index { tree: self, held: Held::Exclusive(self.lock.write()), _order: order }
    }

    /// [`exclusive`](Self::exclusive) if nobody holds the lock now.
    pub fn try_exclusive(&self) -> Option<Index<'_>> {
        let order = LockOrder::take(self.tree, true);
        Some(Index { tree: self, held: Held::Exclusive(self.lock.try_write()?), _order: order })
    }

    /// The leaf `key` belongs in, read latches taken and released on the
    /// way down (a page `mtr` holds already is read through it: latching it
    /// again would wait for itself). The caller holds the index lock, so no
    /// split moves the leaf before the caller latches it.
    fn leaf_for(&self, pool: &BufferPool, mtr: Option<&Mtr<'_>>, key: &[u8]) -> Result<PageNo> {
        let mut no = self.root;
        loop {
            if let Some(page) = mtr.and_then(|mtr| mtr.page(no)) {
                if page.level() == 0 {
                    return Ok(no);
                }
                no = child_for(page, key);
                continue;
            }
            let frame = pool.get(no)?;
            let latch = frame.latch();
            let data = pool.waits.page_latch.take(|| latch.try_read(), || latch.read());
            if data.page.level() == 0 {
                return Ok(no);
            }
            no = child_for(&data.page, key);
        }
    }

    /// The value stored under `key`. Takes the index lock shared.
    pub fn get(&self, pool: &BufferPool, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _shared = self.shared();
        let leaf = pool.get(self.leaf_for(pool, None, key)?)?;
        let data = leaf.latch().read();
        Ok(data.page.search(key).ok().map(|slot| data.page.record(slot)[self.key_bytes..].to_vec()))
    }

    /// The value under `key`, its leaf x-latched in `mtr` (a statement
    /// that reads a row before it changes it). Through an [`Index`].
    fn get_in(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let no = self.leaf_for(pool, Some(mtr), key)?;
        let leaf = mtr.latch(no)?;
        Ok(leaf.search(key).ok().map(|slot| leaf.record(slot)[self.key_bytes..].to_vec()))
    }

    /// X-latches the leaves of `keys` in page order: a mini-transaction that
    /// will change several leaves of one tree takes them in one global order
    /// (through an [`Index`]).
    fn latch_leaves(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, keys: &[&[u8]]) -> Result<()> {
        let mut leaves = keys.iter().map(|key| self.leaf_for(pool, Some(mtr), key)).collect::<Result<Vec<_>>>()?;
        leaves.sort_unstable();
        leaves.dedup();
        for leaf in leaves {
            mtr.latch(leaf)?;
        }
        Ok(())
    }

    /// Every record, in key order (for checks: it walks the whole tree).
    pub fn scan(&self, pool: &BufferPool) -> Result<Vec<Vec<u8>>> {
        let _shared = self.shared();
        let mut next = Some(self.leaf_for(pool, None, &vec![0; self.key_bytes])?);
        let mut records = Vec::new();
        while let Some(no) = next {
            let frame = pool.get(no)?;
            let data = frame.latch().read();
            records.extend((0..data.page.count()).map(|slot| data.page.record(slot).to_vec()));
            next = data.page.next();
        }
        Ok(records)
    }

    /// Inserts `key` + `value` if its leaf has room (through a shared [`Index`]).
    fn insert_optimistic(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8], value: &[u8]) -> Result<Outcome> {
        let no = self.leaf_for(pool, Some(mtr), key)?;
        let leaf = mtr.latch(no)?;
        let Err(slot) = leaf.search(key) else { return Ok(Outcome::NotApplicable) };
        if leaf.count() >= leaf.capacity() {
            return Ok(Outcome::Full);
        }
        mtr.apply(Redo::Insert { page: no, slot: slot as u16, record: [key, value].concat() })?;
        Ok(Outcome::Done)
    }

    /// Inserts `key` + `value`, splitting pages as needed (through an
    /// exclusive [`Index`]): the path from the root is x-latched first.
    fn insert_pessimistic(&self, mtr: &mut Mtr<'_>, key: &[u8], value: &[u8]) -> Result<Outcome> {
        let mut path = vec![self.root];
        loop {
            let page = mtr.latch(path[path.len() - 1])?;
            if page.level() == 0 {
                break;
            }
            let child = child_for(page, key);
            path.push(child);
        }
        if mtr.page(path[path.len() - 1]).is_some_and(|leaf| leaf.search(key).is_ok()) {
            return Ok(Outcome::NotApplicable);
        }
        self.insert_at(mtr, &path, [key, value].concat())?;
        Ok(Outcome::Done)
    }

    /// Inserts `record` into the last page of `path` (x-latched, as is the
    /// rest of the path), splitting it — and its parents — if it is full.
    fn insert_at(&self, mtr: &mut Mtr<'_>, path: &[PageNo], record: Vec<u8>) -> Result<()> {
        let no = path[path.len() - 1];
        let page = mtr.page(no).ok_or_else(|| Error::Change { page: no, reason: "not latched".into() })?;
        let key_bytes = page.key_bytes();
        if page.count() < page.capacity() {
            let slot = page.search(&record[..key_bytes]).unwrap_or_else(|slot| slot);
            return mtr.apply(Redo::Insert { page: no, slot: slot as u16, record });
        }
        if path.len() == 1 {
            let child = self.raise_root(mtr)?;
            return self.insert_at(mtr, &[no, child], record);
        }
        let (right, separator) = self.split(mtr, no, &record[..key_bytes])?;
        let mut pointer = separator.clone();
        pointer.extend_from_slice(&right.to_le_bytes());
        self.insert_at(mtr, &path[..path.len() - 1], pointer)?;
        let target = if record[..key_bytes] >= separator[..] { right } else { no };
        self.insert_at(mtr, &[target], record)
    }

    /// Gives full page `left` a new right sibling for the insert of `key`;
    /// returns it and its first key (the separator for the parent). An
    /// insert past the page's last key moves nothing: the new page starts
    /// with it (InnoDB's split at the insert point for ascending inserts,
    /// which keeps appended pages full and the split's redo small).
    /// Otherwise the upper half moves.
    fn split(&self, mtr: &mut Mtr<'_>, left: PageNo, key: &[u8]) -> Result<(PageNo, Vec<u8>)> {
        let right = allocate(mtr)?;
        mtr.latch(right)?;
        let page = mtr.page(left).ok_or_else(|| Error::Change { page: left, reason: "not latched".into() })?;
        let (kind, level, next) = (page.kind().unwrap_or(PageKind::Leaf), page.level(), page.next());
        let (key_bytes, value_bytes, count) = (page.key_bytes(), page.value_bytes(), page.count());
        let keep = if page.search(key) == Err(count) { count } else { count / 2 };
        let moved: Vec<Vec<u8>> = (keep..count).map(|slot| page.record(slot).to_vec()).collect();
        let separator = moved.first().map_or_else(|| key.to_vec(), |first| first[..key_bytes].to_vec());
        mtr.apply(Self::init(right, kind, level, key_bytes, value_bytes, next, self.tree))?;
        for (slot, record) in moved.into_iter().enumerate() {
            mtr.apply(Redo::Insert { page: right, slot: slot as u16, record })?;
        }
        if keep < count {
            mtr.apply(Redo::Truncate { page: left, keep: keep as u16 })?;
        }
        mtr.apply(Redo::Write { page: left, offset: NEXT_OFFSET as u16, bytes: right.to_le_bytes().to_vec() })?;
        Ok((right, separator))
    }

    /// The root is full: its records move to a new child, and the root
    /// becomes an internal page one level up with that child alone.
    fn raise_root(&self, mtr: &mut Mtr<'_>) -> Result<PageNo> {
        let child = allocate(mtr)?;
        mtr.latch(child)?;
        let root =
            mtr.page(self.root).ok_or_else(|| Error::Change { page: self.root, reason: "not latched".into() })?;
        let (kind, level) = (root.kind().unwrap_or(PageKind::Leaf), root.level());
        let (key_bytes, value_bytes) = (root.key_bytes(), root.value_bytes());
        let records: Vec<Vec<u8>> = (0..root.count()).map(|slot| root.record(slot).to_vec()).collect();
        mtr.apply(Self::init(child, kind, level, key_bytes, value_bytes, None, self.tree))?;
        for (slot, record) in records.into_iter().enumerate() {
            mtr.apply(Redo::Insert { page: child, slot: slot as u16, record })?;
        }
        mtr.apply(Self::init(self.root, PageKind::Internal, level + 1, key_bytes, CHILD_BYTES, None, self.tree))?;
        let lowest = [vec![0; key_bytes], child.to_le_bytes().to_vec()].concat();
        mtr.apply(Redo::Insert { page: self.root, slot: 0, record: lowest })?;
        Ok(child)
    }

    /// Overwrites `bytes` at `offset` of the value stored under `key`
    /// (through an [`Index`]).
    fn update(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8], offset: usize, bytes: &[u8]) -> Result<Outcome> {
        if offset + bytes.len() > self.value_bytes {
            return Err(Error::Change {
                page: self.root,
                reason: format!("a value change past byte {}", self.value_bytes),
            });
        }
        let no = self.leaf_for(pool, Some(mtr), key)?;
        let leaf = mtr.latch(no)?;
        let Ok(slot) = leaf.search(key) else { return Ok(Outcome::NotApplicable) };
        let at = HEADER_BYTES + slot * leaf.record_bytes() + self.key_bytes + offset;
        mtr.apply(Redo::Write { page: no, offset: at as u16, bytes: bytes.to_vec() })?;
        Ok(Outcome::Done)
    }

    /// Removes the record under `key` (through an [`Index`]). Pages are not
    /// merged: an emptied leaf stays in the chain.
    fn delete(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8]) -> Result<Outcome> {
        let no = self.leaf_for(pool, Some(mtr), key)?;
        let leaf = mtr.latch(no)?;
        let Ok(slot) = leaf.search(key) else { return Ok(Outcome::NotApplicable) };
        mtr.apply(Redo::Delete { page: no, slot: slot as u16 })?;
        Ok(Outcome::Done)
    }
}

/// A tree's index lock, held: what every change of the tree, and every read
/// inside a mini-transaction, goes through (PS-7, [PAGESTORE §8](crate::docs::pagestore#8-the-btree)). A
/// shared one inserts optimistically (a full leaf is [`Outcome::Full`],
/// nothing changed); an exclusive one splits.
pub struct Index<'a> {
    tree: &'a BTree,
    held: Held<'a>,
    _order: LockOrder,
}

enum Held<'a> {
    Shared(#[allow(dead_code, reason = "held, not read")] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code, reason = "held, not read")] RwLockWriteGuard<'a, ()>),
}

impl std::fmt::Debug for Index<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("tree", &self.tree.tree).field("exclusive", &self.is_exclusive()).finish()
    }
}

impl Index<'_> {
    /// Whether the lock is held exclusive.
    pub fn is_exclusive(&self) -> bool {
        matches!(self.held, Held::Exclusive(_))
    }

    /// The value under `key`, its leaf x-latched in `mtr` (a statement
    /// that reads a row before it changes it).
    pub fn get_in(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get_in(mtr, pool, key)
    }

    /// X-latches the leaves of `keys` in page order: a mini-transaction that
    /// will change several leaves of one tree takes them in one global order.
    pub fn latch_leaves(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, keys: &[&[u8]]) -> Result<()> {
        self.tree.latch_leaves(mtr, pool, keys)
    }

    /// Inserts `key` + `value`: held shared, only if its leaf has room
    /// ([`Outcome::Full`] otherwise, nothing changed); held exclusive,
    /// splitting pages as needed.
    pub fn insert(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8], value: &[u8]) -> Result<Outcome> {
        match self.held {
            Held::Shared(_) => self.tree.insert_optimistic(mtr, pool, key, value),
            Held::Exclusive(_) => self.tree.insert_pessimistic(mtr, key, value),
        }
    }

    /// Overwrites `bytes` at `offset` of the value stored under `key`.
    pub fn update(
        &self,
        mtr: &mut Mtr<'_>,
        pool: &BufferPool,
        key: &[u8],
        offset: usize,
        bytes: &[u8],
    ) -> Result<Outcome> {
        self.tree.update(mtr, pool, key, offset, bytes)
    }

    /// Removes the record under `key`. Pages are not merged: an emptied leaf
    /// stays in the chain.
    pub fn delete(&self, mtr: &mut Mtr<'_>, pool: &BufferPool, key: &[u8]) -> Result<Outcome> {
        self.tree.delete(mtr, pool, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index locks in tree order pass; the check forgets a lock once its
    /// guard drops, failed tries included.
    #[test]
    fn index_locks_in_tree_order_pass() {
        let (first, second) = (BTree::open(1, 3, 8, 8), BTree::open(2, 4, 8, 8));
        let one = first.shared();
        let two = second.try_exclusive().expect("free");
        drop((two, one));
        let two = second.shared();
        drop(two);
        let _one = first.exclusive();
    }

    /// InnoDB's sync-order check for the index locks: a lower tree's lock
    /// taken while a higher one is held is the order two statements could
    /// deadlock on, caught in debug builds whether or not they race.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "index locks go in tree order")]
    fn an_index_lock_out_of_tree_order_panics_in_debug_builds() {
        let (first, second) = (BTree::open(1, 3, 8, 8), BTree::open(2, 4, 8, 8));
        let _two = second.shared();
        let _one = first.shared();
    }
}
