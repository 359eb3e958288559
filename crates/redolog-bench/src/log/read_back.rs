//! `redolog-bench read-back`: how fast a log reads back through `Log::read_from` on
//! the open log, against what a user would do without it — close, reopen and
//! iterate recovery — over the same bytes, in interleaved rounds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use redolog::{Config, Durability, Log};

use crate::harness::device::Device;
use crate::harness::stats::median;
use crate::harness::BoxError;

/// Options of `redolog-bench read-back`.
#[derive(Clone, Debug, Args)]
pub struct ReadBackOptions {
    /// Log bytes to write and read back, in GiB.
    #[arg(long, default_value_t = 1.0)]
    pub gib: f64,
    /// Bytes per record.
    #[arg(long, default_value_t = 128)]
    pub record_bytes: usize,
    /// Records per group (one mini-transaction).
    #[arg(long, default_value_t = 4)]
    pub records_per_group: usize,
    /// Rounds; each reads the log once each way, alternating which goes first.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Device profile, as for `bench`: disk, tmpfs or sim:LATENCY.
    #[arg(long, default_value = "disk")]
    pub device: Device,
    /// Directory for the log with --device disk (default: a fresh temporary
    /// directory under the current one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Encrypt the log (`Config::encryption`): every group is opened
    /// (AES-256-GCM) as it is read back.
    #[arg(long)]
    pub encrypted: bool,
}

/// One full read of the log.
#[derive(Clone, Copy, Debug)]
struct Pass {
    groups: u64,
    elapsed: Duration,
}

/// Reads every group `groups` yields; counts them and their record bytes.
fn read_all(groups: impl Iterator<Item = redolog::Result<redolog::Group>>) -> Result<Pass, BoxError> {
    let started = Instant::now();
    let mut count = 0u64;
    let mut bytes = 0usize;
    for group in groups {
        let group = group?;
        count += 1;
        bytes += group.records().map(<[u8]>::len).sum::<usize>();
    }
    std::hint::black_box(bytes);
    Ok(Pass { groups: count, elapsed: started.elapsed() })
}

fn gib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / f64::from(1u32 << 30) / elapsed.as_secs_f64()
}

/// The log written once and read back every round.
struct Written {
    dir: tempfile::TempDir,
    config: Config,
    start: redolog::Lsn,
    end: redolog::Lsn,
    groups: u64,
}

/// Writes about `--gib` of groups into a fresh log; returns it open.
fn fill(options: &ReadBackOptions) -> Result<(Log, Written), BoxError> {
    let dir = options.device.work_dir(options.dir.as_deref(), "redolog-read-back-")?;
    let target = (options.gib * f64::from(1u32 << 30)) as u64;
    // Room for the data, its block headers and a margin: no checkpoint needed.
    let capacity = (target + target / 16 + (64 << 20)).next_multiple_of(1 << 20);
    let base = if options.encrypted { super::systems::encrypted_config() } else { Config::default() };
    let config = base.with_capacity_bytes(capacity);
    let (log, _) = Log::open(dir.path(), config.clone())?;
    let start = log.end_lsn();
    let record = vec![0x5a; options.record_bytes];
    let group: Vec<&[u8]> = vec![record.as_slice(); options.records_per_group];
    let filling = Instant::now();
    let mut groups = 0u64;
    while log.end_lsn().as_u64() - start.as_u64() < target {
        log.append_group(&group)?;
        groups += 1;
    }
    log.wait(log.end_lsn(), Durability::Synced)?;
    let end = log.end_lsn();
    println!(
        "redolog-bench read-back: {} on {}{}, {groups} groups of {} × {} B, {:.2} GiB of log written in {:.1} s",
        dir.path().display(),
        options.device,
        if options.encrypted { ", encrypted" } else { "" },
        options.records_per_group,
        options.record_bytes,
        (end.as_u64() - start.as_u64()) as f64 / f64::from(1u32 << 30),
        filling.elapsed().as_secs_f64()
    );
    Ok((log, Written { dir, config, start, end, groups }))
}

/// One round: the open log read with `read_from`, and the log closed,
/// reopened and read through recovery, in `order`. Returns both passes, the
/// reopen's time and the reopened log.
fn round(log: Log, written: &Written, reader_first: bool) -> Result<(Pass, Pass, Duration, Log), BoxError> {
    let mut log = Some(log);
    let (mut reader, mut recovery, mut scan) = (None, None, Duration::ZERO);
    for turn in [reader_first, !reader_first] {
        if turn {
            let open = log.as_ref().ok_or("the log is open between turns")?;
            reader = Some(read_all(open.read_from(written.start)?)?);
        } else {
            // What a user without a live reader does: close, reopen, iterate.
            drop(log.take());
            let opening = Instant::now();
            let (reopened, groups) = Log::open(written.dir.path(), written.config.clone())?;
            scan = opening.elapsed();
            if (groups.start_lsn(), groups.end_lsn()) != (written.start, written.end) {
                return Err(format!(
                    "recovery covers {}..{}, expected {}..{}",
                    groups.start_lsn(),
                    groups.end_lsn(),
                    written.start,
                    written.end
                )
                .into());
            }
            recovery = Some(read_all(groups)?);
            log = Some(reopened);
        }
    }
    match (reader, recovery, log) {
        (Some(reader), Some(recovery), Some(log)) => Ok((reader, recovery, scan, log)),
        _ => unreachable!("both turns ran and the log was reopened"),
    }
}

/// Fills a log, then reads it back both ways; prints each round and the
/// medians.
pub fn run(options: &ReadBackOptions) -> Result<(), BoxError> {
    if options.rounds == 0 || options.records_per_group == 0 || options.gib.is_nan() || options.gib <= 0.0 {
        return Err("--rounds and --records-per-group must be at least 1, --gib above 0".into());
    }
    let (mut log, written) = fill(options)?;
    let log_bytes = written.end.as_u64() - written.start.as_u64();
    println!("round  read_from GiB/s  recovery GiB/s  ratio  (open's scan s)");
    let (mut reader_rates, mut recovery_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for number in 0..options.rounds {
        let (reader, recovery, scan, reopened) = round(log, &written, number % 2 == 0)?;
        log = reopened;
        if reader.groups != written.groups || recovery.groups != written.groups {
            return Err(
                format!("read {} and {} groups, wrote {}", reader.groups, recovery.groups, written.groups).into()
            );
        }
        let (reader_rate, recovery_rate) =
            (gib_per_s(log_bytes, reader.elapsed), gib_per_s(log_bytes, recovery.elapsed));
        println!(
            "{:>5}  {reader_rate:>15.2}  {recovery_rate:>14.2}  {:>5.2}  ({:.2})",
            number + 1,
            reader_rate / recovery_rate,
            scan.as_secs_f64()
        );
        reader_rates.push(reader_rate);
        recovery_rates.push(recovery_rate);
        ratios.push(reader_rate / recovery_rate);
    }
    println!("median {:>15.2}  {:>14.2}  {:>5.2}", median(reader_rates), median(recovery_rates), median(ratios));
    Ok(())
}
