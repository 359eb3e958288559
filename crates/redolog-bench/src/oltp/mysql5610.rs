//! `--scenario seed-convoy`'s copy of MySQL 5.6.10's free check and page
//! cleaner (MySQL bug #68555), run on the page store in place of its own
//! (`redolog_pagestore::SpacePolicy`). The engine never runs this: it is
//! here to show the convoy next to the engine's free check.
//!
//! What the copy keeps of 5.6.10 (`log_close`, `log_free_check`,
//! `log_checkpoint_margin`, `log_preflush_pool_modified_pages`, the page
//! cleaner, `fil_flush`), with the engine's free-check mark as 5.6's
//! modified-age sync mark:
//! - a global `check_flush_or_checkpoint` flag, set past the sync mark,
//!   sends every statement into the slow path;
//! - there each thread flushes, past the sync mark, every instance whose
//!   batch is not running up to twice the overshoot, waits for every
//!   instance's batch to end (`buf_flush_wait_batch_end(NULL,
//!   BUF_FLUSH_LIST)`) and — the line the bug is about — sets the flag
//!   again if it found a batch running; past the checkpoint marks it
//!   checkpoints, synchronously past the last;
//! - one page cleaner, flushing the instances in turn at the inherited
//!   priority, its batch the engine's budget (`io_capacity`, up to ten
//!   times that as the log fills);
//! - `fil_flush`'s sleep: a batch or a checkpoint whose data-file sync finds
//!   another in progress sleeps 20 ms and looks again. The bug's reporter
//!   found every thread of the convoy in that sleep (filed as MySQL bug
//!   #68588, removed in 5.6.12). The engine writes and syncs a batch in one
//!   call, so the copy sleeps before the batch rather than between its
//!   writes and its sync.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redolog::Lsn;
use redolog_pagestore::{Result, Space, SpacePolicy};

/// `fil_flush`'s sleep while another sync of the file is in progress.
const FIL_FLUSH_SLEEP: Duration = Duration::from_millis(20);

/// The copy's shared state: the flag, the instances' running batches, and
/// whether a batch is syncing the data file.
#[derive(Debug)]
pub(super) struct Mysql5610 {
    check_flush_or_checkpoint: AtomicBool,
    /// Which instances have a flush batch running (`buf_flush_start` /
    /// `buf_flush_end`).
    batches: Mutex<Vec<bool>>,
    batch_ended: Condvar,
    /// `fil_node_t::n_pending_flushes` of the data file, as a flag: the
    /// copy lets one batch at a time write and sync.
    syncing: Mutex<bool>,
}

impl Mysql5610 {
    pub(super) fn new(instances: usize) -> Mysql5610 {
        Mysql5610 {
            check_flush_or_checkpoint: AtomicBool::new(false),
            batches: Mutex::new(vec![false; instances]),
            batch_ended: Condvar::new(),
            syncing: Mutex::new(false),
        }
    }

    fn start_batch(&self, instance: usize) -> bool {
        !std::mem::replace(&mut self.batches.lock()[instance], true)
    }

    fn end_batch(&self, instance: usize) {
        self.batches.lock()[instance] = false;
        self.batch_ended.notify_all();
    }

    /// `fil_flush`'s wait: while another sync of the data file is in
    /// progress, 20 ms sleeps. Returns with the data file's sync taken when
    /// `take`.
    fn fil_flush(&self, take: bool) {
        loop {
            let mut syncing = self.syncing.lock();
            if !*syncing {
                *syncing = take;
                return;
            }
            drop(syncing);
            std::thread::sleep(FIL_FLUSH_SLEEP);
        }
    }

    /// One batch of `instance` below `limit`, behind `fil_flush`'s sleep.
    fn batch(&self, space: &Space<'_>, instance: usize, pages: usize, limit: Lsn) -> Result<usize> {
        self.fil_flush(true);
        let flushed = space.flush_batch(instance, pages, limit);
        *self.syncing.lock() = false;
        flushed
    }
}

/// 5.6's marks (`log_calc_max_ages`), from the engine's free-check mark
/// taken as the modified-age sync mark: 15/16 of the margin.
struct Marks {
    modified_sync: u64,
    checkpoint_async: u64,
    checkpoint_max: u64,
}

impl Marks {
    fn of(space: &Space<'_>) -> Marks {
        let margin = space.sync_age() / 15 * 16;
        Marks { modified_sync: margin - margin / 16, checkpoint_async: margin - margin / 32, checkpoint_max: margin }
    }
}

/// The oldest modification, and the log's end less it (0 when nothing is
/// dirty): 5.6's modified age.
fn modified_age(space: &Space<'_>) -> (Lsn, u64) {
    let oldest = space.oldest_modification();
    (oldest, space.end_lsn().as_u64().saturating_sub(oldest.as_u64()))
}

impl Mysql5610 {
    /// `log_checkpoint_margin`; returns whether the thread had to flush or
    /// checkpoint synchronously (a free-check wait).
    fn checkpoint_margin(&self, space: &Space<'_>, marks: &Marks) -> Result<bool> {
        let mut waited = false;
        while self.check_flush_or_checkpoint.load(Ordering::Relaxed) {
            let (oldest, age) = modified_age(space);
            // A flush is urgent: twice the overshoot, synchronously.
            let advance = if age > marks.modified_sync { 2 * (age - marks.modified_sync) } else { 0 };
            let checkpoint_age = space.checkpoint_age();
            let checkpoint_sync = checkpoint_age > marks.checkpoint_max;
            if !checkpoint_sync {
                self.check_flush_or_checkpoint.store(false, Ordering::Relaxed);
            }
            let checkpoint = checkpoint_sync || checkpoint_age > marks.checkpoint_async;
            if advance > 0 {
                waited = true;
                if !self.preflush(space, Lsn::from_u64(oldest.as_u64() + advance))? {
                    // The line MySQL bug #68555 is about: another thread's
                    // batch was running, and every other thread's next
                    // statement now takes this path too.
                    self.check_flush_or_checkpoint.store(true, Ordering::Relaxed);
                    continue;
                }
            }
            if checkpoint {
                // `log_checkpoint` syncs the data files first
                // (`fil_flush_file_spaces`), behind the same sleep.
                self.fil_flush(false);
                space.checkpoint()?;
                if checkpoint_sync {
                    waited = true;
                    continue;
                }
            }
            break;
        }
        Ok(waited)
    }

    /// `log_preflush_pool_modified_pages`: every instance's pages below
    /// `target` (`buf_flush_list(ULINT_MAX, target)`), an instance whose
    /// batch is running skipped and the call failed; then a wait for every
    /// instance's batch to end (`buf_flush_wait_batch_end(NULL,
    /// BUF_FLUSH_LIST)`). Returns whether no batch was found running.
    fn preflush(&self, space: &Space<'_>, target: Lsn) -> Result<bool> {
        let mut success = true;
        for instance in 0..space.instances() {
            if !self.start_batch(instance) {
                success = false;
                continue;
            }
            let flushed = self.batch(space, instance, usize::MAX, target);
            self.end_batch(instance);
            flushed?;
        }
        let mut batches = self.batches.lock();
        while batches.iter().any(|running| *running) {
            self.batch_ended.wait(&mut batches);
        }
        Ok(success)
    }
}

impl SpacePolicy for Mysql5610 {
    /// `log_free_check`: the slow path only when the flag is set.
    fn free_check(&self, space: &Space<'_>) -> Result<()> {
        let marks = Marks::of(space);
        // `log_close`'s part, which every mini-transaction ran: past the
        // modified-age sync mark, every thread must look.
        let checkpoint_age = space.checkpoint_age();
        if checkpoint_age > marks.modified_sync
            && (modified_age(space).1 > marks.modified_sync || checkpoint_age > marks.checkpoint_async)
        {
            self.check_flush_or_checkpoint.store(true, Ordering::Relaxed);
        }
        if !self.check_flush_or_checkpoint.load(Ordering::Relaxed) {
            return Ok(());
        }
        space.count_slow_path();
        let started = Instant::now();
        if self.checkpoint_margin(space, &marks)? {
            space.count_wait(started);
        }
        Ok(())
    }

    /// 5.6 had one page cleaner for every instance.
    fn cleaners(&self, _instances: usize) -> usize {
        1
    }

    /// The instances in turn, each a batch the free check finds running.
    fn clean(&self, space: &Space<'_>, _cleaner: usize, _cleaners: usize) -> Result<()> {
        let instances = space.instances();
        let pages = space.pages_per_tick(instances);
        for instance in 0..instances {
            if self.start_batch(instance) {
                let flushed = self.batch(space, instance, pages, Lsn::from_u64(u64::MAX));
                self.end_batch(instance);
                flushed?;
            }
        }
        Ok(())
    }

    /// 5.6's page cleaner ran at the priority it inherited. (Raised, as
    /// the engine's are, it changed nothing measurable: at this
    /// `io_capacity` its budget, not its CPU, limits it.)
    fn raise_priority(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use redolog_pagestore::{Options, Outcome, PageStore, Row, SpacePolicy, C_BYTES, PAD_BYTES};

    use super::Mysql5610;

    /// The copy makes room as the engine's free check does: statements on a
    /// log far smaller than their redo all finish (within a bound, not a
    /// hang), through its slow path, and the rows are what they wrote.
    #[test]
    fn the_copy_of_5_6_10_makes_room_in_a_small_log() {
        const ROWS: u64 = 400;
        const THREADS: u64 = 4;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = Options {
            buffer_pool_instances: 8,
            io_capacity: 1,
            space_policy: Some(Arc::new(Mysql5610::new(8)) as Arc<dyn SpacePolicy>),
            ..Options::default()
        };
        options.log.capacity_bytes = 1 << 20;
        let (mut store, _) = PageStore::open(dir.path(), options).expect("open");
        store.create_table().expect("table");
        for id in 0..ROWS {
            store.table(0).insert(&Row { id, k: id, c: [0; C_BYTES], pad: [0; PAD_BYTES] }).expect("load");
        }
        let store = Arc::new(store);
        let (done, finished) = std::sync::mpsc::channel();
        for thread in 0..THREADS {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                for round in 0..2000u64 {
                    store.free_check().expect("free check");
                    let id = (round * THREADS + thread) % ROWS;
                    let c = [(round % 251) as u8; C_BYTES];
                    assert_eq!(store.table(0).update_c(id, &c).expect("update").0, Outcome::Done);
                }
                let _ = done.send(());
            });
        }
        for _ in 0..THREADS {
            finished.recv_timeout(Duration::from_secs(120)).expect("the statements stalled: the copy made no room");
        }
        let stats = store.stats();
        assert!(stats.free_check_slow_paths > 0 && stats.checkpoints > 0, "{stats:?}");
        assert!(stats.checkpoint_age < 1 << 20, "{stats:?}");
        // Thread `id % THREADS` owns each id: its value is that thread's
        // last round that wrote it.
        for id in 0..ROWS {
            let last = (0..2000u64).rev().find(|round| (round * THREADS + id % THREADS) % ROWS == id);
            let row = store.table(0).get(id).expect("get").expect("row");
            let expected = last.map_or(0, |round| (round % 251) as u8);
            assert_eq!(row.c, [expected; C_BYTES], "row {id}");
        }
    }
}
