//! Leader-only writes from a runner's guard, fenced in their own transaction, on any store
//! (docs/fencing.md, docs/runner.md): `a` leads and assigns jobs 1 to 3, each write committed
//! only while its ballot leads; `a` shuts down and hands over to `b`, which assigns 4 to 6; a
//! write with `a`'s guard, kept past its leadership (a process that paused), is refused. The
//! same code runs on MemDb (tests/demos.rs), SQLite (`fenced_jobs`) and FoundationDB
//! (`fdb_fenced_jobs`).

// README: guard-fence
use std::time::Duration;

use fdb_leader_election::runner::{ElectionDatabase, LeadershipGuard};
use fdb_leader_election::{ElectionError, ElectionTxn, Subspace};

/// Leader-only work, on any store: assigns `job` in one transaction that commits only while
/// `guard`'s ballot leads.
pub(crate) async fn assign<D: ElectionDatabase>(
    db: &D,
    guard: &LeadershipGuard,
    jobs: &Subspace,
    job: u32,
) -> Result<(), ElectionError> {
    let key = jobs.pack(&(job,));
    let ballot = guard.fencing_token().get().to_be_bytes();
    db.transact(Duration::from_secs(1), |txn| {
        let key = &key;
        async move {
            guard.fence(&txn).await?; // this guard's ballot, checked by this transaction
            txn.set(key, &ballot); // so this write commits only while that ballot leads
            Ok(())
        }
    })
    .await
}
// README: end

use std::time::Instant;

use fdb_leader_election::runner::Runner;
use fdb_leader_election::{ElectionConfig, ReadMode};

use crate::runner_demos::{DemoResult, say, wait_until};

/// The demo on `db`, under `root`.
pub(crate) async fn run<D: ElectionDatabase + Clone>(
    db: D,
    root: Subspace,
    config: ElectionConfig,
) -> DemoResult {
    let start = Instant::now();
    let (election, jobs) = (root.subspace(&("election",)), root.subspace(&("jobs",)));
    let start_runner = |name: &str| {
        Runner::builder(db.clone(), election.clone())
            .label(name)
            .config(config.clone())
            .start()
    };
    let a = start_runner("a")?;
    let a_guard = a.elected().await.ok_or("a stopped before leading")?;
    let b = start_runner("b")?;
    wait_until("b registered", Duration::from_secs(10), || {
        b.leader().is_some()
    })
    .await?;
    for job in 1..=3 {
        assign(&db, &a_guard, &jobs, job).await?;
    }
    let first = a_guard.fencing_token();
    say(
        start,
        format!("a leads with ballot {first}: jobs 1-3 assigned, each write fenced"),
    );
    a.shutdown().await; // resigns for b: leadership moves in one commit
    let b_guard = b.elected().await.ok_or("b stopped before leading")?;
    for job in 4..=6 {
        assign(&db, &b_guard, &jobs, job).await?;
    }
    let second = b_guard.fencing_token();
    say(
        start,
        format!("b leads with ballot {second}: jobs 4-6 assigned"),
    );
    // a's guard, kept past its leadership, as by a process that paused: the store refuses it.
    let stale = match assign(&db, &a_guard, &jobs, 7).await {
        Err(ElectionError::StaleToken { token, current, .. }) => {
            say(
                start,
                format!("a's late write with ballot {token} refused: ballot {current} leads"),
            );
            1
        }
        other => return Err(format!("a's late write was not refused: {other:?}").into()),
    };
    // Each job holds the ballot that assigned it; job 7 was never written.
    let (begin, end) = jobs.range();
    let rows = db
        .transact(Duration::from_secs(1), |txn| {
            let (begin, end) = (&begin, &end);
            async move {
                txn.get_range(begin, end, ReadMode::Snapshot)
                    .await
                    .map_err(Into::into)
            }
        })
        .await?;
    let ballots: Vec<u64> = rows
        .iter()
        .filter_map(|(_, v)| <[u8; 8]>::try_from(v.as_slice()).ok())
        .map(u64::from_be_bytes)
        .collect();
    let want: Vec<u64> = [first.get(); 3]
        .into_iter()
        .chain([second.get(); 3])
        .collect();
    if ballots != want {
        return Err(format!("the jobs hold ballots {ballots:?}, not {want:?}").into());
    }
    b.shutdown().await;
    println!(
        "summary: jobs={} ballots={},{} stale_writes_refused={stale}",
        ballots.len(),
        first,
        second
    );
    Ok(())
}
