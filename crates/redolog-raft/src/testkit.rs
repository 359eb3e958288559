//! What the in-process clusters of both openraft lines share (cargo feature
//! `testkit`): the network's map of running nodes. Each line's `in_process`
//! names it for its node type (`in_process::Router`) and implements that
//! line's network traits on it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The in-process network: every running node by id. A node that is not in
/// the map is down: calls to it fail as a dead link does.
///
/// ```
/// let router = redolog_raft::testkit::Router::<&str>::default();
/// router.set(1, Some("node one"));
/// assert_eq!(router.get(1), Some("node one"));
/// router.set(1, None);
/// assert_eq!(router.get(1), None);
/// ```
pub struct Router<N>(Arc<Mutex<BTreeMap<u64, N>>>);

impl<N> Clone for Router<N> {
    fn clone(&self) -> Self {
        Router(self.0.clone())
    }
}

impl<N> Default for Router<N> {
    fn default() -> Self {
        Router(Arc::default())
    }
}

impl<N: Clone> Router<N> {
    /// Node `id`, if it runs.
    pub fn get(&self, id: u64) -> Option<N> {
        self.nodes().get(&id).cloned()
    }

    /// Puts node `id` on the network (`Some`) or takes it off (`None`).
    pub fn set(&self, id: u64, node: Option<N>) {
        let mut nodes = self.nodes();
        match node {
            Some(node) => nodes.insert(id, node),
            None => nodes.remove(&id),
        };
    }

    fn nodes(&self) -> MutexGuard<'_, BTreeMap<u64, N>> {
        // The map is replaced whole under the lock: a panic elsewhere cannot
        // leave it half-written.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
