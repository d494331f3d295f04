//! Table tests of eligibility in the protocol (docs/design.md §13.1–3) and of the reservation timeout
//! (§4): an ineligible candidate never campaigns and is never chosen; an ineligible leader
//! hands over to the best live eligible candidate (or holds, or releases); a vacancy its leader
//! reserved opens to the others after the reservation timeout, by rank among the eligible.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::too_many_arguments
)]

use std::time::Duration;

use super::operator::{DirectedRefusal, directed_target};
use super::rank::{Marks, Ranking, Roster, best_live, policy_ahead, rank_among};
use super::tests::{
    FLAT, Registry, at, cand, cfg, decide_with, id, input, lead, owned, standing, vacant,
};
use super::*;
use crate::record::{CandidateRecord, Eligibility, Named};

fn sick(mut c: CandidateRecord) -> CandidateRecord {
    c.eligibility = Eligibility::ineligible("disk full").unwrap();
    c
}

/// One decision of a candidate of priority `prio` with eligibility `eligible` under `policy`,
/// its lookups answered from `registry`, no name marked by an operator.
fn decide(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    eligible: bool,
    policy: UnhealthyPolicy,
    t0_ms: u64,
    registry: &Registry,
) -> Plan {
    let roster = Roster::unmarked(registry);
    decide_in(st, c, rec, prio, eligible, policy, t0_ms, roster)
}

/// As [`decide`], its lookups answered from `roster` (registrations and marks).
fn decide_in(
    st: &mut LocalState,
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    eligible: bool,
    policy: UnhealthyPolicy,
    t0_ms: u64,
    roster: Roster<'_>,
) -> Plan {
    let input = CycleInput {
        eligible,
        when_ineligible: policy,
        payload: None,
        ..input(c, rec, prio, t0_ms, Mode::Cycle, Lookups::default())
    };
    decide_with(st, input, roster)
}

#[test]
fn ranks_and_the_best_live_candidate_count_only_the_eligible() {
    let rows: Registry = vec![
        (id("top"), sick(cand(9, 1, 10))),
        (id("mid"), cand(5, 2, 10)),
        (id("low"), cand(1, 3, 10)),
    ];
    let best = best_live(&id("me"), Roster::unmarked(&rows), 10, 3, FLAT).map(|n| n.id);
    assert_eq!(best, Some(id("mid")), "the sick top is never the best");
    // "low" ranks behind "mid" only: the sick one counts in no rank.
    assert_eq!(
        rank_among(
            &id("low"),
            standing(1),
            3,
            Roster::unmarked(&rows),
            10,
            3,
            &[],
            FLAT
        ),
        1
    );
    // Nobody eligible: no best.
    let all_sick: Registry = rows
        .iter()
        .map(|(i, c)| (i.clone(), sick(c.clone())))
        .collect();
    assert_eq!(
        best_live(&id("me"), Roster::unmarked(&all_sick), 10, 3, FLAT),
        None
    );
}

#[test]
fn an_ineligible_follower_never_acquires_requests_or_takes_over() {
    let c = cfg();
    let none = Registry::new();
    let reserved_for_me = vacant(4, 10, Some(("me", 5)));
    for rec in [vacant(4, 10, None), reserved_for_me, owned("old", 1, 7, 20)] {
        let mut st = LocalState::new(id("me"));
        for t in [0, 5_000, 20_000, 60_000] {
            let p = decide(&mut st, &c, &rec, 9, false, UnhealthyPolicy::Hold, t, &none);
            assert_eq!(p.action, Action::None, "{rec:?} at {t}");
            assert!(p.write.is_none(), "nothing written: {rec:?}");
        }
        // Eligible again, it campaigns as before.
        let p = decide(
            &mut st,
            &c,
            &rec,
            9,
            true,
            UnhealthyPolicy::Hold,
            60_000,
            &none,
        );
        assert_ne!(p.action, Action::None, "{rec:?}");
    }
}

#[test]
fn an_ineligible_leader_hands_over_to_the_best_live_eligible_candidate_after_its_work() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 5, 0);
    let rows: Registry = vec![
        (id("sick"), sick(cand(9, 1, rec.renewal))),
        (id("fit"), cand(2, 2, rec.renewal)),
    ];
    // Busy: it renews (stopping new work: the runner closes its guard) until the grace ends.
    st.set_busy(true);
    let p = decide(
        &mut st,
        &c,
        &rec,
        5,
        false,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::Renewed);
    assert_eq!(p.ineligible, Some(Ineligible::SteppingDown));
    assert_eq!(
        p.next_action_at,
        Some(at(100).saturating_add(c.handover_grace()))
    );
    let renewed = p.write.unwrap();
    assert!(
        st.valid_tenure(at(200)).is_some(),
        "it still leads while draining"
    );
    // Idle: one commit, the vacancy reserved for the best live eligible ("fit", not "sick").
    st.set_busy(false);
    let p = decide(
        &mut st,
        &c,
        &renewed,
        5,
        false,
        UnhealthyPolicy::Hold,
        200,
        &rows,
    );
    assert_eq!(p.action, Action::SteppedDownIneligible);
    assert_eq!(p.ineligible, Some(Ineligible::SteppingDown));
    let w = p.write.unwrap();
    assert_eq!(w.owner, None);
    assert_eq!(w.reservation().map(Named::id), Some(&id("fit")));
    assert!(
        st.valid_tenure(at(200)).is_none(),
        "it stopped believing before the commit"
    );
}

#[test]
fn an_ineligible_leader_with_nobody_eligible_holds_or_releases_as_its_policy_says() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 5, 0);
    let rows: Registry = vec![(id("sick"), sick(cand(9, 1, rec.renewal)))];
    let held = decide(
        &mut st,
        &c,
        &rec,
        5,
        false,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(held.action, Action::Renewed);
    assert_eq!(held.ineligible, Some(Ineligible::Holding));
    let rec = held.write.unwrap();
    // Hold: it hands over as soon as an eligible candidate is live.
    let mut rows2 = rows.clone();
    rows2.push((id("fit"), cand(1, 2, rec.renewal)));
    let p = decide(
        &mut st,
        &c,
        &rec,
        5,
        false,
        UnhealthyPolicy::Hold,
        200,
        &rows2,
    );
    assert_eq!(p.action, Action::SteppedDownIneligible);
    assert_eq!(
        p.write.unwrap().reservation().map(Named::id),
        Some(&id("fit"))
    );
    // Release: an unreserved vacancy, nobody eligible notwithstanding.
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 5, 0);
    let p = decide(
        &mut st,
        &c,
        &rec,
        5,
        false,
        UnhealthyPolicy::Release,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::SteppedDownIneligible);
    let w = p.write.unwrap();
    assert_eq!((w.owner, w.reservation), (None, None));
}

#[test]
fn no_leader_honours_or_reserves_for_an_ineligible_candidate() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    // A higher-priority requester that is not eligible (any more) is not honoured.
    rec.handover = Some(Party::Candidate(Named::new(id("req"), Priority::new(9))));
    let rows: Registry = vec![(id("req"), sick(cand(9, 1, rec.renewal)))];
    let p = decide(
        &mut st,
        &c,
        &rec,
        1,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::Renewed);
    assert_eq!(p.honoured, None);
    assert_eq!(p.write.unwrap().handover, None, "the request is dropped");
    // An operator's request reserves for the best live eligible: none here, so unreserved.
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    rec.handover = Some(Party::Operator(id("ops")));
    let p = decide(
        &mut st,
        &c,
        &rec,
        1,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::HandedOver);
    assert_eq!(p.write.unwrap().reservation, None);
}

#[test]
fn a_vacancy_the_leader_reserved_opens_after_the_reservation_timeout_by_rank() {
    let c = ElectionConfig::builder()
        .takeover_stagger(Duration::from_millis(300))
        .reservation_timeout(Duration::from_secs(4))
        .build()
        .unwrap();
    // Reserved for "dead", which never fills it; "a" ranks first, "b" second among the
    // eligible ("dead" and "sick" count in no rank).
    let rec = vacant(4, 10, Some(("dead", 9)));
    let rows: Registry = vec![
        (id("dead"), cand(9, 1, 10)),
        (id("sick"), sick(cand(8, 2, 10))),
        (id("a"), cand(5, 3, 10)),
    ];
    let mut a = LocalState::new(id("a"));
    let mut b = LocalState::new(id("b"));
    for (st, prio) in [(&mut a, 5), (&mut b, 3)] {
        let p = decide(st, &c, &rec, prio, true, UnhealthyPolicy::Hold, 0, &rows);
        assert_eq!(p.action, Action::None);
    }
    // First seen at 1 ms: open at 4,001 ms for rank 0, a stagger later for rank 1.
    let p = decide(
        &mut a,
        &c,
        &rec,
        5,
        true,
        UnhealthyPolicy::Hold,
        3_999,
        &rows,
    );
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(4_001)))
    );
    let p = decide(
        &mut a,
        &c,
        &rec,
        5,
        true,
        UnhealthyPolicy::Hold,
        4_000,
        &rows,
    );
    assert_eq!(
        p.action,
        Action::Acquired,
        "rank 0, at the timeout: no lease waited"
    );
    let p = decide(
        &mut b,
        &c,
        &rec,
        3,
        true,
        UnhealthyPolicy::Hold,
        4_000,
        &rows,
    );
    assert_eq!(
        (p.action, p.next_action_at),
        (Action::None, Some(at(4_301)))
    );
    // An operator's hold still waits a full lease.
    let mut hold = vacant(4, 10, None);
    hold.reservation = Some(Party::Operator(id("ops")));
    let mut st = LocalState::new(id("a"));
    let p = decide(&mut st, &c, &hold, 5, true, UnhealthyPolicy::Hold, 0, &rows);
    assert_eq!(p.action, Action::None);
    let p = decide(
        &mut st,
        &c,
        &hold,
        5,
        true,
        UnhealthyPolicy::Hold,
        9_000,
        &rows,
    );
    assert_eq!(
        p.action,
        Action::None,
        "a lease (10 s), not the reservation timeout"
    );
    // A lease from the first sighting, then its rank's stagger ("dead" ranks first here).
    let p = decide(
        &mut st,
        &c,
        &hold,
        5,
        true,
        UnhealthyPolicy::Hold,
        10_300,
        &rows,
    );
    assert_eq!(p.action, Action::None);
    let p = decide(
        &mut st,
        &c,
        &hold,
        5,
        true,
        UnhealthyPolicy::Hold,
        10_301,
        &rows,
    );
    assert_eq!(p.action, Action::Acquired);
}

#[test]
fn the_reservation_timeout_is_two_heartbeats_unless_set_and_at_most_the_lease() {
    let c = ElectionConfig::default();
    assert_eq!(c.reservation_timeout(), c.heartbeat_interval() * 2);
    let faster = c
        .to_builder()
        .heartbeat_interval(Duration::from_secs(2))
        .build()
        .unwrap();
    assert_eq!(
        faster.reservation_timeout(),
        Duration::from_secs(4),
        "it follows"
    );
    for bad in [Duration::ZERO, Duration::from_secs(11)] {
        assert!(matches!(
            c.to_builder().reservation_timeout(bad).build(),
            Err(crate::config::ConfigError::ReservationTimeoutOutOfRange { .. })
        ));
    }
}

/// A record led by `st` carrying an operator's request directed at `to`.
fn directed(rec: &LeaderRecord, to: &str) -> LeaderRecord {
    let mut r = rec.clone();
    r.handover = Some(Party::Operator(id("ops")));
    r.handover_to = Some(to.to_owned());
    r
}

fn named(label: &str) -> CandidateId {
    CandidateId::with_nonce(label, 7).unwrap()
}

#[test]
fn a_directed_request_reserves_for_the_named_candidate_not_the_best() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 5, 0);
    let rows: Registry = vec![
        (named("best"), cand(9, 1, rec.renewal)),
        (named("chosen"), cand(1, 2, rec.renewal)),
    ];
    let p = decide(
        &mut st,
        &c,
        &directed(&rec, "chosen"),
        5,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::HandedOver);
    assert_eq!(
        p.write.unwrap().reservation().map(Named::id),
        Some(&named("chosen"))
    );
}

#[test]
fn a_directed_request_for_nobody_live_and_eligible_is_refused_and_the_leader_keeps_leading() {
    let c = cfg();
    for rows in [
        Registry::new(),
        vec![(named("chosen"), sick(cand(1, 2, 0)))],
        vec![(named("chosen"), cand(1, 2, 0))], // dead: renewals far behind
    ] {
        let mut st = LocalState::new(id("me"));
        let rec = lead(&mut st, &c, 5, 0);
        assert!(
            rec.renewal > c.renewals_before_dead(),
            "the third row counts as dead"
        );
        let p = decide(
            &mut st,
            &c,
            &directed(&rec, "chosen"),
            5,
            true,
            UnhealthyPolicy::Hold,
            100,
            &rows,
        );
        assert_eq!(p.action, Action::Renewed, "{rows:?}");
        assert_eq!(p.honoured, None, "its guard stays open");
        assert!(p.refused.as_deref().is_some_and(|r| r.contains("chosen")));
        let w = p.write.unwrap();
        assert_eq!(
            (w.handover, w.handover_to),
            (None, None),
            "the request is cleared"
        );
        assert!(st.valid_tenure(at(200)).is_some());
    }
}

#[test]
fn a_directed_target_lost_while_the_work_drained_gives_way_to_the_best_live_eligible() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 5, 0);
    let rows: Registry = vec![
        (named("chosen"), cand(1, 2, rec.renewal)),
        (named("other"), cand(3, 3, rec.renewal)),
    ];
    st.set_busy(true);
    let p = decide(
        &mut st,
        &c,
        &directed(&rec, "chosen"),
        5,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::Renewed);
    assert_eq!(p.honoured, Some(Party::Operator(id("ops"))), "draining");
    // Its commit is confirmed: the guard closed, the drain began.
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    let kept = p.write.unwrap();
    assert_eq!(
        kept.handover_to.as_deref(),
        Some("chosen"),
        "the renewal keeps it"
    );
    // The target left; the work is done: the best live eligible one takes it.
    let gone: Registry = vec![(named("other"), cand(3, 3, kept.renewal))];
    st.set_busy(false);
    let p = decide(
        &mut st,
        &c,
        &kept,
        5,
        true,
        UnhealthyPolicy::Hold,
        200,
        &gone,
    );
    assert_eq!(p.action, Action::HandedOver);
    assert_eq!(
        p.write.unwrap().reservation().map(Named::id),
        Some(&named("other"))
    );
}

#[test]
fn a_directed_release_that_never_landed_is_written_again_for_its_target() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let rec = lead(&mut st, &c, 5, 0);
    let rows: Registry = vec![
        (named("best"), cand(9, 1, rec.renewal)),
        (named("chosen"), cand(1, 2, rec.renewal)),
    ];
    let req = directed(&rec, "chosen");
    let first = decide(
        &mut st,
        &c,
        &req,
        5,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(first.action, Action::HandedOver);
    // Its commit never landed: the record still names this candidate, which no longer
    // believes; the vacancy is written again for the same target, not the best.
    let again = decide(
        &mut st,
        &c,
        &req,
        5,
        true,
        UnhealthyPolicy::Hold,
        150,
        &rows,
    );
    assert_eq!(again.action, Action::HandedOver);
    assert_eq!(again.honoured, Some(Party::Operator(id("ops"))));
    assert_eq!(
        again.write.unwrap().reservation().map(Named::id),
        Some(&named("chosen"))
    );
    // The target is gone by then: the best live eligible one.
    let gone: Registry = vec![(named("best"), cand(9, 1, rec.renewal))];
    let last = decide(
        &mut st,
        &c,
        &req,
        5,
        true,
        UnhealthyPolicy::Hold,
        200,
        &gone,
    );
    assert_eq!(
        last.write.unwrap().reservation().map(Named::id),
        Some(&named("best"))
    );
}

#[test]
fn a_leader_holding_while_not_eligible_never_hands_over_to_an_ineligible_requester() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    // The requester's registration is not eligible (a candidate that claims without
    // heartbeats registered before its readiness first passed); nobody live is eligible.
    rec.handover = Some(Party::Candidate(Named::new(id("req"), Priority::new(9))));
    let rows: Registry = vec![(id("req"), sick(cand(9, 1, rec.renewal)))];
    let p = decide(
        &mut st,
        &c,
        &rec,
        1,
        false,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::Renewed, "it holds");
    assert_eq!(p.honoured, None);
    let w = p.write.unwrap();
    assert_eq!(w.handover, None, "the request is dropped");
    assert_eq!(w.reservation, None);
}

// --- Found by an adversarial review ---

/// docs/design.md §13.6: a directed request whose target is not live and eligible when the
/// leader reads it is refused, with its reason published. The leader checks the target only
/// at the request's "first sight", which it judges by whether it had noted *a* request: one
/// that replaced a candidate's request it was already draining for is never checked, and a
/// request to a name nobody live carries moves the leadership to someone else, silently.
#[test]
fn a_directed_request_replacing_a_candidates_is_refused_when_its_target_is_not_live() {
    let c = cfg();
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 1, 0);
    let rows: Registry = vec![(named("new"), cand(2, 1, rec.renewal))];
    rec.handover = Some(Party::Candidate(Named::new(named("new"), Priority::new(2))));
    st.set_busy(true);
    let p = decide(
        &mut st,
        &c,
        &rec,
        1,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(
        p.action,
        Action::Renewed,
        "draining for the candidate's request"
    );
    assert!(st.adopt(p.adopt.as_ref().unwrap()));
    // The operator runs `resign --to ghost`: nobody live is named "ghost".
    let req = directed(&p.write.unwrap(), "ghost");
    st.set_busy(false);
    let p = decide(
        &mut st,
        &c,
        &req,
        1,
        true,
        UnhealthyPolicy::Hold,
        200,
        &rows,
    );
    assert!(
        p.refused.as_deref().is_some_and(|r| r.contains("ghost")),
        "the request to ghost was not refused: {:?} reserved for {:?}",
        p.action,
        p.write
            .as_ref()
            .and_then(|w| w.reservation().map(Named::id))
    );
}

/// docs/design.md §13.4: "A leader that stepped down for health stays ineligible for at least
/// a cool-down (default: one lease), so leadership does not flap between two sick
/// processes." The cool-down starts only when the *leader health* check failed; a leader that
/// stepped down because its *readiness* failed is eligible again at its next passing check
/// (rise 1: at once), and may take the leadership straight back.
#[test]
fn a_leader_that_stepped_down_for_readiness_cools_down_too() {
    use crate::core::health::Health;
    use crate::runner::CheckSettings;
    let s = CheckSettings::new(Duration::from_secs(1), Duration::from_secs(1), 1, 1).unwrap();
    let mut h = Health::new(Some(s), None, Duration::from_secs(10));
    h.readiness_answer(Ok(()));
    h.leading(true, at(0));
    assert!(h.eligibility(at(0)).is_eligible());
    h.readiness_answer(Err("database unreachable".into()));
    assert!(!h.eligibility(at(1_000)).is_eligible());
    // It hands over (not eligible), and its leadership ends.
    h.leading(false, at(1_100));
    // Its next readiness check passes.
    h.readiness_answer(Ok(()));
    assert!(
        !h.eligibility(at(2_000)).is_eligible(),
        "eligible again 900 ms after stepping down for health (cool-down 10 s)"
    );
}

#[test]
fn a_directed_request_to_a_version_the_policy_does_not_allow_is_refused_by_the_leader() {
    // The leader runs 2.0.0 under no-downgrade; "chosen" (1.0.0) was named, and "newer"
    // (2.0.0) is live: the leader refuses when it reads the request, as the operator's own
    // check would have (docs/design.md §14.2), naming the policy and the versions.
    let c = cfg()
        .to_builder()
        .version_policy(crate::config::VersionPolicy::NoDowngrade)
        .build()
        .unwrap();
    let (v1, v2) = (semver::Version::new(1, 0, 0), semver::Version::new(2, 0, 0));
    let mut st = LocalState::new(id("me"));
    let mut rec = lead(&mut st, &c, 5, 0);
    rec.leader_version = Some(v2.clone());
    let mut chosen = cand(9, 1, rec.renewal);
    chosen.version = Some(v1);
    let mut newer = cand(1, 2, rec.renewal);
    newer.version = Some(v2);
    let rows: Registry = vec![(named("chosen"), chosen), (named("newer"), newer.clone())];
    let p = decide(
        &mut st,
        &c,
        &directed(&rec, "chosen"),
        5,
        true,
        UnhealthyPolicy::Hold,
        100,
        &rows,
    );
    assert_eq!(p.action, Action::Renewed);
    let why = p.refused.unwrap();
    for needle in ["no-downgrade", "\"chosen\" (1.0.0)", "(2.0.0)"] {
        assert!(why.contains(needle), "{needle:?} in {why}");
    }
    // "newer" named instead: handed over to it.
    let p = decide(
        &mut st,
        &c,
        &directed(&p.write.unwrap(), "newer"),
        5,
        true,
        UnhealthyPolicy::Hold,
        200,
        &rows,
    );
    assert_eq!(p.action, Action::HandedOver);
    assert_eq!(
        p.write.unwrap().reservation().map(Named::id),
        Some(&named("newer"))
    );
}

/// Two namesakes ("a", the leader, and "a", priority 9, newest version) and "b" (priority 1,
/// oldest version), all live; every registration says eligible: the follower "a" wrote its
/// own before an operator marked the name (issue 39).
fn namesakes() -> (CandidateId, CandidateId, Registry) {
    let (a1, a2) = (named("a"), CandidateId::with_nonce("a", 8).unwrap());
    let versioned = |mut c: CandidateRecord, v: u64| {
        c.version = Some(semver::Version::new(v, 0, 0));
        c
    };
    let rows = vec![
        (a1.clone(), versioned(cand(5, 1, 10), 1)),
        (a2.clone(), versioned(cand(9, 2, 10), 2)),
        (id("b"), versioned(cand(1, 3, 10), 1)),
    ];
    (a1, a2, rows)
}

/// The operators' mark on `name`.
fn mark(name: &str) -> Marks {
    Marks::from([(
        name.to_owned(),
        Eligibility::ineligible("disk maintenance").unwrap(),
    )])
}

/// One case of a mark by name: the marks; the reservation target when "a" (the leader) steps
/// down; "b"'s rank for a takeover; who the version policy puts ahead of "b"; the target of
/// `resign --to a` while "b" leads (none: refused).
type Case<'a> = (
    &'a Marks,
    &'a CandidateId,
    u32,
    Vec<&'a CandidateId>,
    Option<&'a CandidateId>,
);

#[test]
fn a_mark_by_name_excludes_every_candidate_of_that_name_from_every_choice() {
    let (a1, a2, rows) = namesakes();
    let newest = Ranking {
        policy: crate::config::VersionPolicy::PreferNewest,
        leader_version: None,
    };
    let (none, other, the_name) = (Marks::new(), mark("c"), mark("a"));
    let b = id("b");
    let cases: [Case<'_>; 3] = [
        (&none, &a2, 2, vec![&a2], Some(&a2)),
        (&other, &a2, 2, vec![&a2], Some(&a2)),
        (&the_name, &b, 0, vec![], None),
    ];
    for (marks, best, b_rank, b_behind, to_a) in cases {
        let roster = Roster::new(&rows, marks);
        let b_standing = roster.standing(&id("b"), &rows[2].1);
        let case = format!("marks {marks:?}");
        assert_eq!(
            best_live(&a1, roster, 10, 3, FLAT).map(|n| n.id).as_ref(),
            Some(best),
            "{case}"
        );
        assert_eq!(
            rank_among(&id("b"), b_standing, 3, roster, 10, 3, &[], FLAT),
            b_rank,
            "{case}"
        );
        let ahead: Vec<&CandidateId> =
            policy_ahead(&b_standing, roster, 10, 3, &[&id("b")], newest)
                .into_iter()
                .map(|(i, _)| i)
                .collect();
        assert_eq!(ahead, b_behind, "{case}");
        let directed = directed_target(&id("b"), roster, "a", 10, 3, FLAT);
        match to_a {
            Some(target) => assert_eq!(directed.map(|n| n.id).as_ref(), Ok(target), "{case}"),
            None => assert_eq!(
                directed,
                Err(DirectedRefusal::NoneLive {
                    name: "a".to_owned()
                }),
                "{case}"
            ),
        }
        for (i, c) in &rows {
            let excluded = marks.contains_key(i.name());
            assert_eq!(roster.eligible(i, c), !excluded, "{case}: {i}");
        }
    }
}

#[test]
fn a_leader_marked_by_name_reserves_for_an_eligible_candidate_not_its_namesake() {
    let c = cfg();
    let (a1, a2, mut rows) = namesakes();
    for (marks, reserved) in [(Marks::new(), &a2), (mark("a"), &id("b"))] {
        let mut st = LocalState::new(a1.clone());
        let rec = lead(&mut st, &c, 5, 0);
        for (_, r) in &mut rows {
            r.seen_renewal = rec.renewal;
        }
        // It read the mark on its own name: not eligible. (Unmarked, it is told so by its own
        // health: the namesake is then a fit target.)
        let roster = Roster::new(&rows, &marks);
        let p = decide_in(
            &mut st,
            &c,
            &rec,
            5,
            false,
            UnhealthyPolicy::Hold,
            100,
            roster,
        );
        assert_eq!(p.action, Action::SteppedDownIneligible, "{marks:?}");
        assert_eq!(
            p.write.unwrap().reservation().map(Named::id),
            Some(reserved),
            "{marks:?}"
        );
    }
}

#[test]
fn a_handover_request_from_a_candidate_marked_since_is_not_honoured() {
    let c = cfg();
    let (_, a2, mut rows) = namesakes();
    for (marks, honoured) in [(Marks::new(), true), (mark("a"), false)] {
        let mut st = LocalState::new(id("b"));
        let mut rec = lead(&mut st, &c, 1, 0);
        for (_, r) in &mut rows {
            r.seen_renewal = rec.renewal;
        }
        rec.handover = Some(Party::Candidate(Named::new(a2.clone(), Priority::new(9))));
        let roster = Roster::new(&rows, &marks);
        let p = decide_in(
            &mut st,
            &c,
            &rec,
            1,
            true,
            UnhealthyPolicy::Hold,
            100,
            roster,
        );
        if honoured {
            assert_eq!(p.action, Action::HandedOver);
            assert_eq!(p.write.unwrap().reservation().map(Named::id), Some(&a2));
        } else {
            assert_eq!(p.action, Action::Renewed, "{marks:?}");
            assert_eq!(p.honoured, None);
        }
    }
}

#[test]
fn a_directed_request_names_one_candidate_by_its_id_or_every_candidate_of_a_name() {
    // Two live eligible namesakes (the better one first) and "b", which leads.
    let (a1, a2) = (named("a"), CandidateId::with_nonce("a", 8).unwrap());
    let rows: Registry = vec![
        (a1.clone(), cand(9, 1, 10)),
        (a2.clone(), cand(1, 2, 10)),
        (id("b"), cand(5, 3, 10)),
        (named("dead"), cand(5, 4, 1)),
    ];
    let roster = Roster::unmarked(&rows);
    let dead = named("dead");
    let none = |to: &str| DirectedRefusal::NoneLive {
        name: to.to_owned(),
    };
    let cases: [(&str, Result<&CandidateId, DirectedRefusal>); 6] = [
        ("a", Ok(&a1)),
        // An id, as `status` lists it: that candidate, not the best of its name.
        (a2.as_str(), Ok(&a2)),
        (a1.as_str(), Ok(&a1)),
        // An id nobody has, though its name is registered: refused, not read as the name.
        ("a-00000000000000ff", Err(none("a-00000000000000ff"))),
        (dead.as_str(), Err(none(dead.as_str()))),
        ("b", Err(none("b"))),
    ];
    for (to, want) in cases {
        let got = directed_target(&id("b"), roster, to, 10, 3, FLAT).map(|n| n.id);
        assert_eq!(got.as_ref(), want.as_ref().map(|i| *i), "--to {to}");
    }
    // The refusal says which it was given.
    assert_eq!(
        none("a-00000000000000ff").to_string(),
        "no live eligible candidate with the id \"a-00000000000000ff\" (other than the leader)"
    );
    assert_eq!(
        none("a").to_string(),
        "no live eligible candidate named \"a\" (other than the leader)"
    );
}
