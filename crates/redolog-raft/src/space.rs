//! Space: a purge lets the store checkpoint the log at the group of the
//! first entry it keeps, after re-appending what a checkpoint must not drop
//! ([RAFT, "Space"](crate::docs::raft#space)).

use std::sync::Arc;

use redolog::Durability;

use crate::error::Error;
use crate::line::Line;
use crate::record::{self, Kept};
use crate::state::Shared;

/// Checkpoints the log at the group of the first entry kept, once that
/// frees an eighth of the log: first the vote, the committed id and the
/// purge point are appended again and made durable after it, so the
/// checkpoint drops none of them ([RAFT, "Space"](crate::docs::raft#space)).
pub(crate) async fn reclaim<L: Line>(shared: &Arc<Shared<L>>) -> Result<(), Error> {
    let (target, kept) = {
        let state = shared.state();
        let target = state.entries.first_key_value().map_or(state.end, |(_, slot)| slot.group);
        if target.as_u64().saturating_sub(state.checkpoint.as_u64()) < shared.capacity / 8 {
            return Ok(());
        }
        (
            target,
            Kept::<L> { vote: state.vote.clone(), committed: state.committed.clone(), purged: state.purged.clone() },
        )
    };
    let end = shared.append_group(&[record::state(&kept)?], |_, appended| appended.end)?;
    shared.log.wait_async(end, Durability::Synced).await?;
    // A checkpoint writes and syncs a checkpoint block: it runs on a
    // thread of its own (one per eighth of the log), so no executor thread
    // blocks on the disk; the purge awaits it.
    // (futures' oneshot: it runs on any executor, so both openraft lines'
    // runtimes can await it.)
    let (done, checkpointed) = futures_channel::oneshot::channel();
    let on_thread_shared = shared.clone();
    let spawned = std::thread::Builder::new().name("redolog-raft-checkpoint".into()).spawn(move || {
        let result = on_thread_shared.log.checkpoint(target);
        // Let go of the log before answering: a store dropped right after
        // the purge must close it (and free its directory) at once.
        drop(on_thread_shared);
        let _ = done.send(result);
    });
    let on_thread = match spawned {
        Ok(_) => checkpointed.await.ok(),
        Err(_) => None,
    };
    match on_thread {
        Some(result) => result?,
        // No thread to spare, or it ended without an answer: checkpoint here.
        None => shared.log.checkpoint(target)?,
    }
    shared.state().checkpoint = target;
    Ok(())
}
