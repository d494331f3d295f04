//! Version-ranked takeovers and directed resigns under the version policy, as an adversarial
//! review of issue 38 tried to break them through the public API: runner scenarios in tokio's
//! paused time on MemDb (no two leaders at any millisecond, ballots never back), the manual API
//! for the deterministic ones. Two defects it found are pinned here:
//! `a_short_reservation_timeout_does_not_let_an_older_follower_take_a_lapsed_lease` (a
//! reservation timeout shorter than the heartbeat made a live newer follower look dead:
//! `ElectionConfig::silence_before_passed_over`), and the two `build_metadata_*` tests
//! (versions ranked by semver precedence, docs/design.md §14.1, not by `Ord`, which counts build
//! metadata).

use std::time::Duration;

use crate::runner_support::*;
use crate::version::{a_leads_b_and_c_follow, candidate, policy_allows, set_policy, with_policy};
use fdb_leader_election::runner::Runner;
use fdb_leader_election::{
    Ballot, CandidateId, ElectionConfig, ElectionError, LeaderElection, MemDb, OperatorOutcome,
    VersionPolicy,
};

fn start(
    db: &MemDb,
    name: &str,
    version: Option<&str>,
    priority: i32,
    seed: u64,
    cfg: &ElectionConfig,
) -> Runner {
    let b = builder(db.clone(), name, priority)
        .config(cfg.clone())
        .seed(seed);
    match version {
        Some(v) => b.version(v),
        None => b,
    }
    .start()
    .unwrap()
}

/// One sample: never two leaders at once, and the ballot of a leader never below `last`
/// (which it then becomes).
fn sample_safety(what: &str, runners: &[&Runner], last: &mut u64) {
    let leaders: Vec<u64> = runners
        .iter()
        .filter_map(|r| r.leadership().map(|g| g.ballot().get()))
        .collect();
    assert!(
        leaders.len() <= 1,
        "{what}: two leaders at once: {leaders:?}"
    );
    if let Some(&b) = leaders.first() {
        assert!(b >= *last, "{what}: ballot went back from {last} to {b}");
        *last = b;
    }
}

/// Samples every millisecond for `dur`: never two leaders at once, and each runner's ballots
/// only grow, and every new leadership has a ballot above every earlier one.
async fn watch_safety(what: &str, runners: &[&Runner], dur: Duration, last: &mut u64) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < dur {
        sample_safety(what, runners, last);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits (sampling safety each millisecond) until `cond`; panics after `limit`.
async fn until_safe(
    what: &str,
    runners: &[&Runner],
    limit: Duration,
    last: &mut u64,
    mut cond: impl FnMut() -> bool,
) -> Duration {
    let start = tokio::time::Instant::now();
    loop {
        sample_safety(what, runners, last);
        if cond() {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what}: timed out after {limit:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

// ---------------------------------------------------------------------------------------
// 1. Takeovers
// ---------------------------------------------------------------------------------------

/// The trio of issue 38 under `cfg`: `a` (2.0.0, leads), `b` (1.0.0, priority 9), `c`
/// (2.0.0, priority 1).
async fn trio(db: &MemDb, seed: u64, cfg: &ElectionConfig) -> (Runner, Runner, Runner) {
    // Under ignore, `b` (priority 9) would preempt a leader of priority 1: the leader has 10.
    let lead = if cfg.version_policy() == VersionPolicy::Ignore {
        10
    } else {
        1
    };
    let a = start(db, "a", Some("2.0.0"), lead, seed, cfg);
    a.elected().await.unwrap();
    let b = start(
        db,
        "b",
        Some("1.0.0"),
        9,
        seed.wrapping_mul(31).wrapping_add(7),
        cfg,
    );
    let c = start(
        db,
        "c",
        Some("2.0.0"),
        1,
        seed.wrapping_mul(17).wrapping_add(3),
        cfg,
    );
    tokio::time::sleep(HEARTBEAT * 5).await;
    assert!(a.is_leader(), "seed {seed}: a still leads");
    (a, b, c)
}

/// The trio under `cfg`, then its leader `a` crashes: once `b` or `c` leads (no two leaders at
/// any millisecond meanwhile), `b`, `c`, how long it took and the ballot last seen.
async fn trio_after_crash(seed: u64, cfg: &ElectionConfig) -> (Runner, Runner, Duration, u64) {
    let db = db();
    let (a, b, c) = trio(&db, seed, cfg).await;
    a.abort();
    let mut last = 1;
    let took = until_safe("successor", &[&b, &c], LEASE * 10, &mut last, || {
        b.is_leader() || c.is_leader()
    })
    .await;
    (b, c, took, last)
}

/// Shuts every runner down.
async fn shutdown_all(runners: &[&Runner]) {
    for r in runners {
        r.shutdown().await;
    }
}

/// Over `seeds`, the trio's 1.0.0 follower never takes the crashed 2.0.0 leader's lapsed lease
/// (no-downgrade) while the 2.0.0 follower is live and heartbeating.
async fn the_older_follower_never_takes_the_lapse(
    cfg: &ElectionConfig,
    seeds: std::ops::Range<u64>,
) {
    let mut bad = Vec::new();
    for seed in seeds {
        let (b, c, _, _) = trio_after_crash(seed, cfg).await;
        if b.is_leader() {
            // b took the lapsed lease itself (no-downgrade never moves leadership from c to b).
            bad.push((seed, b.leadership().unwrap().ballot().get()));
        }
        shutdown_all(&[&b, &c]).await;
    }
    assert!(
        bad.is_empty(),
        "the 1.0.0 follower took the 2.0.0 leader's lapsed lease while the 2.0.0 follower was \
         live and heartbeating, (seed, ballot) {bad:?} (reservation timeout {:?}, heartbeat \
         {HEARTBEAT:?})",
        cfg.reservation_timeout()
    );
}

/// A reservation timeout shorter than the heartbeat is a valid configuration (> 0, ≤ the
/// lease, docs/configuration.md), e.g. a 10 s lease, 3 s heartbeat and 1 s reservation
/// timeout for a fast handover to a dead reserved candidate. The deference rule measures a
/// candidate's "silence" by this same timeout, yet a live follower heartbeats only once per
/// heartbeat: a 2.0.0 follower that heartbeats normally is heard "silent" between two of its
/// heartbeats, and the 1.0.0 follower takes the crashed 2.0.0 leader's lease (ballot 2 goes
/// to a downgrade under no-downgrade while the 2.0.0 follower is live and heartbeating).
#[tokio::test(start_paused = true)]
async fn a_short_reservation_timeout_does_not_let_an_older_follower_take_a_lapsed_lease() {
    let cfg = with_policy(VersionPolicy::NoDowngrade)
        .to_builder()
        .reservation_timeout(Duration::from_millis(30))
        .build()
        .unwrap();
    the_older_follower_never_takes_the_lapse(&cfg, 0..20).await;
}

/// The control: the issue's scenario with the default reservation timeout, more seeds than
/// the crate's own test, and the overlap/ballot oracle sampled throughout.
#[tokio::test(start_paused = true)]
async fn the_issue_trio_over_many_seeds_with_the_safety_oracle() {
    let cfg = with_policy(VersionPolicy::NoDowngrade);
    for seed in 100..140 {
        let (b, c, _, mut last) = trio_after_crash(seed, &cfg).await;
        assert!(c.is_leader(), "seed {seed}: b (1.0.0) took over");
        watch_safety("after", &[&b, &c], LEASE * 3, &mut last).await;
        assert!(c.is_leader() && !b.is_leader(), "seed {seed}");
        shutdown_all(&[&b, &c]).await;
    }
}

/// Liveness: the leader and the newer follower crash at once; the older one must lead within
/// a lease and the silence (plus a heartbeat of slack). Also with a versionless follower, and
/// with three versions under no-downgrade (a 3.0.0 leader, 1.0.0/2.0.0/3.0.0 followers, the
/// 3.0.0 one crashing with it: either remaining one may lead, bounded).
#[tokio::test(start_paused = true)]
async fn leader_and_newer_follower_crash_together_the_older_leads_in_bounded_time() {
    let cfg = with_policy(VersionPolicy::NoDowngrade);
    for seed in 0..15 {
        let db = db();
        let (a, b, c) = trio(&db, seed, &cfg).await;
        a.abort();
        c.abort();
        let mut last = 1;
        let took = until_safe("b", &[&b], LEASE * 10, &mut last, || b.is_leader()).await;
        assert!(took <= LEASE + HEARTBEAT * 3, "seed {seed}: took {took:?}");
        b.shutdown().await;
    }
    // Three versions.
    for seed in 0..10 {
        let db = db();
        let a = start(&db, "a", Some("3.0.0"), 1, seed, &cfg);
        a.elected().await.unwrap();
        let one = start(&db, "one", Some("1.0.0"), 9, seed + 1000, &cfg);
        let two = start(&db, "two", Some("2.0.0"), 5, seed + 2000, &cfg);
        let three = start(&db, "three", Some("3.0.0"), 1, seed + 3000, &cfg);
        tokio::time::sleep(HEARTBEAT * 5).await;
        a.abort();
        three.abort();
        let mut last = 1;
        let took = until_safe("one or two", &[&one, &two], LEASE * 10, &mut last, || {
            one.is_leader() || two.is_leader()
        })
        .await;
        assert!(
            took <= LEASE + HEARTBEAT * 3,
            "three versions, seed {seed}: took {took:?}"
        );
        watch_safety("after", &[&one, &two], LEASE * 3, &mut last).await;
        shutdown_all(&[&one, &two]).await;
    }
}

/// prefer-oldest with three versions: a 1.0.0 leader and a 1.0.0 follower crash; of the
/// 2.0.0 (priority 5) and 3.0.0 (priority 9) followers, the 2.0.0 one must take over (the
/// oldest live), never the 3.0.0 one, within the bound.
#[tokio::test(start_paused = true)]
async fn prefer_oldest_three_versions_the_oldest_live_takes_the_lapsed_lease() {
    let cfg = with_policy(VersionPolicy::PreferOldest);
    for seed in 0..15 {
        let db = db();
        let a = start(&db, "a", Some("1.0.0"), 1, seed, &cfg);
        a.elected().await.unwrap();
        let old = start(&db, "old", Some("1.0.0"), 1, seed + 10, &cfg);
        let two = start(&db, "two", Some("2.0.0"), 5, seed + 20, &cfg);
        let three = start(&db, "three", Some("3.0.0"), 9, seed + 30, &cfg);
        tokio::time::sleep(HEARTBEAT * 5).await;
        assert!(a.is_leader());
        a.abort();
        old.abort();
        let mut last = 1;
        let took = until_safe("two", &[&two, &three], LEASE * 10, &mut last, || {
            two.is_leader() || three.is_leader()
        })
        .await;
        assert!(two.is_leader(), "seed {seed}: 3.0.0 took over, 2.0.0 live");
        assert!(took <= LEASE + HEARTBEAT * 3, "seed {seed}: took {took:?}");
        shutdown_all(&[&two, &three]).await;
    }
}

/// A newer follower that is not eligible (its own health, or an operator's mark on its name)
/// must not hold the older one up: the older takes over at the lapse (+ slack).
#[tokio::test(start_paused = true)]
async fn an_ineligible_newer_follower_does_not_block_the_takeover() {
    let cfg = with_policy(VersionPolicy::NoDowngrade);
    for (seed, by_mark) in (0..12).map(|s| (s, s % 2 == 0)) {
        let db = db();
        let (a, b, c) = trio(&db, seed, &cfg).await;
        if by_mark {
            db.run(|txn, _| async move {
                LeaderElection::new(subspace())
                    .set_eligible(&txn, "c", false, "maintenance")
                    .await
            })
            .await
            .unwrap();
        } else {
            c.candidate().unwrap().set_eligible(false, "sick").unwrap();
        }
        tokio::time::sleep(HEARTBEAT * 3).await;
        a.abort();
        let mut last = 1;
        let took = until_safe("b", &[&b, &c], LEASE * 10, &mut last, || b.is_leader()).await;
        assert!(
            took <= LEASE + HEARTBEAT * 2,
            "seed {seed} (mark: {by_mark}): took {took:?}"
        );
        watch_safety("after", &[&b, &c], LEASE * 3, &mut last).await;
        assert!(b.is_leader(), "seed {seed}");
        shutdown_all(&[&b, &c]).await;
    }
}

/// The policy changed in the middle of the lapse: from ignore (where `b`, priority 9, would
/// win the stagger) to no-downgrade right after the crash: `c` must take over.
/// And the other way: no-downgrade to ignore mid-lapse: anyone may lead (bounded).
#[tokio::test(start_paused = true)]
async fn a_policy_change_mid_lapse_is_honoured() {
    for seed in 0..12 {
        let db = db();
        let cfg = with_policy(VersionPolicy::Ignore);
        let (a, b, c) = trio(&db, seed, &cfg).await;
        a.abort();
        tokio::time::sleep(HEARTBEAT).await;
        set_policy(&db, VersionPolicy::NoDowngrade).await;
        let mut last = 1;
        until_safe("successor", &[&b, &c], LEASE * 10, &mut last, || {
            b.is_leader() || c.is_leader()
        })
        .await;
        assert!(c.is_leader(), "seed {seed}: b took over after the change");
        shutdown_all(&[&b, &c]).await;
    }
}

/// The newest follower is partitioned (stops heartbeating, still registered and "live" in the
/// registry, which stopped with the leader's renewals): the older takes over within a lease
/// and the silence; when the partition heals, never two leaders.
#[tokio::test(start_paused = true)]
async fn a_partitioned_newer_follower_is_passed_over_in_bounded_time() {
    let cfg = with_policy(VersionPolicy::NoDowngrade);
    for seed in 0..10 {
        let db = db();
        let cut = Cuttable::new(&db);
        let a = start(&db, "a", Some("2.0.0"), 1, seed, &cfg);
        a.elected().await.unwrap();
        let b = start(&db, "b", Some("1.0.0"), 9, seed + 7, &cfg);
        let c = builder(cut.clone(), "c", 1)
            .config(cfg.clone())
            .version("2.0.0")
            .seed(seed + 3)
            .start()
            .unwrap();
        tokio::time::sleep(HEARTBEAT * 5).await;
        a.abort();
        cut.set_cut(true);
        let mut last = 1;
        let took = until_safe("b", &[&b, &c], LEASE * 10, &mut last, || b.is_leader()).await;
        assert!(took <= LEASE + HEARTBEAT * 3, "seed {seed}: took {took:?}");
        cut.set_cut(false);
        watch_safety("healed", &[&b, &c], LEASE * 5, &mut last).await;
        assert!(
            b.is_leader() ^ c.is_leader(),
            "seed {seed}: one leader after healing"
        );
        shutdown_all(&[&b, &c]).await;
    }
}

/// `ignore` behaves as before versions: the highest priority live follower (`b`, 1.0.0)
/// takes the lapsed lease, and keeps it.
#[tokio::test(start_paused = true)]
async fn ignore_policy_unchanged_priority_wins_the_lapse() {
    let cfg = with_policy(VersionPolicy::Ignore);
    for seed in 0..15 {
        let (b, c, took, mut last) = trio_after_crash(seed, &cfg).await;
        assert!(took <= LEASE + HEARTBEAT * 2, "seed {seed}: took {took:?}");
        watch_safety("after", &[&b, &c], LEASE * 3, &mut last).await;
        assert!(
            b.is_leader(),
            "seed {seed}: b (priority 9) leads under ignore"
        );
        shutdown_all(&[&b, &c]).await;
    }
}

// ---------------------------------------------------------------------------------------
// 2. Versions compared by precedence (docs/design.md §14.1, docs/rolling-upgrades.md)
// ---------------------------------------------------------------------------------------

/// "A version is a semantic version ... compared by the semver crate's precedence": build
/// metadata is no part of precedence (`Version::cmp_precedence`; semver.org §10), so
/// `1.5.0` and `1.5.0+build.7` are one version, and "within one version, priority ranks";
/// equal standings never preempt. Under prefer-newest a `1.5.0+build.7` follower of the same
/// priority must not take leadership from a `1.5.0` leader.
#[tokio::test(start_paused = true)]
async fn build_metadata_is_no_newer_version_under_prefer_newest() {
    let cfg = with_policy(VersionPolicy::PreferNewest);
    let db = db();
    let a = start(&db, "a", Some("1.5.0"), 1, 1, &cfg);
    a.elected().await.unwrap();
    let b = start(&db, "b", Some("1.5.0+build.7"), 1, 2, &cfg);
    let mut last = 1;
    watch_safety("settle", &[&a, &b], LEASE * 4, &mut last).await;
    assert!(
        a.is_leader() && !b.is_leader(),
        "leadership moved from 1.5.0 to 1.5.0+build.7 (same version by precedence, same \
         priority): ballot {last}"
    );
    shutdown_all(&[&a, &b]).await;
}

/// The same under no-downgrade, through the operator's `resign --to` and `policy_allows`:
/// with a `2.0.0+sha.b` leader and `2.0.0+sha.b` follower live, a `2.0.0` candidate runs the
/// same version by precedence, so the policy allows it and `resign --to` may name it.
#[tokio::test]
async fn build_metadata_is_no_older_version_under_no_downgrade() {
    let db = MemDb::new();
    let config = with_policy(VersionPolicy::NoDowngrade);
    let a = candidate("a", "2.0.0+sha.b", 1);
    let b = candidate("b", "2.0.0", 9);
    let c = candidate("c", "2.0.0+sha.b", 1);
    let election = a_leads_b_and_c_follow(&db, &config, [&a, &b, &c]).await;
    let allows = policy_allows(&db, &election).await;
    let op = CandidateId::random("ops").unwrap();
    let e = election.clone();
    let asked = db
        .run(|txn, _| {
            let (e, op) = (e.clone(), op.clone());
            async move { e.request_resign_to(&txn, &op, Ballot::new(1), "b").await }
        })
        .await;
    assert_eq!(
        allows,
        [("a".into(), true), ("b".into(), true), ("c".into(), true)],
        "2.0.0 and 2.0.0+sha.b are one version by precedence"
    );
    assert!(
        matches!(asked, Ok(OperatorOutcome::Done { .. })),
        "resign --to b (2.0.0) under a 2.0.0+sha.b leader: {asked:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 3. Directed resigns
// ---------------------------------------------------------------------------------------

/// `resign --to b` where two live candidates are named `b`, one 1.0.0 (priority 9), one
/// 2.0.0: under no-downgrade with a 2.0.0 leader (and another 2.0.0 follower) it is accepted
/// and the vacancy goes to the 2.0.0 `b`, never the 1.0.0 one.
#[tokio::test(start_paused = true)]
async fn directed_resign_to_a_name_with_namesakes_of_two_versions() {
    let cfg = with_policy(VersionPolicy::NoDowngrade);
    for seed in 0..6 {
        let db = db();
        let a = start(&db, "a", Some("2.0.0"), 1, seed, &cfg);
        a.elected().await.unwrap();
        let b_old = start(&db, "b", Some("1.0.0"), 9, seed + 10, &cfg);
        let b_new = start(&db, "b", Some("2.0.0"), 1, seed + 20, &cfg);
        let c = start(&db, "c", Some("2.0.0"), 1, seed + 30, &cfg);
        tokio::time::sleep(HEARTBEAT * 5).await;
        let op = CandidateId::random("ops").unwrap();
        let asked = db
            .run(|txn, _| {
                let op = op.clone();
                async move {
                    LeaderElection::new(subspace())
                        .request_resign_to(&txn, &op, Ballot::new(1), "b")
                        .await
                }
            })
            .await;
        assert!(
            matches!(asked, Ok(OperatorOutcome::Done { .. })),
            "{asked:?}"
        );
        let mut last = 1;
        until_safe(
            "b",
            &[&a, &b_old, &b_new, &c],
            LEASE * 10,
            &mut last,
            || b_old.is_leader() || b_new.is_leader() || c.is_leader(),
        )
        .await;
        assert!(b_new.is_leader(), "seed {seed}: the 2.0.0 b leads");
        // And the 1.0.0 b by its id is refused.
        let id = b_old.id().unwrap().to_string();
        let asked = db
            .run(|txn, _| {
                let (op, id) = (op.clone(), id.clone());
                async move {
                    LeaderElection::new(subspace())
                        .request_resign_to(&txn, &op, Ballot::new(2), &id)
                        .await
                }
            })
            .await;
        assert!(
            matches!(&asked, Err(ElectionError::OperatorRefused { reason }) if reason.contains("no-downgrade")),
            "{asked:?}"
        );
        shutdown_all(&[&a, &b_old, &b_new, &c]).await;
    }
}

/// As above with the reservation timeout equal to the heartbeat (100 ms).
#[tokio::test(start_paused = true)]
async fn a_reservation_timeout_of_one_heartbeat_does_not_let_an_older_follower_take_a_lapsed_lease()
{
    let cfg = with_policy(VersionPolicy::NoDowngrade)
        .to_builder()
        .reservation_timeout(HEARTBEAT)
        .build()
        .unwrap();
    the_older_follower_never_takes_the_lapse(&cfg, 0..40).await;
}

/// prefer-newest and prefer-oldest after a crash, then preemption: the follower the policy
/// ranks first takes the lapsed lease (the other one has the higher priority), and the higher
/// priority does not preempt it afterwards.
#[tokio::test(start_paused = true)]
async fn after_a_crash_the_policys_first_leads_and_priority_does_not_preempt_it() {
    for (policy, leader_v, prio_v, policy_v) in [
        (VersionPolicy::PreferNewest, "1.0.0", "1.0.0", "2.0.0"),
        (VersionPolicy::PreferOldest, "1.0.0", "2.0.0", "1.0.0"),
    ] {
        let cfg = with_policy(policy);
        for seed in 0..10 {
            let db = db();
            let a = start(&db, "a", Some(leader_v), 1, seed, &cfg);
            a.elected().await.unwrap();
            // Under prefer-newest `p` (priority 9, same version as the leader) would preempt
            // the leader: give the leader the same priority there.
            let p = start(&db, "p", Some(prio_v), 9, seed + 40, &cfg);
            let q = start(&db, "q", Some(policy_v), 1, seed + 80, &cfg);
            tokio::time::sleep(HEARTBEAT * 5).await;
            if policy == VersionPolicy::PreferNewest {
                // q (2.0.0) outranks the 1.0.0 leader: it took over cooperatively already.
                assert!(q.is_leader(), "{policy} seed {seed}");
                q.abort();
                let mut last = 0;
                until_safe("a or p", &[&a, &p], LEASE * 10, &mut last, || {
                    a.is_leader() || p.is_leader()
                })
                .await;
                shutdown_all(&[&a, &p]).await;
                continue;
            }
            assert!(a.is_leader(), "{policy} seed {seed}");
            a.abort();
            let mut last = 1;
            until_safe("successor", &[&p, &q], LEASE * 10, &mut last, || {
                p.is_leader() || q.is_leader()
            })
            .await;
            assert!(q.is_leader(), "{policy} seed {seed}: p took over");
            watch_safety("after", &[&p, &q], LEASE * 4, &mut last).await;
            assert!(q.is_leader(), "{policy} seed {seed}: p preempted q");
            shutdown_all(&[&p, &q]).await;
        }
    }
}
