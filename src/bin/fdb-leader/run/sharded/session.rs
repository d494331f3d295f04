//! One `run --shards` session: the member joins, its children are supervised, and it leaves
//! (or suspends on Ctrl-Z).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::runner::{ElectionDatabase, HealthProblem};
use fdb_leader_election::shard::{Layout, ShardChange, ShardedRunner};
use fdb_leader_election::{CandidateId, ElectionConfig, Priority, Weight};
use tokio::sync::{broadcast, watch};

use super::child::Outcome;
use super::children::Children;
use crate::child_env;
use crate::cli::RunArgs;
use crate::durations::show;
use crate::exit::{Failure, RunEnd, chain, run_exit_code};
use crate::process::exit_code;
use crate::run::end_of;
use crate::signals::{Asked, Signals, Stop};
use crate::store::{Ctx, Retry, once};

/// How often the member's shards are compared with the children running, besides every
/// change the member reports (a safety net for a change stream that lagged).
const RECONCILE: Duration = Duration::from_millis(250);

/// What the sharded election holds, as this process found (or created) it.
#[derive(Clone, Debug)]
pub(super) struct Stored {
    /// The shard count and the move limit.
    pub(super) layout: Layout,
    /// The timing (the coordinator election's, created with the sharded election's).
    pub(super) config: ElectionConfig,
    /// The members not fenced out, when this process joined.
    pub(super) members: Vec<CandidateId>,
}

/// One `run --shards`: the member, its children, the signals.
pub(super) struct Session<'a, D: ElectionDatabase> {
    /// The store.
    pub(super) db: D,
    /// The election's name and place, for the runner, messages and suggested commands.
    pub(super) ctx: &'a Ctx,
    /// The command line of `run`.
    pub(super) args: &'a RunArgs,
    /// What asks this process to stop (or to suspend).
    pub(super) signals: &'a mut Signals,
    /// The member's label (`--name`, or the host name).
    pub(super) label: String,
    /// The sharded election as found: its layout and configuration.
    pub(super) stored: Stored,
    /// The current member, for `/healthz`.
    pub(super) current: watch::Sender<Option<ShardedRunner>>,
    /// The readiness check.
    pub(super) checks: crate::checks::HealthChecks,
    /// The member, while it is one.
    pub(super) runner: Option<ShardedRunner>,
    /// Its ownership changes (the children are reconciled at each).
    pub(super) changes: Option<broadcast::Receiver<ShardChange>>,
    pub(super) children: Children,
}

impl<D: ElectionDatabase> Session<'_, D> {
    /// Joins the sharded election as a new member.
    pub(super) fn join(&mut self) -> Result<(), Failure> {
        let weight = Weight::new(self.args.weight.unwrap_or(1));
        let builder = ShardedRunner::builder(self.db.clone(), self.ctx.sharded.subspace().clone())
            .shards(self.stored.layout.shards())
            .max_concurrent_moves(self.stored.layout.max_concurrent_moves())
            .label(self.label.clone())
            .election_name(self.ctx.name.clone())
            .priority(Priority::new(self.args.priority))
            .weight(weight)
            .config(self.stored.config.clone());
        let builder = match &self.args.app_version {
            Some(v) => builder.version(&v.to_string()),
            None => builder,
        };
        // The readiness command's environment: the child's, less its shard and ballot.
        let (members, name, count) = (
            self.current.subscribe(),
            self.ctx.name.clone(),
            self.stored.layout.shards(),
        );
        let env: crate::checks::EnvSource =
            Arc::new(move || base_env(count, members.borrow().as_ref(), &name));
        let builder = self.checks.apply_sharded(builder, &env);
        let runner = builder
            .start()
            .map_err(|e| Failure::usage(format!("run: {}", chain(&e))))?;
        crate::run::warn_of_namesakes(
            self.ctx,
            "a member (live, or crashed less than a lease ago: not fenced out yet)",
            runner.id(),
            self.stored.members.iter(),
        );
        tracing::info!(
            member = %runner.id(),
            election = %self.ctx.name,
            store = %self.ctx.store,
            shards = self.stored.layout.shards(),
            weight = weight.get(),
            lease = %show(self.stored.config.lease_duration()),
            heartbeat = %show(self.stored.config.heartbeat_interval()),
            "joined the sharded election"
        );
        self.changes = Some(runner.subscribe());
        self.current.send_replace(Some(runner.clone()));
        self.runner = Some(runner);
        self.children = Children::default();
        Ok(())
    }

    /// Runs children for the shards the member owns until the run ends.
    pub(super) async fn supervise(&mut self) -> Result<ExitCode, Failure> {
        let mut tick = tokio::time::interval(RECONCILE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if let Some(runner) = &self.runner {
                let base = base_env(self.stored.layout.shards(), Some(runner), &self.ctx.name);
                self.children.reconcile(runner, self.args, &base);
            }
            tokio::select! {
                biased;
                asked = self.signals.next() => {
                    let stop = match asked {
                        Asked::Stop(stop) => Some(stop),
                        Asked::Suspend => self.suspend().await,
                    };
                    if let Some(stop) = stop {
                        return self.finish(end_of(stop), None).await;
                    }
                }
                Some(joined) = self.children.tasks.join_next() => {
                    match self.children.ended(joined) {
                        Outcome::Done => {}
                        Outcome::Exit(status) => {
                            let code = exit_code(status);
                            return self.finish(RunEnd::ChildExit(code), None).await;
                        }
                        Outcome::Failed(failure) => {
                            return self.finish(RunEnd::CommandFailed, Some(failure)).await;
                        }
                    }
                }
                () = next_change(&mut self.changes) => {}
                _ = tick.tick() => {
                    let died = self
                        .runner
                        .as_ref()
                        .is_some_and(|r| matches!(r.health(), Err(HealthProblem::RunnerDied)));
                    if died {
                        let failure = Failure::store("the sharded election's runner stopped unexpectedly");
                        return self.finish(RunEnd::StoreFailed, Some(failure)).await;
                    }
                }
            }
        }
    }

    /// Stops every child (SIGTERM, SIGKILL after the grace; at once after a second signal)
    /// and waits until each one's group is gone. The first stop received meanwhile is
    /// returned.
    async fn stop_children(&mut self) -> Option<Stop> {
        self.children.stop.cancel();
        let mut received = None;
        while !self.children.tasks.is_empty() {
            tokio::select! {
                joined = self.children.tasks.join_next() => {
                    if let Some(joined) = joined {
                        let _ = self.children.ended(joined);
                    }
                }
                stop = self.signals.recv(), if !self.children.hurry.is_cancelled() => {
                    tracing::warn!(reason = stop.as_str(), "asked to stop while stopping: stopping every child at once");
                    self.children.hurry.cancel();
                    received = Some(stop);
                }
            }
        }
        received
    }

    /// Leaves the sharded election: every shard handed back and the member's epoch ended in
    /// one commit (others take the shards over without waiting a lease), and the coordinator
    /// election handed over; with `confirm`, reads the member's record back to see that its
    /// epoch ended (not after a store failure: the store would not answer). `Err`: the leave
    /// did not end within a lease (and a second), or was not confirmed; the shards then move
    /// a lease after the member's last renewal.
    async fn leave(&mut self, confirm: bool) -> Result<(), String> {
        self.changes = None;
        self.current.send_replace(None);
        let Some(runner) = self.runner.take() else {
            return Ok(());
        };
        // A leave takes a few commits; past a lease the shards fail over anyway.
        let bound = self
            .stored
            .config
            .lease_duration()
            .saturating_add(Duration::from_secs(1));
        if tokio::time::timeout(bound, runner.shutdown())
            .await
            .is_err()
        {
            return Err(format!("the member did not leave within {}", show(bound)));
        }
        if !confirm {
            return Ok(());
        }
        // The runner reports nothing: read whether the member's epoch ended.
        let (election, id) = (self.ctx.sharded.clone(), runner.id().clone());
        let record = once(&self.db, self.ctx, Retry::Idempotent, move |txn| {
            let (election, id) = (election.clone(), id.clone());
            async move { election.member_record(&txn, &id).await }
        })
        .await;
        match record {
            Ok(Some(record)) if !record.is_fenced() => {
                Err("the member's record is still live".to_owned())
            }
            Ok(_) => {
                tracing::info!(member = %runner.id(), "left the sharded election");
                Ok(())
            }
            Err(failure) => Err(failure.to_string()),
        }
    }

    /// After SIGTSTP: stops every child, leaves, stops this process (SIGSTOP), and on SIGCONT
    /// joins again as a new member. A stop that came meanwhile is returned.
    async fn suspend(&mut self) -> Option<Stop> {
        tracing::info!(
            "SIGTSTP: stopping every child, leaving the sharded election and stopping this \
             process (SIGCONT, e.g. `fg`, joins again)"
        );
        if let Some(stop) = self.stop_children().await {
            return Some(stop);
        }
        if let Err(error) = self.leave(true).await {
            tracing::warn!(%error, "could not leave the sharded election cleanly; its shards move a lease after its last renewal");
        }
        if let Some(stop) = self.signals.stop_self().await {
            return Some(stop);
        }
        match self.join() {
            Ok(()) => None,
            Err(failure) => {
                tracing::error!(%failure, "cannot join again");
                Some(Stop::StoreFailed)
            }
        }
    }

    /// Stops every child, leaves the sharded election, and turns `end` into the exit code
    /// (see [`run_exit_code`]). `failure`: the message of an end that is a failure.
    async fn finish(&mut self, end: RunEnd, failure: Option<Failure>) -> Result<ExitCode, Failure> {
        let _ = self.stop_children().await;
        let left = self.leave(end != RunEnd::StoreFailed).await;
        let code = run_exit_code(end, left.is_err());
        let failure = match (end, left) {
            (RunEnd::StoreFailed, _) => Some(Failure::store(
                self.signals
                    .failure()
                    .or_else(|| failure.and_then(|f| f.message))
                    .unwrap_or_else(|| "the store failed".to_owned()),
            )),
            (RunEnd::Signal, Err(error)) => Some(Failure::store(format!(
                "could not leave the sharded election cleanly ({error}); its shards move a \
                 lease after its last renewal"
            ))),
            (RunEnd::ChildExit(_), Err(error)) => {
                tracing::warn!(%error, "could not leave the sharded election cleanly; its shards move a lease after its last renewal");
                None
            }
            (RunEnd::Signal | RunEnd::ChildExit(_), Ok(())) => None,
            (RunEnd::NotElected | RunEnd::CommandFailed, _) => failure,
        };
        match failure {
            Some(mut failure) => {
                failure.code = crate::exit::Exit::from_code(code).unwrap_or(failure.code);
                Err(failure)
            }
            None => Ok(ExitCode::from(code)),
        }
    }
}

/// Resolves at the member's next ownership change (or a lag in the stream), having taken
/// every change already there with it (one reconciliation for a cycle that acquired hundreds
/// of shards, not one each); never once the stream has ended or while there is none.
async fn next_change(changes: &mut Option<broadcast::Receiver<ShardChange>>) {
    let Some(rx) = changes.as_mut() else {
        return std::future::pending().await;
    };
    let mut ended = matches!(rx.recv().await, Err(broadcast::error::RecvError::Closed));
    loop {
        match rx.try_recv() {
            Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(broadcast::error::TryRecvError::Empty) => break,
            Err(broadcast::error::TryRecvError::Closed) => {
                ended = true;
                break;
            }
        }
    }
    if ended {
        *changes = None;
    }
}

/// The environment every child gets besides its shard and ballot (the readiness command's
/// too): the shard count, the member's id (none while it is not one) and the election's name.
fn base_env(count: u32, member: Option<&ShardedRunner>, name: &str) -> Vec<(&'static str, String)> {
    let id = member.map(|r| r.id().to_string()).unwrap_or_default();
    vec![
        (child_env::SHARD_COUNT, count.to_string()),
        (child_env::ID, id),
        (child_env::ELECTION_NAME, name.to_owned()),
    ]
}
