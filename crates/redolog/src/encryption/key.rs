//! A user's key, and the HKDF that derives the log's keys from it
//! ([FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3)). Apart from `encryption` so the block cipher and the
//! key provider share it without importing each other.

use std::fmt;

#[cfg(feature = "encryption")]
use ring::hkdf;
use zeroize::Zeroizing;

/// A 256-bit key, wiped from memory when dropped.
///
/// ```
/// use redolog::encryption::Key;
/// let key = Key::from_hex(&"ab".repeat(32)).unwrap();
/// assert_eq!(format!("{key:?}"), "Key(..)"); // never printed
/// assert!(Key::from_hex("abc").is_err());
/// ```
#[derive(Clone)]
pub struct Key(#[cfg_attr(not(feature = "encryption"), allow(dead_code))] Zeroizing<[u8; 32]>);

impl Key {
    /// The key `bytes`.
    pub fn from_bytes(bytes: [u8; 32]) -> Key {
        Key(Zeroizing::new(bytes))
    }

    /// The key written as 64 hexadecimal digits.
    pub fn from_hex(hex: &str) -> std::result::Result<Key, String> {
        // The errors never echo the text: it may be a key.
        let hex = hex.trim().as_bytes();
        if hex.len() != 64 {
            return Err(format!("a key is 64 hexadecimal digits, not {} characters", hex.len()));
        }
        let digit = |byte: u8| char::from(byte).to_digit(16).ok_or("a key holds a character that is not a hex digit");
        let mut bytes = Zeroizing::new([0u8; 32]);
        for (index, byte) in bytes.iter_mut().enumerate() {
            *byte = (digit(hex[2 * index])? << 4 | digit(hex[2 * index + 1])?) as u8;
        }
        Ok(Key(bytes))
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// An HKDF output length (ring's `hkdf::KeyType`).
#[cfg(feature = "encryption")]
struct Bytes(usize);

#[cfg(feature = "encryption")]
impl hkdf::KeyType for Bytes {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-SHA256 (RFC 5869) of `key` with `salt`, expanded with `info`.
#[cfg(feature = "encryption")]
#[allow(clippy::expect_used)] // HKDF-SHA256 expands up to 8160 bytes: 32 and 4 always fit
pub(super) fn expand(key: &Key, salt: &[u8], info: &[u8], out: &mut [u8]) {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&key.0[..]);
    let info = [info];
    let okm = prk.expand(&info, Bytes(out.len())).expect("32 and 4 bytes fit HKDF-SHA256");
    okm.fill(out).expect("the output is the length asked for");
}

/// The key check of `key` in the log `log_id` ([FORMAT §3](crate::docs::format#3-checkpoint-slot-offsets-4096-and-8192-of-redo0000-512-bytes-each), §6.1): tells a
/// wrong key from damage.
#[cfg(feature = "encryption")]
pub(super) fn key_check(key: &Key, log_id: u128) -> u32 {
    let mut check = [0u8; 4];
    expand(key, &log_id.to_le_bytes(), b"redolog v3 key check", &mut check);
    u32::from_le_bytes(check)
}
