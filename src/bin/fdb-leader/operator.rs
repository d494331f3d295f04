//! The operator overrides: `resign` (a cooperative request) and `force-vacate` (fences the
//! leader out at once).

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::{Ballot, CandidateId, ElectionError, OperatorOutcome, ResignRejected};

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

/// `resign --expected-ballot B [--to NAME]`.
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
                            return Ok(Err(reason));
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
    .map_err(|reason| {
        Failure::rejected(format!(
            "--to {}: refused, nothing was written: {reason}; see the candidates, their \
             eligibility and liveness in {}",
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
                Some(name) => format!(
                    "the live eligible candidate named {name} (if none is there when the \
                     leader reads the request, it keeps leading and `status` says why)"
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
