//! The cluster fault test's linearizability check (docs/RAFT.md, "The fault
//! test"): each key a register with read, write and compare-and-set, as a
//! sequential specification for stateright's `LinearizabilityTester`, and a
//! history of client operations checked key by key (linearizability
//! composes per object, and the tester's search grows with the concurrency
//! of one history).

#![allow(dead_code)] // each test binary uses part of it

use std::collections::BTreeMap;

use stateright::semantics::{ConsistencyTester, LinearizabilityTester, SequentialSpec};

/// One key's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Register(Option<String>);

/// An operation on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write(String),
    /// Sets `new` if the value is `expected` (`None`: absent).
    Cas {
        expected: Option<String>,
        new: String,
    },
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ret {
    Read(Option<String>),
    Written,
    /// Whether the compare-and-set applied.
    Cas(bool),
}

impl SequentialSpec for Register {
    type Op = Op;
    type Ret = Ret;

    fn invoke(&mut self, op: &Op) -> Ret {
        match op {
            Op::Read => Ret::Read(self.0.clone()),
            Op::Write(value) => {
                self.0 = Some(value.clone());
                Ret::Written
            }
            Op::Cas { expected, new } => {
                let applies = self.0 == *expected;
                if applies {
                    self.0 = Some(new.clone());
                }
                Ret::Cas(applies)
            }
        }
    }
}

/// A history as clients record it, in real-time order: invocations, and
/// returns for the operations that completed. An operation that ended
/// unknown (a timeout, a broken connection) has no return, and its client
/// never invokes again: it may take effect at any later time.
#[derive(Default)]
pub struct History {
    /// Per key, the events on it: `(client, Some(op))` an invocation,
    /// `(client, None)` with the return in `returns`.
    keys: BTreeMap<String, Vec<Event>>,
    /// The key of each client's operation in flight.
    in_flight: BTreeMap<u64, String>,
}

enum Event {
    Invoke(u64, Op),
    Return(u64, Ret),
}

impl History {
    /// `client` invoked `op` on `key`.
    pub fn invoke(&mut self, client: u64, key: &str, op: Op) {
        self.in_flight.insert(client, key.to_string());
        self.keys.entry(key.to_string()).or_default().push(Event::Invoke(client, op));
    }

    /// `client`'s operation in flight returned `ret`.
    pub fn returned(&mut self, client: u64, ret: Ret) {
        let key = self.in_flight.remove(&client).unwrap_or_else(|| panic!("client {client} has nothing in flight"));
        self.keys.entry(key).or_default().push(Event::Return(client, ret));
    }

    /// Takes `client`'s operation in flight out of the history: it surely
    /// had no effect (refused, or answered "not leader").
    pub fn cancel(&mut self, client: u64) {
        let key = self.in_flight.remove(&client).unwrap_or_else(|| panic!("client {client} has nothing in flight"));
        let events = self.keys.entry(key).or_default();
        let last = events.iter().rposition(|event| matches!(event, Event::Invoke(c, _) if *c == client));
        if let Some(at) = last {
            events.remove(at);
        }
    }

    /// The value last invoked as a write or a compare-and-set on `key`.
    pub fn last_written(&self, key: &str) -> Option<String> {
        self.keys.get(key)?.iter().rev().find_map(|event| match event {
            Event::Invoke(_, Op::Write(value) | Op::Cas { new: value, .. }) => Some(value.clone()),
            _ => None,
        })
    }

    /// Operations invoked, over every key.
    pub fn len(&self) -> usize {
        self.keys.values().flatten().filter(|event| matches!(event, Event::Invoke(..))).count()
    }

    /// Whether every key's history is linearizable; the first key that is
    /// not, with its events, otherwise.
    pub fn check(&self) -> Result<(), String> {
        for (key, events) in &self.keys {
            let mut tester = LinearizabilityTester::new(Register::default());
            for event in events {
                let recorded = match event {
                    Event::Invoke(client, op) => tester.on_invoke(*client, op.clone()).map(|_| ()),
                    Event::Return(client, ret) => tester.on_return(*client, ret.clone()).map(|_| ()),
                };
                recorded.map_err(|error| format!("key {key}: the history is malformed: {error}"))?;
            }
            if !tester.is_consistent() {
                let shown: Vec<String> = events
                    .iter()
                    .map(|event| match event {
                        Event::Invoke(client, op) => format!("client {client} invokes {op:?}"),
                        Event::Return(client, ret) => format!("client {client} returns {ret:?}"),
                    })
                    .collect();
                return Err(format!("key {key} is not linearizable:\n  {}", shown.join("\n  ")));
            }
        }
        Ok(())
    }
}
