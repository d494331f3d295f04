//! End-to-end election tests over MemDb: the shared scenarios, then MemDb-only fault
//! injection, corrupt values and size limits.

use crate::runner_support::in_txn;

use std::sync::Arc;
use std::time::Duration;

use crate::common::scenarios::{self, Backend, World};
use fdb_leader_election::{
    Action, Ballot, Candidate, CandidateId, CommitFault, ElectionConfig, ElectionError,
    ElectionTxn, LeaderElection, MAX_CANDIDATE_ID_BYTES, MAX_PAYLOAD_BYTES, MemDb, Priority,
    ReadMode, ResignOutcome, RunOptions, ScriptedFaults,
};
use foundationdb_tuple::Subspace;

struct Mem {
    db: MemDb,
    election: LeaderElection,
}

impl Mem {
    fn new() -> Self {
        Mem {
            db: MemDb::new(),
            election: LeaderElection::new(Subspace::from("election")),
        }
    }
}

impl Mem {
    /// Writes raw bytes at `key`, bypassing the election (to plant corrupt values).
    async fn set_raw(&self, key: &[u8], value: &[u8]) {
        self.db
            .run(|txn, _| {
                let (k, v) = (key.to_vec(), value.to_vec());
                async move {
                    txn.set(&k, &v);
                    Ok::<(), ElectionError>(())
                }
            })
            .await
            .unwrap();
    }

    async fn get_raw(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.db
            .run(|txn, _| {
                let k = key.to_vec();
                async move { Ok::<_, ElectionError>(txn.get(&k, ReadMode::Snapshot).await?) }
            })
            .await
            .unwrap()
    }

    async fn list(&self) -> Result<Vec<fdb_leader_election::CandidateInfo>, ElectionError> {
        in_txn!(self.db, [e = self.election], |txn| e
            .list_candidates(&txn)
            .await)
    }
}

scenarios::run_loop_backend!(Mem, db);

macro_rules! scenario {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                scenarios::$name(&Mem::new()).await;
            }
        )*
    };
}

scenarios::every_scenario!(scenario);

async fn setup(m: &Mem, w: &World, labels: &[(&str, i32)]) -> Vec<Candidate> {
    m.init(&ElectionConfig::default()).await.unwrap();
    let mut out = Vec::new();
    for (l, p) in labels {
        let c = w.candidate(l, *p);
        m.register(&c).await.unwrap();
        out.push(c);
    }
    out
}

#[tokio::test]
async fn an_unknown_commit_that_applied_is_recognised_and_never_bumps_the_ballot_twice() {
    let m = Mem::new();
    let w = World::new();
    let a = setup(&m, &w, &[("a", 1)]).await.remove(0);
    let faults = ScriptedFaults::new();
    m.db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownApplied);
    // One attempt only: the caller sees the unknown result and drops the cycle.
    let err =
        m.db.run_with(RunOptions::default().with_max_attempts(1), |txn, _| {
            let (e, c) = (m.election.clone(), a.clone());
            async move { e.run_election_cycle(&txn, &c).await }
        })
        .await
        .unwrap_err();
    assert!(err.is_maybe_committed());
    assert!(
        !a.believes_it_leads(),
        "nothing is adopted from an unconfirmed commit"
    );
    // The next cycle finds its own attempt id in the record: leader at ballot 1, renewed.
    let (action, res) = m.cycle(&a).await.unwrap();
    assert_eq!(action, Action::Renewed);
    assert!(res.is_leader());
    assert_eq!(m.record().await.unwrap().ballot(), Ballot::new(1));
}

#[tokio::test]
async fn an_unknown_commit_retried_by_run_is_applied_once() {
    let m = Mem::new();
    let w = World::new();
    let a = setup(&m, &w, &[("a", 1)]).await.remove(0);
    let faults = ScriptedFaults::new();
    m.db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownApplied);
    let (action, res) = m.cycle(&a).await.unwrap();
    // The retry recognised the applied claim and renewed it instead of claiming again.
    assert_eq!(action, Action::Renewed);
    assert!(res.is_leader());
    assert_eq!(m.record().await.unwrap().ballot(), Ballot::new(1));
}

#[tokio::test]
async fn an_unknown_commit_that_did_not_apply_is_retried_to_a_single_claim() {
    let m = Mem::new();
    let w = World::new();
    let a = setup(&m, &w, &[("a", 1)]).await.remove(0);
    let faults = ScriptedFaults::new();
    m.db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownNotApplied);
    let (action, res) = m.cycle(&a).await.unwrap();
    assert_eq!(action, Action::Acquired);
    assert!(res.is_leader());
    assert_eq!(m.record().await.unwrap().ballot(), Ballot::new(1));
}

#[tokio::test]
async fn forced_conflicts_are_retried() {
    let m = Mem::new();
    let w = World::new();
    let a = setup(&m, &w, &[("a", 1)]).await.remove(0);
    let faults = ScriptedFaults::new();
    m.db.set_fault_injector(Arc::new(faults.clone()));
    for _ in 0..3 {
        faults.push_commit_fault(CommitFault::Conflict);
    }
    let before = m.db.stats();
    let (action, _) = m.cycle(&a).await.unwrap();
    assert_eq!(action, Action::Acquired);
    let stats = m.db.stats().since(&before);
    assert_eq!(stats.conflicts, 3);
    assert_eq!(stats.commits_succeeded, 1);
}

#[tokio::test]
async fn a_follower_cycle_never_aborts_because_of_a_renewal() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("leader", 1), ("follower", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    // Interleave: the follower's transaction reads, the leader renews, the follower commits.
    let txn = m.db.create_transaction();
    let cycle = m.election.run_election_cycle(&txn, &c[1]).await.unwrap();
    w.advance(Duration::from_secs(3));
    assert_eq!(m.cycle(&c[0]).await.unwrap().0, Action::Renewed);
    txn.commit().await.unwrap();
    assert!(!c[1].adopt(cycle).is_leader());
}

#[tokio::test]
async fn follower_cycles_cost_four_reads_one_write_and_no_range_read() {
    // Configuration, leader record, own registration, own eligibility mark: one round of
    // concurrent point reads.
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("leader", 1), ("follower", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    m.cycle(&c[1]).await.unwrap();
    let before = m.db.stats();
    m.cycle(&c[1]).await.unwrap();
    let s = m.db.stats().since(&before);
    assert_eq!(
        (s.point_reads, s.range_reads, s.sets + s.clears),
        (4, 0, 1),
        "{s:?}"
    );
    let before = m.db.stats();
    m.cycle(&c[0]).await.unwrap();
    let s = m.db.stats().since(&before);
    assert_eq!(
        (s.point_reads, s.range_reads, s.sets + s.clears),
        (4, 0, 2),
        "{s:?}"
    );
}

/// Writes `bytes` at the key `key_of` picks, runs `op`, and checks it fails with a typed
/// error naming that key, leaving the bytes untouched.
async fn corrupt_case(key: Vec<u8>, bytes: &[u8]) {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1), ("b", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    let key2 = key.clone();
    let bytes2 = bytes.to_vec();
    m.set_raw(&key2, &bytes2).await;
    let results = [
        m.cycle(&c[0]).await.map(|_| ()),
        m.cycle(&c[1]).await.map(|_| ()),
        m.resign(&c[0]).await.map(|_| ()),
        in_txn!(m.db, [e = m.election], |txn| e
            .list_candidates(&txn)
            .await
            .map(|_| ())),
        m.fenced_increment(Ballot::new(1), b"n").await.map(|_| ()),
    ];
    let printable = fdb_leader_election::printable_key(&key);
    let mut typed = 0;
    for r in results {
        match r {
            Err(ElectionError::Corrupt { key, .. })
            | Err(ElectionError::InvalidStoredConfig { key, .. }) => {
                assert_eq!(key, printable);
                typed += 1;
            }
            Ok(()) | Err(_) => {}
        }
    }
    assert!(
        typed > 0,
        "no operation reported the corrupt key {printable}"
    );
    // Nothing overwrote it.
    let stored = m.get_raw(&key).await;
    assert_eq!(stored.as_deref(), Some(bytes));
    assert!(!c[1].believes_it_leads());
}

fn election_key(parts: &str) -> Vec<u8> {
    Subspace::from("election").pack(&(parts,))
}

#[tokio::test]
async fn corrupt_truncated_and_unknown_version_values_give_typed_errors_and_stay_untouched() {
    let keys = vec![
        election_key("config"),
        election_key("leader"),
        election_key("fence"),
    ];
    for key in keys {
        for bytes in [
            &b""[..],
            &b"\x01"[..],
            &b"\x09abc"[..],
            &b"\x01\xff\xff\xff\xff\xff"[..],
        ] {
            corrupt_case(key.clone(), bytes).await;
        }
    }
}

#[tokio::test]
async fn a_corrupt_candidate_record_is_reported_by_its_owner_and_by_listing() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1), ("b", 1)]).await;
    let key = Subspace::from("election").pack(&("candidates", c[1].id().as_str()));
    for bytes in [&b""[..], &b"\x02\x00"[..], &b"\x01\x00"[..]] {
        let v = bytes.to_vec();
        let k = key.clone();
        m.set_raw(&k, &v).await;
        assert!(matches!(
            m.cycle(&c[1]).await,
            Err(ElectionError::Corrupt { .. })
        ));
        let listed = m.list().await;
        assert!(matches!(listed, Err(ElectionError::Corrupt { .. })));
        // Other candidates keep working.
        m.cycle(&c[0]).await.unwrap();
    }
}

#[tokio::test]
async fn the_registration_counter_must_decode_before_a_new_registration() {
    let m = Mem::new();
    let w = World::new();
    setup(&m, &w, &[("a", 1)]).await;
    let key = election_key("registrations");
    m.set_raw(&key, b"\x07").await;
    let late = w.candidate("late", 1);
    assert!(matches!(
        m.register(&late).await,
        Err(ElectionError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn oversized_ids_payloads_metadata_and_keys_are_rejected() {
    assert!(matches!(
        CandidateId::parse(&"x".repeat(MAX_CANDIDATE_ID_BYTES + 1)),
        Err(ElectionError::TooLarge { .. })
    ));
    let w = World::new();
    let c = w.candidate("a", 1);
    assert!(matches!(
        c.set_payload(Some(vec![0; MAX_PAYLOAD_BYTES + 1])),
        Err(ElectionError::TooLarge { .. })
    ));
    c.set_payload(Some(b"kept".to_vec())).unwrap();
    assert!(c.set_payload(Some(vec![0; MAX_PAYLOAD_BYTES + 1])).is_err());
    assert!(matches!(
        c.set_metadata(Some(vec![0; 70_000])),
        Err(ElectionError::TooLarge { .. })
    ));
    // A subspace so long that the candidate key breaks FoundationDB's key limit.
    let m = Mem {
        db: MemDb::new(),
        election: LeaderElection::new(Subspace::from_bytes(vec![b'p'; 9_990])),
    };
    m.init(&ElectionConfig::default()).await.unwrap();
    assert!(matches!(
        m.register(&c).await,
        Err(ElectionError::TooLarge { .. })
    ));
    // The payload that was accepted is published.
    let m = Mem::new();
    m.init(&ElectionConfig::default()).await.unwrap();
    m.register(&c).await.unwrap();
    m.cycle(&c).await.unwrap();
    assert_eq!(m.record().await.unwrap().payload(), Some(&b"kept"[..]));
}

#[tokio::test]
async fn initialize_is_idempotent_and_never_resets_the_ballot() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    m.resign(&c[0]).await.unwrap();
    let custom = ElectionConfig::with_lease_duration(Duration::from_secs(30)).unwrap();
    m.init(&custom).await.unwrap();
    let cfg = in_txn!(m.db, [e = m.election], |txn| e.read_config(&txn).await).unwrap();
    assert_eq!(
        cfg,
        ElectionConfig::default(),
        "initialize never changes a config"
    );
    in_txn!(m.db, [e = m.election, cfg = custom], |txn| e
        .write_config(&txn, &cfg)
        .await)
    .unwrap();
    let rec = m.record().await.unwrap();
    assert_eq!(
        rec.ballot(),
        Ballot::new(1),
        "ballots survive resign, re-init and config changes"
    );
    m.cycle(&c[0]).await.unwrap();
    let rec = m.record().await.unwrap();
    assert_eq!(rec.ballot(), Ballot::new(2));
    assert_eq!(rec.lease_duration(), Duration::from_secs(30));
}

#[tokio::test]
async fn an_uninitialized_election_is_a_typed_error() {
    let m = Mem::new();
    let w = World::new();
    let c = w.candidate("a", 1);
    assert!(matches!(
        m.register(&c).await,
        Err(ElectionError::NotInitialized)
    ));
    assert!(matches!(
        m.record().await,
        Err(ElectionError::NotInitialized)
    ));
}

#[tokio::test]
async fn eviction_removes_only_dead_candidates_and_never_the_leader() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("leader", 1), ("live", 1), ("dead", 1)]).await;
    for _ in 0..10 {
        m.cycle(&c[0]).await.unwrap();
        m.cycle(&c[1]).await.unwrap();
        w.advance(Duration::from_secs(3));
    }
    let evicted = in_txn!(m.db, [e = m.election], |txn| e
        .evict_dead_candidates(&txn)
        .await)
    .unwrap();
    assert_eq!(evicted, vec![c[2].id().clone()]);
    let listed = m.list().await.unwrap();
    let ids: Vec<_> = listed.iter().map(|i| i.id.clone()).collect();
    assert_eq!(ids, vec![c[0].id().clone(), c[1].id().clone()]);
    assert!(listed.iter().all(|i| i.live));
    // The evicted candidate can no longer claim.
    assert!(matches!(
        m.cycle(&c[2]).await,
        Err(ElectionError::NotRegistered { .. })
    ));
}

#[tokio::test]
async fn unregistering_the_leader_resigns_in_the_same_transaction() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1), ("b", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    m.cycle(&c[1]).await.unwrap();
    let out = in_txn!(m.db, [e = m.election, a = c[0]], |txn| e
        .unregister_candidate(&txn, &a)
        .await)
    .unwrap();
    assert!(matches!(out, Some(ResignOutcome::Resigned { .. })));
    assert!(!c[0].believes_it_leads());
    assert_eq!(m.cycle(&c[1]).await.unwrap().0, Action::Acquired);
}

#[tokio::test]
async fn followers_see_the_leader_payload_and_observers_detect_a_lapse() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1), ("observer", 0)]).await;
    c[0].set_payload(Some(b"10.0.0.7:8080".to_vec())).unwrap();
    m.cycle(&c[0]).await.unwrap();
    // The lapse is judged from the observation the observer's own cycles made (a query never
    // times anything): one cycle sees the record.
    let observer = c[1].clone();
    assert_eq!(m.cycle(&observer).await.unwrap().0, Action::None);
    let look = || {
        let (e, o) = (m.election.clone(), observer.clone());
        m.db.run(move |txn, _| {
            let (e, o) = (e.clone(), o.clone());
            async move { e.current_leader(&txn, &o).await }
        })
    };
    let seen = look().await.unwrap().unwrap();
    assert_eq!(seen.payload.as_deref(), Some(&b"10.0.0.7:8080"[..]));
    assert_eq!(seen.leader_id, c[0].id().clone());
    w.advance(Duration::from_secs(9));
    assert!(look().await.unwrap().is_some());
    w.advance(Duration::from_secs(1));
    assert!(
        look().await.unwrap().is_none(),
        "unchanged for a full lease: lapsed"
    );
}

#[tokio::test]
async fn a_watch_on_the_leader_fires_on_renewal() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    let txn = m.db.create_transaction();
    let watch = m.election.watch_leader(&txn).unwrap();
    txn.commit().await.unwrap();
    w.advance(Duration::from_secs(3));
    m.cycle(&c[0]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_candidate_restarted_under_a_new_id_waits_like_anyone() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("svc", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    // The process restarts: a new incarnation, new id, same label.
    let reborn = w.candidate("svc", 1);
    m.register(&reborn).await.unwrap();
    assert_eq!(m.cycle(&reborn).await.unwrap().0, Action::None);
    w.advance(Duration::from_secs(10));
    assert_eq!(m.cycle(&reborn).await.unwrap().0, Action::Acquired);
    assert_eq!(reborn.fencing_token(), Some(Ballot::new(2)));
    let _ = Priority::new(0);
}

#[tokio::test]
async fn re_registering_keeps_the_order_and_the_heartbeat_and_updates_the_priority() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1), ("b", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    m.cycle(&c[0]).await.unwrap();
    c[0].set_priority(Priority::new(7));
    c[0].set_metadata(Some(b"v2".to_vec())).unwrap();
    m.register(&c[0]).await.unwrap();
    let rec = in_txn!(m.db, [e = m.election, id = c[0].id()], |txn| e
        .get_candidate(&txn, &id)
        .await)
    .unwrap()
    .unwrap();
    assert_eq!(rec.registration(), 0);
    assert_eq!(rec.heartbeat(), 3);
    assert_eq!(rec.priority(), Priority::new(7));
    assert_eq!(rec.metadata(), Some(&b"v2"[..]));
}

#[tokio::test]
async fn a_v011_leader_record_is_reported_as_corrupt_not_reinterpreted() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1)]).await;
    // The v0.11 recipe's leader value: an untagged tuple
    // (ballot, leader_id, priority, lease_expiry_nanos, versionstamp).
    let v011 = foundationdb_tuple::pack(&(
        7u64,
        "old-process",
        3i32,
        1_700_000_000_000_000_000u64,
        vec![0u8; 12],
    ));
    let key = election_key("leader");
    let (k, v) = (key.clone(), v011.clone());
    m.set_raw(&k, &v).await;
    match m.cycle(&c[0]).await {
        Err(ElectionError::Corrupt { reason, .. }) => {
            assert!(
                reason.to_string().contains("unknown format version"),
                "{reason}"
            );
        }
        other => panic!("a v0.11 record was not rejected: {other:?}"),
    }
    assert!(!c[0].believes_it_leads());
    let stored = m.get_raw(&key).await;
    assert_eq!(stored, Some(v011));
}

#[tokio::test]
async fn a_deleted_leader_record_is_never_recreated_at_ballot_zero() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    let key = election_key("leader");
    in_txn!(m.db, [k = key], |txn| {
        txn.clear(&k);
        Ok::<(), ElectionError>(())
    })
    .unwrap();
    assert!(matches!(
        m.init(&ElectionConfig::default()).await,
        Err(ElectionError::Corrupt { .. })
    ));
    assert_eq!(m.get_raw(&key).await, None, "nothing was written");
}

async fn operator<F, Fut>(m: &Mem, f: F) -> fdb_leader_election::OperatorOutcome
where
    F: Fn(LeaderElection, fdb_leader_election::MemTransaction) -> Fut,
    Fut: std::future::Future<Output = Result<fdb_leader_election::OperatorOutcome, ElectionError>>,
{
    m.db.run(|txn, _| f(m.election.clone(), txn)).await.unwrap()
}

#[tokio::test]
async fn force_vacate_fences_the_leader_at_once_and_successors_wait_a_lease() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 1), ("f", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    m.cycle(&c[1]).await.unwrap();
    let ops = CandidateId::random("operator").unwrap();
    let wrong = {
        let ops = ops.clone();
        operator(&m, move |e, txn| {
            let ops = ops.clone();
            async move { e.force_vacate(&txn, &ops, Ballot::new(7)).await }
        })
        .await
    };
    assert!(matches!(
        wrong,
        fdb_leader_election::OperatorOutcome::Rejected(_)
    ));
    let done = {
        let ops = ops.clone();
        operator(&m, move |e, txn| {
            let ops = ops.clone();
            async move { e.force_vacate(&txn, &ops, Ballot::new(1)).await }
        })
        .await
    };
    assert_eq!(
        done,
        fdb_leader_election::OperatorOutcome::Done {
            ballot: Ballot::new(2)
        }
    );
    // The old leader is fenced out from this commit on, even though it still believes.
    assert!(c[0].believes_it_leads());
    assert!(matches!(
        m.fenced_increment(Ballot::new(1), b"n").await,
        Err(ElectionError::StaleToken { .. })
    ));
    // Its next cycle ends its belief; nobody takes over before a full lease.
    m.cycle(&c[0]).await.unwrap();
    assert!(!c[0].believes_it_leads());
    for _ in 0..3 {
        assert_eq!(m.cycle(&c[1]).await.unwrap().0, Action::None);
        w.advance(Duration::from_secs(3));
        scenarios::assert_no_overlap(&[&c[0], &c[1]]);
    }
    // A full lease after its first sighting, plus one stagger step: `a` (registered earlier,
    // still live) ranks first.
    w.advance(Duration::from_secs(1));
    assert_eq!(m.cycle(&c[1]).await.unwrap().0, Action::None);
    w.advance(Duration::from_millis(300));
    let (action, _) = m.cycle(&c[1]).await.unwrap();
    assert_eq!(action, Action::Acquired);
    assert_eq!(c[1].fencing_token(), Some(Ballot::new(3)));
}

#[tokio::test]
async fn an_operator_resign_request_makes_the_leader_step_down_cooperatively() {
    let m = Mem::new();
    let w = World::new();
    let c = setup(&m, &w, &[("a", 5), ("f", 1)]).await;
    m.cycle(&c[0]).await.unwrap();
    m.cycle(&c[1]).await.unwrap();
    let ops = CandidateId::random("operator").unwrap();
    let done = operator(&m, move |e, txn| {
        let ops = ops.clone();
        async move { e.request_resign(&txn, &ops, Ballot::new(1)).await }
    })
    .await;
    assert_eq!(
        done,
        fdb_leader_election::OperatorOutcome::Done {
            ballot: Ballot::new(1)
        }
    );
    // The leader steps down at its next cycle (preemption and priorities do not matter) and
    // reserves the vacancy for the best live candidate, who takes over in one commit.
    assert_eq!(m.cycle(&c[0]).await.unwrap().0, Action::HandedOver);
    assert!(!c[0].believes_it_leads());
    let record = m.record().await.unwrap();
    assert_eq!(record.reservation().map(|r| r.id()), Some(c[1].id()));
    assert_eq!(m.cycle(&c[1]).await.unwrap().0, Action::Acquired);
    assert_eq!(c[1].fencing_token(), Some(Ballot::new(2)));
}
