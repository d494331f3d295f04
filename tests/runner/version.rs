//! Versions through the public API (docs/design.md §14): `RunnerBuilder::version` and
//! `ShardedRunnerBuilder::version` (an invalid one a typed build error), the version in the
//! registry and in the runner's view of the leader, candidates without a version ranked as the
//! oldest under every policy, and the sharded election's coordinator election following the
//! policy. In tokio's paused time.

use crate::runner_support::*;
use fdb_leader_election::runner::{BuildError, Runner, RunnerBuilder};
use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, ElectionError, LeaderElection, MemDb, Priority,
    Version, VersionPolicy,
};
use foundationdb_tuple::Subspace;

/// The tests' configuration under `policy`.
pub(crate) fn with_policy(policy: VersionPolicy) -> ElectionConfig {
    config()
        .to_builder()
        .version_policy(policy)
        .build()
        .unwrap()
}

/// Changes the stored configuration's version policy to `policy`.
pub(crate) async fn set_policy(db: &MemDb, policy: VersionPolicy) {
    in_txn!(db, [], |txn| {
        let e = LeaderElection::new(subspace());
        let cfg = e.read_config(&txn).await?;
        let cfg = cfg
            .to_builder()
            .version_policy(policy)
            .build()
            .map_err(ElectionError::InvalidConfig)?;
        e.write_config(&txn, &cfg).await
    })
    .unwrap();
}

/// A candidate of the manual API named `name`, running `version`.
pub(crate) fn candidate(name: &str, version: &str, priority: i32) -> Candidate {
    let c = Candidate::new(CandidateId::random(name).unwrap(), Priority::new(priority));
    c.set_version(Some(Version::parse(version).unwrap()));
    c
}

/// The election at [`subspace`] on `db` under `config`, with `a` registered and leading at
/// ballot 1, then `b` and `c` registered: the manual API's set-up of a directed resign.
pub(crate) async fn a_leads_b_and_c_follow(
    db: &MemDb,
    config: &ElectionConfig,
    [a, b, c]: [&Candidate; 3],
) -> LeaderElection {
    let election = LeaderElection::new(subspace());
    let (e, cfg, ra, rb, rc) = (
        election.clone(),
        config.clone(),
        a.clone(),
        b.clone(),
        c.clone(),
    );
    in_txn!(db, [e, cfg, a = ra], |txn| {
        e.initialize_with_config(&txn, &cfg).await?;
        e.register_candidate(&txn, &a).await
    })
    .unwrap();
    assert!(election.run_cycle(db, a).await.unwrap().is_leader());
    in_txn!(db, [e, b = rb, c = rc], |txn| {
        e.register_candidate(&txn, &b).await?;
        e.register_candidate(&txn, &c).await
    })
    .unwrap();
    election
}

/// Each listed candidate's name and whether the version policy lets it lead.
pub(crate) async fn policy_allows(db: &MemDb, election: &LeaderElection) -> Vec<(String, bool)> {
    let e = election.clone();
    let listed = in_txn!(db, [e], |txn| e.list_candidates(&txn).await).unwrap();
    listed
        .iter()
        .map(|i| (i.id.name().to_owned(), i.policy_allows))
        .collect()
}

/// A runner of priority 1, `version` if given, under `policy` (if it creates the election).
fn versioned(db: &MemDb, name: &str, version: Option<&str>, policy: VersionPolicy) -> Runner {
    let b: RunnerBuilder<MemDb> = builder(db.clone(), name, 1).config(with_policy(policy));
    match version {
        Some(v) => b.version(v),
        None => b,
    }
    .start()
    .unwrap()
}

/// The runner that leads once the election has settled (a lease and more of no change).
async fn settled<'a>(runners: &[&'a Runner]) -> &'a Runner {
    tokio::time::sleep(LEASE * 4).await;
    let leaders: Vec<&Runner> = runners.iter().copied().filter(|r| r.is_leader()).collect();
    assert_eq!(leaders.len(), 1, "exactly one leader once settled");
    leaders[0]
}

#[tokio::test(start_paused = true)]
async fn an_invalid_version_is_a_typed_build_error_with_the_string_and_the_cause() {
    let db = db();
    for bad in ["1.5", "v1.5.0", "", "1.5.0.0", "01.5.0"] {
        let err = builder(db.clone(), "a", 1)
            .version(bad)
            .start()
            .unwrap_err();
        let BuildError::InvalidVersion { version, .. } = &err else {
            panic!("{bad:?}: {err:?}");
        };
        assert_eq!(version, bad);
        assert!(
            err.to_string().contains(&format!("{bad:?}"))
                && err.to_string().contains("MAJOR.MINOR.PATCH, e.g. 1.5.0"),
            "{err}"
        );
        // The semver crate's reason is the source.
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(source.is_some_and(|s| !s.is_empty()), "{err:?}");
        let err = ShardedRunner::builder(db.clone(), Subspace::from("sharded"))
            .version(bad)
            .start()
            .err()
            .unwrap();
        assert!(
            matches!(&err, BuildError::InvalidVersion { version, .. } if version == bad),
            "{err:?}"
        );
    }
    // Nothing was registered, nothing created.
    let listed = db
        .run(|txn, _| async move {
            fdb_leader_election::LeaderElection::new(subspace())
                .list_candidates(&txn)
                .await
        })
        .await;
    assert!(
        matches!(listed, Err(ElectionError::NotInitialized)),
        "{listed:?}"
    );

    // A version with pre-release and build metadata is one.
    let r = builder(db.clone(), "a", 1)
        .version("2.0.0-rc.1+build.5")
        .start()
        .unwrap();
    assert_eq!(
        r.candidate().and_then(Candidate::version),
        Some(Version::parse("2.0.0-rc.1+build.5").unwrap())
    );
    r.shutdown().await;

    // An observer registers nothing; a candidate given whole carries its own version.
    let err = Runner::observer(db.clone(), subspace())
        .version("1.0.0")
        .start()
        .unwrap_err();
    assert_conflicting(&err, "version", "an observer");
    let c = Candidate::new(CandidateId::random("c").unwrap(), Priority::new(1));
    let err = Runner::builder(db.clone(), subspace())
        .candidate(c)
        .version("1.0.0")
        .start()
        .unwrap_err();
    assert_conflicting(&err, "version", "candidate");
}

#[tokio::test(start_paused = true)]
async fn the_version_is_registered_and_the_leader_and_its_changes_carry_it() {
    let db = db();
    let observer = Runner::observer(db.clone(), subspace()).start().unwrap();
    let mut changes = observer.subscribe();
    let a = versioned(&db, "a", Some("1.4.0"), VersionPolicy::PreferNewest);
    a.elected().await.unwrap();
    let first = changes.recv().await.unwrap();
    assert_eq!(
        first.new.as_ref().and_then(|l| l.version.clone()),
        Some(Version::new(1, 4, 0))
    );
    let b = versioned(&db, "b", Some("1.5.0"), VersionPolicy::PreferNewest);
    b.elected().await.unwrap();
    // Every view of the leader has its version: the runners', the observer's, the record's.
    for r in [&a, &b, &observer] {
        assert_eq!(
            r.leader().and_then(|l| l.version),
            Some(Version::new(1, 5, 0))
        );
    }
    // The observer's changes: a steps down (its version the old one's), b takes over.
    let mut seen = Vec::new();
    loop {
        let c = changes.recv().await.unwrap();
        let done = c.new.is_some();
        seen.push(c);
        if done {
            break;
        }
    }
    assert_eq!(
        seen.last().and_then(|c| c.new.as_ref()?.version.clone()),
        Some(Version::new(1, 5, 0))
    );
    assert!(
        seen.iter()
            .any(|c| c.old.as_ref().and_then(|l| l.version.clone()) == Some(Version::new(1, 4, 0))),
        "{seen:?}"
    );
    let (record, listed) = db
        .run(|txn, _| async move {
            let e = fdb_leader_election::LeaderElection::new(subspace());
            Ok::<_, ElectionError>((e.leader_record(&txn).await?, e.list_candidates(&txn).await?))
        })
        .await
        .unwrap();
    assert_eq!(record.leader_version(), Some(&Version::new(1, 5, 0)));
    let version_of = |r: &Runner| {
        listed
            .iter()
            .find(|c| Some(&c.id) == r.id())
            .and_then(|c| c.record.version().cloned())
    };
    assert_eq!(version_of(&a), Some(Version::new(1, 4, 0)));
    assert_eq!(version_of(&b), Some(Version::new(1, 5, 0)));
    // A leader without a version: none in its info.
    b.shutdown().await;
    a.shutdown().await;
    let c = versioned(&db, "c", None, VersionPolicy::PreferNewest);
    c.elected().await.unwrap();
    assert_eq!(c.leader().map(|l| l.version), Some(None));
    c.shutdown().await;
    observer.shutdown().await;
}

/// Candidates that registered no version rank as the oldest under every policy: below any
/// version (0.0.0 included) under prefer-newest, above any under prefer-oldest, and as older
/// than a versioned leader under no-downgrade. Under ignore, versions play no part.
#[tokio::test(start_paused = true)]
async fn candidates_without_a_version_rank_as_the_oldest_under_every_policy() {
    // prefer-newest: a versionless leader hands over to 0.0.0, which never hands back.
    let db = db();
    let bare = versioned(&db, "bare", None, VersionPolicy::PreferNewest);
    bare.elected().await.unwrap();
    let zero = versioned(&db, "zero", Some("0.0.0"), VersionPolicy::PreferNewest);
    assert_eq!(settled(&[&bare, &zero]).await.id(), zero.id());
    zero.shutdown().await;
    bare.shutdown().await;

    // prefer-oldest: a versionless candidate takes over from any version.
    let db = self::db();
    let zero = versioned(&db, "zero", Some("0.0.0"), VersionPolicy::PreferOldest);
    zero.elected().await.unwrap();
    let bare = versioned(&db, "bare", None, VersionPolicy::PreferOldest);
    assert_eq!(settled(&[&bare, &zero]).await.id(), bare.id());
    zero.shutdown().await;
    bare.shutdown().await;

    // no-downgrade: under a versioned leader, a versionless candidate is older: it does not
    // get the leadership the leader hands over, although it registered first and a versioned
    // candidate registered after it.
    let db = self::db();
    let leader = versioned(&db, "leader", Some("1.0.0"), VersionPolicy::NoDowngrade);
    leader.elected().await.unwrap();
    let bare = versioned(&db, "bare", None, VersionPolicy::NoDowngrade);
    tokio::time::sleep(HEARTBEAT * 3).await;
    let same = versioned(&db, "same", Some("1.0.0"), VersionPolicy::NoDowngrade);
    tokio::time::sleep(HEARTBEAT * 3).await;
    assert!(leader.is_leader(), "equal standings never preempt");
    leader.shutdown().await;
    assert_eq!(settled(&[&bare, &same]).await.id(), same.id());
    same.shutdown().await;
    bare.shutdown().await;

    // ignore (the control): the first to lead keeps leading, versions or not.
    for (first, second) in [(None, Some("9.0.0")), (Some("0.0.0"), None)] {
        let db = self::db();
        let one = versioned(&db, "one", first, VersionPolicy::Ignore);
        one.elected().await.unwrap();
        let two = versioned(&db, "two", second, VersionPolicy::Ignore);
        assert_eq!(settled(&[&one, &two]).await.id(), one.id());
        two.shutdown().await;
        one.shutdown().await;
    }
}

/// The members of a sharded election register their version in its coordinator election,
/// which follows the sharded election's version policy (issue 33 item 2).
#[tokio::test(start_paused = true)]
async fn the_sharded_coordinator_election_follows_the_version_policy() {
    let member = |db: &MemDb, version: &str, policy: VersionPolicy| {
        ShardedRunner::builder(db.clone(), Subspace::from("sharded"))
            .label(format!("m{version}"))
            .shards(4)
            .version(version)
            .config(with_policy(policy))
            .start()
            .unwrap()
    };
    let coordinators = |ms: &[&ShardedRunner]| -> Vec<String> {
        ms.iter()
            .filter(|m| m.is_coordinator())
            .map(|m| m.id().to_string())
            .collect()
    };
    for policy in VersionPolicy::ALL {
        let db = db();
        let old = member(&db, "1.4.0", policy);
        tokio::time::sleep(LEASE * 4).await;
        assert!(old.is_coordinator(), "{policy}");
        let new = member(&db, "1.5.0", policy);
        tokio::time::sleep(LEASE * 4).await;
        let expected = match policy {
            VersionPolicy::PreferNewest => &new,
            _ => &old,
        };
        assert_eq!(
            coordinators(&[&old, &new]),
            [expected.id().to_string()],
            "{policy}: the coordinator with 1.4.0 and 1.5.0 live"
        );
        // Its registration in the coordinator election carries the version.
        let e = old.election().coordinator_election().clone();
        let listed = in_txn!(db, [e], |txn| e.list_candidates(&txn).await).unwrap();
        let mut versions: Vec<String> = listed
            .iter()
            .filter_map(|c| c.record.version().map(ToString::to_string))
            .collect();
        versions.sort();
        assert_eq!(versions, ["1.4.0", "1.5.0"], "{policy}");
        // The old member leaves: the new one coordinates, under every policy.
        old.shutdown().await;
        tokio::time::sleep(LEASE * 4).await;
        assert!(new.is_coordinator(), "{policy}");
        new.shutdown().await;
    }
}

/// Three runners under no-downgrade: `a` (2.0.0) leads, `b` (1.0.0, the highest priority) and
/// `c` (2.0.0) follow. `b`'s and `c`'s heartbeats are seeded from `seed`, so their waits for
/// the lapse start in either order.
async fn upgrade_trio(seed: u64) -> (Runner, Runner, Runner) {
    let db = db();
    let start = |name: &str, version: &str, priority: i32, seed: u64| {
        builder(db.clone(), name, priority)
            .config(with_policy(VersionPolicy::NoDowngrade))
            .version(version)
            .seed(seed)
            .start()
            .unwrap()
    };
    let a = start("a", "2.0.0", 1, seed);
    a.elected().await.unwrap();
    let b = start("b", "1.0.0", 9, seed.wrapping_mul(31).wrapping_add(7));
    let c = start("c", "2.0.0", 1, seed.wrapping_mul(17).wrapping_add(3));
    tokio::time::sleep(HEARTBEAT * 5).await;
    assert!(
        a.is_leader(),
        "seed {seed}: a still leads (b and c never outrank it)"
    );
    (a, b, c)
}

/// Issue 38 item 1: a lapsed-lease takeover honours the ranking. After a crash of a 2.0.0
/// leader, a 1.0.0 follower of a higher priority never takes the lapsed lease while a 2.0.0
/// follower is live, whichever of them started waiting first (before the fix, about a quarter
/// of the seeds made `b` lead at ballot 2, and `no-downgrade` then ranked against it).
#[tokio::test(start_paused = true)]
async fn a_crashed_leaders_lease_goes_to_the_version_no_downgrade_allows() {
    for seed in 0..20 {
        let (a, b, c) = upgrade_trio(seed).await;
        a.abort();
        wait_until("a successor", LEASE * 10, || b.is_leader() || c.is_leader()).await;
        assert!(
            c.is_leader() && !b.is_leader(),
            "seed {seed}: the 1.0.0 follower took the 2.0.0 leader's lapsed lease while the \
             2.0.0 follower was live"
        );
        assert_eq!(c.leadership().unwrap().ballot().get(), 2, "seed {seed}");
        tokio::time::sleep(LEASE * 2).await;
        assert!(c.is_leader() && !b.is_leader(), "seed {seed}: and keeps it");
        b.shutdown().await;
        c.shutdown().await;
    }
}

/// The other side of the rule: a 2.0.0 follower that crashed with the leader does not hold the
/// election up longer than its silence takes to hear (the reservation timeout, two
/// heartbeats, from the last part of the lease): the 1.0.0 follower takes over, as the only
/// one left.
#[tokio::test(start_paused = true)]
async fn a_newer_follower_that_crashed_with_the_leader_is_passed_over_within_the_timeout() {
    for seed in 0..5 {
        let (a, b, c) = upgrade_trio(seed).await;
        a.abort();
        c.abort();
        let took = wait_until("the 1.0.0 follower", LEASE * 10, || b.is_leader()).await;
        let bound = LEASE + HEARTBEAT * 3;
        assert!(
            took <= bound,
            "seed {seed}: took {took:?}, more than a lease and the silence ({bound:?})"
        );
        assert_eq!(b.leadership().unwrap().ballot().get(), 2, "seed {seed}");
        b.shutdown().await;
    }
}

/// Issue 38 item 2: `resign --to` agrees with the version policy. Under no-downgrade, with the
/// leader `a` and `c` on 2.0.0, a directed resign to `b` (1.0.0) is refused, naming the
/// policy and the versions, and writes nothing; `status` (the library's `list_candidates`)
/// says the policy does not let `b` lead. With `c` gone, or under `ignore`, it is accepted.
#[tokio::test]
async fn a_directed_resign_to_a_version_the_policy_does_not_allow_is_refused() {
    use fdb_leader_election::{Ballot, OperatorOutcome};
    let db = MemDb::new();
    let config = with_policy(VersionPolicy::NoDowngrade);
    let (a, b, c) = (
        candidate("a", "2.0.0", 1),
        candidate("b", "1.0.0", 9),
        candidate("c", "2.0.0", 1),
    );
    let election = a_leads_b_and_c_follow(&db, &config, [&a, &b, &c]).await;
    let operator = CandidateId::random("ops").unwrap();
    let ask = |to: &'static str| {
        let (e, op) = (election.clone(), operator.clone());
        let db = db.clone();
        async move {
            in_txn!(db, [e, op], |txn| e
                .request_resign_to(&txn, &op, Ballot::new(1), to)
                .await)
        }
    };
    let err = ask("b").await.unwrap_err();
    let ElectionError::OperatorRefused { reason } = &err else {
        panic!("{err:?}");
    };
    for needle in [
        "no-downgrade",
        "\"b\" (1.0.0)",
        "(2.0.0)",
        "the leader runs 2.0.0",
    ] {
        assert!(reason.contains(needle), "{needle:?} in {reason}");
    }
    let record = {
        let e = election.clone();
        in_txn!(db, [e], |txn| e.leader_record(&txn).await).unwrap()
    };
    assert!(record.operator_request().is_none(), "nothing was written");
    assert_eq!(
        policy_allows(&db, &election).await,
        [("a".into(), true), ("b".into(), false), ("c".into(), true)]
    );
    // c is the one the policy allows.
    assert!(matches!(ask("c").await, Ok(OperatorOutcome::Done { .. })));
    // Under ignore, b may be named.
    set_policy(&db, VersionPolicy::Ignore).await;
    assert!(matches!(ask("b").await, Ok(OperatorOutcome::Done { .. })));
}
