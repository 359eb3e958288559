//! The fuzz cases (docs/RELIABILITY.md B11, B12, B14). Each takes the fuzzer's
//! bytes and panics only on a real finding: a panic inside redolog, a verify/open
//! disagreement, a recovered group that was never appended, or a second recovery
//! that differs from the first. A typed error is always an acceptable answer to
//! damaged input; bounded memory and time are enforced by libFuzzer's
//! `-rss_limit_mb`, `-malloc_limit_mb` and `-timeout` (docs/RELIABILITY.md).
//!
//! This file is also compiled into `tests/fuzz_regressions.rs`, which replays
//! `tests/fuzz/regressions/` on every `cargo test`, and into the cargo-fuzz
//! targets of the repository's `fuzz/` crate.

use std::path::Path;

use arbitrary::{Arbitrary, Unstructured};
use redolog::encryption::{Encryption, Key, Keys};
use redolog::inspect::inspect_with;
use redolog::storage::{CrashImage, CrashMode, CrashStorage, MemStorage, Storage};
use redolog::{Config, Durability, Log, Lsn, Pipeline, Recovery};

/// Where the log lives in the in-memory storage.
pub const DIR: &str = "/log";
/// Bytes per file of the fuzzed log: the 12 KiB header area and 32 blocks,
/// the smallest file the format allows.
pub const FILE_BYTES: usize = 12288 + 32 * 512;
const FILES: usize = 4;
const RING_BLOCKS: usize = FILES * 32;

/// The smallest log: four files of 32 blocks, group commit (no log threads),
/// encrypted with `encryption`'s keys if given.
pub fn config(encryption: Option<&Encryption>) -> Config {
    Config::default()
        .with_capacity_bytes((FILES * FILE_BYTES) as u64)
        .with_buffer_bytes(4096)
        .with_pipeline(Pipeline::GroupCommit)
        .with_encryption(encryption.cloned())
}

/// The keys of the encrypted cases (one provider per process).
pub fn keys() -> &'static Encryption {
    static KEYS: std::sync::OnceLock<Encryption> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| Encryption::new(Keys::new().with_key(1, Key::from_bytes([0xC3; 32]))))
}

/// A group as appended or recovered: its end LSN and its records.
pub type GroupImage = (Lsn, Vec<Vec<u8>>);

fn file_name(index: usize) -> String {
    format!("redo.{index:04}")
}

/// Fills a fresh in-memory storage with `files` under [`DIR`].
fn storage_with<'a>(files: impl IntoIterator<Item = (String, &'a [u8])>) -> MemStorage {
    let storage = MemStorage::new();
    let dir = Path::new(DIR);
    storage.create_dir_all(dir).expect("in-memory storage");
    for (name, bytes) in files {
        storage.open_file(&dir.join(name), true).and_then(|file| file.write_all_at(&[bytes], 0)).expect("in-memory");
    }
    storage
}

/// Reads every group; the first error ends the list.
fn read_groups(recovery: Recovery) -> (Vec<GroupImage>, Option<redolog::Error>) {
    let mut groups = Vec::new();
    for group in recovery {
        match group {
            Ok(group) => groups.push((group.end_lsn(), group.records().map(<[u8]>::to_vec).collect())),
            Err(error) => return (groups, Some(error)),
        }
    }
    (groups, None)
}

/// What `redolog verify` would see: the groups, or the first error.
fn verify(storage: &MemStorage, keys: Option<&Encryption>) -> Result<Vec<GroupImage>, String> {
    let inspection = inspect_with(Path::new(DIR), storage.clone(), keys).map_err(|error| error.to_string())?;
    match read_groups(inspection.groups) {
        (groups, None) => Ok(groups),
        (_, Some(error)) => Err(error.to_string()),
    }
}

/// Opens the log on `storage` (repairing a torn tail) and reads every group.
fn open(storage: &MemStorage, keys: Option<&Encryption>) -> Result<(Lsn, Vec<GroupImage>), String> {
    let (log, recovery) =
        Log::open_with_storage(Path::new(DIR), config(keys), storage.clone()).map_err(|error| error.to_string())?;
    let checkpoint = recovery.checkpoint_lsn();
    let (groups, error) = read_groups(recovery);
    drop(log);
    match error {
        None => Ok((checkpoint, groups)),
        Some(error) => Err(error.to_string()),
    }
}

/// Checks the promises every damaged directory must keep: verify and open agree
/// (sound for one means sound for the other, with the same groups), and a second
/// open after the first one's repair finds the same groups. Returns the open.
/// `keys` opens an encrypted log (and makes opening an unencrypted one an error).
fn check_consistent(storage: &MemStorage, keys: Option<&Encryption>) -> Result<(Lsn, Vec<GroupImage>), String> {
    // No log file at all (every one removed): open creates a new log there,
    // while verify reports that there is no log. Both are right.
    let names = storage.list_dir(Path::new(DIR)).unwrap_or_default();
    if !(0..FILES).any(|index| names.contains(&file_name(index))) {
        assert!(verify(storage, keys).is_err(), "verify found a log in a directory without log files");
        let opened = open(storage, keys);
        if names.iter().all(|name| name.ends_with(".tmp")) {
            let (_, groups) = opened.as_ref().expect("a directory without log files gets a new log");
            assert!(groups.is_empty(), "a new log recovered groups");
        }
        return opened;
    }
    let verified = verify(storage, keys);
    let opened = open(storage, keys);
    match (&verified, &opened) {
        (Ok(groups), Ok((_, opened_groups))) => {
            assert_eq!(groups, opened_groups, "verify and open read different groups")
        }
        (Err(_), Err(_)) => {}
        _ => panic!("verify and open disagree: verify {verified:?}, open {opened:?}"),
    }
    if let Ok(first) = &opened {
        let again = open(storage, keys).expect("a log that opened once opens again");
        assert_eq!(&again, first, "a second recovery differs from the first");
    }
    opened
}

/// B11, byte-level: the input is the directory's files laid end to end,
/// [`FILE_BYTES`] each (`redo.0000`, `redo.0001`, …; the last may be short, a
/// fifth is an extra file). No file at all is a fresh directory, where open
/// creates a log.
pub fn raw_dir(data: &[u8]) {
    let storage = raw_storage(data);
    if data.is_empty() {
        let (_, groups) = open(&storage, None).expect("an empty directory gets a new log");
        assert!(groups.is_empty(), "a new log recovered groups");
        return;
    }
    let _ = check_consistent(&storage, None);
}

/// The directory [`raw_dir`]'s input encodes.
fn raw_storage(data: &[u8]) -> MemStorage {
    let files = directory("raw_dir", data);
    storage_with(files.iter().map(|(name, bytes)| (name.clone(), bytes.as_slice())))
}

/// One group of the structure-aware workload.
#[derive(Arbitrary, Debug)]
pub struct GroupSpec {
    /// Record sizes (each taken modulo 700 bytes); 1–3 records are used.
    sizes: [u16; 3],
    count: u8,
    fill: u8,
    durability: u8,
    /// How many groups the checkpoint trails this one by (modulo 4).
    checkpoint_lag: u8,
}

/// Damage done to the files after the workload (B12).
#[derive(Arbitrary, Debug)]
pub enum Mutation {
    /// Flips one bit.
    Flip { file: u8, offset: u16, bit: u8 },
    /// Zeroes a range.
    Zero { file: u8, offset: u16, len: u16 },
    /// Overwrites a range with one byte value.
    Fill { file: u8, offset: u16, len: u16, byte: u8 },
    /// Cuts a file short.
    Truncate { file: u8, len: u16 },
    /// Copies a range of one file over a range of another (or the same).
    Splice { from_file: u8, from: u16, to_file: u8, to: u16, len: u16 },
    /// Copies one log block over another.
    CopyBlock { from: u8, to: u8 },
    /// Swaps two log blocks.
    SwapBlocks { a: u8, b: u8 },
    /// Puts back a block as it was halfway through the workload (a stale lap).
    StaleBlock { block: u8 },
    /// Copies a block of another log into this one.
    ForeignBlock { from: u8, to: u8 },
    /// Replaces a whole file with the other log's.
    ForeignFile { file: u8 },
    /// Deletes a file.
    RemoveFile { file: u8 },
    /// Adds a stray file.
    ExtraFile { redo: bool, len: u8 },
}

/// B12, structure-aware: a valid log from an arbitrary workload (optionally a
/// crash image of it), then arbitrary damage.
#[derive(Arbitrary, Debug)]
pub struct MutatedLog {
    groups: Vec<GroupSpec>,
    /// Close cleanly (else a process crash with everything written kept).
    close: bool,
    /// Crash with a random subset of the unsynced writes lost instead.
    crash_seed: Option<u64>,
    mutations: Vec<Mutation>,
    /// An encrypted log (docs/FORMAT.md §6.1), opened with [`keys`].
    encrypted: bool,
}

/// Builds the workload's log; returns its image, the image halfway through,
/// every appended group and the new log's first checkpoint.
fn build(case: &MutatedLog, salt: u8) -> (CrashImage, CrashImage, Vec<GroupImage>, Lsn) {
    let storage = CrashStorage::new();
    let keys = case.encrypted.then(keys);
    let (log, created) = Log::open_with_storage(Path::new(DIR), config(keys), storage.clone()).expect("create the log");
    let first_checkpoint = created.checkpoint_lsn();
    let groups = &case.groups[..case.groups.len().min(48)];
    let mut appended: Vec<GroupImage> = Vec::new();
    let mut checkpoint = Lsn::from_u64(0);
    let mut halfway = None;
    for (index, spec) in groups.iter().enumerate() {
        if index == groups.len() / 2 {
            halfway = Some(storage.state().crash(CrashMode::KeepAll));
        }
        let records: Vec<Vec<u8>> = spec.sizes[..1 + usize::from(spec.count % 3)]
            .iter()
            .enumerate()
            .map(|(part, &size)| vec![spec.fill ^ salt ^ part as u8; usize::from(size % 700)])
            .collect();
        let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let end = log.append_group(&slices).expect("append");
        let durability =
            [Durability::Buffered, Durability::Written, Durability::Synced][usize::from(spec.durability % 3)];
        log.wait(end, durability).expect("wait");
        appended.push((end, records));
        // Checkpoint a few groups behind, as an engine whose pages lag: the
        // ring (64 KiB) always has room for the groups in between.
        let lag = usize::from(spec.checkpoint_lag % 4);
        if let Some(&(target, _)) = index.checked_sub(lag).and_then(|at| appended.get(at)) {
            if target > checkpoint {
                log.wait(target, Durability::Synced).expect("sync before checkpoint");
                log.checkpoint(target).expect("checkpoint");
                checkpoint = target;
            }
        }
    }
    if case.close {
        log.close().expect("close");
    }
    let mode = case.crash_seed.map_or(CrashMode::KeepAll, CrashMode::Random);
    let image = storage.state().crash(mode);
    drop(log);
    let halfway = halfway.unwrap_or_else(|| image.clone());
    (image, halfway, appended, first_checkpoint)
}

/// The byte offset of ring slot `slot` (FORMAT.md §4): (file index, offset).
fn block_place(slot: u8) -> (usize, usize) {
    let slot = usize::from(slot) % RING_BLOCKS;
    (slot / 32, 12288 + (slot % 32) * 512)
}

/// The file of `image` with index `file` (modulo the four), if it exists.
fn file_mut(image: &mut CrashImage, file: u8) -> Option<&mut Vec<u8>> {
    image.files.get_mut(&Path::new(DIR).join(file_name(usize::from(file) % FILES)))
}

fn block_of(image: &CrashImage, slot: u8) -> Option<Vec<u8>> {
    let (file, offset) = block_place(slot);
    let bytes = image.files.get(&Path::new(DIR).join(file_name(file)))?;
    Some(bytes.get(offset..offset + 512)?.to_vec())
}

fn put_block(image: &mut CrashImage, slot: u8, block: &[u8]) {
    let (file, offset) = block_place(slot);
    if let Some(bytes) = file_mut(image, file as u8) {
        if let Some(target) = bytes.get_mut(offset..offset + block.len()) {
            target.copy_from_slice(block);
        }
    }
}

/// Applies `mutation` to `image`; `other` is another log's image.
fn mutate(image: &mut CrashImage, mutation: &Mutation, stale: &CrashImage, other: &mut dyn FnMut() -> CrashImage) {
    match *mutation {
        Mutation::Flip { file, offset, bit } => {
            if let Some(bytes) = file_mut(image, file).filter(|bytes| !bytes.is_empty()) {
                let at = usize::from(offset) % bytes.len();
                bytes[at] ^= 1 << (bit % 8);
            }
        }
        Mutation::Zero { file, offset, len } => fill(image, file, offset, len, 0),
        Mutation::Fill { file, offset, len, byte } => fill(image, file, offset, len, byte),
        Mutation::Truncate { file, len } => {
            if let Some(bytes) = file_mut(image, file) {
                let len = usize::from(len) % (bytes.len() + 1);
                bytes.truncate(len);
            }
        }
        Mutation::Splice { from_file, from, to_file, to, len } => {
            let Some(source) = file_mut(image, from_file).map(|bytes| bytes.clone()) else { return };
            let from = usize::from(from).min(source.len());
            let piece = &source[from..(from + usize::from(len) % 2048).min(source.len())];
            if let Some(bytes) = file_mut(image, to_file) {
                let to = usize::from(to).min(bytes.len());
                let end = (to + piece.len()).min(bytes.len());
                bytes[to..end].copy_from_slice(&piece[..end - to]);
            }
        }
        Mutation::CopyBlock { from, to } => {
            if let Some(block) = block_of(image, from) {
                put_block(image, to, &block);
            }
        }
        Mutation::SwapBlocks { a, b } => {
            if let (Some(block_a), Some(block_b)) = (block_of(image, a), block_of(image, b)) {
                put_block(image, a, &block_b);
                put_block(image, b, &block_a);
            }
        }
        Mutation::StaleBlock { block } => {
            if let Some(old) = block_of(stale, block) {
                put_block(image, block, &old);
            }
        }
        Mutation::ForeignBlock { from, to } => {
            if let Some(block) = block_of(&other(), from) {
                put_block(image, to, &block);
            }
        }
        Mutation::ForeignFile { file } => {
            let path = Path::new(DIR).join(file_name(usize::from(file) % FILES));
            if let Some(bytes) = other().files.remove(&path) {
                image.files.insert(path, bytes);
            }
        }
        Mutation::RemoveFile { file } => {
            image.files.remove(&Path::new(DIR).join(file_name(usize::from(file) % FILES)));
        }
        Mutation::ExtraFile { redo, len } => {
            let name = if redo { file_name(FILES) } else { "notes.txt".into() };
            image.files.insert(Path::new(DIR).join(name), vec![0x5a; usize::from(len)]);
        }
    }
}

fn fill(image: &mut CrashImage, file: u8, offset: u16, len: u16, byte: u8) {
    if let Some(bytes) = file_mut(image, file) {
        let start = usize::from(offset).min(bytes.len());
        let end = (start + usize::from(len) % 4096).min(bytes.len());
        bytes[start..end].fill(byte);
    }
}

/// The damaged directory a [`mutated_log`] input describes, with the groups
/// appended and the new log's first checkpoint; `None` if the bytes do not
/// parse as a case.
fn mutated(data: &[u8]) -> Option<(CrashImage, Vec<GroupImage>, Lsn, bool)> {
    let case = MutatedLog::arbitrary(&mut Unstructured::new(data)).ok()?;
    let (mut image, stale, appended, first_checkpoint) = build(&case, 0);
    let mut foreign: Option<(CrashImage, Vec<GroupImage>)> = None;
    let mut other = || {
        let built = foreign.get_or_insert_with(|| {
            let (image, _, appended, _) = build(&case, 0x80);
            (image, appended)
        });
        built.0.clone()
    };
    // Whose log the directory is: redo.0000's header names it. With the other
    // log's redo.0000 in place (and, for a log that opens, its other files
    // too), the groups to expect are the other log's.
    let mut other_log = false;
    for mutation in case.mutations.iter().take(8) {
        mutate(&mut image, mutation, &stale, &mut other);
        match *mutation {
            Mutation::ForeignFile { file } | Mutation::RemoveFile { file } if usize::from(file) % FILES == 0 => {
                other_log = matches!(mutation, Mutation::ForeignFile { .. });
            }
            _ => {}
        }
    }
    let appended = match foreign {
        Some((_, foreign_appended)) if other_log => foreign_appended,
        _ => appended,
    };
    Some((image, appended, first_checkpoint, case.encrypted))
}

/// Whether a `mutated_log` input builds an encrypted log.
pub fn is_encrypted_case(data: &[u8]) -> bool {
    MutatedLog::arbitrary(&mut Unstructured::new(data)).is_ok_and(|case| case.encrypted)
}

/// The directory a fuzz input of `target` describes, as (file name, bytes):
/// to write out for `redolog verify`.
pub fn directory(target: &str, data: &[u8]) -> Vec<(String, Vec<u8>)> {
    match target {
        "raw_dir" => {
            data.chunks(FILE_BYTES).take(FILES + 1).enumerate().map(|(i, b)| (file_name(i), b.to_vec())).collect()
        }
        "mutated_log" => mutated(data).map_or_else(Vec::new, |(image, ..)| {
            let named = image
                .files
                .into_iter()
                .filter_map(|(path, bytes)| Some((path.file_name()?.to_str()?.to_owned(), bytes)));
            named.collect()
        }),
        other => panic!("no fuzz target {other}"),
    }
}

/// B12: after any damage, open gives a typed error or a byte-exact run of the
/// appended groups starting right after the checkpoint it used — never a
/// reordered, duplicated or fabricated group — and verify agrees with open.
pub fn mutated_log(data: &[u8]) {
    let Some((image, appended, first_checkpoint, encrypted)) = mutated(data) else { return };
    let storage = image.to_storage();
    let Ok((checkpoint, recovered)) = check_consistent(&storage, encrypted.then(keys)) else { return };
    let expected: Vec<&GroupImage> = appended.iter().filter(|(end, _)| *end > checkpoint).collect();
    assert!(
        checkpoint == first_checkpoint || appended.iter().any(|(end, _)| *end == checkpoint),
        "recovery started at {checkpoint:?}, which no checkpoint or group ended at"
    );
    assert!(recovered.len() <= expected.len(), "{} groups recovered, {} appended", recovered.len(), expected.len());
    for (index, (got, want)) in recovered.iter().zip(&expected).enumerate() {
        assert_eq!(got, *want, "recovered group {index} was never appended there");
    }
}

/// A valid directory in [`raw_dir`]'s encoding: a log of `groups` groups
/// (closed or not), its four files laid end to end. Seeds the byte-level corpus.
pub fn seed_image(groups: usize, close: bool) -> Vec<u8> {
    let spec = |index: usize| GroupSpec {
        sizes: [(index * 97 % 700) as u16, 511, 40],
        count: index as u8,
        fill: index as u8,
        durability: index as u8,
        checkpoint_lag: 3,
    };
    let case = MutatedLog {
        groups: (0..groups).map(spec).collect(),
        close,
        crash_seed: None,
        mutations: Vec::new(),
        encrypted: false,
    };
    let (image, ..) = build(&case, 0);
    let mut bytes = Vec::with_capacity(FILES * FILE_BYTES);
    for index in 0..FILES {
        let mut file = image.files.get(&Path::new(DIR).join(file_name(index))).cloned().unwrap_or_default();
        file.resize(FILE_BYTES, 0);
        bytes.extend_from_slice(&file);
    }
    bytes
}

/// How many groups [`raw_dir`]'s encoding of a directory recovers (for tests).
pub fn raw_dir_groups(data: &[u8]) -> Result<usize, String> {
    open(&raw_storage(data), None).map(|(_, groups)| groups.len())
}
