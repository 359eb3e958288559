//! Device profiles (`--device`): where the logs live and what an fdatasync
//! costs. `disk` uses the directory as it is; `tmpfs` uses /dev/shm, where
//! fdatasync is almost free (the CPU path); `sim:<latency>` stores on /dev/shm
//! and makes every fdatasync take a fixed latency, for every system through the
//! process-wide hook in `sync_hook`: a fast NVMe, modelled deterministically
//! (this machine's disk moved from 58 µs to 4 ms per fdatasync within ten
//! minutes).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

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

    /// A fresh work directory named `prefix…` on this device (under `dir`
    /// with `disk`), removed when dropped, with the device's fdatasync
    /// latency installed: where every benchmark command starts.
    pub fn work_dir(self, dir: Option<&Path>, prefix: &str) -> Result<tempfile::TempDir, super::BoxError> {
        let parent = self.parent_dir(dir)?;
        std::fs::create_dir_all(&parent)?;
        let work_dir = tempfile::Builder::new().prefix(prefix).tempdir_in(&parent)?;
        super::cleanup::remember(work_dir.path());
        self.install();
        Ok(work_dir)
    }

    /// Makes every fdatasync and fsync in this process take the profile's
    /// latency (`sim`), or the device's own time.
    pub fn install(self) {
        let latency = match self {
            Device::Sim { latency } => latency,
            Device::Disk | Device::Tmpfs => Duration::ZERO,
        };
        super::sync_hook::set_latency(latency);
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
    fn only_disk_takes_a_directory() {
        assert_eq!(Device::Tmpfs.parent_dir(None), Ok(PathBuf::from("/dev/shm")));
        assert!(Device::Tmpfs.parent_dir(Some(Path::new("/tmp"))).is_err());
        assert_eq!(Device::Disk.parent_dir(Some(Path::new("/tmp"))), Ok(PathBuf::from("/tmp")));
    }
}
