//! The coordinator's timing of the members, attacked through the public API (review of the
//! coordinator's reading at the earliest lapse and the standby's watch on the coordinating
//! member's record): no fence before a full lease after the victim's last renewal, even over
//! successive coordinator crashes; standby readings bounded per heartbeat with watches on, off
//! or refused, against a failing or hanging store, an absent coordinator record, a coordinating
//! member writing every millisecond, and 40 members; nothing left reading after a shutdown.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fdb_leader_election::memdb::{
    CommitContext, CommitDecision, FaultInjector, ReadContext, ReadDecision, ReadTarget,
};
use fdb_leader_election::shard::{Member, ShardedElection, ShardedRunner};
use fdb_leader_election::{CandidateId, MemDb, Priority, Runner, TokioClock, Weight};
use foundationdb_tuple::Subspace;
use tokio::time::Instant;

use crate::shard_support::*;

const LEASE: Duration = Duration::from_millis(300);

/// Counts range reads of the members and of the shards (coordinator attempts), logs every
/// writing commit with its instant, and can slow or fail the members' range reads.
#[derive(Debug)]
struct Log {
    members: Vec<u8>,
    shards: Vec<u8>,
    member_reads: AtomicU64,
    shard_reads: AtomicU64,
    commits: Mutex<Vec<(Instant, Vec<Vec<u8>>)>>,
    fail_members: AtomicBool,
    slow_members: Mutex<Option<Duration>>,
}

impl Log {
    fn new() -> Arc<Log> {
        let s = Subspace::from("adversarial-runner");
        Arc::new(Log {
            members: s.subspace(&("members",)).bytes().to_vec(),
            shards: s.subspace(&("shards",)).bytes().to_vec(),
            member_reads: AtomicU64::new(0),
            shard_reads: AtomicU64::new(0),
            commits: Mutex::new(Vec::new()),
            fail_members: AtomicBool::new(false),
            slow_members: Mutex::new(None),
        })
    }
    fn counts(&self) -> (u64, u64) {
        (
            self.member_reads.load(Ordering::SeqCst),
            self.shard_reads.load(Ordering::SeqCst),
        )
    }
    /// The instants of the commits that wrote `key`.
    fn writes_of(&self, key: &[u8]) -> Vec<Instant> {
        self.commits
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, keys)| keys.iter().any(|k| k == key))
            .map(|(t, _)| *t)
            .collect()
    }
}

impl FaultInjector for Log {
    fn on_read(&self, ctx: &ReadContext<'_>) -> ReadDecision {
        if let ReadTarget::Range { begin, .. } = ctx.target {
            if begin.starts_with(&self.members) {
                self.member_reads.fetch_add(1, Ordering::SeqCst);
                if self.fail_members.load(Ordering::SeqCst) {
                    return ReadDecision::unavailable();
                }
                if let Some(d) = *self.slow_members.lock().unwrap() {
                    return ReadDecision::proceed().with_latency(d);
                }
            } else if begin.starts_with(&self.shards) {
                self.shard_reads.fetch_add(1, Ordering::SeqCst);
            }
        }
        ReadDecision::proceed()
    }

    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        if !ctx.read_only {
            let keys = ctx.written_keys.iter().map(<[u8]>::to_vec).collect();
            self.commits.lock().unwrap().push((Instant::now(), keys));
        }
        CommitDecision::proceed()
    }
}

fn world() -> (MemDb, Arc<Log>) {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let log = Log::new();
    db.set_fault_injector(Arc::clone(&log) as Arc<dyn FaultInjector>);
    (db, log)
}

/// Three runners ("a", "bb", "ccc") on 12 shards with `config`, once they hold every shard.
async fn three(db: &MemDb, config: &fdb_leader_election::ElectionConfig) -> Vec<ShardedRunner> {
    let rs: Vec<ShardedRunner> = ["a", "bb", "ccc"]
        .iter()
        .map(|n| runner(db, n, 12, config))
        .collect();
    let all: Vec<&ShardedRunner> = rs.iter().collect();
    until(&all, Duration::from_secs(3), || held(&all) == 12).await;
    rs
}

fn held(rs: &[&ShardedRunner]) -> usize {
    exclusive_guards(rs)
}

/// Whether `id`'s epoch has ended: its record fenced, or already forgotten (removed once no
/// shard record names it).
async fn fenced(db: &MemDb, e: &ShardedElection, id: &CandidateId) -> bool {
    e.member_record(&db.create_transaction(), id)
        .await
        .unwrap()
        .is_none_or(|r| r.is_fenced())
}

/// Safety oracle: the fence of `id` (the first commit after its last renewal that writes its
/// epoch mark too: a renewal writes its record alone) comes at least a lease after that last
/// renewal, on the one clock all share.
fn check_gap(log: &Log, e: &ShardedElection, id: &CandidateId, what: &str) -> Duration {
    let record = log.writes_of(&e.member_key(id));
    let marks = log.writes_of(&e.epoch_key(id));
    let renewals: Vec<Instant> = record
        .iter()
        .filter(|t| !marks.contains(t))
        .copied()
        .collect();
    let renewal = *renewals
        .last()
        .unwrap_or_else(|| panic!("{what}: writes {record:?}"));
    let fence = *marks
        .iter()
        .find(|t| **t > renewal)
        .unwrap_or_else(|| panic!("{what}: no fence after {renewal:?}"));
    let gap = fence - renewal;
    eprintln!("{what}: fenced {gap:?} after its last renewal");
    assert!(
        gap >= LEASE,
        "{what}: fenced only {gap:?} after its last renewal (lease {LEASE:?})"
    );
    gap
}

// Safety + liveness: successive coordinator crashes (each with a plain member dying at the
// same time), 6 members, guards checked every ms; each fence a full lease after the victim's
// last renewal; each failover within 1.5 leases.
#[tokio::test(start_paused = true)]
async fn successive_coordinator_crashes_fence_only_after_a_full_lease() {
    let (db, log) = world();
    let names = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"];
    let runners: Vec<ShardedRunner> = names
        .iter()
        .map(|n| runner(&db, n, 24, &runner_config(30)))
        .collect();
    let all: Vec<&ShardedRunner> = runners.iter().collect();
    until(&all, Duration::from_secs(3), || held(&all) == 24).await;
    tokio::time::sleep(ms(500)).await;
    let e = runners[0].election().clone();
    let mut dead: Vec<usize> = Vec::new();
    for round in 0..2 {
        let live: Vec<usize> = (0..runners.len()).filter(|i| !dead.contains(i)).collect();
        let coord = *live.iter().find(|i| runners[**i].is_coordinator()).unwrap();
        let other = *live.iter().find(|i| **i != coord).unwrap();
        runners[coord].abort();
        runners[other].abort();
        dead.extend([coord, other]);
        let started = Instant::now();
        let alive: Vec<&ShardedRunner> = (0..runners.len())
            .filter(|i| !dead.contains(i))
            .map(|i| &runners[i])
            .collect();
        let mut elected_at = None;
        while alive.iter().map(|r| r.owned().len()).sum::<usize>() < 24 {
            exclusive_guards(&all);
            let c: Vec<bool> = alive.iter().map(|r| r.is_coordinator()).collect();
            let o: usize = alive.iter().map(|r| r.owned().len()).sum();
            let _ = (c, o);
            if elected_at.is_none() && alive.iter().any(|r| r.is_coordinator()) {
                elected_at = Some(started.elapsed());
            }
            assert!(
                started.elapsed() < LEASE * 6,
                "round {round}: not owned again"
            );
            tokio::time::sleep(ms(1)).await;
        }
        eprintln!(
            "round {round}: killed {} (coordinator) and {}; new coordinator after {elected_at:?}, owned again after {:?}; now coordinators {:?}",
            names[coord],
            names[other],
            started.elapsed(),
            runners
                .iter()
                .map(|r| r.is_coordinator())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(ms(200)).await;
        for i in [coord, other] {
            let id = runners[i].id().clone();
            assert!(fenced(&db, &e, &id).await, "round {round}: {id} fenced");
            check_gap(&log, &e, &id, &format!("round {round} {}", names[i]));
        }
        assert!(started.elapsed() < LEASE * 3, "round {round}");
    }
    for (i, r) in runners.iter().enumerate() {
        if !dead.contains(&i) {
            r.shutdown().await;
        }
    }
}

/// Reads per second over `d` (members ranges, shards ranges).
async fn rate(log: &Log, all: &[&ShardedRunner], d: Duration) -> (f64, f64) {
    let (m0, s0) = log.counts();
    let start = Instant::now();
    while start.elapsed() < d {
        exclusive_guards(all);
        tokio::time::sleep(ms(1)).await;
    }
    let (m1, s1) = log.counts();
    let secs = d.as_secs_f64();
    ((m1 - m0) as f64 / secs, (s1 - s0) as f64 / secs)
}

// Cost: steady state of 3 members, with watches on, off, and refused (limit 0): the members'
// range reads (coordinator attempts + standby readings) and shards' (coordinator attempts).
#[tokio::test(start_paused = true)]
async fn steady_state_reads_with_watches_on_off_and_refused() {
    for mode in ["on", "off", "refused"] {
        let (db, log) = world();
        match mode {
            "off" => db.set_watches_enabled(false),
            "refused" => db.set_max_watches(0).unwrap(),
            _ => {}
        }
        let rs = three(&db, &runner_config(30)).await;
        let all: Vec<&ShardedRunner> = rs.iter().collect();
        tokio::time::sleep(ms(500)).await;
        let (m, s) = rate(&log, &all, Duration::from_secs(3)).await;
        eprintln!(
            "watches {mode}: members range reads {m:.1}/s, shards range reads {s:.1}/s, \
             outstanding watches {}, armed {}",
            db.outstanding_watches(),
            db.armed_watches()
        );
        // coordinator: 4 per heartbeat (40/s); 2 standbys: about 1 per heartbeat each.
        assert!(m < 80.0, "watches {mode}: {m}/s");
        assert!(s < 50.0, "watches {mode}: {s}/s");
        // A crash of the coordinator still fails over in about a lease.
        let coord = rs.iter().position(ShardedRunner::is_coordinator).unwrap();
        rs[coord].abort();
        let started = Instant::now();
        let alive: Vec<&ShardedRunner> = (0..3).filter(|i| *i != coord).map(|i| &rs[i]).collect();
        while alive.iter().map(|r| r.owned().len()).sum::<usize>() < 12 {
            exclusive_guards(&all);
            assert!(started.elapsed() < LEASE * 6, "{mode}: not owned again");
            tokio::time::sleep(ms(1)).await;
        }
        eprintln!(
            "watches {mode}: coordinator crash owned again after {:?}",
            started.elapsed()
        );
        for r in alive {
            r.shutdown().await;
        }
    }
}

// Liveness: the store fails every members read (coordinator and standbys alike) for 2 s:
// nothing loops; then it recovers.
#[tokio::test(start_paused = true)]
async fn a_store_failing_every_members_read_is_not_read_in_a_loop() {
    let (db, log) = world();
    let rs = three(&db, &runner_config(30)).await;
    let all: Vec<&ShardedRunner> = rs.iter().collect();
    log.fail_members.store(true, Ordering::SeqCst);
    let (m, s) = rate(&log, &all, Duration::from_secs(2)).await;
    eprintln!("failing members reads: {m:.1}/s members, {s:.1}/s shards");
    assert!(m < 80.0, "{m}/s");
    log.fail_members.store(false, Ordering::SeqCst);
    for r in &rs {
        r.shutdown().await;
    }
}

// Shutdown / abort while standby readings hang (members reads take 10 s): every runner stops,
// and nothing reads afterwards (no task left behind).
#[tokio::test(start_paused = true)]
async fn abort_and_shutdown_during_a_hanging_standby_reading_leave_nothing_reading() {
    let (db, log) = world();
    let rs = three(&db, &runner_config(30)).await;
    *log.slow_members.lock().unwrap() = Some(Duration::from_secs(10));
    tokio::time::sleep(ms(150)).await;
    let coord = rs.iter().position(ShardedRunner::is_coordinator).unwrap();
    let standbys: Vec<usize> = (0..3).filter(|i| *i != coord).collect();
    let t = Instant::now();
    rs[standbys[0]].shutdown().await;
    eprintln!("shutdown of a standby took {:?}", t.elapsed());
    rs[standbys[1]].abort();
    rs[coord].abort();
    tokio::time::sleep(ms(500)).await;
    let before = log.counts();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = log.counts();
    assert_eq!(before, after, "reads after every runner stopped");
}

// A coordinating member that has no member record (a plain candidate of the coordinator
// election leads it): the standbys watch an absent key; no loop, watches bounded.
#[tokio::test(start_paused = true)]
async fn a_coordinator_without_a_member_record_is_watched_without_a_loop() {
    let (db, log) = world();
    let foreign = Runner::builder(
        db.clone(),
        Subspace::from("adversarial-runner").subspace(&("coordinator",)),
    )
    .candidate_id(CandidateId::random("foreign").unwrap())
    .priority(Priority::new(100))
    .config(runner_config(30))
    .start()
    .unwrap();
    until(&[], Duration::from_secs(2), || foreign.is_leader()).await;
    let rs: Vec<ShardedRunner> = ["a", "bb", "ccc"]
        .iter()
        .map(|n| runner(&db, n, 12, &runner_config(30)))
        .collect();
    let all: Vec<&ShardedRunner> = rs.iter().collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (m, s) = rate(&log, &all, Duration::from_secs(3)).await;
    eprintln!(
        "foreign coordinator: {m:.1}/s members, {s:.1}/s shards, outstanding {}, armed {}, \
         coordinators {:?}, held {}",
        db.outstanding_watches(),
        db.armed_watches(),
        rs.iter()
            .map(ShardedRunner::is_coordinator)
            .collect::<Vec<_>>(),
        held(&all)
    );
    assert!(m < 50.0, "{m}/s");
    assert!(db.armed_watches() < 200);
    for r in &rs {
        r.shutdown().await;
    }
    foreign.shutdown().await;
}

// Amplification: a coordinating member whose record changes every millisecond (its member
// cycles driven by hand, legal through the public API, beside its own coordinator candidate):
// each change makes every standby read all members again.
#[tokio::test(start_paused = true)]
async fn a_coordinating_member_renewing_every_ms_drives_the_standbys() {
    let (db, log) = world();
    let config = runner_config(30);
    let rs = three(&db, &config).await;
    let all: Vec<&ShardedRunner> = rs.iter().collect();
    tokio::time::sleep(ms(500)).await;
    let (m_base, _) = rate(&log, &all, Duration::from_secs(1)).await;
    // A hand-driven member "x" that also leads the coordinator election.
    let id = CandidateId::random("x").unwrap();
    let member = Member::with_clock(
        id.clone(),
        Priority::new(100),
        Weight::ONE,
        Arc::new(TokioClock::new()),
    );
    let coordinator = Runner::builder(
        db.clone(),
        Subspace::from("adversarial-runner").subspace(&("coordinator",)),
    )
    .candidate_id(id.clone())
    .priority(Priority::new(100))
    .config(config.clone())
    .start()
    .unwrap();
    let e = rs[0].election().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let (d, s, c) = (db.clone(), Arc::clone(&stop), Arc::clone(&cycles));
    let driver = tokio::spawn(async move {
        while !s.load(Ordering::SeqCst) {
            let (e2, m2) = (e.clone(), member.clone());
            let r = in_txn!(d, [e = e2, m = m2], |txn| e
                .member_cycle(&txn, &m, &Default::default())
                .await);
            if let Ok(cycle) = r {
                member.adopt(cycle);
                c.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(ms(1)).await;
        }
    });
    until(&[], Duration::from_secs(3), || coordinator.is_leader()).await;
    tokio::time::sleep(ms(500)).await;
    let c0 = cycles.load(Ordering::SeqCst);
    let (m, sh) = rate(&log, &all, Duration::from_secs(1)).await;
    let n = cycles.load(Ordering::SeqCst) - c0;
    eprintln!(
        "baseline {m_base:.1}/s members reads; with x coordinating and cycling {n}/s: \
         {m:.1}/s members reads, {sh:.1}/s shards reads"
    );
    stop.store(true, Ordering::SeqCst);
    driver.await.unwrap();
    // 3 standbys: at most about 4 readings per heartbeat each (the coordinator's own pace).
    assert!(
        m <= 3.0 * 40.0,
        "the standbys read all members {m:.0} times a second"
    );
    coordinator.abort();
    for r in &rs {
        r.abort();
    }
}

// Many members (40, one MemDb): steady-state reads and watches, and a coordinator crash.
#[tokio::test(start_paused = true)]
async fn forty_members_read_once_per_heartbeat_each_and_fail_over() {
    let (db, log) = world();
    let names: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let rs: Vec<ShardedRunner> = names
        .iter()
        .map(|n| runner(&db, n, 80, &runner_config(30)))
        .collect();
    let all: Vec<&ShardedRunner> = rs.iter().collect();
    until(&all, Duration::from_secs(10), || held(&all) == 80).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (m, s) = rate(&log, &all, Duration::from_secs(2)).await;
    eprintln!(
        "40 members: {m:.1}/s members reads, {s:.1}/s shards reads, outstanding {}, armed {}",
        db.outstanding_watches(),
        db.armed_watches()
    );
    assert!(m < 40.0 + 39.0 * 10.0 * 1.5, "{m}/s");
    let coord = rs.iter().position(ShardedRunner::is_coordinator).unwrap();
    rs[coord].abort();
    let started = Instant::now();
    let alive: Vec<&ShardedRunner> = (0..40).filter(|i| *i != coord).map(|i| &rs[i]).collect();
    while alive.iter().map(|r| r.owned().len()).sum::<usize>() < 80 {
        exclusive_guards(&all);
        assert!(started.elapsed() < LEASE * 6, "not owned again");
        tokio::time::sleep(ms(1)).await;
    }
    eprintln!("40 members: owned again after {:?}", started.elapsed());
    let id = rs[coord].id().clone();
    check_gap(&log, rs[0].election(), &id, "40 members coordinator");
    for r in &rs {
        r.abort();
    }
}

// Amplification through a legitimate path: a rebalance (one coordinating member with all 24
// shards, five join): the standbys' readings per second while the coordinator's own member
// runs its handover cycles.
#[tokio::test(start_paused = true)]
async fn standby_reads_during_a_rebalance() {
    let (db, log) = world();
    let a = runner(&db, "a", 24, &runner_config(30));
    until(&[&a], Duration::from_secs(3), || a.owned().len() == 24).await;
    let key = a.election().member_key(a.id());
    let n0 = log.writes_of(&key).len();
    let rs: Vec<ShardedRunner> = ["bb", "ccc", "dddd", "eeeee", "ffffff"]
        .iter()
        .map(|n| runner(&db, n, 24, &runner_config(30)))
        .collect();
    let mut all: Vec<&ShardedRunner> = rs.iter().collect();
    all.push(&a);
    let (m, s) = rate(&log, &all, Duration::from_secs(2)).await;
    let n = log.writes_of(&key).len() - n0;
    eprintln!(
        "rebalance: coordinator a is {} ; its record written {n} times in 2 s; {m:.1}/s members reads, {s:.1}/s shards reads; held {}",
        a.is_coordinator(),
        held(&all)
    );
    // Five standbys, each at most one reading per quarter heartbeat (100 ms here) on top of
    // the coordinator's own: well under 5 x 40 + 40 per second, whatever the rebalance writes.
    assert!(
        m <= 240.0,
        "members read {m:.0} times a second during a rebalance"
    );
    assert_eq!(
        held(&all),
        24,
        "every shard held once the rebalance is over"
    );
    for r in all {
        r.abort();
    }
}
