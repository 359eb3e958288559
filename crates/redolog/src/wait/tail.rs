//! Tasks tailing the log through the live reader's `Stream`: woken each time
//! the sync frontier moves, and at close and poison ([DESIGN §4.1](crate::docs::design#41-reading-an-open-log-logread_from),
//! INV-47). They wait here, beside `tail_events` (threads tailing with
//! `next_timeout`), not in the sync stage's waker slots: a tailer demands no
//! sync, and a registered asynchronous waiter would keep the log threads
//! running for it (INV-27).

use std::task::Waker;

use crate::sync::atomic::{fence, AtomicU64, Ordering};
use crate::sync::Mutex;

/// The wakers of the tasks waiting for the sync frontier to move.
pub(crate) struct TailWakers {
    /// Each woken once, by the first `wake_all` after it was registered.
    wakers: Mutex<Vec<Waker>>,
    /// Registrations since the last `wake_all` took them: what the notifier
    /// reads to skip the lock when nobody waits (one fence and one load).
    registered: AtomicU64,
}

impl Default for TailWakers {
    fn default() -> Self {
        TailWakers { wakers: Mutex::new(Vec::new()), registered: AtomicU64::new(0) }
    }
}

impl TailWakers {
    /// Registers `waker` for the next `wake_all`. The caller looks at its
    /// condition (the frontier, the poison, the shutdown) again afterwards
    /// and does not wait if it holds (T1).
    pub(crate) fn register(&self, waker: &Waker) {
        {
            let mut wakers = self.wakers.lock();
            if !wakers.iter().any(|known| known.will_wake(waker)) {
                wakers.push(waker.clone());
            }
            self.registered.fetch_add(1, Ordering::SeqCst);
        }
        // T1: the registration before the caller's second look. With the
        // notifier's fence (T2), either it sees the registration or the
        // caller's look sees the frontier it moved.
        fence(Ordering::SeqCst);
    }

    /// Wakes every registered waker. Called after the frontier moved (or
    /// the log was closed or poisoned): T2, the move before the look at
    /// `registered`.
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        if self.registered.load(Ordering::SeqCst) == 0 {
            return;
        }
        let wakers = {
            let mut wakers = self.wakers.lock();
            self.registered.store(0, Ordering::SeqCst);
            std::mem::take(&mut *wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }
}
