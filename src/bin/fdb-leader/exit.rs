//! Exit codes, and the error every command returns: a message for stderr and the code to exit
//! with.

use std::error::Error;
use std::fmt;
use std::process::ExitCode;

use fdb_leader_election::ElectionError;

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
    /// A command failed: the begin-command exited non-zero, or the child or a hook could not
    /// be started.
    Command = 4,
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

    /// An election operation failed on election `name`.
    pub(crate) fn election(name: &str, e: &ElectionError) -> Self {
        match e {
            ElectionError::NotInitialized => Failure::rejected(format!(
                "election {name:?} does not exist in this store (a `run` or `config set` creates it)"
            )),
            ElectionError::InvalidConfig(_) => {
                Failure::usage(format!("invalid configuration: {}", chain(e)))
            }
            _ => Failure::store(format!("election {name:?}: {}", chain(e))),
        }
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
        let e = ElectionError::InvalidConfig(fdb_leader_election::ConfigError::ZeroLease);
        assert_eq!(
            chain(&e),
            "invalid configuration: lease_duration must be greater than zero"
        );
        let f = Failure::election("x", &e);
        assert_eq!(f.code, Exit::Usage);
        let f = Failure::election("x", &ElectionError::NotInitialized);
        assert_eq!(f.code, Exit::Rejected);
    }
}
