//! Durability without a thread per waiter: a future (`Log::wait_async`,
//! `Log::commit_async`) or a callback (`Log::on_durable`) completed by the
//! log thread whose write or fdatasync covered it ([DESIGN §1.14](crate::docs::design#114-asynchronous-waiters-futures-and-callbacks),
//! INV-26, INV-27).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::clock::Moment;
use crate::config::Durability;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::log::{Log, LogRef};
use crate::lsn::Lsn;
use crate::pipeline::AsyncWait;
use crate::wait::Completion;

/// The future [`Log::wait_async`] returns: ready once `lsn` has the
/// durability asked for, with the same promise as [`Log::wait`] — `Ok` only
/// after the write or fdatasync that covers it returned `Ok`. Works with any
/// executor: it needs nothing but the `Waker` it is polled with. Dropping it
/// before it completes withdraws it; nothing leaks.
///
/// ```
/// use redolog::{Config, Durability, Log};
/// let dir = tempfile::tempdir().unwrap();
/// let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
/// let end = log.append(b"async").unwrap();
/// // Any executor; a minimal one here (the `commit_async` example uses Tokio).
/// let ok = block_on(log.wait_async(end, Durability::Synced));
/// assert!(ok.is_ok() && log.durable_lsn() >= end);
/// # fn block_on<F: std::future::Future>(future: F) -> F::Output {
/// #     use std::sync::Arc;
/// #     use std::task::{Context, Poll, Wake};
/// #     struct Unpark(std::thread::Thread);
/// #     impl Wake for Unpark { fn wake(self: Arc<Self>) { self.0.unpark() } }
/// #     let waker = Arc::new(Unpark(std::thread::current())).into();
/// #     let mut context = Context::from_waker(&waker);
/// #     let mut future = std::pin::pin!(future);
/// #     loop {
/// #         if let Poll::Ready(output) = future.as_mut().poll(&mut context) { return output; }
/// #         std::thread::park();
/// #     }
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct DurableFuture<'a> {
    log: LogRef<'a>,
    lsn: Lsn,
    synced: bool,
    /// The registration in the waker slots (0: none yet).
    id: u64,
    /// An error found before the first poll (an LSN past the end).
    early: Option<Error>,
    done: bool,
    /// When it was made, for `commit_wait_us` (none for `Buffered`, which
    /// `wait` does not count either).
    started: Option<Moment>,
}

impl std::fmt::Debug for DurableFuture<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableFuture").field("lsn", &self.lsn).field("synced", &self.synced).finish_non_exhaustive()
    }
}

impl<'a> DurableFuture<'a> {
    pub(crate) fn new(log: LogRef<'a>, lsn: Lsn, durability: Durability) -> Self {
        let ((lsn, synced), early) = match log.async_target(lsn, durability) {
            Ok(target) => (target, None),
            Err(error) => ((lsn, false), Some(error)),
        };
        let started = log.count_async_request(durability);
        DurableFuture { log, lsn, synced, id: 0, early, done: false, started }
    }

    /// Done with `outcome`: the wait counted as `wait`'s are.
    fn finish(&mut self, outcome: Result<()>) -> Poll<Result<()>> {
        self.done = true;
        record_async_wait(self.log.core(), self.started);
        Poll::Ready(outcome)
    }
}

impl Future for DurableFuture<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        if let Some(error) = this.early.take() {
            return this.finish(Err(error));
        }
        let completion = Completion::Waker(context.waker().clone());
        match this.log.register_async((this.lsn, this.synced), &mut this.id, completion) {
            Some((outcome, _)) => this.finish(outcome),
            // The log threads' passes complete it.
            None => Poll::Pending,
        }
    }
}

impl Drop for DurableFuture<'_> {
    fn drop(&mut self) {
        if self.id != 0 && !self.done {
            drop(self.log.core().stages.cancel_async(self.lsn, self.synced, self.id));
        }
    }
}

/// Records a finished asynchronous wait, made at `started`, in
/// `commit_wait_us` (none: a `Buffered` one, which `wait` does not count
/// either), on whichever thread finished it. Not in the wait time
/// `Pipeline::Auto` weighs: while futures wait, the log threads run whatever
/// Auto would choose (INV-27).
fn record_async_wait(core: &Core, started: Option<Moment>) {
    if let Some(started) = started {
        core.metrics.commit_wait_us.record_us(Moment::now().ns_since(started) / 1000);
    }
}

impl Log {
    /// Waits for `lsn` without blocking a thread: a future completed by the
    /// log thread whose write or fdatasync covers `lsn` ([DESIGN](crate::docs::design)
    /// §1.14). The same promise as [`Log::wait`]; a poisoned log completes it
    /// with the poison, `close` and `Drop` with what they synced or
    /// `Error::Closed`.
    ///
    /// While such waiters exist, the log threads do the writes and syncs
    /// (`Pipeline::Dedicated`) whatever the pipeline setting: an executor's
    /// thread does not block in `write` or `fdatasync` for a future. A log
    /// set to `Pipeline::GroupCommit` goes back to it once no future has
    /// waited for 100 ms. One exception (INV-38): a future alone (no other
    /// asynchronous waiter) on a device whose write + sync takes under
    /// 20 µs, on a log not set to `Pipeline::Dedicated`, does that pass
    /// itself at its first poll — shorter than the hand-offs it saves.
    pub fn wait_async(&self, lsn: Lsn, durability: Durability) -> DurableFuture<'_> {
        DurableFuture::new(LogRef::Borrowed(self), lsn, durability)
    }

    /// [`wait_async`](Log::wait_async) on a shared log: the future holds
    /// its own `Arc` (and keeps the log open until it completes or is
    /// dropped), so it can be stored — in a struct, a `FuturesUnordered`, a
    /// hand-written future — beside the `Arc`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use redolog::{Config, Durability, DurableFuture, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let log = Arc::new(log);
    /// let end = log.append(b"acknowledge me").unwrap();
    /// let pending: Vec<DurableFuture<'static>> = vec![log.wait_async_owned(end, Durability::Synced)];
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// for future in pending {
    ///     runtime.block_on(future).unwrap();
    /// }
    /// assert!(log.durable_lsn() >= end);
    /// ```
    pub fn wait_async_owned(self: &Arc<Self>, lsn: Lsn, durability: Durability) -> DurableFuture<'static> {
        DurableFuture::new(LogRef::Shared(Arc::clone(self)), lsn, durability)
    }

    /// Appends `record` and waits for `durability` without blocking a thread:
    /// `append` + `wait_async`.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let end = runtime.block_on(log.commit_async(b"no thread parked for me", Durability::Synced)).unwrap();
    /// assert!(log.durable_lsn() >= end);
    /// ```
    pub async fn commit_async(&self, record: &[u8], durability: Durability) -> Result<Lsn> {
        let end = self.append(record)?;
        self.wait_async(end, durability).await?;
        Ok(end)
    }

    /// Calls `callback` once `lsn` has `durability` (or with the error that
    /// means it never will): for callback-style users such as a consensus
    /// engine's log store. If `lsn` is covered already, `callback` runs at
    /// once on the calling thread; otherwise on the log thread whose pass
    /// covered it, under its role — so it must be short, must not block and
    /// must not call this log's waiting methods (`wait`, `commit`,
    /// `checkpoint`, `close`): hand the result to another thread or a channel.
    ///
    /// ```
    /// # use redolog::{Config, Durability, Log};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (log, _) = Log::open(dir.path(), Config::default().with_capacity_bytes(1 << 20)).unwrap();
    /// let (sender, receiver) = std::sync::mpsc::channel();
    /// let end = log.append(b"tell me when").unwrap();
    /// log.on_durable(end, Durability::Synced, move |result| sender.send(result).unwrap());
    /// assert!(receiver.recv().unwrap().is_ok());
    /// assert!(log.durable_lsn() >= end);
    /// ```
    pub fn on_durable(&self, lsn: Lsn, durability: Durability, callback: impl FnOnce(Result<()>) + Send + 'static) {
        let started = self.count_async_request(durability);
        let target = match self.async_target(lsn, durability) {
            Ok(target) => target,
            Err(error) => {
                record_async_wait(self.core(), started);
                return callback(Err(error));
            }
        };
        // Counted as `wait`'s are, on whichever thread completes it.
        let core = self.core_arc();
        let callback = move |outcome| {
            record_async_wait(&core, started);
            callback(outcome);
        };
        let completion = Completion::Callback(Box::new(callback));
        // Pending: a pass calls it; finished without it: a notifier took it
        // and calls it.
        if let Some((outcome, Some(Completion::Callback(callback)))) = self.register_async(target, &mut 0, completion) {
            callback(outcome);
        }
    }

    /// Counts an asynchronous wait as `wait` counts its calls
    /// (`log_write_requests`): `Written` and `Synced` only. Returns when it
    /// started, for [`record_async_wait`].
    fn count_async_request(&self, durability: Durability) -> Option<Moment> {
        (durability != Durability::Buffered).then(|| {
            self.core().metrics.write_requests.add(1);
            Moment::now()
        })
    }

    /// What an asynchronous wait for `lsn` with `durability` waits for:
    /// `(lsn, synced)` for `Stages::wait_async` (`Buffered` needs nothing: LSN
    /// 0, covered at once after the poison check), or the error for an LSN
    /// past the end.
    fn async_target(&self, lsn: Lsn, durability: Durability) -> Result<(Lsn, bool)> {
        self.core().check_appended(lsn)?;
        Ok(match durability {
            Durability::Buffered => (Lsn(0), false),
            Durability::Written => (lsn, false),
            Durability::Synced => (lsn, true),
        })
    }

    /// Registers an asynchronous waiter under `*id` (INV-26) and makes sure a
    /// log thread does its I/O (INV-27). `None`: pending, a pass completes
    /// it. `Some`: finished now — the outcome, and the completion back unless
    /// a notifier took it (and completes it itself).
    fn register_async(
        &self,
        (lsn, synced): (Lsn, bool),
        id: &mut u64,
        completion: Completion<Error>,
    ) -> Option<(Result<()>, Option<Completion<Error>>)> {
        let stages = &self.core().stages;
        // INV-38: alone on a fast device, waiting on this thread (leading
        // the pass, or parked for at most a fast pass) costs less than the
        // hand-offs to the log threads and back. It registers nothing, so a
        // log the log threads ran for a burst of waiters goes back to group
        // commit (INV-27 refuses while any is registered), unless the user
        // asked for them.
        if *id == 0 && lsn > Lsn(0) && self.core().async_waits_in_place() {
            let durability = if synced { Durability::Synced } else { Durability::Written };
            return Some((self.core().wait_durable(lsn, durability), Some(completion)));
        }
        match stages.wait_async(lsn, synced, id, completion) {
            AsyncWait::Ready(outcome, completion) => return Some((outcome, completion)),
            AsyncWait::Pending => {}
            AsyncWait::NeedsLogThreads => {
                if let Err(error) = self.start_async_io() {
                    return Some((Err(error), stages.cancel_async(lsn, synced, *id)));
                }
            }
        }
        // INV-39: the pass that completes it may wait for a notice an open
        // mini-transaction keeps, perhaps this thread's own.
        stages.nudge_ready(self.core());
        self.core().async_seen.store(true, Ordering::Relaxed);
        None
    }
}
