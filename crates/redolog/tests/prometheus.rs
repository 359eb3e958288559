//! Goal: with the `metrics` feature, a Prometheus scrape over HTTP finds the
//! log's counters at their values and its histograms (src/export.rs).

use std::net::{SocketAddr, TcpListener};

use metrics_exporter_prometheus::PrometheusBuilder;
use redolog::{Config, Durability, Log};

/// A loopback port nobody listens on (bound, then released for the exporter).
fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.local_addr().expect("local address")
}

/// The value of the series `name{labels}` in a scrape.
fn value(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn a_scrape_finds_the_logs_counters_and_histograms() {
    let listen = free_port();
    PrometheusBuilder::new().with_http_listener(listen).install().expect("exporter installs");
    redolog::export::describe();
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = Log::open(dir.path(), Config::default()).expect("open");
    for index in 0..20u32 {
        log.commit(&index.to_le_bytes(), Durability::Synced).expect("commit");
    }
    log.publish_metrics();
    let metrics = log.metrics();

    let url = format!("http://{listen}/metrics");
    let started = std::time::Instant::now();
    let scrape = loop {
        match ureq::get(&url).call() {
            Ok(mut response) => break response.body_mut().read_to_string().expect("a text body"),
            // The listener starts on the exporter's own thread.
            Err(error) if started.elapsed() < std::time::Duration::from_secs(10) => {
                eprintln!("scrape not served yet: {error}");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(error) => panic!("no scrape from {url} in 10 s: {error}"),
        }
    };

    let label = format!("{{log=\"{}\"}}", dir.path().display());
    let counter = |name: &str| value(&scrape, &format!("{name}{label}"));
    assert_eq!(counter("redolog_log_records_total"), Some(20.0), "{scrape}");
    assert_eq!(counter("redolog_log_fsyncs_total"), Some(metrics.log_fsyncs as f64));
    assert!(metrics.log_fsyncs >= 1);
    assert_eq!(counter("redolog_log_lsn_last_flush"), Some(metrics.lsns.log_lsn_last_flush as f64));
    assert_eq!(counter("redolog_log_on_flush_timeouts_with_work_total"), Some(0.0));
    assert!(counter("redolog_log_fsync_time_microseconds_total").is_some());
    // The per-event histograms: one fsync sample per fdatasync, one commit
    // wait per Synced commit.
    assert_eq!(counter("redolog_fsync_seconds_count"), Some(metrics.fsync_us.count as f64), "{scrape}");
    assert_eq!(counter("redolog_commit_wait_seconds_count"), Some(20.0));
    assert!(scrape.contains("# HELP redolog_log_fsyncs_total fdatasync calls on log files"), "{scrape}");
}
