//! The sink: the external resource the children's fenced work writes to, shared across
//! processes through a file lock (the role `FenceGate` plays in one process).
//!
//! A sink is two files in a directory: `NAME.state` (`MAX_BALLOT VALUE`, rewritten in place)
//! and `NAME.log` (one line per write, appended). Every write holds an exclusive `flock` on
//! the state file, so writes are serialised and the log is in the order the sink saw them.
//!
//! The work is a counter, written the way a leader that believes it is the only writer would
//! write it: the child reads the counter once, at its first accepted write, and from then on
//! writes its own running count (blind writes). A **fenced** sink rejects a write whose ballot
//! is lower than the highest it has accepted; an **unfenced** one accepts everything, so a
//! stale writer's blind writes land after its successor's and undo them (lost updates).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Whether a sink checks ballots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fencing {
    /// Rejects writes with a ballot lower than the highest accepted.
    Fenced,
    /// Accepts every write (the plant `unfenced-sink`, and the shadow sink).
    Unfenced,
}

/// What the sink did with one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted: the counter is now `value`.
    Accepted {
        /// The counter after the write.
        value: u64,
    },
    /// Rejected: a higher ballot had been accepted.
    Rejected {
        /// The highest ballot accepted so far.
        max_ballot: u64,
    },
}

/// One line of a sink's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkEntry {
    /// Whether the sink accepted the write.
    pub accepted: bool,
    /// The writer's ballot.
    pub ballot: u64,
    /// Accepted: the counter after the write. Rejected: the highest ballot accepted so far.
    pub value: u64,
    /// When the write happened (`CLOCK_MONOTONIC`, nanoseconds, read under the lock).
    pub t_ns: u64,
    /// The writer's candidate id (`FDB_LEADER_ID`).
    pub candidate: String,
}

impl SinkEntry {
    /// The log line (without the newline).
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} {}",
            if self.accepted { "A" } else { "R" },
            self.ballot,
            self.value,
            self.t_ns,
            self.candidate
        )
    }

    /// Parses a log line.
    pub fn parse(line: &str) -> Option<SinkEntry> {
        let mut f = line.split_ascii_whitespace();
        let accepted = match f.next()? {
            "A" => true,
            "R" => false,
            _ => return None,
        };
        let entry = SinkEntry {
            accepted,
            ballot: f.next()?.parse().ok()?,
            value: f.next()?.parse().ok()?,
            t_ns: f.next()?.parse().ok()?,
            candidate: f.next()?.to_owned(),
        };
        f.next().is_none().then_some(entry)
    }
}

/// A writer's view of the counter: `None` until its first accepted write.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writer {
    local: Option<u64>,
}

/// An open sink.
#[derive(Debug)]
pub struct Sink {
    state: File,
    log: File,
    fencing: Fencing,
}

/// The state file's fixed size (the state is rewritten in place, padded with spaces).
const STATE_LEN: usize = 48;

/// The paths of sink `name` in `dir`: (state, log).
pub fn paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.state")),
        dir.join(format!("{name}.log")),
    )
}

impl Sink {
    /// Opens (creating if needed) sink `name` in `dir`.
    pub fn open(dir: &Path, name: &str, fencing: Fencing) -> io::Result<Sink> {
        let (state, log) = paths(dir, name);
        let state = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(state)?;
        let log = OpenOptions::new().append(true).create(true).open(log)?;
        Ok(Sink {
            state,
            log,
            fencing,
        })
    }

    /// One write of `writer`'s next count with `ballot`, waiting at most `patience` for the
    /// lock; `Ok(None)` if the lock stayed busy (a writer stopped while holding it).
    pub fn write(
        &mut self,
        writer: &mut Writer,
        ballot: u64,
        candidate: &str,
        patience: Duration,
        now_ns: impl Fn() -> u64,
    ) -> io::Result<Option<Outcome>> {
        let started = Instant::now();
        let locked = loop {
            match Flock::lock(self.state.try_clone()?, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => break locked,
                Err((_, Errno::EWOULDBLOCK | Errno::EINTR)) => {
                    if started.elapsed() >= patience {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err((_, e)) => return Err(io::Error::from(e)),
            }
        };
        let (max_ballot, value) = read_state(&locked)?;
        let t_ns = now_ns();
        let stale = self.fencing == Fencing::Fenced && ballot < max_ballot;
        let (entry, outcome) = if stale {
            (
                SinkEntry {
                    accepted: false,
                    ballot,
                    value: max_ballot,
                    t_ns,
                    candidate: candidate.to_owned(),
                },
                Outcome::Rejected { max_ballot },
            )
        } else {
            let next = writer.local.unwrap_or(value).saturating_add(1);
            let state = format!("{} {next}", max_ballot.max(ballot));
            let mut buf = [b' '; STATE_LEN];
            let bytes = state.as_bytes();
            if let Some(head) = buf.get_mut(..bytes.len()) {
                head.copy_from_slice(bytes);
            }
            locked.write_all_at(&buf, 0)?;
            writer.local = Some(next);
            (
                SinkEntry {
                    accepted: true,
                    ballot,
                    value: next,
                    t_ns,
                    candidate: candidate.to_owned(),
                },
                Outcome::Accepted { value: next },
            )
        };
        let mut line = entry.line();
        line.push('\n');
        self.log.write_all(line.as_bytes())?;
        drop(locked);
        Ok(Some(outcome))
    }
}

/// The state under the lock: (highest ballot accepted, counter); zeros for a new sink.
fn read_state(file: &File) -> io::Result<(u64, u64)> {
    let mut buf = [0u8; STATE_LEN];
    let n = file.read_at(&mut buf, 0)?;
    let text = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
    let mut f = text.split_ascii_whitespace();
    let max = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let value = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((max, value))
}

/// Reads a sink's log; lines that do not parse (a write cut short) are counted, not returned.
pub fn read_log(path: &Path) -> io::Result<(Vec<SinkEntry>, u64)> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut entries = Vec::new();
    let mut bad = 0u64;
    for line in BufReader::new(file).lines() {
        let line = line?;
        match SinkEntry::parse(&line) {
            Some(e) => entries.push(e),
            None => bad = bad.saturating_add(1),
        }
    }
    Ok((entries, bad))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chaos-sink-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_fenced_sink_rejects_a_stale_ballot_and_keeps_every_increment() {
        let d = dir("fenced");
        let mut a = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let mut b = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let (mut wa, mut wb) = (Writer::default(), Writer::default());
        let p = Duration::from_millis(50);
        let t = || 1u64;
        assert_eq!(
            a.write(&mut wa, 5, "a", p, t).unwrap(),
            Some(Outcome::Accepted { value: 1 })
        );
        assert_eq!(
            a.write(&mut wa, 5, "a", p, t).unwrap(),
            Some(Outcome::Accepted { value: 2 })
        );
        assert_eq!(
            b.write(&mut wb, 6, "b", p, t).unwrap(),
            Some(Outcome::Accepted { value: 3 })
        );
        assert_eq!(
            a.write(&mut wa, 5, "a", p, t).unwrap(),
            Some(Outcome::Rejected { max_ballot: 6 })
        );
        let (log, bad) = read_log(&paths(&d, "s").1).unwrap();
        assert_eq!(bad, 0);
        assert_eq!(log.len(), 4);
        assert!(!log[3].accepted);
        assert_eq!(log[2].candidate, "b");
    }

    #[test]
    fn an_unfenced_sink_lets_a_stale_writer_undo_its_successor() {
        let d = dir("unfenced");
        let mut a = Sink::open(&d, "s", Fencing::Unfenced).unwrap();
        let mut b = Sink::open(&d, "s", Fencing::Unfenced).unwrap();
        let (mut wa, mut wb) = (Writer::default(), Writer::default());
        let p = Duration::from_millis(50);
        let t = || 1u64;
        a.write(&mut wa, 5, "a", p, t).unwrap();
        b.write(&mut wb, 6, "b", p, t).unwrap();
        b.write(&mut wb, 6, "b", p, t).unwrap();
        // The stale writer's blind write sets the counter back.
        assert_eq!(
            a.write(&mut wa, 5, "a", p, t).unwrap(),
            Some(Outcome::Accepted { value: 2 })
        );
    }

    #[test]
    fn a_held_lock_makes_a_write_give_up_after_its_patience() {
        let d = dir("busy");
        let mut a = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let holder = File::open(paths(&d, "s").0).unwrap();
        let held = Flock::lock(holder, FlockArg::LockExclusive).unwrap();
        let got = a
            .write(
                &mut Writer::default(),
                1,
                "a",
                Duration::from_millis(5),
                || 0,
            )
            .unwrap();
        assert_eq!(got, None);
        drop(held);
        assert!(
            a.write(
                &mut Writer::default(),
                1,
                "a",
                Duration::from_millis(5),
                || 0
            )
            .unwrap()
            .is_some()
        );
    }

    #[test]
    fn log_lines_round_trip() {
        let e = SinkEntry {
            accepted: false,
            ballot: 3,
            value: 4,
            t_ns: 5,
            candidate: "c0i1-ab".into(),
        };
        assert_eq!(SinkEntry::parse(&e.line()), Some(e));
        assert_eq!(SinkEntry::parse("X 1 2 3 c"), None);
    }
}
