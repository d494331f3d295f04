//! Exit codes, and the error every command returns: a message for stderr and the code to exit
//! with; and how an error's chain of sources is printed. A leaf: it uses no other module of
//! the command line (what an election error means for this store is `store::Ctx::failure`).

use std::error::Error;
use std::fmt;
use std::process::ExitCode;

/// The documented exit codes (see `fdb-leader --help`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Success, or a clean shutdown after SIGINT, SIGTERM or SIGHUP.
    Ok = 0,
    /// The request was refused or found nothing: an operator override rejected (ballot
    /// mismatch, no leader, preemption disabled), or the election does not exist.
    Rejected = 1,
    /// A usage error: bad arguments, an invalid configuration, an option this build lacks.
    Usage = 2,
    /// The store failed: it cannot be opened or created, it is corrupt or of an unknown
    /// schema, a transaction failed, or the outcome of a write is unknown.
    Store = 3,
    /// A command failed: the command is not executable, the begin-command exited non-zero,
    /// or the child or a hook could not be started.
    Command = 4,
    /// Not elected in time: `run --timeout` ran out, or `run --try` found the leadership
    /// taken.
    NotElected = 5,
}

impl Exit {
    /// The documented code `code` stands for, if any.
    pub(crate) fn from_code(code: u8) -> Option<Exit> {
        [
            Exit::Ok,
            Exit::Rejected,
            Exit::Usage,
            Exit::Store,
            Exit::Command,
            Exit::NotElected,
        ]
        .into_iter()
        .find(|e| *e as u8 == code)
    }
}

impl From<Exit> for ExitCode {
    fn from(code: Exit) -> Self {
        ExitCode::from(code as u8)
    }
}

/// Why a command failed: the exit code, and what to print on stderr (nothing for a quiet end,
/// such as a closed standard output).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: Exit,
    pub(crate) message: Option<String>,
}

impl Failure {
    pub(crate) fn new(code: Exit, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: Some(message.into()),
        }
    }

    /// An end that prints nothing (standard output was closed: `watch | head -1`).
    pub(crate) fn quiet() -> Self {
        Failure {
            code: Exit::Ok,
            message: None,
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure::new(Exit::Usage, message)
    }

    pub(crate) fn store(message: impl Into<String>) -> Self {
        Failure::new(Exit::Store, message)
    }

    pub(crate) fn rejected(message: impl Into<String>) -> Self {
        Failure::new(Exit::Rejected, message)
    }

    pub(crate) fn command(message: impl Into<String>) -> Self {
        Failure::new(Exit::Command, message)
    }

    pub(crate) fn not_elected(message: impl Into<String>) -> Self {
        Failure::new(Exit::NotElected, message)
    }
}

/// How `run` ended, to be turned into an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// A signal asked it to stop, and it left cleanly.
    Signal,
    /// The child exited by itself under `--on-child-exit exit`, with this shell-style code.
    ChildExit(u8),
    /// The store failed for good.
    StoreFailed,
    /// `--timeout` or `--try` gave up.
    NotElected,
    /// The command could not run, or the begin-command failed.
    CommandFailed,
}

/// The exit code of a `run` that ended as `end` (and whose leaving the election failed, if
/// `leave_failed`): a pure decision.
pub(crate) fn run_exit_code(end: RunEnd, leave_failed: bool) -> u8 {
    match end {
        // A clean stop that could not resign is a store problem, not a success.
        RunEnd::Signal if leave_failed => Exit::Store as u8,
        RunEnd::Signal => Exit::Ok as u8,
        RunEnd::ChildExit(code) => code,
        RunEnd::StoreFailed => Exit::Store as u8,
        RunEnd::NotElected => Exit::NotElected as u8,
        RunEnd::CommandFailed => Exit::Command as u8,
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.as_deref().unwrap_or(""))
    }
}

/// An error and its sources, `outer: inner: innermost`.
pub(crate) fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        // Some errors repeat their source's text; print it once.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// An error and its root cause only, `outer: innermost` (for errors whose middle layers
/// repeat each other, like SQLite's).
pub(crate) fn outer_and_root(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut root = None;
    let mut source = e.source();
    while let Some(s) = source {
        root = Some(s);
        source = s.source();
    }
    if let Some(root) = root {
        let text = root.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_name_every_source_once() {
        let e = fdb_leader_election::ElectionError::InvalidConfig(
            fdb_leader_election::ConfigError::ZeroLease,
        );
        assert_eq!(
            chain(&e),
            "invalid configuration: lease_duration must be greater than zero"
        );
    }

    #[test]
    fn run_endings_map_to_the_documented_codes() {
        assert_eq!(run_exit_code(RunEnd::Signal, false), 0);
        assert_eq!(run_exit_code(RunEnd::Signal, true), 3);
        assert_eq!(run_exit_code(RunEnd::ChildExit(7), false), 7);
        assert_eq!(run_exit_code(RunEnd::ChildExit(137), true), 137);
        assert_eq!(run_exit_code(RunEnd::StoreFailed, false), 3);
        assert_eq!(run_exit_code(RunEnd::CommandFailed, false), 4);
        assert_eq!(run_exit_code(RunEnd::NotElected, false), 5);
    }
}
