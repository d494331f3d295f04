//! One leadership of `run`: the begin-command, the child (stopped when the leadership ends,
//! restarted after a back-off if asked), the end-command.

use fdb_leader_election::runner::{ElectionDatabase, LeadershipGuard};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Ended, Session};
use crate::cli::OnChildExit;
use crate::durations::show;
use crate::exit::Failure;
use crate::process::{Proc, Spec, describe_exit};
use crate::signals::Stop;

impl<D: ElectionDatabase> Session<'_, D> {
    /// The environment of the child and the hooks.
    fn env(&self, guard: &LeadershipGuard) -> Vec<(&'static str, String)> {
        vec![
            ("FDB_LEADER_BALLOT", guard.ballot().to_string()),
            ("FDB_LEADER_ID", self.id.clone()),
            ("FDB_LEADER_ELECTION", self.ctx.name.clone()),
        ]
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
            (Ended::Lost | Ended::ChildExited { .. }, Some(stop)) => Ended::Stop(stop),
            (ended, _) => ended,
        }
    }

    /// Waits until the guard is cancelled (the runner has stepped down), unless asked to stop.
    async fn await_end(&mut self, guard: &LeadershipGuard) -> Ended {
        tokio::select! {
            () = guard.cancelled() => Ended::Lost,
            stop = self.signals.recv() => Ended::Stop(stop),
        }
    }

    /// Runs the begin-command to completion. `Err(None)`: it could not be started.
    async fn begin(&mut self, guard: &LeadershipGuard, spec: &Spec) -> Result<(), Option<Ended>> {
        let grace = self.args.grace;
        let mut proc = Proc::spawn(spec, "begin-command").map_err(|e| {
            tracing::warn!(error = %e, "cannot start the begin-command");
            None
        })?;
        let outcome = tokio::select! {
            biased;
            stop = self.signals.recv() => Err((Ended::Stop(stop), Some(stop))),
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
                if status.success() {
                    Ok(())
                } else {
                    Err(Some(Ended::Failed(Failure::command(format!(
                        "the begin-command failed ({}): the child was not started",
                        describe_exit(status)
                    )))))
                }
            }
            Err((ended, stop)) => {
                match stop {
                    Some(stop) => {
                        tracing::info!(reason = stop.as_str(), "stopping the begin-command");
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
            let mut child = match Proc::spawn(&spec, "child") {
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
                stop = self.signals.recv() => Err(Some(stop)),
                () = guard.handover_requested() => Err(None),
                status = child.wait() => Ok(status),
            };
            match event {
                Err(stop) => {
                    match stop {
                        Some(Stop::Signal(name)) => {
                            tracing::info!(signal = name, "shutting down: stopping the child");
                        }
                        Some(Stop::StoreFailed) => {
                            tracing::warn!("the store cannot be used any more: stopping the child");
                        }
                        None => {
                            tracing::warn!(reason = %describe(guard), "leadership ending: stopping the child");
                        }
                    }
                    let stopped = child.stop(grace, Some(self.signals)).await;
                    if let Ok(status) = stopped.status {
                        tracing::info!(how = %describe_exit(status), "child stopped");
                    }
                    return match stop.or(stopped.signal) {
                        Some(stop) => Ended::Stop(stop),
                        None => Ended::Lost,
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
                    let policy = self.args.on_child_exit.as_str();
                    if status.success() {
                        tracing::info!(ran = %show(ran), policy, "the child exited (exit code 0) while leading");
                    } else {
                        tracing::warn!(ran = %show(ran), policy, "the child exited ({}) while leading", describe_exit(status));
                    }
                    if self.args.on_child_exit != OnChildExit::Restart {
                        return Ended::ChildExited { status, ran };
                    }
                    let wait = self.backoff.after_exit(ran);
                    tracing::info!("restarting the child in {} (back-off)", show(wait));
                    tokio::select! {
                        biased;
                        stop = self.signals.recv() => return Ended::Stop(stop),
                        () = guard.handover_requested() => return Ended::Lost,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
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
fn describe(guard: &LeadershipGuard) -> String {
    match guard.stop_reason() {
        Some(reason) => reason.as_str().to_owned(),
        None if guard.is_handover_requested() => "handover requested".to_owned(),
        None => "ended".to_owned(),
    }
}
