//! Goal: every input the fuzzers ever kept or crashed on still passes (B14), and
//! the byte-level target's encoding round-trips a valid log.
//! Method: `tests/fuzz/cases.rs` (the fuzz targets' bodies) is compiled in here
//! and run on every file of `tests/fuzz/regressions/<target>/`: the minimised corpus of the
//! recorded runs plus every crasher found (docs/RELIABILITY.md, "Fuzzing").

#[allow(dead_code)]
#[path = "fuzz/cases.rs"]
mod cases;

use std::path::Path;

/// Runs `case` on every file under `tests/fuzz/regressions/<target>`; returns how many.
fn replay(target: &str, case: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/regressions").join(target);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    paths.sort();
    let failed: Vec<String> = paths
        .iter()
        .filter(|path| {
            let bytes = std::fs::read(path).expect("read a regression input");
            std::panic::catch_unwind(|| case(&bytes)).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target}: {} regression inputs fail: {failed:?}", failed.len());
    paths.len()
}

#[test]
fn raw_dir_regressions_pass() {
    let count = replay("raw_dir", cases::raw_dir);
    assert!(count >= 4, "the raw_dir corpus lost its seeds ({count} inputs)");
}

#[test]
fn mutated_log_regressions_pass() {
    let count = replay("mutated_log", cases::mutated_log);
    assert!(count >= 1, "the mutated_log corpus is empty");
}

/// The structure-aware corpus holds encrypted logs (`MutatedLog::encrypted`),
/// so every `cargo test` replays damage on sealed groups too.
#[test]
fn the_mutated_log_corpus_covers_encrypted_logs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/regressions/mutated_log");
    let encrypted = std::fs::read_dir(&dir)
        .expect("the corpus")
        .filter(|entry| {
            let path = entry.as_ref().expect("directory entry").path();
            cases::is_encrypted_case(&std::fs::read(path).expect("read an input"))
        })
        .count();
    assert!(encrypted >= 10, "{encrypted} encrypted cases in the mutated_log corpus");
}

/// The seeds are sound logs in the raw encoding: they recover every group the
/// checkpoint has not released. `REDOLOG_FUZZ_SEEDS=DIR` also writes them out.
#[test]
fn raw_dir_seeds_are_sound_logs() {
    for (groups, close) in [(0, true), (3, false), (12, true), (39, false)] {
        let image = cases::seed_image(groups, close);
        cases::raw_dir(&image);
        // The checkpoint trails by three groups; the last group of each is Synced
        // or the log is closed.
        let recovered = cases::raw_dir_groups(&image).expect("a seed opens");
        assert_eq!(recovered, groups.min(3), "seed of {groups} groups");
        if let Ok(dir) = std::env::var("REDOLOG_FUZZ_SEEDS") {
            std::fs::write(Path::new(&dir).join(format!("seed-{groups}-{close}")), &image).expect("write a seed");
        }
    }
}
