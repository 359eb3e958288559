//! `--workload raft --placement processes`: the cluster point of `cluster`,
//! but each of the three nodes a process of its own — this binary's hidden
//! `kv-node` command, which runs redolog-kv's node (its HTTP network, its
//! key-value machine with snapshots, openraft 0.10) on the store named, with
//! the device's fdatasync latency in that process — and the clients in this
//! process, writing through the leader over HTTP on loopback, one write
//! outstanding each. The CPU per write adds the three node processes' CPU
//! time over the timed part to this process's; their fdatasyncs are theirs
//! and are not counted here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cluster::drive;
use super::stores::Point;
use super::ClusterOptions;
use crate::harness::device::Device;
use crate::harness::BoxError;

/// Nodes in the cluster.
const NODES: u64 = 3;

/// `redolog-bench kv-node`: one node of redolog-kv's replicated key-value
/// service on a log store of this build, with a device profile: what
/// `--placement processes` starts three of.
#[derive(Debug, clap::Args)]
pub struct KvNodeOptions {
    #[command(flatten)]
    node: redolog_kv::Options,
    /// The log store: redolog-raft, or rocksdb-raft (`--features peers`).
    #[arg(long, default_value = "redolog-raft")]
    store: String,
    /// The device profile: `sim:<latency>` makes this process's fdatasyncs
    /// take that long.
    #[arg(long, default_value = "tmpfs")]
    device: Device,
    /// The benchmark that starts this node: the node is killed when it dies.
    #[arg(long, hide = true)]
    parent: Option<i32>,
}

/// The stores a node process can run on in this build.
pub fn stores() -> Vec<&'static str> {
    let mut stores = vec!["redolog-raft"];
    if cfg!(feature = "peers") {
        stores.push("rocksdb-raft");
    }
    stores
}

/// `redolog-bench child --parent PID -- PROGRAM ARGS…`: what starts a
/// peer's server process (etcd), so it dies with the benchmark as a
/// `kv-node` does.
#[derive(Debug, clap::Args)]
pub struct ChildOptions {
    /// The benchmark that starts it.
    #[arg(long)]
    parent: i32,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Becomes `options.command` (exec), with the kernel's parent-death signal
/// set first: it survives the exec, so the program is killed when the
/// benchmark that started it dies, however it dies.
pub fn child(options: ChildOptions) -> Result<(), BoxError> {
    use std::os::unix::process::CommandExt;
    watch_parent(options.parent)?;
    let (program, args) = options.command.split_first().ok_or("child: no program")?;
    Err(format!("child: exec {program}: {}", Command::new(program).args(args).exec()).into())
}

/// Makes the kernel kill this process when its parent — `parent`, the
/// benchmark — exits; an error if the parent is gone already. The signal
/// fires when the *thread* that started this process exits: a point starts
/// its nodes from the thread that runs the sweep, which lives as long as
/// the benchmark.
fn watch_parent(parent: i32) -> Result<(), BoxError> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    // A parent already gone by now (this process then belongs to another)
    // is the same case.
    let now = rustix::process::getppid().map(|pid| pid.as_raw_nonzero().get());
    if now != Some(parent) {
        return Err(format!("the benchmark that started this process (pid {parent}) is gone").into());
    }
    Ok(())
}

/// Runs one node until the process is killed — by the benchmark that
/// started it, or by the kernel when that benchmark dies, however it dies.
pub fn kv_node(options: KvNodeOptions) -> Result<(), BoxError> {
    if let Some(parent) = options.parent {
        watch_parent(parent).map_err(|error| format!("kv-node: {error}"))?;
    }
    options.device.install();
    redolog_kv::log_to_stderr();
    let runtime = options.node.runtime()?;
    let KvNodeOptions { node, store, .. } = options;
    runtime.block_on(async move {
        match store.as_str() {
            "redolog-raft" => {
                let store = redolog_kv::open_store(&node)?;
                redolog_kv::serve(node, store).await
            }
            #[cfg(feature = "peers")]
            "rocksdb-raft" => {
                type Store = super::rocksdb::RocksDbLogStore<super::line::V0_10<redolog_kv::TypeConfig>>;
                let store = Store::open(&node.dir.join("rocksdb"))?;
                redolog_kv::serve(node, store).await
            }
            other => Err(format!("kv-node --store {other}: this build has {}", stores().join(", ")).into()),
        }
    })
}

/// RocksDB's log grows without a bound: it never asks for room, and the
/// node snapshots every `--snapshot-every` entries alone.
#[cfg(feature = "peers")]
impl redolog_kv::Pressure for super::rocksdb::RocksDbLogStore<super::line::V0_10<redolog_kv::TypeConfig>> {
    fn room_wanted(&self) -> bool {
        false
    }
}

/// The node processes of one point: killed when dropped, on every path.
pub(super) struct Nodes(pub(super) Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Nodes {
    /// The CPU time (user and system) each node process has used, by id.
    pub(super) fn cpu(&self) -> Result<Vec<Duration>, BoxError> {
        self.0.iter().map(|child| process_cpu(child.id())).collect()
    }
}

/// A process's CPU time from `/proc/<pid>/stat` (utime and stime, fields 14
/// and 15, counted after the command name, which may hold spaces).
pub(super) fn process_cpu(pid: u32) -> Result<Duration, BoxError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, fields) = stat.rsplit_once(')').ok_or_else(|| format!("/proc/{pid}/stat: no command name"))?;
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let ticks = |at: usize| -> Result<u64, BoxError> {
        Ok(fields.get(at).ok_or_else(|| format!("/proc/{pid}/stat: {} fields", fields.len()))?.parse()?)
    };
    // fields[0] is field 3 (the state).
    let used = ticks(11)? + ticks(12)?;
    Ok(Duration::from_nanos(used * 1_000_000_000 / rustix::param::clock_ticks_per_second()))
}

/// A free port on loopback (bound, read, released).
pub(super) fn free_address() -> Result<SocketAddr, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Waits until `addr` accepts connections (30 s at most).
pub(super) async fn serving(addr: SocketAddr) -> Result<(), BoxError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            return Err(format!("the node on {addr} did not serve within 30 s").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The node that leads and takes writes: a warm-up write, sent to node 1 and
/// on to the leader each "not leader" answer names (20 s at most).
async fn leader(http: &reqwest::Client, addrs: &BTreeMap<u64, SocketAddr>) -> Result<u64, BoxError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut at = 1;
    while Instant::now() < deadline {
        let body = json!({"op": "set", "key": "warm-up", "value": "1"});
        if let Ok(response) = http.post(format!("http://{}/api/write", addrs[&at])).json(&body).send().await {
            if response.status().is_success() {
                return Ok(at);
            }
            let answer: Value = response.json().await.unwrap_or_default();
            if let Some(leader) = answer["leader"]["id"].as_u64().filter(|id| addrs.contains_key(id)) {
                at = leader;
                continue;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("no node took a write within 20 s".into())
}

/// Threads per node process: the machine's CPUs shared among the nodes
/// (one each on two cores: the nodes then wrote 13 % more with 17 % less
/// CPU per write than on two Tokio workers each, paired).
fn node_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cpus / NODES as usize).max(1)
}

/// Three node processes on `store` in `dir`, on `device`, formed into a
/// cluster: the processes (killed when dropped), their addresses by id and
/// the leader that took a first write.
pub(super) async fn start_cluster(
    store: &str,
    dir: &Path,
    device: Device,
) -> Result<(Nodes, BTreeMap<u64, SocketAddr>, u64), BoxError> {
    let exe = std::env::current_exe()?;
    let addrs: BTreeMap<u64, SocketAddr> =
        (1..=NODES).map(|id| Ok((id, free_address()?))).collect::<Result<_, BoxError>>()?;
    let mut nodes = Nodes(Vec::new());
    std::fs::create_dir_all(dir)?;
    for (id, addr) in &addrs {
        let node_dir = dir.join(format!("node-{id}"));
        // Its log (openraft's warnings, `RUST_LOG` for more) beside it.
        let log = std::fs::File::create(dir.join(format!("node-{id}.log")))?;
        let child = Command::new(&exe)
            .args(["kv-node", "--store", store, "--device", &device.to_string()])
            .arg(format!("--threads={}", node_threads()))
            .arg(format!("--parent={}", std::process::id()))
            .args([format!("--id={id}"), format!("--listen={addr}"), format!("--dir={}", node_dir.display())])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        nodes.0.push(child);
    }
    for (id, addr) in &addrs {
        let log = dir.join(format!("node-{id}.log"));
        serving(*addr).await.map_err(|error| format!("{error} (its log: {})", log.display()))?;
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
    let members: BTreeMap<String, String> = addrs.iter().map(|(id, addr)| (id.to_string(), addr.to_string())).collect();
    let init =
        http.post(format!("http://{}/cluster/init", addrs[&1])).json(&json!({"members": members})).send().await?;
    if !init.status().is_success() {
        return Err(format!("init: {}", init.text().await.unwrap_or_default()).into());
    }
    let leader = leader(&http, &addrs).await?;
    Ok((nodes, addrs, leader))
}

/// One point: three node processes on `store` in `dir`, `clients` client
/// tasks writing through the leader for `--time` seconds.
pub async fn point(store: &str, dir: &Path, clients: usize, options: &ClusterOptions) -> Result<Point, BoxError> {
    let (nodes, addrs, leader) = start_cluster(store, dir, options.run.device).await?;
    // The service's own client: the clients' concurrent writes go to the
    // leader in batches (`/api/writes`), as an application's would.
    let client = redolog_kv::Client::new(addrs[&leader].to_string());
    let before = nodes.cpu()?;
    let writer = client.clone();
    let mut point = drive(clients, options, &dir.join(format!("node-{leader}")), move |command: String| {
        let client = writer.clone();
        async move {
            let (key, value) = command.split_once('=').unwrap_or((&command, ""));
            let set = redolog_kv::Request::Set { key: key.to_string(), value: value.to_string() };
            client.write(redolog_kv::Command { request: set, session: None }).await.is_ok()
        }
    })
    .await?;
    let used: Vec<Duration> = nodes.cpu()?.into_iter().zip(before).map(|(after, before)| after - before).collect();
    if options.run.report_interval > 0 {
        // Where the CPU went: the clients' process (`point.cpu` so far), the
        // leader's, the followers'.
        let per_write = |cpu: Duration| cpu.as_secs_f64() * 1e6 / point.calls.max(1) as f64;
        let followers: Duration = (1..=NODES).zip(&used).filter(|(id, _)| *id != leader).map(|(_, cpu)| *cpu).sum();
        let stats = client.stats();
        println!(
            "  CPU µs per write: clients {:.1}, leader {:.1}, followers {:.1}; {:.1} writes per request",
            per_write(point.cpu),
            per_write(used[(leader - 1) as usize]),
            per_write(followers),
            stats.writes as f64 / stats.requests.max(1) as f64
        );
    }
    point.cpu += used.iter().sum::<Duration>();
    Ok(point)
}
