//! Check (d), progress: elections, handovers and takeovers all happened.

use std::collections::BTreeMap;

use crate::chaos::model::{ChildRun, Fault, FaultKind, ObservedChange, Window};

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

/// How long before a child's last report a `kill -9` of its supervisor may have come (the
/// child reports until its watchdog kills it, a few milliseconds later).
const KILL_BEFORE: u64 = 1_000_000_000;

/// One ballot of one shard, as the children's reports show it.
#[derive(Clone, Copy, Debug)]
struct Tenure {
    first: u64,
    last: u64,
    slot: u32,
    incarnation: u32,
}

/// (d) under a sharded election, from the children's reports (no observer watches a sharded
/// election): every (shard, ballot) is an election; a new ballot of a shard is a takeover when
/// the previous ballot's supervisor was killed (`kill -9`, of its slot, from a second before
/// the previous child's last report to the new child's first) or paused (a window of that
/// incarnation over the same interval) by the harness: its member's lease lapsed and another
/// took the shard over. Any other new ballot is counted a handover: a cooperative move (a
/// join, a drain, a graceful leave), or a lapse the harness did not cause (a store outage).
pub fn classify_shards(children: &[ChildRun], faults: &[Fault], paused: &[Window]) -> Transitions {
    let mut tenures: BTreeMap<(u32, u64), Tenure> = BTreeMap::new();
    for c in children {
        let (Some(shard), Some(&first), Some(&last)) = (c.shard, c.times.first(), c.times.last())
        else {
            continue;
        };
        tenures
            .entry((shard, c.ballot))
            .and_modify(|t| {
                t.first = t.first.min(first);
                t.last = t.last.max(last);
            })
            .or_insert(Tenure {
                first,
                last,
                slot: c.slot,
                incarnation: c.incarnation,
            });
    }
    let mut t = Transitions {
        elections: u64::try_from(tenures.len()).unwrap_or(u64::MAX),
        ..Transitions::default()
    };
    let ordered: Vec<((u32, u64), Tenure)> = tenures.into_iter().collect();
    for pair in ordered.windows(2) {
        let [((s0, _), old), ((s1, _), new)] = pair else {
            continue;
        };
        if s0 != s1 {
            continue;
        }
        let killed = faults.iter().any(|f| {
            f.kind == FaultKind::Kill9
                && f.slot == Some(old.slot)
                && f.start >= old.last.saturating_sub(KILL_BEFORE)
                && f.start <= new.first
        });
        let was_paused = paused.iter().any(|w| {
            w.slot == old.slot
                && w.incarnation == old.incarnation
                && w.from <= new.first
                && w.to >= old.last
        });
        if killed || was_paused {
            t.takeovers = t.takeovers.saturating_add(1);
        } else {
            t.handovers = t.handovers.saturating_add(1);
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
