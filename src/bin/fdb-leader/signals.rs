//! The signals that ask `run` and `watch` to shut down: SIGINT, SIGTERM, SIGHUP.

use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listens for SIGINT, SIGTERM and SIGHUP from creation on (their default action, ending the
/// process at once, no longer applies).
#[derive(Debug)]
pub(crate) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal received (its name). Cancel-safe: a signal received while nobody waits
    /// is delivered at the next call.
    pub(crate) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            Some(()) = self.interrupt.recv() => "SIGINT",
            Some(()) = self.terminate.recv() => "SIGTERM",
            Some(()) = self.hangup.recv() => "SIGHUP",
            // Every stream ended (the runtime is shutting down): nothing more will come.
            else => std::future::pending().await,
        }
    }
}
