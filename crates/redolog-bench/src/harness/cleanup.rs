//! The benchmark's work directories go with it when it is stopped by SIGINT,
//! SIGTERM or SIGHUP (Ctrl-C, `timeout`, `kill`), not only when it returns: a
//! run on tmpfs or `sim:` keeps its stores in /dev/shm, up to gigabytes, and
//! the directories of killed runs once filled it (docs/BENCHMARKS.md,
//! seed-convoy). SIGKILL cannot be caught; nothing is left to do then.

use std::path::{Path, PathBuf};
use std::sync::Once;

use parking_lot::Mutex;

/// Every work directory handed out so far (those removed since are harmless
/// to remove again).
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

/// Removes `dir` if the process is stopped by a signal before it does; the
/// first call installs the handler, which removes every directory remembered
/// and exits with status 130.
pub fn remember(dir: &Path) {
    HANDLER.call_once(|| {
        // Refused only if a handler is installed already (none is): the
        // directories are then left, as without this module.
        let _ = ctrlc::set_handler(|| {
            let dirs = std::mem::take(&mut *DIRS.lock());
            for dir in dirs {
                // The benchmark's threads still run and may create a file
                // while the removal walks the tree (it then fails with
                // "directory not empty"): try again, for at most a second.
                for _ in 0..100 {
                    if std::fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            std::process::exit(130);
        });
    });
    DIRS.lock().push(dir.to_path_buf());
}
