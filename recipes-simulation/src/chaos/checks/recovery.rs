//! Check (c), recovery: after each fault heals, a current child runs within the bound.

use super::spans::alive_spans;
use crate::chaos::model::{ChildRun, Fault, Window};

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
    /// The shard whose recovery this is, under a sharded election (each shard recovers on its
    /// own: a current child of that shard).
    pub shard: Option<u32>,
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
                shard: children.first().and_then(|c| c.shard),
            }
        })
        .collect()
}
