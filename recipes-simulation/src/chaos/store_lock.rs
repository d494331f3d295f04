//! A store outage: the harness takes SQLite's write lock and holds it.
//!
//! The SQLite store runs in write-ahead-log mode, where a writer (`BEGIN IMMEDIATE`) must take
//! the WAL write lock: a POSIX advisory lock on byte 120 of the `-shm` file (SQLite's file
//! format documentation, "WAL-index locks": `WAL_WRITE_LOCK` is the first of the eight lock
//! bytes at offset 120). Holding a write lock on that byte makes every commit wait (then fail
//! with `SQLITE_BUSY`) exactly as a process stuck in a long write transaction would, while
//! reads go on.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

/// The byte of the `-shm` file that SQLite's WAL write lock covers.
pub const WAL_WRITE_LOCK_BYTE: i64 = 120;

/// SQLite's write lock on a database, held until dropped.
#[derive(Debug)]
pub struct StoreLock {
    shm: File,
}

/// The `-shm` file beside database `db`.
pub fn shm_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-shm");
    PathBuf::from(s)
}

fn lock_arg(kind: libc::c_short) -> libc::flock {
    libc::flock {
        l_type: kind,
        l_whence: i16::try_from(libc::SEEK_SET).unwrap_or(0),
        l_start: WAL_WRITE_LOCK_BYTE,
        l_len: 1,
        l_pid: 0,
    }
}

impl StoreLock {
    /// Takes the write lock of database `db` (in WAL mode, opened by someone already), waiting
    /// at most `patience` for a committing writer to let go of it.
    pub fn acquire(db: &Path, patience: Duration) -> io::Result<StoreLock> {
        let shm = OpenOptions::new()
            .read(true)
            .write(true)
            .open(shm_path(db))?;
        let started = Instant::now();
        let arg = lock_arg(i16::try_from(libc::F_WRLCK).unwrap_or(1));
        loop {
            match fcntl(&shm, FcntlArg::F_SETLK(&arg)) {
                Ok(_) => return Ok(StoreLock { shm }),
                Err(Errno::EAGAIN | Errno::EACCES | Errno::EINTR)
                    if started.elapsed() < patience =>
                {
                    std::thread::sleep(Duration::from_micros(500));
                }
                Err(e) => return Err(io::Error::from(e)),
            }
        }
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        let arg = lock_arg(i16::try_from(libc::F_UNLCK).unwrap_or(2));
        // Closing the file releases it anyway.
        let _ = fcntl(&self.shm, FcntlArg::F_SETLK(&arg));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shm_file_sits_beside_the_database() {
        assert_eq!(
            shm_path(Path::new("/tmp/x/e.db")),
            PathBuf::from("/tmp/x/e.db-shm")
        );
    }

    #[test]
    fn without_a_store_there_is_nothing_to_lock() {
        let missing = std::env::temp_dir().join(format!("chaos-nolock-{}.db", std::process::id()));
        assert!(StoreLock::acquire(&missing, Duration::from_millis(1)).is_err());
    }
}
