//! Commit pipelines: how a thread gets its LSN written and synced.

mod group;
