//! An archive's files: segments of groups named by their first LSN
//! ([FORMAT §9](crate::docs::format#9-archive-directory-redologarchive)), and reading them back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::failpoint::failpoint;
use crate::format::{read_u32, read_u64, write_u32, write_u64};
use crate::lsn::Lsn;
use crate::recovery::Group;
use crate::storage::{FsStorage, Storage, StorageFile};

const MAGIC: [u8; 8] = *b"redoarch";
const VERSION: u32 = 1;

// docs/FORMAT.md §9.1: the segment header.
const VERSION_OFFSET: usize = MAGIC.len();
const LOG_ID_OFFSET: usize = 16;
const START_OFFSET: usize = LOG_ID_OFFSET + 16;
const HEADER_CRC_OFFSET: usize = 60;
/// Bytes of a segment's header.
pub(crate) const HEADER_BYTES: usize = 64;

// docs/FORMAT.md §9.2: an entry (one group).
const ENTRY_END_OFFSET: usize = 8;
const ENTRY_COUNT_OFFSET: usize = 16;
const ENTRY_BODY_LEN_OFFSET: usize = 20;
const ENTRY_CRC_OFFSET: usize = 24;
/// Bytes of an entry's header.
pub(crate) const ENTRY_HEADER_BYTES: usize = 28;

/// The most an archiver writes before it syncs: a batch's bound. A crash
/// leaves at most one batch unsynced, so a damaged entry further than this
/// (and a group) from the end of the last segment is damage, not a torn tail.
pub(crate) const BATCH_BYTES: u64 = 1 << 20;

/// Whether a damaged entry at `offset` of the last segment, `len` bytes
/// long, can be what a crash tore: the archiver keeps its unsynced bytes
/// within `BATCH_BYTES`, or one entry, so the damage lies within
/// `BATCH_BYTES` of the end or is the one entry that runs past it.
pub(crate) fn could_be_torn(file: &dyn StorageFile, offset: u64, len: u64) -> bool {
    if len - offset <= BATCH_BYTES {
        return true;
    }
    let mut header = [0u8; ENTRY_HEADER_BYTES];
    let read = file.read_exact_at(&mut header, offset);
    let body_len = u64::from(u32::from_le_bytes([header[20], header[21], header[22], header[23]]));
    read.is_ok() && offset + ENTRY_HEADER_BYTES as u64 + body_len > len
}

/// The file name of the segment whose first group starts at `start`.
pub(crate) fn segment_name(start: Lsn) -> String {
    format!("{:016x}.seg", start.0)
}

/// The first LSN a segment file name gives, if it names a segment.
fn parse_segment_name(name: &str) -> Option<Lsn> {
    let hex = name.strip_suffix(".seg")?;
    if hex.len() != 16 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(Lsn)
}

/// A segment's header.
pub(crate) fn encode_header(log_id: u128, start: Lsn) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..MAGIC.len()].copy_from_slice(&MAGIC);
    write_u32(&mut header, VERSION_OFFSET, VERSION);
    header[LOG_ID_OFFSET..LOG_ID_OFFSET + 16].copy_from_slice(&log_id.to_le_bytes());
    write_u64(&mut header, START_OFFSET, start.0);
    let crc = crc32c::crc32c(&header[..HEADER_CRC_OFFSET]);
    write_u32(&mut header, HEADER_CRC_OFFSET, crc);
    header
}

/// `record_count` of a torn span's entry ([FORMAT §9.2](crate::docs::format#92-entry-one-group)): no group of
/// the log holds that many records in no bytes.
const TORN_SPAN_COUNT: u32 = u32::MAX;

/// A group as an entry: its header, then its body.
pub(crate) fn encode_entry_header(group: &Group) -> [u8; ENTRY_HEADER_BYTES] {
    encode_entry(group.start_lsn(), group.end_lsn(), group.record_count() as u32, group.body())
}

/// The entry of a span a crash tore and recovery resumed inside (INV-46):
/// no records, no body.
pub(crate) fn encode_torn_span(start: Lsn, end: Lsn) -> [u8; ENTRY_HEADER_BYTES] {
    encode_entry(start, end, TORN_SPAN_COUNT, &[])
}

fn encode_entry(start: Lsn, end: Lsn, count: u32, body: &[u8]) -> [u8; ENTRY_HEADER_BYTES] {
    let mut header = [0u8; ENTRY_HEADER_BYTES];
    write_u64(&mut header, 0, start.0);
    write_u64(&mut header, ENTRY_END_OFFSET, end.0);
    write_u32(&mut header, ENTRY_COUNT_OFFSET, count);
    write_u32(&mut header, ENTRY_BODY_LEN_OFFSET, body.len() as u32);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[..ENTRY_CRC_OFFSET]), body);
    write_u32(&mut header, ENTRY_CRC_OFFSET, crc);
    header
}

/// One segment file of an archive.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    pub(crate) start: Lsn,
    pub(crate) path: PathBuf,
}

/// An archive directory, read-only: its segments in LSN order.
///
/// ```
/// use std::sync::Arc;
/// use redolog::archive::{Archive, Archiver};
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default().with_capacity_bytes(1 << 20);
/// let log = Arc::new(Log::open(dir.path().join("redo"), config).unwrap().0);
/// let archiver = Archiver::start(&log, dir.path().join("archive")).unwrap();
/// let end = log.commit(b"page 7: set x", Durability::Synced).unwrap();
/// archiver.wait(end).unwrap();
/// let archive = Archive::open(dir.path().join("archive")).unwrap();
/// let groups: Vec<_> = archive.read_from(archive.start_lsn()).unwrap().map(Result::unwrap).collect();
/// assert_eq!(groups.last().unwrap().end_lsn(), end);
/// ```
#[derive(Debug)]
pub struct Archive {
    dir: PathBuf,
    log_id: u128,
    segments: Vec<Segment>,
    /// Where the segments live: the file system, or a test's storage.
    pub(crate) storage: Arc<dyn Storage>,
}

impl Archive {
    /// Opens the archive in `dir`: lists its segments and checks their
    /// headers. `NotAnArchive` for a directory holding anything else, or no
    /// segment; `ForeignFile` for a segment of another log.
    pub fn open(dir: impl AsRef<Path>) -> Result<Archive> {
        Self::open_with_storage(dir, FsStorage)
    }

    /// [`Archive::open`] on another [`Storage`]: the storage of the log an
    /// [`Archiver`](super::Archiver) archived (in-memory, crash-recording).
    pub fn open_with_storage(dir: impl AsRef<Path>, storage: impl Storage + 'static) -> Result<Archive> {
        Self::open_in(dir.as_ref(), Arc::new(storage))
    }

    pub(crate) fn open_in(dir: &Path, storage: Arc<dyn Storage>) -> Result<Archive> {
        let dir = dir.to_path_buf();
        let names = storage.list_dir(&dir).map_err(|source| Error::io("read_dir", &dir, source))?;
        let mut segments = Vec::new();
        for name in names {
            if name.ends_with(".seg.tmp") {
                continue; // a segment whose creation (or cut) a crash cut short
            }
            let Some(start) = parse_segment_name(&name) else {
                return Err(Error::NotAnArchive { path: dir.join(name), reason: "not a segment file name".into() });
            };
            segments.push(Segment { start, path: dir.join(name) });
        }
        segments.sort_by_key(|segment| segment.start);
        let Some(first) = segments.first() else {
            return Err(Error::NotAnArchive { path: dir, reason: "it holds no segment".into() });
        };
        let log_id = read_header(&*storage, first)?;
        for segment in &segments[1..] {
            let found = read_header(&*storage, segment)?;
            if found != log_id {
                return Err(Error::ForeignFile { path: segment.path.clone(), expected: log_id, found });
            }
        }
        Ok(Archive { dir, log_id, segments, storage })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The id of the log the archive copies.
    pub fn log_id(&self) -> u128 {
        self.log_id
    }

    /// Where the archive starts: its first group's start.
    pub fn start_lsn(&self) -> Lsn {
        self.segments[0].start
    }

    /// Segment files, oldest first.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub(crate) fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The groups from `from`, a group boundary in the archive, in LSN order.
    /// The iterator ends at the archive's end — before a torn last entry, which
    /// a crash of the archiver leaves and its next start truncates. A damaged
    /// entry anywhere else, or a gap between segments, is `Corruption`.
    pub fn read_from(&self, from: Lsn) -> Result<ArchiveReader> {
        if from < self.start_lsn() {
            return Err(Error::InvalidLsn { lsn: from, reason: "it is before the archive's first group" });
        }
        let index = self.segments.partition_point(|segment| segment.start <= from) - 1;
        let mut reader = ArchiveReader::open(self.storage.clone(), self.segments[index..].to_vec(), from)?;
        reader.skip_to(from)?;
        Ok(reader)
    }

    /// Reads every entry of every segment: their checksums, the LSN chain and
    /// the records. Returns what it found; a torn last entry is reported, not
    /// an error.
    pub fn verify(&self) -> Result<ArchiveSummary> {
        let mut summary =
            ArchiveSummary { start: self.start_lsn(), end: self.start_lsn(), ..ArchiveSummary::default() };
        let mut reader = ArchiveReader::open(self.storage.clone(), self.segments.clone(), self.start_lsn())?;
        while let Some(group) = reader.next_group()? {
            summary.end = group.end_lsn();
            if reader.torn_span {
                summary.torn_spans += 1;
                continue;
            }
            summary.groups += 1;
            summary.records += group.record_count() as u64;
            summary.bytes += group.body().len() as u64;
            summary.end = group.end_lsn();
        }
        summary.segments = self.segments.len();
        summary.torn_tail = reader.torn;
        Ok(summary)
    }
}

/// What [`Archive::verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArchiveSummary {
    /// Segment files.
    pub segments: usize,
    /// Groups, records and body bytes archived.
    pub groups: u64,
    /// Records in those groups.
    pub records: u64,
    /// Bytes of the groups' bodies (records and their lengths).
    pub bytes: u64,
    /// The first group's start and the last group's end.
    pub start: Lsn,
    /// The end of the last whole group.
    pub end: Lsn,
    /// A torn entry after the last whole group: its file and offset.
    pub torn_tail: Option<(PathBuf, u64)>,
    /// Spans of the log a crash tore inside a group and recovery resumed
    /// after ([FORMAT §9.2](crate::docs::format#92-entry-one-group)): entries that hold no group.
    pub torn_spans: u64,
}

/// Reads a segment's header; returns its log id.
fn read_header(storage: &dyn Storage, segment: &Segment) -> Result<u128> {
    let mut header = [0u8; HEADER_BYTES];
    let path = &segment.path;
    failpoint("archive.open")
        .and_then(|()| storage.open_file(path, false))
        .and_then(|file| file.read_exact_at(&mut header, 0))
        .map_err(|source| Error::io("read", path, source))?;
    let problem = if header[..MAGIC.len()] != MAGIC {
        Some("no segment magic")
    } else if read_u32(&header, HEADER_CRC_OFFSET) != crc32c::crc32c(&header[..HEADER_CRC_OFFSET]) {
        Some("the header's checksum fails")
    } else if read_u32(&header, VERSION_OFFSET) != VERSION {
        Some("unknown segment version")
    } else if read_u64(&header, START_OFFSET) != segment.start.0 {
        Some("its header's first LSN differs from its name")
    } else {
        None
    };
    if let Some(reason) = problem {
        return Err(Error::NotAnArchive { path: path.clone(), reason: reason.into() });
    }
    let mut log_id = [0u8; 16];
    log_id.copy_from_slice(&header[LOG_ID_OFFSET..LOG_ID_OFFSET + 16]);
    Ok(u128::from_le_bytes(log_id))
}

/// The segment being read, through a read-ahead buffer.
struct Cursor {
    segment: Segment,
    file: Arc<dyn StorageFile>,
    /// Where the next entry starts.
    offset: u64,
    len: u64,
    last: bool,
    /// Bytes read ahead, from `ahead_at` on.
    ahead: Vec<u8>,
    ahead_at: u64,
    /// Bytes of the entry at `offset` taken so far.
    taken: u64,
}

/// Bytes a cursor reads ahead.
const READ_AHEAD_BYTES: u64 = 1 << 16;

impl Cursor {
    /// The next `len` bytes of the entry at `offset`: one read of the file
    /// per read-ahead stretch.
    fn take(&mut self, len: usize) -> std::io::Result<Vec<u8>> {
        let at = self.offset + self.taken;
        let end = at + len as u64;
        if at < self.ahead_at || end > self.ahead_at + self.ahead.len() as u64 {
            let want = (len as u64).max(READ_AHEAD_BYTES).min(self.len.saturating_sub(at));
            if want < len as u64 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            let mut fresh = vec![0u8; want as usize];
            self.file.read_exact_at(&mut fresh, at)?;
            (self.ahead, self.ahead_at) = (fresh, at);
        }
        let from = (at - self.ahead_at) as usize;
        self.taken += len as u64;
        Ok(self.ahead[from..from + len].to_vec())
    }

    /// The entry was read: the next one starts after it.
    fn consume(&mut self) {
        self.offset += self.taken;
        self.taken = 0;
    }

    /// The entry did not read: the cursor stays at its start.
    fn rewind(&mut self) {
        self.taken = 0;
    }
}

/// The groups of an archive from a position ([`Archive::read_from`]).
pub struct ArchiveReader {
    storage: Arc<dyn Storage>,
    /// The segments not yet opened, the next one first.
    segments: Vec<Segment>,
    current: Option<Cursor>,
    /// The start the next group must have.
    next: Lsn,
    /// A torn last entry, once reached.
    torn: Option<(PathBuf, u64)>,
    /// Whether the entry read last was a torn span's (INV-46).
    torn_span: bool,
}

impl ArchiveReader {
    /// A reader of `segments`, the first opened, whose next group starts at
    /// `next`.
    fn open(storage: Arc<dyn Storage>, segments: Vec<Segment>, next: Lsn) -> Result<ArchiveReader> {
        let mut reader = ArchiveReader { storage, segments, current: None, next, torn: None, torn_span: false };
        reader.open_next()?;
        Ok(reader)
    }

    /// Opens the next segment; `false` if there is none.
    fn open_next(&mut self) -> Result<bool> {
        if self.segments.is_empty() {
            self.current = None;
            return Ok(false);
        }
        let segment = self.segments.remove(0);
        let path = segment.path.clone();
        let file = failpoint("archive.open")
            .and_then(|()| self.storage.open_file(&path, false))
            .map_err(|source| Error::io("open", &path, source))?;
        let len = file.size().map_err(|source| Error::io("stat", &path, source))?;
        let last = self.segments.is_empty();
        let offset = (HEADER_BYTES as u64).min(len);
        self.current = Some(Cursor { segment, file, offset, len, last, ahead: Vec::new(), ahead_at: 0, taken: 0 });
        Ok(true)
    }

    /// Reads groups until the next one starts at `from`.
    fn skip_to(&mut self, from: Lsn) -> Result<()> {
        let Some(cursor) = &self.current else { return Ok(()) };
        self.next = cursor.segment.start;
        while self.next < from {
            if self.next_group()?.is_none() {
                return Err(Error::InvalidLsn { lsn: from, reason: "it is past the archive's end" });
            }
        }
        if self.next != from {
            return Err(Error::InvalidLsn { lsn: from, reason: "it is not a group boundary in the archive" });
        }
        Ok(())
    }

    /// The next group, `None` at the archive's end.
    fn next_group(&mut self) -> Result<Option<Group>> {
        loop {
            let Some(cursor) = &mut self.current else { return Ok(None) };
            if cursor.offset == cursor.len {
                if !self.open_next()? {
                    return Ok(None);
                }
                let cursor = self.current.as_ref().map(|cursor| (cursor.segment.start, cursor.segment.path.clone()));
                if let Some((start, path)) = cursor {
                    if start != self.next {
                        let reason = format!("the segment starts at {start}, the previous one ends at {}", self.next);
                        return Err(Error::Corruption { path, offset: 0, lsn: start, reason });
                    }
                }
                continue;
            }
            return match read_entry(cursor, self.next) {
                Ok((group, torn_span)) => {
                    self.next = group.end_lsn();
                    self.torn_span = torn_span;
                    Ok(Some(group))
                }
                // A torn tail: what a crash of the archiver leaves, within
                // what it keeps unsynced of its last segment.
                Err(_) if cursor.last && could_be_torn(&*cursor.file, cursor.offset, cursor.len) => {
                    self.torn = Some((cursor.segment.path.clone(), cursor.offset));
                    self.current = None;
                    Ok(None)
                }
                Err(reason) => Err(Error::Corruption {
                    path: cursor.segment.path.clone(),
                    offset: cursor.offset,
                    lsn: self.next,
                    reason,
                }),
            };
        }
    }
}

impl ArchiveReader {
    /// The file and offset just after the last group returned.
    pub(crate) fn file_position(&self) -> Option<(PathBuf, u64)> {
        self.current.as_ref().map(|cursor| (cursor.segment.path.clone(), cursor.offset))
    }
}

/// Cuts the archive after its last group ending at or before `lsn`: that
/// segment is truncated there (which also drops a torn last entry), later
/// segments are removed, and both are synced. Returns the archive's new end.
pub(crate) fn cut_after(archive: &Archive, lsn: Lsn) -> Result<Lsn> {
    let storage = &archive.storage;
    let mut reader = ArchiveReader::open(storage.clone(), archive.segments.clone(), archive.start_lsn())?;
    let first = &archive.segments[0];
    let mut cut = (first.path.clone(), HEADER_BYTES as u64, first.start);
    while let Some(group) = reader.next_group()? {
        if group.end_lsn() > lsn {
            break;
        }
        if let Some((path, offset)) = reader.file_position() {
            cut = (path, offset, group.end_lsn());
        }
    }
    let (path, offset, end) = cut;
    // Later segments go first, newest first, so a crash never leaves a gap
    // (a shorter archive is what a cut leaves anyway).
    let cut_start =
        archive.segments.iter().find(|segment| segment.path == path).map_or(Lsn(0), |segment| segment.start);
    for segment in archive.segments.iter().rev().filter(|segment| segment.start > cut_start) {
        failpoint("archive.remove")
            .and_then(|()| storage.remove_file(&segment.path))
            .map_err(|source| Error::io("remove", &segment.path, source))?;
    }
    sync_dir(&**storage, &archive.dir)?;
    // The segment up to the cut, written whole under a temporary name and
    // renamed over it: a crash leaves the old segment or the cut one.
    let file = failpoint("archive.open")
        .and_then(|()| storage.open_file(&path, false))
        .map_err(|source| Error::io("open", &path, source))?;
    let mut kept = vec![0u8; offset as usize];
    file.read_exact_at(&mut kept, 0).map_err(|source| Error::io("read", &path, source))?;
    let temporary = path.with_extension("seg.tmp");
    let cut_file = failpoint("archive.create")
        .and_then(|()| storage.open_file(&temporary, true))
        .map_err(|source| Error::io("create", &temporary, source))?;
    storage.set_permissions(&temporary, 0o600).map_err(|source| Error::io("chmod", &temporary, source))?;
    failpoint("archive.write")
        .and_then(|()| cut_file.write_all_at(&[&kept], 0))
        .map_err(|source| Error::io("write", &temporary, source))?;
    failpoint("archive.cut")
        .and_then(|()| cut_file.sync_data())
        .map_err(|source| Error::io("fdatasync", &temporary, source))?;
    failpoint("archive.rename")
        .and_then(|()| storage.rename(&temporary, &path))
        .map_err(|source| Error::io("rename", &temporary, source))?;
    sync_dir(&**storage, &archive.dir)?;
    Ok(end)
}

/// Makes the archive directory's names durable.
pub(crate) fn sync_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    failpoint("archive.sync_dir").and_then(|()| storage.sync_dir(dir)).map_err(|source| Error::io("fsync", dir, source))
}

impl Iterator for ArchiveReader {
    type Item = Result<Group>;

    /// The next group; a torn span's entry is not one (it holds no
    /// records: the next group starts at its end).
    fn next(&mut self) -> Option<Result<Group>> {
        loop {
            let group = self.next_group().transpose();
            if !(self.torn_span && matches!(group, Some(Ok(_)))) {
                return group;
            }
        }
    }
}

impl std::fmt::Debug for ArchiveReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveReader").field("next", &self.next).finish_non_exhaustive()
    }
}

/// Reads the entry at the cursor, which must start at `expected`; why not, if
/// it cannot.
fn read_entry(cursor: &mut Cursor, expected: Lsn) -> std::result::Result<(Group, bool), String> {
    let entry = read_entry_at(cursor, expected);
    match &entry {
        Ok(_) => cursor.consume(),
        Err(_) => cursor.rewind(),
    }
    entry
}

/// The entry at the cursor, and whether it is a torn span's.
fn read_entry_at(cursor: &mut Cursor, expected: Lsn) -> std::result::Result<(Group, bool), String> {
    let left = cursor.len - cursor.offset;
    if left < ENTRY_HEADER_BYTES as u64 {
        return Err(format!("{left} bytes where an entry header needs {ENTRY_HEADER_BYTES}"));
    }
    let header = cursor.take(ENTRY_HEADER_BYTES).map_err(|error| format!("read: {error}"))?;
    let (start, end) = (Lsn(read_u64(&header, 0)), Lsn(read_u64(&header, ENTRY_END_OFFSET)));
    let count = read_u32(&header, ENTRY_COUNT_OFFSET);
    let body_len = u64::from(read_u32(&header, ENTRY_BODY_LEN_OFFSET));
    if body_len > left - ENTRY_HEADER_BYTES as u64 {
        return Err(format!("an entry of {body_len} bytes runs past the file's end"));
    }
    let body = cursor.take(body_len as usize).map_err(|error| format!("read: {error}"))?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[..ENTRY_CRC_OFFSET]), &body);
    if crc != read_u32(&header, ENTRY_CRC_OFFSET) {
        return Err("the entry's checksum fails".into());
    }
    if start != expected || end <= start {
        return Err(format!("an entry for [{start}, {end}) where the group at {expected} belongs"));
    }
    let torn_span = count == TORN_SPAN_COUNT && body.is_empty();
    let count = if torn_span { 0 } else { count };
    Ok((Group::from_body(start, end, count, body)?, torn_span))
}
