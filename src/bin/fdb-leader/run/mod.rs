//! `run`: campaign, and run the child only while this process leads.

mod lead;

use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use fdb_leader_election::runner::{ElectionDatabase, Runner};
use fdb_leader_election::{ElectionConfig, Priority, ResignOutcome};

use crate::cli::{OnChildExit, RunArgs};
use crate::durations::show;
use crate::exit::{Failure, chain};
use crate::process::exit_code;
use crate::signals::Signals;
use crate::store::{Ctx, Retry, once};

/// How long `--on-child-exit restart` waits before starting the child again.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// The configuration this process creates the election with: the defaults, scaled to
/// `--lease` (heartbeat a third of it), with `--heartbeat` if given, and a transaction bound
/// of half a heartbeat (at most 1 s).
pub(crate) fn desired_config(
    lease: Option<Duration>,
    heartbeat: Option<Duration>,
) -> Result<ElectionConfig, Failure> {
    let invalid = |e: fdb_leader_election::ConfigError| {
        Failure::usage(format!("invalid --lease/--heartbeat: {e}"))
    };
    let base = match lease {
        Some(lease) => ElectionConfig::with_lease_duration(lease).map_err(invalid)?,
        None => ElectionConfig::default(),
    };
    if lease.is_none() && heartbeat.is_none() {
        return Ok(base);
    }
    let heartbeat = heartbeat.unwrap_or(base.heartbeat_interval());
    let bound = heartbeat
        .checked_div(2)
        .unwrap_or(Duration::ZERO)
        .min(Duration::from_secs(1));
    base.to_builder()
        .heartbeat_interval(heartbeat)
        .transaction_timeout(bound)
        .build()
        .map_err(invalid)
}

/// The host name, the default candidate label.
fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fdb-leader".to_owned())
}

/// How one leadership ended.
#[derive(Debug)]
enum Ended {
    /// The leadership ended (lost, expired, handed over); campaign again.
    Lost,
    /// A signal asked this process to shut down.
    Signal,
    /// The child exited by itself while this process led (not with `restart`).
    ChildExited(ExitStatus),
    /// The begin-command failed, or the child could not be started.
    Failed(Failure),
}

/// One `run`: the runner, the options, the signals.
struct Session<'a> {
    runner: Runner,
    args: &'a RunArgs,
    ctx: &'a Ctx,
    signals: &'a mut Signals,
    id: String,
}

/// `run`.
pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<ExitCode, Failure> {
    if args.command.is_empty() {
        return Err(Failure::usage("run: no command given"));
    }
    let desired = desired_config(args.lease, args.heartbeat)?;
    let election = ctx.election.clone();
    let wanted = desired.clone();
    let stored = once(&db, ctx, Retry::Idempotent, move |txn| {
        let (election, wanted) = (election.clone(), wanted.clone());
        async move {
            election.initialize_with_config(&txn, &wanted).await?;
            election.read_config(&txn).await
        }
    })
    .await?;
    if (args.lease.is_some() || args.heartbeat.is_some())
        && (stored.lease_duration() != desired.lease_duration()
            || stored.heartbeat_interval() != desired.heartbeat_interval())
    {
        tracing::warn!(
            "election {:?} already exists with lease {} and heartbeat {}: the stored \
             configuration wins over --lease/--heartbeat (change it with `fdb-leader config set`)",
            ctx.name,
            show(stored.lease_duration()),
            show(stored.heartbeat_interval()),
        );
    }
    if args.grace >= stored.handover_grace() {
        tracing::warn!(
            "--grace {} is not shorter than the election's handover grace {}: a handover may \
             complete before the child has stopped (`fdb-leader config set --handover-grace`)",
            show(args.grace),
            show(stored.handover_grace()),
        );
    }
    let label = args.name.clone().unwrap_or_else(host_name);
    let mut builder = Runner::builder(db, ctx.election.subspace().clone())
        .label(label)
        .priority(Priority::new(args.priority))
        .config(desired)
        .election_name(ctx.name.clone());
    if let Some(payload) = &args.payload {
        builder = builder.payload(payload.as_bytes().to_vec());
    }
    let runner = builder
        .start()
        .map_err(|e| Failure::usage(format!("run: {}", chain(&e))))?;
    let id = runner.id().map(ToString::to_string).unwrap_or_default();
    tracing::info!(
        candidate = %id,
        election = %ctx.name,
        store = %ctx.store,
        lease = %show(stored.lease_duration()),
        heartbeat = %show(stored.heartbeat_interval()),
        "campaigning"
    );
    let mut session = Session {
        runner,
        args,
        ctx,
        signals,
        id,
    };
    session.campaign().await
}

impl Session<'_> {
    async fn campaign(&mut self) -> Result<ExitCode, Failure> {
        loop {
            let guard = tokio::select! {
                biased;
                name = self.signals.recv() => {
                    tracing::info!(signal = name, "shutting down");
                    return self.shutdown(Ok(ExitCode::SUCCESS)).await;
                }
                guard = self.runner.elected() => guard,
            };
            let Some(guard) = guard else {
                return Err(Failure::store("the election runner stopped unexpectedly"));
            };
            match self.lead(&guard).await {
                Ended::Lost => {}
                Ended::Signal => return self.shutdown(Ok(ExitCode::SUCCESS)).await,
                Ended::Failed(failure) => return self.shutdown(Err(failure)).await,
                Ended::ChildExited(status) => match self.args.on_child_exit {
                    OnChildExit::Exit => {
                        let code = ExitCode::from(exit_code(status));
                        return self.shutdown(Ok(code)).await;
                    }
                    OnChildExit::Resign | OnChildExit::Restart => {
                        match self.runner.resign().await {
                            Ok(ResignOutcome::Resigned {
                                ballot,
                                reserved_for,
                            }) => tracing::info!(
                                ballot = ballot.get(),
                                reserved_for = reserved_for.as_ref().map(|n| n.id().to_string()),
                                "resigned; campaigning again"
                            ),
                            Ok(_) => tracing::info!("no longer leading; campaigning again"),
                            Err(e) => {
                                tracing::warn!(error = %chain(&e), "could not resign; the leadership lapses by itself")
                            }
                        }
                    }
                },
            }
        }
    }

    /// Leaves the election: resign (reserving for the best live candidate) and unregister.
    async fn shutdown(&mut self, result: Result<ExitCode, Failure>) -> Result<ExitCode, Failure> {
        // The runner logs the resignation (and whom it reserved the leadership for).
        let report = self.runner.shutdown().await;
        match (&report.error, result) {
            (Some(error), Ok(code)) if code == ExitCode::SUCCESS => Err(Failure::store(format!(
                "could not leave the election cleanly ({error}); the lease lapses by itself"
            ))),
            (Some(error), result) => {
                tracing::warn!(%error, "could not leave the election cleanly; the lease lapses by itself");
                result
            }
            (None, result) => {
                tracing::info!(unregistered = report.unregistered, "left the election");
                result
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_scale_the_created_configuration() {
        let default = desired_config(None, None);
        assert!(default.is_ok_and(|c| c == ElectionConfig::default()));
        let fast = desired_config(
            Some(Duration::from_millis(600)),
            Some(Duration::from_millis(200)),
        );
        assert!(
            fast.as_ref()
                .is_ok_and(|c| c.lease_duration() == Duration::from_millis(600)
                    && c.heartbeat_interval() == Duration::from_millis(200)
                    && c.transaction_timeout() == Duration::from_millis(100)
                    && c.candidate_timeout() == Duration::from_millis(900)),
            "{fast:?}"
        );
        let lease_only = desired_config(Some(Duration::from_secs(3)), None);
        assert!(lease_only.is_ok_and(|c| c.heartbeat_interval() == Duration::from_secs(1)));
        let bad = desired_config(Some(Duration::from_secs(3)), Some(Duration::from_secs(2)));
        assert!(bad.is_err_and(|f| f.to_string().contains("at most a third")));
    }
}
