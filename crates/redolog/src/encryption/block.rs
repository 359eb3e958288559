//! Blocks sealed whole: format version 3's cipher ([FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3),
//! [DESIGN §1.15](crate::docs::design#115-encryption-at-rest)).
//!
//! A sealed block keeps version 1's header and CRC and gives 32 bytes of its
//! data area to the seal:
//!
//! ```text
//! 0    block header (16)                      associated data
//! 16   data (460): clear groups, sealed       AES-256-GCM
//! 476  tag (16)
//! 492  key_id:u32 session:u32 salt:u64        associated data
//! 508  CRC-32C                                the caller's, after the seal
//! ```
//!
//! The cipher key is per session: HKDF-SHA256 of the user's key with salt
//! `log_id` and info `"redolog v3 block key" ‖ session ‖ salt`. The nonce is
//! the block's absolute number and its `data_len`, `b:u64 ‖ data_len:u32`:
//! within a session the writer seals a block again only when it has grown
//! (INV-29 in its version 3 form).
//!
//! Without the `encryption` feature only the key fields' layout is built (the
//! reader and `inspect` name a block's key id either way).
#![cfg_attr(not(feature = "encryption"), allow(dead_code, unused_imports))]

#[cfg(feature = "encryption")]
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
#[cfg(feature = "encryption")]
use zeroize::Zeroizing;

#[cfg(feature = "encryption")]
use super::key::{expand, Key};
use crate::format::{
    read_u16, read_u32, read_u64, write_u32, write_u64, BlockHeader, BlockSeal, Geometry, BLOCK_HEADER_BYTES,
    CRC_OFFSET,
};
use crate::geometry::DATA_LEN_OFFSET;
use crate::lsn::BlockNo;

/// Where a sealed block's tag starts: right after its 460 data bytes.
pub(crate) const TAG_OFFSET: usize = Geometry::Sealed.data_end();
/// The GCM tag's length.
pub(crate) const TAG_BYTES: usize = 16;
/// Where the fields that select the block's key start.
pub(crate) const KEY_FIELDS_OFFSET: usize = TAG_OFFSET + TAG_BYTES;
const KEY_FIELDS_BYTES: usize = 16;
const _: () = assert!(KEY_FIELDS_OFFSET + KEY_FIELDS_BYTES == CRC_OFFSET);

/// The fields of a sealed block that select its cipher key: the user's key
/// id, the session's epoch (INV-29) and its random salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct BlockKeyId {
    pub(crate) key_id: u32,
    pub(crate) session: u32,
    pub(crate) salt: u64,
}

impl BlockKeyId {
    /// The key fields of the sealed block `image`.
    pub(crate) fn of(image: &[u8]) -> BlockKeyId {
        BlockKeyId {
            key_id: read_u32(image, KEY_FIELDS_OFFSET),
            session: read_u32(image, KEY_FIELDS_OFFSET + 4),
            salt: read_u64(image, KEY_FIELDS_OFFSET + 8),
        }
    }

    fn write(self, image: &mut [u8]) {
        write_u32(image, KEY_FIELDS_OFFSET, self.key_id);
        write_u32(image, KEY_FIELDS_OFFSET + 4, self.session);
        write_u64(image, KEY_FIELDS_OFFSET + 8, self.salt);
    }
}

/// A block's tag did not verify: damage, or a key that is not the one the
/// block was sealed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TagMismatch;

/// The cipher of one session's blocks. Without the `encryption` feature
/// there is none: the type cannot be built (an `Opener`, which makes them,
/// refuses to be), so the paths that take one are never reached.
pub(crate) struct BlockCipher {
    id: BlockKeyId,
    #[cfg(feature = "encryption")]
    cipher: LessSafeKey,
    #[cfg(not(feature = "encryption"))]
    never: std::convert::Infallible,
}

#[cfg(not(feature = "encryption"))]
impl BlockCipher {
    pub(crate) fn id(&self) -> BlockKeyId {
        self.id
    }

    pub(crate) fn seal(&self, _: &mut [u8], _: BlockNo) {
        match self.never {}
    }

    pub(crate) fn open(&self, _: &[u8], _: BlockNo, _: &mut [u8]) -> Result<(), TagMismatch> {
        match self.never {}
    }
}

#[cfg(feature = "encryption")]
impl BlockCipher {
    /// The cipher of the blocks that `id` names in the log `log_id`, under
    /// `key` (the user's key with id `id.key_id`).
    #[allow(clippy::expect_used)] // AES-256-GCM takes exactly the 32 bytes expanded
    pub(crate) fn new(key: &Key, log_id: u128, id: BlockKeyId) -> BlockCipher {
        let mut info = [0u8; 20 + 4 + 8];
        info[..20].copy_from_slice(b"redolog v3 block key");
        info[20..24].copy_from_slice(&id.session.to_le_bytes());
        info[24..].copy_from_slice(&id.salt.to_le_bytes());
        let mut block_key = Zeroizing::new([0u8; 32]);
        expand(key, &log_id.to_le_bytes(), &info, &mut block_key[..]);
        let unbound = UnboundKey::new(&AES_256_GCM, &block_key[..]).expect("AES-256-GCM takes a 32-byte key");
        BlockCipher { id, cipher: LessSafeKey::new(unbound) }
    }

    /// The key fields this cipher's blocks carry.
    pub(crate) fn id(&self) -> BlockKeyId {
        self.id
    }

    /// Seals the block `image` of absolute number `b` in place: its header
    /// (with `data_len`) is written, its data holds clear groups. Zeroes the
    /// data past `data_len`, writes the key fields, encrypts the data and
    /// writes the tag; the CRC is the caller's, after this.
    #[allow(clippy::expect_used)] // AES-GCM refuses only messages over 64 GiB
    pub(crate) fn seal(&self, image: &mut [u8], b: BlockNo) {
        let data_len = usize::from(read_u16(image, DATA_LEN_OFFSET));
        debug_assert!(data_len <= Geometry::Sealed.data_bytes());
        image[BLOCK_HEADER_BYTES + data_len..TAG_OFFSET].fill(0);
        self.id.write(image);
        let aad = associated_data(image);
        let data = &mut image[BLOCK_HEADER_BYTES..TAG_OFFSET];
        let tag = self
            .cipher
            .seal_in_place_separate_tag(nonce(b, data_len), Aad::from(&aad), data)
            .expect("a block is within AES-GCM's message limit");
        image[TAG_OFFSET..KEY_FIELDS_OFFSET].copy_from_slice(tag.as_ref());
    }

    /// Opens the sealed block `image` of absolute number `b` into `out` (460
    /// bytes): its data in clear if the tag verifies over the data, the header
    /// and the key fields; nothing of it otherwise (INV-30).
    /// A block naming other key fields than this cipher's is refused too.
    pub(crate) fn open(&self, image: &[u8], b: BlockNo, out: &mut [u8]) -> Result<(), TagMismatch> {
        let data_len = usize::from(read_u16(image, DATA_LEN_OFFSET));
        let out = &mut out[..Geometry::Sealed.data_bytes()];
        if BlockKeyId::of(image) != self.id {
            out.fill(0);
            return Err(TagMismatch);
        }
        out.copy_from_slice(&image[BLOCK_HEADER_BYTES..TAG_OFFSET]);
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&image[TAG_OFFSET..KEY_FIELDS_OFFSET]);
        let aad = associated_data(image);
        let opened =
            self.cipher.open_in_place_separate_tag(nonce(b, data_len), Aad::from(&aad), Tag::from(tag), out, 0..);
        if opened.is_err() {
            out.fill(0);
            return Err(TagMismatch);
        }
        Ok(())
    }
}

/// Seals the image of block `number` as its log writes it: the header fields,
/// then in an encrypted log the cipher (`cipher`), then the CRC over the
/// result ([FORMAT §5](crate::docs::format#5-block-512-bytes), §6.1). `image` holds the block's data in clear;
/// `first_group` is left as it is (INV-9).
pub(crate) fn seal_block(
    image: &mut [u8],
    (seal, cipher): (BlockSeal, Option<&BlockCipher>),
    number: BlockNo,
    data_len: usize,
    synced_back: u32,
) {
    BlockHeader::write_fields(image, seal, number, data_len, synced_back);
    if let Some(cipher) = cipher {
        cipher.seal(image, number);
    }
    seal.write_crc(image);
}

/// The block header and the key fields: what the tag binds besides the data.
#[cfg(feature = "encryption")]
fn associated_data(image: &[u8]) -> [u8; BLOCK_HEADER_BYTES + KEY_FIELDS_BYTES] {
    let mut aad = [0u8; BLOCK_HEADER_BYTES + KEY_FIELDS_BYTES];
    aad[..BLOCK_HEADER_BYTES].copy_from_slice(&image[..BLOCK_HEADER_BYTES]);
    aad[BLOCK_HEADER_BYTES..].copy_from_slice(&image[KEY_FIELDS_OFFSET..CRC_OFFSET]);
    aad
}

/// `b:u64 ‖ data_len:u32`, little-endian.
#[cfg(feature = "encryption")]
fn nonce(b: BlockNo, data_len: usize) -> Nonce {
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&b.0.to_le_bytes());
    nonce[8..].copy_from_slice(&(data_len as u32).to_le_bytes());
    Nonce::assume_unique_for_key(nonce)
}

#[cfg(all(test, feature = "encryption"))]
mod tests {
    use super::*;
    use crate::format::{write_u16, BlockHeader, BlockSeal, BLOCK_BYTES};

    const LOG_ID: u128 = 0x1234_5678_9abc_def0_1122_3344_5566_7788;
    const ID: BlockKeyId = BlockKeyId { key_id: 3, session: 7, salt: 0xfeed_f00d_dead_beef };

    fn key() -> Key {
        Key::from_bytes([0x42; 32])
    }

    /// Block `b` with header fields written and `data_len` bytes of data.
    /// (`BlockHeader::seal` writes the fields and a CRC that the block's seal
    /// then leaves stale: these tests check tags, not CRCs.)
    fn block(b: BlockNo, data: &[u8]) -> Vec<u8> {
        let mut image = vec![0u8; BLOCK_BYTES];
        write_u16(&mut image, crate::geometry::FIRST_GROUP_OFFSET, 16);
        image[BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + data.len()].copy_from_slice(data);
        // Garbage past data_len, as a ring block may hold from an earlier lap.
        image[BLOCK_HEADER_BYTES + data.len()..TAG_OFFSET].fill(0xEE);
        let seal = BlockSeal::for_log(LOG_ID).with_geometry(Geometry::Sealed);
        BlockHeader::seal(&mut image, seal, b, data.len(), 2);
        image
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|index| (index * 7 + 1) as u8).collect()
    }

    /// A known answer computed from [FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3) by another implementation
    /// (Python's `hmac` for HKDF-SHA256 and `cryptography`'s AESGCM, i.e.
    /// OpenSSL): the first ciphertext bytes and the tag of a sealed block.
    #[test]
    fn a_sealed_block_matches_the_format_byte_for_byte() {
        let b = BlockNo(9);
        let mut image = block(b, &data(200));
        BlockCipher::new(&key(), LOG_ID, ID).seal(&mut image, b);
        let hex = |bytes: &[u8]| bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>();
        assert_eq!(hex(&image[16..32]), "c6aa888678d305e551ebb6d0719e127e");
        assert_eq!(hex(&image[TAG_OFFSET..KEY_FIELDS_OFFSET]), "14e51fadf4335a4ae8bd6fbfeb269cfc");
        assert_eq!(&image[KEY_FIELDS_OFFSET..KEY_FIELDS_OFFSET + 8], &[3, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(super::super::key::key_check(&key(), LOG_ID), 0x44b2_3422);
    }

    #[test]
    fn a_sealed_block_opens_to_its_data_and_zero_padding() {
        let cipher = BlockCipher::new(&key(), LOG_ID, ID);
        let b = BlockNo((5 << 32) | 77);
        let plain = data(300);
        let mut image = block(b, &plain);
        cipher.seal(&mut image, b);
        assert_ne!(&image[16..316], &plain[..], "the data is encrypted");
        assert_eq!(BlockKeyId::of(&image), ID);
        let mut out = [0u8; 460];
        cipher.open(&image, b, &mut out).expect("open");
        assert_eq!(&out[..300], &plain[..]);
        assert!(out[300..].iter().all(|&byte| byte == 0), "the padding is sealed as zeros");
        // A full block too.
        let full = data(460);
        let mut image = block(b, &full);
        cipher.seal(&mut image, b);
        cipher.open(&image, b, &mut out).expect("open a full block");
        assert_eq!(&out[..], &full[..]);
    }

    #[test]
    fn every_changed_byte_of_a_sealed_block_fails_its_tag() {
        let cipher = BlockCipher::new(&key(), LOG_ID, ID);
        let b = BlockNo(9);
        let mut image = block(b, &data(200));
        cipher.seal(&mut image, b);
        let mut out = [0u8; 460];
        // Every byte the CRC covers but the CRC itself: header, data, padding,
        // tag and key fields. (A changed key field selects another cipher in a
        // reader; under this one it must fail as well.)
        for index in 0..CRC_OFFSET {
            let mut changed = image.clone();
            changed[index] ^= 0x01;
            assert_eq!(cipher.open(&changed, b, &mut out), Err(TagMismatch), "byte {index} changed");
            assert!(out.iter().all(|&byte| byte == 0), "byte {index} changed: data returned");
        }
        // The same bytes read as another block, or under another session's key.
        assert_eq!(cipher.open(&image, BlockNo(10), &mut out), Err(TagMismatch));
        let other_session = BlockCipher::new(&key(), LOG_ID, BlockKeyId { session: 8, ..ID });
        let mut resealed = image.clone();
        BlockKeyId { session: 8, ..ID }.write(&mut resealed);
        assert_eq!(other_session.open(&resealed, b, &mut out), Err(TagMismatch));
        // The key id is not in the key's derivation: the same user key under
        // two ids gives one cipher, and only the associated data tells them.
        let renamed = BlockKeyId { key_id: 4, ..ID };
        let mut relabelled = image.clone();
        renamed.write(&mut relabelled);
        assert_eq!(BlockCipher::new(&key(), LOG_ID, renamed).open(&relabelled, b, &mut out), Err(TagMismatch));
        let other_log = BlockCipher::new(&key(), LOG_ID + 1, ID);
        assert_eq!(other_log.open(&image, b, &mut out), Err(TagMismatch));
    }

    #[test]
    fn a_block_sealed_again_as_it_grows_never_repeats_its_keystream() {
        // The writer seals the partial last block again as it grows: each
        // seal has another data_len, so another nonce. Were the nonce the same,
        // the first 100 bytes (equal plaintext) would encrypt equally.
        let cipher = BlockCipher::new(&key(), LOG_ID, ID);
        let b = BlockNo(12);
        let plain = data(460);
        let mut seals = Vec::new();
        for len in [100, 101, 250, 460] {
            let mut image = block(b, &plain[..len]);
            cipher.seal(&mut image, b);
            seals.push(image[16..116].to_vec());
        }
        for (index, first) in seals.iter().enumerate() {
            for second in &seals[index + 1..] {
                assert_ne!(first, second, "a keystream repeated for one block");
            }
        }
    }

    #[test]
    fn sessions_and_logs_never_share_a_cipher() {
        let b = BlockNo(3);
        let plain = data(460);
        let sealed_by = |log_id: u128, id: BlockKeyId| {
            let mut image = block(b, &plain);
            BlockCipher::new(&key(), log_id, id).seal(&mut image, b);
            image[16..476].to_vec()
        };
        let first = sealed_by(LOG_ID, ID);
        assert_ne!(first, sealed_by(LOG_ID, BlockKeyId { session: ID.session + 1, ..ID }), "epoch");
        assert_ne!(first, sealed_by(LOG_ID, BlockKeyId { salt: ID.salt + 1, ..ID }), "salt");
        assert_ne!(first, sealed_by(LOG_ID + 1, ID), "log");
        assert_eq!(first, sealed_by(LOG_ID, ID), "one session's cipher is deterministic");
    }
}
