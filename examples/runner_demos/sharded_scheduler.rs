//! The sharded job scheduler demo, for any [`ElectionDatabase`]: 64 shards of jobs over three
//! members. Each member runs one worker per shard it owns, one job at a time under the shard's
//! guard, and every job's write is fenced with the shard's token in the same transaction. `c`
//! joins late and takes its share by cooperative handovers; `b` is killed and its shards are
//! owned again after about a lease, while a zombie of `b` (a process that did not notice it
//! died) keeps writing with its old tokens and is refused.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::shard::machine::ShardStop;
use fdb_leader_election::shard::{AssignmentObserver, ShardGuard, ShardedElection, ShardedRunner};
use fdb_leader_election::{
    Ballot, ElectionConfig, ElectionError, ElectionTxn, ReadMode, ShardId, Weight,
};
use foundationdb_tuple::Subspace;

use crate::runner_demos::{DemoResult, label, say, wait_until};

const SHARDS: u32 = 64;
const JOB: Duration = Duration::from_millis(10);
const TIMEOUT: Duration = Duration::from_secs(1);

/// What the demo counts.
#[derive(Default)]
struct Tally {
    jobs: AtomicU64,
    stale_rejected: AtomicU64,
    out_of_order: AtomicU64,
    moves: AtomicU64,
    overlaps: AtomicU64,
}

/// One job of `shard`: fenced with `token`, it reads the shard's last write and records its
/// own. A token older than the last writer's would be a lost update: counted, never expected.
async fn job<D: ElectionDatabase>(
    db: &D,
    election: &ShardedElection,
    jobs: &Subspace,
    shard: ShardId,
    token: Ballot,
    tally: &Tally,
) -> Result<(), ElectionError> {
    let key = jobs.pack(&(shard.get(),));
    // README: sharded-fence
    let done = db
        .transact(TIMEOUT, |txn| {
            let key = key.clone();
            async move {
                // Commits only while `token` owns the shard (and its owner's epoch lives).
                election.fence_shard(&txn, shard, token).await?;
                let last = txn.get(&key, ReadMode::Serializable).await?;
                let last = last
                    .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
                    .map_or(0, u64::from_be_bytes);
                txn.set(&key, &token.get().to_be_bytes());
                Ok(last)
            }
        })
        .await;
    // README: end
    match done {
        Ok(last) => {
            if last > token.get() {
                tally.out_of_order.fetch_add(1, Ordering::Relaxed);
            }
            tally.jobs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Err(e @ ElectionError::StaleToken { .. }) => {
            tally.stale_rejected.fetch_add(1, Ordering::Relaxed);
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// A shard's worker: one job at a time while the guard accepts work; it ends when the shard
/// is asked for (so the handover need not wait for the grace) or lost.
async fn worker<D: ElectionDatabase>(
    db: D,
    election: ShardedElection,
    jobs: Subspace,
    guard: ShardGuard,
    tally: Arc<Tally>,
) {
    // README: sharded-worker
    while guard.accepts_work() {
        let (db, election, jobs, tally) = (
            db.clone(),
            election.clone(),
            jobs.clone(),
            Arc::clone(&tally),
        );
        let (shard, token) = (guard.shard(), guard.fencing_token());
        let ran = guard.spawn(async move {
            let result = job(&db, &election, &jobs, shard, token, &tally).await;
            tokio::time::sleep(JOB).await;
            result
        });
        if !matches!(ran.await, Ok(Some(Ok(())))) {
            break;
        }
    }
    // README: end
}

/// Starts a member and a worker for every shard it comes to own.
fn member<D: ElectionDatabase>(
    db: &D,
    subspace: &Subspace,
    config: &ElectionConfig,
    name: &str,
    tally: &Arc<Tally>,
) -> DemoResult<ShardedRunner> {
    // README: sharded-start
    let runner = ShardedRunner::builder(db.clone(), subspace.clone())
        .shards(SHARDS) // used when this member creates the election
        .max_concurrent_moves(8) // cooperative moves in flight at once
        .label(name) // plus random bits: a new member per incarnation
        .weight(Weight::ONE) // its share: M·w/W shards (0: drained)
        .config(config.clone())
        .start()?;
    // README: end
    let mut changes = runner.subscribe();
    let (db, handle, tally) = (db.clone(), runner.clone(), Arc::clone(tally));
    let jobs = subspace.subspace(&("jobs",));
    tokio::spawn(async move {
        while let Ok(change) = changes.recv().await {
            match (&change.ended, handle.guard(change.shard)) {
                (None, Some(guard)) => {
                    let (db, e, jobs, tally) = (
                        db.clone(),
                        handle.election().clone(),
                        jobs.clone(),
                        Arc::clone(&tally),
                    );
                    tokio::spawn(worker(db, e, jobs, guard, tally));
                }
                (Some(ShardStop::HandedOver), _) => {
                    tally.moves.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
    });
    Ok(runner)
}

/// Counts the milliseconds at which two members hold a valid guard of one shard. The members
/// are read one after the other, so a shard handed over between two reads shows under both:
/// when a shard turns up under a second member, the guard read first is checked again. Still
/// valid, both were valid at once (an overlap); no longer, it was handed over in between.
fn watch_overlaps(runners: Vec<ShardedRunner>, tally: Arc<Tally>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let mut first: BTreeMap<ShardId, ShardGuard> = BTreeMap::new();
            let mut overlap = false;
            for r in &runners {
                for (shard, guard) in r.owned() {
                    match first.get(&shard) {
                        None => {
                            first.insert(shard, guard);
                        }
                        Some(earlier) => overlap |= earlier.is_valid(),
                    }
                }
            }
            if overlap {
                tally.overlaps.fetch_add(1, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
}

/// Runs the demo; prints one `summary:` line.
pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    subspace: Subspace,
    config: ElectionConfig,
) -> DemoResult {
    let start = Instant::now();
    let lease = config.lease_duration();
    let tally = Arc::new(Tally::default());
    let observer = AssignmentObserver::start(db.clone(), subspace.clone())?;
    let a = member(&db, &subspace, &config, "a", &tally)?;
    let b = member(&db, &subspace, &config, "b", &tally)?;
    let owned = |rs: &[&ShardedRunner]| rs.iter().map(|r| r.owned().len()).sum::<usize>();
    wait_until("a and b own every shard", lease.saturating_mul(10), || {
        owned(&[&a, &b]) == 64 && a.owned().len() == 32
    })
    .await?;
    let moves_before_c = tally.moves.load(Ordering::Relaxed);
    say(
        start,
        format!(
            "a owns {}, b owns {} (a started first: {moves_before_c} moves to b)",
            a.owned().len(),
            b.owned().len(),
        ),
    );

    let c = member(&db, &subspace, &config, "c", &tally)?;
    let overlaps = watch_overlaps(vec![a.clone(), b.clone(), c.clone()], Arc::clone(&tally));
    wait_until("c takes its share", lease.saturating_mul(20), || {
        owned(&[&a, &b, &c]) == 64 && c.owned().len() >= 21
    })
    .await?;
    say(
        start,
        format!(
            "c joined: a {}, b {}, c {} after {} cooperative moves",
            a.owned().len(),
            b.owned().len(),
            c.owned().len(),
            tally
                .moves
                .load(Ordering::Relaxed)
                .saturating_sub(moves_before_c)
        ),
    );

    // b is killed; a zombie of b keeps writing with the tokens it held.
    let b_tokens: BTreeMap<ShardId, Ballot> = b
        .owned()
        .iter()
        .map(|(s, g)| (*s, g.fencing_token()))
        .collect();
    let killed_at = Instant::now();
    // If b coordinates, its successor is elected after about a lease and, having timed b's
    // record as a standby meanwhile, fences b out at once.
    let b_coordinated = b.is_coordinator();
    b.abort();
    let zombie = {
        let (db, e, jobs, tally) = (
            db.clone(),
            a.election().clone(),
            subspace.subspace(&("jobs",)),
            Arc::clone(&tally),
        );
        let tokens = b_tokens.clone();
        tokio::spawn(async move {
            let mut alive = tokens;
            while !alive.is_empty() {
                let mut refused = Vec::new();
                for (shard, token) in &alive {
                    if let Err(ElectionError::StaleToken { .. }) =
                        job(&db, &e, &jobs, *shard, *token, &tally).await
                    {
                        refused.push(*shard);
                    }
                }
                for shard in refused {
                    alive.remove(&shard);
                }
                tokio::time::sleep(JOB).await;
            }
        })
    };
    wait_until("a and c own every shard", lease.saturating_mul(20), || {
        owned(&[&a, &c]) == 64
    })
    .await?;
    let took = killed_at.elapsed();
    zombie.await?;
    // The observer (anyone may run one: a router, a dashboard) follows the same records.
    let view = tokio::time::timeout(
        lease.saturating_mul(10),
        observer.updates().wait_for(|v| {
            v.shards().len() == 64 && v.vacant() == 0 && v.shards_of(b.id()).is_empty()
        }),
    )
    .await??
    .clone();
    let takeovers = b_tokens
        .iter()
        .filter(|(shard, token)| {
            view.owner_of(**shard)
                .is_some_and(|(owner, ballot)| owner != b.id() && ballot > **token)
        })
        .count();
    say(
        start,
        format!(
            "b killed{}: its {} shards owned again after {took:?} (lease {lease:?}); the zombie's writes refused",
            if b_coordinated {
                " (it was the coordinator)"
            } else {
                ""
            },
            b_tokens.len()
        ),
    );
    // Balanced again, then a clean shutdown hands everything back.
    wait_until("balance over a and c", lease.saturating_mul(20), || {
        a.owned().len() == 32 && c.owned().len() == 32
    })
    .await?;
    overlaps.abort();
    let counts = view.counts();
    let count = |r: &ShardedRunner| counts.get(r.id()).copied().unwrap_or(0);
    println!(
        "summary: shards={SHARDS} owned {}={} {}={} ({} killed, {} joined late) moves={} takeovers={takeovers} overlaps={} stale_writes_rejected={} out_of_order_writes={} jobs={}",
        label(a.id()),
        a.owned().len().max(count(&a)),
        label(c.id()),
        c.owned().len().max(count(&c)),
        label(b.id()),
        label(c.id()),
        tally.moves.load(Ordering::Relaxed),
        tally.overlaps.load(Ordering::Relaxed),
        tally.stale_rejected.load(Ordering::Relaxed),
        tally.out_of_order.load(Ordering::Relaxed),
        tally.jobs.load(Ordering::Relaxed),
    );
    for r in [&a, &c] {
        r.shutdown().await;
    }
    observer.shutdown();
    if tally.overlaps.load(Ordering::Relaxed) > 0 || tally.out_of_order.load(Ordering::Relaxed) > 0
    {
        return Err("overlapping owners or out-of-order writes".into());
    }
    if takeovers != b_tokens.len() {
        return Err(format!("{takeovers} of b's {} shards taken over", b_tokens.len()).into());
    }
    Ok(())
}
