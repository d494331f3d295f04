//! Planted faults: deliberate bugs, living only in the simulation, that each oracle must catch.

use std::fmt;
use std::str::FromStr;

use crate::oracles::OracleId;

/// A planted fault, selected by name with `--plant`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plant {
    /// Every clock's rate error is drawn within ±30% instead of within ρ.
    ClockDriftBeyondRho,
    /// Processes act on the token of their last successful cycle without checking that
    /// their lease is still valid (`Candidate::leadership()`).
    ActWithoutLeaseCheck,
    /// Leader work writes the protected register and the fenced counter without
    /// `LeaderElection::fence`.
    UnfencedLeaderWork,
    /// Node 0's incarnations take over a lease after watching it unchanged for half a lease,
    /// by writing a takeover record with a raw transaction.
    TakeoverAfterHalfLease,
    /// The history log loses about one entry in a hundred.
    HistoryDropsEntry,
    /// The executor revokes a guard after the stepping-down transaction commits instead of
    /// before (inside the transaction).
    RevokeGuardAfterCommit,
    /// A candidate adopts its cycle inside the transaction, when a query there reads back
    /// its own write (the read-your-writes adoption defect).
    RywAdoption,
    /// A leader that writes a shorter lease keeps the belief of the longer one (no cap before
    /// the commit).
    UncappedShorterLease,
    /// The operator's `force_vacate` reserves the vacancy for the id it was given, a
    /// registered candidate's, which then fills it at once.
    OperatorReservesForCandidate,
    /// The executor loses about one wake-up in fifty that the runner machine asked for (a
    /// machine that goes quiet, as one did after a rejected resignation).
    LostWakeup,
    /// The executor holds back a guard deadline the runner machine lowered while a cycle is
    /// in flight (a renewal that writes a shorter lease) and moves it only when the
    /// operation ends: the guard outlives the capped belief while the reply is late.
    GuardDeadlineAfterReply,
    /// The executor reports to the runner machine a belief that ends earlier, by the renewal
    /// margin and half a heartbeat, than the candidate's: what a configuration validation
    /// should have refused does (the leader renews in a loop).
    BeliefShorterThanMargin,
    /// The executor ignores `SteppingDownAnyway` and the resignation that follows it: a
    /// leader whose closing request was withdrawn keeps its closed guard.
    KeepClosedGuard,
    /// A follower whose last read was a vacancy its leader reserved for another candidate
    /// sleeps until it has seen it a full lease (the library before DESIGN §4's reservation
    /// timeout): a reservation for a dead candidate costs a lease.
    ReservationWaitsALease,
    /// A step-down (resignation, ineligibility) reserves its vacancy for the best live
    /// candidate ignoring eligibility, rewritten in its own transaction when that one is not
    /// eligible.
    ReserveIgnoresEligibility,
    /// The executor tells a candidate that its readiness check failed only while it leads: a
    /// follower that is not ready stays eligible in its registrations and may acquire.
    FollowerIgnoresReadiness,
    /// The executor never tells a candidate that is not eligible that it is eligible again
    /// (its readiness recovered, its cool-down ended): it never leads again.
    RiseNeverTold,
    /// The executor runs every candidate under `release`, whatever its policy: a leader that
    /// is not eligible lets go while nobody is.
    ReleaseUnderHold,
    /// A resignation or step-down reserves its vacancy for the best live eligible candidate
    /// by priority alone, ignoring the version policy, rewritten in its own transaction.
    ReserveIgnoresVersions,
    /// The executor never tells the candidate when it closed the guard
    /// (`Candidate::set_guard_closed_at`): the grace counts from the start of the cycle whose
    /// renewal closed it, and the commit's latency is cut from the drain.
    DrainFromCycleStart,
    /// The executor never closes the guard when the machine says so: guarded work keeps
    /// starting while the leader drains for a handover, and the handover cuts it.
    OpenGuardInDrain,
    /// Every follower takes over a lease it has seen unchanged for a full lease at once, by
    /// writing a takeover record with a raw transaction, whatever its rank: the first whose
    /// wait ends wins (the library before issue 38, where the rank stagger alone ordered
    /// takeovers).
    TakeoverIgnoresRank,
}

impl Plant {
    /// Every plant, in listing order.
    pub const ALL: [Plant; 22] = [
        Plant::ClockDriftBeyondRho,
        Plant::ActWithoutLeaseCheck,
        Plant::UnfencedLeaderWork,
        Plant::TakeoverAfterHalfLease,
        Plant::HistoryDropsEntry,
        Plant::RevokeGuardAfterCommit,
        Plant::RywAdoption,
        Plant::UncappedShorterLease,
        Plant::OperatorReservesForCandidate,
        Plant::LostWakeup,
        Plant::GuardDeadlineAfterReply,
        Plant::BeliefShorterThanMargin,
        Plant::KeepClosedGuard,
        Plant::ReservationWaitsALease,
        Plant::ReserveIgnoresEligibility,
        Plant::FollowerIgnoresReadiness,
        Plant::RiseNeverTold,
        Plant::ReleaseUnderHold,
        Plant::ReserveIgnoresVersions,
        Plant::DrainFromCycleStart,
        Plant::OpenGuardInDrain,
        Plant::TakeoverIgnoresRank,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Plant::ClockDriftBeyondRho => "clock-drift-beyond-rho",
            Plant::ActWithoutLeaseCheck => "act-without-lease-check",
            Plant::UnfencedLeaderWork => "unfenced-leader-work",
            Plant::TakeoverAfterHalfLease => "takeover-after-half-lease",
            Plant::HistoryDropsEntry => "history-drops-entry",
            Plant::RevokeGuardAfterCommit => "revoke-guard-after-commit",
            Plant::RywAdoption => "ryw-adoption",
            Plant::UncappedShorterLease => "uncapped-shorter-lease",
            Plant::OperatorReservesForCandidate => "operator-reserves-for-candidate",
            Plant::LostWakeup => "lost-wakeup",
            Plant::GuardDeadlineAfterReply => "guard-deadline-after-reply",
            Plant::BeliefShorterThanMargin => "belief-shorter-than-margin",
            Plant::KeepClosedGuard => "keep-closed-guard",
            Plant::ReservationWaitsALease => "reservation-waits-a-lease",
            Plant::ReserveIgnoresEligibility => "reserve-ignores-eligibility",
            Plant::FollowerIgnoresReadiness => "follower-ignores-readiness",
            Plant::RiseNeverTold => "rise-never-told",
            Plant::ReleaseUnderHold => "release-under-hold",
            Plant::ReserveIgnoresVersions => "reserve-ignores-versions",
            Plant::DrainFromCycleStart => "drain-from-cycle-start",
            Plant::OpenGuardInDrain => "open-guard-in-drain",
            Plant::TakeoverIgnoresRank => "takeover-ignores-rank",
        }
    }

    /// The oracle this plant is aimed at.
    pub fn target(self) -> OracleId {
        match self {
            Plant::ClockDriftBeyondRho | Plant::ActWithoutLeaseCheck => OracleId::BeliefOverlap,
            Plant::UnfencedLeaderWork => OracleId::Fencing,
            Plant::TakeoverAfterHalfLease => OracleId::Preemption,
            Plant::HistoryDropsEntry => OracleId::History,
            Plant::RevokeGuardAfterCommit | Plant::GuardDeadlineAfterReply => OracleId::Guard,
            Plant::BeliefShorterThanMargin => OracleId::Cadence,
            Plant::KeepClosedGuard => OracleId::ClosedGuard,
            Plant::ReservationWaitsALease => OracleId::ReservationTimeout,
            Plant::ReserveIgnoresEligibility => OracleId::EligibleReservation,
            Plant::FollowerIgnoresReadiness => OracleId::IneligibleAcquires,
            Plant::RiseNeverTold => OracleId::EligibleLeads,
            Plant::ReleaseUnderHold => OracleId::Hold,
            Plant::ReserveIgnoresVersions | Plant::TakeoverIgnoresRank => OracleId::Successor,
            Plant::DrainFromCycleStart | Plant::OpenGuardInDrain => OracleId::DrainServed,
            Plant::LostWakeup => OracleId::Progress,
            Plant::RywAdoption
            | Plant::UncappedShorterLease
            | Plant::OperatorReservesForCandidate => OracleId::BeliefOverlap,
        }
    }
}

impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Plant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Plant::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Plant::ALL.iter().map(|p| p.name()).collect();
                format!("unknown plant {s:?}; plants: {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Plant::ALL {
            assert_eq!(p.name().parse::<Plant>(), Ok(p));
        }
        assert!("nope".parse::<Plant>().is_err());
    }
}
