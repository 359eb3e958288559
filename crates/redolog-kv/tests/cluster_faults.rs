//! Goal: the replicated key-value service stays linearizable, and loses no
//! acknowledged write, while a nemesis kills, pauses and partitions its
//! nodes (docs/RAFT.md, "The fault test").
//! Method: five `redolog-kv` processes on loopback, every Raft link
//! through a proxy in this process that the nemesis can cut; client tasks
//! issue reads (to any node: a follower redirects to the leader), writes
//! and compare-and-sets (alone, as a batch of one, or through the service's
//! batching `Client`, which all the tasks share: every write path) on three
//! keys and record the history; the nemesis
//! cycles through SIGKILL and restart of a node, SIGSTOP of the leader, a
//! majority/minority partition, a bridge and a node's slowed links. Afterwards every fault is
//! healed, every node must converge to the same map, a final read of each
//! key joins the history, and the history is checked key by key
//! (tests/checker). The negative control starts the nodes with
//! `--unsafe-reads` (reads from a node's own machine, no read index): the
//! checker must catch it.
//! One run of each in `cargo test` (20 s, the control 10 s); more with
//! `REDOLOG_CLUSTER_FAULT_RUNS=20 REDOLOG_CLUSTER_FAULT_SECONDS=30 cargo test
//! -p redolog-kv --test cluster_faults -- --nocapture --test-threads=1`
//! (`REDOLOG_CLUSTER_FAULT_CONTROL_SECONDS` for the control's length).

mod checker;
mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use checker::{History, Op, Ret};
use common::Nodes;
use serde_json::{json, Value};

const NODES: u64 = 5;
const KEYS: [&str; 3] = ["a", "b", "c"];
const CLIENTS: u64 = 4;

/// The leader some node names, if any.
async fn named_leader(cluster: &Nodes, client: &reqwest::Client) -> Option<u64> {
    for addr in cluster.addrs.values() {
        if let Some(leader) = common::metrics(client, addr).await["current_leader"].as_u64() {
            return Some(leader);
        }
    }
    None
}

/// How an operation ended.
enum Outcome {
    /// It returned this; how it was served (which node, which log
    /// position).
    Done(Ret, String),
    /// It surely did not take effect (not the leader, no leader known, a
    /// read that timed out on the server): it is taken out of the history.
    Failed,
    /// It may or may not have taken effect (a client timeout, a broken
    /// connection, a write the server gave up waiting for).
    Unknown,
}

/// Sends `op` on `key` to node `at`, following "not leader" answers to the
/// leader they name (a few times at most). A write or compare-and-set goes
/// alone to `/api/write`, or, `batched`, as a batch of one to `/api/writes`
/// (what the service's `Client` sends; its answer is the batch's element).
async fn perform(
    client: &reqwest::Client,
    addrs: &BTreeMap<u64, SocketAddr>,
    mut at: u64,
    key: &str,
    op: &Op,
    session: Value,
    batched: bool,
) -> Outcome {
    for _ in 0..3 {
        let base = format!("http://{}", addrs[&at]);
        let write = |body: Value| {
            if batched {
                client.post(format!("{base}/api/writes")).json(&[body])
            } else {
                client.post(format!("{base}/api/write")).json(&body)
            }
        };
        let sent = match op {
            Op::Read => client.get(format!("{base}/api/read")).query(&[("key", key)]).send().await,
            Op::Write(value) => {
                write(json!({"op": "set", "key": key, "value": value, "session": session})).send().await
            }
            Op::Cas { expected, new } => {
                write(json!({"op": "cas", "key": key, "expected": expected, "new": new, "session": session}))
                    .send()
                    .await
            }
        };
        let Ok(response) = sent else {
            // Refused before sending: nothing happened. Anything else may
            // have reached the node.
            return match sent {
                Err(error) if error.is_connect() => Outcome::Failed,
                _ => Outcome::Unknown,
            };
        };
        let status = response.status().as_u16();
        let served = match response.headers().get("x-served") {
            Some(header) => header.to_str().unwrap_or_default().to_string(),
            None => String::new(),
        };
        let Ok(mut body) = response.json::<Value>().await else { return Outcome::Unknown };
        let mut status = status;
        if batched && status == 200 && *op != Op::Read {
            // The batch's one element: its own status where not 200.
            let Some(element) = body.as_array_mut().and_then(|elements| elements.pop()) else {
                return Outcome::Unknown;
            };
            status = element["status"].as_u64().map_or(200, |status| status as u16);
            body = element;
        }
        let written =
            || format!("asked node {at}, written by node {} at {}: {}", body["node"], body["log_id"], body["response"]);
        let read = || format!("asked node {at}, {served}");
        match (status, op) {
            (200, Op::Read) => return Outcome::Done(Ret::Read(body["value"].as_str().map(str::to_string)), read()),
            (404, Op::Read) => return Outcome::Done(Ret::Read(None), read()),
            (200, Op::Write(_)) => return Outcome::Done(Ret::Written, written()),
            (200, Op::Cas { .. }) => return Outcome::Done(Ret::Cas(body["response"]["applied"] == true), written()),
            (503, _) => match body["leader"]["id"].as_u64() {
                Some(leader) if leader != at => at = leader,
                _ => return Outcome::Failed,
            },
            (504, Op::Read) => return Outcome::Failed,
            _ => return Outcome::Unknown,
        }
    }
    Outcome::Failed
}

/// Sends a write or compare-and-set through the service's batching
/// `Client`, which every client task shares (so batches carry several
/// tasks' writes) and which follows the leader and moves on from a dead
/// node by itself.
async fn perform_batched(writer: &redolog_kv::Client, key: &str, op: &Op, session: redolog_kv::Session) -> Outcome {
    use redolog_kv::{Command, Request};
    let request = match op {
        Op::Read => unreachable!("reads go over HTTP"),
        Op::Write(value) => Request::Set { key: key.to_string(), value: value.clone() },
        Op::Cas { expected, new } => {
            Request::Cas { key: key.to_string(), expected: expected.clone(), new: new.clone() }
        }
    };
    match writer.write(Command { request, session: Some(session) }).await {
        Ok(written) => {
            let note = format!(
                "through the client, written by node {} at {}: {:?}",
                written.node, written.log_id, written.response
            );
            let ret = if matches!(op, Op::Cas { .. }) { Ret::Cas(written.response.applied) } else { Ret::Written };
            Outcome::Done(ret, note)
        }
        Err(error) if error.may_have_applied() => Outcome::Unknown,
        Err(_) => Outcome::Failed,
    }
}

/// One client task: operations on random keys until `deadline`, each
/// recorded in `history`. Writes are numbered in the client's session
/// (docs/RAFT.md, "Client sessions"): one whose outcome is unknown is sent
/// again, with the same number, until some node answers it — the machine
/// applies it once — so it ends with a return, not pending to the end (the
/// checker's search grows with the operations left pending). Only one that
/// stays unanswered `RETRY_GRACE` past the deadline ends unknown, and then
/// the client takes a new id.
async fn client_loop(
    addrs: BTreeMap<u64, SocketAddr>,
    writer: redolog_kv::Client,
    history: Arc<Mutex<History>>,
    ids: Arc<AtomicU64>,
    deadline: Instant,
    seed: u64,
) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(8)).build().expect("client");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut id = ids.fetch_add(1, Ordering::Relaxed);
    let (mut counter, mut seq) = (0, 0);
    while Instant::now() < deadline {
        let key = KEYS[rng.usize(..KEYS.len())];
        counter += 1;
        let value = format!("{seed}-{counter}");
        let op = match rng.u8(..10) {
            0..=3 => Op::Read,
            4..=7 => Op::Write(value),
            _ => Op::Cas { expected: history_value(&history, key), new: value },
        };
        history.lock().expect("history").invoke(id, key, op.clone());
        seq += 1;
        let session = json!({"client": id, "seq": seq});
        let mut maybe_applied = false;
        loop {
            // Reads go to any node (a follower redirects to the leader
            // unless it serves unsafe reads); writes start at a random node.
            let at = 1 + rng.u64(..NODES);
            let outcome = match rng.u8(..3) {
                0 if op != Op::Read => {
                    perform_batched(&writer, key, &op, redolog_kv::Session { client: id, seq }).await
                }
                path => perform(&client, &addrs, at, key, &op, session.clone(), path == 1).await,
            };
            match outcome {
                Outcome::Done(ret, note) => {
                    history.lock().expect("history").returned_noted(id, ret, note);
                    break;
                }
                // A read without an answer constrains nothing.
                Outcome::Failed | Outcome::Unknown if op == Op::Read => {
                    history.lock().expect("history").cancel(id);
                    break;
                }
                Outcome::Failed if !maybe_applied => {
                    history.lock().expect("history").cancel(id);
                    break;
                }
                Outcome::Failed | Outcome::Unknown => maybe_applied = true,
            }
            if Instant::now() > deadline + RETRY_GRACE {
                (id, seq) = (ids.fetch_add(1, Ordering::Relaxed), 0);
                break;
            }
            tokio::time::sleep(Duration::from_millis(rng.u64(100..300))).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(5..25))).await;
    }
}

/// How long past the run's end a client goes on retrying a write whose
/// outcome it has not learnt (every fault is healed by then).
const RETRY_GRACE: Duration = Duration::from_secs(45);

/// A value a compare-and-set may expect: the last one written to `key` in
/// the history, if any (a guess; it need not be current).
fn history_value(history: &Mutex<History>, key: &str) -> Option<String> {
    history.lock().expect("history").last_written(key)
}

/// The nemesis: until `deadline`, one fault at a time — a node killed and
/// restarted, the leader paused, a majority/minority partition, a bridge,
/// a node's links slowed (sometimes past the election timeout) — each held
/// for a second or two, then healed.
async fn nemesis(cluster: &mut Nodes, deadline: Instant, seed: u64) -> Vec<String> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut done = Vec::new();
    let mut step = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(rng.u64(500..1500))).await;
        let hold = Duration::from_millis(rng.u64(1000..2500));
        match step % 5 {
            0 => {
                let id = named_leader(cluster, &client).await.filter(|_| rng.bool()).unwrap_or(1 + rng.u64(..NODES));
                cluster.kill(id);
                tokio::time::sleep(hold).await;
                cluster.spawn(id).await;
                done.push(format!("kill {id}"));
            }
            1 => {
                let id = named_leader(cluster, &client).await.unwrap_or(1 + rng.u64(..NODES));
                cluster.signal(id, rustix::process::Signal::STOP);
                tokio::time::sleep(hold).await;
                cluster.signal(id, rustix::process::Signal::CONT);
                done.push(format!("pause {id}"));
            }
            2 => {
                let mut ids: Vec<u64> = (1..=NODES).collect();
                rng.shuffle(&mut ids);
                let (minority, majority) = ids.split_at(2);
                cluster.cut_between(minority, majority, true);
                tokio::time::sleep(hold).await;
                cluster.heal();
                done.push(format!("partition {minority:?} | {majority:?}"));
            }
            3 => {
                let id = named_leader(cluster, &client).await.filter(|_| rng.bool()).unwrap_or(1 + rng.u64(..NODES));
                let delay = Duration::from_millis(rng.u64(20..800));
                cluster.slow(id, delay);
                tokio::time::sleep(hold).await;
                cluster.heal();
                done.push(format!("slow {id} by {} ms", delay.as_millis()));
            }
            _ => {
                let mut ids: Vec<u64> = (1..=NODES).collect();
                rng.shuffle(&mut ids);
                // ids[0..2] and ids[3..5] cannot talk; ids[2] talks to both.
                cluster.cut_between(&ids[0..2], &ids[3..5], true);
                tokio::time::sleep(hold).await;
                cluster.heal();
                done.push(format!("bridge {:?} - {} - {:?}", &ids[0..2], ids[2], &ids[3..5]));
            }
        }
        step += 1;
    }
    done
}

/// Waits until every node's map is the same; returns it.
async fn converged(cluster: &Nodes) -> Result<Value, String> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = Vec::new();
    while Instant::now() < deadline {
        last.clear();
        for addr in cluster.addrs.values() {
            let dump = match client.get(format!("http://{addr}/api/dump")).send().await {
                Ok(response) => response.json::<Value>().await.unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            last.push(dump);
        }
        if last.iter().all(|dump| !dump.is_null() && *dump == last[0]) {
            return Ok(last.swap_remove(0));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("the nodes did not converge within 30 s: {last:?}"))
}

/// One run: the cluster, the clients and the nemesis for `seconds`, then
/// the checks. The history's verdict, or why the run itself failed.
async fn run(seconds: u64, unsafe_reads: bool, seed: u64) -> Result<(), String> {
    // Snapshots often, so restarted and partitioned nodes catch up by
    // snapshot too.
    let mut flags = vec!["--snapshot-every=200", "--keep-logs=100"];
    if unsafe_reads {
        flags.push("--unsafe-reads");
    }
    let mut cluster = Nodes::start(NODES, &flags).await;
    let history = Arc::new(Mutex::new(History::default()));
    let ids = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut nodes = cluster.addrs.values().map(ToString::to_string);
    let writer = redolog_kv::Client::with_fallbacks(nodes.next().expect("nodes"), nodes);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let writer = writer.clone();
            tokio::spawn(client_loop(cluster.addrs.clone(), writer, history.clone(), ids.clone(), deadline, seed + n))
        })
        .collect();
    let faults = nemesis(&mut cluster, deadline, seed).await;
    for client in clients {
        client.await.map_err(|error| format!("a client panicked: {error}"))?;
    }
    cluster.heal();
    let final_map = match converged(&cluster).await {
        Ok(map) => map,
        Err(diverged) => return Err(format!("{diverged}\n{}", cluster.report())),
    };
    // A final read of every key, after everything else: an acknowledged
    // write lost by the cluster fails the check here.
    let client = reqwest::Client::builder().timeout(Duration::from_secs(8)).build().expect("client");
    for key in KEYS {
        // Healed is not yet led: an election may still be running.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let id = ids.fetch_add(1, Ordering::Relaxed);
            history.lock().expect("history").invoke(id, key, Op::Read);
            match perform(&client, &cluster.addrs, 1 + id % NODES, key, &Op::Read, Value::Null, false).await {
                Outcome::Done(ret, note) => {
                    history.lock().expect("history").returned_noted(id, ret, note);
                    break;
                }
                Outcome::Failed => history.lock().expect("history").cancel(id),
                Outcome::Unknown => {}
            }
            if Instant::now() > deadline {
                return Err(format!("no final read of {key} succeeded within 30 s of healing"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let history = std::mem::take(&mut *history.lock().expect("history"));
    let operations = history.len();
    eprintln!(
        "cluster_faults (seed {seed}, {seconds} s{}): {operations} operations ({} unknown), faults: {}; final map {final_map}",
        if unsafe_reads { ", unsafe reads" } else { "" },
        history.pending(),
        faults.join(", ")
    );
    // The checker's search is exhaustive when a history is not
    // linearizable: bounded here, so a run never hangs.
    let (verdict, decided) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = verdict.send(history.check());
    });
    let started = Instant::now();
    let verdict = decided.recv_timeout(CHECK_BOUND).unwrap_or_else(|_| {
        Err(format!("the checker did not decide within {CHECK_BOUND:?} on {operations} operations"))
    });
    eprintln!("cluster_faults (seed {seed}): checked in {:.1} s", started.elapsed().as_secs_f64());
    verdict
}

/// How long the checker may take on one history.
const CHECK_BOUND: Duration = Duration::from_secs(120);

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|text| text.parse().ok()).unwrap_or(default)
}

/// Runs, and seconds per run.
fn runs() -> (u64, u64) {
    (number("REDOLOG_CLUSTER_FAULT_RUNS", 1), number("REDOLOG_CLUSTER_FAULT_SECONDS", 20))
}

/// One cluster at a time: two of them (ten processes) on a 2-core machine
/// turn the nemesis's short faults into long ones.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

#[test]
fn the_cluster_stays_linearizable_under_kills_pauses_and_partitions() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (count, seconds) = runs();
    let runtime = runtime();
    for _ in 0..count {
        let seed = fastrand::u64(..);
        if let Err(violation) = runtime.block_on(run(seconds, false, seed)) {
            panic!("seed {seed}: {violation}");
        }
    }
}

/// The negative control: nodes that answer reads from their own machine.
/// 10 s in `cargo test` (a stale read needs a fault while reads run), as
/// long as the main runs with `REDOLOG_CLUSTER_FAULT_CONTROL_SECONDS`.
#[test]
fn reads_without_the_read_index_are_caught() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (count, _) = runs();
    let seconds = number("REDOLOG_CLUSTER_FAULT_CONTROL_SECONDS", 10);
    let runtime = runtime();
    let mut caught = 0;
    for _ in 0..count {
        let seed = fastrand::u64(..);
        match runtime.block_on(run(seconds, true, seed)) {
            Err(violation) if violation.contains("not linearizable") => caught += 1,
            Err(undecided) if undecided.contains("did not decide") => {
                eprintln!("cluster_faults: seed {seed}: not caught: {undecided}");
            }
            Err(other) => panic!("seed {seed}: the run failed otherwise: {other}"),
            Ok(()) => eprintln!("cluster_faults: seed {seed}: unsafe reads not caught"),
        }
    }
    eprintln!("cluster_faults: unsafe reads caught in {caught} of {count} runs");
    assert!(caught * 10 >= count * 9, "unsafe reads caught in only {caught} of {count} runs");
}
