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
mod children;
mod session;

use std::process::ExitCode;

use fdb_leader_election::ElectionConfig;
use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::shard::{Layout, ShardedRunner};

use super::{Prepared, host_name};
use crate::cli::{MAX_CONCURRENT_MOVES, MAX_RUN_SHARDS, RunArgs};
use crate::durations::show;
use crate::exit::{Failure, chain};
use crate::signals::Signals;
use crate::store::{Ctx, until_done};
use children::Children;
use session::{Session, Stored};

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
