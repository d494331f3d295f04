//! Table tests of the coordinator's timing of the members (docs/design.md §12.2, the one lapse rule of
//! §7): when a member lapses, and when the next reading is due so that it is fenced out at
//! its lapse, not up to a period later.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

use std::collections::BTreeMap;
use std::time::Duration;

use super::coordinator::{CoordinatorState, time_members};
use super::member_tests::{at, id};
use crate::ids::{CandidateId, Priority, Weight};
use crate::record::Eligibility;
use crate::record::shard::{Inbox, MemberRecord};

fn rec(renewal: u64, lease_ms: u64) -> MemberRecord {
    MemberRecord {
        epoch: 1,
        renewal,
        lease: Duration::from_millis(lease_ms),
        priority: Priority::new(0),
        weight: Weight::new(1),
        fenced: false,
        writer: None,
        eligibility: Eligibility::Eligible,
    }
}

fn members(rows: &[(&str, MemberRecord)]) -> BTreeMap<CandidateId, (MemberRecord, Inbox)> {
    rows.iter()
        .map(|(n, r)| (id(n), (r.clone(), Inbox::default())))
        .collect()
}

/// The members that lapsed at a reading at `ms`.
fn lapsed(
    st: &mut CoordinatorState,
    m: &BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    ms: u64,
) -> Vec<String> {
    time_members(st, m, at(ms))
        .into_iter()
        .filter(|(_, _, lapsed)| *lapsed)
        .map(|(id, _, _)| id.as_str().to_owned())
        .collect()
}

const PERIOD: Duration = Duration::from_millis(25);

#[test]
fn the_next_reading_comes_at_the_earliest_lapse_when_that_is_sooner_than_the_period() {
    // (a, b first seen at 0 and 90 with leases 300 and 200): b lapses at 290, a at 300.
    let mut st = CoordinatorState::default();
    assert_eq!(
        st.next_reading_in(at(0), PERIOD),
        PERIOD,
        "nothing timed yet"
    );
    let a = members(&[("a", rec(1, 300))]);
    assert!(lapsed(&mut st, &a, 0).is_empty());
    let ab = members(&[("a", rec(1, 300)), ("b", rec(1, 200))]);
    assert!(lapsed(&mut st, &ab, 90).is_empty());
    let rows: [(u64, Duration); 5] = [
        (100, PERIOD),                    // 190 ms before any lapse: the period
        (270, Duration::from_millis(20)), // b lapses at 290
        (289, Duration::from_millis(1)),
        (290, Duration::ZERO),
        (295, Duration::ZERO), // late: due at once
    ];
    for (now, due) in rows {
        assert_eq!(st.next_reading_in(at(now), PERIOD), due, "at {now} ms");
    }
    // The reading at b's lapse fences b (it lapsed) and the next is due at a's lapse.
    assert_eq!(lapsed(&mut st, &ab, 290), vec!["b".to_owned()]);
    assert_eq!(
        st.next_reading_in(at(290), PERIOD),
        Duration::from_millis(10)
    );
    assert_eq!(
        lapsed(&mut st, &ab, 300),
        vec!["a".to_owned(), "b".to_owned()]
    );
    // Every member lapsed: nothing sooner than the period (a fence whose commit failed is
    // retried at the period, not in a loop).
    assert_eq!(st.next_reading_in(at(300), PERIOD), PERIOD);
}

#[test]
fn a_renewal_seen_moves_the_lapse_and_a_member_gone_or_fenced_is_not_waited_for() {
    let mut st = CoordinatorState::default();
    assert!(
        lapsed(
            &mut st,
            &members(&[("a", rec(1, 300)), ("b", rec(1, 300))]),
            0
        )
        .is_empty()
    );
    // a renewed, seen at 100: its lapse is 400; b's stays 300.
    assert!(
        lapsed(
            &mut st,
            &members(&[("a", rec(2, 300)), ("b", rec(1, 300))]),
            100
        )
        .is_empty()
    );
    assert_eq!(
        st.next_reading_in(at(290), PERIOD),
        Duration::from_millis(10)
    );
    // b gone (or fenced out): only a's lapse, at 400.
    let mut fenced = rec(1, 300);
    fenced.fenced = true;
    for rows in [
        members(&[("a", rec(2, 300))]),
        members(&[("a", rec(2, 300)), ("b", fenced)]),
    ] {
        let mut st2 = st.clone();
        assert!(lapsed(&mut st2, &rows, 200).is_empty());
        assert_eq!(
            st2.next_reading_in(at(390), PERIOD),
            Duration::from_millis(10)
        );
        assert_eq!(st2.next_reading_in(at(200), PERIOD), PERIOD);
    }
}
