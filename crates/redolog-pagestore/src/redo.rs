//! Physiological redo records: each names one page and a change inside it
//! ([PAGESTORE §3](crate::docs::pagestore#3-redo-records)). A mini-transaction is one redolog group of them.
//! Decoding reports what is wrong with bytes it cannot read; applying reports
//! a change that does not fit the page it lands on. Neither panics.

use crate::page::{Format, Page, PageKind, PageNo};

// docs/PAGESTORE.md §3: [kind u8][page u32] then the body.
const INIT: u8 = 1;
const INSERT: u8 = 2;
const DELETE: u8 = 3;
const WRITE: u8 = 4;
const TRUNCATE: u8 = 5;
const HEAD_BYTES: usize = 1 + size_of::<u32>();

/// One change to one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redo {
    /// Format the page empty.
    Init {
        /// The page.
        page: PageNo,
        /// What it will hold.
        kind: PageKind,
        /// 0 for leaves.
        level: u8,
        /// Key bytes of each record.
        key_bytes: u16,
        /// Value bytes of each record.
        value_bytes: u16,
        /// The right sibling.
        next: Option<PageNo>,
        /// The B+tree it belongs to.
        tree: u32,
    },
    /// Insert a record at a slot, shifting the later ones up.
    Insert {
        /// The page.
        page: PageNo,
        /// Where the record goes.
        slot: u16,
        /// Key then value.
        record: Vec<u8>,
    },
    /// Remove the record at a slot.
    Delete {
        /// The page.
        page: PageNo,
        /// The record's slot.
        slot: u16,
    },
    /// Write bytes at an offset of the page: a header field or part of a
    /// record (a row's columns).
    Write {
        /// The page.
        page: PageNo,
        /// Where in the page.
        offset: u16,
        /// What to write there.
        bytes: Vec<u8>,
    },
    /// Keep the first records only (a split's left half).
    Truncate {
        /// The page.
        page: PageNo,
        /// Records kept.
        keep: u16,
    },
}

/// Reads little-endian integers off the front of a record body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize, what: &str) -> Result<&'a [u8], String> {
        if self.0.len() < count {
            return Err(format!("ends inside its {what}"));
        }
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(taken)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let bytes = self.take(2, what)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn end(self) -> Result<(), String> {
        match self.0.len() {
            0 => Ok(()),
            extra => Err(format!("{extra} bytes past its end")),
        }
    }
}

impl Redo {
    /// The page it changes.
    pub fn page(&self) -> PageNo {
        match *self {
            Redo::Init { page, .. }
            | Redo::Insert { page, .. }
            | Redo::Delete { page, .. }
            | Redo::Write { page, .. }
            | Redo::Truncate { page, .. } => page,
        }
    }

    /// The record's bytes, as the log stores them.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, body): (u8, Vec<u8>) = match self {
            Redo::Init { kind, level, key_bytes, value_bytes, next, tree, .. } => {
                let mut body = vec![*kind as u8, *level];
                body.extend_from_slice(&key_bytes.to_le_bytes());
                body.extend_from_slice(&value_bytes.to_le_bytes());
                body.extend_from_slice(&next.unwrap_or(u32::MAX).to_le_bytes());
                body.extend_from_slice(&tree.to_le_bytes());
                (INIT, body)
            }
            Redo::Insert { slot, record, .. } => (INSERT, [&slot.to_le_bytes()[..], record].concat()),
            Redo::Delete { slot, .. } => (DELETE, slot.to_le_bytes().to_vec()),
            Redo::Write { offset, bytes, .. } => (WRITE, [&offset.to_le_bytes()[..], bytes].concat()),
            Redo::Truncate { keep, .. } => (TRUNCATE, keep.to_le_bytes().to_vec()),
        };
        let mut bytes = Vec::with_capacity(HEAD_BYTES + body.len());
        bytes.push(kind);
        bytes.extend_from_slice(&self.page().to_le_bytes());
        bytes.extend_from_slice(&body);
        bytes
    }

    /// Reads a record back; `Err` says what is wrong with the bytes.
    pub fn decode(bytes: &[u8]) -> Result<Redo, String> {
        let mut reader = Reader(bytes);
        let kind = reader.u8("kind")?;
        let page = reader.u32("page number")?;
        let redo = match kind {
            INIT => {
                let page_kind = reader.u8("page kind")?;
                let kind = PageKind::from_byte(page_kind).ok_or_else(|| format!("page kind {page_kind}"))?;
                let level = reader.u8("level")?;
                let key_bytes = reader.u16("key size")?;
                let value_bytes = reader.u16("value size")?;
                let next = Some(reader.u32("next page")?).filter(|&next| next != u32::MAX);
                let tree = reader.u32("tree")?;
                Redo::Init { page, kind, level, key_bytes, value_bytes, next, tree }
            }
            INSERT => {
                let slot = reader.u16("slot")?;
                let record = reader.take(reader.0.len(), "record")?.to_vec();
                Redo::Insert { page, slot, record }
            }
            DELETE => Redo::Delete { page, slot: reader.u16("slot")? },
            WRITE => {
                let offset = reader.u16("offset")?;
                let bytes = reader.take(reader.0.len(), "bytes")?.to_vec();
                Redo::Write { page, offset, bytes }
            }
            TRUNCATE => Redo::Truncate { page, keep: reader.u16("count")? },
            other => return Err(format!("kind {other}, which no redo record has")),
        };
        reader.end()?;
        Ok(redo)
    }

    /// Applies the change to `page` (the page this record names); `Err`
    /// says why it does not fit, and the page is then unchanged.
    pub fn apply(&self, page: &mut Page) -> Result<(), String> {
        match self {
            &Redo::Init { page: no, kind, level, key_bytes, value_bytes, next, tree } => {
                let format = Format {
                    kind,
                    level,
                    key_bytes: usize::from(key_bytes),
                    value_bytes: usize::from(value_bytes),
                    next,
                    tree,
                };
                page.init(no, &format)
            }
            Redo::Insert { slot, record, .. } => page.insert(usize::from(*slot), record),
            Redo::Delete { slot, .. } => page.delete(usize::from(*slot)),
            Redo::Write { offset, bytes, .. } => page.write(usize::from(*offset), bytes),
            Redo::Truncate { keep, .. } => page.truncate(usize::from(*keep)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A leaf of 2-byte keys and 2-byte values holding three records: small
    /// enough that random inserts, deletes and truncates can land on it.
    fn small_leaf() -> Page {
        let mut page = Page::zeroed();
        let init =
            Redo::Init { page: 0, kind: PageKind::Leaf, level: 0, key_bytes: 2, value_bytes: 2, next: None, tree: 0 };
        init.apply(&mut page).expect("format");
        for slot in 0..3 {
            Redo::Insert { page: 0, slot, record: vec![0, slot as u8, 9, 9] }.apply(&mut page).expect("insert");
        }
        page
    }

    fn any_redo() -> impl Strategy<Value = Redo> {
        let kind =
            prop_oneof![Just(PageKind::Free), Just(PageKind::Leaf), Just(PageKind::Internal), Just(PageKind::Meta)];
        prop_oneof![
            (any::<u32>(), kind, any::<u8>(), any::<u16>(), any::<u16>(), any::<Option<u32>>(), any::<u32>()).prop_map(
                |(page, kind, level, key_bytes, value_bytes, next, tree)| Redo::Init {
                    page,
                    kind,
                    level,
                    key_bytes,
                    value_bytes,
                    next: next.filter(|&next| next != u32::MAX),
                    tree
                }
            ),
            (any::<u32>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..300))
                .prop_map(|(page, slot, record)| Redo::Insert { page, slot, record }),
            (any::<u32>(), any::<u16>()).prop_map(|(page, slot)| Redo::Delete { page, slot }),
            (any::<u32>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..300))
                .prop_map(|(page, offset, bytes)| Redo::Write { page, offset, bytes }),
            (any::<u32>(), any::<u16>()).prop_map(|(page, keep)| Redo::Truncate { page, keep }),
        ]
    }

    proptest! {
        #[test]
        fn every_record_decodes_to_itself(redo in any_redo()) {
            prop_assert_eq!(Redo::decode(&redo.encode()), Ok(redo));
        }

        /// Bytes from anywhere: a typed error or a record, never a panic.
        /// What decodes is exactly those bytes (it encodes back to them),
        /// and applying it to an empty page or a leaf with records either
        /// succeeds or is refused with the page unchanged (a record is
        /// checked against its page before it changes a byte).
        #[test]
        fn any_bytes_decode_or_fail_and_apply_or_fail(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(redo) = Redo::decode(&bytes) {
                prop_assert_eq!(redo.encode(), bytes);
                for mut page in [Page::zeroed(), small_leaf()] {
                    let before = page.clone();
                    if let Err(reason) = redo.apply(&mut page) {
                        prop_assert!(page == before, "{:?} was refused ({}) but changed the page", redo, reason);
                    }
                }
            }
        }

        /// A record cut short fails to decode, naming the field it ends in.
        #[test]
        fn a_cut_record_is_an_error(redo in any_redo(), cut in 1usize..8) {
            let bytes = redo.encode();
            let fixed = matches!(redo, Redo::Init { .. } | Redo::Delete { .. } | Redo::Truncate { .. });
            if fixed && cut <= bytes.len() {
                let error = Redo::decode(&bytes[..bytes.len() - cut]).expect_err("cut short");
                prop_assert!(error.contains("ends inside"), "{}", error);
            }
        }
    }

    #[test]
    fn unknown_kinds_and_trailing_bytes_are_named() {
        assert_eq!(Redo::decode(&[9, 0, 0, 0, 0]), Err("kind 9, which no redo record has".into()));
        let mut bytes = Redo::Delete { page: 1, slot: 2 }.encode();
        bytes.push(0);
        assert_eq!(Redo::decode(&bytes), Err("1 bytes past its end".into()));
        assert_eq!(Redo::decode(&[]), Err("ends inside its kind".into()));
    }
}
