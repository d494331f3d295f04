//! Table tests of the one ranking under every version policy (docs/design.md §14.2–3): mixed and
//! missing versions, equal versions with different priorities; and the decisions that use it
//! (preemption, handover targets, the takeover stagger).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::cmp::Ordering;

use semver::Version;

use super::rank::{Ranking, Roster, Standing, best_live, rank_among};
use super::tests::{Registry, cand, cfg, decide_with, id, input};
use super::*;
use crate::config::VersionPolicy;
use crate::record::{CandidateRecord, Named};

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

fn st<'a>(version: Option<&'a Version>, priority: i32) -> Standing<'a> {
    Standing {
        eligible: true,
        version,
        priority: Priority::new(priority),
    }
}

#[test]
fn the_ranking_under_every_policy() {
    let (old, new) = (v("1.4.0"), v("1.5.0"));
    let pre = v("1.5.0-rc.1");
    let two = v("2.0.0");
    use Ordering::{Equal, Greater, Less};
    use VersionPolicy::{Ignore, NoDowngrade, PreferNewest, PreferOldest};
    // (policy, leader's version, a, b, a against b)
    let rows: Vec<(
        VersionPolicy,
        Option<&Version>,
        Standing<'_>,
        Standing<'_>,
        Ordering,
    )> = vec![
        // ignore: priority alone.
        (Ignore, None, st(Some(&old), 5), st(Some(&new), 1), Greater),
        (Ignore, None, st(Some(&old), 1), st(None, 1), Equal),
        // prefer-newest: a newer version first, whatever the priority; none is the oldest.
        (
            PreferNewest,
            None,
            st(Some(&new), 1),
            st(Some(&old), 9),
            Greater,
        ),
        (PreferNewest, None, st(Some(&old), 1), st(None, 9), Greater),
        (
            PreferNewest,
            None,
            st(Some(&pre), 9),
            st(Some(&new), 1),
            Less,
        ),
        (
            PreferNewest,
            None,
            st(Some(&new), 2),
            st(Some(&new), 1),
            Greater,
        ),
        (
            PreferNewest,
            None,
            st(Some(&new), 1),
            st(Some(&new), 1),
            Equal,
        ),
        // prefer-oldest: an older version first; none is the oldest of all.
        (
            PreferOldest,
            None,
            st(Some(&old), 1),
            st(Some(&new), 9),
            Greater,
        ),
        (PreferOldest, None, st(None, 1), st(Some(&old), 9), Greater),
        (
            PreferOldest,
            None,
            st(Some(&old), 3),
            st(Some(&old), 2),
            Greater,
        ),
        // no-downgrade against a 1.5.0 leader: at least 1.5.0 first, then priority.
        (
            NoDowngrade,
            Some(&new),
            st(Some(&new), 1),
            st(Some(&old), 9),
            Greater,
        ),
        (
            NoDowngrade,
            Some(&new),
            st(Some(&two), 1),
            st(Some(&new), 2),
            Less,
        ),
        // (below the leader's version, priority decides: none and 1.4.0 are both older)
        (
            NoDowngrade,
            Some(&new),
            st(None, 9),
            st(Some(&old), 1),
            Greater,
        ),
        (
            NoDowngrade,
            Some(&new),
            st(None, 1),
            st(Some(&new), 1),
            Less,
        ),
        (
            NoDowngrade,
            Some(&new),
            st(Some(&old), 9),
            st(Some(&old), 1),
            Greater,
        ),
        // ... and against a leader of no version: priority alone.
        (
            NoDowngrade,
            None,
            st(Some(&old), 9),
            st(Some(&new), 1),
            Greater,
        ),
    ];
    for (i, (policy, leader, a, b, expected)) in rows.iter().enumerate() {
        let r = Ranking {
            policy: *policy,
            leader_version: *leader,
        };
        assert_eq!(
            r.compare(a, b),
            *expected,
            "row {i}: {policy} {a:?} vs {b:?}"
        );
        assert_eq!(r.compare(b, a), expected.reverse(), "row {i} reversed");
    }
    // Eligibility comes first under every policy.
    for policy in VersionPolicy::ALL {
        let r = Ranking {
            policy,
            leader_version: Some(&new),
        };
        let sick = Standing {
            eligible: false,
            ..st(Some(&new), 9)
        };
        assert!(r.outranks(&st(None, 0), &sick), "{policy}");
        // An ineligible candidate preempts nobody: not an eligible leader, nor one that holds
        // while not eligible itself, whatever their versions and priorities.
        assert!(!r.outranks(&sick, &st(None, 0)), "{policy}");
        let holding = Standing {
            eligible: false,
            ..st(Some(&new), 0)
        };
        assert_eq!(r.compare(&sick, &holding), Greater, "{policy}");
        assert!(!r.outranks(&sick, &holding), "{policy}");
    }
}

fn versioned(prio: i32, reg: u64, version: &str) -> CandidateRecord {
    CandidateRecord {
        version: (!version.is_empty()).then(|| v(version)),
        ..cand(prio, reg, 10)
    }
}

#[test]
fn the_best_live_candidate_and_the_stagger_follow_the_policy() {
    let rows: Registry = vec![
        (id("old-high"), versioned(9, 1, "1.4.0")),
        (id("new-low"), versioned(1, 2, "1.5.0")),
        (id("none"), versioned(5, 3, "")),
    ];
    let new = v("1.5.0");
    let best = |policy, leader_version| {
        best_live(
            &id("me"),
            Roster::unmarked(&rows),
            10,
            3,
            Ranking {
                policy,
                leader_version,
            },
        )
        .map(|n| n.id().as_str().to_owned())
    };
    assert_eq!(
        best(VersionPolicy::Ignore, None).as_deref(),
        Some("old-high")
    );
    assert_eq!(
        best(VersionPolicy::PreferNewest, None).as_deref(),
        Some("new-low")
    );
    assert_eq!(
        best(VersionPolicy::PreferOldest, None).as_deref(),
        Some("none")
    );
    assert_eq!(
        best(VersionPolicy::NoDowngrade, Some(&new)).as_deref(),
        Some("new-low"),
        "a 1.5.0 leader hands over to 1.5.0, not back to 1.4.0"
    );
    // No candidate at the leader's version or newer: the best older one.
    let two = &rows[..1];
    assert_eq!(
        best_live(
            &id("me"),
            Roster::unmarked(two),
            10,
            3,
            Ranking {
                policy: VersionPolicy::NoDowngrade,
                leader_version: Some(&new)
            }
        )
        .map(|n| n.id().clone()),
        Some(id("old-high"))
    );
    // The stagger: "old-high" waits behind "new-low" under prefer-newest.
    let r = Ranking {
        policy: VersionPolicy::PreferNewest,
        leader_version: None,
    };
    let old = v("1.4.0");
    assert_eq!(
        rank_among(
            &id("old-high"),
            st(Some(&old), 9),
            1,
            Roster::unmarked(&rows),
            10,
            3,
            &[],
            r
        ),
        1
    );
    assert_eq!(
        rank_among(
            &id("new-low"),
            st(Some(&new), 1),
            2,
            Roster::unmarked(&rows),
            10,
            3,
            &[],
            r
        ),
        0
    );
}

/// One follower decision of a candidate of priority `prio` and `version` on `rec`.
fn follow(
    c: &ElectionConfig,
    rec: &LeaderRecord,
    prio: i32,
    version: Option<&Version>,
    registry: &Registry,
) -> Plan {
    let input = CycleInput {
        version,
        payload: None,
        ..input(c, rec, prio, 0, Mode::Cycle, Lookups::default())
    };
    decide_with(
        &mut LocalState::new(id("me")),
        input,
        Roster::unmarked(registry),
    )
}

#[test]
fn a_follower_requests_a_handover_when_the_policy_ranks_it_above_the_leader() {
    let (old, new) = (v("1.4.0"), v("1.5.0"));
    // The leader runs 1.4.0 at priority 5.
    let mut rec = super::tests::owned("leader", 5, 3, 10);
    rec.leader_version = Some(old.clone());
    let none = Registry::new();
    // (policy, my version, my priority, requests a handover)
    let rows = [
        (VersionPolicy::Ignore, Some(&new), 1, false),
        (VersionPolicy::Ignore, Some(&new), 9, true),
        (VersionPolicy::PreferNewest, Some(&new), 1, true),
        (VersionPolicy::PreferNewest, Some(&old), 5, false),
        (VersionPolicy::PreferNewest, None, 9, false),
        (VersionPolicy::PreferOldest, Some(&new), 9, false),
        (VersionPolicy::PreferOldest, None, 1, true),
        (VersionPolicy::NoDowngrade, Some(&new), 5, false),
        (VersionPolicy::NoDowngrade, Some(&new), 6, true),
        (VersionPolicy::NoDowngrade, None, 9, false),
    ];
    for (policy, version, prio, requests) in rows {
        let c = cfg().to_builder().version_policy(policy).build().unwrap();
        let p = follow(&c, &rec, prio, version, &none);
        assert_eq!(
            p.action == Action::RequestedHandover,
            requests,
            "{policy} {version:?} priority {prio}: {:?}",
            p.action
        );
    }
}

#[test]
fn a_newer_leader_under_no_downgrade_never_hands_back_to_an_older_requester() {
    let (old, new) = (v("1.4.0"), v("1.5.0"));
    let c = cfg()
        .to_builder()
        .version_policy(VersionPolicy::NoDowngrade)
        .build()
        .unwrap();
    let mut st = LocalState::new(id("me"));
    let rec = super::tests::lead(&mut st, &c, 1, 0);
    // A rolled-back follower (1.4.0, priority 9) asked for the leadership.
    let mut asked = rec.clone();
    asked.leader_version = Some(new.clone());
    asked.handover = Some(Party::Candidate(Named::new(id("back"), Priority::new(9))));
    let rows: Registry = vec![(id("back"), versioned(9, 1, "1.4.0"))];
    let asking = CycleInput {
        version: Some(&new),
        payload: None,
        ..input(&c, &asked, 1, 100, Mode::Cycle, Lookups::default())
    };
    let p = decide_with(&mut st, asking, Roster::unmarked(&rows));
    assert_eq!(p.action, Action::Renewed, "not honoured: {:?}", p.action);
    assert_eq!(p.write.unwrap().handover, None, "the request is dropped");
    let _ = old;
}
