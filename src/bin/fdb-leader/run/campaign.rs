//! `run` on the single election: join, campaign, and lead (the child, in [`super::lead`])
//! until a stop; leave (resigning, reserving for the best live candidate) on the way out.

use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use fdb_leader_election::runner::{BuildError, ElectionDatabase, Runner};
use fdb_leader_election::{Candidate, CandidateInfo, ElectionConfig, LeaderRecord, ResignOutcome};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Ended, Prepared, Session, end_of};
use crate::backoff::ChildBackoff;
use crate::checks::{EnvSource, HealthChecks};
use crate::child_env;
use crate::cli::{OnChildExit, RunArgs};
use crate::durations::show;
use crate::exit::{Failure, RunEnd, chain, run_exit_code};
use crate::signals::{Asked, Signals, Stop};
use crate::store::{Ctx, until_done};

/// `run` on the single election, with what [`preflight()`](super::preflight()) prepared.
pub(super) async fn run<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    args: &RunArgs,
    prepared: Prepared,
    signals: &mut Signals,
) -> Result<ExitCode, Failure> {
    let Prepared {
        desired,
        candidate,
        current,
        member: _,
        checks,
    } = prepared;
    let election = ctx.election.clone();
    let wanted = desired.clone();
    // A store that does not answer yet (a cluster still starting, say) is waited for, like
    // one that stops answering later; a signal ends the wait.
    let joined = until_done(&db, ctx, move |txn| {
        let (election, wanted) = (election.clone(), wanted.clone());
        async move {
            election.initialize_with_config(&txn, &wanted).await?;
            let config = election.read_config(&txn).await?;
            let record = election.leader_record(&txn).await?;
            let candidates = election.list_candidates(&txn).await?;
            Ok((config, record, candidates))
        }
    });
    let (stored, record, candidates) = tokio::select! {
        biased;
        stop = signals.recv() => return signals.stopped(stop, "before joining the election"),
        joined = joined => joined?,
    };
    warn_of_live_namesakes(ctx, &candidate, &candidates);
    if args.try_once {
        if let Some(taken) = taken_by(&record) {
            return Err(Failure::not_elected(format!(
                "not elected (--try): {taken}; nothing was changed"
            )));
        }
    }
    if (args.lease.is_some() || args.heartbeat.is_some())
        && (stored.lease_duration() != desired.lease_duration()
            || stored.heartbeat_interval() != desired.heartbeat_interval())
    {
        // Every timing the new lease constrains, rounded down to the millisecond (rounding
        // up could break "at most a third"), so that the command works as printed.
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let (lease, heartbeat, candidate, transaction) = (
            ms(desired.lease_duration()),
            ms(desired.heartbeat_interval()),
            ms(desired.candidate_timeout()),
            ms(desired.transaction_timeout()),
        );
        tracing::warn!(
            "election {} already exists with lease {} and heartbeat {}: the stored \
             configuration wins over --lease/--heartbeat (change it with {})",
            ctx.name,
            show(stored.lease_duration()),
            show(stored.heartbeat_interval()),
            ctx.suggest(&[
                "config",
                "set",
                "--lease",
                &lease,
                "--heartbeat",
                &heartbeat,
                "--candidate-timeout",
                &candidate,
                "--transaction-timeout",
                &transaction,
            ]),
        );
    }
    if args.grace >= stored.handover_grace() {
        let longer = show(args.grace.saturating_add(Duration::from_secs(2)));
        tracing::warn!(
            "--grace {} is not shorter than the election's handover grace {}: a handover may \
             complete before the child has stopped (raise it with {})",
            show(args.grace),
            show(stored.handover_grace()),
            ctx.suggest(&["config", "set", "--handover-grace", &longer]),
        );
    }
    let id = candidate.id().to_string();
    let runner = start_runner(&db, ctx, &candidate, &desired, &checks, &current)
        .map_err(|e| Failure::usage(format!("run: {}", chain(&e))))?;
    current.send_replace(Some(runner.clone()));
    tracing::info!(
        candidate = %id,
        election = %ctx.name,
        store = %ctx.store,
        lease = %show(stored.lease_duration()),
        heartbeat = %show(stored.heartbeat_interval()),
        "campaigning"
    );
    let deadline = if args.try_once {
        Some(stored.lease_duration())
    } else {
        args.timeout
    };
    let mut session = Session {
        db,
        runner,
        candidate,
        desired,
        current,
        args,
        ctx,
        signals,
        id,
        backoff: ChildBackoff::default(),
        checks,
    };
    session.campaign(deadline).await
}

/// A runner for `candidate`, with the health checks; their commands get the child's
/// environment (the ballot while the current runner leads).
fn start_runner<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    candidate: &Candidate,
    desired: &ElectionConfig,
    checks: &HealthChecks,
    current: &watch::Sender<Option<Runner>>,
) -> Result<Runner, BuildError> {
    let builder = Runner::builder(db.clone(), ctx.election.subspace().clone())
        .candidate(candidate.clone())
        .config(desired.clone())
        .election_name(ctx.name.clone());
    let (id, name, runners) = (
        candidate.id().to_string(),
        ctx.name.clone(),
        current.subscribe(),
    );
    let env: EnvSource = Arc::new(move || {
        let mut env = vec![
            (child_env::ID, id.clone()),
            (child_env::ELECTION_NAME, name.clone()),
        ];
        let ballot = runners
            .borrow()
            .as_ref()
            .and_then(Runner::leadership)
            .map(|g| g.ballot());
        if let Some(ballot) = ballot {
            env.push((child_env::BALLOT, ballot.to_string()));
        }
        env
    });
    checks.apply(builder, &env).start()
}

/// Tests cannot make a bug block the runner's runtime: a build with the feature planted-faults
/// (the tests') blocks it (the whole thread, as a blocking call would) for
/// `FDB_LEADER_DEBUG_BLOCK_RUNTIME` (a duration) once, right after the first election, saying
/// so on stderr first.
#[cfg(feature = "planted-faults")]
fn debug_block_runtime_once() {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(text) = std::env::var_os("FDB_LEADER_DEBUG_BLOCK_RUNTIME") else {
        return;
    };
    if DONE.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    if let Ok(block) = crate::durations::parse(&text.to_string_lossy()) {
        tracing::warn!(
            "debug: blocking the runtime for {} (FDB_LEADER_DEBUG_BLOCK_RUNTIME)",
            show(block)
        );
        std::thread::sleep(block);
    }
}

/// Warns when a live candidate of this one's `--name` is already in the election: two
/// supervisors of one name cannot be told apart by their logs, `status` or `pkill -f`.
fn warn_of_live_namesakes(ctx: &Ctx, candidate: &Candidate, candidates: &[CandidateInfo]) {
    let live = candidates.iter().filter(|c| c.live).map(|c| &c.id);
    super::warn_of_namesakes(ctx, "a live candidate", candidate.id(), live);
}

/// Who holds the leadership in `record`, in words, or `None` if it is free.
fn taken_by(record: &LeaderRecord) -> Option<String> {
    if let Some(owner) = record.owner() {
        return Some(format!("{} leads (ballot {})", owner.id(), record.ballot()));
    }
    record
        .reservation()
        .map(|r| format!("the leadership is reserved for {}", r.id()))
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl<D: ElectionDatabase> Session<'_, D> {
    /// Campaigns and leads until a stop; `give_up_after`: the first election's deadline.
    async fn campaign(&mut self, give_up_after: Option<Duration>) -> Result<ExitCode, Failure> {
        let mut give_up_at = give_up_after.and_then(|d| Instant::now().checked_add(d));
        loop {
            let guard = tokio::select! {
                biased;
                asked = self.signals.next() => {
                    let stop = match asked {
                        Asked::Stop(stop) => Some(stop),
                        Asked::Suspend => self.suspend().await,
                    };
                    match stop {
                        Some(stop) => return self.finish(end_of(stop), None).await,
                        None => continue,
                    }
                }
                () = sleep_until_opt(give_up_at) => {
                    let why = if self.args.try_once { "--try" } else { "--timeout" };
                    let after = give_up_after.map(show).unwrap_or_default();
                    let leader = self
                        .runner
                        .leader()
                        .map_or_else(|| "no leader".to_owned(), |l| format!("leader {} (ballot {})", l.id, l.ballot));
                    let message = format!("not elected within {after} ({why}); {leader}");
                    return self.finish(RunEnd::NotElected, Some(Failure::not_elected(message))).await;
                }
                guard = self.runner.elected() => guard,
            };
            let Some(guard) = guard else {
                let failure = Failure::store("the election runner stopped unexpectedly");
                return self.finish(RunEnd::StoreFailed, Some(failure)).await;
            };
            give_up_at = None;
            #[cfg(feature = "planted-faults")]
            debug_block_runtime_once();
            match self.lead(&guard).await {
                Ended::Lost => {}
                Ended::Suspended => {
                    if let Some(stop) = self.suspend().await {
                        return self.finish(end_of(stop), None).await;
                    }
                }
                Ended::Stop(stop) => return self.finish(end_of(stop), None).await,
                Ended::Failed(failure) => match self.args.error_timeout {
                    None => return self.finish(RunEnd::CommandFailed, Some(failure)).await,
                    Some(wait) => {
                        tracing::warn!(
                            "{failure}: leaving the election, campaigning again in {} \
                             (--error-timeout)",
                            show(wait)
                        );
                        if let Some(stop) = self.pause(wait).await {
                            return self.finish(end_of(stop), None).await;
                        }
                    }
                },
                Ended::ChildExited { status, ran } => match self.args.policy() {
                    OnChildExit::Exit => {
                        let code = crate::process::exit_code(status);
                        return self.finish(RunEnd::ChildExit(code), None).await;
                    }
                    OnChildExit::Resign | OnChildExit::Restart => {
                        let wait = self.backoff.after_exit(ran);
                        tracing::info!(
                            "leaving the election; campaigning again in {} (back-off after the \
                             child exited)",
                            show(wait)
                        );
                        if let Some(stop) = self.pause(wait).await {
                            return self.finish(end_of(stop), None).await;
                        }
                    }
                },
            }
        }
    }

    /// Leaves the election (resigning, reserving for the best live candidate), waits `wait`,
    /// and joins again with the same candidate. A stop during the wait is returned.
    async fn pause(&mut self, wait: Duration) -> Option<Stop> {
        self.away(Some(wait)).await
    }

    /// Leaves the election, waits `wait` (`None`: stops this process until SIGCONT), and joins
    /// again with the same candidate. A stop during the wait is returned.
    pub(super) async fn away(&mut self, wait: Option<Duration>) -> Option<Stop> {
        let report = self.runner.shutdown().await;
        self.current.send_replace(None);
        match (&report.resigned, &report.error) {
            (_, Some(error)) => tracing::warn!(
                %error,
                "could not leave the election cleanly; the lease lapses by itself"
            ),
            (
                Some(ResignOutcome::Resigned {
                    ballot,
                    reserved_for,
                }),
                None,
            ) => match reserved_for {
                Some(next) => tracing::info!(
                    ballot = ballot.get(),
                    reserved_for = %next.id(),
                    "resigned"
                ),
                None => tracing::info!(ballot = ballot.get(), "resigned"),
            },
            _ => {}
        }
        let stop = match wait {
            Some(wait) => tokio::select! {
                biased;
                stop = self.signals.recv() => Some(stop),
                () = tokio::time::sleep(wait) => None,
            },
            // A stop that came while leaving wins over the suspension.
            None => self.signals.stop_self().await,
        };
        if stop.is_some() {
            return stop;
        }
        let runner = start_runner(
            &self.db,
            self.ctx,
            &self.candidate,
            &self.desired,
            &self.checks,
            &self.current,
        );
        match runner {
            Ok(runner) => {
                self.current.send_replace(Some(runner.clone()));
                self.runner = runner;
                tracing::info!(candidate = %self.id, "campaigning again");
                None
            }
            Err(e) => {
                tracing::error!(error = %chain(&e), "cannot campaign again");
                Some(Stop::StoreFailed)
            }
        }
    }

    /// Leaves the election (resign, reserving for the best live candidate, and unregister)
    /// and turns `end` into the exit code (see [`run_exit_code`]). `failure`: the message of
    /// an end that is a failure.
    async fn finish(&mut self, end: RunEnd, failure: Option<Failure>) -> Result<ExitCode, Failure> {
        // The runner logs the resignation (and whom it reserved the leadership for).
        let report = self.runner.shutdown().await;
        self.current.send_replace(None);
        let leave_error = report.error.clone();
        if leave_error.is_none() {
            tracing::info!(unregistered = report.unregistered, "left the election");
        }
        let code = run_exit_code(end, leave_error.is_some());
        let failure = match end {
            RunEnd::StoreFailed => Some(Failure::store(
                self.signals
                    .failure()
                    .or_else(|| failure.and_then(|f| f.message))
                    .unwrap_or_else(|| "the store failed".to_owned()),
            )),
            RunEnd::Signal => leave_error.as_ref().map(|error| {
                Failure::store(format!(
                    "could not leave the election cleanly ({error}); the lease lapses by itself"
                ))
            }),
            RunEnd::ChildExit(_) => {
                if let Some(error) = &leave_error {
                    tracing::warn!(%error, "could not leave the election cleanly; the lease lapses by itself");
                }
                None
            }
            RunEnd::NotElected | RunEnd::CommandFailed => failure,
        };
        match failure {
            Some(mut failure) => {
                // The code comes from the one mapping; the message from the failure.
                failure.code = crate::exit::Exit::from_code(code).unwrap_or(failure.code);
                Err(failure)
            }
            None => Ok(ExitCode::from(code)),
        }
    }
}
