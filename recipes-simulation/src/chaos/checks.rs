//! The four checks, on the harness's records, against true time:
//!
//! - **(a) fencing** ([`check_sink`]): the sink accepted writes in ballot order, each ballot
//!   from one candidate, and lost no increment;
//! - **(b) no overlap** ([`check_overlaps`]): no two children with different ballots were
//!   alive at the same instant for longer than the measured report interval — also while a
//!   supervisor alone was paused: its watchdog holds the lease and kills the child at the
//!   deadline (those windows are kept, to report the overlaps inside them). One moment is
//!   counted apart: the resumption of a VM pause, when the supervisor, its watchdog and its
//!   child, stopped together, continue together and the child runs until the watchdog is
//!   scheduled; if it is gone within the largest report interval of the run (the scheduling
//!   delay the run saw) it is reported, not a violation (no process on the machine can
//!   prevent it; README, "What it cannot do");
//! - **(c) recovery** ([`check_recovery`]): after each fault heals, a current child runs
//!   within lease + 2 heartbeats + grace (on FoundationDB, plus the time the cluster itself
//!   could not commit meanwhile, as the probe measured it);
//! - **(d) progress** ([`check_progress`]): elections, handovers and takeovers all happened.
//!
//! A child is *alive* over each run of its reports whose gaps stay within `split_gap`: a
//! child stopped with its supervisor (a VM pause) sends nothing and is not alive meanwhile.

use std::collections::BTreeMap;

use super::clock::millis;
use super::model::{ChildRun, Fault, ObservedChange, Window};
use super::sink::{SinkLog, SinkState};

/// (a) What a sink's log shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkVerdict {
    /// Writes accepted.
    pub accepted: u64,
    /// Writes rejected because a higher ballot had written (fenced sink only).
    pub rejected_stale: u64,
    /// Accepted writes whose ballot was lower than one accepted before.
    pub out_of_order: u64,
    /// Increments undone by later writes: accepted writes minus the final counter.
    pub lost: u64,
    /// Accepted writes whose ballot another candidate had written with.
    pub shared_ballots: u64,
    /// Writes cut inside their one `write(2)` (the writer died in it): they did not happen,
    /// the sink derived no state from them, and they are no violation.
    pub cut_writes: u64,
    /// How many writes broke the fencing rules.
    pub violation_count: u64,
    /// What broke the fencing rules, in words (the first few).
    pub violations: Vec<String>,
}

/// How many violation texts a verdict keeps.
const KEEP: usize = 10;

fn note(v: &mut SinkVerdict, text: impl FnOnce() -> String) {
    v.violation_count = v.violation_count.saturating_add(1);
    if v.violations.len() < KEEP {
        v.violations.push(text());
    }
}

/// (a) Checks a sink's log, in the order the sink saw the writes. Each line also records the
/// state the sink derived after it; a line whose state is not the one its predecessors imply
/// is a violation too (the sink decided on a state the log does not show).
pub fn check_sink(log: &SinkLog) -> SinkVerdict {
    let mut v = SinkVerdict {
        cut_writes: log.cut,
        ..SinkVerdict::default()
    };
    let mut max_ballot = 0u64;
    let mut counter = 0u64;
    let mut owners: BTreeMap<u64, &str> = BTreeMap::new();
    for (i, e) in log.entries.iter().enumerate() {
        if !e.accepted {
            if e.ballot < e.value {
                v.rejected_stale = v.rejected_stale.saturating_add(1);
            } else {
                note(&mut v, || {
                    format!(
                        "write {i}: ballot {} rejected although the highest accepted was {}",
                        e.ballot, e.value
                    )
                });
            }
            check_state(&mut v, i, e.state, max_ballot, counter);
            continue;
        }
        v.accepted = v.accepted.saturating_add(1);
        if e.ballot < max_ballot {
            v.out_of_order = v.out_of_order.saturating_add(1);
            note(&mut v, || {
                format!(
                    "write {i}: ballot {} ({}) accepted after ballot {max_ballot} had written",
                    e.ballot, e.candidate
                )
            });
        }
        match owners.get(&e.ballot) {
            Some(owner) if *owner != e.candidate => {
                v.shared_ballots = v.shared_ballots.saturating_add(1);
                note(&mut v, || {
                    format!(
                        "write {i}: ballot {} written by {} and by {owner}",
                        e.ballot, e.candidate
                    )
                });
            }
            Some(_) => {}
            None => {
                owners.insert(e.ballot, &e.candidate);
            }
        }
        if e.value != counter.saturating_add(1) {
            note(&mut v, || {
                format!(
                    "write {i}: ballot {} ({}) set the counter to {} after {counter}: updates lost",
                    e.ballot, e.candidate, e.value
                )
            });
        }
        counter = e.value;
        max_ballot = max_ballot.max(e.ballot);
        check_state(&mut v, i, e.state, max_ballot, counter);
    }
    v.lost = v.accepted.saturating_sub(counter);
    v
}

/// A line's recorded state against the one the log implies.
fn check_state(v: &mut SinkVerdict, i: usize, state: SinkState, max_ballot: u64, counter: u64) {
    if state
        != (SinkState {
            max_ballot,
            counter,
        })
    {
        note(v, || {
            format!(
                "write {i}: the sink recorded state ({}, {}) where its log implies \
                 ({max_ballot}, {counter})",
                state.max_ballot, state.counter
            )
        });
    }
}

/// The runs of `times` (ascending) whose gaps stay within `split_gap`: `(first, last)`.
pub fn alive_spans(times: &[u64], split_gap: u64) -> Vec<(u64, u64)> {
    let mut spans = Vec::new();
    let mut iter = times.iter().copied();
    let Some(first) = iter.next() else {
        return spans;
    };
    let (mut from, mut last) = (first, first);
    for t in iter {
        if t.saturating_sub(last) > split_gap {
            spans.push((from, last));
            from = t;
        }
        last = t;
    }
    spans.push((from, last));
    spans
}

/// The measured report interval: gaps between consecutive reports within alive spans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportInterval {
    /// Median gap, nanoseconds.
    pub p50: u64,
    /// 99th percentile gap: the overlap tolerance (at least the nominal interval).
    pub p99: u64,
    /// Largest gap within a span.
    pub max: u64,
    /// Gaps measured.
    pub samples: u64,
}

impl ReportInterval {
    /// The tolerance check (b) allows: the p99 gap, at least `nominal`.
    pub fn tolerance(&self, nominal: u64) -> u64 {
        self.p99.max(nominal)
    }
}

/// Measures the report interval over every child.
pub fn report_interval(children: &[ChildRun], split_gap: u64) -> ReportInterval {
    let mut gaps: Vec<u64> = children
        .iter()
        .flat_map(|c| c.times.windows(2))
        .filter_map(|w| match w {
            [a, b] => Some(b.saturating_sub(*a)),
            _ => None,
        })
        .filter(|g| *g <= split_gap)
        .collect();
    gaps.sort_unstable();
    ReportInterval {
        p50: percentile(&gaps, 50),
        p99: percentile(&gaps, 99),
        max: gaps.last().copied().unwrap_or(0),
        samples: u64::try_from(gaps.len()).unwrap_or(u64::MAX),
    }
}

/// The `p`th percentile (nearest rank) of sorted `values`; 0 when empty.
pub fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = sorted
        .len()
        .saturating_mul(p)
        .div_ceil(100)
        .saturating_sub(1)
        .min(sorted.len().saturating_sub(1));
    sorted.get(rank).copied().unwrap_or(0)
}

/// Two children with different ballots alive at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// (slot, incarnation, ballot, pid) of the older ballot's child.
    pub older: (u32, u32, u64, i32),
    /// The same for the newer ballot's child.
    pub newer: (u32, u32, u64, i32),
    /// From.
    pub from: u64,
    /// To.
    pub to: u64,
}

impl Overlap {
    /// How long.
    pub fn len(&self) -> u64 {
        self.to.saturating_sub(self.from)
    }

    /// Whether it lasted no time.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// In words, times relative to `t0`.
    pub fn describe(&self, t0: u64) -> String {
        let (os, oi, ob, op) = self.older;
        let (ns, ni, nb, np) = self.newer;
        format!(
            "children of c{os}i{oi} (ballot {ob}, pid {op}) and c{ns}i{ni} (ballot {nb}, pid {np}) \
             both alive from {:.3}s to {:.3}s ({:.1} ms)",
            millis(self.from.saturating_sub(t0)) / 1e3,
            millis(self.to.saturating_sub(t0)) / 1e3,
            millis(self.len())
        )
    }
}

/// (b) What the overlap check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OverlapVerdict {
    /// Overlaps longer than the tolerance: violations, wherever they are.
    pub violations: Vec<Overlap>,
    /// How many of them touch a window where one of the two children's supervisor alone was
    /// paused (once excused, as "the child cannot know"; now the watchdog must have killed
    /// it): for the report.
    pub in_alone_pause: usize,
    /// Overlaps longer than the tolerance that are the resumption of a VM pause (the
    /// supervisor, its watchdog and its child stopped together and continued together): the
    /// older child began again at the heal and was gone within `vm_tolerance`, before its
    /// watchdog (continued with it) was scheduled to kill it. No process on the machine can
    /// prevent that moment; the fence covers it (README, "What it cannot do"). Counted for the
    /// report, never a violation; one that lasts longer is a violation.
    pub after_vm_pause: usize,
    /// The longest of those.
    pub after_vm_pause_longest: u64,
}

/// Whether `span` and `window` share an instant.
fn touches(span: (u64, u64), window: (u64, u64)) -> bool {
    span.0 < window.1 && window.0 < span.1
}

/// (b) Finds the overlaps between children with different ballots, up to `until`.
/// `alone_paused`: windows (pause to resume, plus the allowance for the supervisor to stop its
/// child) in which a supervisor alone was paused; an overlap inside one is a violation like
/// any other, counted apart too.
pub fn check_overlaps(
    children: &[ChildRun],
    alone_paused: &[Window],
    vm_paused: &[Window],
    tolerance: u64,
    vm_tolerance: u64,
    split_gap: u64,
    until: u64,
) -> OverlapVerdict {
    let mut verdict = OverlapVerdict::default();
    let spans: Vec<Vec<(u64, u64)>> = children
        .iter()
        .map(|c| {
            alive_spans(&c.times, split_gap)
                .into_iter()
                .filter(|(a, _)| *a <= until)
                .map(|(a, b)| (a, b.min(until)))
                .collect()
        })
        .collect();
    for (i, a) in children.iter().enumerate() {
        for (j, b) in children.iter().enumerate().skip(i.saturating_add(1)) {
            if a.ballot == b.ballot {
                continue;
            }
            let (older, newer, so, sn) = if a.ballot < b.ballot {
                (a, b, i, j)
            } else {
                (b, a, j, i)
            };
            let windows: Vec<(u64, u64)> = alone_paused
                .iter()
                .filter(|w| {
                    (w.slot == older.slot && w.incarnation == older.incarnation)
                        || (w.slot == newer.slot && w.incarnation == newer.incarnation)
                })
                .map(|w| (w.from, w.to))
                .collect();
            let key = |c: &ChildRun| (c.slot, c.incarnation, c.ballot, c.pid);
            for &(oa, ob) in spans.get(so).map(Vec::as_slice).unwrap_or_default() {
                for &(na, nb) in spans.get(sn).map(Vec::as_slice).unwrap_or_default() {
                    let (from, to) = (oa.max(na), ob.min(nb));
                    if to <= from || to.saturating_sub(from) <= tolerance {
                        continue;
                    }
                    let resumed = vm_paused.iter().any(|w| {
                        w.slot == older.slot
                            && w.incarnation == older.incarnation
                            && oa >= w.to
                            && from <= w.to.saturating_add(vm_tolerance)
                            && to <= oa.saturating_add(vm_tolerance)
                    });
                    if resumed {
                        verdict.after_vm_pause = verdict.after_vm_pause.saturating_add(1);
                        verdict.after_vm_pause_longest =
                            verdict.after_vm_pause_longest.max(to.saturating_sub(from));
                        continue;
                    }
                    if windows.iter().any(|w| touches((from, to), *w)) {
                        verdict.in_alone_pause = verdict.in_alone_pause.saturating_add(1);
                    }
                    verdict.violations.push(Overlap {
                        older: key(older),
                        newer: key(newer),
                        from,
                        to,
                    });
                }
            }
        }
    }
    verdict
}

/// (c) How one fault's recovery went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The fault's index.
    pub fault: usize,
    /// From the heal to the first report of a current child (0 if one was alive at the
    /// heal); `None` if none came before the end of the run.
    pub took: Option<u64>,
    /// Whether the recovery counts: it happened, or the run went on past the bound without
    /// one.
    pub judged: bool,
    /// Whether it broke the bound.
    pub violated: bool,
    /// The cluster's stall time it was allowed beyond the bound (0 on SQLite).
    pub allowance: u64,
}

/// The limits check (c) judges by.
#[derive(Clone, Copy, Debug)]
pub struct RecoveryLimits<'a> {
    /// The overlap tolerance (a report this much before the heal still counts).
    pub tolerance: u64,
    /// Lease + 2 heartbeats + grace.
    pub bound: u64,
    /// The gap that ends an alive span.
    pub split_gap: u64,
    /// The end of the observed run.
    pub until: u64,
    /// The cluster's stalls (FoundationDB; none on SQLite): the time they cover between the
    /// heal and the recovery is allowed on top of the bound.
    pub stalls: &'a [(u64, u64)],
}

/// How long a child must go on reporting for its report to count as a recovery (a child
/// whose supervisor was just killed reports for the few milliseconds its watchdog takes).
pub const RECOVERY_SUSTAIN: u64 = 100_000_000;

/// (c) Times the recovery after each fault: the first report, at or after the heal (less the
/// tolerance), from a child whose ballot is the highest reported so far, whose supervisor is
/// not paused at that instant, and which goes on reporting for [`RECOVERY_SUSTAIN`] (or to
/// the end). It must come within the bound plus the cluster's stall time between the heal
/// and it.
pub fn check_recovery(
    faults: &[Fault],
    children: &[ChildRun],
    paused: &[Window],
    limits: &RecoveryLimits<'_>,
) -> Vec<Recovery> {
    let RecoveryLimits {
        tolerance,
        bound,
        split_gap,
        until,
        stalls,
    } = *limits;
    let spans: Vec<Vec<(u64, u64)>> = children
        .iter()
        .map(|c| alive_spans(&c.times, split_gap))
        .collect();
    let sustained = |child: usize, t: u64| {
        let need = t.saturating_add(RECOVERY_SUSTAIN).min(until);
        spans
            .get(child)
            .into_iter()
            .flatten()
            .any(|(a, b)| *a <= t && t <= *b && *b >= need)
    };
    let mut reports: Vec<(u64, u64, u32, u32, usize)> = children
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.times
                .iter()
                .map(move |t| (*t, c.ballot, c.slot, c.incarnation, i))
        })
        .collect();
    reports.sort_unstable();
    let mut prefix_max = Vec::with_capacity(reports.len());
    let mut m = 0u64;
    for r in &reports {
        m = m.max(r.1);
        prefix_max.push(m);
    }
    faults
        .iter()
        .enumerate()
        .map(|(index, fault)| {
            let from = fault.heal.saturating_sub(tolerance);
            let start = reports.partition_point(|r| r.0 < from);
            let found = reports
                .iter()
                .zip(&prefix_max)
                .skip(start)
                .take_while(|(r, _)| r.0 <= until)
                .find(|((t, ballot, slot, inc, child), max)| {
                    ballot >= max
                        && !paused.iter().any(|w| w.covers(*slot, *inc, *t))
                        && sustained(*child, *t)
                })
                .map(|((t, ..), _)| t.saturating_sub(fault.heal));
            let end = found.map_or(until, |took| fault.heal.saturating_add(took));
            let allowance = crate::chaos::probe::stalled_within(stalls, from, end);
            let limit = bound.saturating_add(allowance);
            let judged = found.is_some() || until.saturating_sub(fault.heal) > limit;
            let violated = judged && found.is_none_or(|took| took > limit);
            Recovery {
                fault: index,
                took: found,
                judged,
                violated,
                allowance,
            }
        })
        .collect()
}

/// (d) Leadership transitions, from the observer's leader changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transitions {
    /// New ballots (every acquisition).
    pub elections: u64,
    /// New ballots filled from a vacancy reserved by the predecessor (cooperative).
    pub handovers: u64,
    /// New ballots that replaced a leader whose lease lapsed.
    pub takeovers: u64,
}

/// (d) Classifies the observer's changes: each new ballot is an election; `handed_over` is a
/// handover; `replaced`, or `acquired` after `lease_lapsed` or `forced_vacant`, a takeover.
pub fn classify(changes: &[ObservedChange]) -> Transitions {
    let mut t = Transitions::default();
    let mut last_ballot = 0u64;
    let mut lapsed = false;
    for c in changes {
        match (c.ballot, c.leader.as_ref()) {
            (Some(b), Some(_)) if b > last_ballot => {
                last_ballot = b;
                t.elections = t.elections.saturating_add(1);
                match c.reason.as_str() {
                    "handed_over" => t.handovers = t.handovers.saturating_add(1),
                    "replaced" => t.takeovers = t.takeovers.saturating_add(1),
                    "acquired" if lapsed => t.takeovers = t.takeovers.saturating_add(1),
                    _ => {}
                }
                lapsed = false;
            }
            _ => match c.reason.as_str() {
                "lease_lapsed" | "forced_vacant" => lapsed = true,
                "stepped_down" => lapsed = false,
                _ => {}
            },
        }
    }
    t
}

/// (d) The progress check: what did not happen, in words (empty: all happened).
pub fn check_progress(t: &Transitions, accepted_writes: u64) -> Vec<String> {
    let mut missing = Vec::new();
    if t.elections == 0 {
        missing.push("no election".to_owned());
    }
    if t.handovers == 0 {
        missing.push("no handover".to_owned());
    }
    if t.takeovers == 0 {
        missing.push("no takeover".to_owned());
    }
    if accepted_writes == 0 {
        missing.push("no fenced write accepted".to_owned());
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::super::model::FaultKind;
    use super::super::sink::SinkEntry;
    use super::*;

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
}
