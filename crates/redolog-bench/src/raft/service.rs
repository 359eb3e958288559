//! `redolog-bench bench --workload kv`: the replicated key-value service as
//! its users meet it, and its tail. Three node processes on loopback
//! (`processes`' `kv-node`, redolog-kv on redolog-raft), each client task
//! sending one write per request and waiting for its answer — no client
//! batching: one HTTP request per write on a kept-alive connection, as curl
//! or an application's HTTP client would. Built with `--features peers`,
//! etcd 3.4 (Debian's `etcd-server`) runs beside it in the same rounds:
//! three `etcd` processes, the same clients sending etcd's gRPC `KV/Put`
//! (one channel per `CLIENTS_PER_CHANNEL` clients, as etcd's own benchmark
//! tool spreads its clients over `--conns`).
//!
//! Each point starts a fresh cluster, loads `--keys` keys first (in
//! batches: the service's batching client, etcd transactions of 128 puts),
//! so a snapshot writes a data set that takes longer than a heartbeat; then
//! every client writes for `WARM_UP` unmeasured and `--time` seconds
//! measured, each write to a random loaded key (its own key with
//! `--keys 0`). Reported per point and as medians of the rounds: writes/s,
//! p50, p99, p99.9 and the slowest write, the node processes' CPU per write,
//! the elections seen (the leader's term after the point against before it)
//! and the writes that failed or timed out (`TIMEOUT`).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::Value;

use super::processes::{self, Nodes};
use super::ServiceOptions;
use crate::harness::device::Device;
use crate::harness::rounds::{interleave, Measured};
use crate::harness::stats::new_histogram;
use crate::harness::BoxError;

/// Unmeasured seconds at the start of each point, every client writing.
const WARM_UP: Duration = Duration::from_secs(2);

/// How long a client waits for one write's answer before it counts it
/// failed and sends the next.
const TIMEOUT: Duration = Duration::from_secs(10);

/// etcd's clients per gRPC channel (HTTP/2 connection).
#[cfg(feature = "peers")]
const CLIENTS_PER_CHANNEL: usize = 16;

/// A service the workload runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// redolog-kv on redolog-raft: `/api/write`, one command per request.
    RedologKv,
    /// etcd 3.4 through its gRPC `KV/Put`.
    #[cfg(feature = "peers")]
    Etcd,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::RedologKv => "redolog-kv",
            #[cfg(feature = "peers")]
            Service::Etcd => "etcd",
        }
    }

    /// Every service of this build.
    fn all() -> Vec<Service> {
        vec![
            Service::RedologKv,
            #[cfg(feature = "peers")]
            Service::Etcd,
        ]
    }

    /// The services `names` picks (empty: all), or an error naming the one
    /// this build does not have.
    fn chosen(names: &[String]) -> Result<Vec<Service>, BoxError> {
        if names.is_empty() {
            return Ok(Self::all());
        }
        names
            .iter()
            .map(|name| {
                Self::all().into_iter().find(|service| service.name() == name).ok_or_else(|| {
                    let have: Vec<_> = Self::all().into_iter().map(Service::name).collect();
                    format!("--services {name}: this build has {} (etcd: --features peers)", have.join(", ")).into()
                })
            })
            .collect()
    }
}

/// What one point measured.
#[derive(Debug)]
pub struct TailPoint {
    writes: u64,
    failed: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    /// The node processes' CPU over the measured part.
    server_cpu: Duration,
    /// Elections during the point: the leader's term after it less before.
    elections: u64,
}

impl TailPoint {
    fn per_sec(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }

    fn cpu_us_per_write(&self) -> f64 {
        self.server_cpu.as_secs_f64() * 1e6 / self.writes.max(1) as f64
    }

    /// p50, p99, p99.9 and the slowest write, in milliseconds.
    fn tail_ms(&self) -> [f64; 4] {
        let at = |quantile: f64| self.latency_us.value_at_quantile(quantile) as f64 / 1000.0;
        [at(0.50), at(0.99), at(0.999), self.latency_us.max() as f64 / 1000.0]
    }
}

/// A running cluster of one service, its processes killed when dropped.
struct Cluster {
    nodes: Nodes,
    writer: Writer,
}

/// How the clients reach a cluster's leader.
#[derive(Clone)]
enum Writer {
    Kv {
        http: reqwest::Client,
        leader: SocketAddr,
    },
    #[cfg(feature = "peers")]
    Etcd(super::etcd::Etcd),
}

impl Writer {
    /// One write of `key`, answered within `TIMEOUT`: whether it applied.
    #[cfg_attr(not(feature = "peers"), allow(unused_variables))]
    async fn put(&self, client: usize, key: String, value: &str) -> bool {
        match self {
            Writer::Kv { http, leader } => {
                let body = serde_json::json!({"op": "set", "key": key, "value": value});
                let sent = http.post(format!("http://{leader}/api/write")).json(&body).send().await;
                sent.is_ok_and(|response| response.status().is_success())
            }
            #[cfg(feature = "peers")]
            Writer::Etcd(etcd) => etcd.put(client, key.into_bytes(), value.as_bytes().to_vec()).await.is_ok(),
        }
    }

    /// The leader's term now.
    async fn term(&self) -> Result<u64, BoxError> {
        match self {
            Writer::Kv { http, leader } => {
                let metrics: Value = http.get(format!("http://{leader}/cluster/metrics")).send().await?.json().await?;
                metrics["term"].as_u64().ok_or_else(|| format!("no term in {metrics}").into())
            }
            #[cfg(feature = "peers")]
            Writer::Etcd(etcd) => etcd.term().await,
        }
    }
}

/// Key `index` of the loaded data set.
fn key(index: u64) -> String {
    format!("k{index:08}")
}

/// The key a client writes next: a random loaded one (splitmix64 over the
/// client's own sequence), or its own key when nothing was loaded.
fn next_key(client: usize, keys: u64, state: &mut u64) -> String {
    if keys == 0 {
        return format!("c{client}");
    }
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut mixed = *state;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    key((mixed ^ (mixed >> 31)) % keys)
}

/// Starts `service`'s cluster in `dir` for `clients` clients and loads
/// `load`'s keys, each with its value.
#[cfg_attr(not(feature = "peers"), allow(unused_variables))]
async fn start(
    service: Service,
    dir: &Path,
    device: Device,
    load: (u64, &str),
    clients: usize,
) -> Result<Cluster, BoxError> {
    let (keys, value) = load;
    match service {
        Service::RedologKv => {
            let (nodes, addrs, leader) = processes::start_cluster("redolog-raft", dir, device).await?;
            load_kv(addrs[&leader], keys, value).await?;
            let http = reqwest::Client::builder().timeout(TIMEOUT).pool_max_idle_per_host(usize::MAX).build()?;
            Ok(Cluster { nodes, writer: Writer::Kv { http, leader: addrs[&leader] } })
        }
        #[cfg(feature = "peers")]
        Service::Etcd => {
            let (nodes, etcd) = super::etcd::start(dir, clients.div_ceil(CLIENTS_PER_CHANNEL)).await?;
            etcd.load(keys, value, key).await?;
            Ok(Cluster { nodes, writer: Writer::Etcd(etcd) })
        }
    }
}

/// Loads keys `0..keys` through the service's batching client (`/api/writes`).
async fn load_kv(leader: SocketAddr, keys: u64, value: &str) -> Result<(), BoxError> {
    const LOADERS: u64 = 64;
    let client = redolog_kv::Client::new(leader.to_string());
    let mut tasks = Vec::new();
    for loader in 0..LOADERS.min(keys) {
        let (client, value) = (client.clone(), value.to_string());
        tasks.push(tokio::spawn(async move {
            for index in (loader..keys).step_by(LOADERS as usize) {
                let set = redolog_kv::Request::Set { key: key(index), value: value.clone() };
                client.write(redolog_kv::Command { request: set, session: None }).await?;
            }
            Ok::<(), redolog_kv::ClientError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// One point: `clients` tasks writing one write per request for the warm-up
/// and `seconds`, the measured part's figures.
async fn drive(cluster: &Cluster, clients: usize, seconds: f64, keys: u64, value: &str) -> Result<TailPoint, BoxError> {
    let started = Instant::now();
    let (measured_from, deadline) = (started + WARM_UP, started + WARM_UP + Duration::from_secs_f64(seconds));
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (writer, value) = (cluster.writer.clone(), value.to_string());
        tasks.push(tokio::spawn(async move {
            let (mut latency_us, mut writes, mut failed, mut state) = (new_histogram(), 0, 0, client as u64);
            while Instant::now() < deadline {
                let call = Instant::now();
                let applied = writer.put(client, next_key(client, keys, &mut state), &value).await;
                if call < measured_from {
                    continue;
                }
                if applied {
                    latency_us.saturating_record(call.elapsed().as_micros().max(1) as u64);
                    writes += 1;
                } else {
                    failed += 1;
                }
            }
            (writes, failed, latency_us)
        }));
    }
    tokio::time::sleep_until(measured_from.into()).await;
    let (cpu, term) = (cluster.nodes.cpu()?, cluster.writer.term().await?);
    tokio::time::sleep_until(deadline.into()).await;
    let used = cluster.nodes.cpu()?.into_iter().zip(cpu).map(|(after, before)| after - before).sum();
    let mut point = TailPoint {
        writes: 0,
        failed: 0,
        elapsed: deadline - measured_from,
        latency_us: new_histogram(),
        server_cpu: used,
        elections: 0,
    };
    for task in tasks {
        let (writes, failed, latency_us) = task.await?;
        point.writes += writes;
        point.failed += failed;
        point.latency_us.add(&latency_us)?;
    }
    point.elections = cluster.writer.term().await?.saturating_sub(term);
    Ok(point)
}

/// Runs the sweep — every service and data set size at each `--threads`
/// count (clients), in interleaved rounds — and prints its table.
pub fn run(options: &ServiceOptions) -> Result<(), BoxError> {
    let run = &options.run;
    if let Device::Sim { .. } = run.device {
        return Err("--workload kv runs on disk or tmpfs: a simulated fdatasync cannot reach etcd's".into());
    }
    let workdir = run.device.work_dir(run.dir.as_deref(), "redolog-bench-kv-")?;
    let services = Service::chosen(&options.services)?;
    let systems: Vec<(Service, u64)> =
        services.iter().flat_map(|&service| options.keys.iter().map(move |&keys| (service, keys))).collect();
    println!(
        "redolog-bench bench --workload kv: {} — 3 node processes each, HTTP/gRPC on loopback; one write per \
         request, {}-byte values; {} on device {}; {} s warm-up, {} s measured",
        services.iter().map(|service| service.name()).collect::<Vec<_>>().join(", "),
        options.record_bytes,
        workdir.path().display(),
        run.device,
        WARM_UP.as_secs(),
        run.seconds
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let value = "x".repeat(options.record_bytes);
    let measured = interleave(
        run.rounds,
        &run.threads,
        &systems,
        |_, _| true,
        |visit| {
            let ((service, keys), clients, round) = (*visit.system, visit.count, visit.round);
            let dir = workdir.path().join(format!("{}-{keys}-{clients}-{round}", service.name()));
            let point = runtime.block_on(async {
                let cluster = start(service, &dir, run.device, (keys, &value), clients).await?;
                drive(&cluster, clients, run.seconds, keys, &value).await
            })?;
            std::fs::remove_dir_all(&dir)?;
            let [p50, p99, p999, max] = point.tail_ms();
            println!(
                "[ round {} ] {} with {keys} keys, {clients} clients: {:.0} writes/s, p50 {p50:.1} p99 {p99:.1} \
                 p99.9 {p999:.1} max {max:.1} ms, {:.1} µs server CPU/write, {} elections, {} failed",
                round + 1,
                service.name(),
                point.per_sec(),
                point.cpu_us_per_write(),
                point.elections,
                point.failed
            );
            Ok(point)
        },
    )?;
    print_table(&measured, &run.threads, &systems);
    Ok(())
}

/// The median of `values` (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The medians of the rounds, a row per service, data set and client count.
fn print_table(measured: &[Measured<'_, (Service, u64), TailPoint>], counts: &[usize], systems: &[(Service, u64)]) {
    println!(
        "\n{:<11} {:>8} {:>8} {:>10} {:>8} {:>8} {:>8} {:>8} {:>14} {:>9} {:>7}",
        "service",
        "keys",
        "clients",
        "writes/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "server µs/write",
        "elections",
        "failed"
    );
    for &clients in counts {
        for system in systems {
            let points: Vec<&TailPoint> = measured
                .iter()
                .filter(|point| point.count == clients && point.system == system)
                .map(|point| &point.result)
                .collect();
            let of = |figure: &dyn Fn(&TailPoint) -> f64| median(points.iter().map(|point| figure(point)).collect());
            let tail = |at: usize| of(&|point| point.tail_ms()[at]);
            println!(
                "{:<11} {:>8} {:>8} {:>10.0} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>14.1} {:>9} {:>7}",
                system.0.name(),
                system.1,
                clients,
                of(&TailPoint::per_sec),
                tail(0),
                tail(1),
                tail(2),
                tail(3),
                of(&TailPoint::cpu_us_per_write),
                points.iter().map(|point| point.elections).sum::<u64>(),
                points.iter().map(|point| point.failed).sum::<u64>(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_spread_over_the_data_set_and_a_fresh_one_writes_its_own() {
        let mut state = 7;
        let picked: std::collections::BTreeSet<String> = (0..1000).map(|_| next_key(7, 100, &mut state)).collect();
        assert!(picked.len() > 90, "{} of 100 keys picked in 1000 writes", picked.len());
        assert!(picked.iter().all(|key| key.as_str() < "k00000100"));
        assert_eq!(next_key(3, 0, &mut state), "c3");
    }

    #[test]
    fn an_unknown_service_is_refused_by_name() {
        let refused = Service::chosen(&["zookeeper".to_string()]).err().map(|error| error.to_string());
        assert!(refused.is_some_and(|error| error.starts_with("--services zookeeper: this build has redolog-kv")));
    }
}
