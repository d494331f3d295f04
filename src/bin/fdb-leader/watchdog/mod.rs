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
//! **Noticing a moved deadline.** The supervisor learns renewals through its guard's
//! `deadline()` (a `LeadershipGuard`; under `run --shards`, each shard's `ShardGuard`, which
//! every renewal of the member moves) and `deadline_moved()`, which resolves at each move: a
//! task of the supervisor waits for it, reads the deadline and writes a note when it differs
//! from the last one written (a renewal, about once a heartbeat, or a shortened lease), at
//! once. It does nothing in between: `run --shards 256` once polled 256 deadlines every 10 ms,
//! a quarter of a core in a debug build, on the thread that renews. The write end is
//! non-blocking: a note that does not fit (a watchdog stopped for minutes) is written again
//! every [`FEED_RETRY`] until one fits. A leader renews every heartbeat, and at the latest a
//! renewal margin (transaction timeout + a quarter heartbeat) before the deadline, so one that
//! keeps renewing keeps the watchdog's deadline ahead by far; only a renewal confirmed just
//! before its deadline (or a supervisor held up between the commit and the note) could come
//! too late, and then the supervisor sees its child killed by SIGKILL while still leading and
//! applies `--on-child-exit`. A note that never comes only kills early. The deadline is read
//! even once the guard is cancelled: one moved back just before still reaches the watchdog.

mod lifeline;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command as StdCommand, ExitCode, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::signal::{SigSet, Signal, killpg, raise};
use nix::sys::time::TimeSpec;
use nix::time::{ClockId, clock_gettime};
use nix::unistd::{Pid, getpgrp, getpid, getppid};

pub(crate) use lifeline::{Kept, Lease, Lifeline};

/// `argv[1]` of the watchdog mode: `fdb-leader __watchdog [--lease SENT DEADLINE] --
/// PROGRAM ARGS…`.
pub(crate) const WATCHDOG: &str = "__fdb-leader-watchdog";
/// `argv[1]` of the exec shim: `fdb-leader __exec PARENT_PID -- PROGRAM ARGS…`.
pub(crate) const EXEC: &str = "__fdb-leader-exec";
/// The watchdog's option that arms the lease: `--lease SENT DEADLINE`.
const LEASE: &str = "--lease";

/// How soon the supervisor writes again a note that did not fit the lifeline.
pub(crate) const FEED_RETRY: Duration = Duration::from_millis(10);
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
mod tests;
