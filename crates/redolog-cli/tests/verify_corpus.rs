//! Goal: `redolog verify` never panics on any directory the fuzzers produced,
//! and its exit code and message match what the library finds (docs/RELIABILITY.md
//! item 7): exit 0 and "sound" with the group count for a sound log; exit 1
//! with the library's error message (file, offset, LSN) for a damaged one.
//! Method: every input of the library's fuzz corpus
//! (`crates/redolog/tests/fuzz/regressions/`) is turned into its directory
//! (the fuzz cases' own decoding), written to a temporary directory and
//! verified by the binary; the expectation comes from `redolog::inspect`.

#[allow(dead_code)]
#[path = "../../redolog/tests/fuzz/cases.rs"]
mod cases;

use std::path::Path;
use std::process::Command;

/// What the library says about `dir`: the group count, or the first error.
fn expected(dir: &Path) -> Result<u64, String> {
    let inspection = redolog::inspect::inspect(dir).map_err(|error| error.to_string())?;
    let mut groups = 0;
    for group in inspection.groups {
        group.map_err(|error| error.to_string())?;
        groups += 1;
    }
    Ok(groups)
}

fn verify_corpus(target: &str) -> usize {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../redolog/tests/fuzz/regressions").join(target);
    let mut checked = 0;
    for entry in std::fs::read_dir(&corpus).unwrap_or_else(|error| panic!("{}: {error}", corpus.display())) {
        let input = entry.expect("directory entry").path();
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, bytes) in cases::directory(target, &std::fs::read(&input).expect("read input")) {
            std::fs::write(dir.path().join(name), bytes).expect("write a log file");
        }
        let expected = expected(dir.path());
        let output = Command::new(env!("CARGO_BIN_EXE_redolog"))
            .arg("verify")
            .arg(dir.path())
            .output()
            .expect("run redolog verify");
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let context = format!("{}: stdout {stdout:?}, stderr {stderr:?}", input.display());
        match expected {
            Ok(groups) => {
                assert_eq!(output.status.code(), Some(0), "{context}");
                assert!(stdout.contains(&format!("sound. {groups} groups")), "{context}");
            }
            Err(message) => {
                assert_eq!(output.status.code(), Some(1), "{context}");
                assert_eq!(stderr.trim_end(), format!("redolog: {message}"), "{context}");
            }
        }
        checked += 1;
    }
    checked
}

#[test]
fn verify_agrees_with_the_library_on_every_raw_dir_input() {
    assert!(verify_corpus("raw_dir") >= 4);
}

#[test]
fn verify_agrees_with_the_library_on_every_mutated_log_input() {
    assert!(verify_corpus("mutated_log") >= 1);
}
