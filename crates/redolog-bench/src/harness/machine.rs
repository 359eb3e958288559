//! Facts about the machine and the benchmark directory: CPU, kernel, file
//! system, fdatasync latency, process CPU time.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::device::Device;

/// What the JSON report says about the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub filesystem: String,
    /// The device profile (`--device`): disk, tmpfs or sim:LATENCY.
    pub device: String,
    pub fdatasync_p50_us: f64,
    pub fdatasync_p99_us: f64,
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|line| line.strip_prefix("model name").and_then(|rest| rest.split(':').nth(1)))
        .map_or_else(|| "unknown".to_string(), |model| model.trim().to_string())
}

fn filesystem(dir: &Path) -> String {
    let Ok(stat) = rustix::fs::statfs(dir) else { return "unknown".into() };
    match stat.f_type as u64 {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        other => format!("0x{other:x}"),
    }
}

impl Machine {
    pub fn describe(dir: &Path, device: Device, fdatasync: &FdatasyncLatency) -> Self {
        let uname = rustix::system::uname();
        Machine {
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            kernel: uname.release().to_string_lossy().into_owned(),
            filesystem: filesystem(dir),
            device: device.to_string(),
            fdatasync_p50_us: fdatasync.percentile_us(0.50),
            fdatasync_p99_us: fdatasync.percentile_us(0.99),
        }
    }
}

/// The sorted latencies of `rounds` × (512-byte pwrite + fdatasync) on a
/// zero-filled file in `dir` under `device` — the device's cost of one durable
/// commit.
pub struct FdatasyncLatency {
    samples: Vec<Duration>,
}

impl FdatasyncLatency {
    pub fn percentile_us(&self, quantile: f64) -> f64 {
        let index = ((self.samples.len() - 1) as f64 * quantile).round() as usize;
        self.samples[index].as_secs_f64() * 1e6
    }

    /// "p50 … µs, p90 …, p99 …, max …".
    pub fn describe(&self) -> String {
        format!(
            "p50 {:.1} µs, p90 {:.1}, p99 {:.1}, max {:.1} ({} × 512-byte write + fdatasync)",
            self.percentile_us(0.5),
            self.percentile_us(0.9),
            self.percentile_us(0.99),
            self.percentile_us(1.0),
            self.samples.len()
        )
    }
}

/// Call after `Device::install`: the probe's fdatasync goes through the hook.
pub fn fdatasync_latency(dir: &Path, rounds: usize) -> std::io::Result<FdatasyncLatency> {
    let path = dir.join("fdatasync-probe");
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    file.write_all_at(&vec![0u8; rounds * 4096], 0)?;
    file.sync_all()?;
    let block = [0xA5u8; 512];
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        file.write_all_at(&block, (round * 4096) as u64)?;
        let started = Instant::now();
        file.sync_data()?;
        samples.push(started.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path)?;
    samples.sort();
    Ok(FdatasyncLatency { samples })
}

/// CPU time (user + system) the whole process has used.
pub fn process_cpu_time() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}
