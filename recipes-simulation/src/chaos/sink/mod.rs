//! The sink: the external resource the children's fenced work writes to, shared across
//! processes through a file lock (the role `FenceGate` plays in one process).
//!
//! A sink is one file, `NAME.log`, and the log **is** the sink: one line per write, each line
//! carrying the writer's request and the sink's state after it (`MAX_BALLOT COUNTER`). Every
//! write takes an exclusive `flock` on the log, derives the current state from the log's last
//! complete line, decides, and appends its line with **one** `write(2)` on an `O_APPEND`
//! descriptor. That single system call is the write's commit point, so a writer's death at any
//! instruction leaves the sink and the checker in agreement:
//!
//! - killed before the `write(2)`: nothing happened, nothing is logged;
//! - killed after it: the write happened and is logged;
//! - killed inside it (a fatal signal can cut a write to a regular file between pages): the
//!   log ends with a fragment without its newline. The fragment is not a write: the state is
//!   derived from complete lines only, the next writer first closes the fragment with `!\n`
//!   (which makes it unparseable for good, whatever it held), and [`read_log`] counts it as
//!   a *cut write*, never as an update.
//!
//! Why not the alternative (block SIGTERM in the child around the critical section): a sink
//! state kept apart from its log can still be cut by SIGKILL (the watchdog kills the child's
//! whole group with it), so the two records would disagree again; one record with one commit
//! point cannot. An earlier version rewrote a state file in place and then appended the line:
//! a child stopped between the two left a counter without its log line, and the successor's
//! next write read as "updates lost" (issue 18).
//!
//! Deriving the state reads only the log's tail (a few hundred bytes), so a write costs the
//! same at the first line and the millionth.
//!
//! The work is a counter, written the way a leader that believes it is the only writer would
//! write it: the child reads the counter once, at its first accepted write, and from then on
//! writes its own running count (blind writes). A **fenced** sink rejects a write whose ballot
//! is lower than the highest it has accepted; an **unfenced** one accepts everything, so a
//! stale writer's blind writes land after its successor's and undo them (lost updates).

pub mod entry;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use entry::{SinkEntry, SinkState};

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

/// What the next writer puts before its line when the log ends with a cut fragment.
const CLOSE_CUT: &[u8] = b"!\n";

/// A writer's view of the counter: `None` until its first accepted write.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writer {
    local: Option<u64>,
}

/// An open sink.
#[derive(Debug)]
pub struct Sink {
    log: File,
    fencing: Fencing,
}

/// The log of sink `name` in `dir`.
pub fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}

impl Sink {
    /// Opens (creating if needed) sink `name` in `dir`.
    pub fn open(dir: &Path, name: &str, fencing: Fencing) -> io::Result<Sink> {
        let log = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(log_path(dir, name))?;
        Ok(Sink { log, fencing })
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
            match Flock::lock(self.log.try_clone()?, FlockArg::LockExclusiveNonblock) {
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
        let tail = read_tail(&locked)?;
        let state = tail.state;
        let t_ns = now_ns();
        let (entry, outcome) = if self.fencing == Fencing::Fenced && ballot < state.max_ballot {
            let entry = SinkEntry {
                accepted: false,
                ballot,
                value: state.max_ballot,
                t_ns,
                candidate: candidate.to_owned(),
                state,
            };
            (
                entry,
                Outcome::Rejected {
                    max_ballot: state.max_ballot,
                },
            )
        } else {
            let next = writer.local.unwrap_or(state.counter).saturating_add(1);
            let entry = SinkEntry {
                accepted: true,
                ballot,
                value: next,
                t_ns,
                candidate: candidate.to_owned(),
                state: SinkState {
                    max_ballot: state.max_ballot.max(ballot),
                    counter: next,
                },
            };
            (entry, Outcome::Accepted { value: next })
        };
        let mut bytes = Vec::with_capacity(96);
        if tail.ends_cut {
            bytes.extend_from_slice(CLOSE_CUT);
        }
        bytes.extend_from_slice(entry.line().as_bytes());
        bytes.push(b'\n');
        // The commit point: one system call (a short count is a cut write, closed by the next
        // writer; it is not retried, since its first part is already in the log).
        let n = (&*locked).write(&bytes)?;
        if n < bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("sink write cut short: {n} of {} bytes", bytes.len()),
            ));
        }
        drop(locked);
        if let Outcome::Accepted { value } = outcome {
            writer.local = Some(value);
        }
        Ok(Some(outcome))
    }
}

/// What the end of a log says.
struct Tail {
    /// The state after the last complete line (zeros for an empty log).
    state: SinkState,
    /// Whether the log ends with a fragment (no newline): a write cut inside its `write(2)`.
    ends_cut: bool,
}

/// How much of the log's end one read looks at (a line is well under 200 bytes).
const TAIL_WINDOW: u64 = 1024;

/// The state after the log's last complete line, reading backwards from the end in windows.
fn read_tail(file: &File) -> io::Result<Tail> {
    let len = file.metadata()?.len();
    let mut last = [b'\n'];
    if len > 0 {
        file.read_exact_at(&mut last, len.saturating_sub(1))?;
    }
    let ends_cut = last != [b'\n'];
    let mut window = TAIL_WINDOW;
    loop {
        let from = len.saturating_sub(window);
        let mut buf = vec![0u8; usize::try_from(len.saturating_sub(from)).unwrap_or(0)];
        file.read_exact_at(&mut buf, from)?;
        // Complete lines end with a newline. A window that does not start at the file's
        // beginning may start inside a line: its first piece is not a line.
        let complete = match buf.iter().rposition(|b| *b == b'\n') {
            Some(last_nl) => buf.get(..last_nl).unwrap_or_default(),
            None => &[],
        };
        let skip = usize::from(from > 0);
        let found = complete
            .split(|b| *b == b'\n')
            .skip(skip)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .find_map(|line| std::str::from_utf8(line).ok().and_then(SinkEntry::parse));
        match found {
            Some(e) => {
                return Ok(Tail {
                    state: e.state,
                    ends_cut,
                });
            }
            None if from == 0 => {
                return Ok(Tail {
                    state: SinkState::default(),
                    ends_cut,
                });
            }
            None => window = window.saturating_mul(4),
        }
    }
}

/// A sink's log as the checks read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkLog {
    /// The writes, in the order the sink took them.
    pub entries: Vec<SinkEntry>,
    /// Writes cut inside their `write(2)` (a fragment, closed or still at the end): they did
    /// not happen, and no state was derived from them.
    pub cut: u64,
}

/// Reads a sink's log (a missing log is an empty one).
pub fn read_log(path: &Path) -> io::Result<SinkLog> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => f.read_to_end(&mut bytes)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(SinkLog::default()),
        Err(e) => return Err(e),
    };
    let mut log = SinkLog::default();
    let mut rest = bytes.as_slice();
    while !rest.is_empty() {
        let (line, complete, next) = match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (
                rest.get(..i).unwrap_or_default(),
                true,
                rest.get(i.saturating_add(1)..).unwrap_or_default(),
            ),
            None => (rest, false, &[][..]),
        };
        match std::str::from_utf8(line).ok().and_then(SinkEntry::parse) {
            Some(e) if complete => log.entries.push(e),
            _ => log.cut = log.cut.saturating_add(1),
        }
        rest = next;
    }
    Ok(log)
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

    const P: Duration = Duration::from_millis(50);

    fn t() -> u64 {
        1
    }

    fn append(d: &Path, bytes: &[u8]) {
        let mut f = OpenOptions::new()
            .append(true)
            .open(log_path(d, "s"))
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn a_fenced_sink_rejects_a_stale_ballot_and_keeps_every_increment() {
        let d = dir("fenced");
        let mut a = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let mut b = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let (mut wa, mut wb) = (Writer::default(), Writer::default());
        let accepted = |value| Some(Outcome::Accepted { value });
        assert_eq!(a.write(&mut wa, 5, "a", P, t).unwrap(), accepted(1));
        assert_eq!(a.write(&mut wa, 5, "a", P, t).unwrap(), accepted(2));
        assert_eq!(b.write(&mut wb, 6, "b", P, t).unwrap(), accepted(3));
        assert_eq!(
            a.write(&mut wa, 5, "a", P, t).unwrap(),
            Some(Outcome::Rejected { max_ballot: 6 })
        );
        let log = read_log(&log_path(&d, "s")).unwrap();
        assert_eq!(log.cut, 0);
        assert_eq!(log.entries.len(), 4);
        assert!(!log.entries[3].accepted);
        assert_eq!(log.entries[2].candidate, "b");
        assert_eq!(
            log.entries[3].state,
            SinkState {
                max_ballot: 6,
                counter: 3
            }
        );
    }

    #[test]
    fn an_unfenced_sink_lets_a_stale_writer_undo_its_successor() {
        let d = dir("unfenced");
        let mut a = Sink::open(&d, "s", Fencing::Unfenced).unwrap();
        let mut b = Sink::open(&d, "s", Fencing::Unfenced).unwrap();
        let (mut wa, mut wb) = (Writer::default(), Writer::default());
        a.write(&mut wa, 5, "a", P, t).unwrap();
        b.write(&mut wb, 6, "b", P, t).unwrap();
        b.write(&mut wb, 6, "b", P, t).unwrap();
        // The stale writer's blind write sets the counter back.
        assert_eq!(
            a.write(&mut wa, 5, "a", P, t).unwrap(),
            Some(Outcome::Accepted { value: 2 })
        );
    }

    #[test]
    fn a_held_lock_makes_a_write_give_up_after_its_patience() {
        let d = dir("busy");
        let mut a = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let holder = File::open(log_path(&d, "s")).unwrap();
        let held = Flock::lock(holder, FlockArg::LockExclusive).unwrap();
        let short = Duration::from_millis(5);
        let mut w = Writer::default();
        assert_eq!(a.write(&mut w, 1, "a", short, t).unwrap(), None);
        drop(held);
        assert!(a.write(&mut w, 1, "a", short, t).unwrap().is_some());
    }

    #[test]
    fn a_write_cut_inside_its_system_call_did_not_happen_and_is_closed_by_the_next() {
        let d = dir("cut");
        let mut a = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let mut wa = Writer::default();
        a.write(&mut wa, 5, "a", P, t).unwrap();
        // Ballot 6's first write dies inside write(2), after "... 6 2 " of "... 6 2 .\n":
        // every prefix of a line, closed by the next writer, must not count.
        let whole = SinkEntry {
            accepted: true,
            ballot: 6,
            value: 2,
            t_ns: 1,
            candidate: "b".into(),
            state: SinkState {
                max_ballot: 6,
                counter: 2,
            },
        }
        .line();
        for cut in 1..=whole.len() {
            append(&d, whole.get(..cut).unwrap().as_bytes());
            // The fence still admits ballot 5 and its count goes on from 1 (the cut write
            // did not happen), closing the fragment first.
            let before = read_log(&log_path(&d, "s")).unwrap();
            assert_eq!(before.cut, u64::try_from(cut).unwrap());
            let got = a.write(&mut wa, 5, "a", P, t).unwrap();
            assert_eq!(
                got,
                Some(Outcome::Accepted {
                    value: 2 + u64::try_from(cut).unwrap() - 1
                }),
                "cut after {cut} bytes"
            );
        }
        let log = read_log(&log_path(&d, "s")).unwrap();
        assert_eq!(log.cut, u64::try_from(whole.len()).unwrap());
        assert!(log.entries.iter().all(|e| e.ballot == 5));
        // Each entry's count follows the one before it: nothing lost, nothing invented.
        for (i, e) in log.entries.iter().enumerate() {
            assert_eq!(e.value, u64::try_from(i).unwrap() + 1);
        }
    }

    #[test]
    fn the_state_is_found_behind_a_tail_longer_than_one_window() {
        let d = dir("window");
        let mut a = Sink::open(&d, "s", Fencing::Fenced).unwrap();
        let mut wa = Writer::default();
        for _ in 0..3 {
            a.write(&mut wa, 7, "a", P, t).unwrap();
        }
        // Garbage lines (cut writes closed by hand) longer than the tail window.
        for _ in 0..40 {
            append(
                &d,
                b"A 9 9 9 garbage-garbage-garbage-garbage-garbage-garbage-garbage!\n",
            );
        }
        let mut fresh = Writer::default();
        assert_eq!(
            a.write(&mut fresh, 7, "b", P, t).unwrap(),
            Some(Outcome::Accepted { value: 4 })
        );
    }

    #[test]
    fn log_lines_round_trip_and_partial_lines_do_not_parse() {
        let e = SinkEntry {
            accepted: false,
            ballot: 3,
            value: 4,
            t_ns: 5,
            candidate: "c0i1-ab".into(),
            state: SinkState {
                max_ballot: 4,
                counter: 9,
            },
        };
        let line = e.line();
        assert_eq!(SinkEntry::parse(&line), Some(e));
        assert_eq!(SinkEntry::parse("X 1 2 3 c 1 2 ."), None);
        for cut in 0..line.len() {
            let part = line.get(..cut).unwrap();
            assert_eq!(SinkEntry::parse(part), None, "{part:?}");
            assert_eq!(SinkEntry::parse(&format!("{part}!")), None, "{part:?}!");
        }
    }
}
