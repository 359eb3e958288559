//! The 16 KiB page: a header with the page LSN and a checksum, then
//! fixed-size records sorted by key ([PAGESTORE §2](crate::docs::pagestore#2-the-page)). Every change a
//! redo record makes is a method here that checks it fits first and reports
//! why not, so replay never writes outside a page or past its records.

use redolog::Lsn;

/// A page's number: its offset in the data file divided by [`PAGE_BYTES`].
pub type PageNo = u32;

/// The meta page: where the next free page number and the tables' roots
/// are kept.
pub const META_PAGE: PageNo = 0;

/// Bytes per page (InnoDB's default `innodb_page_size`).
pub const PAGE_BYTES: usize = 16 * 1024;

// docs/PAGESTORE.md §2: crc (4) | lsn (8) | no (4) | kind (1) | level (1) |
// key (2) | value (2) | count (2) | next (4) | tree (4) | records...
const CHECKSUM_OFFSET: usize = 0;
const LSN_OFFSET: usize = CHECKSUM_OFFSET + size_of::<u32>();
const PAGE_NO_OFFSET: usize = LSN_OFFSET + size_of::<u64>();
const KIND_OFFSET: usize = PAGE_NO_OFFSET + size_of::<u32>();
const LEVEL_OFFSET: usize = KIND_OFFSET + size_of::<u8>();
const KEY_BYTES_OFFSET: usize = LEVEL_OFFSET + size_of::<u8>();
const VALUE_BYTES_OFFSET: usize = KEY_BYTES_OFFSET + size_of::<u16>();
const COUNT_OFFSET: usize = VALUE_BYTES_OFFSET + size_of::<u16>();
/// Where the right sibling's number is: a split writes it.
pub const NEXT_OFFSET: usize = COUNT_OFFSET + size_of::<u16>();
const TREE_OFFSET: usize = NEXT_OFFSET + size_of::<u32>();
/// Bytes of the page header; records start here.
pub const HEADER_BYTES: usize = TREE_OFFSET + size_of::<u32>();
const _: () = assert!(HEADER_BYTES == 32);
/// The first byte a `write` redo record may change: the checksum, the page
/// LSN and the page number are the store's, never a record's; the kind,
/// level, record sizes and count change only through `init`, `insert`,
/// `delete` and `truncate`, which keep the records within the page (a
/// `write` of the count could have made `record` read past the page's end).
pub const WRITABLE_FROM: usize = NEXT_OFFSET;

/// No right sibling.
const NO_PAGE: u32 = u32::MAX;

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// Never formatted, or freed.
    Free = 0,
    /// A B+tree leaf: keys and values.
    Leaf = 1,
    /// A B+tree internal page: keys and child page numbers.
    Internal = 2,
    /// The store's own: where each tree's root is.
    Meta = 3,
}

impl PageKind {
    /// The kind stored as `byte`, if it is one.
    pub fn from_byte(byte: u8) -> Option<PageKind> {
        Some(match byte {
            0 => PageKind::Free,
            1 => PageKind::Leaf,
            2 => PageKind::Internal,
            3 => PageKind::Meta,
            _ => return None,
        })
    }
}

/// One page's bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Page(Box<[u8; PAGE_BYTES]>);

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("no", &self.page_no())
            .field("lsn", &self.lsn())
            .field("kind", &self.0[KIND_OFFSET])
            .field("count", &self.count())
            .finish_non_exhaustive()
    }
}

fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(word)
}

impl Page {
    /// A page of zeroes: what the data file holds where no page was written.
    pub fn zeroed() -> Page {
        Page(Box::new([0; PAGE_BYTES]))
    }

    /// The page's bytes.
    pub fn bytes(&self) -> &[u8; PAGE_BYTES] {
        &self.0
    }

    /// The page's bytes, to read a page into.
    pub fn bytes_mut(&mut self) -> &mut [u8; PAGE_BYTES] {
        &mut self.0
    }

    /// The end LSN of the last group that changed the page.
    pub fn lsn(&self) -> Lsn {
        let mut word = [0; 8];
        word.copy_from_slice(&self.0[LSN_OFFSET..LSN_OFFSET + 8]);
        Lsn::from_u64(u64::from_le_bytes(word))
    }

    /// Stamps the page with the end LSN of the group that changed it (PS-2).
    pub fn set_lsn(&mut self, lsn: Lsn) {
        self.0[LSN_OFFSET..LSN_OFFSET + 8].copy_from_slice(&lsn.as_u64().to_le_bytes());
    }

    /// The page's number, as formatted.
    pub fn page_no(&self) -> PageNo {
        u32_at(&self.0[..], PAGE_NO_OFFSET)
    }

    /// What the page holds (`None`: a byte no kind has).
    pub fn kind(&self) -> Option<PageKind> {
        PageKind::from_byte(self.0[KIND_OFFSET])
    }

    /// 0 for leaves, the height above them for internal pages.
    pub fn level(&self) -> u8 {
        self.0[LEVEL_OFFSET]
    }

    /// Key bytes of each record.
    pub fn key_bytes(&self) -> usize {
        usize::from(u16_at(&self.0[..], KEY_BYTES_OFFSET))
    }

    /// Value bytes of each record.
    pub fn value_bytes(&self) -> usize {
        usize::from(u16_at(&self.0[..], VALUE_BYTES_OFFSET))
    }

    /// Bytes of each record: key and value.
    pub fn record_bytes(&self) -> usize {
        self.key_bytes() + self.value_bytes()
    }

    /// Records on the page.
    pub fn count(&self) -> usize {
        usize::from(u16_at(&self.0[..], COUNT_OFFSET))
    }

    /// Records the page can hold.
    pub fn capacity(&self) -> usize {
        (PAGE_BYTES - HEADER_BYTES).checked_div(self.record_bytes()).unwrap_or(0)
    }

    /// The right sibling at the same level.
    pub fn next(&self) -> Option<PageNo> {
        Some(u32_at(&self.0[..], NEXT_OFFSET)).filter(|&next| next != NO_PAGE)
    }

    /// The B+tree the page belongs to.
    pub fn tree(&self) -> u32 {
        u32_at(&self.0[..], TREE_OFFSET)
    }

    /// Record `slot`, key then value. Panics past `count()`.
    pub fn record(&self, slot: usize) -> &[u8] {
        assert!(slot < self.count(), "record {slot} of {} on page {}", self.count(), self.page_no());
        let start = HEADER_BYTES + slot * self.record_bytes();
        &self.0[start..start + self.record_bytes()]
    }

    /// Where `key` is or would go: `Ok(slot)` if a record has this key,
    /// `Err(slot)` for the slot it would be inserted at.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let key_bytes = self.key_bytes();
        let (mut low, mut high) = (0, self.count());
        while low < high {
            let middle = (low + high) / 2;
            match self.record(middle)[..key_bytes].cmp(key) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Ok(middle),
            }
        }
        Err(low)
    }

    /// Formats the page empty (the `init` redo record).
    pub fn init(&mut self, no: PageNo, format: &Format) -> Result<(), String> {
        if format.key_bytes + format.value_bytes > PAGE_BYTES - HEADER_BYTES {
            return Err(format!("records of {} + {} bytes do not fit a page", format.key_bytes, format.value_bytes));
        }
        let lsn = self.lsn();
        self.0.fill(0);
        self.set_lsn(lsn);
        self.0[PAGE_NO_OFFSET..PAGE_NO_OFFSET + 4].copy_from_slice(&no.to_le_bytes());
        self.0[KIND_OFFSET] = format.kind as u8;
        self.0[LEVEL_OFFSET] = format.level;
        self.set_u16(KEY_BYTES_OFFSET, format.key_bytes as u16);
        self.set_u16(VALUE_BYTES_OFFSET, format.value_bytes as u16);
        let next = format.next.unwrap_or(NO_PAGE);
        self.0[NEXT_OFFSET..NEXT_OFFSET + 4].copy_from_slice(&next.to_le_bytes());
        self.0[TREE_OFFSET..TREE_OFFSET + 4].copy_from_slice(&format.tree.to_le_bytes());
        Ok(())
    }

    /// Inserts `record` at `slot`, shifting the records from `slot` up.
    pub fn insert(&mut self, slot: usize, record: &[u8]) -> Result<(), String> {
        let (count, size) = self.holding_records()?;
        if record.len() != size {
            return Err(format!("a record of {} bytes on a page of {size}-byte records", record.len()));
        }
        if slot > count || count >= self.capacity() {
            return Err(format!("insert at slot {slot} of a page with {count} of {} records", self.capacity()));
        }
        let at = HEADER_BYTES + slot * size;
        self.0.copy_within(at..HEADER_BYTES + count * size, at + size);
        self.0[at..at + size].copy_from_slice(record);
        self.set_u16(COUNT_OFFSET, (count + 1) as u16);
        Ok(())
    }

    /// Removes the record at `slot`, shifting the later ones down.
    pub fn delete(&mut self, slot: usize) -> Result<(), String> {
        let (count, size) = self.holding_records()?;
        if slot >= count {
            return Err(format!("delete of slot {slot} of a page with {count} records"));
        }
        let at = HEADER_BYTES + slot * size;
        let end = HEADER_BYTES + count * size;
        self.0.copy_within(at + size..end, at);
        self.0[end - size..end].fill(0);
        self.set_u16(COUNT_OFFSET, (count - 1) as u16);
        Ok(())
    }

    /// Keeps the first `keep` records (a split's left half).
    pub fn truncate(&mut self, keep: usize) -> Result<(), String> {
        let (count, size) = self.holding_records()?;
        if keep > count {
            return Err(format!("truncate to {keep} records of a page with {count}"));
        }
        self.0[HEADER_BYTES + keep * size..HEADER_BYTES + count * size].fill(0);
        self.set_u16(COUNT_OFFSET, keep as u16);
        Ok(())
    }

    /// Writes `bytes` at `offset`: header fields or part of a record.
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> Result<(), String> {
        if offset < WRITABLE_FROM || offset.checked_add(bytes.len()).is_none_or(|end| end > PAGE_BYTES) {
            return Err(format!("a write of {} bytes at offset {offset}", bytes.len()));
        }
        self.0[offset..offset + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// Stores the checksum of the page's bytes (before a write to the file).
    pub fn seal(&mut self) {
        let checksum = crc32c::crc32c(&self.0[LSN_OFFSET..]);
        self.0[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 4].copy_from_slice(&checksum.to_le_bytes());
    }

    /// Checks a page read from offset `no` of the data file (PS-3): all
    /// zeroes (never written), or its checksum matches and it is page `no`.
    pub fn verify(&self, no: PageNo) -> Result<(), String> {
        if self.0.iter().all(|&byte| byte == 0) {
            return Ok(());
        }
        let stored = u32_at(&self.0[..], CHECKSUM_OFFSET);
        let computed = crc32c::crc32c(&self.0[LSN_OFFSET..]);
        if stored != computed {
            return Err(format!("checksum {stored:#010x} stored, {computed:#010x} computed: a torn or damaged page"));
        }
        if self.page_no() != no {
            return Err(format!("holds page {}", self.page_no()));
        }
        if self.kind().is_none() || self.count() > self.capacity() {
            return Err(format!("a header no page has (kind {}, {} records)", self.0[KIND_OFFSET], self.count()));
        }
        Ok(())
    }

    /// The record count and size of a leaf or internal page.
    fn holding_records(&self) -> Result<(usize, usize), String> {
        match self.kind() {
            Some(PageKind::Leaf | PageKind::Internal) if self.record_bytes() > 0 => {
                Ok((self.count(), self.record_bytes()))
            }
            kind => Err(format!("page {} is {kind:?}, not a page of records", self.page_no())),
        }
    }

    fn set_u16(&mut self, offset: usize, value: u16) {
        self.0[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
    }
}

/// How `init` formats a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// What the page holds.
    pub kind: PageKind,
    /// 0 for leaves.
    pub level: u8,
    /// Key bytes of each record.
    pub key_bytes: usize,
    /// Value bytes of each record.
    pub value_bytes: usize,
    /// The right sibling.
    pub next: Option<PageNo>,
    /// The B+tree it belongs to.
    pub tree: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(value_bytes: usize) -> Page {
        let mut page = Page::zeroed();
        let format = Format { kind: PageKind::Leaf, level: 0, key_bytes: 8, value_bytes, next: None, tree: 1 };
        page.init(5, &format).expect("init");
        page
    }

    fn record(key: u64, value_bytes: usize) -> Vec<u8> {
        [key.to_be_bytes().to_vec(), vec![key as u8; value_bytes]].concat()
    }

    #[test]
    fn records_stay_sorted_through_inserts_and_deletes() {
        let mut page = leaf(4);
        for key in [5u64, 1, 9, 3] {
            let slot = page.search(&key.to_be_bytes()).expect_err("a new key");
            page.insert(slot, &record(key, 4)).expect("insert");
        }
        let keys: Vec<u64> = (0..page.count())
            .map(|slot| u64::from_be_bytes(page.record(slot)[..8].try_into().expect("8-byte keys")))
            .collect();
        assert_eq!(keys, [1, 3, 5, 9]);
        page.delete(1).expect("delete");
        assert_eq!(page.search(&3u64.to_be_bytes()), Err(1));
        assert_eq!(page.search(&9u64.to_be_bytes()), Ok(2));
        page.truncate(1).expect("truncate");
        assert_eq!(page.count(), 1);
    }

    #[test]
    fn a_change_that_does_not_fit_is_refused_not_applied() {
        let mut page = leaf(192);
        let capacity = page.capacity();
        assert_eq!(capacity, (PAGE_BYTES - HEADER_BYTES) / 200);
        for key in 0..capacity as u64 {
            page.insert(key as usize, &record(key, 192)).expect("insert");
        }
        let before = page.clone();
        assert!(page.insert(0, &record(99, 192)).is_err(), "a full page");
        assert!(page.insert(0, &record(99, 4)).is_err(), "a record of the wrong size");
        assert!(page.delete(capacity).is_err(), "a slot past the records");
        assert!(page.truncate(capacity + 1).is_err());
        assert!(page.write(PAGE_BYTES - 1, b"xy").is_err(), "past the page");
        assert!(page.write(LSN_OFFSET, b"x").is_err(), "the page LSN is not a record's");
        assert_eq!(page, before);
    }

    #[test]
    fn a_sealed_page_verifies_and_a_flipped_bit_or_wrong_place_does_not() {
        let mut page = leaf(4);
        page.insert(0, &record(1, 4)).expect("insert");
        page.set_lsn(Lsn::from_u64(4096));
        page.seal();
        assert_eq!(page.verify(5), Ok(()));
        assert!(page.verify(6).expect_err("another page").contains("holds page 5"));
        let mut torn = page.clone();
        torn.bytes_mut()[PAGE_BYTES - 1] ^= 1;
        assert!(torn.verify(5).expect_err("torn").contains("checksum"));
        assert_eq!(Page::zeroed().verify(9), Ok(()), "never written");
    }
}
