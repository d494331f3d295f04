//! The child never outlives `fdb-leader`: a watchdog process between the supervisor and the
//! child.
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

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command as StdCommand, ExitCode, Stdio};

use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, Signal, killpg, raise};
use nix::unistd::{Pid, getpgrp, getpid, getppid};

/// `argv[1]` of the watchdog mode: `fdb-leader __watchdog -- PROGRAM ARGS…`.
pub(crate) const WATCHDOG: &str = "__fdb-leader-watchdog";
/// `argv[1]` of the exec shim: `fdb-leader __exec PARENT_PID -- PROGRAM ARGS…`.
pub(crate) const EXEC: &str = "__fdb-leader-exec";

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

/// The lifeline: the read end goes to the watchdog (as its standard input), the write end
/// stays in the supervisor (close-on-exec, so no other child inherits it) until the child
/// has been stopped.
pub(crate) fn lifeline() -> std::io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(std::io::Error::from)
}

/// The arguments that make `fdb-leader` a watchdog running `program args…`.
pub(crate) fn watchdog_args(program: &OsStr, args: &[OsString]) -> Vec<OsString> {
    let mut out = vec![OsString::from(WATCHDOG), OsString::from("--")];
    out.push(program.to_owned());
    out.extend(args.iter().cloned());
    out
}

/// The command after `--` in a hidden mode's arguments.
fn command_after_dashes(args: &[OsString]) -> Option<(&OsString, &[OsString])> {
    let at = args.iter().position(|a| a == "--")?;
    args.get(at.checked_add(1)?..)?.split_first()
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
/// input (the lifeline) reaches end-of-file, and exits as the command did.
fn watchdog(args: &[OsString]) -> ExitCode {
    let Some((program, rest)) = command_after_dashes(args) else {
        return complain("usage: __fdb-leader-watchdog -- PROGRAM [ARGS...]");
    };
    // Started through /proc/self/exe, the process would be listed as `exe`.
    let _ = nix::sys::prctl::set_name(c"fdb-leader-wd");
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
    // The lifeline: nothing is ever written; end-of-file (or an error) means the supervisor
    // is gone.
    let watcher = std::thread::Builder::new()
        .name("lifeline".into())
        .spawn(|| {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 64];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
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
    use super::*;

    #[test]
    fn the_command_follows_the_dashes() {
        let args = watchdog_args(OsStr::new("sh"), &["-c".into(), "echo --".into()]);
        assert_eq!(args[0], WATCHDOG);
        let (program, rest) = command_after_dashes(&args[1..]).unwrap_or((&args[0], &[]));
        assert_eq!(program, "sh");
        assert_eq!(rest, ["-c", "echo --"].map(OsString::from));
        assert!(command_after_dashes(&["x".into()]).is_none());
        assert!(command_after_dashes(&["--".into()]).is_none());
    }

    #[test]
    fn other_arguments_are_not_hidden_modes() {
        let argv: Vec<OsString> = ["fdb-leader", "status"].map(OsString::from).to_vec();
        assert!(hidden_mode(&argv).is_none());
        assert!(hidden_mode(&argv[..1]).is_none());
    }
}
