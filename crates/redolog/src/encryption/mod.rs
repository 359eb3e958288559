//! Encryption at rest: every group's records sealed with AES-256-GCM (`ring`)
//! (docs/FORMAT.md §6.1, docs/DESIGN.md §1.15, INV-29 to INV-31).
//!
//! Off by default. A log is created encrypted when [`Config::encryption`]
//! is set, and is then opened, inspected and dumped only with its keys. The
//! keys come from the application through a [`KeyProvider`] (a file, an
//! environment variable, a KMS); each group names the id of the key it was
//! sealed with, so a key is rotated by giving the provider a new current key
//! and keeping the old ones readable: nothing already written is rewritten.
//!
//! What stays in clear: the file headers, checkpoint slots and block headers
//! (recovery finds the end of the log without a key), and each group's
//! length, record count, key id and epoch. The records — their lengths and
//! bytes — are encrypted and authenticated with the group's header: a changed
//! byte anywhere in a group is [`Error::Corruption`], never other bytes.
//!
//! ```
//! use redolog::encryption::{Encryption, Key, Keys};
//! use redolog::{Config, Durability, Log};
//! let dir = tempfile::tempdir().unwrap();
//! let keys = Keys::new().with_key(1, Key::from_bytes([7; 32]));
//! let config = Config { encryption: Some(Encryption::new(keys)), ..Config::default() };
//! let (log, _) = Log::open(dir.path(), config.clone()).unwrap();
//! log.commit(b"card 4111-1111", Durability::Synced).unwrap();
//! log.close().unwrap();
//! let (_, recovery) = Log::open(dir.path(), config).unwrap();
//! let group = recovery.into_iter().next().unwrap().unwrap();
//! assert_eq!(group.records().next().unwrap(), b"card 4111-1111");
//! ```
//!
//! [`Config::encryption`]: crate::Config::encryption

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use ring::hkdf;
use zeroize::Zeroizing;

pub(crate) mod block;

use crate::error::{Error, Result};
use crate::format::{KeyTable, GROUP_HEADER_BYTES, RECORD_HEADER_BYTES, SEAL_HEADER_BYTES, SEAL_TAG_BYTES};
use crate::lsn::Lsn;

/// A 256-bit key, wiped from memory when dropped.
///
/// ```
/// use redolog::encryption::Key;
/// let key = Key::from_hex(&"ab".repeat(32)).unwrap();
/// assert_eq!(format!("{key:?}"), "Key(..)"); // never printed
/// assert!(Key::from_hex("abc").is_err());
/// ```
#[derive(Clone)]
pub struct Key(Zeroizing<[u8; 32]>);

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

/// Where an encrypted log's keys come from: the application's key store.
///
/// The log asks for the current key once per [`Log::open`](crate::Log::open)
/// (new groups are sealed with it until the log is closed) and for any key by
/// id when it reads a group sealed with it. Keep every key a group from the
/// last checkpoint on may name.
///
/// ```
/// use redolog::encryption::{Key, KeyProvider};
/// /// One key, from wherever the application keeps it.
/// #[derive(Debug)]
/// struct FromVault;
/// impl KeyProvider for FromVault {
///     fn current_key_id(&self) -> u32 { 3 }
///     fn key(&self, key_id: u32) -> Option<Key> {
///         (key_id == 3).then(|| Key::from_bytes([1; 32]))
///     }
/// }
/// assert!(FromVault.key(2).is_none());
/// ```
pub trait KeyProvider: Send + Sync + fmt::Debug {
    /// The id of the key new groups are sealed with.
    fn current_key_id(&self) -> u32;
    /// The key with id `key_id`, or `None` if the provider does not have it.
    fn key(&self, key_id: u32) -> Option<Key>;
}

/// Keys held in memory, the highest id current: built in code, or read from
/// a file or an environment variable holding one `ID HEX` pair per line
/// (`#` starts a comment; in a variable, `;` also separates pairs).
///
/// ```
/// use redolog::encryption::{KeyProvider, Keys};
/// let keys = Keys::parse(&format!("# rotated 2026-11\n1 {}\n2 {}", "11".repeat(32), "22".repeat(32))).unwrap();
/// assert_eq!(keys.current_key_id(), 2);
/// assert!(keys.key(1).is_some());
/// assert!(Keys::parse("1 zz").is_err());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Keys {
    keys: BTreeMap<u32, Key>,
}

impl Keys {
    /// No keys yet.
    pub fn new() -> Keys {
        Keys::default()
    }

    /// These keys and `key` with id `key_id`.
    pub fn with_key(mut self, key_id: u32, key: Key) -> Keys {
        self.keys.insert(key_id, key);
        self
    }

    /// Reads `ID HEX` lines; the error names the line.
    pub fn parse(text: &str) -> std::result::Result<Keys, String> {
        let mut keys = Keys::new();
        for (number, line) in text.split(['\n', ';']).enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let entry = line.split_once(char::is_whitespace).map(|(id, hex)| {
                // Never echoed: a line written `HEX ID` would print the key.
                let id = id.parse::<u32>().map_err(|_| "the key id is not a number from 0 to 4294967295".to_string());
                id.and_then(|id| Ok((id, Key::from_hex(hex)?)))
            });
            match entry {
                Some(Ok((id, key))) => keys = keys.with_key(id, key),
                Some(Err(reason)) => return Err(format!("entry {}: {reason}", number + 1)),
                None => return Err(format!("entry {}: expected `ID HEX`", number + 1)),
            }
        }
        if keys.keys.is_empty() {
            return Err("no key".into());
        }
        Ok(keys)
    }

    /// Reads the keys in file `path`: a regular file (not a symbolic link)
    /// owned by this process's user (or root) that nobody else may read or
    /// write, as ssh demands of a private key; else `Error::UnsafeKeyFile`.
    /// The checks and the read use one open descriptor.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Keys> {
        use rustix::fs::{FileType, Mode, OFlags};
        use std::io::Read;
        let path = path.as_ref();
        let unsafe_file = |reason: String| Error::UnsafeKeyFile { path: path.to_path_buf(), reason };
        // NONBLOCK: a FIFO planted there does not hang the open.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|errno| match errno {
            rustix::io::Errno::LOOP => unsafe_file("it is a symbolic link".into()),
            errno => Error::io("open", path, errno.into()),
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| Error::io("stat", path, errno.into()))?;
        let mode = stat.st_mode & 0o7777;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(unsafe_file("it is not a regular file".into()));
        }
        let me = rustix::process::geteuid().as_raw();
        if stat.st_uid != me && stat.st_uid != 0 {
            return Err(unsafe_file(format!("it belongs to user {}, not to this process's user {me}", stat.st_uid)));
        }
        if mode & 0o077 != 0 {
            return Err(unsafe_file(format!(
                "accessible by others (mode {mode:04o}): allow only its owner (chmod 600)"
            )));
        }
        let mut text = Zeroizing::new(String::new());
        std::fs::File::from(fd).read_to_string(&mut text).map_err(|source| Error::io("read", path, source))?;
        Keys::parse(&text).map_err(|reason| Error::InvalidKeys { origin: path.display().to_string(), reason })
    }

    /// Reads the keys in environment variable `name`.
    pub fn from_env(name: &str) -> Result<Keys> {
        let origin = || format!("environment variable {name}");
        let text = Zeroizing::new(
            std::env::var(name).map_err(|error| Error::InvalidKeys { origin: origin(), reason: error.to_string() })?,
        );
        Keys::parse(&text).map_err(|reason| Error::InvalidKeys { origin: origin(), reason })
    }
}

impl KeyProvider for Keys {
    fn current_key_id(&self) -> u32 {
        self.keys.keys().next_back().copied().unwrap_or_default()
    }

    fn key(&self, key_id: u32) -> Option<Key> {
        self.keys.get(&key_id).cloned()
    }
}

/// [`Config::encryption`](crate::Config::encryption): the provider of an
/// encrypted log's keys.
///
/// ```
/// use redolog::encryption::{Encryption, Key, Keys};
/// let encryption = Encryption::new(Keys::new().with_key(1, Key::from_bytes([9; 32])));
/// assert_eq!(encryption.clone(), encryption);
/// ```
#[derive(Clone, Debug)]
pub struct Encryption {
    provider: Arc<dyn KeyProvider>,
}

impl Encryption {
    /// Keys from `provider`.
    pub fn new(provider: impl KeyProvider + 'static) -> Encryption {
        Encryption { provider: Arc::new(provider) }
    }
}

/// Two are equal when they share one provider.
impl PartialEq for Encryption {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.provider, &other.provider)
    }
}

impl Eq for Encryption {}

/// An HKDF output length (ring's `hkdf::KeyType`).
struct Bytes(usize);

impl hkdf::KeyType for Bytes {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-SHA256 (RFC 5869) of `key` with `salt`, expanded with `info`.
#[allow(clippy::expect_used)] // HKDF-SHA256 expands up to 8160 bytes: 32 and 4 always fit
fn expand(key: &Key, salt: &[u8], info: &[u8], out: &mut [u8]) {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&key.0[..]);
    let info = [info];
    let okm = prk.expand(&info, Bytes(out.len())).expect("32 and 4 bytes fit HKDF-SHA256");
    okm.fill(out).expect("the output is the length asked for");
}

/// The key check of `key` in the log `log_id` (FORMAT.md §3, §6.1): tells a
/// wrong key from damage.
fn key_check(key: &Key, log_id: u128) -> u32 {
    let mut check = [0u8; 4];
    expand(key, &log_id.to_le_bytes(), b"redolog v2 key check", &mut check);
    u32::from_le_bytes(check)
}

/// The AES-256-GCM key of the session with random `salt` of the log `log_id`
/// under `key` (INV-29): unique to the log and to the session, so neither two
/// logs under one key nor two copies of one log that both write ever share it.
#[allow(clippy::expect_used)] // AES-256-GCM takes exactly the 32 bytes expanded
fn session_cipher(key: &Key, log_id: u128, salt: u64) -> Arc<LessSafeKey> {
    let mut hkdf_salt = [0u8; 24];
    hkdf_salt[..16].copy_from_slice(&log_id.to_le_bytes());
    hkdf_salt[16..].copy_from_slice(&salt.to_le_bytes());
    let mut group_key = Zeroizing::new([0u8; 32]);
    expand(key, &hkdf_salt, b"redolog v2 group key", &mut group_key[..]);
    let key = UnboundKey::new(&AES_256_GCM, &group_key[..]).expect("AES-256-GCM takes a 32-byte key");
    Arc::new(LessSafeKey::new(key))
}

/// A random session salt.
fn random_salt() -> Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|error| Error::io("getrandom", "", std::io::Error::other(error.to_string())))?;
    Ok(u64::from_le_bytes(bytes))
}

/// The nonce of the group starting at `start` in session `epoch` (INV-29).
fn nonce(epoch: u32, start: Lsn) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(&epoch.to_le_bytes());
    nonce[4..].copy_from_slice(&start.0.to_le_bytes());
    nonce
}

/// What a session of an encrypted log seals new groups with.
pub(crate) struct Sealer {
    key_id: u32,
    epoch: u32,
    salt: u64,
    cipher: Arc<LessSafeKey>,
}

/// A session's keys: its sealer, its epoch and the key table its checkpoint
/// slots record.
pub(crate) struct Session {
    pub(crate) sealer: Sealer,
    pub(crate) epoch: u32,
    pub(crate) keys: KeyTable,
}

impl Sealer {
    /// Frames `records` into `out` as a sealed group before its start is
    /// known: `header, key_id, epoch, salt, records` in clear, to be sealed
    /// in place by [`Sealer::seal`] (FORMAT.md §6.1).
    pub(crate) fn frame(&self, records: &[&[u8]], out: &mut Vec<u8>) {
        let plain: usize = records.iter().map(|record| RECORD_HEADER_BYTES + record.len()).sum();
        out.clear();
        out.reserve(GROUP_HEADER_BYTES + SEAL_HEADER_BYTES + plain + SEAL_TAG_BYTES);
        out.extend_from_slice(&((SEAL_HEADER_BYTES + plain + SEAL_TAG_BYTES) as u32).to_le_bytes());
        out.extend_from_slice(&(records.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.key_id.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.salt.to_le_bytes());
        for record in records {
            out.extend_from_slice(&(record.len() as u32).to_le_bytes());
            out.extend_from_slice(record);
        }
        out.resize(out.len() + SEAL_TAG_BYTES, 0);
    }

    /// Seals the group [`Sealer::frame`] left in `framed`, which starts at
    /// `start`: encrypts its records in place and writes the tag.
    #[allow(clippy::expect_used)] // AES-GCM refuses only messages over 64 GiB; a group is below 4 GiB
    pub(crate) fn seal(&self, start: Lsn, framed: &mut [u8]) {
        // The associated data is the group header alone (one GHASH block):
        // the seal header is bound without it, its key id and salt through
        // the key and its epoch through the nonce (FORMAT.md §6.1).
        let (clear, rest) = framed.split_at_mut(GROUP_HEADER_BYTES + SEAL_HEADER_BYTES);
        let aad = &clear[..GROUP_HEADER_BYTES];
        let (body, tag_out) = rest.split_at_mut(rest.len() - SEAL_TAG_BYTES);
        let nonce = Nonce::assume_unique_for_key(nonce(self.epoch, start));
        let tag = self
            .cipher
            .seal_in_place_separate_tag(nonce, Aad::from(aad), body)
            .expect("a group is within AES-GCM's message limit");
        tag_out.copy_from_slice(tag.as_ref());
    }
}

/// Opens the sealed groups of one log, with any key it records.
pub(crate) struct Opener {
    log_id: u128,
    provider: Arc<dyn KeyProvider>,
    /// The keys the log recorded, with their checks (INV-31): the slot's table
    /// and, once a session began, every entry the log ever recorded while open.
    table: RwLock<KeyTable>,
    /// Session ciphers derived so far, by key id and session salt.
    ciphers: RwLock<BTreeMap<(u32, u64), Arc<LessSafeKey>>>,
}

impl fmt::Debug for Opener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opener").field("keys", &*self.table.read()).finish_non_exhaustive()
    }
}

/// The fields of a seal header (FORMAT.md §6.1).
struct SealHeader {
    key_id: u32,
    epoch: u32,
    salt: u64,
}

impl SealHeader {
    fn decode(seal: &[u8; SEAL_HEADER_BYTES]) -> SealHeader {
        let word = |at: usize| u32::from_le_bytes([seal[at], seal[at + 1], seal[at + 2], seal[at + 3]]);
        let mut salt = [0u8; 8];
        salt.copy_from_slice(&seal[8..16]);
        SealHeader { key_id: word(0), epoch: word(4), salt: u64::from_le_bytes(salt) }
    }
}

impl Opener {
    pub(crate) fn new(encryption: &Encryption, log_id: u128, table: KeyTable) -> Opener {
        Opener {
            log_id,
            provider: encryption.provider.clone(),
            table: RwLock::new(table),
            ciphers: RwLock::new(BTreeMap::new()),
        }
    }

    /// The cipher of the session `seal` names. A key id the table records must
    /// come with the recorded check (else `WrongKey`); one it does not record
    /// (a group before the checkpoint, read by `read_from`, under a key
    /// retired from the table) is tried as the provider gives it, and the tag
    /// decides. `Ok(None)`: the id is neither recorded nor the provider's,
    /// which a changed key id byte also gives: damage.
    fn cipher(&self, seal: &SealHeader, needed: impl Fn() -> String) -> Result<Option<Arc<LessSafeKey>>> {
        if let Some(cipher) = self.ciphers.read().get(&(seal.key_id, seal.salt)) {
            return Ok(Some(cipher.clone()));
        }
        let key_id = seal.key_id;
        let recorded = self.table.read().check_of(key_id);
        let key = match (self.provider.key(key_id), recorded) {
            (Some(key), _) => key,
            (None, Some(_)) => return Err(Error::MissingKey { key_id, needed: needed() }),
            (None, None) => return Ok(None),
        };
        if recorded.is_some_and(|check| check != key_check(&key, self.log_id)) {
            return Err(Error::WrongKey { key_id, needed: needed() });
        }
        let cipher = session_cipher(&key, self.log_id, seal.salt);
        self.ciphers.write().insert((key_id, seal.salt), cipher.clone());
        Ok(Some(cipher))
    }

    /// Opens the sealed `body` of the group at `start` with `header`: on
    /// success `body` holds the records. `Err` for a recorded key the provider
    /// lacks or that is not the one recorded; `Ok(Err(reason))` for damage: a
    /// key id neither recorded nor known to the provider, or authentication
    /// failed (INV-30).
    pub(crate) fn open(
        &self,
        start: Lsn,
        header: &[u8; GROUP_HEADER_BYTES],
        body: &mut Vec<u8>,
    ) -> Result<std::result::Result<(), String>> {
        let Some((seal_bytes, rest)) = body.split_first_chunk::<SEAL_HEADER_BYTES>() else {
            return Ok(Err(format!("an encrypted group of {} bytes is shorter than its seal", body.len())));
        };
        if rest.len() < SEAL_TAG_BYTES {
            return Ok(Err(format!("an encrypted group of {} bytes is shorter than its seal", body.len())));
        }
        let seal = SealHeader::decode(seal_bytes);
        let Some(cipher) = self.cipher(&seal, || format!("to read the group at LSN {start}"))? else {
            let key_id = seal.key_id;
            return Ok(Err(format!("the group names key id {key_id}, which neither the log nor the provider has")));
        };
        let tag_at = body.len() - SEAL_TAG_BYTES;
        let nonce = Nonce::assume_unique_for_key(nonce(seal.epoch, start));
        // Sealed records then tag, opened in place: the plaintext is the records.
        if cipher.open_in_place(nonce, Aad::from(header), &mut body[SEAL_HEADER_BYTES..]).is_err() {
            let key_id = seal.key_id;
            return Ok(Err(format!("the group fails authentication under key id {key_id}")));
        }
        body.truncate(tag_at);
        body.drain(..SEAL_HEADER_BYTES);
        Ok(Ok(()))
    }

    /// The key id a sealed `body` names, if it is long enough to name one.
    pub(crate) fn key_id_of(body: &[u8]) -> Option<u32> {
        body.first_chunk::<4>().map(|id| u32::from_le_bytes(*id))
    }

    /// Starts a session that seals with the provider's current key under a
    /// fresh random salt: checks the key against the table, and records it
    /// (INV-31). `epoch` is the session's, larger than any the log recorded
    /// (INV-29); `seen` the key ids of the groups from the checkpoint on, whose
    /// entries the new slot table keeps (the table in memory keeps them all).
    pub(crate) fn begin_session(&self, epoch: u32, seen: &[u32]) -> Result<Session> {
        let key_id = self.provider.current_key_id();
        let needed = || "to seal new groups (the provider's current key)".to_string();
        let key = self.provider.key(key_id).ok_or_else(|| Error::MissingKey { key_id, needed: needed() })?;
        let check = key_check(&key, self.log_id);
        let old = *self.table.read();
        if old.check_of(key_id).is_some_and(|recorded| recorded != check) {
            return Err(Error::WrongKey { key_id, needed: needed() });
        }
        let mut keys = KeyTable::default();
        for (id, recorded) in old.entries().iter().filter(|(id, _)| seen.contains(id)) {
            keys.insert(*id, *recorded);
        }
        if !keys.insert(key_id, check) {
            return Err(Error::InvalidConfig {
                field: "Config::encryption",
                value: format!("current key id {key_id}"),
                allowed: format!(
                    "at most {} distinct key ids in the groups after the checkpoint: checkpoint before rotating again",
                    crate::format::KEYS_MAX
                ),
            });
        }
        // The table in memory keeps every entry it had, for `read_from`
        // before the checkpoint; it only grows by the current key.
        let mut known = old;
        known.insert(key_id, check);
        *self.table.write() = known;
        let salt = random_salt()?;
        let cipher = session_cipher(&key, self.log_id, salt);
        self.ciphers.write().insert((key_id, salt), cipher.clone());
        Ok(Session { sealer: Sealer { key_id, epoch, salt, cipher }, epoch, keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A known answer computed from FORMAT.md §6.1 by another implementation
    /// (Python's `hmac` for HKDF-SHA256 and `cryptography`'s AESGCM, i.e.
    /// OpenSSL): the key check, and a sealed one-record group byte for byte.
    #[test]
    fn a_sealed_group_matches_the_format_byte_for_byte() {
        let key = Key::from_bytes([7; 32]);
        let log_id = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        assert_eq!(key_check(&key, log_id), 0x8b91_ced9);
        let salt = 0x1122_3344_5566_7788;
        let sealer = Sealer { key_id: 1, epoch: 3, salt, cipher: session_cipher(&key, log_id, salt) };
        let mut group = Vec::new();
        sealer.frame(&[b"hello"], &mut group);
        sealer.seal(Lsn(8208), &mut group);
        let hex: String = group.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(
            hex,
            "29000000010000000100000003000000887766554433221196aed31d01d94df80f25518ae9b4d1adbe3025e91bf17c668d"
        );
    }

    /// Errors about a key file's text never echo it: it may hold a key.
    #[test]
    fn key_errors_never_echo_the_key() {
        let key = "ab".repeat(32);
        for text in [format!("{key} 1"), format!("1 {}+", &key[..63]), format!("1 {key}x")] {
            let error = Keys::parse(&text).expect_err("malformed");
            assert!(!error.contains(&key[..16]), "{error}");
        }
        assert!(Key::from_hex(&format!("+{}", &key[1..])).is_err(), "a sign is not a hex digit");
    }
}
