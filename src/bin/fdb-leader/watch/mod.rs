//! `watch`: one line per leader change, from an observer runner, until interrupted.

mod lines;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use fdb_leader_election::runner::{ElectionDatabase, Runner};
use fdb_leader_election::{ElectionError, Eligibility, Version};
use tokio::sync::broadcast::error::RecvError;

use crate::cli::WatchArgs;
use crate::exit::{Failure, chain};
use crate::signals::Signals;
use crate::store::{Ctx, until_done};
use lines::{EligibilityLine, Line, PolicyLine, Printed, VersionLine};

/// What `watch` last printed of each candidate, by id: its eligibility, its version, and
/// whether the version policy lets it lead.
type Seen = BTreeMap<String, (Eligibility, Option<Version>, bool)>;

/// Reads the registry and prints each candidate whose eligibility changed since `seen` (at
/// the first read, each one that is not eligible), each whose version is new or changed
/// (at the first read, each one that registered a version), and each whose standing under
/// the version policy changed (at the first read, each one the policy does not let lead). A
/// failed read is skipped: the next one reports what changed.
async fn candidate_changes<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    seen: &mut Option<Seen>,
    as_json: bool,
) -> Result<(), Failure> {
    let election = ctx.election.clone();
    let listed = db
        .transact(LIST_TIMEOUT, move |txn| {
            let election = election.clone();
            async move { election.list_candidates(&txn).await }
        })
        .await;
    let candidates = match listed {
        Ok(candidates) => candidates,
        Err(e) => {
            tracing::debug!(error = %chain(&e), "could not read the candidates");
            return Ok(());
        }
    };
    let now: Seen = candidates
        .into_iter()
        .map(|c| {
            (
                c.id.to_string(),
                (
                    c.record.eligibility().clone(),
                    c.record.version().cloned(),
                    c.policy_allows,
                ),
            )
        })
        .collect();
    for (id, (e, v, allows)) in &now {
        let before = seen.as_ref().and_then(|s| s.get(id));
        let eligibility_changed = match before {
            None => !e.is_eligible(),
            Some((b, _, _)) => b != e,
        };
        if eligibility_changed {
            EligibilityLine {
                candidate: id,
                eligibility: e,
            }
            .print(as_json)?;
        }
        let version_changed = match before {
            None => v.is_some(),
            Some((_, b, _)) => b != v,
        };
        if version_changed {
            VersionLine {
                candidate: id,
                version: v.as_ref(),
            }
            .print(as_json)?;
        }
        let policy_changed = match before {
            None => !allows,
            Some((_, _, b)) => b != allows,
        };
        if policy_changed {
            PolicyLine {
                candidate: id,
                allows: *allows,
            }
            .print(as_json)?;
        }
    }
    *seen = Some(now);
    Ok(())
}

/// The longest a registry read of `watch` may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// `watch`.
pub(crate) async fn watch<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    args: &WatchArgs,
    signals: &mut Signals,
) -> Result<ExitCode, Failure> {
    let as_json = args.json;
    // Refuse a corrupt election at once (the observer would retry forever), and one that does
    // not exist unless asked to wait for it. A store that does not answer yet is waited for,
    // as the observer would; a signal ends the wait.
    let election = ctx.election.clone();
    let exists = until_done(&db, ctx, move |txn| {
        let election = election.clone();
        async move {
            let (config, record) =
                tokio::join!(election.read_config(&txn), election.leader_record(&txn));
            match record.and(config) {
                Ok(config) => Ok(Some(config.heartbeat_interval())),
                Err(ElectionError::NotInitialized) => Ok(None),
                Err(e) => Err(e),
            }
        }
    });
    let heartbeat = tokio::select! {
        biased;
        stop = signals.recv() => return signals.stopped(stop, "before watching"),
        exists = exists => exists?,
    };
    if heartbeat.is_none() {
        if !args.wait {
            return Err(ctx.no_election());
        }
        tracing::info!(
            election = %ctx.name,
            store = %ctx.store,
            "no such election yet: waiting for a run or config set to create it (--wait)"
        );
    }
    let runner = Runner::observer(db.clone(), ctx.election.subspace().clone())
        .election_name(ctx.name.clone())
        .start()
        .map_err(|e| Failure::usage(chain(&e)))?;
    let mut changes = runner.subscribe();
    tracing::info!(election = %ctx.name, store = %ctx.store, "watching");
    // The candidates' eligibility and versions, read every heartbeat of the stored
    // configuration (every second for an election created later).
    let mut seen = None;
    let mut polls = tokio::time::interval(heartbeat.unwrap_or(Duration::from_secs(1)));
    polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        let change = tokio::select! {
            stop = signals.recv() => break signals.stopped(stop, "watching"),
            change = changes.recv() => change,
            _ = polls.tick() => {
                if let Err(e) = candidate_changes(&db, ctx, &mut seen, as_json).await {
                    break Err(e);
                }
                continue;
            }
        };
        let printed = match change {
            Ok(change) => Line::of(&change).print(as_json),
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "fell behind; printing the current leader");
                let current = runner.leader();
                Line::resync(current.as_ref()).print(as_json)
            }
            Err(RecvError::Closed) => {
                break Err(Failure::store("the election observer stopped unexpectedly"));
            }
        };
        if let Err(e) = printed {
            break Err(e);
        }
    };
    runner.shutdown().await;
    result
}
