//! What the tests of node processes share: `redolog-kv` processes on
//! loopback, every Raft link through a fault-injecting proxy in the test's
//! process (cut or delayed on command), started, initialized, and killed
//! when dropped, on every path.

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A directed link's faults: cut (connections refused, open ones closed),
/// or every chunk of bytes held back this long.
#[derive(Clone, Copy, Default)]
pub struct Link {
    pub cut: bool,
    pub delay: Duration,
}

/// One directed link's proxy: forwards to its target, each chunk after the
/// link's delay; when cut, refuses new connections and closes the open ones.
pub async fn proxy(listener: TcpListener, target: SocketAddr, link: watch::Receiver<Link>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else { return };
        if link.borrow().cut {
            continue; // dropped: the caller sees the connection close
        }
        let (link, mut cut) = (link.clone(), link.clone());
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(target).await else { return };
            // Forwarded as it comes: with Nagle on its sockets the proxy
            // would hold a frame written apart from the one before it until
            // the peer's delayed acknowledgement (40 ms), a delay the link
            // between two nodes does not have.
            let _ = (inbound.set_nodelay(true), outbound.set_nodelay(true));
            let ((from_caller, to_caller), (from_target, to_target)) = (inbound.into_split(), outbound.into_split());
            tokio::select! {
                _ = pump(from_caller, to_target, link.clone()) => {}
                _ = pump(from_target, to_caller, link) => {}
                _ = cut.wait_for(|link| link.cut) => {}
            }
        });
    }
}

/// Copies `from` to `to`, each chunk delivered the link's delay after it
/// was read: a delay line, so a chunk waits for its own delay and not for
/// the delays of the chunks before it.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, link: watch::Receiver<Link>) {
    let (chunks, mut due) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let read = async move {
        let mut buffer = vec![0; 64 << 10];
        loop {
            let read = match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => read,
            };
            let at = tokio::time::Instant::now() + link.borrow().delay;
            if chunks.send((at, buffer[..read].to_vec())).is_err() {
                return;
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    tokio::join!(read, write);
}

/// A node's `/cluster/metrics`, or `Null` when it does not answer with
/// them (dead, paused past the client's patience, cut off).
pub async fn metrics(http: &reqwest::Client, addr: &SocketAddr) -> Value {
    match http.get(format!("http://{addr}/cluster/metrics")).send().await {
        Ok(response) => response.json().await.unwrap_or_default(),
        Err(_) => Value::Null,
    }
}

/// Appends `message` to `frames` as `/raft/stream` frames it: its length (4
/// bytes, big-endian), then its bytes. Written by hand, apart from the
/// crate's own framing, so a test checks the wire and not the code.
pub fn frame(frames: &mut Vec<u8>, message: &[u8]) {
    frames.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    frames.extend_from_slice(message);
}

/// The MessagePack messages framed in `bytes`, each a whole frame.
pub fn unframe(bytes: &[u8]) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        assert!(rest.len() >= 4, "a cut frame: {rest:?}");
        let length = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        assert!(rest.len() >= 4 + length, "a cut frame: {rest:?}");
        messages.push(rmp_serde::from_slice(&rest[4..4 + length]).expect("a MessagePack message"));
        rest = &rest[4 + length..];
    }
    messages
}

/// The header a Raft RPC names its cluster in (KV-9).
pub const CLUSTER_HEADER: &str = "redolog-cluster";

pub struct Nodes {
    dir: tempfile::TempDir,
    pub addrs: BTreeMap<u64, SocketAddr>,
    children: BTreeMap<u64, Child>,
    /// Flags every node is started with.
    flags: Vec<String>,
    /// Per node, `--route` arguments to its peers' proxies.
    routes: BTreeMap<u64, Vec<String>>,
    /// Per directed link `(from, to)`, its faults.
    links: BTreeMap<(u64, u64), watch::Sender<Link>>,
}

impl Drop for Nodes {
    /// Kills every node, after waking a paused one.
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free loopback address for a node, its port below the kernel's
/// ephemeral range (`ip_local_port_range`). A node the test kills must find
/// its port free when it restarts, and the kernel picks the source port of
/// every outgoing connection (the proxies', the clients') from that range:
/// with ports from `bind(":0")`, one such connection took a dead node's port
/// and the restart failed with `EADDRINUSE` — seen as "the nodes did not
/// converge", twice in 40 runs of 30 s.
fn node_addr() -> SocketAddr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (first, span) = (low.saturating_sub(10_000).max(1024), low.saturating_sub(1024).min(10_000));
    // Spread the test processes apart; the counter keeps one process's apart.
    let start = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let port = first + (start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span);
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port as u16)) {
            return listener.local_addr().expect("addr");
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr")
}

impl Nodes {
    /// `count` nodes started with `flags`, every Raft link through a
    /// proxy, the cluster initialized through node 1.
    pub async fn start(count: u64, flags: &[&str]) -> Nodes {
        let nodes = Nodes::spawned(count, flags).await;
        let members: BTreeMap<String, String> =
            nodes.addrs.iter().map(|(id, addr)| (id.to_string(), addr.to_string())).collect();
        let init = reqwest::Client::new()
            .post(format!("http://{}/cluster/init", nodes.addrs[&1]))
            .json(&json!({"members": members}))
            .send()
            .await
            .expect("init");
        assert!(init.status().is_success(), "init: {}", init.text().await.unwrap_or_default());
        nodes.settled().await;
        nodes
    }

    /// `count` new nodes started with `flags`, every Raft link through a
    /// proxy, no cluster formed.
    pub async fn spawned(count: u64, flags: &[&str]) -> Nodes {
        let addrs: BTreeMap<u64, SocketAddr> = (1..=count).map(|id| (id, node_addr())).collect();
        let (mut routes, mut links) = (BTreeMap::<u64, Vec<String>>::new(), BTreeMap::new());
        for from in 1..=count {
            for to in (1..=count).filter(|&to| to != from) {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a proxy");
                let at = listener.local_addr().expect("proxy addr");
                let (faults, seen) = watch::channel(Link::default());
                tokio::spawn(proxy(listener, addrs[&to], seen));
                links.insert((from, to), faults);
                routes.entry(from).or_default().push(format!("--route={to}={at}"));
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let flags = flags.iter().map(ToString::to_string).collect();
        let mut nodes = Nodes { dir, addrs, children: BTreeMap::new(), flags, routes, links };
        for id in 1..=count {
            nodes.spawn(id).await;
        }
        nodes
    }

    /// Waits (30 s at most) until every node names the same leader in the
    /// same term and has applied the leader's log, unchanged for a whole
    /// election timeout (1 s). A new cluster's first appends and heartbeats
    /// have been seen to time out for about 200 ms (once in about eight
    /// runs of test-cluster.sh, on the disk and on tmpfs alike), and a
    /// follower that stalls past its election timeout elects a new leader:
    /// a test that asks who leads before then may be answered by a leader
    /// on its way out.
    pub async fn settled(&self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut since: Option<(Instant, Value)> = None;
        loop {
            let mut seen = Vec::new();
            for addr in self.addrs.values() {
                seen.push(metrics(&http, addr).await);
            }
            let leader = seen[0]["current_leader"].clone();
            let leading = seen.iter().find(|metrics| metrics["state"] == "Leader" && metrics["id"] == leader);
            let settled = leading.filter(|leading| {
                seen.iter().all(|metrics| {
                    metrics["current_leader"] == leader
                        && metrics["term"] == leading["term"]
                        && metrics["last_applied"] == leading["last_log_index"]
                })
            });
            match (settled, &since) {
                (Some(leading), Some((from, before))) if *before == leading["term"] => {
                    if from.elapsed() >= Duration::from_secs(1) {
                        return;
                    }
                }
                (Some(leading), _) => since = Some((Instant::now(), leading["term"].clone())),
                (None, _) => since = None,
            }
            assert!(Instant::now() < deadline, "the cluster did not settle within 30 s: {seen:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Node `id`'s directory.
    pub fn dir(&self, id: u64) -> std::path::PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    /// Node `id`'s cluster identity as kept in its directory (KV-9): what a
    /// Raft RPC a test sends it names in [`CLUSTER_HEADER`].
    pub fn identity(&self, id: u64) -> String {
        let text = std::fs::read_to_string(self.dir(id).join("cluster-id")).expect("an identity on disk");
        assert!(text.len() == 33 && text.ends_with('\n'), "{text:?}");
        text.trim_end().to_string()
    }

    /// Starts node `id` (again, on its directory) and waits until it serves.
    pub async fn spawn(&mut self, id: u64) {
        self.launch(id);
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(self.addrs[&id]).await.is_err() {
            assert!(Instant::now() < deadline, "node {id} did not serve within 30 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Starts node `id` (again, on its directory), without waiting.
    pub fn launch(&mut self, id: u64) {
        let child = Command::new(env!("CARGO_BIN_EXE_redolog-kv"))
            .arg(format!("--id={id}"))
            .arg(format!("--listen={}", self.addrs[&id]))
            .arg(format!("--dir={}", self.dir(id).display()))
            .args(&self.flags)
            .args(self.routes.get(&id).into_iter().flatten())
            .stdout(Stdio::null())
            .stderr(self.stderr(id))
            .spawn()
            .expect("start a node");
        self.children.insert(id, child);
    }

    /// Holds every message on the links from node `id` to the others (its
    /// calls and their answers) back for `delay`.
    pub fn slow_from(&self, id: u64, delay: Duration) {
        for (_, faults) in self.links.iter().filter(|((from, _), _)| *from == id) {
            faults.send_modify(|faults| faults.delay = delay);
        }
    }

    /// Delays every link to and from `id`.
    pub fn slow(&self, id: u64, delay: Duration) {
        for (_, faults) in self.links.iter().filter(|((from, to), _)| *from == id || *to == id) {
            faults.send_modify(|faults| faults.delay = delay);
        }
    }

    /// Cuts every link between `a` and `b` (both directions), or heals it.
    pub fn cut_between(&self, a: &[u64], b: &[u64], cut: bool) {
        for &x in a {
            for &y in b {
                for link in [(x, y), (y, x)] {
                    if let Some(faults) = self.links.get(&link) {
                        faults.send_modify(|faults| faults.cut = cut);
                    }
                }
            }
        }
    }

    /// Every link back to no fault.
    pub fn heal(&self) {
        for faults in self.links.values() {
            faults.send_replace(Link::default());
        }
    }

    /// Sends `signal` to node `id` (SIGSTOP, SIGCONT).
    pub fn signal(&self, id: u64, signal: rustix::process::Signal) {
        if let Some(pid) = self.children.get(&id).and_then(|child| rustix::process::Pid::from_raw(child.id() as i32)) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    /// Node `id`'s standard error, kept across its restarts for
    /// [`report`](Self::report).
    fn stderr(&self, id: u64) -> Stdio {
        let path = self.dir.path().join(format!("node-{id}.stderr"));
        match std::fs::OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => Stdio::from(file),
            Err(_) => Stdio::null(),
        }
    }

    /// What each node process is doing — running (and its state in
    /// /proc: `T` is stopped), exited (how), or not running — and the end
    /// of its standard error: what a failed check prints about the nodes.
    pub fn report(&mut self) -> String {
        let mut report = String::new();
        for id in self.addrs.keys().copied().collect::<Vec<_>>() {
            let status = match self.children.get_mut(&id) {
                None => "not running (killed by the test)".to_string(),
                Some(child) => match child.try_wait() {
                    Ok(Some(exit)) => format!("exited: {exit}"),
                    Ok(None) => {
                        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
                        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
                        format!("running, state {}", state.unwrap_or("?"))
                    }
                    Err(error) => format!("unknown: {error}"),
                },
            };
            let stderr = std::fs::read_to_string(self.dir.path().join(format!("node-{id}.stderr"))).unwrap_or_default();
            let lines: Vec<&str> = stderr.lines().collect();
            let tail = &lines[lines.len().saturating_sub(5)..];
            // A panic's message comes before its backtrace, which fills the tail.
            let panics: Vec<String> = (0..lines.len())
                .filter(|&at| lines[at].contains("panicked at"))
                .take(3)
                .map(|at| lines[at..lines.len().min(at + 2)].join(" "))
                .collect();
            report.push_str(&format!("node {id}: {status}; panics: {panics:?}; stderr ends: {tail:?}\n"));
        }
        report
    }

    /// How node `id` exited, once it has (`within` at most): `None` if it
    /// still runs.
    pub async fn exited(&mut self, id: u64, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(exit)) = self.children.get_mut(&id)?.try_wait() {
                return Some(exit);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILLs node `id`.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut child) = self.children.remove(&id) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The node that is leader in its own eyes (30 s at most).
    pub async fn leader(&self) -> u64 {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            for (id, addr) in &self.addrs {
                if metrics(&http, addr).await["state"] == "Leader" {
                    return *id;
                }
            }
            assert!(Instant::now() < deadline, "no leader within 30 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
