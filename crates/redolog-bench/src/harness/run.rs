//! What every workload's run shares: the counts to sweep, each point's
//! length, the rounds, the device and where the results go.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use super::device::Device;

/// The default `--threads` (clap's `default_value` spells it as text; a
/// test checks the two agree).
pub const DEFAULT_THREADS: [usize; 4] = [1, 4, 16, 64];

/// The default `--time`, seconds per point.
pub const DEFAULT_SECONDS: f64 = 2.0;

/// The options every workload takes (`--threads`, `--time`, `--rounds`,
/// `--device`, `--dir`, `--report-interval`, `--json`, `--plot`).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The counts to sweep: threads, clients or tasks.
    pub threads: Vec<usize>,
    /// Seconds per point.
    pub seconds: f64,
    /// Rounds of interleaved points (tables report medians).
    pub rounds: usize,
    /// Where the logs live and how long an fdatasync takes.
    pub device: Device,
    /// The directory with `--device disk` (default: a temporary one).
    pub dir: Option<PathBuf>,
    /// Seconds between interval lines; 0 prints none.
    pub report_interval: u64,
    /// Write the results as JSON here.
    pub json: Option<PathBuf>,
    /// Draw the results here (SVG, and a PNG beside it).
    pub plot: Option<PathBuf>,
}

/// A bar over a run's measured seconds, on stderr; hidden when stderr is not
/// a terminal, and for runs under a few seconds.
pub fn progress_bar(total_seconds: f64) -> ProgressBar {
    if total_seconds < 5.0 {
        return ProgressBar::hidden();
    }
    let progress = ProgressBar::new(total_seconds.ceil() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} s, {eta} left: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress
}
