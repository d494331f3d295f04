//! Noticing that the store file was deleted or replaced under a running election.
//!
//! SQLite keeps using the file it opened, even after `rm election.db*` or a `mv` over it, while
//! new processes create or open a *new* file at the same path, whose ballots restart at 1:
//! two leaders, and fencing defeated. So `run` (and `watch`) record which file they opened
//! (device and inode, confirmed among this process's open file descriptors) and check,
//! every [`PERIOD`], that the path still names it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::classify::{Cause, fix};
use crate::signals::Fatal;

/// A file's identity: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

fn id_of(meta: &std::fs::Metadata) -> FileId {
    FileId {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

/// What became of the store's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing is there any more.
    Deleted,
    /// Another file is there.
    Replaced,
}

/// Compares the path's current identity with the one opened: a pure decision.
pub(crate) fn compare(opened: FileId, now: Option<FileId>) -> Option<Change> {
    match now {
        None => Some(Change::Deleted),
        Some(id) if id != opened => Some(Change::Replaced),
        Some(_) => None,
    }
}

/// The identity of the store file this process has open at `path`: the path's identity,
/// confirmed to be one of this process's open files (so a swap between SQLite's open and this
/// call is caught too). `None` if the path cannot be read, or names a file this process does
/// not have open.
pub(crate) fn opened(path: &Path) -> Option<FileId> {
    let id = id_of(&std::fs::metadata(path).ok()?);
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        // No /proc: trust the path.
        return Some(id);
    };
    fds.flatten()
        .filter_map(|fd| std::fs::metadata(fd.path()).ok())
        .any(|meta| id_of(&meta) == id)
        .then_some(id)
}

/// The path's current identity (`None`: nothing there).
fn current(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| id_of(&m))
}

/// Checks every `every` that `path` still names the file `id`; reports a failure through
/// `fatal` and returns when it does not.
pub(crate) async fn monitor(path: PathBuf, id: FileId, every: Duration, fatal: Fatal) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Some(change) = compare(id, current(&path)) {
            let what = match change {
                Change::Deleted => "was deleted",
                Change::Replaced => "was replaced by another file",
            };
            fatal.raise(format!(
                "the store {} {what} while in use ({})",
                path.display(),
                fix(Cause::Moved, &path)
            ));
            return;
        }
    }
}

/// How often to check: 50ms, the shortest heartbeat the command line accepts, so that a
/// change is noticed within a heartbeat whatever the stored configuration (a `stat` costs
/// microseconds).
pub(crate) const PERIOD: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_and_replacement_are_told_apart() {
        let a = FileId { dev: 1, ino: 10 };
        let b = FileId { dev: 1, ino: 11 };
        assert_eq!(compare(a, Some(a)), None);
        assert_eq!(compare(a, Some(b)), Some(Change::Replaced));
        assert_eq!(compare(a, None), Some(Change::Deleted));
        assert_eq!(
            compare(a, Some(FileId { dev: 2, ino: 10 })),
            Some(Change::Replaced)
        );
    }

    #[test]
    fn only_files_this_process_has_open_count() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        std::fs::write(&path, b"x")?;
        assert_eq!(opened(&path), None, "not open: not confirmed");
        let file = std::fs::File::open(&path)?;
        let id = opened(&path);
        assert!(id.is_some());
        drop(file);
        assert_eq!(opened(&dir.path().join("missing")), None);
        Ok(())
    }

    #[test]
    fn the_period_fits_within_the_shortest_heartbeat() {
        assert!(PERIOD <= crate::limits::MIN_HEARTBEAT);
    }
}
