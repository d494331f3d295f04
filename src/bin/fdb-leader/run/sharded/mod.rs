//! `run --shards M`: a member of the sharded election of `--election NAME` (under
//! `("fdb-leader", NAME, "shards")`, docs/design.md §12) that runs one child per shard it owns.
//!
//! The rules are those of the single election's `run` (docs/design.md §10.8), per shard:
//!
//! - **One child per owned shard**, started once the member owns the shard (a confirmed
//!   commit), with `FDB_LEADER_SHARD`, `FDB_LEADER_BALLOT` (that shard's ballot),
//!   `FDB_LEADER_SHARD_COUNT`, `FDB_LEADER_ID` (the member) and `FDB_LEADER_ELECTION_NAME` in
//!   its environment ([`crate::child_env`]), in a process group of its own under a watchdog of its own that holds that
//!   shard's lease: the guard's deadline, which every renewal of the member moves. A
//!   supervisor that dies (any signal) takes every child with it; one that is stopped or
//!   blocked has each child killed at its shard's deadline.
//! - **Stop before release** ([`child`]): a shard that moves (a cooperative move, a drain)
//!   is handed over only once its child has stopped (SIGTERM, SIGKILL after `--grace`, the
//!   group gone), or the election's handover grace has passed; a guard that ends without
//!   this process asking (the lease lost, the member's epoch ended) has its child killed at
//!   once.
//! - **Leaving** (SIGINT, SIGTERM, SIGHUP; a store failure, with exit code 3): every child is
//!   stopped first (a second signal skips the grace), then the member leaves, handing every
//!   shard back in one commit, so the others take them over without waiting a lease.
//! - **`--on-child-exit`**: `restart` (the default here) restarts that shard's child after
//!   its own back-off while the member owns the shard; `exit` stops every child, leaves and
//!   exits with the child's code. `resign` is refused by the command line: a member cannot
//!   hand one shard over by itself.
//! - **Ctrl-Z** stops every child, leaves, and stops this process; SIGCONT joins again as a
//!   new member.
//! - **Many children** ([`MAX_RUN_SHARDS`], also for a stored election: a larger one is
//!   refused before joining): they start one at a time, off the runtime's thread (the member
//!   renews on it), the changes of one cycle are reconciled once, and stopping children
//!   share one scan of `/proc`.

mod child;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use fdb_leader_election::runner::{ElectionDatabase, HealthProblem};
use fdb_leader_election::shard::{Layout, ShardChange, ShardedRunner};
use fdb_leader_election::{Ballot, CandidateId, ElectionConfig, Priority, ShardId, Weight};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, watch};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use self::child::{ChildTask, Ended, Outcome};
use super::{Prepared, end_of, host_name};
use crate::child_env;
use crate::cli::{MAX_CONCURRENT_MOVES, MAX_RUN_SHARDS, RunArgs};
use crate::durations::show;
use crate::exit::{Failure, RunEnd, chain, run_exit_code};
use crate::process::{Spec, exit_code};
use crate::signals::{Asked, Signals, Stop};
use crate::store::{Ctx, Retry, once, until_done};

/// How often the member's shards are compared with the children running, besides every
/// change the member reports (a safety net for a change stream that lagged).
const RECONCILE: Duration = Duration::from_millis(250);

/// `/healthz`'s note for a healthy member: its id, how many shards it owns, and whether it
/// coordinates placement.
pub(super) fn health_note(member: &ShardedRunner) -> String {
    let role = if member.is_coordinator() {
        ", coordinator"
    } else {
        ""
    };
    let eligible = match member.member().eligibility().reason() {
        None => String::new(),
        Some(why) => format!(", not eligible: {why}"),
    };
    format!(
        "member {}, owns {} shards{role}{eligible}",
        member.id(),
        member.owned().len()
    )
}

/// `/shards` (this member's shards, as JSON) and `/shard/N` (200 while it owns shard N and
/// takes new work for it: 503 while the shard drains for a move), judged now against each
/// shard's deadline.
pub(super) fn role(member: &ShardedRunner, role: crate::serve::Role) -> Result<String, String> {
    match role {
        crate::serve::Role::Shard(n) => match member.guard(fdb_leader_election::ShardId::new(n)) {
            Some(guard) if guard.accepts_work() => Ok(format!(
                "owner of shard {n}, ballot {}",
                guard.fencing_token()
            )),
            Some(guard) => Err(format!(
                "owner of shard {n} (ballot {}), draining: it takes no new work, its child is \
                 stopping and the shard is being handed over",
                guard.fencing_token()
            )),
            None => Err(format!("not the owner of shard {n}")),
        },
        _ => {
            let owned: Vec<serde_json::Value> = member
                .owned()
                .iter()
                .map(|(shard, guard)| {
                    serde_json::json!({ "shard": shard.get(), "ballot": guard.fencing_token().get() })
                })
                .collect();
            Ok(serde_json::json!({
                "member": member.id().as_str(),
                "coordinator": member.is_coordinator(),
                "owned": owned,
            })
            .to_string())
        }
    }
}

/// What the sharded election holds, as this process found (or created) it.
#[derive(Clone, Debug)]
struct Stored {
    /// The shard count and the move limit.
    layout: Layout,
    /// The timing (the coordinator election's, created with the sharded election's).
    config: ElectionConfig,
    /// The members not fenced out, when this process joined.
    members: Vec<CandidateId>,
}

/// `run --shards M`, with what [`preflight()`](super::preflight()) prepared.
pub(super) async fn run<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    args: &RunArgs,
    prepared: Prepared,
    signals: &mut Signals,
) -> Result<ExitCode, Failure> {
    let count = args.shards.unwrap_or(1);
    let wanted = Layout::new(count, MAX_CONCURRENT_MOVES)
        .map_err(|e| Failure::usage(format!("--shards {count}: {}", chain(&e))))?;
    let desired = prepared.desired.clone();
    let election = ctx.sharded.clone();
    // A store that does not answer yet is waited for; a signal ends the wait.
    let joined = until_done(&db, ctx, move |txn| {
        let (election, desired) = (election.clone(), desired.clone());
        async move {
            election.initialize(&txn, &desired, &wanted).await?;
            let layout = election.layout(&txn).await?;
            let config = election.read_config(&txn).await?;
            let members = election.members(&txn).await?;
            let members = members
                .into_iter()
                .filter(|(_, m)| !m.is_fenced())
                .map(|(id, _)| id)
                .collect();
            Ok(Stored {
                layout,
                config,
                members,
            })
        }
    });
    let stored = tokio::select! {
        biased;
        stop = signals.recv() => return signals.stopped(stop, "before joining the sharded election"),
        joined = joined => joined?,
    };
    refuse_beyond_the_limit(ctx, &stored)?;
    warn_about_stored(ctx, args, &prepared.desired, &stored);
    let label = args.name.clone().unwrap_or_else(host_name);
    let mut session = Session {
        db,
        ctx,
        args,
        signals,
        label,
        stored,
        current: prepared.member,
        checks: prepared.checks,
        runner: None,
        changes: None,
        children: Children::default(),
    };
    session.join()?;
    session.supervise().await
}

/// Refuses (exit 2, before joining) a stored sharded election of more shards than `run
/// --shards` supervises ([`MAX_RUN_SHARDS`]): `config set --sharded --shards M` and
/// `ShardedRunner`s create larger ones, and a member may come to own every shard, with a child
/// and a watchdog each.
fn refuse_beyond_the_limit(ctx: &Ctx, stored: &Stored) -> Result<(), Failure> {
    let shards = stored.layout.shards();
    if shards <= MAX_RUN_SHARDS {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "the sharded election {name} has {shards} shards, more than run --shards supervises \
         (at most {MAX_RUN_SHARDS}: each shard this process owns runs a child and a watchdog of \
         its own, and one member may come to own every shard); nothing was joined. Serve it \
         with ShardedRunners in the service itself, or run --shards on a sharded election of \
         at most {MAX_RUN_SHARDS} shards under another --election NAME ({status} shows this \
         one)",
        name = ctx.name,
        status = ctx.suggest(&["shards", "status"]),
    )))
}

/// What `run` says when the sharded election it joins differs from what its flags ask.
fn warn_about_stored(ctx: &Ctx, args: &RunArgs, desired: &ElectionConfig, stored: &Stored) {
    let count = args.shards.unwrap_or(1);
    if stored.layout.shards() != count {
        tracing::warn!(
            "the sharded election {} already exists with {} shards: its layout wins over \
             --shards {count} (a sharded election's shard count never changes)",
            ctx.name,
            stored.layout.shards(),
        );
    }
    let config = &stored.config;
    if (args.lease.is_some() || args.heartbeat.is_some())
        && (config.lease_duration() != desired.lease_duration()
            || config.heartbeat_interval() != desired.heartbeat_interval())
    {
        tracing::warn!(
            "the sharded election {} already exists with lease {} and heartbeat {}: the stored \
             configuration wins over --lease/--heartbeat",
            ctx.name,
            show(config.lease_duration()),
            show(config.heartbeat_interval()),
        );
    }
    if args.grace >= config.handover_grace() {
        tracing::warn!(
            "--grace {} is not shorter than the election's handover grace {}: a shard may be \
             handed over before its child has stopped",
            show(args.grace),
            show(config.handover_grace()),
        );
    }
}

/// The children: one task per shard at most, each for one guard of the shard.
#[derive(Default)]
struct Children {
    /// The children's tasks; each ends once its child's group is gone.
    tasks: JoinSet<Ended>,
    /// The shards whose task runs, with the ballot it runs under.
    running: BTreeMap<ShardId, Ballot>,
    /// Cancelled to stop every child.
    stop: CancellationToken,
    /// Cancelled by a second signal while stopping: SIGKILL at once.
    hurry: CancellationToken,
    /// Taken by each child's start.
    starts: Starts,
}

/// How many children start at once ([`Starts`]).
const STARTS_AT_ONCE: usize = 1;

/// The children that may start at once: each start forks and executes a watchdog (this
/// program) that starts the command; hundreds at once (a member that acquires every shard)
/// would take every core from this process's own tasks, the member's renewals and the notes
/// that tell the watchdogs each renewal (a late one kills the children at their old
/// deadline). One at a time starts them about as fast as two on a 2-core machine (about 100
/// a second for a debug build: the new processes' own start-up is the bound) and leaves a
/// core to the renewals.
#[derive(Clone)]
pub(super) struct Starts(Arc<Semaphore>);

impl Default for Starts {
    fn default() -> Self {
        Starts(Arc::new(Semaphore::new(STARTS_AT_ONCE)))
    }
}

impl Starts {
    /// Waits for a turn to start a child; the start holds the permit.
    pub(super) async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.0).acquire_owned().await.ok()
    }
}

impl Children {
    /// Starts a task for every shard `runner` owns that has none (the previous child of the
    /// shard has stopped) and whose guard accepts work. A task ends only once its guard stops
    /// accepting work (a move requested, the guard ended or past its deadline), or with the
    /// run: so a guard gets a second child only after a renewal confirmed late moved its
    /// deadline forward again, after the watchdog had killed the first one at the old
    /// deadline (the same ownership, at the same ballot, which the member believes again).
    fn reconcile(
        &mut self,
        runner: &ShardedRunner,
        args: &RunArgs,
        base: &[(&'static str, String)],
    ) {
        if self.stop.is_cancelled() {
            return;
        }
        for (shard, guard) in runner.owned() {
            let ballot = guard.fencing_token();
            if self.running.contains_key(&shard) || !guard.accepts_work() {
                continue;
            }
            let mut env = vec![
                (child_env::SHARD, shard.get().to_string()),
                (child_env::BALLOT, ballot.get().to_string()),
            ];
            env.extend(base.iter().map(|(k, v)| (*k, v.clone())));
            let Some(spec) = Spec::command(&args.command, args.shell, env) else {
                return;
            };
            self.running.insert(shard, ballot);
            let task = ChildTask {
                guard,
                member: runner.member().clone(),
                spec,
                grace: args.grace,
                policy: args.policy(),
                stop: self.stop.clone(),
                hurry: self.hurry.clone(),
                starts: self.starts.clone(),
            };
            self.tasks.spawn(task.run());
        }
    }

    /// Takes note of a task's end; its outcome.
    fn ended(&mut self, joined: Result<Ended, JoinError>) -> Outcome {
        match joined {
            Ok(ended) => {
                if self.running.get(&ended.shard) == Some(&ended.ballot) {
                    self.running.remove(&ended.shard);
                }
                ended.outcome
            }
            Err(e) => {
                // Not reachable without a panic in a child's task: its shard is left without
                // a child (the watchdog ended the child with the task's lifeline).
                tracing::error!(error = %e, "a child's task failed");
                Outcome::Done
            }
        }
    }
}

/// One `run --shards`: the member, its children, the signals.
struct Session<'a, D: ElectionDatabase> {
    /// The store.
    db: D,
    /// The election's name and place, for the runner, messages and suggested commands.
    ctx: &'a Ctx,
    /// The command line of `run`.
    args: &'a RunArgs,
    /// What asks this process to stop (or to suspend).
    signals: &'a mut Signals,
    /// The member's label (`--name`, or the host name).
    label: String,
    /// The sharded election as found: its layout and configuration.
    stored: Stored,
    /// The current member, for `/healthz`.
    current: watch::Sender<Option<ShardedRunner>>,
    /// The readiness check.
    checks: crate::checks::HealthChecks,
    /// The member, while it is one.
    runner: Option<ShardedRunner>,
    /// Its ownership changes (the children are reconciled at each).
    changes: Option<broadcast::Receiver<ShardChange>>,
    children: Children,
}

impl<D: ElectionDatabase> Session<'_, D> {
    /// Joins the sharded election as a new member.
    fn join(&mut self) -> Result<(), Failure> {
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
            self.stored.layout.shards().to_string(),
        );
        let env: crate::checks::EnvSource = std::sync::Arc::new(move || {
            let id = members
                .borrow()
                .as_ref()
                .map(|r| r.id().to_string())
                .unwrap_or_default();
            vec![
                (child_env::SHARD_COUNT, count.clone()),
                (child_env::ID, id),
                (child_env::ELECTION_NAME, name.clone()),
            ]
        });
        let builder = self.checks.apply_sharded(builder, &env);
        let runner = builder
            .start()
            .map_err(|e| Failure::usage(format!("run: {}", chain(&e))))?;
        super::warn_of_namesakes(
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

    /// The environment every child gets besides its shard and ballot.
    fn base_env(&self) -> Vec<(&'static str, String)> {
        let id = self
            .runner
            .as_ref()
            .map(|r| r.id().to_string())
            .unwrap_or_default();
        vec![
            (
                child_env::SHARD_COUNT,
                self.stored.layout.shards().to_string(),
            ),
            (child_env::ID, id),
            (child_env::ELECTION_NAME, self.ctx.name.clone()),
        ]
    }

    /// Runs children for the shards the member owns until the run ends.
    async fn supervise(&mut self) -> Result<ExitCode, Failure> {
        let mut tick = tokio::time::interval(RECONCILE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if let Some(runner) = &self.runner {
                let base = self.base_env();
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
