//! How many CPUs this process can really use, and how busy it keeps them
//! ([DESIGN §1.10](crate::docs::design#110-adaptive-waiting-and-the-cpu-monitor)).
//!
//! The post "Spinning in the Cloud: How to Fix MySQL 8.0 Log Commit for
//! Containers": MySQL's spin gate divides the process's CPU time by the CPUs in the
//! affinity mask, so in a container with a CFS quota of one CPU on a 16-CPU host it
//! believed the machine idle and spun away a fifth of the quota. Here the usable
//! count is the minimum of the affinity mask and every CPU quota on the path from
//! the process's cgroup to the root of its hierarchy (cgroup v1 `cpu.cfs_quota_us`
//! / `cpu.cfs_period_us`, cgroup v2 `cpu.max`), re-read every second so a changed
//! quota is noticed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::Moment;
use crate::sync::atomic::{AtomicU64, Ordering};

/// How often the process's CPU use is sampled.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// How often the affinity mask and the cgroup quotas are re-read.
const LIMITS_INTERVAL: Duration = Duration::from_secs(1);

/// The CPU quota of the process's cgroups: the smallest `quota / period` on the
/// path from its cgroup up to the root of each mounted hierarchy with the `cpu`
/// controller. `None` when no quota is set (or nothing could be read).
///
/// `proc_cgroup` and `mountinfo` are the contents of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`; `root` prefixes every mount point (`/` on a real
/// system, a fake tree in tests).
pub(crate) fn cgroup_cpu_quota(proc_cgroup: &str, mountinfo: &str, root: &Path) -> Option<f64> {
    let mut quota: Option<f64> = None;
    for mount in mountinfo.lines().filter_map(CgroupMount::parse) {
        let Some(cgroup_path) = mount.cgroup_path_of(proc_cgroup) else { continue };
        // The process's cgroup as seen through this mount: strip the mount's root.
        let relative = cgroup_path.strip_prefix(mount.root).unwrap_or(cgroup_path).trim_start_matches('/');
        let top = root.join(mount.point.trim_start_matches('/'));
        let mut dir = top.join(relative);
        loop {
            if let Some(level) = mount.read_quota(&dir) {
                quota = Some(quota.map_or(level, |q: f64| q.min(level)));
            }
            if dir == top || !dir.pop() || !dir.starts_with(&top) {
                break;
            }
        }
    }
    quota
}

/// A cgroup hierarchy from one line of mountinfo.
struct CgroupMount<'a> {
    /// The mount's root inside the hierarchy (field 4).
    root: &'a str,
    /// Where it is mounted (field 5).
    point: &'a str,
    v2: bool,
}

impl<'a> CgroupMount<'a> {
    /// A mountinfo line: `id parent dev root point options [optional...] - fstype source super`.
    fn parse(line: &'a str) -> Option<Self> {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let (fstype, _source, super_options) = (after.next()?, after.next()?, after.next().unwrap_or(""));
        let (root, point) = (*fields.get(3)?, *fields.get(4)?);
        match fstype {
            "cgroup2" => Some(CgroupMount { root, point, v2: true }),
            "cgroup" if super_options.split(',').any(|option| option == "cpu") => {
                Some(CgroupMount { root, point, v2: false })
            }
            _ => None,
        }
    }

    /// The process's path in this hierarchy, from `/proc/self/cgroup`
    /// (`id:controllers:path`; v2 is `0::path`).
    fn cgroup_path_of(&self, proc_cgroup: &'a str) -> Option<&'a str> {
        proc_cgroup.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches =
                if self.v2 { controllers.is_empty() } else { controllers.split(',').any(|name| name == "cpu") };
            matches.then_some(path)
        })
    }

    /// This level's quota in CPUs, if it sets one.
    fn read_quota(&self, dir: &Path) -> Option<f64> {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let (quota, period) = if self.v2 {
            // `cpu.max`: "<quota|max> <period>".
            let text = read("cpu.max")?;
            let mut fields = text.split_whitespace();
            let quota = fields.next()?;
            let period = fields.next()?;
            if quota == "max" {
                return None;
            }
            (quota.parse::<f64>().ok()?, period.parse::<f64>().ok()?)
        } else {
            // `cpu.cfs_quota_us` is -1 when unlimited.
            let quota = read("cpu.cfs_quota_us")?.trim().parse::<f64>().ok()?;
            let period = read("cpu.cfs_period_us")?.trim().parse::<f64>().ok()?;
            (quota, period)
        };
        (quota > 0.0 && period > 0.0).then(|| quota / period)
    }
}

/// CPUs in this process's affinity mask.
fn affinity_cpus() -> Option<f64> {
    rustix::thread::sched_getaffinity(None).ok().map(|set| f64::from(set.count().max(1)))
}

/// The CPUs the process can use now: affinity and quota, whichever is smaller;
/// never below a tenth of a CPU.
fn usable_cpus(root: &Path) -> f64 {
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_default();
    let quota = cgroup_cpu_quota(&read("proc/self/cgroup"), &read("proc/self/mountinfo"), root);
    let affinity =
        affinity_cpus().or_else(|| std::thread::available_parallelism().ok().map(|n| n.get() as f64)).unwrap_or(1.0);
    quota.map_or(affinity, |quota| quota.min(affinity)).max(0.1)
}

/// CPU time used by every thread of this process.
fn process_cpu_time() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(time.tv_sec.max(0) as u64, time.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// What the monitor last measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CpuSample {
    /// CPUs the process can use (affinity ∧ quota).
    pub(crate) usable: f64,
    /// CPU time the process used over the last interval, in percent of `usable`.
    pub(crate) busy_pct: u64,
}

struct MonitorState {
    last_at: Moment,
    last_cpu: Duration,
    limits_at: Moment,
}

/// Samples the process's CPU use every 100 ms and its CPU limits every second.
/// Sampling is done inline by whichever thread calls `maybe_sample` first after
/// the interval (a commit-pipeline leader): no thread of its own.
pub(crate) struct CpuMonitor {
    root: PathBuf,
    /// The `Moment` (as ns) at which the next sample is due.
    next_sample_ns: AtomicU64,
    /// `usable` × 1000.
    usable_milli: AtomicU64,
    busy_pct: AtomicU64,
    state: Mutex<MonitorState>,
}

impl CpuMonitor {
    pub(crate) fn new() -> Self {
        Self::with_root(PathBuf::from("/"))
    }

    /// A monitor reading `/proc` and the cgroup mounts under `root`.
    pub(crate) fn with_root(root: PathBuf) -> Self {
        let now = Moment::now();
        let usable = usable_cpus(&root);
        CpuMonitor {
            root,
            next_sample_ns: AtomicU64::new(now.after(SAMPLE_INTERVAL).as_ns()),
            usable_milli: AtomicU64::new((usable * 1000.0) as u64),
            busy_pct: AtomicU64::new(0),
            state: Mutex::new(MonitorState { last_at: now, last_cpu: process_cpu_time(), limits_at: now }),
        }
    }

    /// Whether periodic work keyed by `due_ns` (the `Moment` it is due at, as
    /// ns; 0: at once) is due at `now`; if so, claims it for `every` — one
    /// caller wins. Cheap when not due: one relaxed load and a compare.
    pub(crate) fn due(&self, due_ns: &AtomicU64, now: Moment, every: Duration) -> bool {
        // Relaxed: a schedule, not a publication; the work itself synchronises.
        let due = due_ns.load(Ordering::Relaxed);
        now.as_ns() >= due
            && due_ns.compare_exchange(due, now.after(every).as_ns(), Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Takes a sample if one is due. Cheap otherwise: one relaxed load.
    pub(crate) fn maybe_sample(&self, now: Moment) {
        if !self.due(&self.next_sample_ns, now, SAMPLE_INTERVAL) {
            return;
        }
        let Some(mut state) = self.state.try_lock() else { return };
        if Duration::from_nanos(now.ns_since(state.limits_at)) >= LIMITS_INTERVAL {
            state.limits_at = now;
            self.usable_milli.store((usable_cpus(&self.root) * 1000.0) as u64, Ordering::Relaxed);
        }
        let cpu = process_cpu_time();
        let wall = Duration::from_nanos(now.ns_since(state.last_at));
        if wall.is_zero() {
            return;
        }
        let used = cpu.saturating_sub(state.last_cpu).as_secs_f64();
        let usable = self.usable_milli.load(Ordering::Relaxed) as f64 / 1000.0;
        let busy = (100.0 * used / (wall.as_secs_f64() * usable)).round() as u64;
        self.busy_pct.store(busy, Ordering::Relaxed);
        state.last_at = now;
        state.last_cpu = cpu;
    }

    pub(crate) fn sample(&self) -> CpuSample {
        CpuSample {
            usable: self.usable_milli.load(Ordering::Relaxed) as f64 / 1000.0,
            busy_pct: self.busy_pct.load(Ordering::Relaxed),
        }
    }

    /// Whether a waiter may spin at all ([DESIGN §1.10](crate::docs::design#110-adaptive-waiting-and-the-cpu-monitor)): there must be a
    /// whole CPU besides the one the spinner is on for the thread it waits for.
    /// The CPU load does not gate it: a spin only ever replaces a park that would
    /// cost more CPU than the spin (measured in §1.10).
    pub(crate) fn spin_allowed(&self) -> bool {
        self.sample().usable >= 2.0
    }

    /// How many threads may spin at once: the whole usable CPUs but one.
    pub(crate) fn spinners_max(&self) -> usize {
        (self.usable_milli.load(Ordering::Relaxed) / 1000).saturating_sub(1) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    const V1_MOUNTINFO: &str = "\
24 23 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
32 24 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
33 24 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
";

    #[test]
    fn cgroup_v1_quota_is_the_smallest_on_the_path_to_the_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let base = "sys/fs/cgroup/cpu,cpuacct";
        write(root, &format!("{base}/cpu.cfs_quota_us"), "-1\n");
        write(root, &format!("{base}/cpu.cfs_period_us"), "100000\n");
        write(root, &format!("{base}/kube/cpu.cfs_quota_us"), "300000\n");
        write(root, &format!("{base}/kube/cpu.cfs_period_us"), "100000\n");
        write(root, &format!("{base}/kube/pod/cpu.cfs_quota_us"), "150000\n");
        write(root, &format!("{base}/kube/pod/cpu.cfs_period_us"), "100000\n");
        let proc_cgroup = "5:cpuset:/\n4:cpu,cpuacct:/kube/pod\n1:name=systemd:/kube/pod\n";
        assert_eq!(cgroup_cpu_quota(proc_cgroup, V1_MOUNTINFO, root), Some(1.5));
        // A parent's quota below the child's wins.
        write(root, &format!("{base}/kube/cpu.cfs_quota_us"), "50000\n");
        assert_eq!(cgroup_cpu_quota(proc_cgroup, V1_MOUNTINFO, root), Some(0.5));
        // Unlimited everywhere: no quota.
        for level in ["kube", "kube/pod"] {
            write(root, &format!("{base}/{level}/cpu.cfs_quota_us"), "-1\n");
        }
        assert_eq!(cgroup_cpu_quota(proc_cgroup, V1_MOUNTINFO, root), None);
    }

    #[test]
    fn cgroup_v2_quota_reads_cpu_max_through_a_container_mount() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        // Inside a container the mount's root is the container's own cgroup.
        let mountinfo = "30 24 0:26 /docker/abc /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        write(root, "sys/fs/cgroup/cpu.max", "200000 100000\n");
        write(root, "sys/fs/cgroup/worker/cpu.max", "max 100000\n");
        assert_eq!(cgroup_cpu_quota("0::/docker/abc/worker\n", mountinfo, root), Some(2.0));
        write(root, "sys/fs/cgroup/worker/cpu.max", "25000 50000\n");
        assert_eq!(cgroup_cpu_quota("0::/docker/abc/worker\n", mountinfo, root), Some(0.5));
        write(root, "sys/fs/cgroup/cpu.max", "max 100000\n");
        write(root, "sys/fs/cgroup/worker/cpu.max", "max 100000\n");
        assert_eq!(cgroup_cpu_quota("0::/docker/abc/worker\n", mountinfo, root), None);
    }

    #[test]
    fn no_cgroup_mount_or_garbage_means_no_quota() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(cgroup_cpu_quota("0::/\n", "", dir.path()), None);
        assert_eq!(cgroup_cpu_quota("garbage", "also garbage - x", dir.path()), None);
        write(dir.path(), "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "lots\n");
        assert_eq!(cgroup_cpu_quota("4:cpu,cpuacct:/\n", V1_MOUNTINFO, dir.path()), None);
    }

    #[test]
    fn monitor_notices_a_changed_quota_and_gates_spinning() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "proc/self/cgroup", "4:cpu,cpuacct:/job\n");
        write(root, "proc/self/mountinfo", V1_MOUNTINFO);
        write(root, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
        write(root, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "100000\n");
        let monitor = CpuMonitor::with_root(root.to_path_buf());
        assert_eq!(monitor.sample().usable, 1.0f64.min(affinity_cpus().unwrap_or(1.0)));
        // One usable CPU: the thread we wait for needs it; never spin.
        assert!(!monitor.spin_allowed());
        assert_eq!(monitor.spinners_max(), 0);
        write(root, "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "400000\n");
        monitor.maybe_sample(Moment::now().after(LIMITS_INTERVAL + SAMPLE_INTERVAL));
        let expected = 4.0f64.min(affinity_cpus().unwrap_or(1.0));
        assert_eq!(monitor.sample().usable, expected);
    }
}
