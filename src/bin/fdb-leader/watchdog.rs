//! The child never outlives `fdb-leader`, nor its leadership: a watchdog process between the
//! supervisor and the child, which also holds the lease.
//!
//! # Why a process, and why this one
//!
//! The supervisor cannot clean up after a `kill -9`, an OOM kill or an abort; something that
//! survives it must. Three designs were weighed:
//!
//! - **`PR_SET_PDEATHSIG` on the child** (set between fork and exec): the kernel signals the
//!   child when the *thread* that forked it exits. It reaches the child only, not the
//!   processes the child started (a `sh -c` pipeline, a daemon's workers), and setting it
//!   needs `unsafe` code between fork and exec.
//! - **A watchdog pipe in the supervisor's own children**: nothing would read it once the
//!   supervisor is dead.
//! - **A watchdog process** (chosen): the supervisor starts `fdb-leader` itself in a hidden
//!   mode as the leader of a new process group. The watchdog starts the command in that same
//!   group and holds the read end of a pipe whose only write end the supervisor keeps. When
//!   the supervisor dies, by any signal, the kernel closes the write end, the watchdog reads
//!   end-of-file and sends SIGKILL to the whole group: the command and everything it started
//!   (unless it left the group with `setsid`), within milliseconds. No `unsafe`: the pipe
//!   is the watchdog's standard input.
//!
//! The watchdog adds a parent-death signal as a second layer: the command is started through
//! a tiny re-exec of `fdb-leader` that sets `PR_SET_PDEATHSIG` (SIGKILL) on itself, checks
//! that its parent is still the watchdog, and then `exec`s the command (the setting survives
//! `exec`). The watchdog's main thread forks it and lives exactly as long as it. So killing
//! the supervisor and the watchdog together (`pkill -9 fdb-leader`) still ends the command
//! itself.
//!
//! Normal stops are unchanged: the supervisor signals the group (the watchdog blocks SIGINT,
//! SIGTERM and SIGHUP and waits for the command), and the watchdog exits as the command did:
//! with its exit code, or killed by the same signal. Killing the watchdog alone (SIGKILL)
//! looks to the supervisor like a child killed by SIGKILL: it then clears the group.
//!
//! # The watchdog holds the lease
//!
//! A supervisor that is alive but does not run — stopped alone (`SIGSTOP`, a `SIGTTOU`), or
//! its runtime blocked by a bug — closes no pipe, and its child would run on past the
//! leadership, beside a successor's. So for the child (and the begin-command) the supervisor
//! also tells the watchdog its *belief deadline*, the instant its leadership ends unless
//! renewed: first on the watchdog's command line (`--lease SENT DEADLINE`, read just before
//! the spawn), then on the lifeline, one line `SENT DEADLINE\n` each time the deadline moves
//! (every renewal moves it forward; a shorter lease written by an operator moves it back) and
//! once at once after the spawn. The watchdog sends SIGKILL to the group as soon as its clock
//! passes the latest deadline it was told (the latest, not the largest: a deadline moved back
//! is obeyed at once). No grace: from that instant a successor may start its own child.
//! End-of-file on the lifeline still kills at once.
//!
//! **Clocks.** `SENT` and `DEADLINE` are readings of the supervisor's `CLOCK_MONOTONIC`, in
//! nanoseconds: `SENT` is read after the guard's remaining time `R`, and `DEADLINE = SENT + R`
//! (so never earlier than the guard's own deadline). On one machine the watchdog's clock is the
//! same clock, and comparing `DEADLINE` with it would be exact. Under libfaketime it need not
//! be: the chaos harness runs supervisors with `FAKETIME="+0 xRATE"`, which the watchdog (a
//! re-exec of `fdb-leader`) inherits, and libfaketime's fake clock (which for
//! `CLOCK_MONOTONIC` reads near the epoch's seconds) runs at the rate from an origin taken at
//! the process's start. A child that inherits `FAKETIME_SHARED` shares its parent's origin
//! (so the harness's watchdogs read their supervisor's clock), but one started without it
//! has an origin of its own: at the same rate, the two clocks then differ by a constant
//! offset, `(watchdog start − supervisor start) × (1 − RATE)` between two fake clocks and
//! about 1.8e9 s between a fake and the real one. A watchdog ahead would kill early (a healthy
//! leader's child), one behind would kill late. Sending the remaining duration instead and
//! dating it on receipt is safe under any offset, but late on a normal machine by however
//! long the note took from the supervisor's clock read to the watchdog's — unbounded if the
//! supervisor is descheduled or stopped in between.
//!
//! The watchdog therefore converts each deadline with an *offset* it estimates itself: for
//! every note it reads its own clock `NOW` on receipt, and keeps `offset = min(NOW − SENT)`
//! over all notes so far; the deadline it enforces is `DEADLINE + offset`. Since a note is
//! always received after it was sent, every `NOW − SENT` is at least the true offset between
//! the two clocks, and so is their minimum: **the watchdog never kills before the supervisor's
//! own deadline**, on any pair of clocks that run at the same rate (one machine, or one
//! libfaketime rate). It kills late by the smallest delivery latency seen so far — on a normal
//! machine (offset 0) tens of microseconds once a note has crossed the pipe — and a note that
//! is delayed (the supervisor stopped between its clock read and the write) is still converted
//! exactly, because its `DEADLINE` is absolute and the offset comes from the fastest note.
//!
//! **Noticing a moved deadline.** The supervisor learns renewals only through its
//! `LeadershipGuard` (`deadline()`), which has no change notification: a task of the
//! supervisor reads the deadline (one atomic load) every [`FEED_POLL`] (10 ms), every
//! [`FEED_POLL_NEAR`] (1 ms) in the last [`NEAR`] before the deadline the watchdog holds, and
//! writes a note when it differs from the last one written (a renewal, about once a heartbeat,
//! or a shortened lease, within 10 ms). The write end is non-blocking: a note that does not fit
//! (a watchdog stopped for minutes) is written again at the next poll. A leader renews every
//! heartbeat, and at the latest a renewal margin (transaction timeout + a quarter heartbeat)
//! before the deadline, so one that keeps renewing keeps the watchdog's deadline ahead by far;
//! only a renewal confirmed in the last millisecond before its deadline could come too late,
//! and then the supervisor sees its child killed by SIGKILL while still leading and applies
//! `--on-child-exit`. The deadline is read even once the guard is cancelled: one moved back
//! just before still reaches the watchdog.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command as StdCommand, ExitCode, Stdio};
use std::time::Duration;

use fdb_leader_election::runner::LeadershipGuard;
use fdb_leader_election::{Candidate, LocalInstant};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::signal::{SigSet, Signal, killpg, raise};
use nix::sys::time::TimeSpec;
use nix::time::{ClockId, clock_gettime};
use nix::unistd::{Pid, getpgrp, getpid, getppid};

/// `argv[1]` of the watchdog mode: `fdb-leader __watchdog [--lease SENT DEADLINE] --
/// PROGRAM ARGS…`.
pub(crate) const WATCHDOG: &str = "__fdb-leader-watchdog";
/// `argv[1]` of the exec shim: `fdb-leader __exec PARENT_PID -- PROGRAM ARGS…`.
pub(crate) const EXEC: &str = "__fdb-leader-exec";
/// The watchdog's option that arms the lease: `--lease SENT DEADLINE`.
const LEASE: &str = "--lease";

/// How often the supervisor looks for a moved deadline.
pub(crate) const FEED_POLL: Duration = Duration::from_millis(10);
/// How often it looks in the last [`NEAR`] before the deadline the watchdog holds.
pub(crate) const FEED_POLL_NEAR: Duration = Duration::from_millis(1);
/// How close to the watchdog's deadline the supervisor looks every [`FEED_POLL_NEAR`].
pub(crate) const NEAR: Duration = Duration::from_millis(15);
/// The longest note line the watchdog accepts (two 20-digit numbers, a space, a newline).
const MAX_NOTE: usize = 64;

/// This process's `CLOCK_MONOTONIC` in nanoseconds (under libfaketime, its fake one).
pub(crate) fn monotonic_ns() -> Option<u64> {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).ok()?;
    let secs = u64::try_from(t.tv_sec()).ok()?;
    let nanos = u64::try_from(t.tv_nsec()).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// One belief deadline, as the supervisor tells it: readings of its `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Note {
    /// When the supervisor read its clock for this note (after the remaining time).
    pub(crate) sent: u64,
    /// `sent` + the leadership's remaining time then.
    pub(crate) deadline: u64,
}

impl Note {
    /// The note for a leadership with `remaining` left, read now on this process's clock.
    fn now(remaining: Duration) -> Option<Note> {
        let sent = monotonic_ns()?;
        let left = u64::try_from(remaining.as_nanos()).unwrap_or(u64::MAX);
        Some(Note {
            sent,
            deadline: sent.saturating_add(left),
        })
    }

    /// `SENT DEADLINE\n`.
    fn line(self) -> String {
        format!("{} {}\n", self.sent, self.deadline)
    }

    /// A line without its newline: two decimal numbers, the deadline not before the send.
    fn parse(line: &[u8]) -> Option<Note> {
        let text = std::str::from_utf8(line).ok()?;
        let (sent, deadline) = text.trim_end().split_once(' ')?;
        let note = Note {
            sent: sent.parse().ok()?,
            deadline: deadline.parse().ok()?,
        };
        (note.deadline >= note.sent).then_some(note)
    }
}

/// The watchdog's view of the lease: the supervisor's deadline, converted to the watchdog's
/// clock with the smallest offset seen (see the module's docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Held {
    /// `min(NOW − SENT)` over the notes so far, nanoseconds (negative when the supervisor's
    /// clock is ahead, as under a fast libfaketime rate).
    offset: Option<i128>,
    /// The deadline on the watchdog's clock; `None` until the first note (an unarmed watchdog,
    /// as for the end-command, kills only on end-of-file).
    deadline: Option<i128>,
}

impl Held {
    /// Takes `note`, received at `now` on the watchdog's clock: the latest note wins.
    fn hold(&mut self, note: Note, now: u64) {
        let seen = i128::from(now).saturating_sub(i128::from(note.sent));
        let offset = self.offset.map_or(seen, |o| o.min(seen));
        self.offset = Some(offset);
        self.deadline = Some(i128::from(note.deadline).saturating_add(offset));
    }

    /// How long the lease lasts from `now` (zero once it has passed); `None` if unarmed.
    fn remaining(&self, now: u64) -> Option<Duration> {
        let left = self.deadline?.saturating_sub(i128::from(now));
        Some(Duration::from_nanos(
            u64::try_from(left.max(0)).unwrap_or(u64::MAX),
        ))
    }
}

/// Why the watchdog kills the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// End-of-file (or an error) on the lifeline: the supervisor is gone.
    Closed,
    /// The deadline passed without a newer one.
    Deadline,
    /// A note that cannot be read, or no clock: fail safe.
    Garbled,
}

/// Reads notes from `lifeline` until the group must die, and says why. `now`: the watchdog's
/// clock.
fn hold_lease(lifeline: &File, mut held: Held, now: impl Fn() -> Option<u64>) -> Why {
    let mut line = Vec::with_capacity(MAX_NOTE);
    let mut chunk = [0u8; 512];
    loop {
        let Some(t) = now() else {
            return Why::Garbled;
        };
        let timeout = match held.remaining(t) {
            None => None,
            Some(left) if left.is_zero() => return Why::Deadline,
            Some(left) => Some(TimeSpec::from_duration(left)),
        };
        let mut fds = [PollFd::new(lifeline.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, timeout, None) {
            // The time is up, or a signal: look at the clock again.
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return Why::Closed,
        }
        let n = match (&*lifeline).read(&mut chunk) {
            Ok(0) => return Why::Closed,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Why::Closed,
        };
        for &byte in chunk.get(..n).unwrap_or_default() {
            if byte != b'\n' {
                if line.len() >= MAX_NOTE {
                    return Why::Garbled;
                }
                line.push(byte);
                continue;
            }
            let (Some(note), Some(t)) = (Note::parse(&line), now()) else {
                return Why::Garbled;
            };
            held.hold(note, t);
            line.clear();
        }
    }
}

/// What the supervisor tells a watchdog: the belief deadline of one leadership.
#[derive(Clone)]
pub(crate) struct Lease {
    guard: LeadershipGuard,
    /// The candidate whose clock the guard's deadline is on.
    candidate: Candidate,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("ballot", &self.guard.ballot().get())
            .field("deadline", &self.guard.deadline())
            .finish()
    }
}

impl Lease {
    pub(crate) fn new(guard: &LeadershipGuard, candidate: &Candidate) -> Self {
        Lease {
            guard: guard.clone(),
            candidate: candidate.clone(),
        }
    }

    /// The guard's deadline now, and the note that tells it (`None`: no clock). Read even
    /// once the guard is cancelled: a deadline moved back just before still counts.
    fn note(&self) -> (LocalInstant, Option<Note>) {
        let deadline = self.guard.deadline();
        let remaining = deadline.saturating_duration_since(self.candidate.now());
        (deadline, Note::now(remaining))
    }
}

/// The arguments that make `fdb-leader` a watchdog running `program args…`, holding the lease
/// from `note` on if given.
fn watchdog_args(program: &OsStr, args: &[OsString], note: Option<Note>) -> Vec<OsString> {
    let mut out = vec![OsString::from(WATCHDOG)];
    if let Some(note) = note {
        out.push(LEASE.into());
        out.push(note.sent.to_string().into());
        out.push(note.deadline.to_string().into());
    }
    out.push("--".into());
    out.push(program.to_owned());
    out.extend(args.iter().cloned());
    out
}

/// A watchdog's lifeline: the read end for its standard input, and the supervisor's side.
pub(crate) struct Lifeline {
    /// The watchdog's standard input, until taken.
    read: Option<OwnedFd>,
    /// The write end (close-on-exec, so no other child inherits it).
    write: OwnedFd,
    /// The lease and its first note, if the watchdog holds it.
    lease: Option<(Lease, LocalInstant)>,
    /// The watchdog's arguments.
    args: Vec<OsString>,
}

impl Lifeline {
    /// A lifeline for a watchdog running `program args…`; with `lease`, the watchdog holds it
    /// from the deadline read now on (see the module's docs).
    pub(crate) fn new(
        program: &OsStr,
        args: &[OsString],
        lease: Option<&Lease>,
    ) -> std::io::Result<Lifeline> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
        let (lease, note) = match lease {
            Some(lease) => {
                let (deadline, note) = lease.note();
                // Without a clock the watchdog would have no deadline: refuse to start.
                let note = note.ok_or_else(|| std::io::Error::other("cannot read the clock"))?;
                (Some((lease.clone(), deadline)), Some(note))
            }
            None => (None, None),
        };
        if lease.is_some() {
            // A note that does not fit waits for the next poll instead of blocking the runtime.
            fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(std::io::Error::from)?;
        }
        Ok(Lifeline {
            read: Some(read),
            write,
            lease,
            args: watchdog_args(program, args, note),
        })
    }

    /// The watchdog's arguments: `__fdb-leader-watchdog [--lease SENT DEADLINE] -- PROGRAM
    /// ARGS…`.
    pub(crate) fn args(&self) -> &[OsString] {
        &self.args
    }

    /// The read end, for the watchdog's standard input (once).
    pub(crate) fn take_read(&mut self) -> Option<OwnedFd> {
        self.read.take()
    }

    /// Once the watchdog runs: keeps the write end (dropping the handle closes it, and the
    /// watchdog kills the group), and, if the watchdog holds the lease, tells it each new
    /// deadline from a task of its own, aborted with the handle.
    pub(crate) fn keep(self) -> Kept {
        match self.lease {
            None => Kept {
                _write: Some(self.write),
                feeder: None,
            },
            Some((lease, _)) => {
                let task = tokio::spawn(feed(File::from(self.write), lease));
                Kept {
                    _write: None,
                    feeder: Some(task.abort_handle()),
                }
            }
        }
    }
}

/// The supervisor's side of a running watchdog's lifeline.
#[derive(Debug)]
pub(crate) struct Kept {
    _write: Option<OwnedFd>,
    feeder: Option<tokio::task::AbortHandle>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(feeder) = &self.feeder {
            feeder.abort();
        }
    }
}

/// Writes `note` whole; `Ok(false)` if the pipe is full (try again later), `Err` if the
/// watchdog is gone.
fn write_note(lifeline: &File, note: Note) -> std::io::Result<bool> {
    let line = note.line();
    // At most PIPE_BUF bytes: written whole or not at all.
    match (&*lifeline).write(line.as_bytes()) {
        Ok(n) if n == line.len() => Ok(true),
        Ok(_) => Err(std::io::Error::other("a note was cut")),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// Tells the watchdog each new deadline of `lease` (see the module's docs); the first at once.
async fn feed(lifeline: File, lease: Lease) {
    let mut told: Option<LocalInstant> = None;
    loop {
        let (deadline, note) = lease.note();
        if told != Some(deadline) {
            if let Some(note) = note {
                match write_note(&lifeline, note) {
                    Ok(true) => told = Some(deadline),
                    Ok(false) => {}
                    Err(e) => {
                        // The watchdog is gone (the supervisor sees its exit).
                        tracing::debug!(error = %e, "the watchdog's lifeline is closed");
                        return;
                    }
                }
            }
        }
        let left = told
            .unwrap_or(deadline)
            .saturating_duration_since(lease.candidate.now());
        let pause = if !left.is_zero() && left <= NEAR {
            FEED_POLL_NEAR
        } else {
            FEED_POLL
        };
        tokio::time::sleep(pause).await;
    }
}

/// This executable, for re-executing it: `/proc/self/exe` where there is a `/proc` (it
/// names this very binary even after a package upgrade replaced the file), else the path it
/// was started from.
pub(crate) fn self_exe() -> PathBuf {
    let proc = PathBuf::from("/proc/self/exe");
    if proc.exists() {
        return proc;
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("fdb-leader"))
}

/// The command after `--` in a hidden mode's arguments.
fn command_after_dashes(args: &[OsString]) -> Option<(&OsString, &[OsString])> {
    let at = args.iter().position(|a| a == "--")?;
    args.get(at.checked_add(1)?..)?.split_first()
}

/// The watchdog's options (before `--`): the first note, if it holds the lease. `Err` on
/// anything else.
fn watchdog_options(args: &[OsString]) -> Result<Option<Note>, ()> {
    let end = args.iter().position(|a| a == "--").ok_or(())?;
    match args.get(..end).unwrap_or_default() {
        [] => Ok(None),
        [flag, sent, deadline] if flag == LEASE => {
            let line = format!("{} {}", sent.to_string_lossy(), deadline.to_string_lossy());
            Note::parse(line.as_bytes()).map(Some).ok_or(())
        }
        _ => Err(()),
    }
}

/// Runs a hidden mode if `argv[1]` names one.
pub(crate) fn hidden_mode(argv: &[OsString]) -> Option<ExitCode> {
    let mode = argv.get(1)?;
    let rest = argv.get(2..).unwrap_or_default();
    if mode == WATCHDOG {
        Some(watchdog(rest))
    } else if mode == EXEC {
        Some(exec_shim(rest))
    } else {
        None
    }
}

fn complain(text: &str) -> ExitCode {
    eprintln!("fdb-leader (watchdog): {text}");
    ExitCode::from(127)
}

/// The watchdog: starts the command in this process group, kills the group when standard
/// input (the lifeline) reaches end-of-file or the lease it holds runs out, and exits as the
/// command did.
fn watchdog(args: &[OsString]) -> ExitCode {
    // The first note is dated as early as possible: its latency bounds the first offset.
    let started = monotonic_ns();
    let (Ok(first), Some((program, rest))) = (watchdog_options(args), command_after_dashes(args))
    else {
        return complain(
            "usage: __fdb-leader-watchdog [--lease SENT DEADLINE] -- PROGRAM [ARGS...]",
        );
    };
    let mut held = Held::default();
    if let Some(note) = first {
        let Some(now) = started else {
            return complain("cannot read the clock");
        };
        held.hold(note, now);
    }
    // Started through /proc/self/exe, the process would be listed as `exe`.
    let _ = nix::sys::prctl::set_name(c"fdb-leader-wd");
    // The lifeline, read unbuffered (a buffered reader could hold a note that poll no longer
    // sees).
    let lifeline = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(e) => return complain(&format!("cannot read the lifeline: {e}")),
    };
    // Stops are for the command: the supervisor signals the whole group, and the watchdog
    // must outlive the command to report how it ended. (The mask is inherited through spawn
    // and exec: the exec shim empties it again, so the command sees the stop signals.)
    let mut stops = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        stops.add(signal);
    }
    if let Err(e) = stops.thread_block() {
        return complain(&format!("cannot block signals: {e}"));
    }
    let mut shim = StdCommand::new(self_exe());
    shim.arg0("fdb-leader")
        .arg(EXEC)
        .arg(getpid().as_raw().to_string())
        .arg("--")
        .arg(program)
        .args(rest)
        .stdin(Stdio::null());
    let mut child = match shim.spawn() {
        Ok(child) => child,
        Err(e) => return complain(&format!("cannot start {}: {e}", program.to_string_lossy())),
    };
    // From here on the watchdog writes nothing before it kills: a write to a stopped reader
    // of its standard error (`fdb-leader run … 2>&1 | less`, stopped by Ctrl-Z) would block.
    let watcher = std::thread::Builder::new()
        .name("lifeline".into())
        .spawn(move || {
            let _why = hold_lease(&lifeline, held, monotonic_ns);
            // The group is this process's: the command, whatever it started, and the watchdog.
            let _ = killpg(getpgrp(), Signal::SIGKILL);
        });
    if let Err(e) = watcher {
        let _ = killpg(getpgrp(), Signal::SIGKILL);
        return complain(&format!("cannot watch the supervisor: {e}"));
    }
    let status = match child.wait() {
        Ok(status) => status,
        Err(e) => return complain(&format!("cannot wait for the command: {e}")),
    };
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Some(number) = status.signal() {
        // Die the same way, without a core dump of the watchdog, so the supervisor reports
        // the command's signal.
        let _ = nix::sys::prctl::set_dumpable(false);
        if let Ok(signal) = Signal::try_from(number) {
            // Unblock that signal only: a SIGTERM still pending from the group's stop must
            // not replace, say, the command's SIGKILL.
            let mut only = SigSet::empty();
            only.add(signal);
            let _ = only.thread_unblock();
            let _ = raise(signal);
        }
        return ExitCode::from(u8::try_from(number.saturating_add(128)).unwrap_or(255));
    }
    ExitCode::from(1)
}

/// The exec shim: asks for SIGKILL when its parent (the watchdog) dies, then becomes the
/// command.
fn exec_shim(args: &[OsString]) -> ExitCode {
    let parent = args
        .first()
        .and_then(|p| p.to_str())
        .and_then(|p| p.parse::<i32>().ok());
    let (Some(parent), Some((program, rest))) = (parent, command_after_dashes(args)) else {
        return complain("usage: __fdb-leader-exec PARENT_PID -- PROGRAM [ARGS...]");
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return complain(&format!("cannot set the parent-death signal: {e}"));
    }
    // The watchdog may have died before the request: then nobody would send the signal.
    if getppid() != Pid::from_raw(parent) {
        return ExitCode::from(1);
    }
    // The watchdog's blocked stop signals are inherited: the command must start with an
    // empty mask, or it never sees SIGTERM and is killed at the end of the grace. A stop
    // pending now ends the shim the way it would have ended the command.
    if let Err(e) = SigSet::all().thread_unblock() {
        return complain(&format!("cannot unblock signals: {e}"));
    }
    let e = StdCommand::new(program).args(rest).exec();
    eprintln!("fdb-leader: cannot run {}: {e}", program.to_string_lossy());
    ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_command_follows_the_dashes() {
        let args = watchdog_args(OsStr::new("sh"), &["-c".into(), "echo --".into()], None);
        assert_eq!(args[0], WATCHDOG);
        let (program, rest) = command_after_dashes(&args[1..]).unwrap_or((&args[0], &[]));
        assert_eq!(program, "sh");
        assert_eq!(rest, ["-c", "echo --"].map(OsString::from));
        assert!(command_after_dashes(&["x".into()]).is_none());
        assert!(command_after_dashes(&["--".into()]).is_none());
        assert_eq!(watchdog_options(&args[1..]), Ok(None));
    }

    #[test]
    fn the_first_note_rides_on_the_command_line() {
        let note = Note {
            sent: 5,
            deadline: 900,
        };
        let args = watchdog_args(OsStr::new("sleep"), &["1".into()], Some(note));
        assert_eq!(watchdog_options(&args[1..]), Ok(Some(note)));
        let (program, rest) = command_after_dashes(&args[1..]).unwrap();
        assert_eq!(
            (program.as_os_str(), rest),
            (OsStr::new("sleep"), &["1".into()][..])
        );
        let bad: Vec<OsString> = ["--lease", "9", "x", "--", "sh"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(watchdog_options(&bad), Err(()));
        let odd: Vec<OsString> = ["--other", "--", "sh"].map(OsString::from).to_vec();
        assert_eq!(watchdog_options(&odd), Err(()));
    }

    #[test]
    fn other_arguments_are_not_hidden_modes() {
        let argv: Vec<OsString> = ["fdb-leader", "status"].map(OsString::from).to_vec();
        assert!(hidden_mode(&argv).is_none());
        assert!(hidden_mode(&argv[..1]).is_none());
    }

    #[test]
    fn notes_read_back_and_garbage_is_refused() {
        let note = Note {
            sent: 12,
            deadline: 34,
        };
        let line = note.line();
        assert_eq!(line, "12 34\n");
        assert_eq!(Note::parse(line.trim_end().as_bytes()), Some(note));
        assert_eq!(Note::parse(b"34 12"), None, "a deadline before the send");
        assert_eq!(Note::parse(b"12"), None);
        assert_eq!(Note::parse(b"-1 3"), None);
        assert_eq!(Note::parse(b"1 2 3"), None);
    }

    #[test]
    fn the_same_clock_gives_the_exact_deadline_plus_the_fastest_delivery() {
        let mut held = Held::default();
        assert_eq!(held.remaining(0), None, "unarmed");
        // Sent at 100 ms, deadline 1 s, received 3 ms later (a slow exec).
        held.hold(
            Note {
                sent: 100 * MS,
                deadline: 1000 * MS,
            },
            103 * MS,
        );
        assert_eq!(held.remaining(500 * MS), Some(Duration::from_millis(503)));
        // A note delayed by 200 ms (the supervisor stopped between its clock read and the
        // write) is converted with the best offset so far: still its own deadline + 3 ms.
        held.hold(
            Note {
                sent: 300 * MS,
                deadline: 1200 * MS,
            },
            500 * MS,
        );
        assert_eq!(held.remaining(1200 * MS), Some(Duration::from_millis(3)));
        // A fast note (20 µs) improves the offset for every later deadline.
        held.hold(
            Note {
                sent: 600 * MS,
                deadline: 1400 * MS,
            },
            600 * MS + 20_000,
        );
        assert_eq!(held.remaining(1400 * MS), Some(Duration::from_micros(20)));
        // A deadline moved back (a shorter lease) is obeyed: the latest note wins.
        held.hold(
            Note {
                sent: 700 * MS,
                deadline: 800 * MS,
            },
            701 * MS,
        );
        assert_eq!(held.remaining(800 * MS), Some(Duration::from_micros(20)));
        assert_eq!(held.remaining(900 * MS), Some(Duration::ZERO));
    }

    #[test]
    fn offset_clocks_never_kill_before_the_supervisors_deadline() {
        // Two fake clocks at one rate with a constant offset, either way, and random delivery
        // delays: the watchdog's deadline (on its clock) is never before the supervisor's
        // deadline expressed on the watchdog's clock, and is late by the fastest delivery.
        for offset in [-5_000 * MS as i128, -7, 0, 3, 40_000 * MS as i128] {
            let mut held = Held::default();
            let mut fastest = u64::MAX;
            for (i, delay) in [4 * MS, 90_000, 12 * MS, 30_000, 2 * MS]
                .into_iter()
                .enumerate()
            {
                let sent = 10_000 * MS + (i as u64) * 250 * MS;
                let deadline = sent + 900 * MS;
                let received = i128::from(sent + delay) + offset;
                held.hold(Note { sent, deadline }, u64::try_from(received).unwrap());
                fastest = fastest.min(delay);
                let true_deadline = i128::from(deadline) + offset;
                assert_eq!(held.deadline, Some(true_deadline + i128::from(fastest)));
            }
        }
    }

    fn pipe() -> (File, File) {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        (File::from(r), File::from(w))
    }

    #[test]
    fn the_lifeline_kills_at_end_of_file_at_the_deadline_and_on_garbage() {
        // End-of-file, unarmed.
        let (r, w) = pipe();
        drop(w);
        assert_eq!(hold_lease(&r, Held::default(), monotonic_ns), Why::Closed);
        // A deadline 50 ms ahead, renewed twice, then left to pass.
        let (r, w) = pipe();
        let start = std::time::Instant::now();
        let writer = std::thread::spawn(move || {
            for _ in 0..2 {
                std::thread::sleep(Duration::from_millis(30));
                let note = Note::now(Duration::from_millis(50)).unwrap();
                write_note(&w, note).unwrap();
            }
            std::thread::sleep(Duration::from_secs(2));
            drop(w);
        });
        let mut held = Held::default();
        held.hold(
            Note::now(Duration::from_millis(50)).unwrap(),
            monotonic_ns().unwrap(),
        );
        assert_eq!(hold_lease(&r, held, monotonic_ns), Why::Deadline);
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(110) && took < Duration::from_millis(1500),
            "{took:?}"
        );
        writer.join().unwrap();
        // A deadline moved back to the past kills at once.
        let (r, w) = pipe();
        let mut held = Held::default();
        held.hold(
            Note::now(Duration::from_secs(60)).unwrap(),
            monotonic_ns().unwrap(),
        );
        write_note(&w, Note::now(Duration::ZERO).unwrap()).unwrap();
        assert_eq!(hold_lease(&r, held, monotonic_ns), Why::Deadline);
        // Garbage.
        let (r, w) = pipe();
        (&w).write_all(b"hello world\n").unwrap();
        assert_eq!(hold_lease(&r, Held::default(), monotonic_ns), Why::Garbled);
        let (r, w) = pipe();
        (&w).write_all(&[b'7'; 100]).unwrap();
        assert_eq!(hold_lease(&r, Held::default(), monotonic_ns), Why::Garbled);
    }
}
