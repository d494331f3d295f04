//! The successor oracle's cases: resignations, requested and directed handovers, and
//! takeovers under each version policy.

use fdb_leader_election::VersionPolicy;

use super::*;
use crate::history::{CandView, ConfigView, Entry};
use crate::oracles::TxnRead;

fn reg(id: &str, prio: i32, v: Option<&str>, registration: u64) -> RegView {
    RegView {
        id: id.into(),
        name: id.trim_end_matches(char::is_numeric).into(),
        cand: CandView {
            priority: prio,
            registration,
            heartbeat: 0,
            seen_renewal: 5,
            eligible: true,
            version: v.map(str::to_owned),
        },
    }
}

fn read(policy: VersionPolicy) -> TxnRead {
    TxnRead {
        config: ConfigView {
            version_policy: policy.as_str().to_owned(),
            renewals_before_dead: 4,
            ..ConfigView::default()
        },
        registry: vec![
            reg("me", 5, Some("1.0.0"), 0),
            reg("old", 1, Some("1.0.0"), 1),
            reg("new", 9, Some("1.1.0"), 2),
        ],
        ..TxnRead::default()
    }
}

fn resign(to: Option<&str>) -> Entry {
    let mut e = Entry::new("n0v1", Some("me".into()), 5, Op::Resign);
    e.actor_version = Some("1.0.0".into());
    e.prior = Some(RecordView {
        ballot: 4,
        renewal: 6,
        owner: Some(("me".into(), 5)),
        leader_version: Some("1.0.0".into()),
        ..RecordView::default()
    });
    e.leader = Some(RecordView {
        ballot: 4,
        renewal: 7,
        reservation: to.map(|t| (t.to_owned(), 0)),
        ..RecordView::default()
    });
    e
}

fn judge(e: &Entry, r: &TxnRead) -> Option<Violation> {
    Successor::new(0).on_commit(&CommitFacts::applied(0, e, Some(r)))
}

#[test]
fn a_resignation_goes_to_the_candidate_the_policy_ranks_first() {
    let newest = read(VersionPolicy::PreferNewest);
    assert!(judge(&resign(Some("new")), &newest).is_none());
    assert!(judge(&resign(Some("old")), &newest).is_some());
    let oldest = read(VersionPolicy::PreferOldest);
    assert!(judge(&resign(Some("old")), &oldest).is_none());
    assert!(judge(&resign(Some("new")), &oldest).is_some());
    assert!(judge(&resign(None), &oldest).is_some(), "someone was live");
    let mut nobody = oldest.clone();
    nobody.registry.truncate(1);
    assert!(judge(&resign(None), &nobody).is_none());
}

#[test]
fn a_requested_handover_goes_to_a_requester_that_outranks_the_leader() {
    let mut e = resign(Some("old"));
    e.op = Op::Cycle(CycleAction::HandedOver);
    if let Some(p) = e.prior.as_mut() {
        p.handover = Some(("old".into(), 1));
    }
    assert!(
        judge(&e, &read(VersionPolicy::Ignore)).is_some(),
        "priority 1 < 5"
    );
    let mut r = read(VersionPolicy::NoDowngrade);
    if let Some(row) = r.registry.get_mut(1) {
        row.cand.priority = 6;
    }
    assert!(judge(&e, &r).is_none(), "same version, higher priority");
    if let Some(row) = r.registry.get_mut(1) {
        row.cand.version = Some("0.9.0".into());
    }
    assert!(judge(&e, &r).is_some(), "a downgrade");
}

#[test]
fn a_directed_request_goes_to_its_target_while_it_is_live_and_eligible() {
    let mut e = resign(Some("old"));
    e.op = Op::Cycle(CycleAction::HandedOver);
    if let Some(p) = e.prior.as_mut() {
        p.operator_request = Some("op".into());
        p.operator_request_to = Some("old".into());
    }
    let mut r = read(VersionPolicy::Ignore);
    assert!(judge(&e, &r).is_none());
    if let Some(row) = r.registry.get_mut(1) {
        row.cand.eligible = false;
    }
    assert!(
        judge(&e, &r).is_some(),
        "the best live eligible one instead"
    );
    if let Some(l) = e.leader.as_mut() {
        l.reservation = Some(("new".into(), 9));
    }
    assert!(judge(&e, &r).is_none());
}

const MS: Nanos = 1_000_000;

/// `me` (1.0.0) takes ballot 5 over `old`'s lapsed lease (2.0.0); `c` (2.0.0) is live;
/// the transaction read at 10 s, with a reservation timeout of 100 ms.
fn takeover(policy: VersionPolicy) -> (Entry, TxnRead) {
    let mut e = Entry::new(
        "n0v1",
        Some("me".into()),
        9,
        Op::Cycle(CycleAction::Acquired),
    );
    e.prior = Some(RecordView {
        ballot: 4,
        renewal: 6,
        owner: Some(("old".into(), 5)),
        leader_version: Some("2.0.0".into()),
        ..RecordView::default()
    });
    e.leader = Some(RecordView {
        ballot: 5,
        renewal: 7,
        owner: Some(("me".into(), 9)),
        ..RecordView::default()
    });
    let mut r = read(policy);
    r.config.reservation_timeout = 100 * MS;
    r.registry = vec![
        reg("me", 9, Some("1.0.0"), 0),
        reg("old", 5, Some("2.0.0"), 1),
        reg("c", 1, Some("2.0.0"), 2),
    ];
    r.at = 10_000 * MS;
    (e, r)
}

/// The oracle, having seen `c`'s heartbeat 0 committed at `at`.
fn heard_at(at: Nanos) -> Successor {
    let mut o = Successor::new(0);
    let mut hb = Entry::new("n2v1", Some("c".into()), 1, Op::Cycle(CycleAction::None));
    hb.candidates_set
        .push(("c".into(), reg("c", 1, Some("2.0.0"), 2).cand));
    assert!(o.on_commit(&CommitFacts::applied(at, &hb, None)).is_none());
    o
}

fn judged(o: &mut Successor, e: &Entry, r: &TxnRead) -> Option<Violation> {
    o.on_commit(&CommitFacts::applied(r.at.saturating_add(MS), e, Some(r)))
}

#[test]
fn a_takeover_never_passes_over_a_version_ranked_ahead_that_still_heartbeats() {
    let (e, r) = takeover(VersionPolicy::NoDowngrade);
    // c heartbeated 50 ms before the read: still there.
    let v = judged(&mut heard_at(9_950 * MS), &e, &r);
    assert!(v.is_some_and(|v| v.message.contains("ranked ahead")));
    // Silent for the reservation timeout: passed over.
    assert!(judged(&mut heard_at(9_900 * MS), &e, &r).is_none());
    // A heartbeat that only a later write repeated (a claim) counts from its first commit.
    let mut o = heard_at(9_800 * MS);
    let mut again = Entry::new("n2v1", Some("c".into()), 1, Op::Cycle(CycleAction::None));
    again
        .candidates_set
        .push(("c".into(), reg("c", 1, Some("2.0.0"), 2).cand));
    o.on_commit(&CommitFacts::applied(9_990 * MS, &again, None));
    assert!(judged(&mut o, &e, &r).is_none());
    // An uncommitted write of the same heartbeat, read by a composed cycle, counts from
    // then.
    let mut o = Successor::new(0);
    o.note_uncommitted("c", 0, 9_950 * MS);
    o.on_commit(&CommitFacts::applied(9_990 * MS, &again, None));
    let (_, at) = o.heard.get("c").copied().unwrap_or_default();
    assert_eq!(at, 9_950 * MS);
}

#[test]
fn a_takeover_is_judged_by_the_version_policy_alone() {
    // Under ignore, c (priority 1) is no rule for me (priority 9) nor would a higher
    // priority be: the stagger's preference, restored by preemption.
    let (e, r) = takeover(VersionPolicy::Ignore);
    assert!(judged(&mut heard_at(9_990 * MS), &e, &r).is_none());
    // The lapsed owner and the holder of a reservation that timed out are not waited for.
    let (mut e, r) = takeover(VersionPolicy::NoDowngrade);
    if let Some(p) = e.prior.as_mut() {
        p.owner = None;
        p.reservation = Some(("c".into(), 1));
    }
    assert!(judged(&mut heard_at(9_990 * MS), &e, &r).is_none());
    // Filling one's own reservation is no takeover.
    if let Some(p) = e.prior.as_mut() {
        p.reservation = Some(("me".into(), 9));
    }
    assert!(judged(&mut heard_at(9_990 * MS), &e, &r).is_none());
    // An older version than the lapsed leader's is not ahead under no-downgrade.
    let (e, mut r) = takeover(VersionPolicy::NoDowngrade);
    if let Some(c) = r.registry.get_mut(2) {
        c.cand.version = Some("1.5.0".into());
    }
    let mut o = heard_at(9_990 * MS);
    assert!(judged(&mut o, &e, &r).is_none());
}
