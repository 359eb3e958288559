//! RocksDB as a peer of the `oltp_*` workloads (cargo feature `peers`): the
//! same rows in one database — `[table][r][id]` → `k, c, pad` and the
//! secondary index as `[table][k][k][id]` → nothing (integers big-endian in
//! keys) — one `WriteBatch` per transaction, written with `sync` for
//! `flush_log_at_trx_commit` 1 (WAL on; 0 and 2 write without sync). The rows
//! a transaction reads and changes are locked first (striped mutexes taken
//! in order), as InnoDB's row locks serialise two updates of one row.

use std::collections::HashMap;
use std::path::Path;

use parking_lot::{Mutex, MutexGuard};
use redolog_pagestore::{Row, C_BYTES, PAD_BYTES};
use rocksdb::{Options, WriteBatch, WriteOptions, DB};

use super::options::OltpOptions;
use super::system::{prepared_rows, OltpSystem, Statement};
use crate::harness::BoxError;

/// Row-lock stripes.
const STRIPES: usize = 4096;

fn row_key(table: usize, id: u64) -> Vec<u8> {
    [&[table as u8, b'r'][..], &id.to_be_bytes()].concat()
}

fn index_key(table: usize, k: u64, id: u64) -> Vec<u8> {
    [&[table as u8, b'k'][..], &k.to_be_bytes(), &id.to_be_bytes()].concat()
}

fn encode(row: &Row) -> Vec<u8> {
    [&row.k.to_le_bytes()[..], &row.c, &row.pad].concat()
}

fn decode(id: u64, bytes: &[u8]) -> Option<Row> {
    let mut row = Row { id, k: 0, c: [0; C_BYTES], pad: [0; PAD_BYTES] };
    row.k = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    row.c.copy_from_slice(bytes.get(8..8 + C_BYTES)?);
    row.pad.copy_from_slice(bytes.get(8 + C_BYTES..8 + C_BYTES + PAD_BYTES)?);
    Some(row)
}

/// The RocksDB peer.
pub struct RocksDbOltp {
    db: DB,
    locks: Vec<Mutex<()>>,
}

impl RocksDbOltp {
    pub fn open(dir: &Path, _tables: usize) -> Result<Self, BoxError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        Ok(RocksDbOltp { db: DB::open(&options, dir)?, locks: (0..STRIPES).map(|_| Mutex::new(())).collect() })
    }

    /// The row as the transaction sees it: its own writes first.
    fn get(&self, seen: &HashMap<(usize, u64), Option<Row>>, table: usize, id: u64) -> Result<Option<Row>, BoxError> {
        if let Some(row) = seen.get(&(table, id)) {
            return Ok(row.clone());
        }
        Ok(self.db.get(row_key(table, id))?.and_then(|bytes| decode(id, &bytes)))
    }

    fn lock(&self, statements: &[Statement]) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = statements
            .iter()
            .map(|statement| {
                let (table, id) = match statement {
                    Statement::Insert { table, row } => (*table, row.id),
                    Statement::UpdateC { table, id, .. }
                    | Statement::IncrementK { table, id }
                    | Statement::Delete { table, id } => (*table, *id),
                };
                (id as usize).wrapping_mul(31).wrapping_add(table) % STRIPES
            })
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes.into_iter().map(|stripe| self.locks[stripe].lock()).collect()
    }
}

impl OltpSystem for RocksDbOltp {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn prepare(&mut self, options: &OltpOptions) -> Result<(), BoxError> {
        for table in 0..options.tables {
            let mut batch = WriteBatch::default();
            for row in prepared_rows(table, options.table_size) {
                batch.put(row_key(table, row.id), encode(&row));
                batch.put(index_key(table, row.k, row.id), []);
                if batch.len() >= 2000 {
                    self.db.write(std::mem::take(&mut batch))?;
                }
            }
            self.db.write(batch)?;
        }
        self.db.flush_wal(true)?;
        Ok(())
    }

    fn run(&self, statements: &[Statement], flush_log_at_trx_commit: u8) -> Result<(), BoxError> {
        let _rows = self.lock(statements);
        let mut seen: HashMap<(usize, u64), Option<Row>> = HashMap::new();
        let mut batch = WriteBatch::default();
        for statement in statements {
            match statement {
                Statement::Insert { table, row } => {
                    if self.get(&seen, *table, row.id)?.is_none() {
                        batch.put(row_key(*table, row.id), encode(row));
                        batch.put(index_key(*table, row.k, row.id), []);
                        seen.insert((*table, row.id), Some(row.clone()));
                    }
                }
                Statement::UpdateC { table, id, c } => {
                    if let Some(mut row) = self.get(&seen, *table, *id)? {
                        row.c = *c;
                        batch.put(row_key(*table, *id), encode(&row));
                        seen.insert((*table, *id), Some(row));
                    }
                }
                Statement::IncrementK { table, id } => {
                    if let Some(mut row) = self.get(&seen, *table, *id)? {
                        batch.delete(index_key(*table, row.k, *id));
                        row.k += 1;
                        batch.put(index_key(*table, row.k, *id), []);
                        batch.put(row_key(*table, *id), encode(&row));
                        seen.insert((*table, *id), Some(row));
                    }
                }
                Statement::Delete { table, id } => {
                    if let Some(row) = self.get(&seen, *table, *id)? {
                        batch.delete(index_key(*table, row.k, *id));
                        batch.delete(row_key(*table, *id));
                        seen.insert((*table, *id), None);
                    }
                }
            }
        }
        let mut write = WriteOptions::default();
        write.set_sync(flush_log_at_trx_commit == 1);
        self.db.write_opt(batch, &write)?;
        Ok(())
    }
}
