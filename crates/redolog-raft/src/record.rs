//! The store's records ([RAFT, "Records"](crate::docs::raft#records)): one redolog record each,
//! `[version][kind]` then the body. Entries carry their index in the header,
//! so the position index is rebuilt without parsing a payload; the rest of a
//! body is openraft's serde form, as JSON, pinned by `tests/golden.rs`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::line::Line;
use crate::Error;

/// The record format's version: a reader refuses any other.
pub(crate) const VERSION: u8 = 1;

const ENTRY: u8 = 1;
const VOTE: u8 = 2;
const COMMITTED: u8 = 3;
const TRUNCATE: u8 = 4;
const PURGE: u8 = 5;
const STATE: u8 = 6;

/// What a checkpoint must not drop, re-appended before it ([RAFT](crate::docs::raft),
/// "Space").
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) struct Kept<L: Line> {
    pub vote: Option<L::Vote>,
    pub committed: Option<L::LogId>,
    pub purged: Option<L::LogId>,
}

/// One decoded record.
pub(crate) enum Record<L: Line> {
    /// An entry at `index`; its body is parsed only when it is read.
    Entry {
        index: u64,
    },
    Vote(L::Vote),
    Committed(Option<L::LogId>),
    /// Entries from `since` on are gone.
    Truncate {
        since: u64,
    },
    /// Entries up to this log id are gone.
    Purge(L::LogId),
    State(Kept<L>),
}

fn header(kind: u8) -> Vec<u8> {
    vec![VERSION, kind]
}

fn json<T: Serialize>(mut bytes: Vec<u8>, value: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_writer(&mut bytes, value).map_err(|source| Error::Encode { source })?;
    Ok(bytes)
}

pub(crate) fn entry<L: Line>(index: u64, entry: &L::Entry) -> Result<Vec<u8>, Error> {
    let mut bytes = header(ENTRY);
    bytes.extend_from_slice(&index.to_le_bytes());
    json(bytes, entry)
}

pub(crate) fn vote<L: Line>(vote: &L::Vote) -> Result<Vec<u8>, Error> {
    json(header(VOTE), vote)
}

pub(crate) fn committed<L: Line>(committed: &Option<L::LogId>) -> Result<Vec<u8>, Error> {
    json(header(COMMITTED), committed)
}

pub(crate) fn truncate(since: u64) -> Vec<u8> {
    let mut bytes = header(TRUNCATE);
    bytes.extend_from_slice(&since.to_le_bytes());
    bytes
}

pub(crate) fn purge<L: Line>(upto: &L::LogId) -> Result<Vec<u8>, Error> {
    json(header(PURGE), upto)
}

pub(crate) fn state<L: Line>(kept: &Kept<L>) -> Result<Vec<u8>, Error> {
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
pub(crate) fn decode<L: Line>(bytes: &[u8]) -> Result<Record<L>, String> {
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
pub(crate) fn entry_body<L: Line>(bytes: &[u8]) -> Result<L::Entry, String> {
    body(bytes.get(10..).ok_or_else(|| "entry header cut short".to_string())?)
}
