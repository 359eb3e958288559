//! A minimal engine loop: open (replaying what recovery found), commit a few
//! transactions, checkpoint, close. Run: `cargo run --example quickstart -- DIR`.

use redolog::{Config, Durability, Log};

fn main() -> Result<(), redolog::Error> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "quickstart-log".into());
    let config = Config::default().with_capacity_bytes(4 << 20);
    let (log, recovery) = Log::open(&dir, config)?;
    println!("recovering from {dir}: {:?}", recovery.end());
    for group in recovery {
        let group = group?;
        println!("  replay {} records ending at LSN {}", group.record_count(), group.end_lsn());
    }
    for transaction in 0..3 {
        let undo = format!("txn {transaction}: undo");
        let redo = format!("txn {transaction}: set x = {transaction}");
        let end = log.append_group(&[undo.as_bytes(), redo.as_bytes()])?;
        log.wait(end, Durability::Synced)?;
        println!("committed txn {transaction}, durable at LSN {end}");
    }
    log.close()
}
