//! How `redolog dump` shows what it read: text for people, JSON Lines for
//! scripts.

use std::io::Write;

use redolog::inspect::{CheckpointInfo, Inspection};
use redolog::{Group, Lsn};
use serde_json::{json, Value};

use crate::inspect::describe_end;

/// Bytes per line of a payload's hex view (as `xxd`).
const HEX_LINE: usize = 16;

/// The output's form.
pub struct View {
    pub json: bool,
    /// Show each record's payload.
    pub records: bool,
    /// Payload bytes shown per record (0: all).
    pub payload_bytes: usize,
    /// Following a live log: a pass cut short by the writer is normal.
    pub follow: bool,
}

impl View {
    /// One group (and its records, if asked).
    pub fn group(&self, out: &mut impl Write, group: &Group) -> std::io::Result<()> {
        let bytes: usize = group.records().map(<[u8]>::len).sum();
        if self.json {
            let mut line = json!({
                "type": "group",
                "start_lsn": group.start_lsn().as_u64(),
                "end_lsn": group.end_lsn().as_u64(),
                "records": group.record_count(),
                "bytes": bytes,
            });
            if self.records {
                line["payloads"] = group.records().map(|record| self.payload_json(record)).collect();
            }
            return writeln!(out, "{line}");
        }
        writeln!(
            out,
            "group {}..{}  records {}  bytes {}",
            group.start_lsn(),
            group.end_lsn(),
            group.record_count(),
            bytes
        )?;
        if self.records {
            for (index, record) in group.records().enumerate() {
                writeln!(out, "  record {index}: {} bytes", record.len())?;
                self.hex_view(out, record)?;
            }
        }
        Ok(())
    }

    /// The part of `record` shown.
    fn shown<'a>(&self, record: &'a [u8]) -> &'a [u8] {
        match self.payload_bytes {
            0 => record,
            limit => &record[..record.len().min(limit)],
        }
    }

    fn payload_json(&self, record: &[u8]) -> Value {
        let shown = self.shown(record);
        json!({
            "len": record.len(),
            "hex": shown.iter().map(|byte| format!("{byte:02x}")).collect::<String>(),
            "text": printable(shown),
            "truncated": shown.len() < record.len(),
        })
    }

    /// `xxd`-style lines: offset, hex, printable.
    fn hex_view(&self, out: &mut impl Write, record: &[u8]) -> std::io::Result<()> {
        let shown = self.shown(record);
        for (line, chunk) in shown.chunks(HEX_LINE).enumerate() {
            let hex: Vec<String> = chunk.iter().map(|byte| format!("{byte:02x}")).collect();
            writeln!(out, "    {:04x}  {:<47}  |{}|", line * HEX_LINE, hex.join(" "), printable(chunk))?;
        }
        if shown.len() < record.len() {
            writeln!(out, "    … {} more bytes (--payload-bytes 0 shows all)", record.len() - shown.len())?;
        }
        Ok(())
    }

    /// Groups a followed log wrote over before they were read.
    pub fn gap(&self, out: &mut impl Write, from: Lsn, to: Lsn) -> std::io::Result<()> {
        if self.json {
            let line = json!({ "type": "gap", "start_lsn": from.as_u64(), "end_lsn": to.as_u64() });
            return writeln!(out, "{line}");
        }
        writeln!(out, "gap {from}..{to}: the log wrote over these groups before they were read")
    }

    /// A snapshot of a live log that the writer changed while it was read.
    pub fn snapshot_ends(&self, out: &mut impl Write, error: &redolog::Error) -> std::io::Result<()> {
        if self.follow {
            return Ok(()); // read again in 200 ms
        }
        if self.json {
            let line = json!({ "type": "snapshot_ends", "reason": error.to_string() });
            return writeln!(out, "{line}");
        }
        writeln!(out, "snapshot ends: the live log changed while it was read ({error})")
    }

    /// The closing line.
    pub fn summary(&self, out: &mut impl Write, groups: u64, records: u64, bytes: u64) -> std::io::Result<()> {
        if self.json {
            let line = json!({ "type": "summary", "groups": groups, "records": records, "record_bytes": bytes });
            return writeln!(out, "{line}");
        }
        writeln!(out, "{groups} groups, {records} records, {bytes} record bytes")
    }
}

/// `bytes` with every byte that is not printable ASCII as `.`.
fn printable(bytes: &[u8]) -> String {
    bytes.iter().map(|&byte| if byte.is_ascii_graphic() || byte == b' ' { byte as char } else { '.' }).collect()
}

fn slot_json(slot: Option<CheckpointInfo>) -> Value {
    slot.map_or(Value::Null, |slot| {
        json!({
            "number": slot.number,
            "lsn": slot.lsn.as_u64(),
            "durable_lsn": slot.durable_lsn.as_u64(),
            "clean_shutdown": slot.clean_shutdown,
        })
    })
}

/// The log's header as one JSON object.
pub fn header_json(inspection: &Inspection) -> Value {
    json!({
        "type": "log",
        "log_id": format!("{:032x}", inspection.log_id),
        "format_version": inspection.format_version,
        "files": inspection.files.iter().map(|file| file.display().to_string()).collect::<Vec<_>>(),
        "file_bytes": inspection.file_bytes,
        "ring_blocks": inspection.ring_blocks,
        "first_lsn": inspection.first_lsn.as_u64(),
        "checkpoint_slots": inspection.checkpoint_slots.map(slot_json),
        "checkpoint": slot_json(Some(inspection.checkpoint)),
        "start_lsn": inspection.start_lsn.as_u64(),
        "end_lsn": inspection.end_lsn.as_u64(),
        "end": describe_end(inspection.end),
        "in_use": inspection.in_use,
        "holder_pid": inspection.holder_pid,
    })
}
