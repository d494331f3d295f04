//! `status`: the election as one observation shows it.

mod observed;
mod show;

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::{CandidateInfo, ElectionConfig, ElectionError, LeaderRecord};

use crate::exit::Failure;
use crate::output;
use crate::store::{Ctx, Retry, once};
use show::{Notes, to_json, to_text};

/// The single election as `status` found it, and whether a sharded election of the same name
/// exists beside it.
struct Found {
    config: ElectionConfig,
    record: LeaderRecord,
    candidates: Vec<CandidateInfo>,
    notes: Notes,
    sharded: bool,
}

/// `status`. For a name whose only election is a sharded one (`run --shards`), the placement
/// as `shards status` shows it; with both, the single election and a line pointing to
/// `shards status`.
pub(crate) async fn status<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    as_json: bool,
) -> Result<(), Failure> {
    let (election, sharded) = (ctx.election.clone(), ctx.sharded.clone());
    let found = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, sharded) = (election.clone(), sharded.clone());
        async move {
            let has_sharded = match sharded.layout(&txn).await {
                Ok(_) => true,
                Err(ElectionError::NotInitialized) => false,
                Err(e) => return Err(e),
            };
            let (config, record, candidates, marks, refusal) = tokio::join!(
                election.read_config(&txn),
                election.leader_record(&txn),
                election.list_candidates(&txn),
                election.eligibility_marks(&txn),
                election.resign_refusal(&txn)
            );
            let config = match config {
                // Only a sharded election of that name.
                Err(ElectionError::NotInitialized) if has_sharded => return Ok(None),
                config => config?,
            };
            Ok(Some(Found {
                config,
                record: record?,
                candidates: candidates?,
                notes: Notes {
                    marks: marks?.into_iter().collect(),
                    refusal: refusal?,
                },
                sharded: has_sharded,
            }))
        }
    })
    .await?;
    let Some(Found {
        config,
        record,
        candidates,
        notes,
        sharded,
    }) = found
    else {
        let shards = ctx.clone().for_shards();
        tracing::info!(
            "{} has no single election named {}: showing the sharded election of that name \
             (as {} does)",
            ctx.location,
            ctx.name,
            shards.suggest(shards.status_command()),
        );
        return crate::shards::status(db, &shards, as_json).await;
    };
    if as_json {
        output::line(&to_json(ctx, &config, &record, &candidates, &notes).to_string())
    } else {
        let mut text = to_text(ctx, &config, &record, &candidates, &notes);
        if sharded {
            let shards = ctx.clone().for_shards();
            text.push_str(&format!(
                "\n\nsharded    a sharded election of this name exists too: {}",
                shards.suggest(shards.status_command())
            ));
        }
        output::line(&text)
    }
}
