//! The cluster fault test's linearizability check (docs/RAFT.md, "The fault
//! test"): each key a register with read, write and compare-and-set, as a
//! sequential specification for todc-utils' `WGLChecker` (Wing & Gong's
//! search with Lowe's memoization: a partial linearization already known to
//! lead nowhere — the same operations taken, the register in the same state —
//! is not searched again, so a history that is *not* linearizable is decided
//! about as fast as one that is), and a history of client operations checked
//! key by key (linearizability composes per object).

#![allow(dead_code)] // each test binary uses part of it

use std::collections::{BTreeMap, HashMap};

use todc_utils::{Action, History as Actions, Specification, WGLChecker};

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

/// One operation with its outcome, as the specification applies it; values
/// are interned (`u32`), so the checker's states hash and compare cheaply.
#[derive(Clone, Debug)]
enum Step {
    /// A read that returned this value.
    Read(Option<u32>),
    /// A write, acknowledged or of unknown outcome (it may be linearized
    /// last, where it changes nothing anybody saw).
    Write(u32),
    /// A compare-and-set that returned whether it applied.
    Cas { expected: Option<u32>, new: u32, applied: bool },
    /// A compare-and-set of unknown outcome: whatever the register holds
    /// where it is linearized decides it.
    CasUnknown { expected: Option<u32>, new: u32 },
}

/// The register: its value, interned.
struct Register;

impl Specification for Register {
    type State = Option<u32>;
    type Operation = Step;

    fn init() -> Option<u32> {
        None
    }

    fn apply(step: &Step, state: &Option<u32>) -> (bool, Option<u32>) {
        match step {
            Step::Read(value) => (value == state, *state),
            Step::Write(value) => (true, Some(*value)),
            Step::Cas { expected, new, applied } => {
                let applies = state == expected;
                (applies == *applied, if applies { Some(*new) } else { *state })
            }
            Step::CasUnknown { expected, new } => (true, if state == expected { Some(*new) } else { *state }),
        }
    }
}

/// A history as clients record it, in real-time order: invocations, and
/// returns for the operations that completed. An operation that ended
/// unknown (a timeout, a broken connection) has no return, and its client
/// never invokes again: it may take effect at any later time.
#[derive(Default)]
pub struct History {
    /// Per key, the events on it, in real-time order.
    keys: BTreeMap<String, Vec<Event>>,
    /// The key of each client's operation in flight.
    in_flight: BTreeMap<u64, String>,
}

enum Event {
    Invoke(u64, Op),
    /// With what the client learnt of how its operation was served (which
    /// node, which log position), shown with a history that is not
    /// linearizable.
    Return(u64, Ret, Option<String>),
}

impl History {
    /// `client` invoked `op` on `key`.
    pub fn invoke(&mut self, client: u64, key: &str, op: Op) {
        self.in_flight.insert(client, key.to_string());
        self.keys.entry(key.to_string()).or_default().push(Event::Invoke(client, op));
    }

    /// `client`'s operation in flight returned `ret`.
    pub fn returned(&mut self, client: u64, ret: Ret) {
        self.push_return(client, ret, None);
    }

    /// [`returned`](Self::returned), with how the operation was served.
    pub fn returned_noted(&mut self, client: u64, ret: Ret, note: String) {
        self.push_return(client, ret, Some(note));
    }

    fn push_return(&mut self, client: u64, ret: Ret, note: Option<String>) {
        let key = self.in_flight.remove(&client).unwrap_or_else(|| panic!("client {client} has nothing in flight"));
        self.keys.entry(key).or_default().push(Event::Return(client, ret, note));
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

    /// Operations still in flight: ended unknown.
    pub fn pending(&self) -> usize {
        self.in_flight.len()
    }

    /// Operations invoked, over every key.
    pub fn len(&self) -> usize {
        self.keys.values().flatten().filter(|event| matches!(event, Event::Invoke(..))).count()
    }

    /// Whether every key's history is linearizable; the first key that is
    /// not, with its events, otherwise.
    pub fn check(&self) -> Result<(), String> {
        for (key, events) in &self.keys {
            let actions = actions(events).map_err(|error| format!("key {key}: the history is malformed: {error}"))?;
            if actions.is_empty() || WGLChecker::<Register>::is_linearizable(Actions::from_actions(actions)) {
                continue;
            }
            let shown: Vec<String> = events
                .iter()
                .map(|event| match event {
                    Event::Invoke(client, op) => format!("client {client} invokes {op:?}"),
                    Event::Return(client, ret, Some(note)) => format!("client {client} returns {ret:?} ({note})"),
                    Event::Return(client, ret, None) => format!("client {client} returns {ret:?}"),
                })
                .collect();
            return Err(format!("key {key} is not linearizable:\n  {}", shown.join("\n  ")));
        }
        Ok(())
    }
}

/// One key's events as the checker's calls and responses, by process (the
/// clients, numbered densely). An operation still in flight at the end
/// ended unknown: a read is dropped (it constrains nothing), a write or a
/// compare-and-set gets its response after everything else, so it may be
/// linearized anywhere after its invocation — last of all being "never".
fn actions(events: &[Event]) -> Result<Vec<(usize, Action<Step>)>, String> {
    let mut values: HashMap<String, u32> = HashMap::new();
    let mut intern = |value: &str| {
        let next = u32::try_from(values.len()).expect("fewer than 2^32 values");
        *values.entry(value.to_owned()).or_insert(next)
    };
    let mut processes: HashMap<u64, usize> = HashMap::new();
    // Per client, the index in `actions` of its call in flight and its op.
    let mut open: HashMap<u64, (usize, &Op)> = HashMap::new();
    let mut actions: Vec<Option<(usize, Action<Step>)>> = Vec::with_capacity(events.len());
    for event in events {
        match event {
            Event::Invoke(client, op) => {
                let next = processes.len();
                processes.entry(*client).or_insert(next);
                if open.insert(*client, (actions.len(), op)).is_some() {
                    return Err(format!("client {client} invoked with an operation in flight"));
                }
                actions.push(None); // the call, written once its outcome is known
            }
            Event::Return(client, ret, _) => {
                let (at, op) = open.remove(client).ok_or_else(|| format!("client {client} returned uninvoked"))?;
                let step = match (op, ret) {
                    (Op::Read, Ret::Read(value)) => Step::Read(value.as_deref().map(&mut intern)),
                    (Op::Write(value), Ret::Written) => Step::Write(intern(value)),
                    (Op::Cas { expected, new }, Ret::Cas(applied)) => Step::Cas {
                        expected: expected.as_deref().map(&mut intern),
                        new: intern(new),
                        applied: *applied,
                    },
                    (op, ret) => return Err(format!("client {client}: {op:?} returned {ret:?}")),
                };
                let process = processes[client];
                actions[at] = Some((process, Action::Call(step.clone())));
                actions.push(Some((process, Action::Response(step))));
            }
        }
    }
    // In flight at the end: unknown outcomes, in invocation order.
    let mut unknown: Vec<(usize, &Op, u64)> = open.into_iter().map(|(client, (at, op))| (at, op, client)).collect();
    unknown.sort_unstable_by_key(|(at, _, _)| *at);
    for (at, op, client) in unknown {
        let step = match op {
            Op::Read => continue,
            Op::Write(value) => Step::Write(intern(value)),
            Op::Cas { expected, new } => {
                Step::CasUnknown { expected: expected.as_deref().map(&mut intern), new: intern(new) }
            }
        };
        let process = processes[&client];
        actions[at] = Some((process, Action::Call(step.clone())));
        actions.push(Some((process, Action::Response(step))));
    }
    Ok(actions.into_iter().flatten().collect())
}
