//! A sysbench-shaped table: a clustered B+tree on `id` holding `(k, c,
//! pad)`, and a secondary B+tree on `(k, id)` ([PAGESTORE §9](crate::docs::pagestore#9-tables-and-the-store)). Every
//! statement is one mini-transaction over both trees, so recovery never sees
//! one index changed without the other.

use redolog::Lsn;

use crate::btree::{BTree, Index, Outcome};
use crate::buffer_pool::BufferPool;
use crate::engine::Engine;
use crate::mtr::Mtr;
use crate::{Error, Result};

/// Bytes of sysbench's `c CHAR(120)`.
pub const C_BYTES: usize = 120;
/// Bytes of sysbench's `pad CHAR(60)`.
pub const PAD_BYTES: usize = 60;
/// The clustered value: `k` (8, little-endian), `c`, `pad`.
pub const ROW_BYTES: usize = 8 + C_BYTES + PAD_BYTES;
const K_OFFSET: usize = 0;
const C_OFFSET: usize = K_OFFSET + 8;

/// A row of sysbench's `sbtest` tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The primary key.
    pub id: u64,
    /// The indexed column.
    pub k: u64,
    /// `c CHAR(120)`.
    pub c: [u8; C_BYTES],
    /// `pad CHAR(60)`.
    pub pad: [u8; PAD_BYTES],
}

impl Row {
    fn value(&self) -> Vec<u8> {
        [&self.k.to_le_bytes()[..], &self.c, &self.pad].concat()
    }

    fn from_record(id: u64, value: &[u8]) -> Row {
        let mut row = Row { id, k: 0, c: [0; C_BYTES], pad: [0; PAD_BYTES] };
        row.k = u64::from_le_bytes(value[K_OFFSET..K_OFFSET + 8].try_into().unwrap_or_default());
        row.c.copy_from_slice(&value[C_OFFSET..C_OFFSET + C_BYTES]);
        row.pad.copy_from_slice(&value[C_OFFSET + C_BYTES..ROW_BYTES]);
        row
    }
}

fn primary_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

fn secondary_key(k: u64, id: u64) -> Vec<u8> {
    [k.to_be_bytes(), id.to_be_bytes()].concat()
}

/// A whole table read: its rows by `id`, its secondary entries `(k, id)`.
pub type Scan = (Vec<Row>, Vec<(u64, u64)>);

/// One table's two trees, as the store keeps them.
#[derive(Debug)]
pub(crate) struct Trees {
    pub(crate) primary: BTree,
    pub(crate) secondary: BTree,
}

/// One table of a store ([`PageStore::table`](crate::PageStore::table)):
/// its statements, each one mini-transaction on the store's engine.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    trees: &'a Trees,
    engine: &'a Engine,
}

impl std::fmt::Debug for Table<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("roots", &self.roots()).finish_non_exhaustive()
    }
}

impl<'a> Table<'a> {
    pub(crate) fn new(trees: &'a Trees, engine: &'a Engine) -> Self {
        Table { trees, engine }
    }

    fn pool(&self) -> &'a BufferPool {
        &self.engine.pool
    }

    /// The primary and secondary trees' roots.
    pub fn roots(&self) -> (u32, u32) {
        (self.trees.primary.root(), self.trees.secondary.root())
    }

    /// Runs `body` as one mini-transaction: first optimistically (both
    /// index locks shared); if a leaf is full, again with both exclusive,
    /// the first attempt's changes put back by its mini-transaction's drop.
    /// Index locks are taken in tree order: primary, then secondary. The
    /// body reaches the trees only through the held locks.
    fn statement(
        &self,
        body: impl Fn(&mut Mtr<'_>, &Index<'_>, &Index<'_>) -> Result<Outcome>,
    ) -> Result<(Outcome, Option<Lsn>)> {
        self.engine.free_check()?;
        for pessimistic in [false, true] {
            let site = &self.pool().waits.index_lock;
            let (primary, secondary) = (&self.trees.primary, &self.trees.secondary);
            let (primary, secondary) = if pessimistic {
                let primary = site.take(|| primary.try_exclusive(), || primary.exclusive());
                (primary, site.take(|| secondary.try_exclusive(), || secondary.exclusive()))
            } else {
                let primary = site.take(|| primary.try_shared(), || primary.shared());
                (primary, site.take(|| secondary.try_shared(), || secondary.shared()))
            };
            let mut mtr = Mtr::new(&self.engine.pool, &self.engine.log);
            match body(&mut mtr, &primary, &secondary)? {
                Outcome::Full => continue,
                outcome => return Ok((outcome, mtr.commit()?)),
            }
        }
        Err(Error::Change {
            page: self.trees.primary.root(),
            reason: "a leaf stayed full with the index locks held".into(),
        })
    }

    /// `INSERT`: the row in both trees; `NotApplicable` if `id` exists.
    pub fn insert(&self, row: &Row) -> Result<(Outcome, Option<Lsn>)> {
        let pool = self.pool();
        self.statement(|mtr, primary, secondary| {
            match primary.insert(mtr, pool, &primary_key(row.id), &row.value())? {
                Outcome::Done => {}
                other => return Ok(other),
            }
            secondary.insert(mtr, pool, &secondary_key(row.k, row.id), &[])
        })
    }

    /// `UPDATE … SET c = ? WHERE id = ?` (sysbench's non-index update).
    pub fn update_c(&self, id: u64, c: &[u8; C_BYTES]) -> Result<(Outcome, Option<Lsn>)> {
        let pool = self.pool();
        self.statement(|mtr, primary, _| primary.update(mtr, pool, &primary_key(id), C_OFFSET, c))
    }

    /// `UPDATE … SET k = k + 1 WHERE id = ?` (sysbench's index update): the
    /// row's `k`, and its secondary entry moved.
    pub fn increment_k(&self, id: u64) -> Result<(Outcome, Option<Lsn>)> {
        let pool = self.pool();
        self.statement(|mtr, primary, secondary| {
            let Some(k) = primary.get_in(mtr, pool, &primary_key(id))?.map(|value| Row::from_record(id, &value).k)
            else {
                return Ok(Outcome::NotApplicable);
            };
            let (old, new) = (secondary_key(k, id), secondary_key(k + 1, id));
            // Both secondary leaves latched in page order before either
            // changes: two statements moving entries between the same two
            // leaves in opposite directions would otherwise wait for each
            // other.
            secondary.latch_leaves(mtr, pool, &[&old, &new])?;
            if secondary.insert(mtr, pool, &new, &[])? == Outcome::Full {
                return Ok(Outcome::Full);
            }
            secondary.delete(mtr, pool, &old)?;
            primary.update(mtr, pool, &primary_key(id), K_OFFSET, &(k + 1).to_le_bytes())
        })
    }

    /// `DELETE … WHERE id = ?`: the row and its secondary entry.
    pub fn delete(&self, id: u64) -> Result<(Outcome, Option<Lsn>)> {
        let pool = self.pool();
        self.statement(|mtr, primary, secondary| {
            let Some(value) = primary.get_in(mtr, pool, &primary_key(id))? else {
                return Ok(Outcome::NotApplicable);
            };
            let row = Row::from_record(id, &value);
            primary.delete(mtr, pool, &primary_key(id))?;
            secondary.delete(mtr, pool, &secondary_key(row.k, id))
        })
    }

    /// The row with this `id`.
    pub fn get(&self, id: u64) -> Result<Option<Row>> {
        Ok(self.trees.primary.get(self.pool(), &primary_key(id))?.map(|value| Row::from_record(id, &value)))
    }

    /// Every row, and every secondary entry as `(k, id)`, in key order: for
    /// checks that both indexes agree.
    pub fn scan(&self) -> Result<Scan> {
        let rows = self.trees.primary.scan(self.pool())?;
        let rows = rows
            .iter()
            .map(|record| {
                Row::from_record(u64::from_be_bytes(record[..8].try_into().unwrap_or_default()), &record[8..])
            })
            .collect();
        let entries = self.trees.secondary.scan(self.pool())?;
        let entries = entries
            .iter()
            .map(|record| {
                let k = u64::from_be_bytes(record[..8].try_into().unwrap_or_default());
                (k, u64::from_be_bytes(record[8..16].try_into().unwrap_or_default()))
            })
            .collect();
        Ok((rows, entries))
    }
}
