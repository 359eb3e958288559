//! One node of a replicated key-value service: an openraft 0.10 node on a
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
//! The routes are in `api.rs`; the Raft network in `network.rs`; the state
//! machine, with its snapshots on disk, in `machine.rs` (docs/RAFT.md, "A
//! cluster of processes").

mod api;
mod machine;
mod network;

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use redolog_raft::openraft_0_10::{openraft, RedologLogStore};

use api::Node;
use machine::{Machine, TypeConfig};

/// A node of the replicated key-value service.
#[derive(Parser)]
struct Args {
    /// This node's id (a positive integer, unique in the cluster).
    #[arg(long)]
    id: u64,
    /// Where to serve the other nodes and the clients (port 0: any free
    /// port; the node prints the one it got).
    #[arg(long)]
    listen: String,
    /// The node's directory: its redolog log (`raft-log/`) and its state
    /// machine's snapshot.
    #[arg(long)]
    dir: PathBuf,
    /// The log's capacity in MiB: room for the entries between two
    /// snapshots.
    #[arg(long, default_value_t = 64)]
    log_mib: u64,
    /// Take a snapshot (and purge the log behind it) every this many
    /// entries.
    #[arg(long, default_value_t = 5000)]
    snapshot_every: u64,
    /// Entries kept in the log behind a snapshot (openraft's
    /// `max_in_snapshot_log_to_keep`): a follower further behind catches up
    /// by the snapshot.
    #[arg(long, default_value_t = 1000)]
    keep_logs: u64,
    /// `ID=HOST:PORT`: send Raft's RPCs for node ID there instead of its
    /// address in the membership (a proxy that a fault test can cut).
    /// Repeatable.
    #[arg(long = "route", value_parser = parse_route)]
    routes: Vec<(u64, String)>,
    /// Test only, unsafe: answer `/api/read` from this node's machine
    /// without openraft's read index — stale reads, the fault test's
    /// negative control.
    #[arg(long, hide = true)]
    unsafe_reads: bool,
}

fn parse_route(text: &str) -> Result<(u64, String), String> {
    let (id, addr) = text.split_once('=').ok_or_else(|| format!("--route {text}: expected ID=HOST:PORT"))?;
    let id = id.parse().map_err(|error| format!("--route {text}: node id {id:?}: {error}"))?;
    Ok((id, addr.to_string()))
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let config = openraft::Config {
        cluster_name: "redolog-kv".into(),
        heartbeat_interval: 100,
        election_timeout_min: 500,
        election_timeout_max: 1000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(args.snapshot_every),
        max_in_snapshot_log_to_keep: args.keep_logs,
        ..openraft::Config::default()
    };
    let config = Arc::new(config.validate()?);
    let log_config = redolog::Config { capacity_bytes: args.log_mib << 20, ..redolog::Config::default() };
    let store = RedologLogStore::<TypeConfig>::open(args.dir.join("raft-log"), log_config)?;
    let machine = Machine::open(&args.dir.join("state"))?;
    let network = network::Network::with_routes(args.routes.into_iter().collect());
    let raft = Node::new(args.id, config, network, store, machine.clone()).await?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("node {} listening on {}", args.id, listener.local_addr()?);
    let app = api::App { id: args.id, raft, machine, unsafe_reads: args.unsafe_reads };
    axum::serve(listener, api::routes(app)).await?;
    Ok(())
}
