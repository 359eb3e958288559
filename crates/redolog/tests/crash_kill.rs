//! Goal: a process crash never loses an acknowledged commit and never fabricates
//! one (docs/DESIGN.md §3: INV-5, INV-12, INV-14).
//! Method: this test binary runs itself as a child process that opens a log on
//! real files and commits record groups from 8 threads with `Durability::Synced`
//! (in every other cycle of the four deaths below through `wait_async` futures,
//! which the log threads complete),
//! printing each acknowledged end LSN. The parent SIGKILLs it after a random delay
//! (sometimes during `Log::open`, i.e. during recovery), reopens the log and
//! checks: every acknowledged group is recovered byte-exact; every recovered
//! group is one the child appended (content is derived from its id), at most
//! once; and per thread the recovered commits have no holes (a thread appends its
//! next commit only after the previous one was acknowledged, so at most its last
//! one can be unacknowledged). Then the parent checkpoints, as an engine that
//! flushed its pages would, and the next round continues the same log.
//! Rounds rotate through four ways to die (C12, C13): SIGKILL at a random time
//! on the real file system; the same on a storage that keeps every write in the
//! process until its fdatasync (so the kill also loses all unsynced data, as a
//! power loss would); `abort()` at the k-th hit of a random failpoint
//! (`redolog::FAILPOINTS`, chosen by the parent); and that abort on the storage
//! that loses unsynced data.
//!
//! 50 rounds by default (7.7 s in a debug build); more: `REDOLOG_CRASH_ROUNDS=1000 cargo test
//! --release -p redolog --test crash_kill`, or the 500-round `--ignored` test.
//!
//! `resize_kill_loop` runs the same rounds with a thread in the child that
//! resizes the log up and down without pause (docs/DESIGN.md §1.18), its
//! aborts at the resize's failpoints too, and checks after each round that
//! the log opens at one of the two capacities with no resize files left: 12
//! rounds by default, `REDOLOG_RESIZE_KILL_ROUNDS=200 cargo test --release -p
//! redolog --test crash_kill resize_kill_loop` for the figure in
//! docs/RELIABILITY.md.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redolog::storage::{FsStorage, Storage, StorageFile};
use redolog::{Config, Durability, Log, Lsn, FAILPOINTS};

const CHILD_ENV: &str = "REDOLOG_CRASH_CHILD";
const THREADS: u32 = 8;

/// Failpoints a child passes, with how many of their hits to choose from.
const CHILD_FAILPOINTS: [(&str, u32); 5] =
    [("files.open", 4), ("repair.write", 2), ("repair.sync", 2), ("writer.write", 40), ("writer.sync", 40)];

/// The resizing rounds' failpoints: the resize's own, with the committing child's.
const RESIZE_FAILPOINTS: [(&str, u32); 8] = [
    ("writer.sync", 40),
    ("resize.write", 8),
    ("resize.copy", 20),
    ("resize.copy_sync", 8),
    ("resize.slot_write", 2),
    ("resize.commit_write", 2),
    ("resize.commit_sync", 2),
    ("resize.rename", 8),
];

/// The capacities a resizing child moves between.
const RESIZE_CAPACITIES: [u64; 2] = [4 << 20, 12 << 20];

/// `REDOLOG_TEST_ENCRYPTED=1`: the rounds run on an encrypted log.
fn config() -> Config {
    let encryption = common::small_log().encryption;
    Config::default().with_capacity_bytes(32 << 20).with_buffer_bytes(256 << 10).with_encryption(encryption)
}

/// The records of commit `index` of `thread` in `round`: 1–3 records whose sizes
/// (5–1500 bytes) and bytes derive from the id, so the parent can rebuild them.
fn group(round: u32, thread: u32, index: u32) -> Vec<Vec<u8>> {
    let seed = round.wrapping_mul(2_654_435_761) ^ thread.wrapping_mul(40_503) ^ index.wrapping_mul(97);
    let count = 1 + seed % 3;
    (0..count)
        .map(|part| {
            let mut record = format!("{round} {thread} {index} {part};").into_bytes();
            let len = 5 + (seed.rotate_left(part * 7) % 1500) as usize;
            let fill = (seed >> 8) as u8 ^ part as u8;
            record.resize(len.max(record.len()), fill);
            record
        })
        .collect()
}

/// Parses the id at the front of a recovered group's first record.
fn group_id(records: &[Vec<u8>]) -> Option<(u32, u32, u32)> {
    let first = records.first()?;
    let end = first.iter().position(|&byte| byte == b';')?;
    let text = std::str::from_utf8(&first[..end]).ok()?;
    let mut fields = text.split(' ').map(str::parse::<u32>);
    let (round, thread, index, part) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    match (round, thread, index, part) {
        (Ok(round), Ok(thread), Ok(index), Ok(0)) => Some((round, thread, index)),
        _ => None,
    }
}

/// Storage whose writes stay in the process until `sync_data`: a killed process
/// loses every unsynced write, as a power loss would lose the page cache. Only
/// file contents are volatile; names are durable at once (`crash_states` covers
/// directory crashes).
#[derive(Debug)]
struct UnsyncedLost;

#[derive(Debug)]
struct VolatileFile {
    inner: Arc<dyn StorageFile>,
    /// Unsynced writes, in order.
    pending: parking_lot::Mutex<Vec<(u64, Vec<u8>)>>,
}

impl Storage for UnsyncedLost {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        FsStorage.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        FsStorage.list_dir(dir)
    }
    fn open_file(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn StorageFile>> {
        let inner = FsStorage.open_file(path, create)?;
        Ok(Arc::new(VolatileFile { inner, pending: parking_lot::Mutex::new(Vec::new()) }))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        FsStorage.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        FsStorage.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        FsStorage.sync_dir(dir)
    }
}

impl StorageFile for VolatileFile {
    fn size(&self) -> std::io::Result<u64> {
        let pending = self.pending.lock();
        let end = pending.iter().map(|(offset, bytes)| offset + bytes.len() as u64).max().unwrap_or(0);
        Ok(self.inner.size()?.max(end))
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let pending = self.pending.lock();
        let durable = self.inner.size()?;
        let from_file = (durable.saturating_sub(offset) as usize).min(buf.len());
        self.inner.read_exact_at(&mut buf[..from_file], offset)?;
        buf[from_file..].fill(0);
        for (at, bytes) in pending.iter() {
            let (start, end) = ((*at).max(offset), (at + bytes.len() as u64).min(offset + buf.len() as u64));
            if start < end {
                let (into, from, len) = ((start - offset) as usize, (start - at) as usize, (end - start) as usize);
                buf[into..into + len].copy_from_slice(&bytes[from..from + len]);
            }
        }
        Ok(())
    }
    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.pending.lock().push((offset, bufs.concat()));
        Ok(())
    }
    fn sync_data(&self) -> std::io::Result<()> {
        // Into the real file's page cache, which survives the kill; no real
        // fdatasync is needed for a process crash.
        let mut pending = self.pending.lock();
        for (offset, bytes) in pending.drain(..) {
            self.inner.write_all_at(&[&bytes], offset)?;
        }
        Ok(())
    }
}

/// How a round's child dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Death {
    Kill,
    KillLosingUnsynced,
    /// `abort()` at hit `hit` of failpoint `FAILPOINTS[failpoint]`.
    Abort {
        failpoint: usize,
        hit: u32,
    },
    AbortLosingUnsynced {
        failpoint: usize,
        hit: u32,
    },
}

impl Death {
    fn encode(self) -> String {
        match self {
            Death::Kill => "kill".into(),
            Death::KillLosingUnsynced => "kill-lose".into(),
            Death::Abort { failpoint, hit } => format!("abort {failpoint} {hit}"),
            Death::AbortLosingUnsynced { failpoint, hit } => format!("abort-lose {failpoint} {hit}"),
        }
    }

    fn decode(text: &str) -> Death {
        let fields: Vec<&str> = text.split(' ').collect();
        let number = |index: usize| fields[index].parse::<u32>().expect("death");
        match fields[0] {
            "kill" => Death::Kill,
            "kill-lose" => Death::KillLosingUnsynced,
            "abort" => Death::Abort { failpoint: number(1) as usize, hit: number(2) },
            _ => Death::AbortLosingUnsynced { failpoint: number(1) as usize, hit: number(2) },
        }
    }

    fn loses_unsynced(self) -> bool {
        matches!(self, Death::KillLosingUnsynced | Death::AbortLosingUnsynced { .. })
    }
}

/// The child: commit until killed. Does nothing unless started by the parent.
#[test]
#[ignore = "the child process of the crash tests; a no-op unless REDOLOG_CRASH_CHILD is set"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let round: u32 = std::env::var("REDOLOG_CRASH_ROUND").expect("round").parse().expect("round number");
    let death = Death::decode(&std::env::var("REDOLOG_CRASH_DEATH").expect("death"));
    if let Death::Abort { failpoint, hit } | Death::AbortLosingUnsynced { failpoint, hit } = death {
        let hits = std::sync::atomic::AtomicU32::new(0);
        fail::cfg_callback(FAILPOINTS[failpoint], move || {
            if hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == hit {
                std::process::abort(); // dies here, mid-operation, like a SIGKILL
            }
        })
        .expect("configure the failpoint");
    }
    let dir = Path::new(&dir);
    let opened = if death.loses_unsynced() {
        Log::open_with_storage(dir, config(), UnsyncedLost)
    } else {
        Log::open(dir, config())
    };
    let (log, recovery) = opened.expect("child open");
    drop(recovery);
    let log = Arc::new(log);
    let stdout = Arc::new(parking_lot::Mutex::new(std::io::stdout()));
    if std::env::var_os("REDOLOG_CRASH_RESIZE").is_some() {
        let (log, stdout) = (log.clone(), stdout.clone());
        std::thread::spawn(move || {
            for step in 0.. {
                // Until the log is poisoned or the child dies.
                if log.resize(RESIZE_CAPACITIES[step % 2]).is_err() {
                    break;
                }
                let mut out = stdout.lock();
                writeln!(out, "resized").expect("print");
                out.flush().expect("flush");
            }
        });
    }
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (log, stdout) = (log.clone(), stdout.clone());
            std::thread::spawn(move || {
                for index in 0.. {
                    let records = group(round, thread, index);
                    let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
                    let end = log.append_group(&slices).expect("append");
                    if (round / 4) % 2 == 1 {
                        // Every other cycle of the four deaths: through a
                        // future, completed by the log thread whose fdatasync
                        // covered it (DESIGN §1.14).
                        common::block_on(log.wait_async(end, Durability::Synced)).expect("wait_async");
                    } else {
                        log.wait(end, Durability::Synced).expect("wait");
                    }
                    // Printed only after the acknowledgement.
                    let mut out = stdout.lock();
                    writeln!(out, "ack {round} {thread} {index} {}", end.as_u64()).expect("print");
                    out.flush().expect("flush");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
}

/// What the child acknowledged: (round, thread, index) → end LSN.
type Acks = BTreeMap<(u32, u32, u32), Lsn>;

/// Resizes the child finished, over all rounds.
static RESIZES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs a child until it dies; returns its acknowledgements and whether it
/// aborted (at its failpoint) before the parent's SIGKILL.
fn run_child(dir: &Path, round: u32, (death, resize): (Death, bool), delay: Duration) -> (Acks, bool) {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    if resize {
        command.env("REDOLOG_CRASH_RESIZE", "1");
    }
    let mut child = command
        .args(["crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env("REDOLOG_CRASH_ROUND", round.to_string())
        .env("REDOLOG_CRASH_DEATH", death.encode())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let reader = std::thread::spawn(move || {
        let mut acks = Acks::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let fields: Vec<&str> = line.split(' ').collect();
            if fields == ["resized"] {
                RESIZES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if let ["ack", round, thread, index, lsn] = fields[..] {
                let parse = |text: &str| text.parse::<u64>().expect("child output");
                let id = (parse(round) as u32, parse(thread) as u32, parse(index) as u32);
                acks.insert(id, Lsn::from_u64(parse(lsn)));
            }
        }
        acks
    });
    std::thread::sleep(delay);
    // SIGKILL: the process gets no chance to close or flush anything (an
    // aborting child may be dead already).
    let _ = child.kill();
    let status = child.wait().expect("reap child");
    (reader.join().expect("reader"), std::os::unix::process::ExitStatusExt::signal(&status) == Some(6))
}

/// Reopens the log, checks the round's oracle, and checkpoints at the end.
fn verify_round(dir: &Path, round: u32, acks: &Acks, resize: bool) -> usize {
    let (log, groups, _) = common::reopen(dir, &config());
    if resize {
        // INV-34: the old capacity or the new, and no resize files left.
        let capacity = log.capacity_bytes();
        assert!(
            RESIZE_CAPACITIES.contains(&capacity) || capacity == config().capacity_bytes,
            "round {round}: capacity {capacity}"
        );
        let names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
            .collect();
        assert!(!names.iter().any(|name| name.ends_with(".resize")), "round {round}: {names:?}");
    }
    let mut seen = BTreeMap::new();
    for recovered in &groups {
        let records: Vec<Vec<u8>> = recovered.records().map(<[u8]>::to_vec).collect();
        let id =
            group_id(&records).unwrap_or_else(|| panic!("round {round}: fabricated group at {}", recovered.end_lsn()));
        assert_eq!(id.0, round, "round {round}: a group of round {} survived its checkpoint", id.0);
        assert_eq!(records, group(id.0, id.1, id.2), "round {round}: group {id:?} differs");
        assert!(seen.insert(id, recovered.end_lsn()).is_none(), "round {round}: group {id:?} twice");
    }
    for (id, lsn) in acks {
        assert_eq!(seen.get(id), Some(lsn), "round {round}: acknowledged group {id:?} at {lsn} lost");
    }
    for thread in 0..THREADS {
        let indices: Vec<u32> = seen.keys().filter(|id| id.1 == thread).map(|id| id.2).collect();
        assert!(indices.iter().copied().eq(0..indices.len() as u32), "round {round}: thread {thread} has holes");
    }
    log.checkpoint(log.end_lsn()).expect("checkpoint");
    log.close().expect("close");
    groups.len()
}

fn crash_rounds(rounds: u32, resize: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seed = getrandom::u64().expect("seed") | 1;
    eprintln!("crash_kill: seed {seed}, {rounds} rounds, resizing: {resize}");
    let (mut acknowledged, mut recovered, mut aborts) = (0, 0, 0);
    let started = Instant::now();
    // The failpoints a committing child passes: its open and recovery, its
    // writes and syncs.
    let points: &[(&str, u32)] = if resize { &RESIZE_FAILPOINTS } else { &CHILD_FAILPOINTS };
    for round in 0..rounds {
        // xorshift64: the delays are reproducible from the printed seed.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // One round in five dies within 10 ms: while opening, i.e. in recovery.
        let delay_ms = if seed % 5 == 0 { seed % 10 } else { 20 + seed % 180 };
        let (name, hits) = points[(seed >> 8) as usize % points.len()];
        let failpoint = FAILPOINTS.iter().position(|listed| *listed == name).expect("a listed failpoint");
        let hit = 1 + (seed >> 16) as u32 % hits;
        let death = match round % 4 {
            0 => Death::Kill,
            1 => Death::KillLosingUnsynced,
            2 => Death::Abort { failpoint, hit },
            _ => Death::AbortLosingUnsynced { failpoint, hit },
        };
        let (acks, aborted) = run_child(dir.path(), round, (death, resize), Duration::from_millis(delay_ms));
        aborts += u32::from(aborted);
        acknowledged += acks.len();
        recovered += verify_round(dir.path(), round, &acks, resize);
    }
    // A child dies 0-200 ms in; on a loaded machine (a CI run) no resize may
    // finish that soon, nor an abort round reach its failpoint's chosen hit,
    // and the checks below would fail by luck. Then extra rounds with a
    // longer life (a SIGKILL only after 2 s) until each has happened, at most
    // 10 in all: first plain rounds until a resize finished (5 at most), then
    // rounds that abort at a failpoint's first hit.
    let mut extra = 0;
    let mut extra_round = |death: Death, extra: u32| {
        let round = rounds + extra;
        let (acks, aborted) = run_child(dir.path(), round, (death, resize), Duration::from_secs(2));
        acknowledged += acks.len();
        recovered += verify_round(dir.path(), round, &acks, resize);
        aborted
    };
    while resize && rounds >= 8 && RESIZES.load(std::sync::atomic::Ordering::Relaxed) == 0 && extra < 5 {
        extra_round(Death::Kill, extra);
        extra += 1;
    }
    while rounds >= 8 && aborts == 0 && extra < 10 {
        let name = points[(rounds + extra) as usize % points.len()].0;
        let failpoint = FAILPOINTS.iter().position(|listed| *listed == name).expect("a listed failpoint");
        aborts += u32::from(extra_round(Death::Abort { failpoint, hit: 1 }, extra));
        extra += 1;
    }
    eprintln!(
        "crash_kill: {rounds} rounds ({aborts} died at a failpoint), {acknowledged} acknowledged commits, \
         {recovered} recovered groups, {} resizes finished, 0 violations, {:.1} s",
        RESIZES.load(std::sync::atomic::Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    assert!(!resize || rounds < 8 || RESIZES.load(std::sync::atomic::Ordering::Relaxed) > 0, "no resize finished");
    assert!(acknowledged > 0, "the child never acknowledged a commit: the test tested nothing");
    assert!(rounds < 8 || aborts > 0, "no child died at a failpoint");
}

#[test]
fn sigkill_never_loses_an_acknowledged_commit() {
    let rounds = std::env::var("REDOLOG_CRASH_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(50);
    crash_rounds(rounds, false);
}

#[test]
#[ignore = "500 rounds, ten times the default run"]
fn sigkill_never_loses_an_acknowledged_commit_long() {
    crash_rounds(500, false);
}

/// The rounds with a child that resizes the log without pause while it
/// commits: a kill or an abort at any step of a resize (INV-34).
#[test]
fn resize_kill_loop() {
    let rounds = std::env::var("REDOLOG_RESIZE_KILL_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(12);
    crash_rounds(rounds, true);
}
