//! What every system of the `oltp_*` workloads shares: sysbench's rows and
//! statements, generated the same way for each, and the trait a system
//! implements.

use redolog_pagestore::{EngineStats, Row, C_BYTES, PAD_BYTES};

use super::options::{OltpOptions, OltpWorkload};
use crate::harness::BoxError;

/// A small xorshift generator per client: sysbench's uniform distribution.
pub struct Random(pub u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    pub fn row(&mut self, id: u64, table_size: u64) -> Row {
        let c = b'0' + (self.below(10) as u8);
        Row { id, k: self.below(table_size), c: [c; C_BYTES], pad: [b'p'; PAD_BYTES] }
    }
}

/// The rows sysbench's `prepare` loads into table `table`: ids `0..table_size`
/// with random `k`; every system loads the same ones.
pub fn prepared_rows(table: usize, table_size: u64) -> impl Iterator<Item = Row> {
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ table as u64);
    (0..table_size).map(move |id| random.row(id, table_size))
}

/// One statement of a transaction, its random choices made: every system
/// runs the same statements.
#[derive(Clone, Debug)]
pub enum Statement {
    /// INSERT of a new row.
    Insert { table: usize, row: Row },
    /// `UPDATE … SET c = ? WHERE id = ?`.
    UpdateC { table: usize, id: u64, c: [u8; C_BYTES] },
    /// `UPDATE … SET k = k + 1 WHERE id = ?`.
    IncrementK { table: usize, id: u64 },
    /// `DELETE … WHERE id = ?`.
    Delete { table: usize, id: u64 },
}

/// The statements of one transaction of `workload`.
pub fn transaction(
    workload: OltpWorkload,
    random: &mut Random,
    options: &OltpOptions,
    next_insert: &mut u64,
) -> Vec<Statement> {
    let table = random.below(options.tables as u64) as usize;
    let id = random.below(options.table_size);
    let c = |random: &mut Random| [b'a' + random.below(26) as u8; C_BYTES];
    match workload {
        OltpWorkload::Insert => {
            *next_insert += 1;
            vec![Statement::Insert { table, row: random.row(*next_insert, options.table_size) }]
        }
        OltpWorkload::UpdateIndex => vec![Statement::IncrementK { table, id }],
        OltpWorkload::UpdateNonIndex => vec![Statement::UpdateC { table, id, c: c(random) }],
        OltpWorkload::WriteOnly => vec![
            Statement::IncrementK { table, id: random.below(options.table_size) },
            Statement::UpdateC { table, id: random.below(options.table_size), c: c(random) },
            Statement::Delete { table, id },
            Statement::Insert { table, row: random.row(id, options.table_size) },
        ],
    }
}

/// A system the workloads run on: the page store, or a peer that stores
/// the same rows with the same durability.
pub trait OltpSystem: Sync {
    /// Its name in the tables.
    fn name(&self) -> &'static str;
    /// sysbench's `prepare`: every table filled with `--table-size` rows.
    fn prepare(&mut self, options: &OltpOptions) -> Result<(), BoxError>;
    /// Runs one transaction's statements and its commit wait
    /// (`flush_log_at_trx_commit`).
    fn run(&self, statements: &[Statement], flush_log_at_trx_commit: u8) -> Result<(), BoxError>;
    /// Leaves nothing for the background to do (the page store: a sharp
    /// checkpoint), so the next point — this system's or another's —
    /// starts from a clean pool and no flushing leaks into it.
    fn quiesce(&self) -> Result<(), BoxError> {
        Ok(())
    }
    /// The engine's counters, for the page store.
    fn engine_stats(&self) -> Option<EngineStats> {
        None
    }
    /// The log's counters (`Metrics::counters`), for the page store.
    fn log_counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}
