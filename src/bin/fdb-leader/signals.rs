//! What asks `run` and `watch` to stop: SIGINT, SIGTERM, SIGHUP, and a store failure that
//! cannot heal (see [`crate::classify`]), which ends the command with exit code 3.

use std::io;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

use crate::exit::Failure;

/// Why a command is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A signal, by name.
    Signal(&'static str),
    /// The store failed for good ([`Signals::failure`] says how).
    StoreFailed,
}

impl Stop {
    /// For logs: the signal's name, or `store failure`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stop::Signal(name) => name,
            Stop::StoreFailed => "store failure",
        }
    }
}

/// Reports a store failure that cannot heal; the first report wins. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Fatal {
    tx: Arc<watch::Sender<Option<String>>>,
}

impl Fatal {
    pub(crate) fn new() -> Self {
        Fatal {
            tx: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Reports `message` (what failed and the fix), unless a failure was reported already.
    pub(crate) fn raise(&self, message: String) {
        self.tx.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            *slot = Some(message);
            true
        });
    }

    /// The failure reported, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        self.tx.borrow().clone()
    }

    fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.tx.subscribe()
    }
}

/// Listens for SIGINT, SIGTERM and SIGHUP from creation on (their default action, ending the
/// process at once, no longer applies), and for a store failure.
#[derive(Debug)]
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
    fatal: Fatal,
    /// The failure channel, until the failure has been delivered once.
    failures: Option<watch::Receiver<Option<String>>>,
}

impl Signals {
    pub(crate) fn new(fatal: Fatal) -> io::Result<Self> {
        let failures = Some(fatal.subscribe());
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            fatal,
            failures,
        })
    }

    /// The store failure reported, if any (it decides the exit code).
    pub(crate) fn failure(&self) -> Option<String> {
        self.fatal.failure()
    }

    /// The result of a command that `stop` ends while it holds nothing to give back (no
    /// leadership, no registration; `while_doing` says when, for the log): exit 0 for a
    /// signal, the store failure (exit 3) otherwise.
    pub(crate) fn stopped(&self, stop: Stop, while_doing: &str) -> Result<ExitCode, Failure> {
        match stop {
            Stop::Signal(name) => {
                tracing::info!(signal = name, "stopping ({while_doing})");
                Ok(ExitCode::SUCCESS)
            }
            Stop::StoreFailed => Err(Failure::store(
                self.failure()
                    .unwrap_or_else(|| "the store failed".to_owned()),
            )),
        }
    }

    /// The next reason to stop. Cancel-safe: a signal received while nobody waits is
    /// delivered at the next call. A store failure is delivered once (a stop already under way
    /// is not cut short again by it).
    pub(crate) async fn recv(&mut self) -> Stop {
        let failures = &mut self.failures;
        let failed = async move {
            match failures.as_mut() {
                Some(rx) => {
                    if rx.wait_for(Option::is_some).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let stop = tokio::select! {
            () = failed => Stop::StoreFailed,
            Some(()) = self.interrupt.recv() => Stop::Signal("SIGINT"),
            Some(()) = self.terminate.recv() => Stop::Signal("SIGTERM"),
            Some(()) = self.hangup.recv() => Stop::Signal("SIGHUP"),
            // Every stream ended (the runtime is shutting down): nothing more will come.
            else => std::future::pending().await,
        };
        if stop == Stop::StoreFailed {
            self.failures = None;
        }
        stop
    }
}
