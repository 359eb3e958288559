//! Goal: futures and callbacks get the same promise as `wait` — complete only
//! once the covering write or fdatasync returned Ok, with the poison if it
//! failed, at close — with no thread parked per waiter (docs/DESIGN.md §1.14,
//! INV-26, INV-27).
//! Method: many tasks on a Tokio runtime with 2 workers; threads and tasks on
//! one group-commit log; a storage whose fdatasync waits at a gate, so futures
//! are provably pending when they are dropped, poisoned or closed.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use redolog::storage::{MemStorage, Storage, StorageFile};
use redolog::{Config, Durability, Error, Log, Pipeline};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

fn config(pipeline: Pipeline) -> Config {
    common::config(4096, 1 << 20).with_pipeline(pipeline)
}

#[test]
fn many_tasks_commit_through_futures() {
    for pipeline in [Pipeline::GroupCommit, Pipeline::Dedicated, Pipeline::Auto] {
        let (log, _) = Log::open_with_storage(Path::new("/log"), config(pipeline), MemStorage::new()).expect("open");
        let log = Arc::new(log);
        let ends = runtime().block_on(async {
            let tasks: Vec<_> = (0..256u32)
                .map(|task| {
                    let log = log.clone();
                    tokio::spawn(async move {
                        let mut ends = Vec::new();
                        for index in 0..20u32 {
                            let durability = if index % 4 == 0 { Durability::Written } else { Durability::Synced };
                            let record = [task.to_le_bytes(), index.to_le_bytes()].concat();
                            let end = log.commit_async(&record, durability).await.expect("commit_async");
                            // The promise: covered when the future completes.
                            let metrics = log.metrics();
                            let covered = match durability {
                                Durability::Synced => metrics.lsns.log_lsn_last_flush,
                                _ => metrics.lsns.log_lsn_last_write,
                            };
                            assert!(covered >= end.as_u64(), "{pipeline:?}: completed before its {durability:?}");
                            ends.push(end);
                        }
                        ends
                    })
                })
                .collect();
            let mut ends = Vec::new();
            for task in tasks {
                ends.extend(task.await.expect("task"));
            }
            ends
        });
        assert_eq!(ends.len(), 256 * 20);
        let metrics = log.metrics();
        assert_eq!(metrics.async_waiters, 0, "{pipeline:?}: a waiter left registered");
        assert_eq!(metrics.timeouts_with_work(), 0, "{pipeline:?}: a lost wake-up");
    }
}

#[test]
fn threads_and_futures_share_a_group_commit_log() {
    let (log, _) =
        Log::open_with_storage(Path::new("/log"), config(Pipeline::GroupCommit), MemStorage::new()).expect("open");
    let log = Arc::new(log);
    let runtime = runtime();
    std::thread::scope(|scope| {
        for thread in 0..4u8 {
            let log = &log;
            scope.spawn(move || {
                for index in 0..300u32 {
                    log.commit(&[thread; 40], Durability::Synced).expect("thread commit");
                    let _ = index;
                }
            });
        }
        runtime.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let log = log.clone();
                    tokio::spawn(async move {
                        for _ in 0..30 {
                            log.commit_async(b"task", Durability::Synced).await.expect("task commit");
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("task");
            }
        });
    });
    // INV-27: the futures ran on the log threads; with none for 100 ms, the
    // log goes back to the pipeline it was set to at its next write pass.
    let mut back = false;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(50));
        log.commit(b"tick", Durability::Synced).expect("commit");
        if log.active_pipeline() == Pipeline::GroupCommit {
            back = true;
            break;
        }
    }
    assert!(back, "still {:?} with no asynchronous waiter", log.active_pipeline());
    assert_eq!(log.metrics().timeouts_with_work(), 0, "a lost wake-up");
}

/// A storage whose fdatasync waits while the gate is closed.
#[derive(Clone, Debug)]
struct GatedStorage<S = MemStorage> {
    inner: S,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl GatedStorage {
    fn new() -> Self {
        GatedStorage::over(MemStorage::new())
    }
}

impl<S> GatedStorage<S> {
    fn over(inner: S) -> Self {
        GatedStorage { inner, gate: Arc::new((Mutex::new(true), Condvar::new())) }
    }

    fn set_open(&self, open: bool) {
        *self.gate.0.lock().expect("gate") = open;
        self.gate.1.notify_all();
    }
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn StorageFile>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl StorageFile for GatedFile {
    fn size(&self) -> std::io::Result<u64> {
        self.inner.size()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(bufs, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        let (lock, opened) = &*self.gate;
        let mut open = lock.lock().expect("gate");
        while !*open {
            open = opened.wait(open).expect("gate");
        }
        drop(open);
        self.inner.sync_data()
    }
}

impl<S: Storage> Storage for GatedStorage<S> {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list_dir(dir)
    }
    fn open_file(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open_file(path, create)?;
        Ok(Arc::new(GatedFile { inner, gate: self.gate.clone() }))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

/// Counts its wake-ups.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once<F: std::future::Future>(future: std::pin::Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(waker))
}

#[test]
fn a_pending_future_dropped_withdraws_and_others_complete() {
    let storage = GatedStorage::new();
    let (log, _) =
        Log::open_with_storage(Path::new("/log"), config(Pipeline::Dedicated), storage.clone()).expect("open");
    storage.set_open(false);
    let first = log.append(b"first").expect("append");
    let second = log.append(b"second").expect("append");
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    let mut dropped = Box::pin(log.wait_async(first, Durability::Synced));
    let mut kept = Box::pin(log.wait_async(second, Durability::Synced));
    assert!(poll_once(dropped.as_mut(), &waker).is_pending(), "the sync is held at the gate");
    assert!(poll_once(kept.as_mut(), &waker).is_pending());
    assert_eq!(log.metrics().async_waiters, 2);
    drop(dropped);
    assert_eq!(log.metrics().async_waiters, 1, "a dropped future withdraws its registration");
    storage.set_open(true);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while counter.0.load(Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "the sync never woke the kept future");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(matches!(poll_once(kept.as_mut(), &waker), Poll::Ready(Ok(()))));
    assert!(log.durable_lsn() >= second);
    assert_eq!(log.metrics().async_waiters, 0);
}

#[test]
fn a_failed_sync_completes_every_pending_future_and_callback_with_the_poison() {
    use redolog::storage::{FaultKind, FaultyStorage};
    let memory = MemStorage::new();
    let dir = Path::new("/log");
    Log::open_with_storage(dir, config(Pipeline::Dedicated), memory.clone()).expect("create").0.close().expect("close");
    // Open fdatasyncs what it recovered (INV-45): count those syncs on an
    // equal open, so that the fault lands on the workload's first fdatasync,
    // once the gate opens.
    let counting = FaultyStorage::new(memory.clone(), FaultKind::Sync, u64::MAX, false);
    let (counted, _) = Log::open_with_storage(dir, config(Pipeline::Dedicated), counting.clone()).expect("count");
    let syncs_of_open = counting.attempted();
    counted.close().expect("close");
    let storage = GatedStorage::over(FaultyStorage::new(memory, FaultKind::Sync, syncs_of_open + 1, true));
    let (log, _) = Log::open_with_storage(dir, config(Pipeline::Dedicated), storage.clone()).expect("open");
    storage.set_open(false);
    let (sender, receiver) = std::sync::mpsc::channel();
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    let mut futures = Vec::new();
    for index in 0..16u8 {
        let end = log.append(&[index; 100]).expect("append");
        let sender = sender.clone();
        log.on_durable(end, Durability::Synced, move |result| sender.send(result).expect("send"));
        let mut future = Box::pin(log.wait_async(end, Durability::Synced));
        assert!(poll_once(future.as_mut(), &waker).is_pending(), "the sync is held at the gate");
        futures.push(future);
    }
    assert_eq!(log.metrics().async_waiters, 32);
    storage.set_open(true);
    for _ in 0..16 {
        let result = receiver.recv_timeout(Duration::from_secs(10)).expect("every callback is called");
        assert!(matches!(result, Err(Error::Poisoned { .. })), "{result:?}");
    }
    for mut future in futures {
        let result = poll_once(future.as_mut(), &waker);
        assert!(matches!(result, Poll::Ready(Err(Error::Poisoned { .. }))), "{result:?}");
    }
    assert!(counter.0.load(Ordering::SeqCst) >= 16, "every future was woken");
    assert_eq!(log.metrics().async_waiters, 0);
}

#[test]
fn close_completes_the_pending_futures() {
    let storage = GatedStorage::new();
    let (log, _) = Log::open_with_storage(Path::new("/log"), config(Pipeline::Auto), storage.clone()).expect("open");
    storage.set_open(false);
    let end = log.append(b"pending at close").expect("append");
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    let mut future = Box::pin(log.wait_async(end, Durability::Synced));
    assert!(poll_once(future.as_mut(), &waker).is_pending());
    let (sender, receiver) = std::sync::mpsc::channel();
    log.on_durable(end, Durability::Synced, move |result| sender.send(result).expect("send"));
    std::thread::scope(|scope| {
        let closing = scope.spawn(|| log.close());
        std::thread::sleep(Duration::from_millis(20));
        storage.set_open(true);
        closing.join().expect("close thread").expect("close");
    });
    assert!(matches!(poll_once(future.as_mut(), &waker), Poll::Ready(Ok(()))), "close synced it");
    assert!(receiver.recv_timeout(Duration::from_secs(10)).expect("callback").is_ok());
    assert!(counter.0.load(Ordering::SeqCst) >= 1);
    // After close, a new wait is an error, not a hang.
    let late = runtime().block_on(log.wait_async(end, Durability::Synced));
    assert!(late.is_ok(), "already covered: {late:?}");
}

#[test]
fn out_of_range_and_buffered() {
    let (log, _) = Log::open_with_storage(Path::new("/log"), config(Pipeline::Auto), MemStorage::new()).expect("open");
    let end = log.append(b"x").expect("append");
    let past = redolog::Lsn::from_u64(end.as_u64() + 100);
    let runtime = runtime();
    assert!(matches!(runtime.block_on(log.wait_async(past, Durability::Synced)), Err(Error::LsnOutOfRange { .. })));
    assert!(runtime.block_on(log.wait_async(end, Durability::Buffered)).is_ok());
    let (sender, receiver) = std::sync::mpsc::channel();
    log.on_durable(past, Durability::Written, move |result| sender.send(result).expect("send"));
    assert!(matches!(receiver.recv().expect("called at once"), Err(Error::LsnOutOfRange { .. })));
}
