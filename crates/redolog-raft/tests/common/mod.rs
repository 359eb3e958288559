//! What the tests share: the store on either openraft line behind one small
//! interface ([`Line`], in openraft-neutral terms: a log id is `(term,
//! index)`, an entry's payload is `Some(text)` or blank), so the reopen,
//! power-loss, golden-bytes and kill tests are written once and run on both
//! lines; and opening a store.

#![allow(dead_code, async_fn_in_trait)]

use std::ops::RangeInclusive;
use std::path::Path;

/// A log id: `(term, index)`; the leader's node id is always 1.
pub type Id = (u64, u64);

/// An entry: its log id and its payload (`None`: a blank entry).
pub type Item = (Id, Option<String>);

/// A vote: term, node id, committed.
pub type Ballot = (u64, u64, bool);

/// A small log for tests: 1 MiB.
pub fn config() -> redolog::Config {
    redolog::Config::default().with_capacity_bytes(1 << 20)
}

/// What a reopen must reproduce.
#[derive(Debug, PartialEq)]
pub struct Seen {
    pub purged: Option<Id>,
    pub last: Option<Id>,
    pub vote: Option<Ballot>,
    pub committed: Option<Id>,
    pub entries: Vec<Item>,
}

/// The store on one openraft line, through that line's traits.
pub trait Line: Sized + Clone + Send + 'static {
    /// The line's name, for messages.
    const NAME: &'static str;

    fn open_with(dir: &Path, config: redolog::Config) -> Result<Self, redolog_raft::Error>;
    fn open_on<T: redolog::storage::Storage + 'static>(
        dir: &Path,
        config: redolog::Config,
        storage: T,
    ) -> Result<Self, redolog_raft::Error>;
    fn log(&self) -> &redolog::Log;
    /// Appends and waits until openraft's callback says durable.
    async fn append(&mut self, entries: Vec<Item>);
    async fn save_vote(&mut self, vote: Ballot);
    async fn vote(&mut self) -> Option<Ballot>;
    async fn save_committed(&mut self, committed: Option<Id>);
    async fn committed(&mut self) -> Option<Id>;
    /// Keeps the entries up to `last` and removes the rest.
    async fn truncate_after(&mut self, last: Option<Id>);
    async fn purge(&mut self, upto: Id);
    /// The last purged and the last log id.
    async fn state(&mut self) -> (Option<Id>, Option<Id>);
    /// Through the line's log reader.
    async fn entries(&mut self, range: RangeInclusive<u64>) -> Vec<Item>;

    fn open(dir: &Path) -> Self {
        Self::open_with(dir, config()).expect("open the store")
    }

    /// Everything a reopen must reproduce.
    async fn seen(&mut self) -> Seen {
        let (purged, last) = self.state().await;
        let from = purged.map_or(0, |id| id.1 + 1);
        let to = last.map_or(0, |id| id.1);
        Seen {
            purged,
            last,
            vote: self.vote().await,
            committed: self.committed().await,
            entries: if to >= from { self.entries(from..=to).await } else { Vec::new() },
        }
    }
}

/// What the two lines' adapters share word for word, written once: each
/// line's module brings its own `TypeConfig`, `Store`, `Vote`, `LogIdT`,
/// `EntryT`, `log_id` and the imports these name. What differs — building
/// a log id, reading a vote, truncating — stays in the module.
macro_rules! adapter_functions {
    () => {
        fn id(log_id: LogIdT) -> Id {
            (log_id.leader_id.term, log_id.index)
        }

        pub fn entry((at, payload): Item) -> EntryT {
            let payload = payload.map_or(EntryPayload::Blank, EntryPayload::Normal);
            Entry { log_id: log_id(at), payload }
        }

        fn item(entry: EntryT) -> Item {
            let payload = match entry.payload {
                EntryPayload::Normal(text) => Some(text),
                EntryPayload::Blank => None,
                EntryPayload::Membership(membership) => Some(format!("membership {membership:?}")),
            };
            (id(entry.log_id), payload)
        }
    };
}

/// The methods of [`Line`] that read the same on both lines.
macro_rules! adapter_methods {
    () => {
        fn open_with(dir: &Path, config: redolog::Config) -> Result<Self, redolog_raft::Error> {
            Store::open(dir, config)
        }

        fn open_on<T: redolog::storage::Storage + 'static>(
            dir: &Path,
            config: redolog::Config,
            storage: T,
        ) -> Result<Self, redolog_raft::Error> {
            Store::open_with_storage(dir, config, storage)
        }

        fn log(&self) -> &redolog::Log {
            Store::log(self)
        }

        async fn append(&mut self, entries: Vec<Item>) {
            self.blocking_append(entries.into_iter().map(entry)).await.expect("append");
        }

        async fn save_vote(&mut self, (term, node, committed): Ballot) {
            let vote = if committed { Vote::new_committed(term, node) } else { Vote::new(term, node) };
            RaftLogStorage::save_vote(self, &vote).await.expect("save the vote");
        }

        async fn save_committed(&mut self, committed: Option<Id>) {
            RaftLogStorage::save_committed(self, committed.map(log_id)).await.expect("save the committed id");
        }

        async fn committed(&mut self) -> Option<Id> {
            self.read_committed().await.expect("read the committed id").map(id)
        }

        async fn purge(&mut self, upto: Id) {
            RaftLogStorage::purge(self, log_id(upto)).await.expect("purge");
        }

        async fn state(&mut self) -> (Option<Id>, Option<Id>) {
            let state = self.get_log_state().await.expect("log state");
            (state.last_purged_log_id.map(id), state.last_log_id.map(id))
        }

        async fn entries(&mut self, range: RangeInclusive<u64>) -> Vec<Item> {
            let mut reader = self.get_log_reader().await;
            let entries = reader.try_get_log_entries(range).await.expect("entries");
            entries.into_iter().map(item).collect()
        }
    };
}

/// The store on openraft 0.9.
pub mod v0_9 {
    use super::{Ballot, Id, Item};
    use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader, Vote};
    #[allow(unused_imports)] // each test binary uses some of them
    pub use redolog_raft::openraft_0_9::in_process::{Machine, Node, Router, Store, TypeConfig};
    use std::ops::RangeInclusive;
    use std::path::Path;

    type LogIdT = LogId<u64>;
    type EntryT = Entry<TypeConfig>;

    pub fn log_id((term, index): Id) -> LogIdT {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    adapter_functions!();

    impl super::Line for Store {
        const NAME: &'static str = "openraft 0.9";

        adapter_methods!();

        async fn vote(&mut self) -> Option<Ballot> {
            let vote = self.read_vote().await.expect("read the vote")?;
            Some((vote.leader_id().term, vote.leader_id().node_id, vote.is_committed()))
        }

        async fn truncate_after(&mut self, last: Option<Id>) {
            // 0.9 names the first entry to remove; its term does not matter.
            let first = last.map_or((0, 0), |(term, index)| (term, index + 1));
            self.truncate(log_id(first)).await.expect("truncate");
        }
    }
}

/// The store on openraft 0.10.
pub mod v0_10 {
    use super::{Ballot, Id, Item};
    use openraft::alias::{EntryOf, LogIdOf, VoteOf};
    use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
    use openraft::{Entry, EntryPayload, LogId};
    #[allow(unused_imports)] // each test binary uses some of them
    pub use redolog_raft::openraft_0_10::in_process::{Machine, Node, Router, Store, TypeConfig};
    use redolog_raft::openraft_0_10::openraft;
    use std::ops::RangeInclusive;
    use std::path::Path;

    type Vote = VoteOf<TypeConfig>;
    type LogIdT = LogIdOf<TypeConfig>;
    type EntryT = EntryOf<TypeConfig>;

    pub fn log_id((term, index): Id) -> LogIdT {
        LogId::new(openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 }, index)
    }

    adapter_functions!();

    impl super::Line for Store {
        const NAME: &'static str = "openraft 0.10";

        adapter_methods!();

        async fn vote(&mut self) -> Option<Ballot> {
            let vote = self.read_vote().await.expect("read the vote")?;
            Some((vote.leader_id.term, vote.leader_id.node_id, vote.committed))
        }

        async fn truncate_after(&mut self, last: Option<Id>) {
            RaftLogStorage::truncate_after(self, last.map(log_id)).await.expect("truncate");
        }
    }
}
