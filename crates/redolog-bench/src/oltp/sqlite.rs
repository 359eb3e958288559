//! SQLite as a peer of the `oltp_*` workloads (cargo feature `peers`):
//! sysbench's own schema — `sbtestN(id INTEGER PRIMARY KEY, k, c, pad)` and
//! the index `k_N` on `k` — in one database file in WAL mode, written through
//! one connection, as SQLite admits one writer at a time: a transaction takes
//! the connection, runs `BEGIN IMMEDIATE`, its statements and `COMMIT`.
//! Durability as `--flush-log-at-trx-commit` says: 1 is `synchronous=FULL`
//! (the WAL synced at every commit), 2 is `synchronous=NORMAL` (written at
//! commit, synced at checkpoints) and 0 is `synchronous=OFF`.
//!
//! Clients queue on the connection's mutex rather than on SQLite's busy
//! handler, which sleeps (1 ms, 2 ms, 5 ms, …) when another connection
//! holds the write lock: one writer connection is what an application that
//! measured would use.

use std::path::Path;

use parking_lot::Mutex;
use redolog_pagestore::Row;
use rusqlite::{params, Connection};

use super::options::OltpOptions;
use super::system::{prepared_rows, OltpSystem, Statement};
use crate::harness::BoxError;

/// The SQLite peer.
pub struct SqliteOltp {
    connection: Mutex<Connection>,
    /// Per table: the INSERT, the two UPDATEs and the DELETE, in
    /// [`Statement`]'s order (prepared once each, through the connection's
    /// statement cache).
    sql: Vec<[String; 4]>,
}

/// The `synchronous` setting for a `flush_log_at_trx_commit` value.
fn synchronous(flush_log_at_trx_commit: u8) -> &'static str {
    match flush_log_at_trx_commit {
        1 => "FULL",
        2 => "NORMAL",
        _ => "OFF",
    }
}

impl SqliteOltp {
    /// Opens `dir/sbtest.db` in WAL mode with durability
    /// `flush_log_at_trx_commit`.
    pub fn open(dir: &Path, tables: usize, flush_log_at_trx_commit: u8) -> Result<Self, BoxError> {
        std::fs::create_dir_all(dir)?;
        let connection = Connection::open(dir.join("sbtest.db"))?;
        let mode: String = connection.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("SQLite refused WAL mode: journal_mode is {mode}").into());
        }
        connection.pragma_update(None, "synchronous", synchronous(flush_log_at_trx_commit))?;
        // Large enough that the tables stay in memory, as the page store's
        // and RocksDB's do (sysbench's prepared tables are ~55 MB each at
        // 200,000 rows).
        connection.pragma_update(None, "cache_size", -(1 << 20))?;
        for table in 0..tables {
            connection.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS sbtest{table} (
                     id INTEGER PRIMARY KEY, k INTEGER NOT NULL DEFAULT 0,
                     c BLOB NOT NULL, pad BLOB NOT NULL)"
            ))?;
        }
        let sql = (0..tables)
            .map(|table| {
                [
                    format!("INSERT OR IGNORE INTO sbtest{table} (id, k, c, pad) VALUES (?1, ?2, ?3, ?4)"),
                    format!("UPDATE sbtest{table} SET c = ?1 WHERE id = ?2"),
                    format!("UPDATE sbtest{table} SET k = k + 1 WHERE id = ?1"),
                    format!("DELETE FROM sbtest{table} WHERE id = ?1"),
                ]
            })
            .collect();
        Ok(SqliteOltp { connection: Mutex::new(connection), sql })
    }

    fn statement(&self, connection: &Connection, statement: &Statement) -> Result<(), BoxError> {
        let sql = |table: usize, which: usize| {
            self.sql.get(table).map(|sql| &sql[which]).ok_or_else(|| format!("no table sbtest{table}"))
        };
        match statement {
            Statement::Insert { table, row } => connection.prepare_cached(sql(*table, 0)?)?.execute(params![
                row.id as i64,
                row.k as i64,
                &row.c[..],
                &row.pad[..]
            ])?,
            Statement::UpdateC { table, id, c } => {
                connection.prepare_cached(sql(*table, 1)?)?.execute(params![&c[..], *id as i64])?
            }
            Statement::IncrementK { table, id } => {
                connection.prepare_cached(sql(*table, 2)?)?.execute(params![*id as i64])?
            }
            Statement::Delete { table, id } => {
                connection.prepare_cached(sql(*table, 3)?)?.execute(params![*id as i64])?
            }
        };
        Ok(())
    }

    /// One row, for the tests.
    #[cfg(test)]
    fn row(&self, table: usize, id: u64) -> rusqlite::Result<Option<Row>> {
        use redolog_pagestore::{C_BYTES, PAD_BYTES};
        use rusqlite::OptionalExtension;
        let connection = self.connection.lock();
        connection
            .query_row(&format!("SELECT k, c, pad FROM sbtest{table} WHERE id = ?1"), [id as i64], |found| {
                let mut row = Row { id, k: found.get::<_, i64>(0)? as u64, c: [0; C_BYTES], pad: [0; PAD_BYTES] };
                row.c.copy_from_slice(&found.get::<_, Vec<u8>>(1)?);
                row.pad.copy_from_slice(&found.get::<_, Vec<u8>>(2)?);
                Ok(row)
            })
            .optional()
    }
}

impl OltpSystem for SqliteOltp {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn prepare(&mut self, options: &OltpOptions) -> Result<(), BoxError> {
        let connection = self.connection.get_mut();
        // sysbench's prepare: the rows in bulk, then the secondary index.
        for table in 0..self.sql.len() {
            let rows: Vec<Row> = prepared_rows(table, options.table_size).collect();
            for chunk in rows.chunks(10_000) {
                let transaction = connection.transaction()?;
                {
                    let mut insert = transaction.prepare_cached(&format!(
                        "INSERT INTO sbtest{table} (id, k, c, pad) VALUES (?1, ?2, ?3, ?4)"
                    ))?;
                    for row in chunk {
                        insert.execute(params![row.id as i64, row.k as i64, &row.c[..], &row.pad[..]])?;
                    }
                }
                transaction.commit()?;
            }
            connection.execute_batch(&format!("CREATE INDEX IF NOT EXISTS k_{table} ON sbtest{table} (k)"))?;
        }
        // Start the run with an empty WAL, as the other systems start with
        // their loads synced.
        connection.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
        Ok(())
    }

    fn run(&self, statements: &[Statement], _flush_log_at_trx_commit: u8) -> Result<(), BoxError> {
        let connection = self.connection.lock();
        connection.execute_batch("BEGIN IMMEDIATE")?;
        let done = statements.iter().try_for_each(|statement| self.statement(&connection, statement));
        match done {
            Ok(()) => Ok(connection.execute_batch("COMMIT")?),
            Err(error) => {
                connection.execute_batch("ROLLBACK")?;
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use redolog_pagestore::{C_BYTES, PAD_BYTES};

    use super::*;

    fn row(id: u64, k: u64) -> Row {
        Row { id, k, c: [b'c'; C_BYTES], pad: [b'p'; PAD_BYTES] }
    }

    #[test]
    fn statements_change_the_rows_and_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("sqlite");
        {
            let sqlite = SqliteOltp::open(dir.path(), 2, 1).expect("sqlite");
            sqlite.run(&[Statement::Insert { table: 1, row: row(7, 3) }], 1).expect("sqlite");
            sqlite.run(&[Statement::Insert { table: 1, row: row(8, 4) }], 1).expect("sqlite");
            sqlite
                .run(
                    &[
                        Statement::IncrementK { table: 1, id: 7 },
                        Statement::UpdateC { table: 1, id: 7, c: [b'z'; C_BYTES] },
                        Statement::Delete { table: 1, id: 8 },
                        // A duplicate insert is ignored, as the other systems'.
                        Statement::Insert { table: 1, row: row(7, 99) },
                    ],
                    1,
                )
                .expect("sqlite");
        }
        let sqlite = SqliteOltp::open(dir.path(), 2, 1).expect("sqlite");
        let seven = sqlite.row(1, 7).expect("query").expect("row");
        assert_eq!((seven.k, seven.c), (4, [b'z'; C_BYTES]));
        assert_eq!(sqlite.row(1, 8).expect("sqlite"), None);
        assert_eq!(sqlite.row(0, 7).expect("sqlite"), None);
    }
}
