//! Goal: SIGKILL a process running sysbench-shaped statements at durability
//! 1 at random moments; after every kill the reopened store holds every
//! acknowledged statement's effect, no statement half-applied (a row and its
//! secondary entry agree), and every page of the data file verifies.
//! Method: the child (this test binary, re-run with
//! `REDOLOG_PAGESTORE_KILL_DIR`) opens the store (replaying what the last
//! kill left), reads the table, and runs statements from 3 threads, each on
//! the ids `≡ thread (mod 3)`, a cleaner flushing the oldest dirty pages
//! meanwhile; before each statement it prints `try <thread> <statement>`
//! and after its commit wait `ack <thread>`. The parent kills it 30–150 ms
//! after its first acknowledgement, applies the acknowledged statements to
//! the state it verified last round, and checks the store: each id holds its
//! acknowledged state, or — for the one statement per thread in flight —
//! that statement's result. 50 rounds in `cargo test`; more with
//! `REDOLOG_PAGESTORE_KILL_ROUNDS=500 cargo test --release -p
//! redolog-pagestore --test kill`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use redolog_pagestore::{DataFile, Options, Outcome, PageStore, Row, C_BYTES};

mod common;
use common::row;

const CHILD_ENV: &str = "REDOLOG_PAGESTORE_KILL_DIR";
const THREADS: u64 = 3;
const PRELOADED: u64 = 300;

fn options() -> Options {
    common::options(16 << 20, 256 << 10, 16 << 20)
}

/// A statement, as printed by the child and replayed on the parent's model.
#[derive(Clone, Debug)]
enum Statement {
    Insert { id: u64, k: u64, c: u8 },
    UpdateC { id: u64, c: u8 },
    IncrementK { id: u64 },
    Delete { id: u64 },
}

impl Statement {
    fn parse(words: &[&str]) -> Statement {
        let number = |index: usize| words[index].parse::<u64>().expect("a number");
        match words[0] {
            "insert" => Statement::Insert { id: number(1), k: number(2), c: number(3) as u8 },
            "update_c" => Statement::UpdateC { id: number(1), c: number(2) as u8 },
            "increment_k" => Statement::IncrementK { id: number(1) },
            _ => Statement::Delete { id: number(1) },
        }
    }

    fn print(&self) -> String {
        match *self {
            Statement::Insert { id, k, c } => format!("insert {id} {k} {c}"),
            Statement::UpdateC { id, c } => format!("update_c {id} {c}"),
            Statement::IncrementK { id } => format!("increment_k {id}"),
            Statement::Delete { id } => format!("delete {id}"),
        }
    }

    fn id(&self) -> u64 {
        match *self {
            Statement::Insert { id, .. }
            | Statement::UpdateC { id, .. }
            | Statement::IncrementK { id }
            | Statement::Delete { id } => id,
        }
    }

    /// The model after this statement.
    fn apply(&self, rows: &mut BTreeMap<u64, Row>) {
        match *self {
            Statement::Insert { id, k, c } => {
                rows.entry(id).or_insert_with(|| row(id, k, c));
            }
            Statement::UpdateC { id, c } => {
                if let Some(row) = rows.get_mut(&id) {
                    row.c = [c; C_BYTES];
                }
            }
            Statement::IncrementK { id } => {
                if let Some(row) = rows.get_mut(&id) {
                    row.k += 1;
                }
            }
            Statement::Delete { id } => {
                rows.remove(&id);
            }
        }
    }

    fn run(&self, store: &PageStore) -> (Outcome, Option<redolog::Lsn>) {
        let table = store.table(0);
        match *self {
            Statement::Insert { id, k, c } => table.insert(&row(id, k, c)),
            Statement::UpdateC { id, c } => table.update_c(id, &[c; C_BYTES]),
            Statement::IncrementK { id } => table.increment_k(id),
            Statement::Delete { id } => table.delete(id),
        }
        .expect("a statement")
    }
}

/// One child thread: statements on its ids until killed.
fn child_thread(store: &PageStore, thread: u64, mut ids: Vec<u64>, mut next_new: u64) {
    let mut random = common::xorshift(0x2545_F491_4F6C_DD1D_u64.wrapping_mul(thread + 1) ^ std::process::id() as u64);
    loop {
        let id = if ids.is_empty() { next_new } else { ids[(random() % ids.len() as u64) as usize] };
        let statement = match random() % 5 {
            0 | 1 => {
                let id = next_new;
                next_new += THREADS;
                ids.push(id);
                Statement::Insert { id, k: random() % 40, c: (random() % 200) as u8 }
            }
            2 => Statement::UpdateC { id, c: (random() % 200) as u8 },
            3 => Statement::IncrementK { id },
            _ => Statement::Delete { id },
        };
        println!("try {thread} {}", statement.print());
        let (_, end) = statement.run(store);
        store.commit_wait(end, 1).expect("durable");
        println!("ack {thread}");
    }
}

#[test]
#[ignore = "the child of the kill test; does nothing unless started by it"]
fn kill_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let (mut store, _) = PageStore::open(Path::new(&dir), options()).expect("open");
    if store.tables() == 0 {
        store.create_table().expect("table");
        for id in 0..PRELOADED {
            let (_, end) = store.table(0).insert(&row(id, id % 40, 0)).expect("load");
            store.commit_wait(end, 1).expect("durable");
        }
    }
    println!("ready");
    let (rows, _) = store.table(0).scan().expect("scan");
    let next_new = rows.last().map_or(0, |row| row.id + 1);
    std::thread::scope(|scope| {
        scope.spawn(|| loop {
            for (_, no) in store.pool().flush_list().into_iter().take(8) {
                store.pool().flush_page(store.log(), no).expect("flush");
            }
            std::thread::sleep(Duration::from_millis(2));
        });
        for thread in 0..THREADS {
            let ids: Vec<u64> = rows.iter().map(|row| row.id).filter(|id| id % THREADS == thread).collect();
            let first_new = next_new + (thread + THREADS - next_new % THREADS) % THREADS;
            let store = &store;
            scope.spawn(move || child_thread(store, thread, ids, first_new));
        }
    });
}

/// Runs one child until killed; returns, per thread, its acknowledged
/// statements and the one in flight.
fn run_child(dir: &Path, delay: Duration) -> Vec<(Vec<Statement>, Option<Statement>)> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["kill_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let (first_ack, first_ack_seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut threads: Vec<(Vec<Statement>, Option<Statement>)> = vec![(Vec::new(), None); THREADS as usize];
        let mut acks = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.first() {
                Some(&"try") => {
                    threads[words[1].parse::<usize>().expect("thread")].1 = Some(Statement::parse(&words[2..]))
                }
                Some(&"ack") => {
                    let thread = &mut threads[words[1].parse::<usize>().expect("thread")];
                    thread.0.extend(thread.1.take());
                    acks += 1;
                    if acks == 1 {
                        let _ = first_ack.send(());
                    }
                }
                _ => {}
            }
        }
        threads
    });
    let started = first_ack_seen.recv_timeout(Duration::from_secs(60)).is_ok();
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL
    child.wait().expect("reap the child");
    assert!(started, "the child acknowledged nothing within 60 s");
    reader.join().expect("reader")
}

/// Checks the store against `model` plus each thread's statement in flight;
/// returns the state found (the next round's model).
fn check(dir: &Path, round: usize, model: &BTreeMap<u64, Row>, in_flight: &[Statement]) -> BTreeMap<u64, Row> {
    let (store, _) = PageStore::open(dir, options()).expect("reopen");
    let (rows, entries) = store.table(0).scan().expect("scan");
    let found: BTreeMap<u64, Row> = rows.iter().map(|row| (row.id, row.clone())).collect();
    let mut secondary: Vec<(u64, u64)> = rows.iter().map(|row| (row.k, row.id)).collect();
    secondary.sort_unstable();
    assert_eq!(entries, secondary, "round {round}: the secondary index disagrees with the rows");
    // Each in-flight statement's row, had it been applied.
    let after: BTreeMap<u64, Option<Row>> = in_flight
        .iter()
        .map(|statement| {
            let mut rows: BTreeMap<u64, Row> =
                model.get(&statement.id()).map(|row| (row.id, row.clone())).into_iter().collect();
            statement.apply(&mut rows);
            (statement.id(), rows.remove(&statement.id()))
        })
        .collect();
    let ids: std::collections::BTreeSet<u64> = model.keys().chain(found.keys()).copied().collect();
    for id in ids {
        let acknowledged = model.get(&id);
        let with_in_flight = after.get(&id);
        let got = found.get(&id);
        let ok = got == acknowledged || with_in_flight.as_ref().is_some_and(|after| got == after.as_ref());
        assert!(ok, "round {round}: id {id} is {got:?}, acknowledged {acknowledged:?}, in flight {with_in_flight:?}");
    }
    let data = DataFile::open(dir, &redolog::storage::FsStorage).expect("data file");
    for no in 0..data.pages().expect("pages") {
        data.read(no as u32).unwrap_or_else(|error| panic!("round {round}: {error}"));
    }
    found
}

#[test]
fn sigkill_loses_no_acknowledged_statement_and_half_applies_none() {
    let rounds: usize =
        std::env::var("REDOLOG_PAGESTORE_KILL_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(50);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model: BTreeMap<u64, Row> = (0..PRELOADED).map(|id| (id, row(id, id % 40, 0))).collect();
    let mut acknowledged = 0;
    for round in 0..rounds {
        let delay = Duration::from_millis(30 + (round as u64 * 37) % 120);
        let threads = run_child(dir.path(), delay);
        for (acked, _) in &threads {
            acknowledged += acked.len();
            for statement in acked {
                statement.apply(&mut model);
            }
        }
        let in_flight: Vec<Statement> = threads.iter().filter_map(|(_, pending)| pending.clone()).collect();
        model = check(dir.path(), round, &model, &in_flight);
    }
    eprintln!("kill: {rounds} kills, {acknowledged} acknowledged statements, 0 lost, 0 half-applied");
}
