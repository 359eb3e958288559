//! Reading the block stream and the groups in it. The reader reports what it finds
//! — a group, the end of the valid stream and why, or damage inside valid blocks
//! with its file, offset, LSN and reason — and never decides or writes:
//! recovery (`scan.rs`, the `Recovery` iterator) decides what a finding means,
//! and repair is a separate step (`scan::repair`).

use std::sync::Arc;

use crate::encryption::block::{BlockCipher, BlockKeyId, TAG_OFFSET};
use crate::error::{Error, Result};
use crate::format::{
    read_block_header, BlockState, GroupHeader, BLOCK_BYTES, BLOCK_HEADER_BYTES, GROUP_HEADER_BYTES,
    RECORD_HEADER_BYTES,
};
use crate::lsn::{BlockNo, Lsn};
use crate::writer::Files;

/// Blocks read per I/O while scanning (128 KiB).
const READ_AHEAD_BLOCKS: u64 = 256;

/// Reads blocks from their places in the files, with read-ahead.
pub(crate) struct BlockReader {
    files: Arc<Files>,
    buffer: Vec<u8>,
    first: u64,
    count: u64,
    /// The last block worth reading ahead to (the block of a reader's
    /// limit): a live reader at the log's frontier reads the block or two
    /// it needs, not 128 KiB of which all but those are read again later.
    read_ahead_to: Option<BlockNo>,
    /// An encrypted log's last block opened (`opened`), in clear: its header
    /// and data; the seal's bytes stay zero (nothing writes them).
    plain: Box<[u8; BLOCK_BYTES]>,
    plain_of: Option<BlockNo>,
    /// The cipher of the last block opened: the next block is almost always
    /// of the same session.
    cipher: Option<Arc<BlockCipher>>,
    /// The key ids of the blocks opened so far (INV-31: the scan's, from the
    /// checkpoint on, are the ones the next session's key table keeps).
    pub(crate) key_ids: Vec<u32>,
}

impl BlockReader {
    pub(crate) fn new(files: Arc<Files>) -> Self {
        BlockReader {
            files,
            buffer: Vec::new(),
            first: 0,
            count: 0,
            read_ahead_to: None,
            plain: Box::new([0u8; BLOCK_BYTES]),
            plain_of: None,
            cipher: None,
            key_ids: Vec::new(),
        }
    }

    /// Reads from `files` from now on (a resize switched the log's files,
    /// [DESIGN §1.18](crate::docs::design#118-online-resize)), forgetting what was read ahead.
    pub(crate) fn switch_files(&mut self, files: Arc<Files>) {
        self.files = files;
        self.count = 0;
        self.plain_of = None;
    }

    /// The valid block `block` (its header checked by `state`) in clear: in a
    /// log in clear, the block as read; in an encrypted log, its header and
    /// data once its tag verified (INV-30). `Ok(Err(reason))`: the tag did
    /// not verify, and nothing of the block is returned. An encrypted log
    /// read without its keys is `KeyRequired`; a key the provider lacks or
    /// that is not the one recorded, `MissingKey` or `WrongKey`.
    pub(crate) fn opened(&mut self, block: BlockNo) -> Result<std::result::Result<&[u8], String>> {
        if !self.files.encrypted {
            return self.read(block).map(Ok);
        }
        if self.plain_of != Some(block) {
            if let Err(reason) = self.open(block)? {
                return Ok(Err(reason));
            }
        }
        Ok(Ok(&self.plain[..]))
    }

    /// Opens `block` of an encrypted log into `plain`.
    fn open(&mut self, block: BlockNo) -> Result<std::result::Result<(), String>> {
        self.plain_of = None;
        let Some(opener) = self.files.opener.clone() else {
            return Err(Error::KeyRequired { path: self.files.dir() });
        };
        let id = BlockKeyId::of(self.read(block)?);
        // Read ahead now: where it lies stays put until the next `read`.
        let image = self.buffered(block);
        let cipher = match &self.cipher {
            Some(cipher) if cipher.id() == id => cipher.clone(),
            _ => {
                let needed = || format!("to read block {} at LSN {}", block.0, block.data_start());
                let Some(cipher) = opener.cipher(id, needed)? else {
                    let key_id = id.key_id;
                    return Ok(Err(format!(
                        "the block names key id {key_id}, which neither the log nor the provider has"
                    )));
                };
                self.cipher = Some(cipher.clone());
                cipher
            }
        };
        let image = &self.buffer[image];
        if cipher.open(image, block, &mut self.plain[BLOCK_HEADER_BYTES..TAG_OFFSET]).is_err() {
            let key_id = id.key_id;
            return Ok(Err(format!("the block fails authentication under key id {key_id} (session {})", id.session)));
        }
        self.plain[..BLOCK_HEADER_BYTES].copy_from_slice(&image[..BLOCK_HEADER_BYTES]);
        if !self.key_ids.contains(&id.key_id) {
            self.key_ids.push(id.key_id);
        }
        self.plain_of = Some(block);
        Ok(Ok(()))
    }

    /// The bytes of `block`. An I/O error fails recovery: a block we cannot read
    /// is never taken for the end of the log (reliability matrix E7).
    pub(crate) fn read(&mut self, block: BlockNo) -> Result<&[u8]> {
        if !(self.first..self.first + self.count).contains(&block.0) {
            let wanted = match self.read_ahead_to {
                Some(last) if last >= block => (last.0 - block.0 + 1).min(READ_AHEAD_BLOCKS),
                _ => READ_AHEAD_BLOCKS,
            };
            let Some(run) = self.files.layout.runs(block, wanted).next() else {
                unreachable!("runs of a non-empty range yield at least one run");
            };
            self.buffer.resize((run.count as usize) * BLOCK_BYTES, 0);
            self.files.handles[run.file_index]
                .read_exact_at(&mut self.buffer, run.offset)
                .map_err(|source| Error::io("read", self.files.paths[run.file_index].clone(), source))?;
            self.first = block.0;
            self.count = run.count;
        }
        Ok(&self.buffer[self.buffered(block)])
    }

    /// Where `block`, read ahead, lies in `buffer`.
    fn buffered(&self, block: BlockNo) -> std::ops::Range<usize> {
        let index = ((block.0 - self.first) as usize) * BLOCK_BYTES;
        index..index + BLOCK_BYTES
    }

    /// Forgets what was read ahead from `block` on: on a live log, blocks from
    /// the sync frontier's on may have been rewritten since (the partial last
    /// block grows) or not written yet. The blocks before it stay: they are
    /// final.
    pub(crate) fn forget_from(&mut self, block: BlockNo) {
        if self.first + self.count > block.0 {
            self.count = block.0.saturating_sub(self.first);
        }
        if self.plain_of.is_some_and(|opened| opened >= block) {
            self.plain_of = None;
        }
    }

    /// Reads ahead no further than `last` (`None`: 128 KiB at a time).
    pub(crate) fn read_ahead_to(&mut self, last: Option<BlockNo>) {
        self.read_ahead_to = last;
    }

    /// Reads and classifies `block`.
    pub(crate) fn state(&mut self, block: BlockNo) -> Result<BlockState> {
        let seal = self.files.seal;
        Ok(read_block_header(self.read(block)?, seal, block))
    }

    /// `state`, with an encrypted log's valid block opened: its header is
    /// trusted only once its tag verified (INV-30), and a tag that fails on a
    /// block whose CRC matched is corruption.
    pub(crate) fn checked_state(&mut self, block: BlockNo) -> Result<BlockState> {
        let state = self.state(block)?;
        if let BlockState::Valid(_) = state {
            if let Err(reason) = self.opened(block)? {
                return Err(self.corruption(block.data_start(), reason));
            }
        }
        Ok(state)
    }

    /// Where block `block` lives, for error messages.
    pub(crate) fn place(&self, block: BlockNo) -> (std::path::PathBuf, u64) {
        let (file_index, offset) = self.files.layout.place(block);
        (self.files.paths[file_index].clone(), offset)
    }

    /// Damage at `lsn`, with the file and offset it lies at.
    pub(crate) fn damage(&self, lsn: Lsn, reason: String) -> Damage {
        let (path, block_offset) = self.place(lsn.block());
        Damage { path, offset: block_offset + lsn.offset_in_block() as u64, lsn, reason }
    }

    /// `damage`, as recovery's verdict: corruption.
    pub(crate) fn corruption(&self, lsn: Lsn, reason: String) -> Error {
        self.damage(lsn, reason).into_corruption()
    }
}

/// Bytes inside valid blocks that contradict the format: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Damage {
    pub(crate) path: std::path::PathBuf,
    pub(crate) offset: u64,
    pub(crate) lsn: Lsn,
    pub(crate) reason: String,
}

impl Damage {
    /// Recovery's verdict on damage in blocks that were synced: the log is
    /// corrupt there.
    pub(crate) fn into_corruption(self) -> Error {
        Error::Corruption { path: self.path, offset: self.offset, lsn: self.lsn, reason: self.reason }
    }
}

/// A recovered record group: one mini-transaction, whole.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
/// let end = log.append_group(&[b"page 7: set x", b"page 9: set y"]).unwrap();
/// log.wait(end, Durability::Synced).unwrap();
/// drop(log);
/// let (_, recovery) = Log::open(dir.path(), Config::default()).unwrap();
/// let groups: Vec<_> = recovery.map(Result::unwrap).collect();
/// assert_eq!(groups[0].end_lsn(), end);
/// let records: Vec<&[u8]> = groups[0].records().collect();
/// assert_eq!(records, [&b"page 7: set x"[..], b"page 9: set y"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    start: Lsn,
    end: Lsn,
    /// The group's body: each record after its length (checked to hold
    /// exactly `count` records when read).
    data: Vec<u8>,
    count: usize,
}

impl Group {
    /// The LSN the group starts at (its header).
    pub fn start_lsn(&self) -> Lsn {
        self.start
    }

    /// The LSN just after the group: the value `append_group` returned for it.
    pub fn end_lsn(&self) -> Lsn {
        self.end
    }

    /// The group's records, in the order they were appended.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        Records { rest: &self.data, left: self.count }
    }

    /// Number of records.
    pub fn record_count(&self) -> usize {
        self.count
    }

    /// The group's body as the log frames it in clear: each record after its
    /// 4-byte length ([FORMAT §6](crate::docs::format#6-groups-and-records)).
    pub(crate) fn body(&self) -> &[u8] {
        &self.data
    }

    /// A group read from elsewhere (an archive): `body` must hold exactly
    /// `count` records; why not, if it does not.
    pub(crate) fn from_body(start: Lsn, end: Lsn, count: u32, body: Vec<u8>) -> std::result::Result<Group, String> {
        parse_records(&body, u64::from(count))?;
        Ok(Group { start, end, data: body, count: count as usize })
    }
}

/// Why the valid stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// A valid block with fewer data bytes than a full one: the stream ends after its data.
    PartialBlock,
    /// This block is not a valid block of the expected number.
    NotValid(BlockState),
    /// The reader reached the limit it was given.
    Limit,
}

/// One step of reading the group stream.
#[derive(Debug)]
pub(crate) enum Step {
    /// A complete group (its data kept only if the reader keeps data).
    Group(Group),
    /// The valid stream ends at `at`; bytes from `group_start` to `at` belong to a
    /// group cut off by the end.
    End { group_start: Lsn, at: Lsn, why: StreamEnd },
    /// Damage inside valid blocks; the reader reads no further.
    Damaged(Damage),
}

/// Why reading stopped inside a step.
enum Stop {
    End(StreamEnd),
    Damaged(Damage),
}

/// The state of the block the reader is in.
struct CurrentBlock {
    number: BlockNo,
    data_len: usize,
    first_group: usize,
    /// Whether a group start was seen in this block (for the `first_group` check).
    saw_group_start: bool,
    /// Whether the block was entered at its first data byte (so every group start
    /// in it is seen).
    entered_at_start: bool,
}

/// Reads groups from a position in the block stream.
pub(crate) struct GroupReader {
    pub(crate) blocks: BlockReader,
    position: Lsn,
    current: Option<CurrentBlock>,
    /// Stop before this LSN (used to re-read a known-good range).
    limit: Option<Lsn>,
    keep_data: bool,
    /// Scratch space for group and record headers.
    scratch: Vec<u8>,
    /// Every valid block seen, for the durable frontier: max `synced_block`.
    pub(crate) max_synced_block: BlockNo,
    /// The last block seen valid.
    pub(crate) last_valid_block: Option<BlockNo>,
    /// The session's start when it lies inside a group a crash tore
    /// (INV-46): its block's `first_group` points at it, not at the groups
    /// of the earlier session before it in that block.
    restart: Option<Lsn>,
}

/// An internal outcome of reading bytes.
enum Read {
    Done,
    Stopped(Stop),
}

impl GroupReader {
    /// A reader of the groups from `position`, keeping their bytes or not;
    /// groups larger than the files hold are damage.
    pub(crate) fn new(blocks: BlockReader, position: Lsn, keep_data: bool) -> Self {
        debug_assert!(position.is_data_position(blocks.files.seal.geometry()));
        GroupReader {
            blocks,
            position,
            current: None,
            limit: None,
            keep_data,
            scratch: Vec::with_capacity(GROUP_HEADER_BYTES),
            max_synced_block: BlockNo(0),
            last_valid_block: None,
            restart: None,
        }
    }

    /// A reader of the session that began at `start` (INV-46): group starts
    /// before `start` in its block are not checked against the block's
    /// `first_group`, which a recovery that resumed inside a torn group set
    /// to `start`.
    pub(crate) fn in_session_from(mut self, start: Lsn) -> Self {
        self.restart = Some(start);
        self
    }

    pub(crate) fn with_limit(mut self, limit: Lsn) -> Self {
        self.set_limit(limit);
        self
    }

    pub(crate) fn position(&self) -> Lsn {
        self.position
    }

    /// Reads up to `limit` from now on, and reads blocks ahead no further.
    pub(crate) fn set_limit(&mut self, limit: Lsn) {
        self.limit = Some(limit);
        self.blocks.read_ahead_to(Some(limit.block()));
    }

    /// Goes back to `position` (a group start) and forgets every block from
    /// `stale` on (`BlockReader::forget_from`), including the one it was in.
    pub(crate) fn restart_at(&mut self, position: Lsn, stale: BlockNo) {
        self.position = position;
        self.current = None;
        self.blocks.forget_from(stale);
    }

    /// Reads `N` bytes of a header; `Err` with where and why the stream stopped.
    fn read_header<const N: usize>(&mut self) -> Result<std::result::Result<[u8; N], Stop>> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let read = self.read_bytes(N as u64, Some(&mut scratch));
        let mut bytes = [0u8; N];
        if let Ok(Read::Done) = read {
            bytes.copy_from_slice(&scratch);
        }
        self.scratch = scratch;
        Ok(match read? {
            Read::Done => Ok(bytes),
            Read::Stopped(stop) => Err(stop),
        })
    }

    /// Enters the block at `self.position` if not in it yet.
    fn enter_block(&mut self) -> Result<Option<Stop>> {
        let number = self.position.block();
        if self.current.as_ref().is_some_and(|block| block.number == number) {
            return Ok(None);
        }
        if let Some(previous) = self.current.take() {
            if let Some(damage) = self.check_first_group(&previous) {
                return Ok(Some(Stop::Damaged(damage)));
            }
        }
        match self.blocks.state(number)? {
            BlockState::Valid(header) => {
                // An encrypted log's block is opened as it is entered: its
                // bytes are read only once authenticated, and the scan, which
                // keeps no data, checks every tag too (INV-30).
                if let Err(reason) = self.blocks.opened(number)? {
                    return Ok(Some(Stop::Damaged(self.blocks.damage(number.data_start(), reason))));
                }
                self.max_synced_block = self.max_synced_block.max(header.synced_block());
                self.last_valid_block = Some(number);
                self.current = Some(CurrentBlock {
                    number,
                    data_len: header.data_len,
                    first_group: header.first_group,
                    saw_group_start: false,
                    entered_at_start: self.position.offset_in_block() == BLOCK_HEADER_BYTES,
                });
                Ok(None)
            }
            other => Ok(Some(Stop::End(StreamEnd::NotValid(other)))),
        }
    }

    /// A block left behind must have had `first_group` = the first group start
    /// the reader saw in it, or 0 if none ([DESIGN INV-9](crate::docs::design#2-invariants)).
    fn check_first_group(&self, block: &CurrentBlock) -> Option<Damage> {
        if block.entered_at_start && !block.saw_group_start && block.first_group != 0 {
            let at = Lsn(block.number.start().0 + block.first_group as u64);
            return Some(self.blocks.damage(at, "first_group points at no group start".into()));
        }
        None
    }

    fn note_group_start(&mut self) -> Option<Damage> {
        let offset = self.position.offset_in_block();
        if let Some(block) = self.current.as_mut() {
            let before_restart =
                self.restart.is_some_and(|start| start.block() == block.number && self.position < start);
            if !block.saw_group_start {
                block.saw_group_start = true;
                if block.entered_at_start && block.first_group != offset && !before_restart {
                    let reason = format!("first_group is {} but a group starts at {offset}", block.first_group);
                    return Some(self.blocks.damage(self.position, reason));
                }
            }
        }
        None
    }

    /// Reads `len` data bytes (into `out` if given), crossing blocks.
    fn read_bytes(&mut self, mut len: u64, mut out: Option<&mut Vec<u8>>) -> Result<Read> {
        while len > 0 {
            if self.limit.is_some_and(|limit| self.position >= limit) {
                return Ok(Read::Stopped(Stop::End(StreamEnd::Limit)));
            }
            if let Some(stop) = self.enter_block()? {
                return Ok(Read::Stopped(stop));
            }
            let Some(block) = self.current.as_ref() else { unreachable!("entered a valid block") };
            let offset = self.position.offset_in_block();
            let data_end = BLOCK_HEADER_BYTES + block.data_len;
            if offset >= data_end {
                return Ok(Read::Stopped(Stop::End(StreamEnd::PartialBlock)));
            }
            // Never past the limit, inside a block too: a group that runs
            // over it stops there (`StreamEnd::Limit`), its bytes past it
            // unread (the live reader's limit is the durable LSN, INV-23).
            let to_limit = self.limit.map_or(u64::MAX, |limit| limit.0 - self.position.0);
            let count = ((data_end - offset) as u64).min(len).min(to_limit) as usize;
            if let Some(out) = out.as_deref_mut() {
                let number = block.number;
                let image = match self.blocks.opened(number)? {
                    Ok(image) => image,
                    // Opened when entered; a reader that forgot it opens it again.
                    Err(reason) => {
                        return Ok(Read::Stopped(Stop::Damaged(self.blocks.damage(number.data_start(), reason))))
                    }
                };
                out.extend_from_slice(&image[offset..offset + count]);
            }
            len -= count as u64;
            self.position = if offset + count == self.blocks.files.seal.geometry().data_end() {
                BlockNo(block.number.0 + 1).data_start()
            } else {
                Lsn(self.position.0 + count as u64)
            };
        }
        Ok(Read::Done)
    }

    /// Reads the next group, or reports where the stream ends.
    pub(crate) fn next_step(&mut self) -> Result<Step> {
        let group_start = self.position;
        if let Some(why) = self.at_limit() {
            return Ok(Step::End { group_start, at: group_start, why });
        }
        if let Some(stop) = self.enter_block()? {
            return Ok(Self::stopped(group_start, group_start, stop));
        }
        let block_data_end = self.current.as_ref().map_or(0, |block| BLOCK_HEADER_BYTES + block.data_len);
        if group_start.offset_in_block() >= block_data_end {
            return Ok(Step::End { group_start, at: group_start, why: StreamEnd::PartialBlock });
        }
        if let Some(damage) = self.note_group_start() {
            return Ok(Step::Damaged(damage));
        }
        let raw = match self.read_header::<GROUP_HEADER_BYTES>()? {
            Ok(raw) => raw,
            Err(stop) => return Ok(Self::stopped(group_start, self.position, stop)),
        };
        let header = GroupHeader::decode(&raw);
        if !header.is_plausible() || header.total_bytes() > self.blocks.files.group_bytes_max() {
            let reason = format!("group header claims {} records in {} bytes", header.record_count, header.body_bytes);
            return Ok(Step::Damaged(self.blocks.damage(group_start, reason)));
        }
        self.read_records(group_start, header)
    }

    /// The step that reports a stop at `at` inside the group from `group_start`.
    fn stopped(group_start: Lsn, at: Lsn, stop: Stop) -> Step {
        match stop {
            Stop::End(why) => Step::End { group_start, at, why },
            Stop::Damaged(damage) => Step::Damaged(damage),
        }
    }

    fn at_limit(&self) -> Option<StreamEnd> {
        self.limit.is_some_and(|limit| self.position >= limit).then_some(StreamEnd::Limit)
    }

    /// Reads the group's body in one go, then finds its records in memory.
    fn read_records(&mut self, group_start: Lsn, header: GroupHeader) -> Result<Step> {
        // The body is bounded by `Layout::group_bytes_max` (checked by the caller).
        let mut body = if self.keep_data {
            Vec::with_capacity(header.body_bytes as usize)
        } else {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            scratch
        };
        let read = self.read_bytes(header.body_bytes, Some(&mut body))?;
        let step = match read {
            Read::Stopped(stop) => Self::stopped(group_start, self.position, stop),
            Read::Done => match parse_records(&body, header.record_count) {
                Ok(count) => {
                    let (data, count) =
                        if self.keep_data { (std::mem::take(&mut body), count) } else { (Vec::new(), 0) };
                    Step::Group(Group { start: group_start, end: self.position, data, count })
                }
                Err(reason) => Step::Damaged(self.blocks.damage(group_start, reason)),
            },
        };
        if !self.keep_data {
            self.scratch = body;
        }
        Ok(step)
    }
}

/// Checks that a group's `body` holds exactly `count` records; returns the
/// count, or why it does not.
fn parse_records(body: &[u8], count: u64) -> std::result::Result<usize, String> {
    let mut offset = 0;
    for _ in 0..count {
        let body_left = body.len() - offset;
        if body_left < RECORD_HEADER_BYTES {
            return Err(format!("record header overruns its group ({body_left} bytes left)"));
        }
        let len = crate::format::read_u32(body, offset) as usize;
        if RECORD_HEADER_BYTES + len > body_left {
            return Err(format!("record of {len} bytes overruns its group ({body_left} bytes left)"));
        }
        offset += RECORD_HEADER_BYTES + len;
    }
    if offset != body.len() {
        return Err(format!("group has {} bytes after its last record", body.len() - offset));
    }
    Ok(count as usize)
}

/// The records of a group's body, which `parse_records` checked.
struct Records<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (len, rest) = self.rest.split_first_chunk::<RECORD_HEADER_BYTES>()?;
        let (record, rest) = rest.split_at_checked(u32::from_le_bytes(*len) as usize)?;
        self.rest = rest;
        self.left -= 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Records<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Durability, Log};

    /// A live reader at the frontier reads the blocks up to its limit, not
    /// 128 KiB; forgetting the frontier's blocks keeps the final ones before
    /// them.
    #[test]
    fn read_ahead_stops_at_the_limit_and_forgetting_keeps_the_final_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = Log::open(dir.path(), Config { capacity_bytes: 1 << 20, ..Config::default() }).expect("open");
        let start = log.end_lsn().block();
        for _ in 0..40 {
            log.commit(&[7u8; 300], Durability::Synced).expect("commit");
        }
        let mut blocks = BlockReader::new(log.core().files());
        blocks.read_ahead_to(Some(BlockNo(start.0 + 1)));
        blocks.read(start).expect("read");
        assert_eq!((blocks.first, blocks.count), (start.0, 2), "read ahead to the limit's block only");
        blocks.read_ahead_to(None);
        blocks.forget_from(start);
        blocks.read(start).expect("read");
        assert!(blocks.count > 2, "no limit: a whole read-ahead run");
        blocks.forget_from(BlockNo(start.0 + 3));
        assert_eq!(blocks.count, 3, "the blocks before the forgotten one stay");
        blocks.forget_from(BlockNo(start.0.saturating_sub(1)));
        assert_eq!(blocks.count, 0);
    }
}
