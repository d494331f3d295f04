//! The local state's bookkeeping, at its boundaries: what the table tests of the core
//! reach only through whole decisions.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

use super::*;
use crate::ids::Priority;
use crate::record::{AttemptId, Named};

fn id(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap()
}

fn at(ms: u64) -> LocalInstant {
    LocalInstant::from_origin(Duration::from_millis(ms))
}

fn tenure(ballot: u64, renewal: u64, until_ms: u64) -> Tenure {
    Tenure {
        ballot: Ballot::new(ballot),
        renewal,
        lease: Duration::from_secs(10),
        valid_until: at(until_ms),
        acquired_at: at(0),
        drain: None,
    }
}

fn pending(seq: u64, promotes: bool) -> PendingAttempt {
    PendingAttempt {
        seq,
        started_at: at(seq * 1_000),
        promotes,
        read_version: None,
    }
}

fn record_by(me: &str, ballot: u64, renewal: u64, seq: u64, owned: bool) -> LeaderRecord {
    LeaderRecord {
        ballot: Ballot::new(ballot),
        owner: owned.then(|| Named::new(id(me), Priority::new(1))),
        renewal,
        lease: Duration::from_secs(10),
        handover: None,
        reservation: None,
        payload: None,
        writer: Some(AttemptId {
            candidate: id(me),
            seq,
        }),
        handover_to: None,
        leader_version: None,
    }
}

fn seqs(st: &LocalState) -> Vec<u64> {
    st.pending().iter().map(|p| p.seq).collect()
}

#[test]
fn the_observation_identity_includes_the_writer() {
    let mut slot = None;
    let first = record_by("a", 1, 2, 5, true);
    Observed::note(&mut slot, &first, at(100));
    // The same record again: the timing goes on.
    Observed::note(&mut slot, &first, at(200));
    assert_eq!(slot.as_ref().map(|o| o.first_seen), Some(at(100)));
    assert!(slot.as_ref().is_some_and(|o| o.lapsed(&first, at(10_100))));
    // The same (ballot, renewal) by another attempt (an uncommitted write read back, then
    // the real one): the timing restarts, and the old one does not count for it.
    let again = record_by("a", 1, 2, 6, true);
    assert!(!slot.as_ref().is_some_and(|o| o.lapsed(&again, at(10_100))));
    Observed::note(&mut slot, &again, at(300));
    assert_eq!(slot.as_ref().map(|o| o.first_seen), Some(at(300)));
    assert!(!slot.as_ref().is_some_and(|o| o.lapsed(&again, at(10_299))));
    assert!(slot.as_ref().is_some_and(|o| o.lapsed(&again, at(10_300))));
}

#[test]
fn one_open_cycle_at_a_time_until_it_is_settled() {
    let mut st = LocalState::new(id("me"));
    assert!(st.open_cycle().is_ok());
    assert!(matches!(
        st.open_cycle(),
        Err(ElectionError::CycleInProgress { .. })
    ));
    st.close_cycle();
    assert!(st.open_cycle().is_ok());
}

#[test]
fn attempt_numbers_start_at_one_and_never_repeat() {
    let mut st = LocalState::new(id("me"));
    assert_eq!(st.next_seq().unwrap(), 1);
    assert_eq!(st.next_seq().unwrap(), 2);
    st.next_seq = u64::MAX;
    assert!(matches!(
        st.next_seq(),
        Err(ElectionError::CounterExhausted { .. })
    ));
}

#[test]
fn the_pending_list_keeps_the_newest_sixteen() {
    let mut st = LocalState::new(id("me"));
    for seq in 1..=20 {
        st.push_pending(pending(seq, true));
    }
    assert_eq!(seqs(&st), (5..=20).collect::<Vec<_>>());
}

#[test]
fn a_belief_is_valid_strictly_before_its_end() {
    let mut st = LocalState::new(id("me"));
    st.role = Role::Leader(tenure(3, 1, 500));
    assert!(st.valid_tenure(at(499)).is_some());
    assert!(st.valid_tenure(at(500)).is_none());
    // A belief that ended is gone at once in the cycle that sees it.
    let rec = record_by("me", 3, 1, 1, true);
    st.check_tenure(&rec, at(500));
    assert!(st.tenure().is_none());
}

#[test]
fn only_a_strictly_shorter_lease_caps_and_only_downwards() {
    let mut st = LocalState::new(id("me"));
    st.role = Role::Leader(tenure(3, 1, 9_000));
    // The same lease never moves the end, even to an earlier instant.
    st.cap_belief(Duration::from_secs(10), at(4_000));
    assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(9_000)));
    // A shorter lease whose end comes later changes nothing either.
    st.cap_belief(Duration::from_secs(1), at(9_500));
    assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(9_000)));
    st.cap_belief(Duration::from_secs(1), at(2_000));
    assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(2_000)));
    // (Capping to exactly the current end would change nothing: `<` and `<=` agree there.)
}

#[test]
fn recognising_an_attempt_forgets_it_and_every_older_one_but_keeps_newer_ones() {
    let cfg = ElectionConfig::default();
    let mut st = LocalState::new(id("me"));
    for seq in 1..=3 {
        st.push_pending(pending(seq, true));
    }
    st.recognize_own_write(&record_by("me", 4, 7, 2, true), &cfg, None)
        .unwrap();
    assert_eq!(seqs(&st), vec![3]);
    let t = st.tenure().unwrap();
    assert_eq!(
        (t.ballot, t.renewal, t.acquired_at),
        (Ballot::new(4), 7, at(2_000))
    );
}

#[test]
fn a_recognised_attempt_that_does_not_promote_never_makes_a_leader() {
    let cfg = ElectionConfig::default();
    let mut st = LocalState::new(id("me"));
    st.push_pending(pending(5, false));
    // Even if the record names this candidate (it owned it before releasing).
    st.recognize_own_write(&record_by("me", 4, 7, 5, true), &cfg, None)
        .unwrap();
    assert!(st.tenure().is_none());
    assert!(st.pending().is_empty());
}

#[test]
fn a_recognised_renewal_keeps_the_term_it_renews() {
    let cfg = ElectionConfig::default();
    let mut st = LocalState::new(id("me"));
    let mut t = tenure(4, 6, 9_000);
    t.acquired_at = at(100);
    t.drain = Some(Drain {
        since: at(200),
        request: None,
    });
    st.role = Role::Leader(t);
    st.push_pending(pending(3, true));
    st.recognize_own_write(&record_by("me", 4, 7, 3, true), &cfg, None)
        .unwrap();
    let t = st.tenure().unwrap();
    assert_eq!(t.renewal, 7);
    assert_eq!(
        t.acquired_at,
        at(100),
        "the term started at its acquisition"
    );
    assert_eq!(t.drain.as_ref().map(|d| d.since), Some(at(200)));
    assert_eq!(
        t.valid_until,
        at(3_000).saturating_add(cfg.local_validity(Duration::from_secs(10)))
    );
}

#[test]
fn adopting_needs_the_very_attempt_and_forgets_it_and_older_ones() {
    let mut st = LocalState::new(id("me"));
    for seq in 1..=3 {
        st.push_pending(pending(seq, seq != 1));
    }
    // An attempt that is not pending (forgotten, or never made) is not adopted, whatever
    // else is pending.
    let stranger = Adoption {
        seq: 7,
        tenure: tenure(4, 8, 9_000),
    };
    assert!(!st.adopt(&stranger));
    // A pending attempt that does not promote is not adopted either.
    assert!(!st.adopt(&Adoption {
        seq: 1,
        tenure: tenure(4, 8, 9_000),
    }));
    assert!(st.adopt(&Adoption {
        seq: 2,
        tenure: tenure(4, 8, 9_000),
    }));
    assert_eq!(seqs(&st), vec![3]);
}

#[test]
fn only_a_newer_identity_replaces_a_belief() {
    let mut st = LocalState::new(id("me"));
    assert!(st.install(tenure(4, 8, 9_000)));
    assert!(
        !st.install(tenure(4, 8, 9_500)),
        "the same identity is not newer"
    );
    assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(9_000)));
    assert!(!st.install(tenure(4, 7, 9_500)));
    assert!(st.install(tenure(4, 9, 9_500)));
    assert!(st.held(Ballot::new(4)));
}
