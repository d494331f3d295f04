//! `config get` and `config set`, and how a configuration is shown.

pub(crate) mod settings;

use std::time::Duration;

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::shard::Layout;
use fdb_leader_election::{ElectionConfig, ElectionError};
use serde_json::{Value, json};

use crate::cli::{ConfigSetArgs, MAX_CONCURRENT_MOVES, MAX_RUN_SHARDS};
use crate::durations::{millis_json, show};
use crate::exit::Failure;
use crate::output::{self, on_off};
use crate::store::{Ctx, Kind, Retry, once};
use settings::{for_a_new_election, over, precheck, refusal};

/// The configuration as aligned `name value` lines.
pub(crate) fn text(c: &ElectionConfig) -> String {
    let rows = [
        ("lease", show(c.lease_duration())),
        ("heartbeat", show(c.heartbeat_interval())),
        ("candidate-timeout", show(c.candidate_timeout())),
        ("elections", on_off(c.election_enabled()).to_owned()),
        ("preemption", on_off(c.allow_preemption()).to_owned()),
        (
            "max-clock-rate-error-ppm",
            c.max_clock_rate_error_ppm().to_string(),
        ),
        ("min-tenure", show(c.min_tenure())),
        ("handover-grace", show(c.handover_grace())),
        ("takeover-stagger", show(c.takeover_stagger())),
        ("transaction-timeout", show(c.transaction_timeout())),
        ("reservation-timeout", show(c.reservation_timeout())),
        ("version-policy", c.version_policy().to_string()),
    ];
    rows.iter()
        .map(|(k, v)| format!("{k:<25} {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The configuration as JSON, durations in milliseconds.
pub(crate) fn json(c: &ElectionConfig) -> Value {
    json!({
        "lease_ms": millis_json(c.lease_duration()),
        "heartbeat_ms": millis_json(c.heartbeat_interval()),
        "candidate_timeout_ms": millis_json(c.candidate_timeout()),
        "elections": c.election_enabled(),
        "preemption": c.allow_preemption(),
        "max_clock_rate_error_ppm": c.max_clock_rate_error_ppm(),
        "min_tenure_ms": millis_json(c.min_tenure()),
        "handover_grace_ms": millis_json(c.handover_grace()),
        "takeover_stagger_ms": millis_json(c.takeover_stagger()),
        "transaction_timeout_ms": millis_json(c.transaction_timeout()),
        "reservation_timeout_ms": millis_json(c.reservation_timeout()),
        "version_policy": c.version_policy().as_str(),
    })
}

/// `config get`.
pub(crate) async fn get<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    as_json: bool,
) -> Result<(), Failure> {
    let (election, sharded) = (ctx.election.clone(), ctx.sharded.clone());
    let kind = ctx.kind;
    let config = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, sharded) = (election.clone(), sharded.clone());
        async move {
            match kind {
                Kind::Single => election.read_config(&txn).await,
                Kind::Sharded => sharded.read_config(&txn).await,
            }
        }
    })
    .await?;
    if as_json {
        output::line(&json(&config).to_string())
    } else {
        output::line(&text(&config))
    }
}

/// `config set`: starts from the stored configuration (if the election does not exist yet,
/// from the one `run` would create it with, and creates it).
pub(crate) async fn set<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    set: &ConfigSetArgs,
) -> Result<(), Failure> {
    precheck(ctx, set, false)?;
    // The configuration of a new election, used only if the election does not exist yet (a
    // new SQLite or in-memory store was checked before it was opened; an election on
    // FoundationDB is refused here, with the command that would work).
    let fresh = for_a_new_election(set);
    // A sharded election is created only with its shard count (its layout never changes).
    let layout = match set.shards {
        Some(count) => Some(
            Layout::new(count, MAX_CONCURRENT_MOVES)
                .map_err(|e| Failure::usage(format!("--shards {count}: {e}")))?,
        ),
        None => None,
    };
    let election = ctx.election.clone();
    let sharded = (ctx.kind == Kind::Sharded).then(|| ctx.sharded.clone());
    let outcome = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, sharded, fresh) = (election.clone(), sharded.clone(), fresh.clone());
        async move {
            let stored = match &sharded {
                Some(sharded) => sharded.read_config(&txn).await,
                None => election.read_config(&txn).await,
            };
            let (base, new, exists) = match stored {
                Ok(base) => match over(&base, set) {
                    Ok(new) => (base, new, true),
                    Err(e) => return Ok(Err((base, e))),
                },
                Err(ElectionError::NotInitialized) => match &fresh {
                    Ok(new) => (ElectionConfig::default(), new.clone(), false),
                    Err(e) => return Ok(Err((ElectionConfig::default(), e.clone()))),
                },
                Err(e) => return Err(e),
            };
            // The stored shard count, when --shards asked for another (warned of once the
            // transaction is over: an attempt may run more than once).
            let mut other_shards = None;
            match (&sharded, exists) {
                (Some(sharded), false) => {
                    // No sharded election without its layout: "no sharded election".
                    let layout = layout.ok_or(ElectionError::NotInitialized)?;
                    sharded.initialize(&txn, &new, &layout).await?;
                }
                (Some(sharded), true) => {
                    if let Some(wanted) = layout {
                        let stored = sharded.layout(&txn).await?;
                        if stored.shards() != wanted.shards() {
                            other_shards = Some(stored.shards());
                        }
                    }
                    if new != base {
                        sharded.write_config(&txn, &new).await?;
                    }
                }
                (None, _) if new != base => election.write_config(&txn, &new).await?,
                // Creates the election if needed; never changes an existing one.
                (None, _) => election.initialize_with_config(&txn, &new).await?,
            }
            Ok(Ok((base, new, !exists, other_shards)))
        }
    })
    .await?;
    let (base, new, created, other_shards) =
        outcome.map_err(|(stored, e)| refusal(ctx, &stored, set, &e, "changed"))?;
    if let (Some(lease), false) = (set.lease, created) {
        // The timings the lease derives (those not given), with what each was and is.
        type C = ElectionConfig;
        let derived: Vec<String> = [
            (
                "heartbeat",
                set.heartbeat,
                C::heartbeat_interval as fn(&C) -> Duration,
            ),
            (
                "candidate-timeout",
                set.candidate_timeout,
                C::candidate_timeout,
            ),
            (
                "transaction-timeout",
                set.transaction_timeout,
                C::transaction_timeout,
            ),
            (
                "takeover-stagger",
                set.takeover_stagger,
                C::takeover_stagger,
            ),
            ("handover-grace", set.handover_grace, C::handover_grace),
            (
                "reservation-timeout",
                set.reservation_timeout,
                C::reservation_timeout,
            ),
        ]
        .into_iter()
        .filter(|(_, given, of)| given.is_none() && of(&base) != of(&new))
        .map(|(name, _, of)| format!("{name} {} (was {})", show(of(&new)), show(of(&base))))
        .collect();
        if !derived.is_empty() {
            tracing::info!(
                "--lease {}: derived from it, as `run` derives them: {}",
                show(lease),
                derived.join(", ")
            );
        }
    }
    if let (Some(stored), Some(wanted)) = (other_shards, set.shards) {
        tracing::warn!(
            "the sharded election already exists with {stored} shards: --shards {wanted} \
             changes nothing (a sharded election's shard count never changes)"
        );
    }
    if created {
        match ctx.kind {
            Kind::Single => {
                tracing::info!(election = %ctx.name, "election created with this configuration")
            }
            Kind::Sharded => {
                let shards = set.shards.unwrap_or(0);
                tracing::info!(election = %ctx.name, shards, "sharded election created with this configuration");
                if shards > MAX_RUN_SHARDS {
                    tracing::warn!(
                        "run --shards refuses to join it: it supervises at most {MAX_RUN_SHARDS} \
                         shards (a child and a watchdog each); serve this election with \
                         ShardedRunners in the service itself"
                    );
                }
            }
        }
    } else if base == new {
        tracing::info!(election = %ctx.name, "the configuration already had these settings");
    } else {
        match ctx.kind {
            Kind::Single => {
                tracing::info!(election = %ctx.name, "configuration written; leaders use it from their next renewal")
            }
            Kind::Sharded => {
                tracing::info!(election = %ctx.name, "configuration of the sharded election written; members and coordinators use it from their next cycle")
            }
        }
    }
    if ctx.kind == Kind::Sharded && !new.election_enabled() && (created || base.election_enabled())
    {
        tracing::info!(election = %ctx.name, "elections off: every member gives its shards back (each once its work has stopped, at most the handover grace) and acquires none; the coordinator places nothing and still fences out members that stop renewing, so no dead member keeps a shard");
    }
    output::line(&text(&new))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    #[test]
    fn shows_every_field() {
        let c = ElectionConfig::default();
        let t = text(&c);
        assert!(t.contains("lease                     10s"), "{t}");
        assert!(t.contains("preemption                on"), "{t}");
        let j = json(&c);
        assert_eq!(j["lease_ms"], json!(10_000));
        assert_eq!(j["elections"], json!(true));
        assert!(t.contains("version-policy            ignore"), "{t}");
        assert_eq!(j["version_policy"], json!("ignore"));
        assert_eq!(j.as_object().map(serde_json::Map::len), Some(12));
    }
}
