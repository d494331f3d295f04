//! The files a store consists of (the database file, its write-ahead log `-wal` and the log's
//! index `-shm`), and the one rule that tells when the files a handle has open are no longer
//! the store's.
//!
//! # Why
//!
//! SQLite goes on using the files it opened after they are deleted or replaced at their paths
//! (`rm election.db*`, `rm election.db-wal election.db-shm`, a `mv` over one of them), while
//! a process that opens the path afterwards gets other files. Its locks live in those other
//! files, so they no longer exclude this handle's; without the `-wal` it sees none of the
//! commits still in the log (ballots handed out again); with another `-shm` both write one
//! log through two indexes. Two leaders with one ballot.
//!
//! # When SQLite itself deletes or recreates them
//!
//! Only in these cases (SQLite 3.53, `wal.c` and `pager.c`; see also
//! <https://sqlite.org/wal.html> and <https://sqlite.org/tempfiles.html>):
//!
//! 1. **The last connection closes.** It takes an `EXCLUSIVE` lock on the database file, which
//!    it gets only if no other connection, in any process, holds a `SHARED` lock there;
//!    checkpoints; and deletes `-shm` and `-wal`. The next connection creates new ones (new
//!    inodes). Leaving WAL mode (`PRAGMA journal_mode = DELETE`) needs the same lock.
//! 2. **A `-wal` beside an empty database file** (zero pages) is deleted by the next reader.
//!    A store's database file is never empty once opened (its schema is in it).
//!
//! Everything else keeps the files: checkpoints (`TRUNCATE` too) and `journal_size_limit`
//! truncate the `-wal` in place, a writer restarting the log overwrites it in place, and the
//! first process to map the `-shm` truncates it in place. And a connection in WAL mode holds
//! its `SHARED` lock on the database file from its first read until it closes, keeping the
//! `-wal` and the `-shm` open as long.
//!
//! # The rule
//!
//! A [`SqliteDb`](super::SqliteDb) handle opens one connection first (its *anchor*) and closes
//! it last: from its first read to the handle's drop it holds the `SHARED` lock, so case 1
//! cannot happen to the handle's files while the handle lives, and case 2 does not apply.
//! After the anchor's first read in WAL mode, the handle records the device and inode of the
//! three files at their paths (confirmed among this process's open files, so a swap between
//! SQLite's open and the record is caught too). From then on, **the files at the paths must be
//! those files**: every commit (read-only ones too) and every watch poll `stat`s the three
//! paths, and a missing file or another device or inode fails it with a fatal
//! [`TxnError`](crate::TxnError) whose source is a [`StoreFileChanged`] naming the file. The
//! rule never fires on a healthy store (SQLite never replaces the files under a live anchor)
//! and always fires on a deleted or replaced one (an inode still open cannot be reused, so a
//! new file at the path always differs). [`SqliteDb::check_files`](super::SqliteDb::check_files)
//! applies the same rule on demand (the command line polls it every 50 ms).
//!
//! These checks only `stat`: opening and closing a descriptor on the database file or the
//! `-shm` would drop this process's POSIX locks on it (SQLite's included).
//!
//! # Opening beside a process on other files
//!
//! The rule stops the process whose files were deleted, at its next commit or poll; until
//! then it still holds its lock on the database file (a deleted `-wal` and `-shm` leave the
//! database file in place). A process that opens the store in that time would create new
//! `-wal` and `-shm` files and lead on them. So opening also looks (Linux, `/proc/locks`) for
//! another process that holds a lock on the database file but none on the `-shm` at the path:
//! every process using a store holds a read lock on its `-shm` (SQLite's "DMS" byte) for as
//! long as it holds its lock on the database file, except for the microseconds while it opens
//! or closes it. One that stays so for about a second is using the store through files that
//! are no longer at their paths, and opening fails with
//! [`SqliteOpenError::InUseThroughOtherFiles`](super::SqliteOpenError::InUseThroughOtherFiles)
//! naming it. (A lock held by a process in another PID namespace shows no PID there, and is
//! not judged.)

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One of the files of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreFile {
    /// The database file itself (the path given to [`SqliteDb::open`](super::SqliteDb::open)).
    Database,
    /// The write-ahead log, `PATH-wal`: the commits not yet copied into the database file.
    WriteAheadLog,
    /// The write-ahead log's index in shared memory, `PATH-shm`, where SQLite keeps its
    /// locks between processes.
    SharedMemoryIndex,
}

impl fmt::Display for StoreFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreFile::Database => "database file",
            StoreFile::WriteAheadLog => "write-ahead log",
            StoreFile::SharedMemoryIndex => "write-ahead log index",
        })
    }
}

/// What became of a store's file at its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileChange {
    /// Nothing is there any more.
    Deleted,
    /// Another file is there (another device or inode).
    Replaced,
    /// The database file was written since the handle opened the store to read it as it
    /// stood (see [`Created`](Self::Created)): a writer came (and perhaps went) meanwhile.
    Modified,
    /// A file that was not there when the handle opened the store is there now: a writer
    /// started on a store this handle reads as it stood at its open (a
    /// [read-only](super::SqliteOptions::read_only) handle on a store with no write-ahead log
    /// whose folder this user may not write), so what it reads may be stale.
    Created,
}

/// A file of a store is no longer the file this handle has open: it was deleted or replaced
/// at its path while in use. Commits and watches on the handle fail with a fatal
/// [`TxnError`](crate::TxnError) whose source is this error; it never heals (open the store
/// again, after stopping every process that used the old files). See [the rule](self).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the store's {file} {} {} while in use",
    path.display(),
    match change {
        FileChange::Deleted => "was deleted",
        FileChange::Replaced => "was replaced by another file",
        FileChange::Created => "was created (a writer started; open the store again to read its commits)",
        FileChange::Modified => "was written (a writer came; open the store again to read its commits)",
    }
)]
pub struct StoreFileChanged {
    path: PathBuf,
    file: StoreFile,
    change: FileChange,
}

impl StoreFileChanged {
    /// The error for `file`, at `path`, that underwent `change` (for tests of code that
    /// handles it; the store makes its own).
    pub fn new(path: impl Into<PathBuf>, file: StoreFile, change: FileChange) -> Self {
        StoreFileChanged {
            path: path.into(),
            file,
            change,
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which of the store's files it is.
    pub fn file(&self) -> StoreFile {
        self.file
    }

    /// Whether it was deleted, replaced or created.
    pub fn change(&self) -> FileChange {
        self.change
    }
}

/// A file's identity: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

#[cfg(unix)]
fn id_of(meta: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    FileId {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

#[cfg(not(unix))]
fn id_of(_meta: &std::fs::Metadata) -> FileId {
    // No inodes: only a deletion is noticed.
    FileId { dev: 0, ino: 0 }
}

/// The identity of the file at `path` (following symbolic links), `None` if nothing is there.
fn current(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| id_of(&m))
}

/// One file of the store, as the handle opened it.
#[derive(Clone, Debug)]
struct Opened {
    file: StoreFile,
    path: PathBuf,
    id: FileId,
}

impl Opened {
    /// The file at `path` now, confirmed among `open` (this process's open files, `None`:
    /// unknown) as the one SQLite opened.
    fn record(
        file: StoreFile,
        path: PathBuf,
        open: Option<&[FileId]>,
    ) -> Result<Opened, StoreFileChanged> {
        let change = match current(&path) {
            None => FileChange::Deleted,
            Some(id) if open.is_some_and(|ids| !ids.contains(&id)) => FileChange::Replaced,
            Some(id) => return Ok(Opened { file, path, id }),
        };
        Err(StoreFileChanged { path, file, change })
    }

    fn check(&self) -> Result<(), StoreFileChanged> {
        let change = match current(&self.path) {
            None => FileChange::Deleted,
            Some(id) if id != self.id => FileChange::Replaced,
            Some(_) => return Ok(()),
        };
        Err(StoreFileChanged {
            path: self.path.clone(),
            file: self.file,
            change,
        })
    }
}

/// The three files of a store as a handle opened them; [`check`](Self::check) applies [the
/// rule](self).
#[derive(Clone, Debug)]
pub(super) struct StoreFiles {
    database: Opened,
    log: Side,
    index: Side,
    /// For a handle that reads the store as it stood: the database file's stamp when it was
    /// opened, which must not change (a writer that came and went leaves no `-wal`, but it
    /// wrote the file).
    frozen: Option<Stamp>,
}

/// What changes when a file is written: its size and its modification time (not its change
/// time, which a `chmod` moves too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    /// Whether the file was empty.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The stamp of the file at `path`, `None` if nothing is there.
pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// The `-wal` or the `-shm` of a store, as a handle opened it.
#[derive(Clone, Debug)]
enum Side {
    /// Open: it must stay the file at its path.
    Opened(Opened),
    /// Absent at the open of a read-only handle, which SQLite opens once a writer creates it.
    Unrecorded,
    /// Absent at the open of a handle that reads the store as it stood (SQLite's
    /// `immutable`): it must stay absent, or the handle's reads may be stale.
    MustStayAbsent(StoreFile, PathBuf),
}

impl Side {
    fn check(&self) -> Result<(), StoreFileChanged> {
        match self {
            Side::Opened(opened) => opened.check(),
            Side::Unrecorded => Ok(()),
            Side::MustStayAbsent(file, path) => match current(path) {
                None => Ok(()),
                Some(_) => Err(StoreFileChanged {
                    path: path.clone(),
                    file: *file,
                    change: FileChange::Created,
                }),
            },
        }
    }
}

/// `path` with `suffix` appended to its last component.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

impl StoreFiles {
    /// Records the files the anchor connection `conn` has open, right after its first read in
    /// WAL mode. `given`: the path the store was opened by (its identity is what another
    /// process opening that path gets); the `-wal` and `-shm` are named after SQLite's own
    /// name of the database file (symbolic links resolved, as SQLite resolves them).
    pub(super) fn record(
        given: &Path,
        conn: &rusqlite::Connection,
    ) -> Result<StoreFiles, StoreFileChanged> {
        Self::record_with(given, conn, None)
    }

    /// As [`record`](Self::record), for a read-only handle: a `-wal` or `-shm` that is absent
    /// is not required (a reader creates neither); if `frozen` (the handle reads the store
    /// as it stood at its open, the database file's stamp then) it must stay absent, and the
    /// database file unwritten.
    pub(super) fn record_read_only(
        given: &Path,
        conn: &rusqlite::Connection,
        frozen: Option<Stamp>,
    ) -> Result<StoreFiles, StoreFileChanged> {
        let mut files = Self::record_with(given, conn, Some(frozen.is_some()))?;
        files.frozen = frozen;
        Ok(files)
    }

    /// `read_only`: `None` for a read-write handle, else whether it is frozen.
    fn record_with(
        given: &Path,
        conn: &rusqlite::Connection,
        read_only: Option<bool>,
    ) -> Result<StoreFiles, StoreFileChanged> {
        let sqlite_name = conn
            .path()
            .filter(|p| !p.is_empty())
            .map_or_else(|| given.to_path_buf(), PathBuf::from);
        let given = std::path::absolute(given).unwrap_or_else(|_| given.to_path_buf());
        let open = open_file_ids();
        let open = open.as_deref();
        let side = |file: StoreFile, suffix: &str| {
            let path = with_suffix(&sqlite_name, suffix);
            match read_only {
                Some(frozen) if current(&path).is_none() => Ok(if frozen {
                    Side::MustStayAbsent(file, path)
                } else {
                    Side::Unrecorded
                }),
                _ => Opened::record(file, path, open).map(Side::Opened),
            }
        };
        Ok(StoreFiles {
            database: Opened::record(StoreFile::Database, given, open)?,
            log: side(StoreFile::WriteAheadLog, "-wal")?,
            index: side(StoreFile::SharedMemoryIndex, "-shm")?,
            frozen: None,
        })
    }

    /// Applies [the rule](self): every file at its path is the file the handle opened (and,
    /// for a handle that reads the store as it stood, unwritten).
    pub(super) fn check(&self) -> Result<(), StoreFileChanged> {
        self.database.check()?;
        self.log.check()?;
        self.index.check()?;
        match self.frozen {
            Some(at_open) if stamp(&self.database.path) != Some(at_open) => Err(StoreFileChanged {
                path: self.database.path.clone(),
                file: StoreFile::Database,
                change: FileChange::Modified,
            }),
            _ => Ok(()),
        }
    }

    /// Another process that uses the store through other files (see [the module](self)):
    /// one that holds a lock on the database file but none on the `-shm` at its path, at
    /// every look for about a second. `None` if there is none (or this system cannot tell).
    pub(super) fn user_of_other_files(&self) -> Option<u32> {
        let Side::Opened(index) = &self.index else {
            return None;
        };
        let mut suspects = split_users(self.database.id, index.id);
        let mut delay = Duration::from_millis(2);
        let mut waited = Duration::ZERO;
        while !suspects.is_empty() && waited < SPLIT_PATIENCE {
            std::thread::sleep(delay);
            waited = waited.saturating_add(delay);
            delay = delay.saturating_mul(2).min(Duration::from_millis(250));
            let now = split_users(self.database.id, index.id);
            suspects.retain(|pid| now.contains(pid));
        }
        suspects.first().copied()
    }
}

/// How long another process may hold the database file's lock without the `-shm`'s before
/// it counts as using other files: far beyond the microseconds of an open or a close.
const SPLIT_PATIENCE: Duration = Duration::from_secs(1);

/// The identities of this process's open files (`/proc/self/fd`), `None` where that cannot
/// be read. Only `stat`s: nothing is opened.
fn open_file_ids() -> Option<Vec<FileId>> {
    let fds = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(
        fds.flatten()
            .filter_map(|fd| std::fs::metadata(fd.path()).ok())
            .map(|meta| id_of(&meta))
            .collect(),
    )
}

/// A device number's major and minor parts, as Linux encodes them in `st_dev` (glibc's
/// `major()` and `minor()`).
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

/// One line of `/proc/locks` held (not waited for) by a process: its PID, and the file's
/// major, minor and inode. `None` for waiters, non-POSIX locks and lines it cannot read.
fn parse_lock(line: &str) -> Option<(u32, (u64, u64, u64))> {
    let mut words = line.split_whitespace().skip(1);
    let kind = words.next()?;
    if kind != "POSIX" {
        // "->": a waiter; FLOCK and OFDLCK: not SQLite's.
        return None;
    }
    let mut words = words.skip(2);
    let pid: i64 = words.next()?.parse().ok()?;
    let pid = u32::try_from(pid).ok().filter(|p| *p != 0)?;
    let mut file = words.next()?.split(':');
    let major = u64::from_str_radix(file.next()?, 16).ok()?;
    let minor = u64::from_str_radix(file.next()?, 16).ok()?;
    let inode = file.next()?.parse().ok()?;
    Some((pid, (major, minor, inode)))
}

/// The processes (other than this one) that hold a POSIX lock on `database` but none on
/// `index`, from `/proc/locks` (none if it cannot be read).
fn split_users(database: FileId, index: FileId) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    split_users_in(&text, database, index, std::process::id())
}

/// [`split_users`] on the text of `/proc/locks`, leaving `me` out.
fn split_users_in(text: &str, database: FileId, index: FileId, me: u32) -> Vec<u32> {
    let key = |id: FileId| {
        let (major, minor) = major_minor(id.dev);
        (major, minor, id.ino)
    };
    let (database, index) = (key(database), key(index));
    let mut on_database = std::collections::BTreeSet::new();
    let mut on_index = std::collections::BTreeSet::new();
    for (pid, file) in text.lines().filter_map(parse_lock) {
        if pid == me {
            continue;
        }
        if file == database {
            on_database.insert(pid);
        } else if file == index {
            on_index.insert(pid);
        }
    }
    on_database.difference(&on_index).copied().collect()
}

#[cfg(test)]
mod tests;
