//! etcd 3.4 as the key-value service's peer (`--workload kv`, built with
//! `--features peers`): three `etcd` processes on loopback, each started
//! through this binary's hidden `child` command so the kernel kills it
//! when the benchmark dies, and a gRPC client of etcd's `KV` and
//! `Maintenance` services (tonic, with the few messages it sends declared
//! here for prost: etcd's `rpc.proto` field numbers, no code generation).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};

use super::processes::{free_address, serving, Nodes};
use crate::harness::BoxError;

/// etcd's `ResponseHeader`.
#[derive(Clone, PartialEq, prost::Message)]
struct ResponseHeader {
    #[prost(uint64, tag = "2")]
    member_id: u64,
    #[prost(uint64, tag = "4")]
    raft_term: u64,
}

/// etcd's `PutRequest` (key and value; no lease, no previous value).
#[derive(Clone, PartialEq, prost::Message)]
struct PutRequest {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// etcd's `PutResponse`, `TxnResponse` and `StatusResponse`, as far as read.
#[derive(Clone, PartialEq, prost::Message)]
struct Answer {
    #[prost(message, optional, tag = "1")]
    header: Option<ResponseHeader>,
    /// `StatusResponse.leader`: the member this one follows.
    #[prost(uint64, tag = "4")]
    leader: u64,
    /// `StatusResponse.raftTerm`.
    #[prost(uint64, tag = "6")]
    raft_term: u64,
}

/// etcd's `RequestOp`, its put arm (a oneof is plain fields on the wire).
#[derive(Clone, PartialEq, prost::Message)]
struct RequestOp {
    #[prost(message, optional, tag = "2")]
    request_put: Option<PutRequest>,
}

/// etcd's `TxnRequest` without comparisons: its `success` operations run.
#[derive(Clone, PartialEq, prost::Message)]
struct TxnRequest {
    #[prost(message, repeated, tag = "2")]
    success: Vec<RequestOp>,
}

/// etcd's `StatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct StatusRequest {}

/// Puts per transaction while loading: etcd's `--max-txn-ops` default.
const TXN_OPS: u64 = 128;

/// A client of one etcd member (the leader): `channels` HTTP/2 connections
/// the writers share.
#[derive(Clone)]
pub struct Etcd {
    channels: Vec<Channel>,
}

/// One unary call of `method` on `channel`, answered within 10 s (the
/// service's `TIMEOUT`).
async fn call<M: prost::Message + 'static>(
    channel: &Channel,
    method: &'static str,
    message: M,
) -> Result<Answer, BoxError> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await?;
    let mut request = tonic::Request::new(message);
    request.set_timeout(Duration::from_secs(10));
    let codec = tonic_prost::ProstCodec::<M, Answer>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(method);
    Ok(grpc.unary(request, path, codec).await?.into_inner())
}

impl Etcd {
    /// One put through channel `client % channels`.
    pub async fn put(&self, client: usize, key: Vec<u8>, value: Vec<u8>) -> Result<(), BoxError> {
        let channel = &self.channels[client % self.channels.len()];
        call(channel, "/etcdserverpb.KV/Put", PutRequest { key, value }).await.map(drop)
    }

    /// The leader's term.
    pub async fn term(&self) -> Result<u64, BoxError> {
        Ok(call(&self.channels[0], "/etcdserverpb.Maintenance/Status", StatusRequest {}).await?.raft_term)
    }

    /// Loads keys `0..keys` named by `key`, in transactions of `TXN_OPS`
    /// puts, eight at a time.
    pub async fn load(&self, keys: u64, value: &str, key: fn(u64) -> String) -> Result<(), BoxError> {
        const LOADERS: u64 = 8;
        let mut tasks = Vec::new();
        for loader in 0..LOADERS {
            let (channel, value) = (self.channels[0].clone(), value.as_bytes().to_vec());
            tasks.push(tokio::spawn(async move {
                let mut first = loader * TXN_OPS;
                while first < keys {
                    let success = (first..(first + TXN_OPS).min(keys))
                        .map(|index| RequestOp {
                            request_put: Some(PutRequest { key: key(index).into_bytes(), value: value.clone() }),
                        })
                        .collect();
                    call(&channel, "/etcdserverpb.KV/Txn", TxnRequest { success }).await?;
                    first += LOADERS * TXN_OPS;
                }
                Ok::<(), BoxError>(())
            }));
        }
        for task in tasks {
            task.await.map_err(|error| error.to_string())??;
        }
        Ok(())
    }
}

/// Starts three etcd members in `dir` and connects to the leader once one
/// leads (30 s at most): the processes and a client of `connections`
/// HTTP/2 connections to it.
pub(super) async fn start(dir: &Path, connections: usize) -> Result<(Nodes, Etcd), BoxError> {
    let found = Command::new("etcd").arg("--version").stdout(Stdio::null()).status();
    if !found.is_ok_and(|status| status.success()) {
        return Err("etcd not found on PATH: install etcd 3.4 (Debian: apt-get install etcd-server)".into());
    }
    let members: Vec<(SocketAddr, SocketAddr)> =
        (0..3).map(|_| Ok((free_address()?, free_address()?))).collect::<Result<_, BoxError>>()?;
    let cluster: Vec<String> =
        members.iter().enumerate().map(|(at, (_, peer))| format!("n{}=http://{peer}", at + 1)).collect();
    std::fs::create_dir_all(dir)?;
    let mut nodes = Nodes(Vec::new());
    for (at, (client, peer)) in members.iter().enumerate() {
        let name = format!("n{}", at + 1);
        let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
        let child = Command::new(std::env::current_exe()?)
            .args(["child", &format!("--parent={}", std::process::id()), "--", "etcd"])
            .args(["--name", &name, "--data-dir", &dir.join(&name).display().to_string()])
            .args(["--listen-client-urls", &format!("http://{client}"), "--advertise-client-urls"])
            .arg(format!("http://{client}"))
            .args(["--listen-peer-urls", &format!("http://{peer}"), "--initial-advertise-peer-urls"])
            .arg(format!("http://{peer}"))
            .args(["--initial-cluster", &cluster.join(","), "--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "redolog-bench", "--logger", "zap"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        nodes.0.push(child);
    }
    let mut connected = Vec::new();
    for (client, _) in &members {
        serving(*client).await?;
        connected.push(Endpoint::from_shared(format!("http://{client}"))?.connect().await?);
    }
    let leader = leader(&connected).await?;
    let mut channels = vec![connected[leader].clone()];
    for _ in 1..connections {
        channels.push(Endpoint::from_shared(format!("http://{}", members[leader].0))?.connect().await?);
    }
    Ok((nodes, Etcd { channels }))
}

/// The member (by place) that leads in its own eyes, once one does.
async fn leader(members: &[Channel]) -> Result<usize, BoxError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for (at, channel) in members.iter().enumerate() {
            if let Ok(status) = call(channel, "/etcdserverpb.Maintenance/Status", StatusRequest {}).await {
                if status.header.is_some_and(|header| header.member_id == status.leader && status.leader != 0) {
                    return Ok(at);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("no etcd member led within 30 s".into())
}
