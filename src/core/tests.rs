//! Table-style tests of the decision core: one case per branch, no I/O.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::time::Duration;

use super::cycle::decide_cycle;
use super::rank::{Ranking, Roster, Standing, best_live, rank_among};
use super::resign::{ResignRejected, decide_resign};
use super::*;
use crate::ids::Ballot;
use crate::record::{AttemptId, CandidateRecord, Eligibility, Named};

pub(super) const LEASE: Duration = Duration::from_secs(10);

/// The ranking with versions ignored.
pub(super) const FLAT: Ranking<'static> = Ranking {
    policy: crate::config::VersionPolicy::Ignore,
    leader_version: None,
};

/// The standing of an eligible candidate without a version, of priority `p`.
pub(super) fn standing(p: i32) -> Standing<'static> {
    Standing {
        eligible: true,
        version: None,
        priority: Priority::new(p),
    }
}

pub(super) fn id(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap()
}

pub(super) fn at(ms: u64) -> LocalInstant {
    LocalInstant::from_origin(Duration::from_millis(ms))
}

pub(super) fn cfg() -> ElectionConfig {
    cfg_with(|b| b)
}

/// The configuration `set` makes of a builder without a takeover stagger.
pub(super) fn cfg_with(
    set: impl FnOnce(crate::config::ElectionConfigBuilder) -> crate::config::ElectionConfigBuilder,
) -> ElectionConfig {
    set(ElectionConfig::builder().takeover_stagger(Duration::ZERO))
        .build()
        .unwrap()
}

/// `b` with the lease, heartbeat, candidate and transaction timeouts set, in milliseconds.
pub(super) fn timed(
    b: crate::config::ElectionConfigBuilder,
    lease: u64,
    heartbeat: u64,
    candidate: u64,
    transaction: u64,
) -> crate::config::ElectionConfigBuilder {
    let ms = Duration::from_millis;
    b.lease_duration(ms(lease))
        .heartbeat_interval(ms(heartbeat))
        .candidate_timeout(ms(candidate))
        .transaction_timeout(ms(transaction))
}

/// A retryable failure of `kind`, by a registered candidate.
pub(super) fn failure(kind: &'static str) -> crate::core::runner::Failure {
    crate::core::runner::Failure {
        kind,
        retryable: true,
        not_registered: false,
        not_initialized: false,
    }
}

pub(super) fn owned(owner: &str, prio: i32, ballot: u64, renewal: u64) -> LeaderRecord {
    LeaderRecord {
        ballot: Ballot::new(ballot),
        owner: Some(Named::new(id(owner), Priority::new(prio))),
        renewal,
        lease: LEASE,
        handover: None,
        reservation: None,
        payload: None,
        writer: Some(AttemptId {
            candidate: id(owner),
            seq: 1,
        }),
        handover_to: None,
        leader_version: None,
    }
}

pub(super) fn vacant(ballot: u64, renewal: u64, reserved: Option<(&str, i32)>) -> LeaderRecord {
    LeaderRecord {
        ballot: Ballot::new(ballot),
        owner: None,
        renewal,
        lease: LEASE,
        handover: None,
        reservation: reserved.map(|(i, p)| Party::Candidate(Named::new(id(i), Priority::new(p)))),
        payload: None,
        writer: Some(AttemptId {
            candidate: id("someone"),
            seq: 1,
        }),
        handover_to: None,
        leader_version: None,
    }
}

/// A candidate's handover request.
fn request(who: &str, prio: i32) -> Option<Party> {
    Some(Party::Candidate(Named::new(id(who), Priority::new(prio))))
}

pub(super) type Registry = Vec<(CandidateId, CandidateRecord)>;

/// A live registration (it saw `seen` renewals) with this priority and registration number.
pub(super) fn cand(prio: i32, reg: u64, seen: u64) -> CandidateRecord {
    CandidateRecord {
        priority: Priority::new(prio),
        registration: reg,
        heartbeat: 0,
        seen_renewal: seen,
        metadata: None,
        eligibility: Eligibility::Eligible,
        version: None,
    }
}

/// Everyone `rec` names, registered and live with the priority it names them with; `me` is
/// registered (number 0) by the caller's cycle and is not listed.
pub(super) fn everyone(rec: &LeaderRecord) -> Registry {
    let named = [
        rec.owner.clone(),
        rec.handover.as_ref().and_then(Party::candidate).cloned(),
        rec.reservation.as_ref().and_then(Party::candidate).cloned(),
    ];
    named
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, n)| (n.id, cand(n.priority.get(), i as u64 + 1, rec.renewal)))
        .collect()
}

/// The input of one attempt with t0 = `t0_ms` and the read finishing 1 ms later.
pub(super) fn input<'a>(
    c: &'a ElectionConfig,
    rec: &'a LeaderRecord,
    prio: i32,
    t0_ms: u64,
    mode: Mode,
    lookups: Lookups<'a>,
) -> CycleInput<'a> {
    CycleInput {
        config: c,
        leader: rec,
        priority: Priority::new(prio),
        eligible: true,
        when_ineligible: UnhealthyPolicy::Hold,
        version: None,
        registration: 0,
        payload: Some(b"addr"),
        started_at: at(t0_ms),
        read_at: at(t0_ms + 1),
        read_version: None,
        mode,
        lookups,
    }
}

/// The plan `input` comes to, every lookup it needs answered from `roster`.
pub(super) fn decide_with<'a>(
    st: &mut LocalState,
    mut input: CycleInput<'a>,
    roster: Roster<'a>,
) -> Plan {
    loop {
        match decide_cycle(st, &input).unwrap() {
            Decision::Plan(p) => return p,
            Decision::Need(Lookup::Registry) => input.lookups.registry = Some(roster),
            Decision::Need(Lookup::Requester(_)) => input.lookups.requester = Some(roster),
        }
    }
}

/// One decision, its lookups unanswered.
fn run_raw(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    t0_ms: u64,
) -> Decision {
    decide_cycle(
        st,
        &input(c, rec, prio, t0_ms, Mode::Cycle, Lookups::default()),
    )
    .unwrap()
}

/// One decision, its lookups answered from `registry` (each asked for at most once).
pub(super) fn run_in(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    t0_ms: u64,
    mode: Mode,
    registry: &Registry,
) -> Decision {
    let mut lookups = Lookups::default();
    let mut asked = Vec::new();
    loop {
        match decide_cycle(st, &input(c, rec, prio, t0_ms, mode, lookups)).unwrap() {
            Decision::Need(need) => {
                assert!(!asked.contains(&need), "{need:?} asked for twice");
                match &need {
                    Lookup::Registry => lookups.registry = Some(Roster::unmarked(registry)),
                    Lookup::Requester(_) => {
                        lookups.requester = Some(Roster::unmarked(registry));
                    }
                }
                asked.push(need);
            }
            plan => return plan,
        }
    }
}

/// One decision, with everyone the record names registered and live.
pub(super) fn run(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    t0_ms: u64,
) -> Decision {
    run_mode(st, c, rec, prio, t0_ms, Mode::Cycle)
}

/// A follower that first sees `rec` at 0 ms waits a full lease (10 s): nothing at 0 or at
/// 10,000 ms, the acquisition at 10,001 ms.
fn assert_waits_a_full_lease_then_acquires(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
) {
    assert_eq!(plan(run(st, c, rec, prio, 0)).action, Action::None);
    assert_eq!(plan(run(st, c, rec, prio, 10_000)).action, Action::None);
    assert_eq!(plan(run(st, c, rec, prio, 10_001)).action, Action::Acquired);
}

fn run_mode(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    t0_ms: u64,
    mode: Mode,
) -> Decision {
    run_in(st, c, rec, prio, t0_ms, mode, &everyone(rec))
}

pub(super) fn plan(d: Decision) -> Plan {
    match d {
        Decision::Plan(p) => p,
        Decision::Need(n) => panic!("unexpected lookup {n:?}"),
    }
}

/// Makes `st` the committed leader of `rec` acquired at `t0_ms`, returning the written record.
pub(super) fn lead(st: &mut LocalState, c: &ElectionConfig, prio: i32, t0_ms: u64) -> LeaderRecord {
    let p = plan(run(st, c, &vacant(4, 10, None), prio, t0_ms));
    assert_eq!(p.action, Action::Acquired);
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    p.write.unwrap()
}

#[test]
fn unreserved_vacancy_is_acquired_at_once_with_the_next_ballot() {
    let mut st = LocalState::new(id("me"));
    let p = plan(run(&mut st, &cfg(), &vacant(4, 10, None), 3, 0));
    assert_eq!(p.action, Action::Acquired);
    let w = p.write.unwrap();
    assert_eq!(w.ballot, Ballot::new(5));
    assert_eq!(w.renewal, 11);
    assert_eq!(w.owner, Some(Named::new(id("me"), Priority::new(3))));
    assert_eq!(w.payload.as_deref(), Some(&b"addr"[..]));
    assert_eq!(
        p.fence,
        Some(FenceRecord {
            ballot: Ballot::new(5),
            vacant: false
        })
    );
    // Not leader until the commit is confirmed.
    assert!(st.tenure().is_none());
    let a = p.adopt.unwrap();
    assert_eq!(
        a.tenure.valid_until,
        at(0).saturating_add(cfg().local_validity(LEASE))
    );
    assert!(st.adopt(&a));
    assert_eq!(st.tenure().map(|t| t.ballot), Some(Ballot::new(5)));
}

#[test]
fn a_live_lease_is_taken_over_only_after_a_full_lease_of_unchanged_observation() {
    let c = cfg();
    let rec = owned("old", 1, 7, 20);
    let mut st = LocalState::new(id("me"));
    // First sighting at read_at = 1 ms.
    let p = plan(run(&mut st, &c, &rec, 1, 0));
    assert_eq!(p.action, Action::None);
    assert_eq!(p.next_action_at, Some(at(1).saturating_add(LEASE)));
    // One millisecond short of a full lease since the sighting: nothing.
    assert_eq!(plan(run(&mut st, &c, &rec, 1, 10_000)).action, Action::None);
    // Exactly a full lease after the sighting (attempt starts then): take over.
    let p = plan(run(&mut st, &c, &rec, 1, 10_001));
    assert_eq!(p.action, Action::Acquired);
    assert_eq!(p.write.unwrap().ballot, Ballot::new(8));
}

#[test]
fn any_change_of_observation_restarts_the_wait() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    plan(run(&mut st, &c, &owned("old", 1, 7, 20), 1, 0));
    // The leader renewed at 9 s: the wait restarts from this sighting (9.001 s).
    plan(run(&mut st, &c, &owned("old", 1, 7, 21), 1, 9_000));
    assert_eq!(
        plan(run(&mut st, &c, &owned("old", 1, 7, 21), 1, 19_000)).action,
        Action::None
    );
    assert_eq!(
        plan(run(&mut st, &c, &owned("old", 1, 7, 21), 1, 19_001)).action,
        Action::Acquired
    );
}

#[test]
fn a_handover_request_does_not_restart_followers_timers() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    plan(run(&mut st, &c, &owned("old", 1, 7, 20), 1, 0));
    let mut with_request = owned("old", 1, 7, 20);
    with_request.handover = request("hi", 9);
    // The requester died with the leader (its registration a renewal-limit behind).
    let rows = vec![(id("old"), cand(1, 1, 20)), (id("hi"), cand(9, 2, 0))];
    assert_eq!(
        plan(run_in(
            &mut st,
            &c,
            &with_request,
            1,
            10_001,
            Mode::Cycle,
            &rows
        ))
        .action,
        Action::Acquired
    );
}

#[test]
fn takeover_is_staggered_by_rank() {
    let c = cfg_with(|b| b.takeover_stagger(Duration::from_millis(300)));
    let rec = owned("old", 1, 7, 20);
    let mut st = LocalState::new(id("me"));
    plan(run(&mut st, &c, &rec, 1, 0));
    // Before the lease's last reservation timeout (6 s) the registry is not even looked up.
    assert_eq!(
        plan(run_raw(&mut st, &c, &rec, 1, 4_000)).action,
        Action::None
    );
    assert!(matches!(
        run_raw(&mut st, &c, &rec, 1, 10_001),
        Decision::Need(Lookup::Registry)
    ));
    // Two live candidates rank ahead (higher priorities, one a renewal behind); the old owner,
    // an equal one registered later and a dead higher one do not count.
    let registry = vec![
        (id("old"), cand(9, 0, 20)),
        (id("higher"), cand(2, 5, 20)),
        (id("higher-behind"), cand(3, 7, 19)),
        (id("equal-later"), cand(1, 3, 20)),
        (id("dead"), cand(9, 0, 1)),
    ];
    let p = plan(run_in(&mut st, &c, &rec, 1, 10_001, Mode::Cycle, &registry));
    assert_eq!(p.action, Action::None);
    assert_eq!(p.next_action_at, Some(at(10_001 + 600)));
    // Priority alone is a preference: nobody is deferred to while it heartbeats.
    assert!(st.observed().unwrap().heard.is_empty());
    let p = plan(run_in(&mut st, &c, &rec, 1, 10_600, Mode::Cycle, &registry));
    assert_eq!(p.action, Action::None);
    assert_eq!(
        plan(run_in(&mut st, &c, &rec, 1, 10_601, Mode::Cycle, &registry)).action,
        Action::Acquired
    );
}

#[test]
fn the_stagger_is_capped_at_one_heartbeat() {
    let c = cfg_with(|b| b.takeover_stagger(Duration::from_millis(300)));
    let rec = owned("old", 1, 7, 20);
    let mut st = LocalState::new(id("me"));
    plan(run(&mut st, &c, &rec, 1, 0));
    let registry: Registry = (0..1_000)
        .map(|i| (id(&format!("c{i}")), cand(5, i, 20)))
        .collect();
    let p = plan(run_in(&mut st, &c, &rec, 1, 10_001, Mode::Cycle, &registry));
    assert_eq!(p.next_action_at, Some(at(10_001 + 3_000)));
    assert_eq!(
        plan(run_in(&mut st, &c, &rec, 1, 13_001, Mode::Cycle, &registry)).action,
        Action::Acquired
    );
}

/// Under `no-downgrade`, a lapsed 2.0.0 leader's record: `me` runs 1.0.0 with the highest
/// priority, `c` runs 2.0.0 with a lower one (issue 38's reproduction, in the core).
fn lapsed_upgrade() -> (ElectionConfig, LeaderRecord, Registry, semver::Version) {
    let c = cfg_with(|b| b.version_policy(crate::config::VersionPolicy::NoDowngrade));
    let mut rec = owned("a", 5, 7, 20);
    let v2 = semver::Version::new(2, 0, 0);
    rec.leader_version = Some(v2.clone());
    let mut newer = cand(1, 2, 20);
    newer.version = Some(v2.clone());
    let mut leader = cand(5, 1, 20);
    leader.version = Some(v2.clone());
    let registry = vec![(id("a"), leader), (id("c"), newer)];
    (c, rec, registry, semver::Version::new(1, 0, 0))
}

/// One decision of a candidate of version `v`, its registry lookups answered from `rows`.
fn run_v(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    v: &semver::Version,
    t0_ms: u64,
    rows: &Registry,
) -> Plan {
    let mut lookups = Lookups::default();
    loop {
        let input = CycleInput {
            version: Some(v),
            ..input(c, rec, prio, t0_ms, Mode::Cycle, lookups)
        };
        match decide_cycle(st, &input).unwrap() {
            Decision::Need(Lookup::Registry) if lookups.registry.is_none() => {
                lookups.registry = Some(Roster::unmarked(rows));
            }
            Decision::Need(n) => panic!("unexpected lookup {n:?}"),
            Decision::Plan(p) => return p,
        }
    }
}

#[test]
fn a_lapsed_lease_goes_to_the_candidate_the_policy_ranks_ahead_while_it_heartbeats() {
    let (c, rec, mut rows, v1) = lapsed_upgrade();
    let mut me = LocalState::new(id("me"));
    // me saw the lapsed record first, so its wait ends first: the stagger alone let it win.
    run_v(&mut me, &c, &rec, 9, &v1, 0, &rows);
    // The lease lapses at 10,001 ms, but c (2.0.0, at least the lapsed leader's version) ranks
    // ahead of me (1.0.0) under no-downgrade, whatever the priorities: me defers while c
    // heartbeats. Heard first at 4,002 ms (the lease's last reservation timeout, 6 s).
    let p = run_v(&mut me, &c, &rec, 9, &v1, 4_001, &rows);
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(10_002)))
    );
    let p = run_v(&mut me, &c, &rec, 9, &v1, 7_000, &rows);
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(10_002)))
    );
    rows[1].1.heartbeat = 1; // c heartbeats at 8 s
    let p = run_v(&mut me, &c, &rec, 9, &v1, 8_000, &rows);
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(14_001)))
    );
    rows[1].1.heartbeat = 2; // and at 11 s
    assert_eq!(
        run_v(&mut me, &c, &rec, 9, &v1, 11_000, &rows).action,
        Action::None
    );
    assert_eq!(
        run_v(&mut me, &c, &rec, 9, &v1, 16_000, &rows).action,
        Action::None
    );
    // c fell silent after 11 s (it died): passed over once silent for the reservation
    // timeout on me's clock, at 17,001 ms.
    assert_eq!(
        run_v(&mut me, &c, &rec, 9, &v1, 17_000, &rows).action,
        Action::None
    );
    let p = run_v(&mut me, &c, &rec, 9, &v1, 17_001, &rows);
    assert_eq!(p.action, Action::Acquired);
    assert_eq!(p.write.unwrap().leader_version, Some(v1));
}

#[test]
fn a_candidate_ranked_ahead_that_died_with_the_leader_costs_no_more_than_the_lease() {
    let (c, rec, rows, v1) = lapsed_upgrade();
    let mut me = LocalState::new(id("me"));
    run_v(&mut me, &c, &rec, 9, &v1, 0, &rows);
    // c is heard from 4,002 ms on and never heartbeats again: silent by 10,002 ms, one
    // millisecond after the lapse.
    run_v(&mut me, &c, &rec, 9, &v1, 4_001, &rows);
    assert_eq!(
        run_v(&mut me, &c, &rec, 9, &v1, 10_001, &rows).action,
        Action::None
    );
    assert_eq!(
        run_v(&mut me, &c, &rec, 9, &v1, 10_002, &rows).action,
        Action::Acquired
    );
}

#[test]
fn the_candidate_ranked_first_takes_a_lapsed_lease_at_once() {
    let (c, rec, rows, _) = lapsed_upgrade();
    let v2 = semver::Version::new(2, 0, 0);
    let mut best = LocalState::new(id("c"));
    // c (2.0.0, priority 1) is first under no-downgrade: nobody ahead, no deference.
    run_v(&mut best, &c, &rec, 1, &v2, 0, &rows);
    assert_eq!(
        run_v(&mut best, &c, &rec, 1, &v2, 10_001, &rows).action,
        Action::Acquired
    );
    // Under `ignore`, priority alone ranks: the 1.0.0 candidate of priority 9 is first.
    let (mut flat, _, _, v1) = lapsed_upgrade();
    flat = ElectionConfig::builder()
        .takeover_stagger(flat.takeover_stagger())
        .build()
        .unwrap();
    let mut me = LocalState::new(id("me"));
    run_v(&mut me, &flat, &rec, 9, &v1, 0, &rows);
    assert_eq!(
        run_v(&mut me, &flat, &rec, 9, &v1, 10_001, &rows).action,
        Action::Acquired
    );
}

#[test]
fn no_downgrade_ranks_a_takeover_against_the_lapsed_leaders_version() {
    // The lapsed leader ran 2.0.0; 1.5.0 and 1.0.0 are both older, so priority decides
    // between them: me (1.0.0, priority 9) goes first, c (1.5.0, priority 1) does not count
    // ahead of it.
    let (c, rec, mut rows, v1) = lapsed_upgrade();
    rows[1].1.version = Some(semver::Version::new(1, 5, 0));
    let mut me = LocalState::new(id("me"));
    run_v(&mut me, &c, &rec, 9, &v1, 0, &rows);
    assert_eq!(
        run_v(&mut me, &c, &rec, 9, &v1, 10_001, &rows).action,
        Action::Acquired
    );
}

#[test]
fn vacancies_defer_to_the_version_the_policy_ranks_ahead_too() {
    let c = cfg_with(|b| b.version_policy(crate::config::VersionPolicy::PreferOldest));
    let (old, new) = (semver::Version::new(1, 0, 0), semver::Version::new(1, 1, 0));
    let mut heir = cand(5, 1, 10);
    heir.version = Some(old.clone());
    let mut oldest = cand(1, 2, 10);
    oldest.version = Some(old.clone());
    let rows = vec![(id("heir"), heir), (id("oldest"), oldest)];
    // An unreserved vacancy: under prefer-oldest, oldest (1.0.0) is heard at once, so me
    // (1.1.0, priority 9) waits until it has been silent for the reservation timeout (6 s).
    let mut me = LocalState::new(id("me"));
    let p = run_v(&mut me, &c, &vacant(4, 10, None), 9, &new, 0, &rows);
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(6_001)))
    );
    assert_eq!(
        run_v(&mut me, &c, &vacant(4, 10, None), 9, &new, 6_000, &rows).action,
        Action::Acquired
    );
    // A vacancy reserved for heir: heir is not counted ahead (its own timeout runs), oldest
    // is. Looked up from the first heartbeat on (3,001 ms): oldest silent from 9,002 ms.
    let reserved = vacant(4, 10, Some(("heir", 5)));
    let mut me = LocalState::new(id("me"));
    assert_eq!(
        run_v(&mut me, &c, &reserved, 9, &new, 0, &rows).action,
        Action::None
    );
    let p = run_v(&mut me, &c, &reserved, 9, &new, 3_001, &rows);
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(9_002)))
    );
    assert_eq!(
        run_v(&mut me, &c, &reserved, 9, &new, 9_001, &rows).action,
        Action::Acquired
    );
    // oldest itself takes the reserved vacancy once the reservation timed out (6,001 ms):
    // heir is not ahead of it.
    let mut first = LocalState::new(id("oldest"));
    run_v(&mut first, &c, &reserved, 1, &old, 0, &rows);
    assert_eq!(
        run_v(&mut first, &c, &reserved, 1, &old, 6_000, &rows).action,
        Action::Acquired
    );
}

#[test]
fn rank_zero_takes_an_unreserved_vacancy_at_once_and_others_wait_their_step() {
    let c = cfg_with(|b| b.takeover_stagger(Duration::from_millis(300)));
    let rec = vacant(4, 10, None);
    // "first" registered before "second" (number 0 is the deciding candidate's own).
    let registry = vec![
        (id("first"), cand(1, 0, 10)),
        (id("second"), cand(1, 1, 10)),
    ];
    let mut first = LocalState::new(id("first"));
    assert!(matches!(
        run_raw(&mut first, &c, &rec, 1, 0),
        Decision::Need(Lookup::Registry)
    ));
    assert_eq!(
        plan(run_in(&mut first, &c, &rec, 1, 0, Mode::Cycle, &registry)).action,
        Action::Acquired
    );
    let mut second = LocalState::new(id("second"));
    let later = |st: &mut LocalState, t0_ms| {
        let input = CycleInput {
            registration: 1,
            ..input(
                &c,
                &rec,
                1,
                t0_ms,
                Mode::Cycle,
                Lookups {
                    registry: Some(Roster::unmarked(&registry)),
                    requester: None,
                },
            )
        };
        plan(decide_cycle(st, &input).unwrap())
    };
    assert_eq!(later(&mut second, 0).action, Action::None);
    assert_eq!(later(&mut second, 300).action, Action::Acquired);
}

#[test]
fn a_reservation_is_filled_at_once_by_its_holder_only() {
    let c = cfg();
    let rec = vacant(4, 10, Some(("heir", 5)));
    let mut heir = LocalState::new(id("heir"));
    let p = plan(run(&mut heir, &c, &rec, 5, 0));
    assert_eq!(p.action, Action::Acquired);
    let w = p.write.unwrap();
    assert_eq!((w.ballot, w.reservation), (Ballot::new(5), None));
    // The others wait the reservation timeout (two heartbeats: 6 s), not a lease (docs/design.md §4):
    // first seen at the read of the attempt at 0 (1 ms), open at 6,001 ms.
    let mut other = LocalState::new(id("other"));
    assert_eq!(c.reservation_timeout(), Duration::from_secs(6));
    assert_eq!(plan(run(&mut other, &c, &rec, 9, 0)).action, Action::None);
    let p = plan(run(&mut other, &c, &rec, 9, 5_999));
    assert_eq!(p.action, Action::None);
    assert_eq!(p.next_action_at, Some(at(6_001)));
    assert_eq!(
        plan(run(&mut other, &c, &rec, 9, 6_000)).action,
        Action::Acquired
    );
}

#[test]
fn a_strictly_higher_priority_follower_requests_a_handover_without_changing_the_observation() {
    let c = cfg();
    let rec = owned("old", 1, 7, 20);
    let mut st = LocalState::new(id("new"));
    let p = plan(run(&mut st, &c, &rec, 2, 0));
    assert_eq!(p.action, Action::RequestedHandover);
    let w = p.write.unwrap();
    assert_eq!((w.ballot, w.renewal), (rec.ballot, rec.renewal));
    assert_eq!(w.owner, rec.owner);
    assert_eq!(w.handover, request("new", 2));
    assert_eq!(w.writer, rec.writer, "the owner's attempt id is kept");
    assert!(p.fence.is_none() && p.adopt.is_none());
    // Once requested, it does not write again.
    assert_eq!(plan(run(&mut st, &c, &w, 2, 100)).action, Action::None);
}

#[test]
fn equal_or_lower_priority_never_requests_a_handover() {
    let c = cfg();
    for prio in [0, 1] {
        let mut st = LocalState::new(id("peer"));
        assert_eq!(
            plan(run(&mut st, &c, &owned("old", 1, 7, 20), prio, 0)).action,
            Action::None
        );
    }
}

#[test]
fn disabling_preemption_stops_new_requests() {
    let c = cfg_with(|b| b.allow_preemption(false));
    let mut st = LocalState::new(id("new"));
    assert_eq!(
        plan(run(&mut st, &c, &owned("old", 1, 7, 20), 9, 0)).action,
        Action::None
    );
}

#[test]
fn a_request_is_replaced_only_by_a_strictly_higher_one() {
    let c = cfg();
    let mut rec = owned("old", 1, 7, 20);
    rec.handover = request("mid", 5);
    let mut same = LocalState::new(id("same"));
    assert_eq!(plan(run(&mut same, &c, &rec, 5, 0)).action, Action::None);
    let mut higher = LocalState::new(id("higher"));
    assert_eq!(
        plan(run(&mut higher, &c, &rec, 6, 0)).action,
        Action::RequestedHandover
    );
}

#[test]
fn the_leader_renews_keeping_its_ballot() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 1, 0);
    let p = plan(run(&mut st, &c, &rec, 1, 3_000));
    assert_eq!(p.action, Action::Renewed);
    let w = p.write.unwrap();
    assert_eq!((w.ballot, w.renewal), (rec.ballot, rec.renewal + 1));
    assert!(p.fence.is_none(), "renewals do not touch the fence");
    let a = p.adopt.unwrap();
    assert_eq!(
        a.tenure.valid_until,
        at(3_000).saturating_add(c.local_validity(LEASE))
    );
    assert_eq!(a.tenure.acquired_at, at(0));
    assert!(st.adopt(&a));
}

#[test]
fn a_leader_whose_local_lease_lapsed_demotes_and_treats_its_record_as_foreign() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 1, 0);
    let validity_ms = u64::try_from(c.local_validity(LEASE).as_millis()).unwrap();
    // At the deadline the belief is over: no renewal, the wait starts.
    let p = plan(run(&mut st, &c, &rec, 1, validity_ms + 1));
    assert_eq!(p.action, Action::None);
    assert!(st.tenure().is_none());
    // Reacquiring its own record takes a full lease and a new ballot.
    let first_seen = validity_ms + 2;
    assert_eq!(
        plan(run(&mut st, &c, &rec, 1, first_seen + 9_999)).action,
        Action::None
    );
    let p = plan(run(&mut st, &c, &rec, 1, first_seen + 10_000));
    assert_eq!(p.action, Action::Acquired);
    assert_eq!(p.write.unwrap().ballot, Ballot::new(rec.ballot.get() + 1));
}

#[test]
fn a_leader_whose_record_moved_on_demotes_at_once() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 1, 0);
    let taken = owned("thief", 1, rec.ballot.get() + 1, rec.renewal + 1);
    assert_eq!(plan(run(&mut st, &c, &taken, 1, 100)).action, Action::None);
    assert!(st.tenure().is_none());
}

#[test]
fn the_leader_hands_over_to_a_higher_priority_requester_stepping_down_before_the_commit() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = request("new", 2);
    let p = plan(run(&mut st, &c, &rec, 1, 1_000));
    assert_eq!(p.action, Action::HandedOver);
    assert!(
        st.tenure().is_none(),
        "belief ends before the vacancy can commit"
    );
    let w = p.write.unwrap();
    assert_eq!(
        (w.ballot, w.renewal, w.owner.clone()),
        (rec.ballot, rec.renewal + 1, None)
    );
    assert_eq!(w.reservation, request("new", 2));
    assert_eq!((w.handover.clone(), w.payload.clone()), (None, None));
    assert_eq!(
        p.fence,
        Some(FenceRecord {
            ballot: rec.ballot,
            vacant: true
        })
    );
    assert!(p.adopt.is_none());
}

#[test]
fn a_busy_leader_keeps_renewing_through_the_grace_then_hands_over() {
    let c = cfg_with(|b| b.handover_grace(Duration::from_secs(2)));
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    st.set_busy(true);
    rec.handover = request("new", 2);
    let p = plan(run(&mut st, &c, &rec, 1, 1_000));
    assert_eq!(p.action, Action::Renewed);
    assert_eq!(p.next_action_at, Some(at(3_000)));
    let w = p.write.unwrap();
    assert_eq!(
        w.handover, rec.handover,
        "the request is kept while draining"
    );
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    assert_eq!(plan(run(&mut st, &c, &w, 1, 2_999)).action, Action::Renewed);
    // (the second renewal was not adopted; the first one's record is still current)
    let p = plan(run(&mut st, &c, &w, 1, 3_000));
    assert_eq!(p.action, Action::HandedOver);
}

#[test]
fn an_idle_leader_finishes_draining_early() {
    let c = cfg_with(|b| b.handover_grace(Duration::from_secs(60)));
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = request("new", 2);
    st.set_busy(true);
    assert_eq!(
        plan(run(&mut st, &c, &rec, 1, 1_000)).action,
        Action::Renewed
    );
    st.set_busy(false);
    assert_eq!(
        plan(run(&mut st, &c, &rec, 1, 1_100)).action,
        Action::HandedOver
    );
}

#[test]
fn min_tenure_delays_honouring_a_request() {
    let c = cfg_with(|b| b.min_tenure(Duration::from_secs(5)));
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = request("new", 2);
    let p = plan(run(&mut st, &c, &rec, 1, 4_999));
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::Renewed, Some(at(5_000)))
    );
    assert_eq!(
        plan(run(&mut st, &c, &rec, 1, 5_000)).action,
        Action::HandedOver
    );
}

#[test]
fn a_request_kept_within_the_minimum_tenure_leaves_the_guard_open_until_the_tenures_end() {
    let c = cfg_with(|b| {
        b.min_tenure(Duration::from_secs(5))
            .handover_grace(Duration::from_secs(2))
    });
    // A busy leader keeps a request within its minimum tenure: its guard stays open (a closed
    // guard is held at most the grace and a heartbeat, docs/design.md §10.6).
    let start = |st: &mut LocalState| {
        let mut rec = lead(st, &c, 1, 0);
        st.set_busy(true);
        rec.handover = request("new", 2);
        let p = plan(run(st, &c, &rec, 1, 1_000));
        assert_eq!(
            (p.action, p.next_action_at, p.honoured.clone()),
            (Action::Renewed, Some(at(5_000)), None),
            "kept, the guard open"
        );
        assert_eq!(p.write.as_ref().unwrap().handover, request("new", 2));
        assert!(st.adopt(p.adopt.as_ref().unwrap()));
        p.write.unwrap()
    };
    // Its first cycle after the tenure (a late one): the guard closes now, and the work in
    // flight is owed the whole grace from now.
    let mut st = LocalState::new(id("me"));
    let w = start(&mut st);
    let p = plan(run(&mut st, &c, &w, 1, 6_000));
    assert_eq!(
        (p.action, p.next_action_at, p.honoured.clone()),
        (Action::Renewed, Some(at(8_000)), request("new", 2))
    );
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    let w = p.write.unwrap();
    assert_eq!(plan(run(&mut st, &c, &w, 1, 7_999)).action, Action::Renewed);
    assert_eq!(
        plan(run(&mut st, &c, &w, 1, 8_000)).action,
        Action::HandedOver
    );
    // Idle at the tenure's end: it hands over at once.
    let mut st = LocalState::new(id("me"));
    let w = start(&mut st);
    st.set_busy(false);
    assert_eq!(
        plan(run(&mut st, &c, &w, 1, 5_000)).action,
        Action::HandedOver
    );
    // The guard closed at 6,000 ms; a partition kept it from cycling until after the grace,
    // and an operator's request replaced the candidate's meanwhile: the drain began when the
    // guard closed, so it hands over at its first cycle (seed 3034 of the campaign: it
    // renewed for another grace).
    let mut st = LocalState::new(id("me"));
    let w = start(&mut st);
    let p = plan(run(&mut st, &c, &w, 1, 6_000));
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    let mut w = p.write.unwrap();
    w.handover = Some(Party::Operator(id("ops")));
    assert_eq!(
        plan(run(&mut st, &c, &w, 1, 9_000)).action,
        Action::HandedOver
    );
}

#[test]
fn requests_that_no_longer_outrank_or_with_preemption_off_are_dropped() {
    for (leader_prio, allow) in [(2, true), (3, true), (1, false)] {
        let c = cfg_with(|b| b.allow_preemption(allow));
        let mut st = LocalState::new(id("me"));
        let mut rec = lead(&mut st, &c, leader_prio, 0);
        rec.handover = request("new", 2);
        let p = plan(run(&mut st, &c, &rec, leader_prio, 1_000));
        assert_eq!(
            p.action,
            Action::Renewed,
            "leader {leader_prio} allow {allow}"
        );
        assert_eq!(p.write.unwrap().handover, None);
    }
}

#[test]
fn disabling_elections_makes_the_leader_step_down_and_followers_wait() {
    let on = cfg();
    let off = ElectionConfig::builder()
        .election_enabled(false)
        .build()
        .unwrap();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &on, 1, 0);
    let p = plan(run(&mut st, &off, &rec, 1, 1_000));
    assert_eq!(p.action, Action::SteppedDown);
    assert!(st.tenure().is_none());
    let w = p.write.unwrap();
    assert_eq!(
        (w.owner.clone(), w.reservation.clone(), w.ballot),
        (None, None, rec.ballot)
    );
    let mut f = LocalState::new(id("f"));
    assert_eq!(plan(run(&mut f, &off, &w, 1, 0)).action, Action::None);
    assert_eq!(plan(run(&mut f, &off, &w, 1, 60_000)).action, Action::None);
}

#[test]
fn refresh_only_never_acquires() {
    let mut st = LocalState::new(id("me"));
    let p = plan(run_mode(
        &mut st,
        &cfg(),
        &vacant(1, 1, None),
        1,
        0,
        Mode::RefreshOnly,
    ));
    assert_eq!(p.action, Action::None);
}

#[test]
fn an_unknown_commit_is_recognised_from_the_attempt_id_and_never_bumps_the_ballot_twice() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let p = plan(run(&mut st, &c, &vacant(4, 10, None), 1, 0));
    let written = p.write.unwrap();
    // The commit's result was unknown: the cycle is dropped, not adopted.
    // The next attempt reads the record and finds its own attempt id in it.
    let p = plan(run(&mut st, &c, &written, 1, 500));
    let t = st.tenure().cloned().unwrap();
    assert_eq!((t.ballot, t.acquired_at), (written.ballot, at(0)));
    assert_eq!(t.valid_until, at(0).saturating_add(c.local_validity(LEASE)));
    assert_eq!(
        p.action,
        Action::Renewed,
        "the same logical claim is renewed, not re-claimed"
    );
    assert_eq!(p.write.unwrap().ballot, written.ballot);
}

#[test]
fn an_unknown_commit_that_did_not_apply_leaves_a_follower() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let before = vacant(4, 10, None);
    let _ = plan(run(&mut st, &c, &before, 1, 0));
    // Someone else's acquisition committed instead.
    let other = owned("other", 1, 5, 11);
    assert_eq!(plan(run(&mut st, &c, &other, 1, 500)).action, Action::None);
    assert!(st.tenure().is_none());
}

#[test]
fn adoption_after_a_demotion_or_of_a_stale_cycle_is_ignored() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let p1 = plan(run(&mut st, &c, &vacant(4, 10, None), 1, 0));
    st.demote();
    assert!(!st.adopt(p1.adopt.as_ref().unwrap()));
    assert!(st.tenure().is_none());

    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 1, 0);
    let r1 = plan(run(&mut st, &c, &rec, 1, 1_000));
    let r1w = r1.write.clone().unwrap();
    assert!(st.adopt(r1.adopt.as_ref().unwrap()));
    let r2 = plan(run(&mut st, &c, &r1w, 1, 2_000));
    assert!(st.adopt(r2.adopt.as_ref().unwrap()));
    // Adopting the older renewal again changes nothing.
    assert!(!st.adopt(r1.adopt.as_ref().unwrap()));
    assert_eq!(st.tenure().map(|t| t.renewal), Some(r1w.renewal + 1));
}

#[test]
fn the_pending_list_is_bounded() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    for i in 0..100 {
        let _ = plan(run(&mut st, &c, &vacant(4, 10, None), 1, i));
    }
    assert!(st.pending().len() <= 16);
}

#[test]
fn resign_reserves_for_the_best_live_candidate_and_demotes_first() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 1, 0);
    let best = Some(Named::new(id("heir"), Priority::new(4)));
    let p = decide_resign(&mut st, &rec, &c, Some(rec.ballot), best.clone(), at(10))
        .unwrap()
        .unwrap();
    assert!(st.tenure().is_none());
    assert_eq!(p.action, Action::Resigned);
    let w = p.write.unwrap();
    assert_eq!(
        (w.ballot, w.renewal, w.owner.clone(), w.reservation.clone()),
        (
            rec.ballot,
            rec.renewal + 1,
            None,
            best.map(Party::Candidate)
        )
    );
    assert_eq!(
        p.fence,
        Some(FenceRecord {
            ballot: rec.ballot,
            vacant: true
        })
    );
}

#[test]
fn resign_is_rejected_for_non_owners_and_wrong_ballots() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = owned("other", 1, 7, 20);
    assert_eq!(
        decide_resign(&mut st, &rec, &c, None, None, at(0))
            .unwrap()
            .err(),
        Some(ResignRejected::NotLeader {
            current: Some(id("other"))
        })
    );
    let mine = lead(&mut st, &c, 1, 0);
    assert!(matches!(
        decide_resign(&mut st, &mine, &c, Some(Ballot::new(1)), None, at(0)).unwrap(),
        Err(ResignRejected::BallotMismatch { .. })
    ));
    assert!(st.tenure().is_some(), "a rejected resign changes nothing");
}

#[test]
fn exhausted_ballots_are_errors_not_wraps() {
    let mut st = LocalState::new(id("me"));
    let input_rec = vacant(u64::MAX, 10, None);
    let c = cfg();
    let rows = Registry::new();
    let lookups = Lookups {
        registry: Some(Roster::unmarked(&rows)),
        requester: None,
    };
    let input = input(&c, &input_rec, 0, 0, Mode::Cycle, lookups);
    assert!(matches!(
        decide_cycle(&mut st, &input),
        Err(ElectionError::BallotExhausted)
    ));
}

#[test]
fn rank_counts_live_higher_or_earlier_equal_candidates_only() {
    let rows = vec![
        (id("me"), cand(5, 3, 100)),
        (id("higher"), cand(7, 9, 100)),
        (id("equal-earlier"), cand(5, 1, 98)),
        (id("equal-later"), cand(5, 4, 100)),
        (id("lower"), cand(1, 0, 100)),
        (id("dead-higher"), cand(9, 0, 10)),
        (id("old-owner"), cand(9, 0, 100)),
    ];
    let old_owner = id("old-owner");
    assert_eq!(
        rank_among(
            &id("me"),
            standing(5),
            3,
            Roster::unmarked(&rows),
            100,
            5,
            &[&old_owner],
            FLAT
        ),
        2
    );
    assert_eq!(
        rank_among(
            &id("higher"),
            standing(7),
            9,
            Roster::unmarked(&rows),
            100,
            5,
            &[&old_owner],
            FLAT
        ),
        0
    );
    let best = best_live(&id("old-owner"), Roster::unmarked(&rows), 100, 5, FLAT).unwrap();
    assert_eq!(best, Named::new(id("higher"), Priority::new(7)));
    // Ties go to the earlier registration.
    let tie = vec![(id("b"), cand(5, 2, 0)), (id("a"), cand(5, 1, 0))];
    assert_eq!(
        best_live(&id("x"), Roster::unmarked(&tie), 0, 5, FLAT).map(|n| n.id),
        Some(id("a"))
    );
    assert_eq!(best_live(&id("x"), Roster::unmarked(&[]), 0, 5, FLAT), None);
}

#[test]
fn role_starts_as_follower() {
    assert_eq!(LocalState::new(id("x")).role(), &Role::Follower);
}

// --- The edges (docs/design.md §10) ---

/// A leader of ballot 5 (acquired at 0) whose record carries an operator's request.
fn led_with_operator_request(st: &mut LocalState, c: &ElectionConfig, prio: i32) -> LeaderRecord {
    let mut rec = lead(st, c, prio, 0);
    rec.handover = Some(Party::Operator(id("ops")));
    rec
}

#[test]
fn an_operator_request_is_honoured_whatever_the_priorities_and_reserves_for_the_best_live() {
    let c = cfg_with(|b| {
        b.allow_preemption(false)
            .min_tenure(Duration::from_secs(60))
    });
    let mut st = LocalState::new(id("me"));
    let rec = led_with_operator_request(&mut st, &c, 9);
    // The best live candidate is looked up in the registry first; nothing changes till then.
    assert!(matches!(
        run_raw(&mut st, &c, &rec, 9, 1_000),
        Decision::Need(Lookup::Registry)
    ));
    assert!(st.tenure().is_some());
    let registry = vec![
        (id("me"), cand(9, 0, 11)),
        (id("low"), cand(1, 1, 11)),
        (id("best"), cand(3, 2, 11)),
        (id("dead-higher"), cand(8, 3, 1)),
    ];
    let p = plan(run_in(&mut st, &c, &rec, 9, 1_000, Mode::Cycle, &registry));
    assert_eq!(p.action, Action::HandedOver);
    assert!(
        st.tenure().is_none(),
        "belief ends before the vacancy commits"
    );
    let w = p.write.unwrap();
    assert_eq!(
        w.reservation(),
        Some(&Named::new(id("best"), Priority::new(3)))
    );
    assert_eq!((w.owner.clone(), w.handover.clone()), (None, None));
    // With no other live candidate, the vacancy is unreserved.
    let mut alone = LocalState::new(id("me"));
    let rec = led_with_operator_request(&mut alone, &c, 9);
    let p = plan(run_in(&mut alone, &c, &rec, 9, 1_000, Mode::Cycle, &vec![]));
    assert_eq!(p.write.unwrap().reservation, None);
}

#[test]
fn an_operator_request_waits_for_busy_work_within_the_grace() {
    let c = cfg_with(|b| b.handover_grace(Duration::from_secs(2)));
    let mut st = LocalState::new(id("me"));
    let rec = led_with_operator_request(&mut st, &c, 1);
    st.set_busy(true);
    let p = plan(run_in(&mut st, &c, &rec, 1, 1_000, Mode::Cycle, &vec![]));
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::Renewed, Some(at(3_000)))
    );
    let w = p.write.unwrap();
    assert_eq!(
        w.operator_request(),
        Some(&id("ops")),
        "kept while draining"
    );
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    let p = plan(run_in(&mut st, &c, &w, 1, 3_000, Mode::Cycle, &vec![]));
    assert_eq!(p.action, Action::HandedOver);
}

#[test]
fn a_request_from_a_requester_that_is_gone_or_dead_is_dropped() {
    let c = cfg();
    for (case, registry) in [
        ("not registered", vec![]),
        ("dead", vec![(id("new"), cand(2, 1, 0))]),
        ("no longer outranks", vec![(id("new"), cand(1, 1, 11))]),
    ] {
        let mut st = LocalState::new(id("me"));
        let mut rec = lead(&mut st, &c, 1, 0);
        rec.handover = request("new", 2);
        assert!(
            matches!(
                run_raw(&mut st, &c, &rec, 1, 1_000),
                Decision::Need(Lookup::Requester(ref who)) if who == &id("new")
            ),
            "{case}"
        );
        let p = plan(run_in(&mut st, &c, &rec, 1, 1_000, Mode::Cycle, &registry));
        assert_eq!(p.action, Action::Renewed, "{case}");
        assert_eq!(p.write.unwrap().handover, None, "{case}");
        assert!(st.tenure().is_some(), "{case}");
    }
}

#[test]
fn no_candidate_fills_an_operator_hold_before_a_full_lease_even_with_the_operators_id() {
    let c = cfg();
    let mut hold = vacant(5, 11, None);
    hold.reservation = Some(Party::Operator(id("me")));
    let mut st = LocalState::new(id("me"));
    let p = plan(run(&mut st, &c, &hold, 1, 0));
    assert_eq!(p.action, Action::None);
    assert_eq!(p.next_action_at, Some(at(1).saturating_add(LEASE)));
    assert_waits_a_full_lease_then_acquires(&mut st, &c, &hold, 1);
}

#[test]
fn followers_never_replace_an_operator_request() {
    let c = cfg();
    let mut rec = owned("old", 1, 7, 20);
    rec.handover = Some(Party::Operator(id("ops")));
    let mut st = LocalState::new(id("top"));
    assert_eq!(plan(run(&mut st, &c, &rec, 100, 0)).action, Action::None);
}

#[test]
fn writing_a_shorter_lease_caps_the_belief_before_the_commit() {
    let long = cfg();
    let short = cfg_with(|b| timed(b, 1_000, 300, 2_000, 200));
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &long, 1, 0);
    let before = st.tenure().unwrap().valid_until;
    assert_eq!(before, at(0).saturating_add(long.local_validity(LEASE)));
    let p = plan(run(&mut st, &short, &rec, 1, 1_000));
    assert_eq!(p.action, Action::Renewed);
    assert_eq!(p.write.as_ref().unwrap().lease, Duration::from_secs(1));
    // Before any commit: the belief already ends as the shorter lease says.
    let capped = at(1_000).saturating_add(short.local_validity(Duration::from_secs(1)));
    assert_eq!(st.tenure().unwrap().valid_until, capped);
    // The commit's result was unknown: the cap stays (it is judged as if committed).
    drop(p);
    assert!(st.valid_tenure(capped).is_none());
    // Lengthening never extends a belief before the commit.
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &short, 1, 0);
    let before = st.tenure().unwrap().valid_until;
    let _ = plan(run(&mut st, &long, &rec, 1, 100));
    assert_eq!(st.tenure().unwrap().valid_until, before);
}

#[test]
fn a_record_read_back_in_the_transaction_that_wrote_it_is_never_recognised() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let before = vacant(4, 10, None);
    let nobody = Registry::new();
    let input0 = CycleInput {
        read_version: Some(7),
        ..input(
            &c,
            &before,
            1,
            0,
            Mode::Cycle,
            Lookups {
                registry: Some(Roster::unmarked(&nobody)),
                requester: None,
            },
        )
    };
    let p = plan(decide_cycle(&mut st, &input0).unwrap());
    let written = p.write.unwrap();
    // Read back at the same read version: the transaction's own uncommitted write.
    let same = CycleInput {
        read_version: Some(7),
        ..input(&c, &written, 1, 5, Mode::Cycle, Lookups::default())
    };
    assert!(matches!(
        decide_cycle(&mut st, &same),
        Err(ElectionError::CycleInProgress { .. })
    ));
    assert!(st.tenure().is_none());
    assert!(
        st.observed().is_some_and(|o| o.renewal == 10),
        "no timing from it"
    );
    // Read by a later transaction: the write committed; recognised, dated from its start.
    let later = CycleInput {
        read_version: Some(9),
        ..input(&c, &written, 1, 5, Mode::Cycle, Lookups::default())
    };
    let p = plan(decide_cycle(&mut st, &later).unwrap());
    assert_eq!(p.action, Action::Renewed);
    assert_eq!(st.tenure().map(|t| t.acquired_at), Some(at(0)));
}

#[test]
fn a_release_that_never_landed_is_written_again_while_the_record_names_the_old_leader() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = request("new", 2);
    let first = plan(run(&mut st, &c, &rec, 1, 1_000));
    assert_eq!(first.action, Action::HandedOver);
    // Its commit failed: the record still names this (demoted) candidate.
    let again = plan(run(&mut st, &c, &rec, 1, 1_500));
    assert_eq!(again.action, Action::HandedOver);
    assert!(st.tenure().is_none());
    let w = again.write.unwrap();
    assert_eq!(
        (w.owner.clone(), w.reservation.clone()),
        (None, request("new", 2))
    );
    assert_eq!(w.renewal, rec.renewal + 1);
    // The requester left meanwhile (its request withdrawn): no reason is left, so it is a
    // resignation, reserved for the best live.
    rec.handover = None;
    let registry = vec![(id("other"), cand(0, 1, rec.renewal))];
    let p = plan(run_in(&mut st, &c, &rec, 1, 1_600, Mode::Cycle, &registry));
    assert_eq!(p.action, Action::Resigned);
    assert_eq!(
        p.write.unwrap().reservation(),
        Some(&Named::new(id("other"), Priority::new(0)))
    );
    // Once the vacancy has landed, the release is forgotten.
    let landed = vacant(rec.ballot.get(), rec.renewal + 1, Some(("new", 2)));
    assert_eq!(
        plan(run(&mut st, &c, &landed, 1, 2_000)).action,
        Action::None
    );
    assert_eq!(plan(run(&mut st, &c, &rec, 1, 2_100)).action, Action::None);
}

#[test]
fn a_resignation_that_never_landed_is_written_again() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 1, 0);
    let _ = decide_resign(&mut st, &rec, &c, None, None, at(10))
        .unwrap()
        .unwrap();
    let p = plan(run_in(&mut st, &c, &rec, 1, 500, Mode::Cycle, &vec![]));
    assert_eq!(p.action, Action::Resigned);
    assert_eq!(p.write.unwrap().owner, None);
}

#[test]
fn the_lapse_rule_is_a_full_lease_after_the_first_sighting() {
    assert_eq!(lapse_at(at(5), LEASE), at(10_005));
    assert_eq!(lapse_at(at(5), Duration::ZERO), at(5));
}

#[test]
fn a_resignation_by_a_candidate_that_never_held_the_ballot_holds_the_vacancy() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = owned("me", 1, 7, 20);
    let best = Some(Named::new(id("heir"), Priority::new(4)));
    let p = decide_resign(&mut st, &rec, &c, None, best, at(0))
        .unwrap()
        .unwrap();
    let w = p.write.unwrap();
    assert_eq!(w.operator_hold(), Some(&id("me")));
    assert_eq!(w.reservation(), None);
}

#[test]
fn a_vacancy_keeps_the_longer_of_the_stored_and_the_configured_lease() {
    // The owner (elsewhere) believes in the 10 s lease it wrote; the configuration now says
    // 1 s. A resignation by a value that never held the ballot holds the vacancy for 10 s.
    let short = timed(ElectionConfig::builder(), 1_000, 300, 2_000, 200)
        .build()
        .unwrap();
    let mut st = LocalState::new(id("me"));
    let mut rec = owned("me", 1, 7, 20);
    rec.lease = Duration::from_secs(10);
    let p = decide_resign(&mut st, &rec, &short, None, None, at(0))
        .unwrap()
        .unwrap();
    assert_eq!(p.write.unwrap().lease, Duration::from_secs(10));
    // A longer configured lease wins over a shorter stored one.
    rec.lease = Duration::from_millis(500);
    let mut st = LocalState::new(id("me"));
    let p = decide_resign(&mut st, &rec, &short, None, None, at(0))
        .unwrap()
        .unwrap();
    assert_eq!(p.write.unwrap().lease, Duration::from_secs(1));
}

#[test]
fn a_release_that_never_landed_under_an_operator_request_is_written_again_as_a_handover() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = Some(Party::Operator(id("ops")));
    let first = plan(run_in(&mut st, &c, &rec, 1, 1_000, Mode::Cycle, &vec![]));
    assert_eq!(first.action, Action::HandedOver);
    let again = plan(run_in(&mut st, &c, &rec, 1, 1_500, Mode::Cycle, &vec![]));
    assert_eq!(
        again.action,
        Action::HandedOver,
        "still for the operator's request"
    );
    assert_eq!(again.honoured, Some(Party::Operator(id("ops"))));
}

#[test]
fn rank_counts_equal_priorities_only_if_registered_strictly_earlier() {
    let rows = vec![(id("twin"), cand(5, 3, 100))];
    assert_eq!(
        rank_among(
            &id("me"),
            standing(5),
            3,
            Roster::unmarked(&rows),
            100,
            5,
            &[],
            FLAT
        ),
        0
    );
    assert_eq!(
        rank_among(
            &id("me"),
            standing(5),
            4,
            Roster::unmarked(&rows),
            100,
            5,
            &[],
            FLAT
        ),
        1
    );
}

// --- Found by an adversarial review ---

/// A renewal that kept a request but whose commit failed: the runner never saw the request
/// (a failed cycle reports nothing), so the guard stayed open and work kept starting. The
/// drain (the grace) may begin only when the guard closes, i.e. at the first cycle whose
/// commit reports the request; the next cycle must not cut that work at once.
fn assert_an_unconfirmed_keep_does_not_start_the_grace(min_tenure_ms: u64) {
    let c = cfg_with(|b| {
        b.min_tenure(Duration::from_millis(min_tenure_ms))
            .handover_grace(Duration::from_secs(2))
    });
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    st.set_busy(true);
    rec.handover = request("new", 2);
    // 1,000 ms: a busy leader keeps the request, renewing. Its commit fails (a conflict, a
    // timeout, a partition): not adopted, and the runner's guard is not closed.
    let p = plan(run(&mut st, &c, &rec, 1, 1_000));
    assert_eq!(p.action, Action::Renewed);
    // 7,000 ms (still within the belief: the lease is 10 s): the retry reads the same record.
    // Its commit is the first that reports the request, so the guard closes only now, and
    // in-flight work is owed the full grace from now.
    let p = plan(run(&mut st, &c, &rec, 1, 7_000));
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::Renewed, Some(at(9_000))),
        "the work in flight was cut with no drain at all: the grace was counted from a \
         keep that never committed (min tenure {min_tenure_ms} ms)"
    );
}

#[test]
fn a_keep_within_the_minimum_tenure_that_never_committed_does_not_start_the_grace() {
    assert_an_unconfirmed_keep_does_not_start_the_grace(5_000);
}

#[test]
fn a_keep_that_never_committed_does_not_start_the_grace() {
    assert_an_unconfirmed_keep_does_not_start_the_grace(0);
}

/// docs/design.md §10.6: no path leaves a leader holding the leadership with a closed guard
/// for longer than `handover_grace` plus one heartbeat. The runner closes the guard at the
/// first cycle that reports a request honoured (`Plan::honoured`), also within the minimum
/// tenure; an idle leader then sits on a closed guard (doing no work while every follower
/// waits) until its minimum tenure ends.
#[test]
fn a_guard_closed_within_the_minimum_tenure_is_held_no_longer_than_grace_plus_a_heartbeat() {
    let c = cfg_with(|b| {
        b.min_tenure(Duration::from_secs(9))
            .handover_grace(Duration::from_secs(1))
    });
    let heartbeat = u64::try_from(c.heartbeat_interval().as_millis()).unwrap();
    let grace = 1_000;
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = request("new", 2);
    // An idle leader cycles every heartbeat, each commit confirmed.
    let mut closed_at = None;
    let mut t = 1_000;
    while t < 9_000 {
        let p = plan(run(&mut st, &c, &rec, 1, t));
        if p.action == Action::HandedOver {
            return;
        }
        assert_eq!(p.action, Action::Renewed);
        if p.honoured.is_some() && closed_at.is_none() {
            closed_at = Some(t); // the runner closes the guard (note_request)
        }
        if let Some(closed) = closed_at {
            assert!(
                t <= closed + grace + heartbeat,
                "at {t} ms the leader renews holding a guard closed since {closed} ms \
                 (grace {grace} ms, heartbeat {heartbeat} ms): no work runs, nobody else leads"
            );
        }
        assert!(st.adopt(p.adopt.as_ref().unwrap()));
        rec = p.write.unwrap();
        t += heartbeat;
    }
}

/// docs/design.md §10.6: the grace counts from the guard's real closing, as the runner saw
/// it (after the closing renewal's commit was confirmed), not from that cycle's start; and a
/// guard the runner still holds closed keeps its closing time when the drain's reason came
/// and went (the drain noted in the tenure was dropped meanwhile).
#[test]
fn the_grace_counts_from_when_the_runner_closed_the_guard() {
    let c = cfg_with(|b| b.handover_grace(Duration::from_secs(2)));
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    st.set_busy(true);
    rec.handover = request("new", 2);
    // The closing renewal starts at 1,000 ms; its commit is confirmed, and the guard closed,
    // at 1,300 ms.
    let p = plan(run(&mut st, &c, &rec, 1, 1_000));
    assert_eq!(p.next_action_at, Some(at(3_000)));
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    st.set_guard_closed_at(Some(at(1_300)));
    let w = p.write.unwrap();
    let p = plan(run(&mut st, &c, &w, 1, 3_000));
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::Renewed, Some(at(3_300))),
        "the work in flight is owed the grace from the guard's closing"
    );
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    let w = p.write.unwrap();
    assert_eq!(
        plan(run(&mut st, &c, &w, 1, 3_300)).action,
        Action::HandedOver
    );
    // Without the runner's word (the manual flow), from the closing cycle's start.
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    st.set_busy(true);
    rec.handover = request("new", 2);
    let p = plan(run(&mut st, &c, &rec, 1, 1_000));
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    let w = p.write.unwrap();
    assert_eq!(
        plan(run(&mut st, &c, &w, 1, 3_000)).action,
        Action::HandedOver
    );
}
