//! `shards …`: the sharded election of `--election NAME`, under the tuple subspace
//! `("fdb-leader", NAME, "shards")` (see [`crate::store::shard_subspace`]): its placement
//! (`status`) and the operator overrides (`freeze`, `unfreeze`, `drain`, `undrain`, `move`).
//! None of them creates a store or an election; each is one transaction, safe to retry.

mod view;

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::shard::{Layout, ShardMove};
use fdb_leader_election::{CandidateId, ElectionError, ShardId};

use crate::cli::{ShardsCommand, ShardsMoveArgs};
use crate::exit::{Failure, chain};
use crate::output;
use crate::store::{Ctx, Retry, once};

/// `shards …`.
pub(crate) async fn execute<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    command: ShardsCommand,
) -> Result<(), Failure> {
    match command {
        ShardsCommand::Status(args) => status(db, ctx, args.json).await,
        ShardsCommand::Freeze => freeze(db, ctx, true).await,
        ShardsCommand::Unfreeze => freeze(db, ctx, false).await,
        ShardsCommand::Drain(args) => drain(db, ctx, &args.member, true).await,
        ShardsCommand::Undrain(args) => drain(db, ctx, &args.member, false).await,
        ShardsCommand::Move(args) => move_shard(db, ctx, &args).await,
    }
}

/// `shards status [--json]` (and `status` of a name whose only election is a sharded one).
pub(crate) async fn status<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    as_json: bool,
) -> Result<(), Failure> {
    let election = ctx.sharded.clone();
    let snapshot = once(db, ctx, Retry::Idempotent, move |txn| {
        let election = election.clone();
        async move {
            let layout = election.layout(&txn).await?;
            let (config, members, drained, assignments, placement) = tokio::join!(
                election.read_config(&txn),
                election.members(&txn),
                election.drained_members(&txn),
                election.assignments(&txn),
                election.placement(&txn),
            );
            Ok(view::Snapshot {
                layout,
                elections: config?.election_enabled(),
                members: members?,
                drained: drained?,
                assignments: assignments?,
                placement: placement?,
            })
        }
    })
    .await?;
    if as_json {
        output::line(&view::to_json(ctx, &snapshot).to_string())
    } else {
        output::line(&view::to_text(ctx, &snapshot))
    }
}

/// `shards freeze` (`frozen`) and `shards unfreeze`.
async fn freeze<D: ElectionDatabase>(db: &D, ctx: &Ctx, frozen: bool) -> Result<(), Failure> {
    let election = ctx.sharded.clone();
    // Setting the flag twice is harmless: retry freely.
    let before = once(db, ctx, Retry::Idempotent, move |txn| {
        let election = election.clone();
        async move {
            let before = election.layout(&txn).await?;
            if before.is_frozen() != frozen {
                election.set_frozen(&txn, frozen).await?;
            }
            Ok(before)
        }
    })
    .await?;
    let text = match (frozen, before.is_frozen() == frozen) {
        (true, true) => "placement was already frozen: nothing changed".to_owned(),
        (false, true) => "placement was not frozen: nothing changed".to_owned(),
        (true, false) => format!(
            "placement frozen: the coordinator moves nothing a live member holds (a dead \
             member's shards are still failed over); move shards by hand with {}, and hand \
             placement back with {}",
            ctx.suggest(&["shards", "move", "--shard", "N", "--to", "ID"]),
            ctx.suggest(&["shards", "unfreeze"]),
        ),
        (false, false) => format!(
            "placement unfrozen: the coordinator restores balance with the fewest moves, at most \
             {} in flight",
            before.max_concurrent_moves()
        ),
    };
    output::line(&text)
}

/// What a `drain` or `undrain` found.
enum Drained {
    /// Done: whether it was drained before, how many shards it owns, and the layout.
    Done {
        was: bool,
        owned: usize,
        layout: Layout,
        /// Live members besides it that take shards (not fenced out, not drained, weight
        /// above 0).
        takers: usize,
    },
    /// No such member: no record, and (for `undrain`) no drain mark either.
    Unknown,
}

/// `shards drain --member ID` (`drain`) and `shards undrain --member ID`.
async fn drain<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    member: &CandidateId,
    drain: bool,
) -> Result<(), Failure> {
    let election = ctx.sharded.clone();
    let id = member.clone();
    // Setting the mark twice is harmless: retry freely.
    let found = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, id) = (election.clone(), id.clone());
        async move {
            let layout = election.layout(&txn).await?;
            let record = election.member_record(&txn, &id).await?;
            let was = election.drained_members(&txn).await?.contains(&id);
            // A member must have joined to be drained (its ids are random per start: an id
            // that never joined is a typo); a drain mark outlives the member, so a member
            // that left can still be undrained.
            let undrains_a_mark = was && !drain;
            if record.is_none() && !undrains_a_mark {
                return Ok(Drained::Unknown);
            }
            if was != drain {
                election.set_drained(&txn, &id, drain).await?;
            }
            let owned = election.assignments(&txn).await?.shards_of(&id).len();
            let drained = election.drained_members(&txn).await?;
            let takers = election
                .members(&txn)
                .await?
                .iter()
                .filter(|(m, r)| {
                    **m != id && !r.is_fenced() && r.weight().get() > 0 && !drained.contains(*m)
                })
                .count();
            Ok(Drained::Done {
                was,
                owned,
                layout,
                takers,
            })
        }
    })
    .await?;
    let (was, owned, layout, takers) = match found {
        Drained::Done {
            was,
            owned,
            layout,
            takers,
        } => (was, owned, layout, takers),
        Drained::Unknown => return Err(unknown_member(ctx, "--member", member)),
    };
    let frozen = if layout.is_frozen() {
        format!(
            " Placement is frozen: nothing moves until {}.",
            ctx.suggest(&["shards", "unfreeze"])
        )
    } else {
        String::new()
    };
    let text = match (drain, was == drain) {
        (true, true) => format!("{member} was already drained: nothing changed"),
        (false, true) => format!("{member} was not drained: nothing changed"),
        (true, false) if takers == 0 => format!(
            "drained {member}: placement gives it weight 0 until {}; but no other live member \
             takes shards (none, or all drained or of weight 0), so it keeps its {owned} shards \
             until one joins or is undrained.{frozen}",
            ctx.suggest(&["shards", "undrain", "--member", member.as_str()]),
        ),
        (true, false) => format!(
            "drained {member}: placement gives it weight 0 until {}; the coordinator moves its \
             {owned} shards to the {takers} other live member{}, at most {} at a time.{frozen}",
            ctx.suggest(&["shards", "undrain", "--member", member.as_str()]),
            if takers == 1 { "" } else { "s" },
            layout.max_concurrent_moves(),
        ),
        (false, false) => format!(
            "undrained {member}: it takes its share again (it owns {owned} shards now); the \
             coordinator moves shards to it, at most {} at a time.{frozen}",
            layout.max_concurrent_moves(),
        ),
    };
    output::line(&text)
}

/// What a `move` found, or did.
enum Moved {
    Done {
        outcome: ShardMove,
        ballot: u64,
    },
    /// The shard number is not below the shard count.
    OutOfRange {
        shards: u32,
    },
    /// The configuration disables elections: no shard changes hands.
    ElectionsOff,
    /// The target has no record.
    Unknown,
    /// The target's epoch ended (fenced out, or it left).
    Fenced,
    /// An operator drained the target.
    Drained,
    /// The target's own weight is 0 (it drained itself).
    Weightless,
    /// Placement is not frozen.
    NotFrozen,
}

/// `shards move --shard N --to ID`.
async fn move_shard<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    args: &ShardsMoveArgs,
) -> Result<(), Failure> {
    let operator = CandidateId::random("operator").map_err(|e| Failure::store(chain(&e)))?;
    let election = ctx.sharded.clone();
    let (shard, to) = (ShardId::new(args.shard), args.to.clone());
    // Moving a shard to the same member twice is harmless (the second finds it requested,
    // reserved or done): retry freely.
    let moved = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, to, operator) = (election.clone(), to.clone(), operator.clone());
        async move {
            // The refusals an operator can act on, in the order to fix them, read in the
            // transaction that moves (the library refuses the same cases, less precisely).
            let layout = election.layout(&txn).await?;
            if shard.get() >= layout.shards() {
                return Ok(Moved::OutOfRange {
                    shards: layout.shards(),
                });
            }
            if !election.read_config(&txn).await?.election_enabled() {
                return Ok(Moved::ElectionsOff);
            }
            let Some(target) = election.member_record(&txn, &to).await? else {
                return Ok(Moved::Unknown);
            };
            if target.is_fenced() {
                return Ok(Moved::Fenced);
            }
            if election.drained_members(&txn).await?.contains(&to) {
                return Ok(Moved::Drained);
            }
            if target.weight().get() == 0 {
                return Ok(Moved::Weightless);
            }
            if !layout.is_frozen() {
                return Ok(Moved::NotFrozen);
            }
            let ballot = election.shard_record(&txn, shard).await?.ballot().get();
            let outcome = election.move_shard(&txn, shard, &to, &operator).await?;
            Ok::<_, ElectionError>(Moved::Done { outcome, ballot })
        }
    })
    .await?;
    let (n, to) = (args.shard, &args.to);
    let retry = ctx.suggest(&[
        "shards",
        "move",
        "--shard",
        &n.to_string(),
        "--to",
        to.as_str(),
    ]);
    let (outcome, ballot) = match moved {
        Moved::Done { outcome, ballot } => (outcome, ballot),
        Moved::OutOfRange { shards } => {
            return Err(Failure::usage(format!(
                "--shard {n}: the sharded election {} has {shards} shards, numbered 0 to {}",
                ctx.name,
                shards.saturating_sub(1)
            )));
        }
        Moved::ElectionsOff => {
            return Err(Failure::rejected(format!(
                "refused, nothing was written: elections are off for the sharded election {}, \
                 so no member acquires or hands over a shard; run {} first, then {}",
                ctx.name,
                ctx.suggest(&["config", "set", "--sharded", "--elections", "on"]),
                retry,
            )));
        }
        Moved::Unknown => return Err(unknown_member(ctx, "--to", to)),
        Moved::Fenced => {
            return Err(Failure::rejected(format!(
                "--to {to}: that member is fenced out (its epoch ended: it left or was taken \
                 over) and owns nothing until it joins again under a new id; choose a live \
                 member from {}",
                ctx.suggest(&["shards", "status"])
            )));
        }
        Moved::Drained => {
            return Err(Failure::rejected(format!(
                "--to {to}: that member is drained (placement gives it weight 0); run {} first, \
                 or choose another member",
                ctx.suggest(&["shards", "undrain", "--member", to.as_str()])
            )));
        }
        Moved::Weightless => {
            return Err(Failure::rejected(format!(
                "--to {to}: that member runs with weight 0 (it drained itself) and takes no \
                 shard: the coordinator would withdraw the move; choose a member of weight \
                 above 0 from {}",
                ctx.suggest(&["shards", "status"])
            )));
        }
        Moved::NotFrozen => {
            return Err(Failure::rejected(format!(
                "refused: placement is not frozen, and the coordinator, which keeps the shard \
                 counts balanced, would move shard {n} back; run {} first, then {} (and {} when \
                 done: the coordinator then restores balance)",
                ctx.suggest(&["shards", "freeze"]),
                retry,
                ctx.suggest(&["shards", "unfreeze"]),
            )));
        }
    };
    let next = ballot.saturating_add(1);
    let text = match outcome {
        ShardMove::Requested { from } => format!(
            "move requested: {from}, which owns shard {n} at ballot {ballot}, stops the shard's \
             work (at most the handover grace) and hands it over to {to}, which acquires it at \
             ballot {next}; placement stays frozen until {}",
            ctx.suggest(&["shards", "unfreeze"])
        ),
        ShardMove::Reserved => format!(
            "shard {n} was held by no live member: reserved for {to}, which acquires it at its \
             next heartbeat, at ballot {next}"
        ),
        ShardMove::AlreadyThere => format!(
            "shard {n} already belongs to {to}, or is reserved for it: nothing to move (a move \
             of it toward another member, if any, is withdrawn)"
        ),
        _ => format!("shard {n}: moved toward {to}"),
    };
    output::line(&text)
}

/// `FLAG ID`: no member of that id.
fn unknown_member(ctx: &Ctx, flag: &str, id: &CandidateId) -> Failure {
    Failure::rejected(format!(
        "{flag} {id}: no member of that id in the sharded election {} (member ids are random \
         per start; copy one from {})",
        ctx.name,
        ctx.suggest(&["shards", "status"])
    ))
}
