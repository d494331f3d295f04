//! The sharded runner on MemDb, in tokio's paused time: members balanced, checked every
//! millisecond for two valid guards of one shard; a late joiner takes its share by handovers
//! (each old guard cancelled before the new one is issued); a crashed member's shards owned
//! again within about a lease; a graceful shutdown hands its shards over without a lease's
//! wait; guarded work finishes before its shard is handed over.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::shard_support::timed;
use fdb_leader_election::shard::machine::ShardStop;
use fdb_leader_election::shard::{ShardChange, ShardedRunner};
use fdb_leader_election::{ElectionConfig, MemDb, ShardId, TokioClock, Weight};
use foundationdb_tuple::Subspace;
use tokio::time::Instant;

const LEASE_MS: u64 = 300;
const LEASE: Duration = Duration::from_millis(LEASE_MS);

fn config() -> ElectionConfig {
    timed(LEASE_MS, 100, 600, 30)
        .handover_grace(Duration::from_millis(200))
        .build()
        .unwrap()
}

fn db() -> MemDb {
    MemDb::with_clock(Arc::new(TokioClock::new()))
}

fn start(db: &MemDb, name: &str, shards: u32) -> ShardedRunner {
    ShardedRunner::builder(db.clone(), Subspace::from("sharded"))
        .shards(shards)
        .max_concurrent_moves(8)
        .label(name)
        .weight(Weight::ONE)
        .config(config())
        .seed(name.len() as u64)
        .start()
        .unwrap()
}

/// Panics if two runners hold a valid guard of one shard.
fn exclusive(runners: &[&ShardedRunner]) -> usize {
    let mut seen: BTreeMap<ShardId, usize> = BTreeMap::new();
    for (i, r) in runners.iter().enumerate() {
        for shard in r.owned().keys() {
            if let Some(j) = seen.insert(*shard, i) {
                panic!("shard {shard} held by runners {j} and {i}");
            }
        }
    }
    seen.len()
}

/// Watches exclusivity every millisecond for `d`.
async fn watch(runners: &[&ShardedRunner], d: Duration) -> usize {
    let start = Instant::now();
    let mut owned = 0;
    while start.elapsed() < d {
        owned = exclusive(runners);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    owned
}

#[tokio::test(start_paused = true)]
async fn members_are_balanced_and_a_late_joiner_takes_its_share_without_overlap() {
    let db = db();
    let (a, b, c) = (
        start(&db, "a", 64),
        start(&db, "b", 64),
        start(&db, "c", 64),
    );
    assert_eq!(watch(&[&a, &b, &c], Duration::from_secs(2)).await, 64);
    let counts: Vec<usize> = [&a, &b, &c].iter().map(|r| r.owned().len()).collect();
    assert!(counts.iter().all(|n| *n == 21 || *n == 22), "{counts:?}");
    // A guarded job on one of a's shards: its handover waits for it.
    let d = start(&db, "d", 64);
    assert_eq!(watch(&[&a, &b, &c, &d], Duration::from_secs(3)).await, 64);
    for r in [&a, &b, &c, &d] {
        assert_eq!(r.owned().len(), 16, "{r:?}");
    }
    for r in [&a, &b, &c, &d] {
        r.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_crashed_members_shards_are_owned_again_within_about_a_lease() {
    let db = db();
    let (a, b) = (start(&db, "a", 32), start(&db, "b", 32));
    assert_eq!(watch(&[&a, &b], Duration::from_secs(2)).await, 32);
    let crashed = b.owned().len();
    assert_eq!(crashed, 16);
    b.abort();
    let started = Instant::now();
    while a.owned().len() < 32 {
        exclusive(&[&a, &b]);
        assert!(
            started.elapsed() < LEASE * 4,
            "not owned again in {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    eprintln!("crashed member's shards owned again after {took:?} (lease {LEASE:?})");
    assert!(
        took >= LEASE / 2,
        "taken over after {took:?}, before the lease could end"
    );
    assert!(took <= LEASE * 2, "taken over after {took:?}");
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_graceful_shutdown_hands_its_shards_over_without_a_lease_wait() {
    let db = db();
    let (a, b) = (start(&db, "a", 32), start(&db, "b", 32));
    assert_eq!(watch(&[&a, &b], Duration::from_secs(2)).await, 32);
    let started = Instant::now();
    b.shutdown().await;
    while a.owned().len() < 32 {
        assert!(
            started.elapsed() < LEASE,
            "handed over only after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn guarded_work_finishes_before_its_shard_is_handed_over() {
    let db = db();
    let a = start(&db, "a", 8);
    watch(&[&a], Duration::from_secs(1)).await;
    assert_eq!(a.owned().len(), 8);
    // Work on every shard: 100 ms jobs, one after the other, while the guard accepts work.
    // A job cut short by its guard's cancellation counts in `cut`.
    let (done, cut) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    for (_, guard) in a.owned() {
        let (done, cut) = (Arc::clone(&done), Arc::clone(&cut));
        tokio::spawn(async move {
            while guard.accepts_work() {
                let started = Arc::new(AtomicU32::new(0));
                let s = Arc::clone(&started);
                let job = guard.spawn(async move {
                    s.store(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                });
                match job.await {
                    Ok(Some(())) => done.fetch_add(1, Ordering::SeqCst),
                    _ if started.load(Ordering::SeqCst) == 1 => cut.fetch_add(1, Ordering::SeqCst),
                    _ => 0,
                };
            }
        });
    }
    let b = start(&db, "b", 8);
    assert_eq!(watch(&[&a, &b], Duration::from_secs(2)).await, 8);
    assert_eq!(b.owned().len(), 4);
    assert!(done.load(Ordering::SeqCst) > 0);
    assert_eq!(
        cut.load(Ordering::SeqCst),
        0,
        "a handover cut a job short instead of waiting for it"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_observer_follows_every_change_through_the_coordinators_marker() {
    use fdb_leader_election::shard::AssignmentObserver;
    let db = db();
    let (a, b) = (start(&db, "a", 32), start(&db, "bb", 32));
    let observer = AssignmentObserver::start(db.clone(), Subspace::from("sharded")).unwrap();
    let mut changes = observer.subscribe();
    watch(&[&a, &b], Duration::from_secs(2)).await;
    // The observer's view is the members' own.
    let view = observer.current();
    assert_eq!(
        view.shards_of(a.id()),
        a.owned().keys().copied().collect::<Vec<_>>()
    );
    assert_eq!(
        view.shards_of(b.id()),
        b.owned().keys().copied().collect::<Vec<_>>()
    );
    assert_eq!(view.vacant(), 0);
    for (shard, guard) in a.owned() {
        assert_eq!(view.owner_of(shard), Some((a.id(), guard.fencing_token())));
    }
    // c joins and a leaves: the stream replayed on nothing gives the current view.
    let c = start(&db, "ccc", 32);
    watch(&[&a, &b, &c], Duration::from_secs(1)).await;
    let left = Instant::now();
    a.shutdown().await;
    tokio::time::timeout(
        Duration::from_secs(1),
        observer
            .updates()
            .wait_for(|v| v.shards_of(a.id()).is_empty() && v.vacant() == 0),
    )
    .await
    .unwrap()
    .unwrap();
    // Within a lease: the handover needs no lease wait.
    let took = left.elapsed();
    assert!(took < LEASE, "observer saw a's leave after {took:?}");
    let mut replay: BTreeMap<ShardId, Option<String>> = BTreeMap::new();
    while let Ok(change) = changes.try_recv() {
        replay.insert(change.shard, change.to.map(|t| t.to_string()));
    }
    let seen = observer.current();
    for assignment in seen.shards() {
        assert_eq!(
            replay.get(&assignment.shard).cloned().flatten(),
            assignment.owner.as_ref().map(ToString::to_string),
            "shard {}",
            assignment.shard
        );
    }
    let counts = seen.counts();
    assert_eq!(
        counts.get(b.id()).copied().unwrap_or(0) + counts.get(c.id()).copied().unwrap_or(0),
        32
    );
    observer.shutdown();
    b.shutdown().await;
    c.shutdown().await;
}

/// Records every change of `runner`'s ownership with the (paused-clock) instant it was seen.
fn record(runner: &ShardedRunner) -> Arc<std::sync::Mutex<Vec<(ShardChange, Instant)>>> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut changes = runner.subscribe();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok(change) = changes.recv().await {
            log.lock().unwrap().push((change, Instant::now()));
        }
    });
    seen
}

#[tokio::test(start_paused = true)]
async fn a_cooperative_move_lands_within_20_ms_through_the_inbox_watches() {
    let db = db();
    let (a, b) = (start(&db, "a", 32), start(&db, "bb", 32));
    watch(&[&a, &b], Duration::from_secs(2)).await;
    let (from_a, from_b) = (record(&a), record(&b));
    let c = start(&db, "ccc", 32);
    let to_c = record(&c);
    assert_eq!(watch(&[&a, &b, &c], Duration::from_secs(2)).await, 32);
    let mut released: BTreeMap<ShardId, Instant> = BTreeMap::new();
    for (change, at) in from_a
        .lock()
        .unwrap()
        .iter()
        .chain(from_b.lock().unwrap().iter())
    {
        assert_eq!(change.ended, Some(ShardStop::HandedOver));
        released.insert(change.shard, *at);
    }
    let acquired = to_c.lock().unwrap().clone();
    assert_eq!(
        acquired.len(),
        10,
        "c takes its share of 32 over three: 10 or 11"
    );
    let mut slowest = Duration::ZERO;
    for (change, at) in &acquired {
        let gone = released[&change.shard];
        slowest = slowest.max(at.duration_since(gone));
    }
    // The heartbeat is 100 ms: without the watches a move would wait for the target's next
    // heartbeat (tens of milliseconds on average).
    assert!(
        slowest <= Duration::from_millis(20),
        "slowest move {slowest:?}"
    );
    for r in [&a, &b, &c] {
        r.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_observer_started_before_the_election_exists_sees_it_at_its_first_publication() {
    use fdb_leader_election::shard::AssignmentObserver;
    let db = db();
    let observer = AssignmentObserver::start(db.clone(), Subspace::from("sharded")).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(observer.current().shards().is_empty());
    let started = Instant::now();
    let a = start(&db, "a", 8);
    // Not a default heartbeat's poll later (seconds): the marker's watch, armed before the
    // election existed, fires at the coordinator's first publications.
    tokio::time::timeout(
        Duration::from_millis(500),
        observer
            .updates()
            .wait_for(|v| v.shards_of(a.id()).len() == 8),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    a.shutdown().await;
    observer.shutdown();
}

#[tokio::test(start_paused = true)]
async fn a_crashed_coordinators_shards_are_owned_again_within_about_a_lease_too() {
    let db = db();
    let runners = [
        start(&db, "a", 30),
        start(&db, "bb", 30),
        start(&db, "ccc", 30),
    ];
    let all: Vec<&ShardedRunner> = runners.iter().collect();
    assert_eq!(watch(&all, Duration::from_secs(2)).await, 30);
    let Some(victim) = runners.iter().position(ShardedRunner::is_coordinator) else {
        panic!("no coordinator");
    };
    let crashed = runners[victim].owned().len();
    assert_eq!(crashed, 10);
    runners[victim].abort();
    let started = Instant::now();
    let others: Vec<&ShardedRunner> = (0..3)
        .filter(|i| *i != victim)
        .map(|i| &runners[i])
        .collect();
    while others.iter().map(|r| r.owned().len()).sum::<usize>() < 30 {
        exclusive(&all);
        assert!(
            started.elapsed() < LEASE * 6,
            "not owned again in {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    eprintln!("the crashed coordinator's shards owned again after {took:?} (lease {LEASE:?})");
    // A successor is elected after about a lease; having timed the members as a standby, it
    // fences the dead one at once rather than after a lease of its own (two leases).
    assert!(took <= LEASE * 3 / 2, "taken over after {took:?}");
    for r in others {
        r.shutdown().await;
    }
}
