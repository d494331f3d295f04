//! The incarnation's transactions: the retry loop with its attempt bound, the log entries of a
//! cycle and an acquisition, the planted rogue takeover, a resignation's entry, and the guarded
//! work.

use std::future::Future;

use fdb_leader_election::{
    Action, Ballot, ElectionConfig, ElectionError, ElectionTxn, LeaderRecord, ReadMode,
};
use foundationdb::options::TransactionOption;
use foundationdb::{Database, FdbBindingError, RetryableTransaction};
use foundationdb_simulation::Severity;

use super::{Role, Setup};
use crate::log::{self, Entry, Prior, Row};
use crate::options::Plant;
use crate::sim::Sim;
use crate::tester::Shared;

/// The attempt's bound: the configuration's transaction timeout, as the tokio runner's.
pub(crate) fn timeout_of(config: &ElectionConfig) -> i32 {
    i32::try_from(config.transaction_timeout().as_millis()).unwrap_or(i32::MAX)
}

/// Runs `f` through FoundationDB's retry loop, each attempt bounded by `timeout_ms` (a commit
/// that times out is `transaction_timed_out`, its result unknown), counting the attempts run
/// again after an unknown commit result.
pub(crate) async fn run<T, F, Fut>(
    db: &Database,
    _sim: &Sim,
    tester: &Shared,
    timeout_ms: i32,
    f: F,
) -> Result<T, ElectionError>
where
    F: Fn(RetryableTransaction) -> Fut,
    Fut: Future<Output = Result<T, FdbBindingError>>,
{
    let result = db
        .run(|trx, maybe_committed| {
            if maybe_committed.into() {
                tester.borrow_mut().stats.unknown_commits += 1;
            }
            let set = trx.set_option(TransactionOption::Timeout(timeout_ms));
            let attempt = f(trx);
            async move {
                set?;
                attempt.await
            }
        })
        .await
        .map_err(fdb_leader_election::fdb::election_error);
    if let Err(ElectionError::Database(e)) = &result {
        // The attempt's bound passed (transaction_timed_out): its commit, if it had begun,
        // may have applied. A commit_unknown_result returned (not retried) counts as one.
        match e.code() {
            Some(1031) => tester.borrow_mut().stats.timeouts += 1,
            Some(1021) => tester.borrow_mut().stats.unknown_commits += 1,
            _ => {}
        }
    }
    result
}

/// Logs what a committed cycle did, in its own transaction: its heartbeat, and an acquisition
/// (with the registry it read) or a vacancy it wrote over its own leadership.
pub(super) async fn record_cycle(
    s: &Setup,
    trx: &RetryableTransaction,
    cycle: &fdb_leader_election::Cycle,
    prior: &LeaderRecord,
    started_at: f64,
) -> Result<(), FdbBindingError> {
    let me = s.candidate.id().to_string();
    let mut entries = Vec::new();
    if let Some(reg) = s.election.get_candidate(trx, s.candidate.id()).await? {
        entries.push(Entry::Heartbeat {
            candidate: me.clone(),
            heartbeat: reg.heartbeat(),
            started_at,
        });
    }
    let record = cycle.record();
    match cycle.action() {
        Action::Acquired => {
            entries.push(acquisition(s, trx, record.ballot().get(), prior).await?);
        }
        Action::HandedOver
        | Action::Resigned
        | Action::SteppedDown
        | Action::SteppedDownIneligible => entries.push(Entry::Vacancy {
            ballot: record.ballot().get(),
            by: me,
            reserved_for: record.reservation().map(|r| r.id().to_string()),
            why: format!("{:?}", cycle.action()),
        }),
        _ => {}
    }
    log::append(trx, &entries);
    Ok(())
}

/// The log entry of an acquisition of `ballot` over `prior`, with the registry this
/// transaction reads (snapshot reads: no conflict added).
pub(crate) async fn acquisition(
    s: &Setup,
    trx: &RetryableTransaction,
    ballot: u64,
    prior: &LeaderRecord,
) -> Result<Entry, FdbBindingError> {
    let config = s.election.read_config(trx).await?;
    let rows = s.election.list_candidates(trx).await?;
    Ok(Entry::Acquired {
        ballot,
        candidate: s.candidate.id().to_string(),
        version: s.candidate.version().map(|v| v.to_string()),
        prior: Prior {
            ballot: prior.ballot().get(),
            owner: prior.owner().map(|o| o.id().to_string()),
            reservation: prior.reservation().map(|r| r.id().to_string()),
            leader_version: prior.leader_version().map(ToString::to_string),
        },
        decided_at: s.sim.now(),
        policy: config.version_policy().to_string(),
        reservation_timeout: config.reservation_timeout().as_secs_f64(),
        heartbeat: config.heartbeat_interval().as_secs_f64(),
        rho_ppm: config.max_clock_rate_error_ppm(),
        registry: rows
            .into_iter()
            .map(|c| Row {
                id: c.id.to_string(),
                version: c.record.version().map(ToString::to_string),
                eligible: c.record.is_eligible(),
                live: c.live,
                heartbeat: c.record.heartbeat(),
            })
            .collect(),
    })
}

/// Plant `takeover-ignores-rank`: a follower whose cycle did nothing, over a record owned by
/// another that it has seen unchanged for that record's full lease on its own clock, writes a
/// takeover record (ballot + 1, itself the owner) and its fence in the same transaction, by
/// the library's raw encoding, whatever its rank; and logs it as the acquisition it is. It
/// does not believe it leads (it adopts nothing): only who took over is wrong.
pub(super) async fn rogue_takeover(
    s: &Setup,
    trx: &RetryableTransaction,
    cycle: &fdb_leader_election::Cycle,
) -> Result<(), FdbBindingError> {
    let record = cycle.record();
    let now = s.candidate.now();
    let id = (record.ballot().get(), record.renewal());
    let other = record.owner().is_some_and(|o| o.id() != s.candidate.id());
    if cycle.action() != Action::None || !other || s.candidate.leadership().is_some() {
        *s.seen.borrow_mut() = None;
        return Ok(());
    }
    let first = {
        let mut seen = s.seen.borrow_mut();
        match *seen {
            Some((i, first)) if i == id => first,
            _ => {
                *seen = Some((id, now));
                return Ok(());
            }
        }
    };
    if now < first.saturating_add(record.lease_duration()) {
        return Ok(());
    }
    let ballot = record.ballot().next()?;
    let takeover = fdb_leader_election::raw::owned_record(
        ballot,
        s.candidate.id(),
        s.candidate.priority(),
        record.renewal().saturating_add(1),
        record.lease_duration(),
        1 << 48,
    )?;
    trx.add_read_conflict_key(s.election.leader_key())
        .map_err(ElectionError::Database)?;
    trx.set(
        s.election.leader_key(),
        &fdb_leader_election::raw::encode_leader(&takeover)?,
    );
    trx.set(
        s.election.fence_key(),
        &fdb_leader_election::raw::fence_record(ballot, false)?,
    );
    let entry = acquisition(s, trx, ballot.get(), record).await?;
    // After the cycle's own entries (at most two).
    log::append_at(trx, 2, &[entry]);
    s.tester.borrow_mut().stats.rogue_takeovers += 1;
    *s.seen.borrow_mut() = None;
    Ok(())
}

/// Logs a resignation's vacancy; under the plant `ballot-reset`, rewrites it at ballot 0.
pub(super) async fn resigned(
    s: &Setup,
    trx: &RetryableTransaction,
    ballot: Ballot,
    reserved_for: Option<&fdb_leader_election::Named>,
    why: &str,
) -> Result<(), FdbBindingError> {
    let mut reset = false;
    if s.plant == Some(Plant::BallotReset) {
        let record = fdb_leader_election::raw::vacancy_record(
            Ballot::new(0),
            0,
            s.init_config.lease_duration(),
            None,
            (s.candidate.id(), 0),
        )?;
        trx.set(
            s.election.leader_key(),
            &fdb_leader_election::raw::encode_leader(&record)?,
        );
        trx.set(
            s.election.fence_key(),
            &fdb_leader_election::raw::fence_record(Ballot::new(0), true)?,
        );
        reset = true;
    }
    log::append(
        trx,
        &[Entry::Vacancy {
            ballot: if reset { 0 } else { ballot.get() },
            by: s.candidate.id().to_string(),
            reserved_for: reserved_for.map(|r| r.id().to_string()),
            why: why.to_owned(),
        }],
    );
    Ok(())
}

/// One piece of guarded work: in one transaction, the fence (unless planted away), a read of
/// the counter, the counter plus one, and its log entry; or, for a coordinator, one step of
/// placement.
pub(super) async fn work(s: Setup, token: Ballot) {
    if let Role::Coordinator(both) = &s.role {
        let timeout = timeout_of(&s.init_config);
        let (e, c) = (both.0.clone(), both.1.clone());
        let done = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
            let (e, c) = (e.clone(), c.clone());
            async move { Ok(e.coordinate(&trx, &c, token).await?) }
        })
        .await;
        match done {
            Ok(c) => {
                s.tester.borrow_mut().stats.fenced_writes += 1;
                s.sim.trace(
                    Severity::Info,
                    "LeaderElectionCoordinated",
                    &[
                        ("Ballot".into(), token.get().to_string()),
                        ("Fenced".into(), c.fenced.len().to_string()),
                        ("ShardsWritten".into(), c.shards_written.to_string()),
                    ],
                );
            }
            Err(e) => {
                s.tester.borrow_mut().stats.fenced_rejected += 1;
                s.sim.trace(
                    Severity::Info,
                    "LeaderElectionCoordinateFailed",
                    &[("Error".into(), format!("{e:?}"))],
                );
            }
        }
        return;
    }
    let fenced = s.plant != Some(Plant::UnfencedWork);
    let timeout = timeout_of(&s.init_config);
    let result = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
        let s = s.clone();
        async move {
            if fenced {
                s.election.fence(&trx, token).await?;
            }
            let key = log::counter_key();
            let current = ElectionTxn::get(&trx, &key, ReadMode::Serializable)
                .await?
                .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
                .map_or(0, u64::from_le_bytes);
            let next = current.saturating_add(1);
            ElectionTxn::set(&trx, &key, &next.to_le_bytes());
            log::append(
                &trx,
                &[Entry::Work {
                    ballot: token.get(),
                    candidate: s.candidate.id().to_string(),
                    counter: next,
                }],
            );
            Ok(())
        }
    })
    .await;
    match result {
        Ok(()) => s.tester.borrow_mut().stats.fenced_writes += 1,
        Err(e) => {
            s.tester.borrow_mut().stats.fenced_rejected += 1;
            s.sim.trace(
                Severity::Info,
                "LeaderElectionWorkFailed",
                &[
                    ("Candidate".into(), s.candidate.id().to_string()),
                    ("Ballot".into(), token.get().to_string()),
                    ("Error".into(), format!("{e:?}")),
                ],
            );
        }
    }
}
