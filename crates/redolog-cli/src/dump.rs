//! `redolog dump`: a log's files, checkpoints and groups, at pg_waldump's
//! level — a range of LSNs, a limit, the records' payloads, statistics, JSON
//! for scripts, and following a log as it grows.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use redolog::inspect::Inspection;
use redolog::{Group, Lsn};

use crate::inspect::{print_header, BoxError, KeyOptions};
use crate::stats::Stats;
use crate::view::{header_json, View};

/// How often `--follow` re-reads the log.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// `redolog dump`'s options.
#[derive(Debug, clap::Args)]
pub struct DumpOptions {
    /// The log directory, or an archive directory (its groups; --stats and
    /// --follow read logs only).
    pub dir: PathBuf,
    /// Start at this LSN, a group boundary (default: the oldest group
    /// recovery can read, at the checkpoint).
    #[arg(long, value_name = "LSN")]
    pub start: Option<u64>,
    /// Stop at this LSN, a group boundary (default: the end of the log).
    #[arg(long, value_name = "LSN")]
    pub end: Option<u64>,
    /// Show at most N groups.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Show each record: its length and its payload in hex and printable.
    #[arg(long)]
    pub records: bool,
    /// Payload bytes shown per record with --records (0: all of it).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub payload_bytes: usize,
    /// Print statistics of the range instead of its groups: sizes of groups
    /// and records, and groups per fsync as far as the blocks recorded it.
    #[arg(long, conflicts_with_all = ["records", "follow"])]
    pub stats: bool,
    /// One JSON object per line (the log, each group, the summary or the
    /// statistics), for scripts.
    #[arg(long)]
    pub json: bool,
    /// Keep printing groups as the log grows, re-reading it every 200 ms,
    /// until --end or --limit is reached or the tool is interrupted.
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub keys: KeyOptions,
}

/// The range asked for, checked against the log.
#[derive(Clone, Copy, Debug)]
struct Range {
    start: Lsn,
    end: Option<Lsn>,
}

/// Checks `--start` and `--end` against the groups of `inspection`: each must
/// be a group boundary inside what recovery can read, the end after the start.
/// The error names the nearest boundaries.
fn check_range(options: &DumpOptions, inspection: Inspection) -> Result<Range, BoxError> {
    let (oldest, newest) = (inspection.start_lsn, inspection.end_lsn);
    let start = options.start.map_or(oldest, Lsn::from_u64);
    let end = options.end.map(Lsn::from_u64);
    if start < oldest {
        return Err(format!(
            "--start {start} is before the oldest group recovery can read, at LSN {oldest} (the checkpoint)"
        )
        .into());
    }
    if let Some(end) = end.filter(|&end| end <= start) {
        return Err(format!("--end {end} is not after --start {start}: the range is empty").into());
    }
    // A live log may grow past its end while it is followed.
    for (flag, lsn) in [("--start", Some(start)), ("--end", end)] {
        if let Some(lsn) = lsn.filter(|&lsn| lsn > newest && !options.follow) {
            return Err(format!("{flag} {lsn} is past the end of the log, at LSN {newest}").into());
        }
    }
    let wanted: Vec<(&str, Lsn)> =
        [("--start", Some(start)), ("--end", end)].into_iter().filter_map(|(flag, lsn)| Some((flag, lsn?))).collect();
    let last = wanted.iter().map(|(_, lsn)| *lsn).max().unwrap_or(start);
    for group in inspection.groups {
        let group = group?;
        if let Some((flag, lsn)) = wanted.iter().find(|(_, lsn)| group.start_lsn() < *lsn && *lsn < group.end_lsn()) {
            return Err(format!(
                "{flag} {lsn} is not a group boundary: it falls inside the group {}..{}; the nearest boundaries are \
                 {} and {}",
                group.start_lsn(),
                group.end_lsn(),
                group.start_lsn(),
                group.end_lsn()
            )
            .into());
        }
        if group.end_lsn() >= last {
            break;
        }
    }
    Ok(Range { start, end })
}

/// What a pass over the groups has printed so far.
struct Progress {
    /// The end of the last group printed (or the range's start).
    next: Lsn,
    shown: u64,
    records: u64,
    bytes: u64,
}

impl Progress {
    /// Whether the range or the limit is used up.
    fn done(&self, range: Range, limit: Option<u64>) -> bool {
        range.end.is_some_and(|end| self.next >= end) || limit.is_some_and(|limit| self.shown >= limit)
    }
}

/// Prints the header, then the groups or statistics of the range asked for.
pub fn dump(options: &DumpOptions) -> Result<(), BoxError> {
    let inspection = options.keys.inspect(&options.dir)?;
    // A range is checked against the groups before anything is printed, on
    // a snapshot of its own; the whole log needs no check (nor a second scan).
    let range = if options.start.is_none() && options.end.is_none() {
        Range { start: inspection.start_lsn, end: None }
    } else {
        check_range(options, options.keys.inspect(&options.dir)?)?
    };
    let mut out = std::io::stdout().lock();
    if options.json {
        writeln!(out, "{}", header_json(&inspection))?;
    } else {
        print_header(&mut out, &inspection)?;
    }
    if options.stats {
        let stats = Stats::of(inspection, range.start, range.end, options.limit)?;
        return stats.print(&mut out, options.json);
    }
    let view = View {
        json: options.json,
        records: options.records,
        payload_bytes: options.payload_bytes,
        follow: options.follow,
    };
    let mut progress = Progress { next: range.start, shown: 0, records: 0, bytes: 0 };
    print_groups(&mut out, &view, inspection, range, options.limit, &mut progress)?;
    while options.follow && !progress.done(range, options.limit) {
        out.flush()?;
        std::thread::sleep(FOLLOW_EVERY);
        let inspection = options.keys.inspect(&options.dir)?;
        if inspection.start_lsn > progress.next {
            // The holder checkpointed and wrote over groups not read yet.
            view.gap(&mut out, progress.next, inspection.start_lsn)?;
            progress.next = inspection.start_lsn;
        }
        print_groups(&mut out, &view, inspection, range, options.limit, &mut progress)?;
    }
    view.summary(&mut out, progress.shown, progress.records, progress.bytes)?;
    Ok(())
}

/// Prints the groups of `inspection` from `progress.next` on, within `range`
/// and `limit`. A live log that changed under the snapshot ends the pass
/// (said so unless following, which reads again).
fn print_groups(
    out: &mut impl Write,
    view: &View,
    inspection: Inspection,
    range: Range,
    limit: Option<u64>,
    progress: &mut Progress,
) -> Result<(), BoxError> {
    let live = inspection.in_use;
    for group in inspection.groups {
        if progress.done(range, limit) {
            break;
        }
        let group: Group = match group {
            Ok(group) => group,
            Err(error) if live => {
                view.snapshot_ends(out, &error)?;
                break;
            }
            Err(error) => return Err(error.into()),
        };
        if group.end_lsn() <= progress.next {
            continue;
        }
        view.group(out, &group)?;
        progress.next = group.end_lsn();
        progress.shown += 1;
        progress.records += group.record_count() as u64;
        progress.bytes += group.records().map(|record| record.len() as u64).sum::<u64>();
    }
    Ok(())
}
