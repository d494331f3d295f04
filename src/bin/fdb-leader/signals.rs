//! What asks `run` and `watch` to stop: SIGINT, SIGTERM, SIGHUP, and a store failure that
//! cannot heal (see [`crate::classify`]), which ends the command with exit code 3. And job
//! control for `run` ([`Signals::next`] answers [`Asked::Suspend`]): Ctrl-Z stops the child
//! and leaves the election before this process stops; SIGTTIN and SIGTTOU never stop it.

use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::task::Poll;

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
    /// SIGTSTP, SIGTTIN and SIGTTOU, once [`next`](Self::next) has taken them over.
    job: JobControl,
}

/// What `run` is asked: to stop, or to suspend (SIGTSTP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// A stop: a signal or a store failure.
    Stop(Stop),
    /// SIGTSTP: stop the child, leave the election, stop this process until SIGCONT.
    Suspend,
}

/// Job control, taken over once (see [`Signals::next`]).
#[derive(Debug, Default)]
struct JobControl {
    /// SIGTSTP, caught.
    tstp: Option<Signal>,
    /// Whether it was tried (it is tried once).
    tried: bool,
}

impl JobControl {
    /// Catches SIGTSTP and blocks SIGTTIN and SIGTTOU in this thread, the first time; the
    /// SIGTSTP stream, if caught.
    fn take_over(&mut self) -> Option<&mut Signal> {
        if !self.tried {
            self.tried = true;
            let mut terminal = nix::sys::signal::SigSet::empty();
            terminal.add(nix::sys::signal::Signal::SIGTTIN);
            terminal.add(nix::sys::signal::Signal::SIGTTOU);
            if let Err(e) = terminal.thread_block() {
                tracing::warn!(error = %e, "cannot block SIGTTIN and SIGTTOU");
            }
            let tstp = SignalKind::from_raw(nix::sys::signal::Signal::SIGTSTP as i32);
            match signal(tstp) {
                Ok(stream) => self.tstp = Some(stream),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot catch SIGTSTP: Ctrl-Z stops this process as is");
                }
            }
        }
        self.tstp.as_mut()
    }
}

/// Resolves on SIGTSTP; never without the stream.
async fn suspended(tstp: Option<&mut Signal>) {
    if let Some(tstp) = tstp {
        if tstp.recv().await.is_some() {
            return;
        }
    }
    std::future::pending().await
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
            job: JobControl::default(),
        })
    }

    /// The next reason to stop, or SIGTSTP (Ctrl-Z, `kill -TSTP`): what `run` listens for.
    /// Cancel-safe. A stop comes first when both are pending.
    ///
    /// The first call takes job control over for this process: SIGTSTP is caught from then on
    /// (its default action, stopping the process while its child runs on, no longer applies:
    /// `run` stops the child, leaves the election, and only then stops itself, see
    /// [`stop_self`](Self::stop_self)), and SIGTTIN and SIGTTOU are blocked in the calling
    /// thread (the runtime's, which does `run`'s terminal output; threads it starts later
    /// inherit the mask), so a supervisor in the background is never stopped by terminal I/O:
    /// a write goes through even with `stty tostop`, a read fails. (Blocked, not caught: for a
    /// caught SIGTTOU the kernel restarts the write and sends it again, forever.) Children
    /// start with an empty mask (the watchdog's exec shim clears it). If SIGTSTP cannot be
    /// caught, Ctrl-Z stops the process as before; the watchdog still kills the child when the
    /// lease runs out.
    pub(crate) async fn next(&mut self) -> Asked {
        let tstp = self.job.take_over();
        let stop = recv_stop(
            &mut self.interrupt,
            &mut self.terminate,
            &mut self.hangup,
            &mut self.failures,
        );
        tokio::select! {
            biased;
            stop = stop => Asked::Stop(stop),
            () = suspended(tstp) => Asked::Suspend,
        }
    }

    /// Stops this process (SIGSTOP: it cannot be caught) until SIGCONT (`fg`, `bg`, `kill
    /// -CONT`), after forgetting the SIGTSTPs already received (a second Ctrl-Z pressed while
    /// the child was stopping must not stop it again after `fg`); unless a stop is pending:
    /// then it returns that stop at once.
    pub(crate) async fn stop_self(&mut self) -> Option<Stop> {
        let pending = tokio::select! {
            biased;
            stop = self.recv() => Some(stop),
            () = std::future::ready(()) => None,
        };
        if pending.is_some() {
            return pending;
        }
        if let Some(tstp) = self.job.tstp.as_mut() {
            std::future::poll_fn(|cx| {
                while let Poll::Ready(Some(())) = tstp.poll_recv(cx) {}
                Poll::Ready(())
            })
            .await;
        }
        if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
            tracing::warn!(error = %e, "cannot stop this process");
        }
        None
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
        recv_stop(
            &mut self.interrupt,
            &mut self.terminate,
            &mut self.hangup,
            &mut self.failures,
        )
        .await
    }
}

/// [`Signals::recv`], on the fields it needs (so that [`Signals::next`] can also wait for
/// SIGTSTP).
async fn recv_stop(
    interrupt: &mut Signal,
    terminate: &mut Signal,
    hangup: &mut Signal,
    failures: &mut Option<watch::Receiver<Option<String>>>,
) -> Stop {
    let channel = &mut *failures;
    let failed = async move {
        match channel.as_mut() {
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
        Some(()) = interrupt.recv() => Stop::Signal("SIGINT"),
        Some(()) = terminate.recv() => Stop::Signal("SIGTERM"),
        Some(()) = hangup.recv() => Stop::Signal("SIGHUP"),
        // Every stream ended (the runtime is shutting down): nothing more will come.
        else => std::future::pending().await,
    };
    if stop == Stop::StoreFailed {
        *failures = None;
    }
    stop
}
