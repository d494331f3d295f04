//! The cluster's own availability, measured beside the supervisors: a probe that commits one
//! small write at a time through an interactive `fdbcli` (`writemode on`, then `set` after
//! `set`, each sent when the previous one answered, [`PROBE_SPACING`] apart), timestamped in
//! true time. The gaps between its commits are the cluster's stalls (a recovery, a stopped
//! transaction process): the time no client could commit, which check (c) adds to the
//! recovery bound.
//!
//! `fdbcli` buffers its output when it is not on a terminal; it runs under `stdbuf -oL` (GNU
//! coreutils) so that each answer arrives when it is printed. It answers `Committed (V)` on
//! its standard output and `ERROR: ...` (for example 1021 during a recovery) on its standard
//! error; the probe reads both.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock::{monotonic_ns, ns};

/// The pause between one probe commit's answer and the next one's start.
pub const PROBE_SPACING: Duration = Duration::from_millis(50);

/// A gap between two probe commits longer than this (beyond the spacing) is a stall.
pub const STALL_MIN: Duration = Duration::from_millis(200);

/// How long one probe commit may take before the `fdbcli` is replaced by a new one.
const PROBE_PATIENCE: Duration = Duration::from_secs(60);

/// The key the probe writes (outside every election's subspace).
pub const PROBE_KEY: &str = "fdb-leader-chaos-probe";

/// One probe commit: sent, answered (true time), and whether it committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeCommit {
    /// When the `set` was sent.
    pub sent: u64,
    /// When its answer came.
    pub done: u64,
    /// `Committed`, not `ERROR`.
    pub ok: bool,
}

/// A running probe.
#[derive(Debug)]
pub struct Probe {
    stop: Arc<AtomicBool>,
    commits: Arc<Mutex<Vec<ProbeCommit>>>,
    /// When the last successful commit was answered (0: none yet).
    last: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

struct Cli {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

fn start_cli(fdbcli: &Path, cluster_file: &Path) -> std::io::Result<Cli> {
    let mut child = Command::new("stdbuf")
        .arg("-oL")
        .arg(fdbcli)
        .arg("-C")
        .arg(cluster_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("fdbcli: no stdout"))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| std::io::Error::other("fdbcli: no stderr"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("fdbcli: no stdin"))?;
    // `Committed (V)` comes on standard output, `ERROR: ...` on standard error.
    let (tx, rx) = channel();
    let forward = |stream: Box<dyn std::io::Read + Send>, tx: std::sync::mpsc::Sender<String>| {
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    };
    forward(Box::new(stdout), tx.clone());
    forward(Box::new(stderr), tx);
    stdin.write_all(b"writemode on\n")?;
    Ok(Cli {
        child,
        stdin,
        lines: rx,
    })
}

fn end_cli(mut cli: Cli) {
    let _ = cli.child.kill();
    let _ = cli.child.wait();
}

impl Probe {
    /// Starts probing the cluster of `cluster_file` with `fdbcli`.
    pub fn start(fdbcli: &Path, cluster_file: &Path) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let commits = Arc::new(Mutex::new(Vec::new()));
        let last = Arc::new(AtomicU64::new(0));
        let (fdbcli, cluster_file): (PathBuf, PathBuf) =
            (fdbcli.to_owned(), cluster_file.to_owned());
        let thread = {
            let (stop, commits, last) =
                (Arc::clone(&stop), Arc::clone(&commits), Arc::clone(&last));
            std::thread::spawn(move || {
                let mut n = 0u64;
                let mut cli: Option<Cli> = None;
                while !stop.load(Ordering::Relaxed) {
                    let current = match cli.take() {
                        Some(c) => c,
                        None => match start_cli(&fdbcli, &cluster_file) {
                            Ok(c) => c,
                            Err(_) => {
                                std::thread::sleep(Duration::from_millis(500));
                                continue;
                            }
                        },
                    };
                    let mut current = current;
                    n = n.saturating_add(1);
                    let sent = monotonic_ns();
                    if writeln!(current.stdin, "set {PROBE_KEY} {n}").is_err() {
                        end_cli(current);
                        continue;
                    }
                    let deadline = sent.saturating_add(ns(PROBE_PATIENCE));
                    let answer = loop {
                        if stop.load(Ordering::Relaxed) {
                            break None;
                        }
                        match current.lines.recv_timeout(Duration::from_millis(100)) {
                            Ok(line) if line.starts_with("Committed") => break Some(true),
                            Ok(line) if line.starts_with("ERROR") => break Some(false),
                            Ok(_) => {}
                            Err(RecvTimeoutError::Timeout) if monotonic_ns() < deadline => {}
                            Err(_) => break None,
                        }
                    };
                    let Some(ok) = answer else {
                        end_cli(current);
                        continue;
                    };
                    let done = monotonic_ns();
                    if ok {
                        last.store(done, Ordering::Relaxed);
                    }
                    commits
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(ProbeCommit { sent, done, ok });
                    cli = Some(current);
                    std::thread::sleep(PROBE_SPACING);
                }
                if let Some(mut c) = cli {
                    let _ = writeln!(c.stdin, "clear {PROBE_KEY}");
                    let _ = c.stdin.flush();
                    std::thread::sleep(Duration::from_millis(200));
                    end_cli(c);
                }
            })
        };
        Probe {
            stop,
            commits,
            last,
            thread: Some(thread),
        }
    }

    /// When the last successful probe commit was answered, if any.
    pub fn last_commit(&self) -> Option<u64> {
        Some(self.last.load(Ordering::Relaxed)).filter(|t| *t > 0)
    }

    /// Stops the probe and returns its commits.
    pub fn finish(mut self) -> Vec<ProbeCommit> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.commits.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The stalls: between two successful probe commits answered more than spacing + `min`
/// apart, from the first one's answer plus the spacing to the second one's answer. Sorted,
/// disjoint.
pub fn stalls(commits: &[ProbeCommit], spacing: Duration, min: Duration) -> Vec<(u64, u64)> {
    let mut done: Vec<u64> = commits.iter().filter(|c| c.ok).map(|c| c.done).collect();
    done.sort_unstable();
    let (spacing, min) = (ns(spacing), ns(min));
    done.windows(2)
        .filter_map(|w| match w {
            [a, b] if b.saturating_sub(*a) > spacing.saturating_add(min) => {
                Some((a.saturating_add(spacing), *b))
            }
            _ => None,
        })
        .collect()
}

/// How much of `[from, to]` the stalls cover, in nanoseconds.
pub fn stalled_within(stalls: &[(u64, u64)], from: u64, to: u64) -> u64 {
    stalls
        .iter()
        .map(|(a, b)| (*b).min(to).saturating_sub((*a).max(from)))
        .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn commit(done_ms: u64, ok: bool) -> ProbeCommit {
        ProbeCommit {
            sent: done_ms.saturating_sub(5).saturating_mul(MS),
            done: done_ms.saturating_mul(MS),
            ok,
        }
    }

    #[test]
    fn stalls_are_the_long_gaps_between_commits() {
        let c = [
            commit(0, true),
            commit(60, true),
            commit(120, true),
            commit(2000, false),
            commit(3120, true),
            commit(3180, true),
        ];
        let s = stalls(&c, PROBE_SPACING, STALL_MIN);
        assert_eq!(s, vec![(170 * MS, 3120 * MS)]);
        assert_eq!(stalled_within(&s, 0, 10_000 * MS), 2950 * MS);
        assert_eq!(stalled_within(&s, 1000 * MS, 2000 * MS), 1000 * MS);
        assert_eq!(stalled_within(&s, 3200 * MS, 4000 * MS), 0);
        assert!(stalls(&c[..3], PROBE_SPACING, STALL_MIN).is_empty());
    }
}
