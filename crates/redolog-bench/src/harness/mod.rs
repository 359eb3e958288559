//! What every workload of the benchmark shares: the device profiles and the
//! process-wide fdatasync hook, the machine's description, a CPU quota, the
//! one round driver, medians and histograms, plots. Nothing here knows a
//! workload: the workloads import the harness, never the other way round.

pub mod cleanup;
pub mod device;
pub mod machine;
pub mod plot;
pub mod quota;
pub mod rounds;
pub mod run;
pub mod stats;
pub mod sync_hook;

/// Any error a benchmark reports (printed, then exit 1).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `--prometheus ADDR`: installs the Prometheus exporter (its own listener
/// thread) as the process's `metrics` recorder, before any log is opened so
/// the logs' histograms reach it too. The exporter's listener is a Tokio and
/// hyper server: built with the `prometheus` feature only.
pub fn serve_prometheus(listen: std::net::SocketAddr) -> Result<(), BoxError> {
    #[cfg(feature = "prometheus")]
    {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(listen)
            .install()
            .map_err(|error| format!("--prometheus {listen}: {error}"))?;
        redolog::export::describe();
        metrics::describe_counter!("redolog_bench_commits_total", "Commits of the benchmark point so far");
        eprintln!("serving the live counters at http://{listen}/metrics");
        Ok(())
    }
    #[cfg(not(feature = "prometheus"))]
    Err(format!(
        "--prometheus {listen}: the exporter is built with the prometheus feature: \
         cargo run --release --features prometheus -- bench … --prometheus {listen}"
    )
    .into())
}
