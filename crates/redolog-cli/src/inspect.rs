//! `redolog verify`, and the header `redolog dump` prints: read-only views of
//! a log directory.

use std::io::Write;
use std::path::Path;

use redolog::encryption::{Encryption, Keys};
use redolog::inspect::{inspect, inspect_with_keys, CheckpointInfo, Inspection};
use redolog::LogEnd;

/// Any error the tool reports (printed, then exit 1).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub fn describe_end(end: LogEnd) -> String {
    match end {
        LogEnd::Created => "created".into(),
        LogEnd::CleanShutdown => "clean shutdown".into(),
        LogEnd::Unclosed => "not closed, nothing cut off".into(),
        LogEnd::TornTail { truncated_at, blocks_erased } => {
            format!("torn tail: opening will cut it at LSN {truncated_at} and erase {blocks_erased} blocks")
        }
        // A kind of end a newer library names.
        other => format!("{other:?}"),
    }
}

fn describe_slot(slot: Option<CheckpointInfo>) -> String {
    match slot {
        None => "empty or invalid".into(),
        Some(slot) => format!(
            "#{} at LSN {}, durable to {}{}",
            slot.number,
            slot.lsn,
            slot.durable_lsn,
            if slot.clean_shutdown { ", clean shutdown" } else { "" }
        ),
    }
}

/// The line that says a live process holds the log, if one does.
fn in_use(inspection: &Inspection) -> Option<String> {
    inspection.in_use.then(|| {
        let holder = inspection.holder_pid.map_or("another process".to_string(), |pid| format!("process {pid}"));
        format!(
            "in use by {holder}: a live reader (Log::read_from) serves only the process that holds the log, so \
             this is a read-only snapshot of its files; the end may already have moved and a tail being written \
             looks torn (nothing was locked or changed)"
        )
    })
}

pub fn print_header(out: &mut impl Write, inspection: &Inspection) -> std::io::Result<()> {
    if let Some(line) = in_use(inspection) {
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "log {:032x}, format {}, {} files × {} bytes, ring of {} blocks, first LSN {}",
        inspection.log_id,
        inspection.format_version,
        inspection.files.len(),
        inspection.file_bytes,
        inspection.ring_blocks,
        inspection.first_lsn
    )?;
    for file in &inspection.files {
        writeln!(out, "  {}", file.display())?;
    }
    writeln!(out, "checkpoint slot A: {}", describe_slot(inspection.checkpoint_slots[0]))?;
    writeln!(out, "checkpoint slot B: {}", describe_slot(inspection.checkpoint_slots[1]))?;
    writeln!(
        out,
        "recovery: from checkpoint #{} at LSN {}, groups {}..{}, {}",
        inspection.checkpoint.number,
        inspection.checkpoint.lsn,
        inspection.start_lsn,
        inspection.end_lsn,
        describe_end(inspection.end)
    )
}

/// An encrypted log's keys: `--key-file`, read as `Keys::from_file` reads
/// (`ID HEX` lines; only its owner may read it).
#[derive(Debug, Default, clap::Args)]
pub struct KeyOptions {
    /// The keys of an encrypted log: a file of `ID HEX` lines (64 hex digits
    /// per key) that only its owner may read.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<std::path::PathBuf>,
}

impl KeyOptions {
    /// Inspects `dir`, with the keys if given.
    pub fn inspect(&self, dir: &Path) -> Result<Inspection, BoxError> {
        Ok(match &self.key_file {
            Some(path) => inspect_with_keys(dir, &Encryption::new(Keys::from_file(path)?))?,
            None => inspect(dir)?,
        })
    }
}

/// Checks every block and group; returns the summary line, or the first error.
pub fn verify(dir: &Path, keys: &KeyOptions) -> Result<String, BoxError> {
    let inspection = keys.inspect(dir)?;
    let note = in_use(&inspection).map_or(String::new(), |line| format!("\n{line}"));
    let end = inspection.end;
    let (start, end_lsn) = (inspection.start_lsn, inspection.end_lsn);
    let mut groups = 0u64;
    for group in inspection.groups {
        group?;
        groups += 1;
    }
    Ok(format!("{}: sound. {groups} groups in LSN {start}..{end_lsn}; {}{note}", dir.display(), describe_end(end)))
}
