//! The operator overrides: `resign` (a cooperative request) and `force-vacate` (fences the
//! leader out at once).

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::{
    Ballot, CandidateId, ElectionError, MAX_REASON_BYTES, OperatorOutcome, ResignRejected,
    VersionPolicy,
};

use crate::cli::EligibleArgs;
use crate::durations::show;
use crate::exit::{Failure, chain};
use crate::output;
use crate::store::{Ctx, Retry, once};

/// The id the overrides write as their author: a fresh one per invocation.
fn operator_id() -> Result<CandidateId, Failure> {
    CandidateId::random("operator").map_err(|e| Failure::store(chain(&e)))
}

/// Why an override was rejected, in words.
fn rejected(ctx: &Ctx, r: &ResignRejected) -> String {
    match r {
        ResignRejected::BallotMismatch { expected, current } => format!(
            "rejected: the election is at ballot {current}, not {expected} (see {})",
            ctx.suggest(&["status"])
        ),
        ResignRejected::NotLeader { .. } => {
            "rejected: no leader holds the ballot (the election is vacant)".to_owned()
        }
        _ => "rejected by the election".to_owned(),
    }
}

/// The reason an `eligible NAME false` without `--reason` gives.
const DEFAULT_REASON: &str = "excluded by an operator";

/// Why `eligible` refused, before anything was written.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EligibleRefused {
    /// `--reason` with `true`.
    #[error(
        "--reason is for `false` (it says why the candidate is excluded); `true` lifts the mark: \
         {suggest} (nothing was changed)"
    )]
    ReasonWithTrue { suggest: String },
    /// A candidate's id rather than its name.
    #[error(
        "{given} is a candidate's id; marks are by its name, {name}, which its restarts keep: \
         {suggest} (nothing was changed)"
    )]
    IdGiven {
        given: String,
        name: String,
        suggest: String,
    },
    /// An empty name.
    #[error("NAME is empty: give a candidate's name as `status` lists it (nothing was changed)")]
    EmptyName,
    /// A reason past the limit.
    #[error("--reason is {len} bytes, more than {max}: shorten it (nothing was changed)")]
    ReasonTooLong { len: usize, max: usize },
}

/// Checks `eligible`'s arguments; the reason to write (`None`: lift the mark).
fn eligible_mark(ctx: &Ctx, args: &EligibleArgs) -> Result<Option<String>, EligibleRefused> {
    let name = args.name.as_str();
    if name.is_empty() {
        return Err(EligibleRefused::EmptyName);
    }
    if let Ok(id) = CandidateId::parse(name) {
        if id.name() != name {
            let fixed = id.name().to_owned();
            let mut words = vec![
                "eligible",
                fixed.as_str(),
                if args.eligible { "true" } else { "false" },
            ];
            if let Some(reason) = &args.reason {
                words.extend(["--reason", reason.as_str()]);
            }
            return Err(EligibleRefused::IdGiven {
                given: name.to_owned(),
                suggest: ctx.suggest(&words),
                name: fixed,
            });
        }
    }
    if args.eligible {
        if args.reason.is_some() {
            return Err(EligibleRefused::ReasonWithTrue {
                suggest: ctx.suggest(&["eligible", name, "true"]),
            });
        }
        return Ok(None);
    }
    let reason = args
        .reason
        .clone()
        .unwrap_or_else(|| DEFAULT_REASON.to_owned());
    if reason.len() > MAX_REASON_BYTES {
        return Err(EligibleRefused::ReasonTooLong {
            len: reason.len(),
            max: MAX_REASON_BYTES,
        });
    }
    Ok(Some(reason))
}

/// `eligible NAME true|false [--reason TEXT]`.
pub(crate) async fn eligible<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    args: &EligibleArgs,
) -> Result<(), Failure> {
    let mark = eligible_mark(ctx, args).map_err(|e| Failure::usage(e.to_string()))?;
    let election = ctx.election.clone();
    let name = args.name.clone();
    let (before, candidates, record) = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, name, mark) = (election.clone(), name.clone(), mark.clone());
        async move {
            let before = election
                .set_eligible(&txn, &name, mark.is_none(), mark.as_deref().unwrap_or(""))
                .await?;
            let (candidates, record) =
                tokio::join!(election.list_candidates(&txn), election.leader_record(&txn));
            Ok((before, candidates?, record?))
        }
    })
    .await?;
    let name = args.name.as_str();
    let registered: Vec<_> = candidates.iter().filter(|c| c.id.name() == name).collect();
    let leads = record.owner().is_some_and(|o| o.id().name() == name);
    let message = match (args.eligible, before.is_eligible()) {
        (true, true) => format!("{name} was not excluded: nothing changed"),
        (true, false) => format!("{name} may lead again (the mark is lifted)"),
        (false, _) => {
            let reason = args.reason.as_deref().unwrap_or(DEFAULT_REASON);
            let what = if leads {
                "; it leads now, and hands over to the best live eligible candidate at its next \
                 cycle"
            } else {
                "; it does not campaign"
            };
            format!(
                "{name} is excluded from leading ({reason}), across its restarts{what} (lift it \
                 with {})",
                ctx.suggest(&["eligible", name, "true"])
            )
        }
    };
    if registered.is_empty() {
        tracing::warn!(
            "no candidate named {name} is registered now: the mark applies to any that \
             registers under that name (see {})",
            ctx.suggest(&["status"])
        );
    }
    output::line(&message)
}

/// Whom `resign --to` names, in words: a candidate's id (that one) or a name (the best of it).
fn directed_to(to: &str) -> String {
    match CandidateId::parse(to) {
        Ok(id) if id.name() != to => format!("{to} (the id given)"),
        _ => format!("named {to}"),
    }
}

/// `resign --expected-ballot B [--to NAME|ID]`.
pub(crate) async fn resign<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    expected: u64,
    to: Option<&str>,
) -> Result<(), Failure> {
    let operator = operator_id()?;
    let election = ctx.election.clone();
    let expected = Ballot::new(expected);
    let target = to.map(str::to_owned);
    // Writing the same request twice is harmless: retry freely.
    let (config, record, outcome) = once(db, ctx, Retry::Idempotent, move |txn| {
        let (election, operator, target) = (election.clone(), operator.clone(), target.clone());
        async move {
            let (config, record) =
                tokio::join!(election.read_config(&txn), election.leader_record(&txn));
            let (config, record) = (config?, record?);
            let outcome = match target.as_deref() {
                Some(to) => {
                    match election
                        .request_resign_to(&txn, &operator, expected, to)
                        .await
                    {
                        Err(ElectionError::OperatorRefused { reason }) => {
                            return Ok(Err((reason, config.version_policy())));
                        }
                        other => other?,
                    }
                }
                None => election.request_resign(&txn, &operator, expected).await?,
            };
            Ok(Ok((config, record, outcome)))
        }
    })
    .await?
    .map_err(|(reason, policy)| {
        // Under a version policy, the way to name an older version anyway.
        let policy = if policy == VersionPolicy::Ignore {
            String::new()
        } else {
            format!(
                "; to let versions play no part, change the policy first with {}",
                ctx.suggest(&["config", "set", "--version-policy", "ignore"])
            )
        };
        Failure::rejected(format!(
            "--to {}: refused, nothing was written: {reason}; see the candidates, their \
             eligibility, liveness and standing under the version policy in {}{policy}",
            to.unwrap_or_default(),
            ctx.suggest(&["status"])
        ))
    })?;
    match outcome {
        OperatorOutcome::Done { ballot } => {
            let leader = record
                .owner()
                .map_or_else(|| "?".to_owned(), |o| o.id().to_string());
            let heir = match to {
                Some(to) => format!(
                    "the live eligible candidate {} (if none is there when the leader reads \
                     the request, it keeps leading and `status` says why)",
                    directed_to(to)
                ),
                None => "the best live eligible candidate (with none, any eligible \
                         candidate may take it, the old leader too)"
                    .to_owned(),
            };
            output::line(&format!(
                "resign requested: leader {leader} (ballot {ballot}) steps down at its next cycle \
                 (within a heartbeat, {}, plus at most the handover grace, {}) and reserves the \
                 leadership for {heir}, which takes over in one commit",
                show(config.heartbeat_interval()),
                show(config.handover_grace()),
            ))
        }
        OperatorOutcome::Rejected(r) => Err(Failure::rejected(rejected(ctx, &r))),
        _ => Err(Failure::rejected(
            "rejected: the election did not accept the request",
        )),
    }
}

/// `force-vacate --expected-ballot B`.
pub(crate) async fn force_vacate<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    expected: u64,
) -> Result<(), Failure> {
    let operator = operator_id()?;
    let election = ctx.election.clone();
    let expected = Ballot::new(expected);
    // Applying it twice would fence a second ballot: never retry after an unknown result.
    let (record, outcome) = once(db, ctx, Retry::NotAfterUnknown, move |txn| {
        let (election, operator) = (election.clone(), operator.clone());
        async move {
            let record = election.leader_record(&txn).await?;
            let outcome = election.force_vacate(&txn, &operator, expected).await?;
            Ok((record, outcome))
        }
    })
    .await?;
    match outcome {
        OperatorOutcome::Done { ballot } => {
            let old = record
                .owner()
                .map_or_else(|| "no leader".to_owned(), |o| format!("leader {}", o.id()));
            output::line(&format!(
                "vacated: ballot {expected} ({old}) is fenced; the election is at ballot {ballot}, \
                 held by this operator: no candidate takes over before one lease (at least {}) \
                 of no change",
                show(record.lease_duration()),
            ))
        }
        OperatorOutcome::Rejected(r) => Err(Failure::rejected(rejected(ctx, &r))),
        _ => Err(Failure::rejected(
            "rejected: the election did not accept the request",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::StoreChoice;

    fn args(name: &str, eligible: bool, reason: Option<&str>) -> EligibleArgs {
        EligibleArgs {
            name: name.to_owned(),
            eligible,
            reason: reason.map(str::to_owned),
        }
    }

    #[test]
    fn eligible_refuses_what_it_cannot_mean_naming_the_fix() {
        let ctx = Ctx::new("jobs", &StoreChoice::Memory);
        let ok = |a: &EligibleArgs| eligible_mark(&ctx, a);
        assert_eq!(
            ok(&args("db-3", false, None)),
            Ok(Some(DEFAULT_REASON.to_owned()))
        );
        assert_eq!(
            ok(&args("db-3", false, Some("disk"))),
            Ok(Some("disk".to_owned()))
        );
        assert_eq!(ok(&args("db-3", true, None)), Ok(None));
        let refused = |a: &EligibleArgs| ok(a).err().map(|e| e.to_string()).unwrap_or_default();
        let m = refused(&args("db-3", true, Some("x")));
        assert!(
            m.starts_with("--reason is for `false`") && m.contains("eligible db-3 true`"),
            "{m}"
        );
        let m = refused(&args("db-3-00000000c0ffee00", false, Some("disk x")));
        assert!(
            m.contains("marks are by its name, db-3,")
                && m.contains("eligible db-3 false --reason 'disk x'`"),
            "{m}"
        );
        assert!(refused(&args("", false, None)).starts_with("NAME is empty"));
        let long = "x".repeat(MAX_REASON_BYTES + 1);
        assert!(
            refused(&args("a", false, Some(&long)))
                .starts_with("--reason is 257 bytes, more than 256")
        );
    }
}
