//! Encryption at rest: every block's data sealed with AES-256-GCM (`ring`)
//! by the log's writer ([FORMAT §6.1](crate::docs::format#61-encrypted-blocks-format-version-3), [DESIGN §1.15](crate::docs::design#115-encryption-at-rest), INV-29 to
//! INV-31).
//!
//! Built with the cargo feature `encryption` (off by default: it links
//! `ring`); without it, a log that would need the cipher — one created with
//! [`Config::encryption`], or an encrypted log opened with its keys — fails to
//! open with [`Error::EncryptionNotBuilt`]. The keys' types below are there
//! either way, so a configuration compiles in both builds.
//!
//! A log is created encrypted when [`Config::encryption`]
//! is set, and is then opened, inspected and dumped only with its keys. The
//! keys come from the application through a [`KeyProvider`] (a file, an
//! environment variable, a KMS); each block names the id of the key it was
//! sealed with, so a key is rotated by giving the provider a new current key
//! and keeping the old ones readable: nothing already written is rewritten.
//!
//! What stays in clear: the file headers, checkpoint slots, block headers and
//! each block's key id and session. Groups — their lengths, record counts and
//! records — are encrypted and authenticated with the block's header: a
//! changed byte anywhere in a block is [`Error::Corruption`], never other
//! bytes.
//!
//! ```
//! use redolog::encryption::{Encryption, Key, Keys};
//! use redolog::{Config, Durability, Log};
//! let dir = tempfile::tempdir().unwrap();
//! let keys = Keys::new().with_key(1, Key::from_bytes([7; 32]));
//! let config = Config::default().with_encryption(Encryption::new(keys));
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
use zeroize::Zeroizing;

pub(crate) mod block;
mod key;

use block::{BlockCipher, BlockKeyId};
#[cfg(feature = "encryption")]
use key::key_check;
pub use key::Key;

use crate::error::{Error, Result};
use crate::format::KeyTable;

/// Where an encrypted log's keys come from: the application's key store.
///
/// The log asks for the current key once per [`Log::open`](crate::Log::open)
/// (new blocks are sealed with it until the log is closed) and for any key by
/// id when it reads a block sealed with it. Keep every key a block from the
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
    /// The id of the key new blocks are sealed with.
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

/// A random session salt.
#[cfg(feature = "encryption")]
fn random_salt() -> Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|error| Error::io("getrandom", "", std::io::Error::other(error.to_string())))?;
    Ok(u64::from_le_bytes(bytes))
}

/// A session's keys: the cipher its writer seals blocks with, its epoch and
/// the key table its checkpoint slots record.
pub(crate) struct Session {
    pub(crate) cipher: Arc<BlockCipher>,
    pub(crate) epoch: u32,
    pub(crate) keys: KeyTable,
}

/// How many block ciphers an `Opener` keeps: a log's blocks name a few
/// sessions; a damaged one's may name any number.
#[cfg(feature = "encryption")]
const CIPHERS_CACHED_MAX: usize = 64;

/// Opens the sealed blocks of one log, with any key it records. Without the
/// `encryption` feature none is ever built: [`Opener::new`] refuses.
#[cfg_attr(not(feature = "encryption"), allow(dead_code))]
pub(crate) struct Opener {
    log_id: u128,
    provider: Arc<dyn KeyProvider>,
    /// The keys the log recorded, with their checks (INV-31): the slot's table
    /// and, once a session began, every entry the log ever recorded while open.
    table: RwLock<KeyTable>,
    /// Block ciphers derived so far, by the key fields that select them.
    ciphers: RwLock<BTreeMap<BlockKeyId, Arc<BlockCipher>>>,
    #[cfg(not(feature = "encryption"))]
    never: std::convert::Infallible,
}

impl fmt::Debug for Opener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opener").field("keys", &*self.table.read()).finish_non_exhaustive()
    }
}

/// Without the feature: no opener, so no cipher and no session.
#[cfg(not(feature = "encryption"))]
impl Opener {
    pub(crate) fn new(_: &Encryption, _: u128, _: KeyTable) -> Result<Opener> {
        Err(Error::EncryptionNotBuilt)
    }

    pub(crate) fn cipher(&self, _: BlockKeyId, _: impl Fn() -> String) -> Result<Option<Arc<BlockCipher>>> {
        match self.never {}
    }

    pub(crate) fn begin_session(&self, _: u32, _: &[u32]) -> Result<Session> {
        match self.never {}
    }
}

#[cfg(feature = "encryption")]
impl Opener {
    pub(crate) fn new(encryption: &Encryption, log_id: u128, table: KeyTable) -> Result<Opener> {
        Ok(Opener {
            log_id,
            provider: encryption.provider.clone(),
            table: RwLock::new(table),
            ciphers: RwLock::new(BTreeMap::new()),
        })
    }

    /// The cipher of the blocks `id` names. A key id the table records must
    /// come with the recorded check (else `WrongKey`) and from the provider
    /// (else `MissingKey`); one it does not record (a block before the
    /// checkpoint, read by `read_from`, under a key retired from the table)
    /// is taken as the provider gives it, and the tag decides. `Ok(None)`:
    /// the id is neither recorded nor the provider's, which a changed key id
    /// byte also gives: damage.
    pub(crate) fn cipher(&self, id: BlockKeyId, needed: impl Fn() -> String) -> Result<Option<Arc<BlockCipher>>> {
        if let Some(cipher) = self.ciphers.read().get(&id) {
            return Ok(Some(cipher.clone()));
        }
        let key_id = id.key_id;
        let recorded = self.table.read().check_of(key_id);
        let key = match (self.provider.key(key_id), recorded) {
            (Some(key), _) => key,
            (None, Some(_)) => return Err(Error::MissingKey { key_id, needed: needed() }),
            (None, None) => return Ok(None),
        };
        if recorded.is_some_and(|check| check != key_check(&key, self.log_id)) {
            return Err(Error::WrongKey { key_id, needed: needed() });
        }
        let cipher = Arc::new(BlockCipher::new(&key, self.log_id, id));
        let mut ciphers = self.ciphers.write();
        // Bounded: a damaged log's blocks may name any number of sessions.
        if ciphers.len() >= CIPHERS_CACHED_MAX {
            ciphers.clear();
        }
        ciphers.insert(id, cipher.clone());
        Ok(Some(cipher))
    }

    /// Starts a session that seals with the provider's current key under a
    /// fresh random salt: checks the key against the table, and records it
    /// (INV-31). `epoch` is the session's, larger than any the log recorded
    /// (INV-29); `seen` the key ids of the blocks from the checkpoint on, whose
    /// entries the new slot table keeps (the table in memory keeps them all).
    pub(crate) fn begin_session(&self, epoch: u32, seen: &[u32]) -> Result<Session> {
        let key_id = self.provider.current_key_id();
        let needed = || "to seal new blocks (the provider's current key)".to_string();
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
                    "at most {} distinct key ids in the blocks after the checkpoint: checkpoint before rotating again",
                    crate::format::KEYS_MAX
                ),
            });
        }
        // The table in memory keeps every entry it had, for `read_from`
        // before the checkpoint; it only grows by the current key.
        let mut known = old;
        known.insert(key_id, check);
        *self.table.write() = known;
        let id = BlockKeyId { key_id, session: epoch, salt: random_salt()? };
        let cipher = Arc::new(BlockCipher::new(&key, self.log_id, id));
        self.ciphers.write().insert(id, cipher.clone());
        Ok(Session { cipher, epoch, keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

/// Run from the published .crate, whose tests build without the feature
/// (`scripts/check-packages.sh`: `cargo test --lib --features testkit`).
#[cfg(all(test, not(feature = "encryption")))]
mod without_the_feature {
    use std::path::Path;

    use super::{Encryption, Key, Keys};
    use crate::storage::MemStorage;
    use crate::{Config, Error, Log};

    /// A log that would need the cipher is refused by name before anything
    /// is created, never created or read in clear.
    #[test]
    fn a_log_that_needs_the_cipher_is_refused_by_name() {
        let keys = Keys::new().with_key(1, Key::from_bytes([7; 32]));
        let config =
            Config::default().with_capacity_bytes(Config::CAPACITY_BYTES_MIN).with_encryption(Encryption::new(keys));
        let storage = MemStorage::new();
        let opened = Log::open_with_storage(Path::new("/log"), config, storage.clone());
        assert!(matches!(opened, Err(Error::EncryptionNotBuilt)), "{opened:?}");
        assert!(crate::storage::Storage::list_dir(&storage, Path::new("/log")).map_or(true, |names| names.is_empty()));
        let message = Error::EncryptionNotBuilt.to_string();
        assert!(message.contains("features = [\"encryption\"]"), "{message}");
    }
}
