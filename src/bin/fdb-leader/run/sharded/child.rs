//! One shard's child: started while this process owns the shard, in a process group of its
//! own under a watchdog that holds that shard's lease, and stopped before the shard is handed
//! over.
//!
//! The task holds a guarded task of the shard's [`ShardGuard`] (the runner's "busy" mark) from
//! its start until the child's process group is gone: a move the coordinator asks for waits
//! for it (at most the election's handover grace) before the shard is written over to its
//! next owner. Stop before release.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use fdb_leader_election::shard::machine::ShardStop;
use fdb_leader_election::shard::{Member, ShardGuard};
use fdb_leader_election::{Ballot, ShardId};
use nix::sys::signal::Signal;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::ChildBackoff;
use crate::cli::OnChildExit;
use crate::durations::show;
use crate::exit::Failure;
use crate::process::{Proc, Spec, describe_exit};
use crate::watchdog::Lease;

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

/// How one shard's child ended, for the main task.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Nothing more to do: the ownership ended or is being handed over, this process asked
    /// the child to stop, or the watchdog killed it at the lease's deadline.
    Done,
    /// The child exited by itself under `--on-child-exit exit`: the run ends with its code.
    Exit(ExitStatus),
    /// The child could not be started (or waited for): the run ends with exit code 4.
    Failed(Failure),
}

/// What ended one shard's child task: the ownership it ran under, and how.
#[derive(Debug)]
pub(super) struct Ended {
    /// The shard.
    pub(super) shard: ShardId,
    /// The ballot of the ownership the task ran under.
    pub(super) ballot: Ballot,
    /// How it ended.
    pub(super) outcome: Outcome,
}

/// One shard's child, supervised for one ownership (one ballot) of the shard.
pub(super) struct ChildTask {
    /// The ownership.
    pub(super) guard: ShardGuard,
    /// The member, whose clock the guard's deadline is on (for the watchdog's lease).
    pub(super) member: Member,
    /// The command, with this shard's environment.
    pub(super) spec: Spec,
    /// `--grace`: between SIGTERM and SIGKILL.
    pub(super) grace: Duration,
    /// What to do when the child exits by itself (`restart` or `exit`).
    pub(super) policy: OnChildExit,
    /// Cancelled when this process stops every child (a signal, a store failure, the end of
    /// the run).
    pub(super) stop: CancellationToken,
    /// Cancelled by a second signal: skip the rest of the grace.
    pub(super) hurry: CancellationToken,
    /// The turns to start a child (a few at a time).
    pub(super) starts: Starts,
}

/// Whether a child that ended with `status` was killed by its watchdog because the shard's
/// lease ran out: killed by SIGKILL while the guard no longer holds (the watchdog's deadline
/// is never before the guard's). The member did not renew in time: the store did not answer,
/// or this process was stopped or blocked past the deadline.
fn killed_at_deadline(status: ExitStatus, guard: &ShardGuard) -> bool {
    status.signal() == Some(Signal::SIGKILL as i32) && !guard.is_valid()
}

/// Why the child is being stopped.
#[derive(Clone, Copy)]
enum Halt {
    /// This process stops every child.
    Stop,
    /// The shard's ownership is ending: a move was asked for, or the guard ended.
    Ownership,
}

impl ChildTask {
    /// Supervises the child for this ownership; the shard is free to move once this returns.
    pub(super) async fn run(self) -> Ended {
        let (shard, ballot) = (self.guard.shard(), self.guard.fencing_token());
        // While `busy` is held, the member counts the shard as busy: a move waits for the
        // child to stop (at most the handover grace) before the shard is handed over.
        let (busy, idle) = oneshot::channel::<()>();
        drop(self.guard.spawn(async move {
            let _ = idle.await;
        }));
        let outcome = self.supervise().await;
        drop(busy);
        Ended {
            shard,
            ballot,
            outcome,
        }
    }

    /// Runs the child while the shard is owned; restarts it (after the back-off) under
    /// `restart`.
    async fn supervise(&self) -> Outcome {
        let (shard, ballot) = (self.guard.shard().get(), self.guard.fencing_token().get());
        let lease = Lease::of_shard(&self.guard, &self.member);
        let mut backoff = ChildBackoff::default();
        loop {
            if self.stop.is_cancelled() || !self.guard.accepts_work() {
                // The ownership ended (or a move was asked for) during the back-off: start
                // nothing.
                return Outcome::Done;
            }
            // Forking and executing a process takes milliseconds: off the runtime's thread,
            // so that starting hundreds of children holds up no other task of this one (the
            // renewals' notes to the watchdogs, the other children, the signals), and a few
            // at a time ([`Starts`]).
            let turn = tokio::select! {
                biased;
                () = self.stop.cancelled() => return Outcome::Done,
                () = self.guard.handover_requested() => return Outcome::Done,
                turn = self.starts.turn() => turn,
            };
            if !self.guard.accepts_work() {
                return Outcome::Done;
            }
            let (spec, leased) = (self.spec.clone(), lease.clone());
            let spawned =
                tokio::task::spawn_blocking(move || Proc::spawn_leased(&spec, "child", &leased))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            drop(turn);
            let mut child = match spawned {
                Ok(child) => child,
                Err(e) => {
                    return Outcome::Failed(Failure::command(format!(
                        "shard {shard}: cannot start {}: {e}",
                        self.spec.display()
                    )));
                }
            };
            let started = Instant::now();
            tracing::info!(
                shard,
                ballot,
                group = child.pid().unwrap_or(0),
                command = %self.spec.display(),
                "owner: child started"
            );
            let event = tokio::select! {
                biased;
                () = self.stop.cancelled() => Err(Halt::Stop),
                () = self.guard.handover_requested() => Err(Halt::Ownership),
                status = child.wait() => Ok(status),
            };
            let status = match event {
                Err(halt) => {
                    match halt {
                        Halt::Stop => tracing::info!(shard, ballot, "stopping the child"),
                        // A cooperative move (placement, a join, a drain, an operator's
                        // move) is routine: INFO; a lost lease or an ended epoch is not.
                        Halt::Ownership if routine_move(&self.guard) => tracing::info!(
                            shard,
                            ballot,
                            reason = %describe(&self.guard),
                            "shard moving: stopping the child"
                        ),
                        Halt::Ownership => tracing::warn!(
                            shard,
                            ballot,
                            reason = %describe(&self.guard),
                            "ownership ending: stopping the child"
                        ),
                    }
                    match self.stop_child(&mut child).await {
                        Ok(status) => tracing::info!(
                            shard,
                            ballot,
                            how = %describe_exit(status),
                            "child stopped"
                        ),
                        Err(e) => tracing::warn!(shard, ballot, error = %e, "child stopped"),
                    }
                    return Outcome::Done;
                }
                Ok(status) => status,
            };
            let ran = started.elapsed();
            // Clear whatever the child left in its process group.
            let stopped = self.stop_child(&mut child).await;
            let status = match status.or(stopped) {
                Ok(status) => status,
                Err(e) => {
                    return Outcome::Failed(Failure::command(format!("shard {shard}: child: {e}")));
                }
            };
            if killed_at_deadline(status, &self.guard) {
                tracing::warn!(
                    shard,
                    ballot,
                    ran = %show(ran),
                    "the shard's lease ran out before a renewal (the store did not answer in \
                     time, or this process was stopped or blocked): the watchdog killed the child"
                );
                return Outcome::Done;
            }
            let policy = self.policy.as_str();
            if status.success() {
                tracing::info!(shard, ballot, ran = %show(ran), policy, "the child exited (exit code 0) while owning the shard");
            } else {
                tracing::warn!(shard, ballot, ran = %show(ran), policy, "the child exited ({}) while owning the shard", describe_exit(status));
            }
            if self.policy != OnChildExit::Restart {
                return Outcome::Exit(status);
            }
            let wait = backoff.after_exit(ran);
            tracing::info!(
                shard,
                ballot,
                "restarting the child in {} (back-off)",
                show(wait)
            );
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return Outcome::Done,
                () = self.guard.handover_requested() => return Outcome::Done,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Stops the child's process group: SIGTERM, SIGKILL after the grace, or at once on a
    /// second signal or when the shard's guard ends (the shard may have another owner from
    /// then on; the watchdog kills at the lease's deadline in any case).
    async fn stop_child(&self, child: &mut Proc) -> std::io::Result<ExitStatus> {
        let (hurry, guard) = (self.hurry.clone(), self.guard.clone());
        child
            .stop_until(self.grace, async move {
                tokio::select! {
                    () = hurry.cancelled() => "a second signal",
                    () = guard.cancelled() => "the shard's ownership ended",
                }
            })
            .await
    }
}

/// Why an ownership is ending, for logs.
/// Whether the ownership ends by a cooperative move (a move requested, or handed over),
/// not by a loss.
fn routine_move(guard: &ShardGuard) -> bool {
    match guard.stop_reason() {
        Some(ShardStop::HandedOver) => true,
        None => guard.is_handover_requested(),
        Some(_) => false,
    }
}

fn describe(guard: &ShardGuard) -> String {
    match guard.stop_reason() {
        Some(ShardStop::HandedOver) => "handed over".to_owned(),
        Some(ShardStop::LeaseExpired) => "lease expired (or the member's epoch ended)".to_owned(),
        Some(ShardStop::Shutdown) => "shutdown".to_owned(),
        Some(other) => format!("{other:?}"),
        None if guard.is_handover_requested() => "move requested".to_owned(),
        None => "ended".to_owned(),
    }
}
