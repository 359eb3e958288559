//! Goal: every storage call that writes, syncs, creates, renames or removes has a
//! named failpoint, and failing or panicking at any of them, at any of its hits,
//! loses nothing acknowledged and never hangs (docs/RELIABILITY.md E10; INV-6).
//! Method: `redolog::FAILPOINTS` are the `fail` crate's failpoints (the
//! `failpoints` feature, on in `cargo test` only). A source scan checks that
//! every I/O call in `src/` sits behind one of them and that each is listed.
//! Then, for each failpoint, each of its hits in a fault-free run, and both the
//! `return` action (an I/O error) and the `panic` action, a workload runs from
//! four starting states — an empty directory, a log with a torn tail to repair,
//! and creations that crashed before and after `redo.0000` was renamed — on
//! `CrashStorage`: open, 12 commits (Synced and Written) with checkpoints,
//! close. The fault must surface; a log that saw it must be poisoned (a commit
//! after a panic returns an error instead of hanging); then the state is
//! crashed (power loss and process crash) and a fault-free reopen must hold
//! every acknowledged group in a byte-exact prefix of what was appended.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::GroupImage;
use redolog::inspect::inspect_with;
use redolog::storage::{CrashImage, CrashMode, CrashStorage};
use redolog::{Durability, Log, LogEnd, Lsn, FAILPOINTS};

const DIR: &str = "/log";

/// What a run appended and had acknowledged (including a starting log's).
#[derive(Clone, Debug, Default)]
struct Oracle {
    appended: Vec<GroupImage>,
    synced: Lsn,
    written: Lsn,
}

/// A starting state: its image (`None`: no directory) and what it holds.
struct Start {
    name: &'static str,
    image: Option<CrashImage>,
    oracle: Oracle,
}

/// The sweep runs on unencrypted logs, then on encrypted ones (whose opens
/// also write a session slot, with failpoints of their own).
static ENCRYPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// No flush syncs behind the workload's back: the torn images and the
/// sweep's hit counts assume only its own waits sync.
fn config() -> redolog::Config {
    let config = if ENCRYPTED.load(Ordering::Relaxed) { common::small_encrypted_log() } else { common::small_log() };
    config.with_flush_interval(redolog::Config::FLUSH_INTERVAL_MAX)
}

/// The five starting states.
fn starts() -> Vec<Start> {
    let keys = config().encryption;
    let base = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), config(), base.clone()).expect("create");
    let mut oracle = Oracle::default();
    for index in 0..8 {
        let bytes = common::sized_record(index);
        let durability = if index < 5 { Durability::Synced } else { Durability::Written };
        let end = log.commit(&bytes, durability).expect("commit");
        oracle.appended.push((end, vec![bytes]));
        oracle.written = end;
        if durability == Durability::Synced {
            oracle.synced = end;
        }
    }
    log.simulate_crash();
    let torn = (0..64)
        .map(|seed| base.state().crash(CrashMode::Random(seed)))
        .find(|image| {
            let inspection = inspect_with(Path::new(DIR), image.to_storage(), keys.as_ref()).expect("inspect");
            matches!(inspection.end, LogEnd::TornTail { .. })
        })
        .expect("a crash image with a torn tail");
    // The creation's states: temporary files only, then redo.0000 with the rest
    // still temporary.
    let mut creations = (None, None);
    base.replay(|_, state| {
        let image = state.crash(CrashMode::KeepAll);
        let names: Vec<String> =
            image.files.keys().filter_map(|path| Some(path.file_name()?.to_str()?.to_owned())).collect();
        let temps = names.iter().filter(|name| name.ends_with(".tmp")).count();
        if temps == 4 && creations.0.is_none() {
            creations.0 = Some(image);
        } else if temps == 3 && names.contains(&"redo.0000".to_owned()) && creations.1.is_none() {
            creations.1 = Some(image);
        }
    });
    let (before, after) = creations;
    let cut = torn_group_synced_in_part();
    // A torn start holds what its recovery finds (a prefix holding every
    // Synced group); the run appends after that.
    let inspection = inspect_with(Path::new(DIR), torn.to_storage(), keys.as_ref()).expect("inspect");
    let recovered = common::group_images(inspection.groups, "the torn start");
    assert!(recovered.last().is_some_and(|(end, _)| *end >= oracle.synced), "the torn start lost a Synced group");
    let torn_oracle = Oracle { appended: recovered, synced: oracle.synced, written: oracle.synced };
    vec![
        Start { name: "empty directory", image: None, oracle: Oracle::default() },
        Start { name: "torn tail", image: Some(torn), oracle: torn_oracle },
        cut,
        Start {
            name: "creation crashed before redo.0000",
            image: Some(before.expect("a state with only temporary files")),
            oracle: Oracle::default(),
        },
        Start {
            name: "creation crashed after redo.0000",
            image: Some(after.expect("a state with redo.0000 and temporary files")),
            oracle: Oracle::default(),
        },
    ]
}

/// A log whose torn tail holds synced bytes: a group past the file limit,
/// written and synced up to it, and a slot written meanwhile that claims
/// that sync; its recovery lowers the claim, erases, and clears the cut
/// (INV-41), each write behind a failpoint.
fn torn_group_synced_in_part() -> Start {
    let keys = config().encryption;
    let storage = CrashStorage::new();
    let (log, _) = Log::open_with_storage(Path::new(DIR), config(), storage.clone()).expect("create");
    let limit = log.checkpoint_lsn().as_u64() + log.usable_bytes();
    let mut appended = Vec::new();
    while log.end_lsn().as_u64() < limit - 6000 {
        let record = vec![appended.len() as u8; 1000];
        let end = log.commit(&record, Durability::Synced).expect("commit");
        appended.push((end, vec![record]));
    }
    log.append(&[0xEE; 6000]).expect("a group past the file limit");
    log.wait(Lsn::from_u64(limit - 600), Durability::Synced).expect("synced up to the file limit");
    drop(log.create_consumer("slot").expect("a slot with the group synced in part"));
    log.drop_consumer("slot").expect("and another");
    log.simulate_crash();
    let image = storage.state().crash(CrashMode::KeepAll);
    let inspection = inspect_with(Path::new(DIR), image.to_storage(), keys.as_ref()).expect("inspect");
    assert!(matches!(inspection.end, LogEnd::TornTail { .. }), "the tail is torn");
    let recovered = common::group_images(inspection.groups, "the cut start");
    assert_eq!(recovered, appended, "the cut start recovers every whole group");
    let synced = appended.last().expect("groups").0;
    Start {
        name: "torn tail holding synced bytes",
        image: Some(image),
        oracle: Oracle { appended, synced, written: synced },
    }
}

/// The workload: open, 12 commits with a checkpoint every 4, close. Stops at
/// the first error; leaves the log in `slot` for the caller to probe.
fn workload(storage: &CrashStorage, oracle: &mut Oracle, slot: &mut Option<Log>) -> redolog::Result<()> {
    let (log, _) = Log::open_with_storage(Path::new(DIR), config(), storage.clone())?;
    let log = slot.insert(log);
    for index in 0..12 {
        let bytes = common::sized_record(index + 100);
        let durability = if index % 2 == 0 { Durability::Synced } else { Durability::Written };
        let end = log.append(&bytes)?;
        oracle.appended.push((end, vec![bytes]));
        log.wait(end, durability)?;
        oracle.written = end;
        if durability == Durability::Synced {
            oracle.synced = end;
        }
        if index % 4 == 3 {
            log.checkpoint(log.durable_lsn())?;
        }
    }
    log.close()
}

/// Crashes the state `storage` reached and checks a fault-free reopen.
fn check_after_crash(storage: &CrashStorage, oracle: &Oracle, context: &str) {
    for (mode, acked) in [(CrashMode::DropUnsynced, oracle.synced), (CrashMode::KeepAll, oracle.written)] {
        common::assert_crash_recovers(storage, mode, (Path::new(DIR), &config()), &oracle.appended, acked, context);
    }
}

/// A commit on a log that saw a fault must fail, and promptly: a panicking
/// leader poisons the log rather than leaving waiters parked.
fn assert_poisoned(log: Log, context: &str) {
    let (done, outcome) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(log.commit(b"after the fault", Durability::Synced).map(|_| ()));
        log.simulate_crash();
    });
    match outcome.recv_timeout(Duration::from_secs(10)) {
        Ok(Err(_)) => {}
        Ok(Ok(())) => panic!("{context}: a commit after the fault succeeded"),
        Err(_) => panic!("{context}: a commit after the fault hung"),
    }
}

/// How often each failpoint is passed in a fault-free run from `start`.
fn hits(start: &Start) -> Vec<(&'static str, usize)> {
    let counters: Vec<Arc<AtomicUsize>> = FAILPOINTS.iter().map(|_| Arc::new(AtomicUsize::new(0))).collect();
    for (name, counter) in FAILPOINTS.iter().zip(&counters) {
        let counter = counter.clone();
        fail::cfg_callback(*name, move || {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .expect("configure a counting failpoint");
    }
    let storage = start.image.as_ref().map_or_else(CrashStorage::new, CrashImage::to_recording);
    let mut oracle = start.oracle.clone();
    workload(&storage, &mut oracle, &mut None)
        .unwrap_or_else(|error| panic!("{}: fault-free run: {error}", start.name));
    for name in FAILPOINTS {
        fail::remove(name);
    }
    FAILPOINTS.iter().zip(&counters).map(|(name, counter)| (*name, counter.load(Ordering::Relaxed))).collect()
}

#[test]
fn every_failpoint_fails_or_panics_without_losing_an_acknowledged_commit() {
    let scenario = fail::FailScenario::setup();
    // The injected panics are expected; any other is reported as usual.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        if !message.is_some_and(|message| message.starts_with("injected at ")) {
            report(info);
        }
    }));
    let mut runs = 0;
    let mut reached = std::collections::BTreeSet::new();
    for start in [false, true].into_iter().flat_map(|encrypted| {
        ENCRYPTED.store(encrypted, Ordering::Relaxed);
        starts()
    }) {
        for (name, count) in hits(&start) {
            if count > 0 {
                reached.insert(name);
            }
            for nth in 1..=count {
                for kind in ["return", "panic"] {
                    let context = format!("{}: {name} #{nth} {kind}s", start.name);
                    let action = if kind == "panic" { format!("panic(injected at {name})") } else { kind.into() };
                    fail::cfg(name, &format!("{}*off->1*{action}->off", nth - 1)).expect("configure");
                    let storage = start.image.as_ref().map_or_else(CrashStorage::new, CrashImage::to_recording);
                    let mut oracle = start.oracle.clone();
                    let mut slot = None;
                    let outcome = catch_unwind(AssertUnwindSafe(|| workload(&storage, &mut oracle, &mut slot)));
                    fail::remove(name);
                    match (&outcome, kind) {
                        (Ok(Err(_)), "return") | (Err(_), "panic") => {}
                        _ => panic!("{context}: the fault did not surface ({:?})", outcome.map(|result| result.err())),
                    }
                    if let Some(log) = slot {
                        assert_poisoned(log, &context);
                    }
                    check_after_crash(&storage, &oracle, &context);
                    runs += 1;
                }
            }
        }
    }
    let _ = std::panic::take_hook();
    scenario.teardown();
    // The archiver's failpoints need an archiver (tests/archive_faults.rs),
    // a resize's a resize (tests/resize_faults.rs).
    let missed: Vec<&&str> = FAILPOINTS
        .iter()
        .filter(|name| !reached.contains(*name) && !name.starts_with("archive.") && !name.starts_with("resize."))
        .collect();
    assert!(missed.is_empty(), "failpoints no workload reaches: {missed:?}");
    eprintln!("{runs} failpoint runs");
}

/// E10's coverage rule: an I/O call in `src/` (outside the storage
/// implementations and the unit tests) without a failpoint fails this test, as
/// does a listed failpoint that no code uses. A helper may take its
/// failpoints' names from its callers (`failpoint(sync_fp)`); the names then
/// count as used where the callers write them.
#[test]
fn every_io_call_has_a_listed_failpoint() {
    const CALLS: [&str; 6] =
        [".write_all_at(", ".sync_data()", ".sync_dir(", ".rename(", ".remove_file(", ".open_file("];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut used = std::collections::BTreeSet::new();
    let mut unguarded = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if !path.ends_with("storage") {
                    stack.push(path);
                }
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read source");
            // Unit tests sit at the end of a file, after `#[cfg(test)]`.
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
            let lines: Vec<&str> = code.lines().collect();
            for (index, line) in lines.iter().enumerate() {
                let mut rest = *line;
                while let Some(at) = rest.find("failpoint(\"") {
                    rest = &rest[at + "failpoint(\"".len()..];
                    used.insert(rest.split('"').next().unwrap_or_default().to_owned());
                }
                // A helper that does I/O for several callers takes its
                // failpoints' names (`failpoint(write_fp)`): the callers
                // pass them as literals.
                for name in FAILPOINTS {
                    if line.contains(&format!("\"{name}\"")) {
                        used.insert((*name).to_owned());
                    }
                }
                let trimmed = line.trim_start();
                if trimmed.starts_with("//") || !CALLS.iter().any(|call| line.contains(call)) {
                    continue;
                }
                let statement = lines[index.saturating_sub(2)..=index].join("\n");
                if !statement.contains("failpoint(") {
                    unguarded.push(format!("{}:{}: {}", path.display(), index + 1, trimmed));
                }
            }
        }
    }
    assert!(unguarded.is_empty(), "I/O calls without a failpoint:\n{}", unguarded.join("\n"));
    let listed: std::collections::BTreeSet<String> = FAILPOINTS.iter().map(|name| (*name).to_owned()).collect();
    assert_eq!(used, listed, "the failpoints in src/ and redolog::FAILPOINTS differ");
}
