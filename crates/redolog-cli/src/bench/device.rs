//! Device profiles (`--device`): where the logs live and what an fdatasync
//! costs. `disk` uses the directory as it is; `tmpfs` uses /dev/shm, where
//! fdatasync is almost free (the CPU path); `sim:<latency>` stores on /dev/shm
//! and makes every fdatasync take a fixed latency, for redolog in its storage
//! layer and for the baselines around their own fdatasync: a fast NVMe,
//! modelled deterministically (this machine's disk moved from 58 µs to 4 ms per
//! fdatasync within ten minutes).

use std::fmt;
use std::fs::File;
use std::io;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redolog::storage::{FsStorage, Storage, StorageFile};

/// A device profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The directory as it is (`--dir`, default the current one).
    Disk,
    /// /dev/shm: the CPU path.
    Tmpfs,
    /// /dev/shm with every fdatasync taking `latency`.
    Sim { latency: Duration },
}

impl FromStr for Device {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "disk" => Ok(Device::Disk),
            "tmpfs" => Ok(Device::Tmpfs),
            _ => {
                let latency = text.strip_prefix("sim:").ok_or_else(|| {
                    format!("unknown device {text:?}: expected disk, tmpfs or sim:<latency> (sim:100us)")
                })?;
                let digits = latency.trim_end_matches(|c: char| c.is_ascii_alphabetic());
                let value: u64 = digits.parse().map_err(|_| format!("bad latency {latency:?} in {text:?}"))?;
                let latency = match &latency[digits.len()..] {
                    "ns" => Duration::from_nanos(value),
                    "us" | "µs" => Duration::from_micros(value),
                    "ms" => Duration::from_millis(value),
                    unit => return Err(format!("bad unit {unit:?} in {text:?}: use ns, us or ms")),
                };
                Ok(Device::Sim { latency })
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Disk => formatter.write_str("disk"),
            Device::Tmpfs => formatter.write_str("tmpfs"),
            Device::Sim { latency } => write!(formatter, "sim:{}us", latency.as_micros()),
        }
    }
}

impl Device {
    /// The directory the benchmark's work directory goes under.
    pub fn parent_dir(self, dir: Option<&Path>) -> Result<PathBuf, String> {
        match (self, dir) {
            (Device::Disk, dir) => Ok(dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf)),
            (_, None) => Ok(PathBuf::from("/dev/shm")),
            (_, Some(dir)) => Err(format!("--dir {} applies to --device disk only", dir.display())),
        }
    }

    /// fdatasync `file`, taking the profile's latency.
    pub fn sync(self, file: &File) -> io::Result<()> {
        let started = Instant::now();
        file.sync_data()?;
        self.wait_out(started);
        Ok(())
    }

    /// The storage redolog runs on under this profile.
    pub fn storage(self) -> SimStorage {
        SimStorage { device: self }
    }

    /// Under `sim`, sleeps until `latency` after `started` (an absolute-deadline
    /// sleep with 1 ns timer slack, so it neither spins a core nor oversleeps by
    /// the default 50 µs slack).
    fn wait_out(self, started: Instant) {
        let Device::Sim { latency } = self else { return };
        let Some(left) = latency.checked_sub(started.elapsed()) else { return };
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
}

/// The real file system, with the device profile's fdatasync latency.
#[derive(Clone, Copy, Debug)]
pub struct SimStorage {
    device: Device,
}

#[derive(Debug)]
struct SimFile {
    inner: Arc<dyn StorageFile>,
    device: Device,
}

impl Storage for SimStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        FsStorage.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        FsStorage.list_dir(dir)
    }
    fn open_file(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inner = FsStorage.open_file(path, create)?;
        Ok(Arc::new(SimFile { inner, device: self.device }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        FsStorage.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        FsStorage.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        FsStorage.sync_dir(dir)
    }
}

impl StorageFile for SimFile {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(bufs, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        let started = Instant::now();
        self.inner.sync_data()?;
        self.device.wait_out(started);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_print() {
        assert_eq!("disk".parse::<Device>(), Ok(Device::Disk));
        assert_eq!("tmpfs".parse::<Device>(), Ok(Device::Tmpfs));
        let sim: Device = "sim:100us".parse().expect("sim");
        assert_eq!(sim, Device::Sim { latency: Duration::from_micros(100) });
        assert_eq!(sim.to_string(), "sim:100us");
        assert_eq!("sim:2ms".parse::<Device>(), Ok(Device::Sim { latency: Duration::from_millis(2) }));
        assert!("sim:fast".parse::<Device>().is_err());
        assert!("sim:100s".parse::<Device>().is_err());
        assert!("nvme".parse::<Device>().is_err());
    }

    #[test]
    fn a_simulated_fdatasync_takes_at_least_its_latency() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = File::create(dir.path().join("f")).expect("create");
        let device = Device::Sim { latency: Duration::from_micros(300) };
        for _ in 0..5 {
            let started = Instant::now();
            device.sync(&file).expect("sync");
            assert!(started.elapsed() >= Duration::from_micros(300), "{:?}", started.elapsed());
        }
    }

    #[test]
    fn only_disk_takes_a_directory() {
        assert_eq!(Device::Tmpfs.parent_dir(None), Ok(PathBuf::from("/dev/shm")));
        assert!(Device::Tmpfs.parent_dir(Some(Path::new("/tmp"))).is_err());
        assert_eq!(Device::Disk.parent_dir(Some(Path::new("/tmp"))), Ok(PathBuf::from("/tmp")));
    }
}
