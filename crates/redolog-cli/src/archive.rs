//! `redolog archive verify` and `redolog dump` of an archive directory (the
//! segments `redolog::archive::Archiver` writes; docs/FORMAT.md §9).

use std::io::Write;
use std::path::Path;

use redolog::archive::Archive;
use redolog::Lsn;
use serde_json::json;

use crate::dump::DumpOptions;
use crate::inspect::BoxError;
use crate::view::View;

/// Whether `dir` holds an archive rather than a log: segment files and no
/// `redo.0000`.
pub fn is_archive(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let names: Vec<String> = entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok()).collect();
    !names.iter().any(|name| name == "redo.0000") && names.iter().any(|name| name.ends_with(".seg"))
}

/// Reads every entry of the archive; returns the summary line.
pub fn verify(dir: &Path) -> Result<String, BoxError> {
    let archive = Archive::open(dir)?;
    let summary = archive.verify()?;
    let torn = summary.torn_tail.as_ref().map_or(String::new(), |(path, offset)| {
        format!(
            "; a torn entry at offset {offset} of {} (what a crash of the archiver leaves: its next start cuts it off)",
            path.display()
        )
    });
    let spans = match summary.torn_spans {
        0 => String::new(),
        spans => format!("; {spans} spans a crash tore inside a group (no records)"),
    };
    Ok(format!(
        "{}: sound. archive of log {:032x}: {} segments, {} groups, {} records in LSN {}..{}{spans}{torn}",
        dir.display(),
        archive.log_id(),
        summary.segments,
        summary.groups,
        summary.records,
        summary.start,
        summary.end
    ))
}

/// `redolog dump` of an archive: its header line, then its groups in the
/// range asked for.
pub fn dump(options: &DumpOptions) -> Result<(), BoxError> {
    for (flag, given) in [("--stats", options.stats), ("--follow", options.follow)] {
        if given {
            return Err(format!(
                "{flag} reads a log, not an archive: {} holds archive segments",
                options.dir.display()
            )
            .into());
        }
    }
    let archive = Archive::open(&options.dir)?;
    let start = options.start.map_or(archive.start_lsn(), Lsn::from_u64);
    let end = options.end.map(Lsn::from_u64);
    if let Some(end) = end.filter(|&end| end <= start) {
        return Err(format!("--end {end} is not after --start {start}: the range is empty").into());
    }
    let mut out = std::io::stdout().lock();
    if options.json {
        let line = json!({
            "type": "archive",
            "log_id": format!("{:032x}", archive.log_id()),
            "segments": archive.segment_count(),
            "start_lsn": archive.start_lsn().as_u64(),
        });
        writeln!(out, "{line}")?;
    } else {
        writeln!(
            out,
            "archive of log {:032x}, {} segments, from LSN {}",
            archive.log_id(),
            archive.segment_count(),
            archive.start_lsn()
        )?;
    }
    let view =
        View { json: options.json, records: options.records, payload_bytes: options.payload_bytes, follow: false };
    let (mut shown, mut records, mut bytes) = (0u64, 0u64, 0u64);
    for group in archive.read_from(start)? {
        let group = group?;
        if end.is_some_and(|end| group.start_lsn() >= end) || options.limit.is_some_and(|limit| shown >= limit) {
            break;
        }
        if let Some(end) = end.filter(|&end| end < group.end_lsn()) {
            return Err(format!(
                "--end {end} is not a group boundary: it falls inside the group {}..{}",
                group.start_lsn(),
                group.end_lsn()
            )
            .into());
        }
        view.group(&mut out, &group)?;
        shown += 1;
        records += group.record_count() as u64;
        bytes += group.records().map(|record| record.len() as u64).sum::<u64>();
    }
    view.summary(&mut out, shown, records, bytes)?;
    Ok(())
}
