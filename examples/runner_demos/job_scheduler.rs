//! The job scheduler demo, for any [`ElectionDatabase`]: three scheduler instances; only the
//! leader assigns jobs, and each assignment commits in the same transaction as the fence, so
//! an assignment by a stale leader is rejected.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fdb_leader_election::runner::{ElectionDatabase, Runner};
use fdb_leader_election::{
    Ballot, ElectionConfig, ElectionError, ElectionTxn, LeaderElection, ReadMode,
};
use foundationdb_tuple::Subspace;

use crate::runner_demos::{DemoResult, label, say, wait_until};

const JOBS: u32 = 30;
const TIMEOUT: Duration = Duration::from_secs(1);

struct Keys {
    pending: Subspace,
    assigned: Subspace,
}

impl Keys {
    fn new(app: &Subspace) -> Self {
        Keys {
            pending: app.subspace(&("pending",)),
            assigned: app.subspace(&("assigned",)),
        }
    }
}

/// Assigns the next pending job, fenced by `token`: the transaction commits only while
/// `token` is the leading ballot. `None` when no job is left.
async fn assign_next<D: ElectionDatabase>(
    db: &D,
    election: &LeaderElection,
    keys: &Keys,
    token: Ballot,
    who: &str,
) -> Result<Option<u32>, ElectionError> {
    db.transact(TIMEOUT, |txn| async move {
        election.fence(&txn, token).await?;
        let (begin, end) = keys.pending.range();
        let next = txn.get_range(&begin, &end, ReadMode::Serializable).await?;
        let Some((key, _)) = next.into_iter().next() else {
            return Ok(None);
        };
        let (job,): (u32,) = keys
            .pending
            .unpack(&key)
            .map_err(|_| ElectionError::InvalidId {
                reason: "bad job key",
            })?;
        txn.clear(&key);
        let record = format!("{who} ballot {token}");
        txn.set(&keys.assigned.pack(&(job,)), record.as_bytes());
        Ok(Some(job))
    })
    .await
}

/// One scheduler instance: whenever elected, assign jobs under the guard.
async fn scheduler<D: ElectionDatabase>(db: D, runner: Runner, app: Subspace, start: Instant) {
    let who = runner.id().map(label).unwrap_or("?").to_owned();
    while let Some(guard) = runner.elected().await {
        say(
            start,
            format!("{who} elected (ballot {}): assigning jobs", guard.ballot()),
        );
        let (db, election, me) = (db.clone(), runner.election().clone(), who.clone());
        let token = guard.fencing_token();
        let keys = Keys::new(&app);
        let work = guard.spawn(async move {
            let mut done = 0u32;
            while let Ok(Some(_job)) = assign_next(&db, &election, &keys, token, &me).await {
                done = done.saturating_add(1);
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            done
        });
        match work.await {
            Ok(Some(n)) => say(
                start,
                format!("{who}: no job left ({n} assigned in this term)"),
            ),
            _ => say(start, format!("{who}: leadership ended, assigning stopped")),
        }
        guard.cancelled().await;
    }
}

async fn count<D: ElectionDatabase>(db: &D, space: &Subspace) -> DemoResult<Vec<(u32, String)>> {
    let (begin, end) = space.range();
    let rows = db
        .transact(TIMEOUT, |txn| {
            let (begin, end) = (begin.clone(), end.clone());
            async move { Ok(txn.get_range(&begin, &end, ReadMode::Snapshot).await?) }
        })
        .await?;
    let mut out = Vec::new();
    for (k, v) in rows {
        let (job,): (u32,) = space.unpack(&k)?;
        out.push((job, String::from_utf8(v)?));
    }
    Ok(out)
}

/// Runs the demo under `root`; fails if a job is lost or assigned twice, or if the stale
/// leader's assignment is accepted.
pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    root: Subspace,
    config: ElectionConfig,
) -> DemoResult {
    let start = Instant::now();
    let app = root.subspace(&("jobs",));
    let keys = Keys::new(&app);
    db.transact(TIMEOUT, |txn| {
        let pending = keys.pending.clone();
        async move {
            for job in 0..JOBS {
                txn.set(&pending.pack(&(job,)), b"");
            }
            Ok(())
        }
    })
    .await?;
    say(
        start,
        format!("{JOBS} jobs queued; starting 3 scheduler instances"),
    );

    let election_space = root.subspace(&("election",));
    let mut nodes = Vec::new();
    for name in ["sched-1", "sched-2", "sched-3"] {
        let runner = Runner::builder(db.clone(), election_space.clone())
            .label(name)
            .config(config.clone())
            .start()?;
        tokio::spawn(scheduler(db.clone(), runner.clone(), app.clone(), start));
        nodes.push(runner);
    }

    // Let the first leader assign a third of the jobs, then crash it.
    while count(&db, &keys.assigned).await?.len() < (JOBS / 3) as usize {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let crashed = nodes
        .iter()
        .position(|n| n.is_leader())
        .ok_or("no leader after a third of the jobs")?;
    let old = nodes[crashed].leadership().ok_or("lost the leader")?;
    let stale_token = old.fencing_token();
    let crashed_name = nodes[crashed].id().map(label).unwrap_or("?").to_owned();
    say(
        start,
        format!("{crashed_name} (ballot {stale_token}) crashes"),
    );
    nodes[crashed].abort();

    // A successor takes over after one lease.
    let others: Vec<Runner> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != crashed)
        .map(|(_, n)| n.clone())
        .collect();
    wait_until(
        "a successor leads",
        config.lease_duration().saturating_mul(4),
        || others.iter().any(Runner::is_leader),
    )
    .await?;
    let successor = others
        .iter()
        .find(|n| n.is_leader())
        .ok_or("the successor lost its leadership at once")?
        .clone();
    let new_token = successor
        .leadership()
        .map(|g| g.ballot())
        .ok_or("no successor")?;

    // The crashed leader had been paused, not killed: it wakes up and tries to assign with
    // its old ballot. The fence rejects the whole transaction.
    let election = successor.election().clone();
    match assign_next(&db, &election, &keys, stale_token, &crashed_name).await {
        Err(ElectionError::StaleToken { token, current, .. }) => say(
            start,
            format!(
                "{crashed_name} wakes up and assigns with ballot {token}: rejected (the election is at ballot {current})"
            ),
        ),
        other => return Err(format!("the stale assignment was not rejected: {other:?}").into()),
    }

    // Wait for the rest of the jobs.
    while count(&db, &keys.assigned).await?.len() < JOBS as usize {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let the leader find the queue empty, then shut everyone down.
    tokio::time::sleep(config.heartbeat_interval()).await;
    for (i, n) in nodes.iter().enumerate() {
        if i != crashed {
            n.shutdown().await;
        }
    }

    let assigned = count(&db, &keys.assigned).await?;
    let pending = count(&db, &keys.pending).await?;
    let mut by_ballot: BTreeMap<String, u32> = BTreeMap::new();
    for (_, who) in &assigned {
        let n = by_ballot.entry(who.clone()).or_default();
        *n = n.saturating_add(1);
    }
    let jobs: Vec<u32> = assigned.iter().map(|(j, _)| *j).collect();
    if jobs != (0..JOBS).collect::<Vec<_>>() || !pending.is_empty() {
        return Err(
            format!("jobs lost or duplicated: assigned {jobs:?}, pending {pending:?}").into(),
        );
    }
    say(start, "summary:");
    for (who, n) in &by_ballot {
        println!("           {n:>2} jobs assigned by {who}");
    }
    println!(
        "summary: jobs={JOBS} assigned_once={} stale_assignment_rejected=true failover=ballot {stale_token}->{new_token}",
        assigned.len()
    );
    Ok(())
}
