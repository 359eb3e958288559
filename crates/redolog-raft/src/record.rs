//! The store's records (docs/RAFT.md, "Records"): one redolog record each,
//! `[version][kind]` then the body. Entries carry their index in the header,
//! so the position index is rebuilt without parsing a payload; the rest of a
//! body is openraft's serde form, as JSON, pinned by `tests/golden.rs`.

use openraft::{LogId, RaftTypeConfig, Vote};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::Error;

/// The record format's version: a reader refuses any other.
pub(crate) const VERSION: u8 = 1;

const ENTRY: u8 = 1;
const VOTE: u8 = 2;
const COMMITTED: u8 = 3;
const TRUNCATE: u8 = 4;
const PURGE: u8 = 5;
const STATE: u8 = 6;

/// What a checkpoint must not drop, re-appended before it (docs/RAFT.md,
/// "Space").
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) struct Kept<C: RaftTypeConfig> {
    pub vote: Option<Vote<C::NodeId>>,
    pub committed: Option<LogId<C::NodeId>>,
    pub purged: Option<LogId<C::NodeId>>,
}

/// One decoded record.
pub(crate) enum Record<C: RaftTypeConfig> {
    /// An entry at `index`; its body is parsed only when it is read.
    Entry {
        index: u64,
    },
    Vote(Vote<C::NodeId>),
    Committed(Option<LogId<C::NodeId>>),
    /// Entries from `since` on are gone.
    Truncate {
        since: u64,
    },
    /// Entries up to this log id are gone.
    Purge(LogId<C::NodeId>),
    State(Kept<C>),
}

fn header(kind: u8) -> Vec<u8> {
    vec![VERSION, kind]
}

fn json<T: Serialize>(mut bytes: Vec<u8>, value: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_writer(&mut bytes, value).map_err(|source| Error::Encode { source })?;
    Ok(bytes)
}

pub(crate) fn entry<C: RaftTypeConfig>(index: u64, entry: &C::Entry) -> Result<Vec<u8>, Error>
where
    C::Entry: Serialize,
{
    let mut bytes = header(ENTRY);
    bytes.extend_from_slice(&index.to_le_bytes());
    json(bytes, entry)
}

pub(crate) fn vote<C: RaftTypeConfig>(vote: &Vote<C::NodeId>) -> Result<Vec<u8>, Error> {
    json(header(VOTE), vote)
}

pub(crate) fn committed<C: RaftTypeConfig>(committed: &Option<LogId<C::NodeId>>) -> Result<Vec<u8>, Error> {
    json(header(COMMITTED), committed)
}

pub(crate) fn truncate(since: u64) -> Vec<u8> {
    let mut bytes = header(TRUNCATE);
    bytes.extend_from_slice(&since.to_le_bytes());
    bytes
}

pub(crate) fn purge<C: RaftTypeConfig>(upto: &LogId<C::NodeId>) -> Result<Vec<u8>, Error> {
    json(header(PURGE), upto)
}

pub(crate) fn state<C: RaftTypeConfig>(kept: &Kept<C>) -> Result<Vec<u8>, Error> {
    json(header(STATE), kept)
}

fn index_at(bytes: &[u8]) -> Result<u64, String> {
    let index: [u8; 8] =
        bytes.get(2..10).and_then(|b| b.try_into().ok()).ok_or_else(|| "header cut short".to_string())?;
    Ok(u64::from_le_bytes(index))
}

fn body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|error| format!("body: {error}"))
}

/// Decodes a record's header and, except for an entry, its body.
pub(crate) fn decode<C: RaftTypeConfig>(bytes: &[u8]) -> Result<Record<C>, String> {
    let (&version, &kind) = match bytes {
        [version, kind, ..] => (version, kind),
        _ => return Err(format!("{} bytes: shorter than a header", bytes.len())),
    };
    if version != VERSION {
        return Err(format!("record version {version}; this build reads version {VERSION}"));
    }
    Ok(match kind {
        ENTRY => Record::Entry { index: index_at(bytes)? },
        VOTE => Record::Vote(body(&bytes[2..])?),
        COMMITTED => Record::Committed(body(&bytes[2..])?),
        TRUNCATE => Record::Truncate { since: index_at(bytes)? },
        PURGE => Record::Purge(body(&bytes[2..])?),
        STATE => Record::State(body(&bytes[2..])?),
        other => return Err(format!("unknown record kind {other}")),
    })
}

/// The entry in an entry record.
pub(crate) fn entry_body<C: RaftTypeConfig>(bytes: &[u8]) -> Result<C::Entry, String>
where
    C::Entry: DeserializeOwned,
{
    body(bytes.get(10..).ok_or_else(|| "entry header cut short".to_string())?)
}
