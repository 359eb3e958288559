//! The process-wide fdatasync hook: every `fdatasync` and `fsync` in the
//! benchmark process — redolog's, the baselines', and the peers', whose C and
//! Rust code calls libc — lands here. It counts the calls (so every system gets
//! a records-per-fsync figure, even a peer that keeps no counter) and, under
//! `--device sim:<latency>`, makes each successful call last `latency`: a fast
//! NVMe modelled deterministically, for all systems by one mechanism.
//!
//! How: this executable defines the C symbols `fdatasync` and `fsync`. The
//! static linker binds the executable's own references (Rust's std, rustix
//! with `use-libc`, raft-engine's nix) to these definitions, and exports them so
//! the dynamic linker binds shared libraries' references (librocksdb.so) to them
//! too. The hook makes the system call itself, so it never calls back into libc.
//!
//! It also counts by file descriptor, so a benchmark can say whose syncs they
//! were: [`calls_under`] sums, from a [`by_fd`] snapshot on, the calls on the
//! files now open under a directory (a Raft leader's store, say).

#![allow(unsafe_code)] // The two exported C functions and the raw system calls.

use std::num::NonZeroU64;
#[cfg(any(feature = "raft", test))]
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use libc::{c_int, c_long};

/// The latency every successful sync takes, in nanoseconds; 0: as the device.
static LATENCY_NANOS: AtomicU64 = AtomicU64::new(0);
/// fdatasync and fsync calls so far, successful or not.
static CALLS: AtomicU64 = AtomicU64::new(0);
/// File descriptors counted one by one; higher ones only in [`CALLS`].
const FDS: usize = 4096;
/// The calls by file descriptor.
static BY_FD: [AtomicU64; FDS] = [const { AtomicU64::new(0) }; FDS];

/// Makes every later fdatasync and fsync in this process last `latency`
/// (`Duration::ZERO`: the device's own time).
pub fn set_latency(latency: Duration) {
    LATENCY_NANOS.store(latency.as_nanos() as u64, Ordering::Relaxed);
}

/// fdatasync and fsync calls made by this process so far.
pub fn calls() -> u64 {
    CALLS.load(Ordering::Relaxed)
}

/// The calls so far by file descriptor: the snapshot [`calls_under`] counts
/// from (the cluster workloads count a leader's apart).
#[cfg(any(feature = "raft", test))]
pub fn by_fd() -> Vec<u64> {
    BY_FD.iter().map(|calls| calls.load(Ordering::Relaxed)).collect()
}

/// The calls since `since` (a [`by_fd`] snapshot) on the descriptors that
/// are now open on files under `dir`. Call it while those files are open.
#[cfg(any(feature = "raft", test))]
pub fn calls_under(dir: &Path, since: &[u64]) -> u64 {
    // /proc names files by their canonical paths.
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut calls = 0;
    for (fd, (now, before)) in by_fd().into_iter().zip(since).enumerate() {
        let made = now.saturating_sub(*before);
        if made > 0 && std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|path| path.starts_with(&dir)) {
            calls += made;
        }
    }
    calls
}

/// libc's `fdatasync(2)`, counted and with the simulated latency.
#[no_mangle]
pub extern "C" fn fdatasync(fd: c_int) -> c_int {
    hooked(libc::SYS_fdatasync, fd)
}

/// libc's `fsync(2)`, counted and with the simulated latency.
#[no_mangle]
pub extern "C" fn fsync(fd: c_int) -> c_int {
    hooked(libc::SYS_fsync, fd)
}

fn hooked(number: c_long, fd: c_int) -> c_int {
    let started = Instant::now();
    // SAFETY: fdatasync and fsync take one integer argument and read no memory
    // of this process; `syscall` sets errno on failure exactly as libc's
    // wrappers do.
    let result = unsafe { libc::syscall(number, fd) } as c_int;
    CALLS.fetch_add(1, Ordering::Relaxed);
    if let Some(calls) = usize::try_from(fd).ok().and_then(|fd| BY_FD.get(fd)) {
        calls.fetch_add(1, Ordering::Relaxed);
    }
    let latency = LATENCY_NANOS.load(Ordering::Relaxed);
    // A failed call returns at once: the caller reads errno, which a sleep
    // could overwrite.
    if result == 0 && latency > 0 {
        wait_until(started + Duration::from_nanos(latency));
    }
    result
}

/// Sleeps until `deadline`: an absolute-deadline sleep with 1 ns timer slack,
/// so it neither spins a core nor oversleeps by the default 50 µs slack.
fn wait_until(deadline: Instant) {
    let Some(left) = deadline.checked_duration_since(Instant::now()) else { return };
    thread_local! {
        static PRECISE: () = {
            let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        };
    }
    PRECISE.with(|()| {});
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let nanos = now.tv_nsec as u64 + left.as_nanos() as u64;
    let deadline = rustix::time::Timespec {
        tv_sec: now.tv_sec + (nanos / 1_000_000_000) as i64,
        tv_nsec: (nanos % 1_000_000_000) as _,
    };
    // EINTR only shortens the sleep; the latency is a model, not a promise.
    let _ = rustix::thread::clock_nanosleep_absolute(rustix::thread::ClockId::Monotonic, &deadline);
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;

    /// One test, because the latency is process-wide.
    #[test]
    fn every_sync_path_is_counted_and_takes_the_latency() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = File::create(dir.path().join("f")).expect("create");
        let syncs: [(&str, &dyn Fn()); 4] = [
            ("std sync_data", &|| file.sync_data().expect("sync_data")),
            ("std sync_all", &|| file.sync_all().expect("sync_all")),
            ("rustix fdatasync", &|| rustix::fs::fdatasync(&file).expect("fdatasync")),
            ("redolog FsStorage", &|| {
                use redolog::storage::Storage;
                let opened = redolog::storage::FsStorage.open_file(&dir.path().join("g"), true).expect("open");
                opened.sync_data().expect("sync_data");
            }),
        ];
        set_latency(Duration::from_micros(300));
        for (name, sync) in syncs {
            let (calls_before, started) = (calls(), Instant::now());
            sync();
            assert!(calls() > calls_before, "{name}: not counted");
            assert!(started.elapsed() >= Duration::from_micros(300), "{name}: {:?}", started.elapsed());
        }
        set_latency(Duration::ZERO);
        // Counted by descriptor too, for the files under a directory.
        let before = by_fd();
        file.sync_data().expect("sync_data");
        file.sync_data().expect("sync_data");
        assert_eq!(calls_under(dir.path(), &before), 2);
        assert_eq!(calls_under(&dir.path().join("elsewhere"), &before), 0);
        // A failed call keeps its errno.
        assert_eq!(fdatasync(-1), -1);
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
    }
}
