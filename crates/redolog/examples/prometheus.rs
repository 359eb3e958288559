//! Serves a log's metrics to Prometheus while threads commit to it.
//!
//! ```text
//! cargo run --release -p redolog --features metrics --example prometheus -- 127.0.0.1:9898 30
//! curl -s http://127.0.0.1:9898/metrics | grep redolog_log_fsyncs_total
//! ```
//!
//! The exporter (`metrics-exporter-prometheus`) is installed before the log
//! is opened, so the per-event histograms reach it; a thread publishes the
//! counters every second (`Log::publish_metrics`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use redolog::{Config, Durability, Log};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:9898").parse()?;
    let seconds: u64 = args.next().as_deref().unwrap_or("30").parse()?;

    PrometheusBuilder::new().with_http_listener(listen).install()?;
    redolog::export::describe();
    let dir = tempfile::tempdir()?;
    let (log, _) = Log::open(dir.path(), Config::default())?;
    println!("serving http://{listen}/metrics for {seconds} s; log in {}", dir.path().display());

    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<(), BoxError> {
        let committers: Vec<_> = (0..4)
            .map(|thread| {
                let (log, stop) = (&log, &stop);
                scope.spawn(move || -> redolog::Result<()> {
                    while !stop.load(Ordering::Relaxed) {
                        log.commit(format!("thread {thread}").as_bytes(), Durability::Synced)?;
                    }
                    Ok(())
                })
            })
            .collect();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(seconds) {
            log.publish_metrics();
            std::thread::sleep(Duration::from_secs(1));
        }
        stop.store(true, Ordering::Relaxed);
        for committer in committers {
            committer.join().map_err(|_| "a committer panicked")??;
        }
        Ok(())
    })?;
    log.close()?;
    Ok(())
}
