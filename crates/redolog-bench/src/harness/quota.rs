//! `--cpu-quota N`: run the benchmark under a CFS quota of N CPUs, the setting
//! of the CPU-quota spinning post (a container limited to fewer CPUs than its
//! affinity mask shows).
//!
//! The process moves itself into a new cgroup with the quota: cgroup v1's `cpu`
//! hierarchy or cgroup v2 at the standard mount points. That needs the right to
//! create cgroups (root, or a delegated subtree). Where the machine does not allow
//! it, the process is pinned to `ceil(N)` CPUs instead and says so: a weaker
//! setting, since the affinity mask then shows the limit.

use std::fs;
use std::path::{Path, PathBuf};

use super::BoxError;

/// CFS period used for the quota.
const PERIOD_US: u64 = 100_000;

/// The applied limit; dropping it moves the process back and removes the cgroup.
pub struct CpuQuota {
    /// The cgroup created, and the `cgroup.procs` to return to.
    cgroup: Option<(PathBuf, PathBuf)>,
    pub description: String,
}

impl CpuQuota {
    /// Limits this process to `cpus` CPUs. Call before starting any thread.
    pub fn apply(cpus: f64) -> Result<CpuQuota, BoxError> {
        if cpus.is_nan() || cpus <= 0.0 {
            return Err(format!("--cpu-quota {cpus} must be positive").into());
        }
        let quota_us = (cpus * PERIOD_US as f64).round() as u64;
        let name = format!("redolog-bench-{}", std::process::id());
        let mut refusals = Vec::new();
        for (root, v2) in
            [("/sys/fs/cgroup/cpu", false), ("/sys/fs/cgroup/cpu,cpuacct", false), ("/sys/fs/cgroup", true)]
        {
            let root = Path::new(root);
            let usable =
                if v2 { root.join("cgroup.controllers").exists() } else { root.join("cpu.cfs_quota_us").exists() };
            if !usable {
                continue;
            }
            match enter_cgroup(root, &name, v2, quota_us) {
                Ok(dir) => {
                    let version = if v2 { "v2" } else { "v1" };
                    return Ok(CpuQuota {
                        cgroup: Some((dir.clone(), root.join("cgroup.procs"))),
                        description: format!(
                            "CFS quota {quota_us} µs per {PERIOD_US} µs ({cpus} CPUs) in cgroup {version} {}",
                            dir.display()
                        ),
                    });
                }
                Err(error) => refusals.push(format!("{}: {error}", root.display())),
            }
        }
        let pinned = (cpus.ceil() as usize).max(1);
        let mut set = rustix::thread::CpuSet::new();
        for cpu in 0..pinned {
            set.set(cpu);
        }
        rustix::thread::sched_setaffinity(None, &set)?;
        Ok(CpuQuota {
            cgroup: None,
            description: format!(
                "no cgroup could be created ({}); fell back to an affinity mask of {pinned} CPU(s)",
                if refusals.is_empty() { "no cgroup mount found".to_string() } else { refusals.join("; ") }
            ),
        })
    }
}

fn enter_cgroup(root: &Path, name: &str, v2: bool, quota_us: u64) -> std::io::Result<PathBuf> {
    let dir = root.join(name);
    fs::create_dir(&dir)?;
    let configured = if v2 {
        // The root must delegate the cpu controller to its children.
        fs::write(root.join("cgroup.subtree_control"), "+cpu")
            .and_then(|()| fs::write(dir.join("cpu.max"), format!("{quota_us} {PERIOD_US}")))
    } else {
        fs::write(dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())
            .and_then(|()| fs::write(dir.join("cpu.cfs_quota_us"), quota_us.to_string()))
    };
    // Moves every thread of the process.
    let entered = configured.and_then(|()| fs::write(dir.join("cgroup.procs"), std::process::id().to_string()));
    if let Err(error) = entered {
        let _ = fs::remove_dir(&dir);
        return Err(error);
    }
    Ok(dir)
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        if let Some((dir, parent_procs)) = self.cgroup.take() {
            let _ = fs::write(parent_procs, std::process::id().to_string());
            let _ = fs::remove_dir(dir);
        }
    }
}
