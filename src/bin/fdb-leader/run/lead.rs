//! One leadership of `run`: the begin-command, the child (stopped when the leadership ends,
//! restarted if asked), the end-command.

use fdb_leader_election::runner::LeadershipGuard;
use tokio::sync::oneshot;

use super::{Ended, RESTART_DELAY, Session};
use crate::cli::OnChildExit;
use crate::exit::Failure;
use crate::process::{Proc, Spec, exit_code};

impl Session<'_> {
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
                        "cannot start the begin-command {script:?}"
                    )));
                }
            }
        }
        let ended = match ended {
            Some(e) => e,
            None => self.supervise(guard, &env).await,
        };
        let signal = self.end(&env).await;
        drop(busy);
        match (ended, signal) {
            (Ended::Lost, None) => self.await_end(guard).await,
            (Ended::Lost | Ended::ChildExited(_), Some(_)) => Ended::Signal,
            (ended, _) => ended,
        }
    }

    /// Waits until the guard is cancelled (the runner has stepped down), unless a signal comes.
    async fn await_end(&mut self, guard: &LeadershipGuard) -> Ended {
        tokio::select! {
            () = guard.cancelled() => Ended::Lost,
            name = self.signals.recv() => {
                tracing::info!(signal = name, "shutting down");
                Ended::Signal
            }
        }
    }

    /// Runs the begin-command to completion. `Err(None)`: it could not be started.
    async fn begin(&mut self, guard: &LeadershipGuard, spec: &Spec) -> Result<(), Option<Ended>> {
        let grace = self.args.grace;
        let mut proc = Proc::spawn(spec, "begin-command").map_err(|e| {
            tracing::error!(error = %e, "cannot start the begin-command");
            None
        })?;
        let outcome = tokio::select! {
            biased;
            name = self.signals.recv() => Err((Ended::Signal, Some(name))),
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
                if stopped.signal.is_some() {
                    return Err(Some(Ended::Signal));
                }
                if status.success() {
                    Ok(())
                } else {
                    tracing::error!(
                        code = exit_code(status),
                        "the begin-command failed: not starting the child"
                    );
                    Err(Some(Ended::Failed(Failure::command(format!(
                        "the begin-command failed (exit code {})",
                        exit_code(status)
                    )))))
                }
            }
            Err((ended, signal)) => {
                match signal {
                    Some(name) => tracing::info!(signal = name, "stopping the begin-command"),
                    None => {
                        tracing::warn!(reason = %describe(guard), "leadership ending: stopping the begin-command")
                    }
                }
                let stopped = proc.stop(grace, Some(self.signals)).await;
                if stopped.signal.is_some() {
                    return Err(Some(Ended::Signal));
                }
                Err(Some(ended))
            }
        }
    }

    /// Runs the child while leading; restarts it if asked to.
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
                    tracing::error!(error = %e, command = %spec.display(), "cannot start the child");
                    return Ended::Failed(Failure::command(format!(
                        "cannot start {}: {e}",
                        spec.display()
                    )));
                }
            };
            tracing::info!(
                ballot = guard.ballot().get(),
                pid = child.pid(),
                command = %spec.display(),
                "leading: child started"
            );
            let event = tokio::select! {
                biased;
                name = self.signals.recv() => Err(Some(name)),
                () = guard.handover_requested() => Err(None),
                status = child.wait() => Ok(status),
            };
            match event {
                Err(signal) => {
                    match signal {
                        Some(name) => {
                            tracing::info!(signal = name, "shutting down: stopping the child")
                        }
                        None => {
                            tracing::warn!(reason = %describe(guard), "leadership ending: stopping the child")
                        }
                    }
                    let stopped = child.stop(grace, Some(self.signals)).await;
                    if let Ok(status) = stopped.status {
                        tracing::info!(code = exit_code(status), "child stopped");
                    }
                    return if signal.is_some() || stopped.signal.is_some() {
                        Ended::Signal
                    } else {
                        Ended::Lost
                    };
                }
                Ok(status) => {
                    // Clear whatever the child left in its process group.
                    let stopped = child.stop(grace, Some(self.signals)).await;
                    let status = match status.or(stopped.status) {
                        Ok(status) => status,
                        Err(e) => {
                            return Ended::Failed(Failure::command(format!("child: {e}")));
                        }
                    };
                    if stopped.signal.is_some() {
                        return Ended::Signal;
                    }
                    tracing::info!(
                        code = exit_code(status),
                        policy = ?self.args.on_child_exit,
                        "the child exited while leading"
                    );
                    if self.args.on_child_exit != OnChildExit::Restart {
                        return Ended::ChildExited(status);
                    }
                    tokio::select! {
                        biased;
                        _ = self.signals.recv() => return Ended::Signal,
                        () = guard.handover_requested() => return Ended::Lost,
                        () = tokio::time::sleep(RESTART_DELAY) => {}
                    }
                }
            }
        }
    }

    /// Runs the end-command to completion, if there is one. A signal meanwhile is returned
    /// (and a second one stops the end-command).
    async fn end(&mut self, env: &[(&'static str, String)]) -> Option<&'static str> {
        let script = self.args.end_command.as_ref()?;
        let spec = Spec::shell(script, env.to_vec());
        let mut proc = match Proc::spawn(&spec, "end-command") {
            Ok(proc) => proc,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the end-command");
                return None;
            }
        };
        let signal = tokio::select! {
            _ = proc.wait() => None,
            name = self.signals.recv() => Some(name),
        };
        if let Some(name) = signal {
            tracing::info!(
                signal = name,
                "waiting for the end-command to finish (another signal stops it)"
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
        let listening = if signal.is_none() {
            Some(&mut *self.signals)
        } else {
            None
        };
        let stopped = proc.stop(self.args.grace, listening).await;
        match stopped.status {
            Ok(status) if status.success() => {}
            Ok(status) => tracing::warn!(code = exit_code(status), "the end-command failed"),
            Err(e) => tracing::warn!(error = %e, "the end-command failed"),
        }
        signal.or(stopped.signal)
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
