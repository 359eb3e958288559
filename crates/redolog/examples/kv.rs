//! A small key-value engine on redolog, built the way a storage engine uses
//! its redo log: every put is a record, appended under the map's lock (so
//! the map and the log agree on the order of puts) and acknowledged once an
//! fdatasync covers it; a snapshot of the map, written beside the log, is the
//! checkpoint; opening reads the snapshot and replays the groups recovery
//! hands back past it.
//!
//! Run `cargo run -p redolog --example kv` (`cargo test` runs it too): it
//! starts itself as a writer process — four threads putting, a snapshot
//! every `SNAPSHOT_EVERY` puts — kills it with SIGKILL mid-stream, reopens
//! the engine and checks that every put the writer saw acknowledged is there
//! with its value; twice, the second writer going on from what the first
//! left.

use std::collections::BTreeMap;
use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};

use redolog::{Config, Durability, Log, Lsn};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// Puts between two snapshots (across the writer's threads).
const SNAPSHOT_EVERY: u64 = 500;
/// Acknowledged puts a writer gets to before it is killed.
const ACKS_BEFORE_KILL: usize = 2_000;
/// The writer's threads.
const THREADS: usize = 4;

/// The engine: a map, its redo log, and the directory holding both.
struct Engine {
    log: Log,
    map: Mutex<BTreeMap<String, String>>,
    dir: PathBuf,
}

impl Engine {
    /// Opens the engine in `dir`: the snapshot, then the groups past it.
    fn open(dir: &Path) -> Result<Engine> {
        std::fs::create_dir_all(dir)?;
        let (mut map, snapshot_lsn) = read_snapshot(&dir.join("snapshot"))?;
        let config = Config::default().with_capacity_bytes(8 << 20);
        let (log, recovery) = Log::open(dir.join("redo"), config)?;
        let mut replayed = 0;
        for group in recovery {
            let group = group?;
            // A group the snapshot holds already: the snapshot was taken at
            // or past its end.
            if group.end_lsn() <= snapshot_lsn {
                continue;
            }
            for record in group.records() {
                let (key, value) = decode(record)?;
                map.insert(key.to_owned(), value.to_owned());
                replayed += 1;
            }
        }
        eprintln!("kv: opened {} keys (snapshot at LSN {snapshot_lsn}, {replayed} puts replayed)", map.len());
        Ok(Engine { log, map: Mutex::new(map), dir: dir.to_path_buf() })
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Puts `key` = `value`; returns once the put is durable.
    fn put(&self, key: &str, value: &str) -> Result<()> {
        let record = [key.as_bytes(), b"\0", value.as_bytes()].concat();
        let end = {
            let mut map = self.map();
            let end = self.log.append(&record)?;
            map.insert(key.to_owned(), value.to_owned());
            end
        };
        // Outside the lock: the other threads' puts join this fdatasync.
        self.log.wait(end, Durability::Synced)?;
        Ok(())
    }

    fn get(&self, key: &str) -> Option<String> {
        self.map().get(key).cloned()
    }

    /// Writes the map to `snapshot` (a new file, synced, renamed over the
    /// old one, the directory synced), then checkpoints the log at the LSN
    /// it holds: recovery starts there next time.
    fn snapshot(&self) -> Result<Lsn> {
        let (map, lsn) = {
            let map = self.map();
            // Every put is appended under the map's lock: the log's end is
            // the end of the last put the map holds.
            (map.clone(), self.log.end_lsn())
        };
        let mut text = format!("{}\n", lsn.as_u64());
        for (key, value) in &map {
            text.push_str(&format!("{key}\t{value}\n"));
        }
        let temporary = self.dir.join("snapshot.new");
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, self.dir.join("snapshot"))?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        self.log.checkpoint(lsn)?;
        Ok(lsn)
    }
}

/// A snapshot's map and the LSN it was taken at (none: empty, LSN 0).
fn read_snapshot(path: &Path) -> Result<(BTreeMap<String, String>, Lsn)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((BTreeMap::new(), Lsn::from_u64(0))),
        Err(error) => return Err(error.into()),
    };
    let mut lines = text.lines();
    let lsn = lines.next().ok_or("empty snapshot")?.parse()?;
    let mut map = BTreeMap::new();
    for line in lines {
        let (key, value) = line.split_once('\t').ok_or_else(|| format!("snapshot line {line:?}"))?;
        map.insert(key.to_owned(), value.to_owned());
    }
    Ok((map, Lsn::from_u64(lsn)))
}

/// A put's record: `key\0value`.
fn decode(record: &[u8]) -> Result<(&str, &str)> {
    let text = std::str::from_utf8(record)?;
    text.split_once('\0').ok_or_else(|| format!("record {text:?} has no separator").into())
}

/// `kv write DIR ROUND`: puts from `THREADS` threads until killed, printing
/// `ack KEY VALUE` once each put is durable.
fn write(dir: &Path, round: &str) -> Result<()> {
    let engine = Arc::new(Engine::open(dir)?);
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let engine = Arc::clone(&engine);
            let round = round.to_owned();
            std::thread::spawn(move || -> Result<()> {
                for i in 0u64.. {
                    let (key, value) = (format!("r{round}-t{thread}-{i}"), format!("v{i}"));
                    engine.put(&key, &value)?;
                    writeln!(std::io::stdout().lock(), "ack {key} {value}")?;
                    if thread == 0 && i % (SNAPSHOT_EVERY / THREADS as u64) == 0 {
                        let lsn = engine.snapshot()?;
                        writeln!(std::io::stdout().lock(), "snapshot {lsn}")?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a writer thread panicked")??;
    }
    Ok(())
}

/// Starts a writer on `dir`, kills it once it has `ACKS_BEFORE_KILL`
/// acknowledged puts and a snapshot, and returns every put it acknowledged.
fn write_and_kill(dir: &Path, round: usize) -> Result<Vec<(String, String)>> {
    let mut writer = Command::new(std::env::current_exe()?)
        .args(["write", &dir.display().to_string(), &round.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = writer.stdout.take().ok_or("the writer's stdout")?;
    let (mut acked, mut snapshots, mut killed) = (Vec::new(), 0, false);
    // Lines printed before the kill are still read after it: all of them
    // were acknowledged.
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        match line.split(' ').collect::<Vec<_>>()[..] {
            ["ack", key, value] => acked.push((key.to_owned(), value.to_owned())),
            ["snapshot", _] => snapshots += 1,
            _ => return Err(format!("writer said {line:?}").into()),
        }
        if !killed && acked.len() >= ACKS_BEFORE_KILL && snapshots > 0 {
            writer.kill()?;
            killed = true;
        }
    }
    let status = writer.wait()?;
    if !killed {
        return Err(format!("the writer stopped by itself ({status}) after {} puts", acked.len()).into());
    }
    eprintln!("kv: round {round}: killed the writer after {} acknowledged puts, {snapshots} snapshots", acked.len());
    Ok(acked)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, dir, round] = &args[..] {
        if command == "write" {
            return write(Path::new(dir), round);
        }
    }
    let dir = tempfile::tempdir()?;
    let mut acked = Vec::new();
    for round in 1..=2 {
        acked.extend(write_and_kill(dir.path(), round)?);
        let engine = Engine::open(dir.path())?;
        let lost: Vec<_> =
            acked.iter().filter(|(key, value)| engine.get(key).as_deref() != Some(value.as_str())).collect();
        if !lost.is_empty() {
            return Err(format!("{} acknowledged puts lost, the first {:?}", lost.len(), lost[0]).into());
        }
        eprintln!("kv: round {round}: every one of {} acknowledged puts recovered", acked.len());
        engine.put("after-recovery", "yes")?;
        engine.log.close()?;
    }
    Ok(())
}
