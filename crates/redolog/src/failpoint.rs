//! Named failpoints at every storage call that writes, syncs, creates, renames or
//! removes (docs/RELIABILITY.md E10). With the `failpoints` feature (which only
//! `cargo test` turns on) each is a `fail` crate failpoint whose `return` action
//! makes the call fail with an I/O error, exactly as if the storage had failed
//! it; `panic`, `sleep` and the other actions work as the crate documents.
//! Without the feature a failpoint is `Ok(())` and compiles to nothing.

use std::io;

/// Every failpoint, by name. `tests/failpoints.rs` triggers each, and checks
/// that every I/O call in the source sits behind one of these names.
///
/// ```
/// assert!(redolog::FAILPOINTS.contains(&"writer.sync"));
/// ```
#[cfg(feature = "failpoints")]
pub const FAILPOINTS: &[&str] = &[
    "create.open",
    "create.write",
    "create.sync",
    "create.sync_dir",
    "create.rename",
    "leftovers.remove",
    "leftovers.sync_dir",
    "rollforward.rename",
    "rollforward.sync_dir",
    "files.open",
    "writer.write",
    "writer.sync",
    "checkpoint.write",
    "checkpoint.sync",
    "repair.write",
    "repair.sync",
    // The opening's slot: an encrypted log's session, or the lowered claim
    // of a cut (INV-41); then the slot that clears the cut.
    "session.write",
    "session.sync",
    "cut.clear_write",
    "cut.clear_sync",
    // The files holding the recovered log, synced before it goes on (INV-45).
    "recovery.sync",
    // A resize's (src/resize.rs, docs/DESIGN.md §1.18); reached by tests/resize_faults.rs.
    "resize.open",
    "resize.write",
    "resize.sync",
    "resize.sync_dir",
    "resize.copy",
    "resize.copy_sync",
    "resize.slot_write",
    "resize.slot_sync",
    "resize.commit_write",
    "resize.commit_sync",
    "resize.rename",
    "resize.rename_sync_dir",
    "resize.settle_remove",
    "resize.settle_sync_dir",
    // The archiver's (src/archive); reached by tests/archive_faults.rs.
    "archive.write",
    "archive.sync",
    "archive.create",
    "archive.cut",
    "archive.rename",
    "archive.sync_dir",
    "archive.remove",
    "archive.open",
];

/// `Err` if the failpoint `name` is configured to `return`.
#[cfg(feature = "failpoints")]
pub(crate) fn failpoint(name: &'static str) -> io::Result<()> {
    debug_assert!(FAILPOINTS.contains(&name), "failpoint {name} is not listed in FAILPOINTS");
    fail::fail_point!(name, |_| Err(io::Error::other(format!("failpoint {name}"))));
    Ok(())
}

/// Always `Ok`: the `failpoints` feature is off.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn failpoint(_name: &'static str) -> io::Result<()> {
    Ok(())
}
