//! Metric names, recorded through the [`metrics`] facade (install any recorder, for example a
//! Prometheus exporter). Every metric carries an `election` label (the runner's
//! [election name](super::RunnerBuilder::election_name)); no metric carries a per-process
//! label.

use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, SharedString};

/// Gauge: 1 while this process leads, 0 otherwise.
pub const IS_LEADER: &str = "fdb_leader_is_leader";
/// Gauge: the ballot of the current leader as this process knows it.
pub const BALLOT: &str = "fdb_leader_ballot";
/// Counter, by `reason`: this process's leadership transitions (`elected`, and every
/// [`StopReason`](super::StopReason) name).
pub const TRANSITIONS: &str = "fdb_leader_transitions_total";
/// Counter, by `reason`: leader changes this process observed (every
/// [`ChangeReason`](super::ChangeReason) name).
pub const LEADER_CHANGES: &str = "fdb_leader_changes_total";
/// Histogram, seconds: how long successful renewals took (attempt start to commit).
pub const RENEW_DURATION: &str = "fdb_leader_renew_duration_seconds";
/// Counter, by `kind`: failed renewal attempts while leading.
pub const RENEW_FAILURES: &str = "fdb_leader_renew_failures_total";
/// Counter, by `kind`: failed election cycles, leading or not.
pub const CYCLE_FAILURES: &str = "fdb_leader_cycle_failures_total";
/// Gauge, seconds: how long this process's leadership lasts without another renewal (0 when
/// not leading), on its local monotonic clock.
pub const LEASE_REMAINING: &str = "fdb_leader_lease_remaining_seconds";
/// Gauge: live registered candidates, refreshed when the leader changes.
pub const CANDIDATES: &str = "fdb_leader_candidates";
/// Gauge: 1 while this candidate is eligible to lead (its health checks pass and no operator
/// excludes it), 0 otherwise (the reason is in the log and
/// [`Runner::eligibility`](super::Runner::eligibility)).
pub const ELIGIBLE: &str = "fdb_leader_eligible";

/// The runner's metric handles.
#[derive(Clone, Debug)]
pub(crate) struct Metrics {
    election: SharedString,
    pub(crate) is_leader: Gauge,
    pub(crate) ballot: Gauge,
    pub(crate) renew_duration: Histogram,
    pub(crate) lease_remaining: Gauge,
    pub(crate) candidates: Gauge,
    pub(crate) eligible: Gauge,
}

fn describe() {
    metrics::describe_gauge!(IS_LEADER, "1 while this process leads the election, else 0");
    metrics::describe_gauge!(
        BALLOT,
        "ballot of the current leader, as this process knows it"
    );
    metrics::describe_counter!(
        TRANSITIONS,
        "leadership transitions of this process, by reason"
    );
    metrics::describe_counter!(LEADER_CHANGES, "leader changes observed, by reason");
    metrics::describe_histogram!(
        RENEW_DURATION,
        metrics::Unit::Seconds,
        "duration of successful lease renewals"
    );
    metrics::describe_counter!(
        RENEW_FAILURES,
        "failed renewal attempts while leading, by kind"
    );
    metrics::describe_counter!(CYCLE_FAILURES, "failed election cycles, by kind");
    metrics::describe_gauge!(
        LEASE_REMAINING,
        metrics::Unit::Seconds,
        "local time left on this process's lease"
    );
    metrics::describe_gauge!(CANDIDATES, "live registered candidates");
    metrics::describe_gauge!(
        ELIGIBLE,
        "1 while this candidate is eligible to lead, else 0"
    );
}

impl Metrics {
    pub(crate) fn new(election: &str) -> Self {
        describe();
        let election = SharedString::from(election.to_owned());
        let e = election.clone();
        Metrics {
            is_leader: metrics::gauge!(IS_LEADER, "election" => e.clone()),
            ballot: metrics::gauge!(BALLOT, "election" => e.clone()),
            renew_duration: metrics::histogram!(RENEW_DURATION, "election" => e.clone()),
            lease_remaining: metrics::gauge!(LEASE_REMAINING, "election" => e.clone()),
            candidates: metrics::gauge!(CANDIDATES, "election" => e.clone()),
            eligible: metrics::gauge!(ELIGIBLE, "election" => e),
            election,
        }
    }

    pub(crate) fn transition(&self, reason: &'static str) {
        self.counter(TRANSITIONS, "reason", reason).increment(1);
    }

    pub(crate) fn leader_change(&self, reason: &'static str) {
        self.counter(LEADER_CHANGES, "reason", reason).increment(1);
    }

    pub(crate) fn renew_failure(&self, kind: &'static str) {
        self.counter(RENEW_FAILURES, "kind", kind).increment(1);
    }

    pub(crate) fn cycle_failure(&self, kind: &'static str) {
        self.counter(CYCLE_FAILURES, "kind", kind).increment(1);
    }

    pub(crate) fn lease_remaining(&self, remaining: Duration) {
        self.lease_remaining.set(remaining.as_secs_f64());
    }

    fn counter(&self, name: &'static str, label: &'static str, value: &'static str) -> Counter {
        metrics::counter!(name, "election" => self.election.clone(), label => value)
    }
}
