//! `redolog-kv`: one node of a replicated key-value service: an openraft 0.10 node on a
//! redolog log store, talking to the other nodes and to its clients over
//! HTTP. Start one process per node, then form the cluster through any of
//! them:
//!
//! ```sh
//! cargo run --release -p redolog-kv -- --id 1 --listen 127.0.0.1:21001 --dir node-1
//! cargo run --release -p redolog-kv -- --id 2 --listen 127.0.0.1:21002 --dir node-2
//! cargo run --release -p redolog-kv -- --id 3 --listen 127.0.0.1:21003 --dir node-3
//! curl -s 127.0.0.1:21001/cluster/init -H 'content-type: application/json' \
//!     -d '{"members": {"1": "127.0.0.1:21001", "2": "127.0.0.1:21002", "3": "127.0.0.1:21003"}}'
//! curl -s 127.0.0.1:21001/api/write -H 'content-type: application/json' -d '{"op": "set", "key": "a", "value": "1"}'
//! curl -s '127.0.0.1:21001/api/read?key=a'
//! ```
//!
//! `scripts/test-cluster.sh` does this and more: it kills the leader and
//! checks that the cluster elects another and that every node converges.
//! The routes are in `api.rs`; the Raft network in `network.rs` (its
//! streamed appends' framing in `frames.rs`); the state
//! machine, with its client sessions and its snapshots on disk, in
//! `machine.rs` ([RAFT, "A cluster of processes"](redolog_raft::docs::raft#a-cluster-of-processes)).
//!
//! The library is the binary's body, so a program that brings its own log
//! store — `redolog-bench`, comparing stores across processes — runs the
//! same node: [`serve`] takes any openraft 0.10 log store for
//! [`TypeConfig`]; [`open_store`] opens the one the binary uses.

mod api;
mod client;
mod frames;
mod identity;
mod machine;
mod network;

use std::path::PathBuf;
use std::sync::Arc;

use redolog_raft::openraft_0_10::{openraft, RedologLogStore};

use api::Node;
pub use api::TIMEOUT;
pub use client::{Client, ClientError, ClientStats, Written, IN_FLIGHT, MAX_BATCH};
use machine::Machine;
pub use machine::{Command, Request, Response, Session, TypeConfig};

/// Sends the node's log — openraft's warnings and errors (an election, a
/// follower unreachable, a leader stepping down), and the node's own
/// (each snapshot's keys, bytes and milliseconds at `info`) — to standard
/// error; `RUST_LOG` (e.g. `redolog_kv=info`) for more than warnings.
pub fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// A node's settings: the `redolog-kv` binary's flags.
///
/// ```
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     node: redolog_kv::Options,
/// }
///
/// let cli = Cli::parse_from(["node", "--id", "1", "--listen", "127.0.0.1:0", "--dir", "node-1"]);
/// assert_eq!(cli.node.id, 1);
/// assert_eq!(cli.node.snapshot_every, 100_000);
/// ```
#[derive(clap::Args, Clone, Debug)]
pub struct Options {
    /// This node's id (a positive integer, unique in the cluster).
    #[arg(long)]
    pub id: u64,
    /// Where to serve the other nodes and the clients (port 0: any free
    /// port; the node prints the one it got).
    #[arg(long)]
    pub listen: String,
    /// The node's directory: its redolog log (`raft-log/`) and its state
    /// machine's snapshot.
    #[arg(long)]
    pub dir: PathBuf,
    /// The log's capacity in MiB: room for the entries between two
    /// snapshots. The node also snapshots (and purges) whenever the log
    /// wants a checkpoint (¾ full), so a burst of large entries never fills
    /// it.
    #[arg(long, default_value_t = 64)]
    pub log_mib: u64,
    /// Take a snapshot (and purge the log behind it) every this many
    /// entries, at most (etcd's `--snapshot-count` default): each snapshot
    /// writes the whole data set, so a large one amortised over many
    /// writes. Refused at start if the log cannot hold that many entries.
    #[arg(long, default_value_t = 100_000)]
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot (openraft's
    /// `max_in_snapshot_log_to_keep`): a follower further behind catches up
    /// by the snapshot.
    #[arg(long, default_value_t = 1000)]
    pub keep_logs: u64,
    /// `ID=HOST:PORT`: send Raft's RPCs for node ID there instead of its
    /// address in the membership (a proxy that a fault test can cut).
    /// Repeatable.
    #[arg(long = "route", value_parser = parse_route)]
    pub routes: Vec<(u64, String)>,
    /// Threads the node runs on (Tokio's workers); default: one per CPU.
    /// With 1 the node runs on one thread (a current-thread runtime), the
    /// right choice when several nodes share a machine's cores: three nodes
    /// on two cores wrote 13 % more with 17 % less CPU per write than on
    /// two workers each (docs/BENCHMARKS.md, "One thread per node
    /// process").
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Test only, unsafe: answer `/api/read` from this node's machine
    /// without openraft's read index — stale reads, the fault test's
    /// negative control.
    #[arg(long, hide = true)]
    pub unsafe_reads: bool,
    /// Test only, unsafe: a leader restarted within its term resumes it
    /// (openraft's `enable_leader_restore`), the way KV-4 forbids — the
    /// negative control of `tests/restarted_leader.rs`.
    #[arg(long, hide = true)]
    pub unsafe_leader_restore: bool,
    /// Test only, unsafe: hand appends and snapshots whose vote is not a
    /// leader's to openraft, the way KV-8 forbids — the negative control of
    /// `tests/stray_votes.rs`, and the way it stops a node's Raft.
    #[arg(long, hide = true)]
    pub unsafe_stray_votes: bool,
}

/// The fewest bytes one entry takes in the log: a write of a one-byte key
/// and value, JSON-encoded, with its log id and the record and group
/// headers — what `--snapshot-every` is checked against.
pub const MIN_ENTRY_BYTES: u64 = 64;

impl Options {
    /// Refuses settings that cannot work, naming them: `--snapshot-every`
    /// or `--keep-logs` entries that the log of `--log-mib` cannot hold
    /// before it wants a checkpoint (¾ of it) — the node would fill its log
    /// before its snapshot came.
    ///
    /// ```
    /// use clap::Parser;
    ///
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     node: redolog_kv::Options,
    /// }
    ///
    /// let ok = Cli::parse_from(["node", "--id", "1", "--listen", "127.0.0.1:0", "--dir", "n"]);
    /// assert!(ok.node.validate().is_ok());
    /// let off = Cli::parse_from(["node", "--id", "1", "--listen", "x", "--dir", "n", "--snapshot-every", "1000000000"]);
    /// let refused = off.node.validate().unwrap_err();
    /// assert!(refused.contains("--snapshot-every 1000000000"), "{refused}");
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        let wanted = (self.log_mib << 20) / 4 * 3;
        let most = wanted / MIN_ENTRY_BYTES;
        for (flag, entries) in [("--snapshot-every", self.snapshot_every), ("--keep-logs", self.keep_logs)] {
            if entries > most {
                return Err(format!(
                    "{flag} {entries}: the log of --log-mib {} holds at most {most} entries ({MIN_ENTRY_BYTES} bytes \
                     each at least) before it wants a checkpoint; lower {flag} or raise --log-mib",
                    self.log_mib
                ));
            }
        }
        if self.log_mib == 0 {
            return Err("--log-mib 0: the log needs room".into());
        }
        Ok(())
    }

    /// The runtime `--threads` asks for: a current-thread runtime for 1,
    /// else that many workers (one per CPU without `--threads`).
    ///
    /// ```
    /// use clap::Parser;
    ///
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     node: redolog_kv::Options,
    /// }
    ///
    /// let cli = Cli::parse_from(["node", "--id", "1", "--listen", "127.0.0.1:0", "--dir", "n", "--threads", "1"]);
    /// let runtime = cli.node.runtime().unwrap();
    /// assert_eq!(runtime.metrics().num_workers(), 1);
    /// assert!(Cli::try_parse_from(["node", "--id", "1", "--listen", "x", "--dir", "n", "--threads", "0"]).is_err());
    /// ```
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        match self.threads {
            Some(1) => tokio::runtime::Builder::new_current_thread().enable_all().build(),
            Some(threads) => {
                tokio::runtime::Builder::new_multi_thread().worker_threads(usize::from(threads)).enable_all().build()
            }
            None => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
        }
    }
}

fn parse_route(text: &str) -> Result<(u64, String), String> {
    let (id, addr) = text.split_once('=').ok_or_else(|| format!("--route {text}: expected ID=HOST:PORT"))?;
    let id = id.parse().map_err(|error| format!("--route {text}: node id {id:?}: {error}"))?;
    Ok((id, addr.to_string()))
}

/// What can stop a node: its store, its snapshot directory, its address.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Opens the node's redolog-raft log store in `<dir>/raft-log`, of
/// `--log-mib` capacity: the store the `redolog-kv` binary runs on.
///
/// ```no_run
/// # async fn run(options: redolog_kv::Options) -> Result<(), redolog_kv::Failure> {
/// let store = redolog_kv::open_store(&options)?;
/// redolog_kv::serve(options, store).await
/// # }
/// ```
pub fn open_store(options: &Options) -> Result<RedologLogStore<TypeConfig>, Failure> {
    options.validate()?;
    // Every directory and file of the node is its user's alone (0700,
    // 0600), as the log's are.
    machine::private_dir(&options.dir)?;
    let config = redolog::Config::default().with_capacity_bytes(options.log_mib << 20);
    Ok(RedologLogStore::<TypeConfig>::open(options.dir.join("raft-log"), config)?)
}

/// Runs the node on `store` until the process ends: its state machine from
/// `<dir>/state` (its snapshot), its cluster's identity from
/// `<dir>/cluster-id` (KV-9: Raft's RPCs from another cluster are refused),
/// Raft's RPCs and the client API served on `--listen`, which it prints
/// once bound (`node 1 listening on …`).
///
/// ```no_run
/// # async fn run(options: redolog_kv::Options) -> Result<(), redolog_kv::Failure> {
/// let store = redolog_kv::open_store(&options)?;
/// redolog_kv::serve(options, store).await
/// # }
/// ```
pub async fn serve<S>(options: Options, store: S) -> Result<(), Failure>
where
    S: openraft::storage::RaftLogStorage<TypeConfig> + Pressure + Clone,
{
    options.validate()?;
    let config = openraft::Config {
        cluster_name: "redolog-kv".into(),
        heartbeat_interval: 100,
        election_timeout_min: 500,
        election_timeout_max: 1000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(options.snapshot_every),
        max_in_snapshot_log_to_keep: options.keep_logs,
        // A snapshot streams as a file (KV-10): openraft's default of 200 ms
        // for sending and installing it is shorter than a large data set
        // takes on a loaded machine; a replication closed meanwhile still
        // ends the transfer at once.
        install_snapshot_timeout: 60_000,
        // KV-4: the store keeps the committed id lazily (docs/RAFT.md,
        // "Durability"), so a leader restarted in its own term would serve
        // read-index reads from a machine re-applied only to a stale
        // committed id — acknowledged writes missing (openraft documents
        // this under `enable_leader_restore`). A restarted leader is elected
        // again instead, and commits its new term's blank entry before it
        // serves a read.
        enable_leader_restore: Some(options.unsafe_leader_restore),
        ..openraft::Config::default()
    };
    let config = Arc::new(config.validate()?);
    let machine = Machine::open(&options.dir.join("state"))?;
    let identity = Arc::new(identity::Identity::open(&options.dir)?);
    let network = network::Network::new(identity.clone(), options.routes.into_iter().collect());
    let raft = Node::new(options.id, config, network, store.clone(), machine.clone()).await?;
    // KV-9: before anything is served, a node with Raft state must have
    // its identity.
    identity.check_kept(raft.is_initialized().await?)?;
    let listener = tokio::net::TcpListener::bind(&options.listen).await?;
    println!("node {} listening on {}", options.id, listener.local_addr()?);
    let core = raft.metrics();
    let app = api::App {
        id: options.id,
        raft,
        machine,
        identity,
        unsafe_reads: options.unsafe_reads,
        unsafe_stray_votes: options.unsafe_stray_votes,
    };
    let pressure = tokio::spawn(snapshot_when_the_log_fills(app.raft.clone(), store));
    let outcome = tokio::select! {
        served = axum::serve(without_nagle(listener), api::routes(app)) => Ok(served?),
        stopped = raft_stopped(core) => Err(stopped.into()),
    };
    pressure.abort();
    outcome
}

/// A log store that says when its log wants room back.
pub trait Pressure: Send + Sync + 'static {
    /// Whether the log is past the level at which it wants a checkpoint:
    /// the node takes a snapshot, and openraft purges the log behind it.
    fn room_wanted(&self) -> bool;
}

impl Pressure for RedologLogStore<TypeConfig> {
    fn room_wanted(&self) -> bool {
        self.log().checkpoint_wanted()
    }
}

/// KV-11: a snapshot (and the purge after it) whenever the log wants room,
/// whatever `--snapshot-every` says, so the log never fills because a
/// snapshot was late (a burst of large entries, or snapshots set far
/// apart). One request at a time: the next once the snapshot moved, or
/// after a second if it did not.
async fn snapshot_when_the_log_fills<P: Pressure>(raft: Node, store: P) {
    use openraft::async_runtime::watch::WatchReceiver;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(20));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut asked: Option<(Option<u64>, tokio::time::Instant)> = None;
    loop {
        tick.tick().await;
        if !store.room_wanted() {
            continue;
        }
        let (snapshot, applied) = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow_watched();
            (metrics.snapshot.map(|id| id.index), metrics.last_applied.map(|id| id.index))
        };
        let pending = asked.is_some_and(|(at, when)| at == snapshot && when.elapsed().as_secs() < 1);
        if pending || snapshot == applied {
            continue;
        }
        tracing::info!(?snapshot, ?applied, "the log wants room: snapshot");
        if raft.trigger().snapshot().await.is_err() {
            return;
        }
        asked = Some((snapshot, tokio::time::Instant::now()));
    }
}

/// Waits until the node's Raft core has stopped (a storage error, a bug
/// openraft caught) and says why. The node then ends with that error: a
/// process that went on serving HTTP without Raft would answer health
/// checks and metrics while it refuses every write — a supervisor restarts
/// a node that exits.
async fn raft_stopped(
    mut metrics: openraft::type_config::alias::WatchReceiverOf<TypeConfig, openraft::RaftMetrics<TypeConfig>>,
) -> String {
    use openraft::async_runtime::watch::WatchReceiver;
    loop {
        if let Err(fatal) = &metrics.borrow_watched().running_state {
            return format!("Raft stopped: {fatal}");
        }
        // A last state sent as the core ends is still seen (above) first.
        if metrics.changed().await.is_err() {
            return "Raft stopped: its core ended".to_string();
        }
    }
}

/// A listener whose accepted connections have TCP_NODELAY set, as reqwest
/// sets it on the calling side: an answer leaves at once instead of waiting
/// for the peer's acknowledgement of the one before (Nagle). Three
/// alternations at 16 and 256 clients: 3-8 % more writes/s, in all six pairs
/// (docs/BENCHMARKS.md, "One thread per node process"). A connection that
/// refuses the option still serves.
fn without_nagle(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_node_accepts_connections_without_nagle() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let mut listener = without_nagle(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (accepted, _) = axum::serve::Listener::accept(&mut listener).await;
        assert!(accepted.nodelay().expect("TCP_NODELAY readable"), "an accepted connection keeps Nagle on");
    }
}
