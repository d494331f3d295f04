//! What one tester keeps across its candidates: the belief intervals they recorded, and the
//! counts reported as metrics.

use std::cell::RefCell;
use std::rc::Rc;

use fdb_leader_election::{Ballot, LocalInstant};

use crate::log::Interval;
use crate::sim::SimClock;

/// Counts of what a tester did and saw.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stats {
    pub(crate) incarnations: u64,
    pub(crate) crashes: u64,
    pub(crate) leaves: u64,
    pub(crate) stalls: u64,
    pub(crate) resigns: u64,
    pub(crate) flaps: u64,
    pub(crate) priority_changes: u64,
    pub(crate) cycles: u64,
    pub(crate) cycle_failures: u64,
    /// Cycles that failed with a FoundationDB error (the cluster's: timeouts, unavailability,
    /// conflicts, unknown results), not the election's.
    pub(crate) cluster_failures: u64,
    /// Commits whose result was unknown (1021): retried by `Database::run`, or returned.
    pub(crate) unknown_commits: u64,
    /// Operations that ended with a timeout (1031: their commit, if begun, may have applied).
    pub(crate) timeouts: u64,
    pub(crate) acquisitions: u64,
    pub(crate) handovers: u64,
    pub(crate) guards: u64,
    pub(crate) drains: u64,
    pub(crate) fenced_writes: u64,
    pub(crate) fenced_rejected: u64,
    pub(crate) config_changes: u64,
    pub(crate) marks: u64,
    pub(crate) directed: u64,
    pub(crate) directed_refused: u64,
    pub(crate) operator_resigns: u64,
    pub(crate) rogue_takeovers: u64,
}

/// A tester's shared state.
#[derive(Debug, Default)]
pub(crate) struct Tester {
    pub(crate) intervals: Vec<Interval>,
    pub(crate) stats: Stats,
}

/// The tester, shared by its candidates' loops (all on fdbserver's one thread).
pub(crate) type Shared = Rc<RefCell<Tester>>;

/// Follows one candidate's belief: sampled at every step of its loop and inside each
/// transaction right after the election decided, it records the spans of simulated time
/// during which the candidate believed it led. Between two samples nothing of the candidate
/// changes but time, so a belief sampled at `t` with its end `v` (converted from the
/// candidate's clock) covered `[t, min(v, next sample))`.
#[derive(Debug)]
pub(crate) struct Beliefs {
    scope: String,
    candidate: String,
    clock: SimClock,
    /// The last sample: when, and the belief then (ballot, end in simulated time).
    last: Option<(f64, Option<(u64, f64)>)>,
    open: Option<Interval>,
}

/// Counts a failed cycle: the cluster's if the error carries a FoundationDB code.
pub(crate) fn failed_cycle(tester: &Shared, e: &fdb_leader_election::ElectionError) {
    let mut t = tester.borrow_mut();
    t.stats.cycle_failures += 1;
    if let fdb_leader_election::ElectionError::Database(txn) = e {
        if txn.code().is_some() {
            t.stats.cluster_failures += 1;
        }
    }
}

impl Beliefs {
    pub(crate) fn new(scope: String, candidate: String, clock: SimClock) -> Self {
        Beliefs {
            scope,
            candidate,
            clock,
            last: None,
            open: None,
        }
    }

    /// Samples the belief `now` (simulated time): the ballot believed in, and when the
    /// belief ends on the candidate's clock.
    pub(crate) fn sample(
        &mut self,
        tester: &Shared,
        now: f64,
        leadership: Option<(Ballot, LocalInstant)>,
    ) {
        if let Some((at, Some((ballot, until)))) = self.last {
            let end = until.min(now);
            if end > at {
                self.extend(tester, ballot, at, end);
            }
        }
        let belief = leadership.map(|(b, until)| (b.get(), self.clock.true_at(until)));
        self.last = Some((now, belief));
    }

    fn extend(&mut self, tester: &Shared, ballot: u64, start: f64, end: f64) {
        match self.open.as_mut() {
            Some(i) if i.ballot == ballot && start <= i.end + 1e-9 => i.end = i.end.max(end),
            _ => {
                self.flush(tester);
                self.open = Some(Interval {
                    scope: self.scope.clone(),
                    candidate: self.candidate.clone(),
                    ballot,
                    start,
                    end,
                });
            }
        }
    }

    fn flush(&mut self, tester: &Shared) {
        if let Some(i) = self.open.take() {
            tester.borrow_mut().intervals.push(i);
        }
    }

    /// The candidate is gone at `now` (a crash, or its loop ended): its belief ends here.
    pub(crate) fn close(&mut self, tester: &Shared, now: f64) {
        self.sample(tester, now, None);
        self.flush(tester);
    }
}
