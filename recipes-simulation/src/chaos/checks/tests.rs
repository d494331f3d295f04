//! The four checks on hand-made records: each passes a clean run and catches its fault.

use super::fencing::*;
use super::overlap::*;
use super::progress::*;
use super::recovery::*;
use super::spans::*;
use crate::chaos::model::{ChildRun, Fault, FaultKind, ObservedChange, Window};
use crate::chaos::sink::SinkLog;
use crate::chaos::sink::entry::{SinkEntry, SinkState};

const MS: u64 = 1_000_000;

/// A log of `(accepted, ballot, value, writer)` lines, each with the state a sink that
/// took them in this order records after it.
fn log(lines: &[(bool, u64, u64, &str)]) -> SinkLog {
    let mut state = SinkState::default();
    let entries = lines
        .iter()
        .map(|&(accepted, ballot, value, who)| {
            if accepted {
                state = SinkState {
                    max_ballot: state.max_ballot.max(ballot),
                    counter: value,
                };
            }
            SinkEntry {
                accepted,
                ballot,
                value,
                t_ns: 0,
                candidate: who.into(),
                state,
            }
        })
        .collect();
    SinkLog { entries, cut: 0 }
}

fn child(slot: u32, inc: u32, ballot: u64, from_ms: u64, to_ms: u64) -> ChildRun {
    ChildRun {
        slot,
        incarnation: inc,
        pid: i32::try_from(slot).unwrap_or(0),
        ballot,
        shard: None,
        times: (from_ms..=to_ms)
            .step_by(5)
            .map(|m| m.saturating_mul(MS))
            .collect(),
    }
}

#[test]
fn a_fenced_log_passes_and_counts_stale_rejections() {
    let log = log(&[
        (true, 1, 1, "a"),
        (true, 1, 2, "a"),
        (true, 2, 3, "b"),
        (false, 1, 2, "a"),
        (true, 2, 4, "b"),
    ]);
    let v = check_sink(&log);
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!((v.accepted, v.rejected_stale, v.lost), (4, 1, 0));
}

#[test]
fn check_a_catches_an_unfenced_sink() {
    // The plant `unfenced-sink`: the stale writer (ballot 1) lands after ballot 2 and sets
    // the counter back.
    let log = log(&[
        (true, 1, 1, "a"),
        (true, 2, 2, "b"),
        (true, 2, 3, "b"),
        (true, 1, 2, "a"),
    ]);
    let v = check_sink(&log);
    assert_eq!(v.out_of_order, 1);
    assert_eq!(v.lost, 2);
    assert!(
        v.violations
            .iter()
            .any(|s| s.contains("accepted after ballot 2"))
    );
    assert!(v.violations.iter().any(|s| s.contains("updates lost")));
    assert_eq!(v.violation_count, 2);
}

#[test]
fn check_a_catches_a_ballot_with_two_owners_and_a_bogus_rejection() {
    let v = check_sink(&log(&[
        (true, 3, 1, "a"),
        (true, 3, 2, "b"),
        (false, 3, 3, "c"),
    ]));
    assert_eq!(v.shared_ballots, 1);
    assert_eq!(v.violations.len(), 2);
}

#[test]
fn cut_writes_are_counted_never_violations_but_a_state_the_log_does_not_imply_is() {
    let mut cut = log(&[(true, 1, 1, "a"), (true, 1, 2, "a"), (true, 2, 3, "b")]);
    cut.cut = 2;
    let v = check_sink(&cut);
    assert_eq!(
        (v.cut_writes, v.violation_count),
        (2, 0),
        "{:?}",
        v.violations
    );
    // A sink that decided on a counter its log does not show (the old state file, ahead
    // of its log): the line's state and the next line's count both disagree.
    let mut ahead = log(&[(true, 1, 1, "a"), (true, 2, 3, "b")]);
    ahead.entries[0].state.counter = 2;
    let v = check_sink(&ahead);
    assert!(
        v.violations
            .iter()
            .any(|s| s.contains("recorded state (1, 2)"))
    );
    assert!(v.violations.iter().any(|s| s.contains("updates lost")));
}

#[test]
fn spans_split_at_gaps_and_percentiles_use_nearest_rank() {
    let times = [0, 5, 10, 200, 205].map(|m: u64| m.saturating_mul(MS));
    assert_eq!(
        alive_spans(&times, 50 * MS),
        vec![(0, 10 * MS), (200 * MS, 205 * MS)]
    );
    assert_eq!(alive_spans(&[], 1), vec![]);
    assert_eq!(percentile(&[1, 2, 3, 4], 50), 2);
    assert_eq!(percentile(&[1, 2, 3, 4], 99), 4);
    let ri = report_interval(&[child(0, 0, 1, 0, 100)], 50 * MS);
    assert_eq!((ri.p50, ri.p99, ri.max), (5 * MS, 5 * MS, 5 * MS));
    assert_eq!(ri.tolerance(8 * MS), 8 * MS);
}

#[test]
fn handovers_without_overlap_pass() {
    let children = [child(0, 0, 1, 0, 1000), child(1, 0, 2, 1010, 2000)];
    let v = check_overlaps(&children, &[], &[], 5 * MS, 5 * MS, 50 * MS, u64::MAX);
    assert!(v.violations.is_empty() && v.in_alone_pause == 0);
}

#[test]
fn check_b_catches_two_children_alive_at_once() {
    // The plant `clock-beyond-rho`: a slow-clocked leader's child outlives its lease while
    // the successor's child runs.
    let children = [child(0, 0, 1, 0, 1300), child(1, 0, 2, 1100, 2000)];
    let v = check_overlaps(&children, &[], &[], 5 * MS, 5 * MS, 50 * MS, u64::MAX);
    assert_eq!(v.violations.len(), 1);
    assert_eq!(v.violations[0].len(), 200 * MS);
    assert!(v.violations[0].describe(0).contains("ballot 1"));
    // Within the tolerance it passes.
    let v = check_overlaps(&children, &[], &[], 250 * MS, 250 * MS, 50 * MS, u64::MAX);
    assert!(v.violations.is_empty());
}

#[test]
fn a_supervisor_paused_alone_excuses_nothing_and_a_vm_paused_child_is_not_alive() {
    // The child of a supervisor paused alone from 0.5 s ran on beside its successor's
    // from 1.5 s to 2.5 s: a violation, inside the window or not (its watchdog must kill
    // it at the lease deadline), counted apart for the report.
    let children = [child(0, 0, 1, 0, 2500), child(1, 0, 2, 1500, 4000)];
    let window = Window {
        slot: 0,
        incarnation: 0,
        from: 500 * MS,
        to: 2600 * MS,
    };
    let v = check_overlaps(&children, &[window], &[], 5 * MS, 5 * MS, 50 * MS, u64::MAX);
    assert_eq!(v.violations.len(), 1);
    assert_eq!(
        (v.violations[0].from, v.violations[0].to),
        (1500 * MS, 2500 * MS)
    );
    assert_eq!(v.in_alone_pause, 1);
    // A window of another supervisor does not count it as "in a pause".
    let other = Window { slot: 2, ..window };
    let v = check_overlaps(&children, &[other], &[], 5 * MS, 5 * MS, 50 * MS, u64::MAX);
    assert_eq!((v.violations.len(), v.in_alone_pause), (1, 0));
    // The watchdog killed the child at the deadline (0.9 s), before the successor's
    // started: nothing to report.
    let killed = [child(0, 0, 1, 0, 900), child(1, 0, 2, 1500, 4000)];
    let v = check_overlaps(&killed, &[window], &[], 5 * MS, 5 * MS, 50 * MS, u64::MAX);
    assert!(v.violations.is_empty() && v.in_alone_pause == 0, "{v:?}");
    // A child paused with its supervisor (a VM pause) is not alive during the pause.
    let mut vm = child(0, 0, 1, 0, 900);
    vm.times.extend(child(0, 0, 1, 2000, 2002).times);
    let v = check_overlaps(
        &[vm, child(1, 0, 2, 1000, 3000)],
        &[],
        &[],
        5 * MS,
        5 * MS,
        50 * MS,
        u64::MAX,
    );
    assert!(v.violations.is_empty(), "{v:?}");
}

#[test]
fn the_resumption_of_a_vm_pause_is_counted_apart_only_while_it_is_short() {
    // A VM pause of the leader from 0.5 s to 1.3 s; the successor's child runs from 1.1 s.
    // At the heal the old child runs again until its watchdog, continued with it, kills it.
    let vm_window = Window {
        slot: 0,
        incarnation: 0,
        from: 500 * MS,
        to: 1300 * MS,
    };
    let resumed = |until_ms: u64| {
        let mut old = child(0, 0, 1, 0, 500);
        old.times.extend(child(0, 0, 1, 1302, until_ms).times);
        [old, child(1, 0, 2, 1100, 3000)]
    };
    // Gone 16 ms after the heal, with a 5 ms tolerance and 40 ms of scheduling delay seen:
    // counted apart.
    let v = check_overlaps(
        &resumed(1318),
        &[],
        &[vm_window],
        5 * MS,
        40 * MS,
        50 * MS,
        u64::MAX,
    );
    assert!(v.violations.is_empty(), "{v:?}");
    assert_eq!(v.after_vm_pause, 1);
    // Alive 200 ms after the heal: its watchdog did not act, a violation.
    let v = check_overlaps(
        &resumed(1500),
        &[],
        &[vm_window],
        5 * MS,
        40 * MS,
        50 * MS,
        u64::MAX,
    );
    assert_eq!((v.violations.len(), v.after_vm_pause), (1, 0));
    // The same overlap without the VM pause (another supervisor's window): a violation.
    let other = Window {
        slot: 1,
        ..vm_window
    };
    let v = check_overlaps(
        &resumed(1318),
        &[],
        &[other],
        5 * MS,
        40 * MS,
        50 * MS,
        u64::MAX,
    );
    assert_eq!((v.violations.len(), v.after_vm_pause), (1, 0));
}

fn limits(bound_ms: u64, until_ms: u64, stalls: &[(u64, u64)]) -> RecoveryLimits<'_> {
    RecoveryLimits {
        tolerance: 5 * MS,
        bound: bound_ms.saturating_mul(MS),
        split_gap: 50 * MS,
        until: until_ms.saturating_mul(MS),
        stalls,
    }
}

fn fault(heal_ms: u64) -> Fault {
    Fault {
        kind: FaultKind::Kill9,
        slot: Some(0),
        start: heal_ms.saturating_mul(MS),
        heal: heal_ms.saturating_mul(MS),
        detail: String::new(),
    }
}

#[test]
fn recovery_is_timed_from_the_heal_to_a_current_child() {
    let recovery = |faults: &[Fault], children: &[ChildRun]| {
        check_recovery(faults, children, &[], &limits(2000, 4000, &[]))
    };
    let children = [child(0, 0, 1, 0, 1000), child(1, 0, 2, 2200, 4000)];
    let r = recovery(&[fault(1000)], &children);
    assert_eq!(r[0].took, Some(1200 * MS));
    assert!(r[0].judged && !r[0].violated);
    // A leader alive through the fault: recovery 0.
    let r = recovery(&[fault(500)], &children);
    assert_eq!(r[0].took, Some(0));
    // A killed leader's child reporting for a few more milliseconds is no recovery.
    let dying = [child(0, 0, 1, 0, 1010), child(1, 0, 2, 2200, 4000)];
    let r = recovery(&[fault(1000)], &dying);
    assert_eq!(r[0].took, Some(1200 * MS));
}

#[test]
fn check_c_catches_a_slow_recovery_and_ignores_stale_or_paused_children() {
    // The new leader only comes 3 s after the heal; meanwhile the stale child (ballot 1)
    // reports after ballot 2 did, and ballot 2's own supervisor is paused at first.
    let mut stale = child(0, 0, 1, 0, 1000);
    stale.times.extend(child(0, 0, 1, 1500, 1600).times);
    let children = [stale, child(1, 0, 2, 1400, 4500)];
    let paused = [Window {
        slot: 1,
        incarnation: 0,
        from: 1300 * MS,
        to: 4000 * MS,
    }];
    let r = check_recovery(&[fault(1000)], &children, &paused, &limits(2000, 5000, &[]));
    assert_eq!(r[0].took, Some(3000 * MS));
    assert!(r[0].violated);
    // The same, while the cluster could not commit for 1.2 s after the heal: allowed.
    let stalls = [(900 * MS, 2200 * MS)];
    let r = check_recovery(
        &[fault(1000)],
        &children,
        &paused,
        &limits(2000, 5000, &stalls),
    );
    assert_eq!(r[0].allowance, 1205 * MS);
    assert!(r[0].judged && !r[0].violated);
    // No child at all, and the run went on past the bound: a violation.
    let r = check_recovery(&[fault(4600)], &children, &[], &limits(200, 5000, &[]));
    assert!(r[0].violated && r[0].took.is_none());
    // ... but not if the run ended first.
    let r = check_recovery(&[fault(4600)], &children, &[], &limits(2000, 5000, &[]));
    assert!(!r[0].judged && !r[0].violated);
}

fn change(reason: &str, ballot: Option<u64>) -> ObservedChange {
    ObservedChange {
        t: 0,
        reason: reason.into(),
        ballot,
        leader: ballot.map(|b| format!("c{b}")),
    }
}

#[test]
fn transitions_are_classified_and_check_d_catches_a_run_without_takeovers() {
    let changes = [
        change("acquired", Some(1)),
        change("stepped_down", None),
        change("handed_over", Some(2)),
        change("lease_lapsed", None),
        change("acquired", Some(3)),
        change("replaced", Some(4)),
        change("discovered", Some(4)),
        change("stepped_down", None),
        change("acquired", Some(5)),
    ];
    let t = classify(&changes);
    assert_eq!(
        t,
        Transitions {
            elections: 5,
            handovers: 1,
            takeovers: 2
        }
    );
    assert!(check_progress(&t, 10).is_empty());
    // A run with handovers only (say, nothing ever lapsed) is vacuous for takeovers.
    let quiet = classify(&changes[..3]);
    assert_eq!(check_progress(&quiet, 10), vec!["no takeover".to_owned()]);
    assert_eq!(check_progress(&Transitions::default(), 0).len(), 4);
}

#[test]
fn windows_touch_only_when_they_share_an_instant() {
    assert!(touches((0, 10), (9, 20)));
    assert!(!touches((0, 10), (10, 20)));
    assert!(!touches((5, 10), (0, 5)));
    assert!(touches((5, 10), (0, 100)));
}

/// `child`, working for `shard`.
fn shard_child(shard: u32, slot: u32, ballot: u64, from_ms: u64, to_ms: u64) -> ChildRun {
    ChildRun {
        shard: Some(shard),
        pid: i32::try_from(slot.saturating_mul(100).saturating_add(shard)).unwrap_or(0),
        ..child(slot, 0, ballot, from_ms, to_ms)
    }
}

#[test]
fn sharded_transitions_tell_takeovers_from_handovers() {
    let children = [
        // Shard 0: c0's ballot 1, c0 killed at 1 s, c1's ballot 2 from 2.2 s: a takeover.
        shard_child(0, 0, 1, 0, 1000),
        shard_child(0, 1, 2, 2200, 4000),
        // Shard 1: c0's ballot 1 handed over to c2's ballot 2 at 0.5 s (nobody hurt then).
        shard_child(1, 0, 1, 0, 500),
        shard_child(1, 2, 2, 520, 900),
        // ... then c2 paused from 0.9 s: c1's ballot 3 takes over.
        shard_child(1, 1, 3, 2000, 4000),
    ];
    let killed = Fault {
        slot: Some(0),
        ..fault(1000)
    };
    let paused = [Window {
        slot: 2,
        incarnation: 0,
        from: 900 * MS,
        to: 2500 * MS,
    }];
    let t = classify_shards(&children, std::slice::from_ref(&killed), &paused);
    assert_eq!((t.elections, t.handovers, t.takeovers), (5, 1, 2), "{t:?}");
    // Without the faults the harness caused, every change counts as cooperative.
    let t = classify_shards(&children, &[], &[]);
    assert_eq!((t.handovers, t.takeovers), (3, 0));
    // A kill of another slot, or after the new ballot's child started, is not this change's
    // cause.
    let elsewhere = Fault {
        slot: Some(2),
        ..fault(1000)
    };
    let late = Fault {
        slot: Some(0),
        ..fault(3000)
    };
    let t = classify_shards(&children[..2], &[elsewhere, late], &[]);
    assert_eq!((t.handovers, t.takeovers), (1, 0));
}

#[test]
fn verdicts_of_each_shard_add_up_naming_the_shard() {
    let mut all = SinkVerdict::default();
    all.absorb(
        check_sink(&log(&[(true, 1, 1, "a"), (true, 2, 2, "b")])),
        Some(0),
    );
    all.absorb(
        check_sink(&log(&[(true, 2, 1, "b"), (true, 1, 2, "a")])),
        Some(3),
    );
    assert_eq!((all.accepted, all.out_of_order), (4, 1));
    assert_eq!(all.violation_count, 1);
    assert!(
        all.violations[0].starts_with("shard 3: write 1: ballot 1"),
        "{:?}",
        all.violations
    );
    let mut overlaps = OverlapVerdict::default();
    let one_shard = [
        shard_child(2, 0, 1, 0, 1000),
        shard_child(2, 1, 2, 500, 1500),
    ];
    overlaps.absorb(check_overlaps(
        &one_shard,
        &[],
        &[],
        5 * MS,
        5 * MS,
        50 * MS,
        2000 * MS,
    ));
    assert_eq!(overlaps.violations.len(), 1);
    assert_eq!(overlaps.violations[0].shard, Some(2));
    assert!(
        overlaps.violations[0]
            .describe(0)
            .starts_with("shard 2: children of c0i0")
    );
}
