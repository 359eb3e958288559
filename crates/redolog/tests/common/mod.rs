//! Helpers shared by the integration tests: small configurations, recovery into
//! vectors, and block placement computed from docs/FORMAT.md (so the tests also
//! check the spec).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use redolog::{Config, Group, Log, Lsn, Recovery};

/// Bytes before the first log block of each file (FORMAT.md §1).
pub const HEADER_AREA: u64 = 12288;
pub const BLOCK: u64 = 512;

/// A log of four files with `file_blocks` blocks each, and a small ring.
pub fn config(file_blocks: u64, buffer_bytes: usize) -> Config {
    Config::default()
        .with_capacity_bytes(4 * (HEADER_AREA + file_blocks * BLOCK).div_ceil(4096) * 4096)
        .with_buffer_bytes(buffer_bytes)
}

/// The smallest log (four files of 32 blocks, 64 KiB: workloads wrap it) with
/// an 8 KiB ring and group commit, so every storage operation happens on the
/// committing thread: what the crash, fault and damage tests run on.
///
/// With `REDOLOG_TEST_ENCRYPTED=1` in the environment the log is encrypted
/// ([`small_encrypted_log`]): `REDOLOG_TEST_ENCRYPTED=1 cargo test -p redolog
/// --test crash_states --test crash_kill` runs those suites on encrypted logs
/// (docs/RELIABILITY.md).
pub fn small_log() -> Config {
    let encryption = std::env::var_os("REDOLOG_TEST_ENCRYPTED").is_some().then(test_keys);
    config(32, 8192).with_pipeline(redolog::Pipeline::GroupCommit).with_encryption(encryption)
}

/// `small_log` with 256 KiB of files: the archive suites' log, so an
/// archiver on a loaded machine rarely falls a lap behind. (A lap behind, a
/// live reader spun at the file limit until the fix in `LogReader::next_timeout`;
/// `archive::stop_returns_while_commits_go_on` runs that case on purpose.)
/// Always in clear, `REDOLOG_TEST_ENCRYPTED` or not: the archiver refuses an
/// encrypted log (`EncryptedArchive`), which the archive suite checks with a
/// log of [`small_encrypted_log`].
pub fn archive_log() -> Config {
    small_log().with_capacity_bytes(config(128, 8192).capacity_bytes).with_encryption(None)
}

/// `small_log`, encrypted under [`test_keys`].
pub fn small_encrypted_log() -> Config {
    small_log().with_encryption(test_keys())
}

/// Bytes a one-record group adds to its record: the group and record
/// headers (FORMAT.md §6), in clear or encrypted alike (§6.1 seals blocks).
pub const ONE_RECORD_OVERHEAD: u64 = 8 + 4;

/// Data bytes a block of a log made with `config` holds (FORMAT.md §5): 492,
/// or 460 in an encrypted log, whose blocks give 32 bytes to the seal.
pub fn block_data_bytes(config: &Config) -> u64 {
    if config.encryption.is_some() {
        460
    } else {
        492
    }
}

/// One provider for every encrypted test log of a process (key id 1).
pub fn test_keys() -> redolog::encryption::Encryption {
    use redolog::encryption::{Encryption, Key, Keys};
    static KEYS: std::sync::OnceLock<Encryption> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| Encryption::new(Keys::new().with_key(1, Key::from_bytes([0x5A; 32])))).clone()
}

/// Record `index` of the fault tests: 7 B, 300 B, 900 B or 2.5 KB (within a
/// block, across blocks, across the ring) of the byte `index`.
pub fn sized_record(index: usize) -> Vec<u8> {
    vec![index as u8; [7, 300, 900, 2500][index % 4]]
}

/// The file and byte offset of absolute block `block` (FORMAT.md §4).
pub fn place(dir: &Path, config: &Config, block: u64) -> (PathBuf, u64) {
    let file_bytes = config.capacity_bytes / 4 / 4096 * 4096;
    let file_blocks = (file_bytes - HEADER_AREA) / BLOCK;
    let slot = block % (4 * file_blocks);
    let path = dir.join(format!("redo.{:04}", slot / file_blocks));
    (path, HEADER_AREA + (slot % file_blocks) * BLOCK)
}

/// Reads every recovered group, panicking on an error.
pub fn collect(recovery: Recovery) -> Vec<Group> {
    recovery.map(|group| group.expect("recovered group")).collect()
}

/// Reopens `dir` and returns the log and its recovered groups.
pub fn reopen(dir: &Path, config: &Config) -> (Log, Vec<Group>, redolog::LogEnd) {
    let (log, recovery) = Log::open(dir, config.clone()).expect("reopen");
    let end = recovery.end();
    (log, collect(recovery), end)
}

/// A group as appended or recovered: its end LSN and its records.
pub type GroupImage = (Lsn, Vec<Vec<u8>>);

/// Every recovered group as a `GroupImage`, panicking on an error.
pub fn group_images(recovery: Recovery, context: &str) -> Vec<GroupImage> {
    recovery
        .map(|group| {
            let group = group.unwrap_or_else(|error| panic!("{context}: recovery: {error}"));
            (group.end_lsn(), group.records().map(<[u8]>::to_vec).collect())
        })
        .collect()
}

/// The core invariant: `recovered` is a byte-exact prefix, in LSN order, of the
/// groups of `appended` that end after `checkpoint` (checkpoints are taken at
/// group ends) — no hole, duplicate or fabricated group. Returns where the
/// recovered log ends (the checkpoint if it is empty).
pub fn assert_recovered_prefix(
    context: &str,
    checkpoint: Lsn,
    recovered: &[GroupImage],
    appended: &[GroupImage],
) -> Lsn {
    let expected: Vec<&GroupImage> = appended.iter().filter(|(end, _)| *end > checkpoint).collect();
    assert!(
        recovered.len() <= expected.len(),
        "{context}: {} groups recovered, {} appended",
        recovered.len(),
        expected.len()
    );
    for (index, ((end, records), (want_end, want_records))) in recovered.iter().zip(expected).enumerate() {
        assert_eq!(end, want_end, "{context}: group {index} ends at the wrong LSN (hole or fabricated group)");
        assert_eq!(records, want_records, "{context}: group {index} (end {end:?}) differs from what was appended");
    }
    recovered.last().map_or(checkpoint, |(end, _)| *end)
}

/// Crashes the state `storage` has reached with `mode`, reopens the image in
/// `dir` without faults, and checks the core invariant against `appended` and
/// that the recovered log reaches `acked` (what that crash must keep). Returns
/// the recovered groups.
pub fn assert_crash_recovers(
    storage: &redolog::storage::CrashStorage,
    mode: redolog::storage::CrashMode,
    (dir, config): (&Path, &Config),
    appended: &[GroupImage],
    acked: Lsn,
    context: &str,
) -> Vec<GroupImage> {
    let context = format!("{context}, then {mode:?}");
    let image = storage.state().crash(mode);
    let (_, recovery) = Log::open_with_storage(dir, config.clone(), image.to_storage())
        .unwrap_or_else(|error| panic!("{context}: reopen: {error}"));
    let checkpoint = recovery.checkpoint_lsn();
    let groups = group_images(recovery, &context);
    let end = assert_recovered_prefix(&context, checkpoint, &groups, appended);
    assert!(end >= acked, "{context}: acknowledged up to {acked:?}, recovered to {end:?}");
    groups
}

/// The records of each group, owned.
pub fn records(groups: &[Group]) -> Vec<Vec<Vec<u8>>> {
    groups.iter().map(|group| group.records().map(<[u8]>::to_vec).collect()).collect()
}

/// Overwrites `bytes` at `offset` of `path`.
pub fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open for patch");
    file.write_all_at(bytes, offset).expect("patch");
}

/// Reads `len` bytes at `offset` of `path`.
pub fn peek(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).expect("open for peek");
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, offset).expect("peek");
    bytes
}

/// Runs a loom model with the preemption bound `REDOLOG_LOOM_BOUND` (a number,
/// or `none` for no bound), else `default_bound`: small enough for `cargo test`.
pub fn loom_check(default_bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = match std::env::var("REDOLOG_LOOM_BOUND").as_deref() {
        Ok("none") => None,
        Ok(bound) => Some(bound.parse().expect("REDOLOG_LOOM_BOUND is a number or `none`")),
        Err(_) => Some(default_bound),
    };
    builder.check(model);
}

/// Polls `future` on this thread, parking between wake-ups: the smallest
/// executor, enough to commit through a future (`Log::wait_async`).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::sync::Arc::new(Unpark(std::thread::current())).into();
    let mut context = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// Every group of the archive in `dir`/archive from its start, as
/// `GroupImage`s, panicking on an error.
pub fn archived(dir: &Path) -> Vec<GroupImage> {
    archived_in(dir, redolog::storage::FsStorage)
}

/// `archived`, of an archive on `storage` (the log's, when the log is on
/// a test storage).
pub fn archived_in(dir: &Path, storage: impl redolog::storage::Storage + 'static) -> Vec<GroupImage> {
    let archive = redolog::archive::Archive::open_with_storage(dir.join("archive"), storage).expect("open the archive");
    archive
        .read_from(archive.start_lsn())
        .expect("read_from")
        .map(|group| {
            let group = group.expect("archived group");
            (group.end_lsn(), group.records().map(<[u8]>::to_vec).collect())
        })
        .collect()
}
