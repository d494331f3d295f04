//! The children of `run --shards`: one task per owned shard, started as the member's shards
//! change and reaped as they end.

use std::collections::BTreeMap;

use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{Ballot, ShardId};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use super::child::{ChildTask, Ended, Outcome, Starts};
use crate::child_env;
use crate::cli::RunArgs;
use crate::process::Spec;

/// The children: one task per shard at most, each for one guard of the shard.
#[derive(Default)]
pub(super) struct Children {
    /// The children's tasks; each ends once its child's group is gone.
    pub(super) tasks: JoinSet<Ended>,
    /// The shards whose task runs, with the ballot it runs under.
    pub(super) running: BTreeMap<ShardId, Ballot>,
    /// Cancelled to stop every child.
    pub(super) stop: CancellationToken,
    /// Cancelled by a second signal while stopping: SIGKILL at once.
    pub(super) hurry: CancellationToken,
    /// Taken by each child's start.
    pub(super) starts: Starts,
}

impl Children {
    /// Starts a task for every shard `runner` owns that has none (the previous child of the
    /// shard has stopped) and whose guard accepts work. A task ends only once its guard stops
    /// accepting work (a move requested, the guard ended or past its deadline), or with the
    /// run: so a guard gets a second child only after a renewal confirmed late moved its
    /// deadline forward again, after the watchdog had killed the first one at the old
    /// deadline (the same ownership, at the same ballot, which the member believes again).
    pub(super) fn reconcile(
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
    pub(super) fn ended(&mut self, joined: Result<Ended, JoinError>) -> Outcome {
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
