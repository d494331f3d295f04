//! One leadership of `run`: the begin-command, the child (stopped when the leadership ends,
//! restarted after a back-off if asked), the end-command. The begin-command and the child run
//! under a watchdog that holds the lease (see [`crate::watchdog`]): it kills them when the
//! leadership's deadline passes without a renewal, even if this process does not run. Ctrl-Z
//! (SIGTSTP) stops the child as a SIGTERM would, then `run` leaves the election and stops
//! itself (see [`Session::suspend`]).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use fdb_leader_election::runner::{ElectionDatabase, LeadershipGuard, StopReason};
use nix::sys::signal::Signal;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Ended, Session};
use crate::child_env;
use crate::cli::OnChildExit;
use crate::durations::show;
use crate::exit::Failure;
use crate::process::{Proc, Spec, describe_exit};
use crate::signals::{Asked, Stop};
use crate::watchdog::Lease;

/// How long a stop waits for the runner to close the leadership before it stops the child
/// anyway (see [`Session::close_before_stopping`]).
const CLOSE_BOUND: std::time::Duration = std::time::Duration::from_millis(200);

/// Why the child is being stopped.
enum Halt {
    /// A stop signal or a store failure.
    Stop(Stop),
    /// SIGTSTP: stop the child, then leave and stop this process.
    Suspend,
    /// The leadership is ending (a handover, the guard cancelled).
    Leadership,
}

/// Whether a process that ended with `status` was killed by its watchdog because the lease
/// ran out: killed by SIGKILL while the guard no longer holds (the watchdog's deadline is
/// never before the guard's). This process was stopped or blocked past its deadline.
fn killed_at_deadline(status: ExitStatus, guard: &LeadershipGuard) -> bool {
    status.signal() == Some(Signal::SIGKILL as i32) && !guard.is_valid()
}

impl<D: ElectionDatabase> Session<'_, D> {
    /// The environment of the child and the hooks.
    fn env(&self, guard: &LeadershipGuard) -> Vec<(&'static str, String)> {
        vec![
            (child_env::BALLOT, guard.ballot().to_string()),
            (child_env::ID, self.id.clone()),
            (child_env::ELECTION_NAME, self.ctx.name.clone()),
        ]
    }

    /// The lease the watchdogs of the begin-command and the child hold.
    fn lease(&self, guard: &LeadershipGuard) -> Lease {
        Lease::new(guard, &self.candidate)
    }

    /// One leadership: the begin-command, the child, the end-command.
    pub(super) async fn lead(&mut self, guard: &LeadershipGuard) -> Ended {
        let ballot = guard.ballot();
        tracing::info!(ballot = ballot.get(), "elected");
        // While `busy` is held, the runner counts the leader as busy: a handover then waits
        // for the child to stop (at most the handover grace) before the leadership moves.
        let (busy, idle) = oneshot::channel::<()>();
        let marker = guard.spawn(async move {
            let _ = idle.await;
        });
        drop(marker);
        if !guard.accepts_work() {
            drop(busy);
            return self.await_end(guard).await;
        }
        let env = self.env(guard);
        let mut ended = None;
        if let Some(script) = &self.args.begin_command {
            let spec = Spec::shell(script, env.clone());
            match self.begin(guard, &spec).await {
                Ok(()) => {}
                Err(Some(e)) => ended = Some(e),
                // Could not be started: nothing ran, so no end-command either.
                Err(None) => {
                    return Ended::Failed(Failure::command(format!(
                        "cannot start the begin-command ({script})"
                    )));
                }
            }
        }
        let ended = match ended {
            Some(e) => e,
            None => self.supervise(guard, &env).await,
        };
        let stop = self.end(&env).await;
        drop(busy);
        match (ended, stop) {
            (Ended::Lost, None) => self.await_end(guard).await,
            (Ended::Lost | Ended::ChildExited { .. } | Ended::Suspended, Some(stop)) => {
                Ended::Stop(stop)
            }
            (ended, _) => ended,
        }
    }

    /// Waits until the guard is cancelled (the runner has stepped down), unless asked to stop
    /// or to suspend.
    async fn await_end(&mut self, guard: &LeadershipGuard) -> Ended {
        tokio::select! {
            () = guard.cancelled() => Ended::Lost,
            asked = self.signals.next() => match asked {
                Asked::Stop(stop) => Ended::Stop(stop),
                Asked::Suspend => Ended::Suspended,
            },
        }
    }

    /// After SIGTSTP, with nothing running: leaves the election (resigning, reserving for the
    /// best live candidate, and unregistering), stops this process (SIGSTOP), and on SIGCONT
    /// joins again with the same candidate. A stop that came meanwhile is returned.
    pub(super) async fn suspend(&mut self) -> Option<Stop> {
        tracing::info!(
            "SIGTSTP: leaving the election and stopping this process (SIGCONT, e.g. `fg`, \
             campaigns again)"
        );
        self.away(None).await
    }

    /// Runs the begin-command to completion. `Err(None)`: it could not be started.
    async fn begin(&mut self, guard: &LeadershipGuard, spec: &Spec) -> Result<(), Option<Ended>> {
        let grace = self.args.grace;
        let mut proc =
            Proc::spawn_leased(spec, "begin-command", &self.lease(guard)).map_err(|e| {
                tracing::warn!(error = %e, "cannot start the begin-command");
                None
            })?;
        let outcome = tokio::select! {
            biased;
            asked = self.signals.next() => match asked {
                Asked::Stop(stop) => Err((Ended::Stop(stop), Some(stop.as_str()))),
                Asked::Suspend => Err((Ended::Suspended, Some("SIGTSTP"))),
            },
            () = guard.handover_requested() => Err((Ended::Lost, None)),
            status = proc.wait() => Ok(status),
        };
        match outcome {
            Ok(status) => {
                let stopped = proc.stop(grace, Some(self.signals)).await;
                let status = status.or(stopped.status).map_err(|e| {
                    Some(Ended::Failed(Failure::command(format!(
                        "begin-command: {e}"
                    ))))
                })?;
                if let Some(stop) = stopped.signal {
                    return Err(Some(Ended::Stop(stop)));
                }
                if killed_at_deadline(status, guard) {
                    tracing::warn!(
                        "the leadership's deadline passed while this process was stopped or \
                         blocked: the watchdog killed the begin-command"
                    );
                    return Err(Some(Ended::Lost));
                }
                if status.success() {
                    Ok(())
                } else {
                    Err(Some(Ended::Failed(Failure::command(format!(
                        "the begin-command failed ({}): the child was not started",
                        describe_exit(status)
                    )))))
                }
            }
            Err((ended, reason)) => {
                match reason {
                    Some(reason) => {
                        tracing::info!(reason, "stopping the begin-command");
                    }
                    None => {
                        tracing::warn!(reason = %describe(guard), "leadership ending: stopping the begin-command");
                    }
                }
                let stopped = proc.stop(grace, Some(self.signals)).await;
                if let Some(stop) = stopped.signal {
                    return Err(Some(Ended::Stop(stop)));
                }
                Err(Some(ended))
            }
        }
    }

    /// Runs the child while leading; restarts it (after the back-off) if asked to.
    async fn supervise(
        &mut self,
        guard: &LeadershipGuard,
        env: &[(&'static str, String)],
    ) -> Ended {
        let grace = self.args.grace;
        let Some(spec) = Spec::command(&self.args.command, self.args.shell, env.to_vec()) else {
            return Ended::Failed(Failure::usage("run: no command given"));
        };
        loop {
            if !guard.accepts_work() {
                // The leadership ended (or a handover was asked for) during the begin-command
                // or the restart delay: do not start anything.
                return Ended::Lost;
            }
            let mut child = match Proc::spawn_leased(&spec, "child", &self.lease(guard)) {
                Ok(child) => child,
                Err(e) => {
                    return Ended::Failed(Failure::command(format!(
                        "cannot start {}: {e}",
                        spec.display()
                    )));
                }
            };
            let started = Instant::now();
            tracing::info!(
                ballot = guard.ballot().get(),
                group = child.pid().unwrap_or(0),
                command = %spec.display(),
                "leading: child started"
            );
            let event = tokio::select! {
                biased;
                asked = self.signals.next() => Err(match asked {
                    Asked::Stop(stop) => Halt::Stop(stop),
                    Asked::Suspend => Halt::Suspend,
                }),
                () = guard.handover_requested() => Err(Halt::Leadership),
                status = child.wait() => Ok(status),
            };
            match event {
                Err(halt) => {
                    match halt {
                        Halt::Stop(Stop::Signal(name)) => {
                            tracing::info!(signal = name, "shutting down: stopping the child");
                        }
                        Halt::Stop(Stop::StoreFailed) => {
                            tracing::warn!("the store cannot be used any more: stopping the child");
                        }
                        Halt::Suspend => {
                            tracing::info!(
                                "SIGTSTP: stopping the child before leaving the election"
                            );
                        }
                        // A cooperative handover (a higher priority asked, an operator's
                        // resign) is routine: INFO; a loss is not.
                        Halt::Leadership if routine_handover(guard) => {
                            tracing::info!(reason = %describe(guard), "handing over: stopping the child");
                        }
                        Halt::Leadership => {
                            tracing::warn!(reason = %describe(guard), "leadership ending: stopping the child");
                        }
                    }
                    if matches!(halt, Halt::Stop(_) | Halt::Suspend) {
                        self.close_before_stopping(guard).await;
                    }
                    let stopped = child.stop(grace, Some(self.signals)).await;
                    if let Ok(status) = stopped.status {
                        tracing::info!(how = %describe_exit(status), "child stopped");
                    }
                    return match (halt, stopped.signal) {
                        (Halt::Stop(stop), _) | (_, Some(stop)) => Ended::Stop(stop),
                        (Halt::Suspend, None) => Ended::Suspended,
                        (Halt::Leadership, None) => Ended::Lost,
                    };
                }
                Ok(status) => {
                    let ran = started.elapsed();
                    // Clear whatever the child left in its process group.
                    let stopped = child.stop(grace, Some(self.signals)).await;
                    let status = match status.or(stopped.status) {
                        Ok(status) => status,
                        Err(e) => {
                            return Ended::Failed(Failure::command(format!("child: {e}")));
                        }
                    };
                    if let Some(stop) = stopped.signal {
                        return Ended::Stop(stop);
                    }
                    if killed_at_deadline(status, guard) {
                        tracing::warn!(
                            ran = %show(ran),
                            "the leadership's deadline passed while this process was stopped or \
                             blocked: the watchdog killed the child"
                        );
                        return Ended::Lost;
                    }
                    let policy = self.args.policy().as_str();
                    if status.success() {
                        tracing::info!(ran = %show(ran), policy, "the child exited (exit code 0) while leading");
                    } else {
                        tracing::warn!(ran = %show(ran), policy, "the child exited ({}) while leading", describe_exit(status));
                    }
                    if self.args.policy() != OnChildExit::Restart {
                        return Ended::ChildExited { status, ran };
                    }
                    let wait = self.backoff.after_exit(ran);
                    tracing::info!("restarting the child in {} (back-off)", show(wait));
                    tokio::select! {
                        biased;
                        asked = self.signals.next() => return match asked {
                            Asked::Stop(stop) => Ended::Stop(stop),
                            Asked::Suspend => Ended::Suspended,
                        },
                        () = guard.handover_requested() => return Ended::Lost,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// Before the child is stopped to leave the election (a stop signal, a store failure,
    /// SIGTSTP): closes the leadership to new work, as a handover does, so that `/leader`
    /// turns 503 before the child gets SIGTERM and a load balancer stops sending it requests
    /// while it drains. It is the runner's resignation: it waits for the child (the guarded
    /// work of [`lead`](Self::lead)), within the handover grace, before any vacancy commits;
    /// the shutdown that follows the child's stop leaves the election as before. Waits for
    /// the guard to close at most [`CLOSE_BOUND`] (the runner answers at once unless its
    /// runtime is blocked).
    async fn close_before_stopping(&self, guard: &LeadershipGuard) {
        if !guard.accepts_work() {
            return;
        }
        let runner = self.runner.clone();
        tokio::spawn(async move {
            // Its answer does not matter: the shutdown that follows leaves the election.
            if let Err(e) = runner.resign().await {
                tracing::debug!(error = %e, "closing the leadership before leaving");
            }
        });
        let _ = tokio::time::timeout(CLOSE_BOUND, guard.handover_requested()).await;
    }

    /// Runs the end-command to completion, if there is one. A stop meanwhile is returned
    /// (and a second one stops the end-command).
    async fn end(&mut self, env: &[(&'static str, String)]) -> Option<Stop> {
        let script = self.args.end_command.as_ref()?;
        let spec = Spec::shell(script, env.to_vec());
        let mut proc = match Proc::spawn(&spec, "end-command") {
            Ok(proc) => proc,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the end-command");
                return None;
            }
        };
        let stop = tokio::select! {
            _ = proc.wait() => None,
            stop = self.signals.recv() => Some(stop),
        };
        if let Some(stop) = stop {
            tracing::info!(
                reason = stop.as_str(),
                "waiting for the end-command to finish (a signal stops it)"
            );
            tokio::select! {
                _ = proc.wait() => {}
                _ = self.signals.recv() => {
                    tracing::warn!("stopping the end-command");
                    proc.stop(self.args.grace, None).await;
                }
            }
        }
        // Returns at once if it has exited and left nothing behind in its process group.
        let listening = if stop.is_none() {
            Some(&mut *self.signals)
        } else {
            None
        };
        let stopped = proc.stop(self.args.grace, listening).await;
        match stopped.status {
            Ok(status) if status.success() => {}
            Ok(status) => tracing::warn!("the end-command failed ({})", describe_exit(status)),
            Err(e) => tracing::warn!(error = %e, "the end-command failed"),
        }
        stop.or(stopped.signal)
    }
}

/// Why a leadership is ending, for logs.
/// Whether leadership ends by a cooperative handover, not by a loss.
fn routine_handover(guard: &LeadershipGuard) -> bool {
    match guard.stop_reason() {
        Some(StopReason::HandedOver { .. } | StopReason::Resigned | StopReason::SteppedDown) => {
            true
        }
        None => guard.is_handover_requested(),
        Some(_) => false,
    }
}

fn describe(guard: &LeadershipGuard) -> String {
    match guard.stop_reason() {
        Some(reason) => reason.as_str().to_owned(),
        None if guard.is_handover_requested() => "handover requested".to_owned(),
        None => "ended".to_owned(),
    }
}
