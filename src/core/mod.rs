//! The pure decision core: no I/O, no clocks, no randomness.
//!
//! Given the decoded records, the candidate's local state and two clock readings (one taken
//! before the attempt, one after its reads), [`decide_cycle`](cycle::decide_cycle) says what to write and what to
//! adopt once the commit is confirmed. It keeps the protocol's asymmetry:
//!
//! - **belief is lost early**: demotions (lease lapsed locally, record moved on, stepping down
//!   for a handover, resigning) take effect in the local state at once, before any commit;
//! - **belief is gained late**: leadership is adopted only from a confirmed commit, or from
//!   finding one's own attempt id in the record, and always dated from that attempt's start.

pub(crate) mod cycle;
#[cfg(test)]
mod eligibility_tests;
pub(crate) mod health;
pub(crate) mod operator;
pub(crate) mod rank;
pub(crate) mod resign;
pub(crate) mod runner;
pub(crate) mod shard;
mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod version_tests;
mod write;

#[cfg(test)]
pub(crate) use state::Role;
pub(crate) use state::{Drain, LocalState, Observed, PendingAttempt, Tenure};

use std::time::Duration;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{CandidateId, Priority};
use crate::record::{FenceRecord, LeaderRecord, Party};

use rank::Roster;

/// What a cycle is allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Everything: acquire, renew, request or honour a handover, step down.
    Cycle,
    /// Only renew an existing, locally valid leadership (v0.11's `refresh_lease`).
    RefreshOnly,
}

/// The inputs of one attempt, besides the local state.
#[derive(Debug)]
pub(crate) struct CycleInput<'a> {
    pub(crate) config: &'a ElectionConfig,
    pub(crate) leader: &'a LeaderRecord,
    /// This candidate's priority, as registered in this same transaction.
    pub(crate) priority: Priority,
    /// Whether this candidate may lead, as registered in this same transaction (its own
    /// health and an operator's mark).
    pub(crate) eligible: bool,
    /// What this candidate does when it leads, is not eligible, and no live candidate is.
    pub(crate) when_ineligible: UnhealthyPolicy,
    /// The version this candidate registers in this same transaction.
    pub(crate) version: Option<&'a semver::Version>,
    /// This candidate's registration number (its own record, read in this transaction).
    pub(crate) registration: u64,
    /// The payload to publish while leading.
    pub(crate) payload: Option<&'a [u8]>,
    /// A clock reading taken before the attempt's reads.
    pub(crate) started_at: LocalInstant,
    /// A clock reading taken after the attempt's reads.
    pub(crate) read_at: LocalInstant,
    /// The read version this attempt's reads observed, when the store reports one.
    pub(crate) read_version: Option<u64>,
    pub(crate) mode: Mode,
    /// Registry facts, present once a [`Decision::Need`] asked for them.
    pub(crate) lookups: Lookups<'a>,
}

/// Registry facts a decision may need, looked up only when it asks ([`Decision::Need`]): most
/// cycles need none, so they read no more than four keys (configuration, leader record, own
/// registration, own eligibility mark).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lookups<'a> {
    /// Every registered candidate and every operator's mark (snapshot scans of both).
    pub(crate) registry: Option<Roster<'a>>,
    /// The candidate whose handover request the record carries: a roster listing its
    /// registration (none when it is not registered) and the mark on its name, if any (the
    /// rest of the registry may be listed too).
    pub(crate) requester: Option<Roster<'a>>,
}

/// A registry fact a decision needs before it can be taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Scan the registry (ranks, the best live candidate).
    Registry,
    /// Read this candidate's registration (the author of a handover request).
    Requester(CandidateId),
}

/// What a leader that is not eligible does when no live candidate is (docs/design.md §13.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnhealthyPolicy {
    /// Keep leading, and hand over as soon as an eligible candidate appears: a vacancy
    /// nobody healthy can fill is an outage the library would have made. The default.
    #[default]
    Hold,
    /// Write an unreserved vacancy anyway (Consul's semantics): nobody leads until an
    /// eligible candidate acquires it.
    Release,
}

/// A leader that is not eligible (docs/design.md §13.3), as its cycle decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ineligible {
    /// It keeps leading: nobody live is eligible, under [`UnhealthyPolicy::Hold`].
    Holding,
    /// It steps down: it drains its work (at most the grace, renewing meanwhile), then writes
    /// a vacancy reserved for the best live eligible candidate.
    SteppingDown,
}

/// What the attempt does to the leader record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Nothing: this candidate follows (or leads and was only refreshed by someone else).
    None,
    /// Acquired a vacancy or took over a lapsed lease: a new ballot.
    Acquired,
    /// Renewed its own lease, keeping the ballot.
    Renewed,
    /// Asked the (lower-priority) leader to hand over.
    RequestedHandover,
    /// Stepped down for a handover, reserving the vacancy for the requester (or, for an
    /// operator's request, for the best live candidate).
    HandedOver,
    /// Stepped down because elections are disabled.
    SteppedDown,
    /// Resigned, reserving the vacancy for the best live candidate if there is one.
    Resigned,
    /// Stepped down because it is not eligible to lead (its health, or an operator's mark),
    /// reserving the vacancy for the best live eligible candidate (or, under
    /// [`UnhealthyPolicy::Release`] with nobody eligible, leaving it unreserved).
    SteppedDownIneligible,
}

/// The decision for one attempt.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "short-lived: returned once per attempt and destructured at once; boxing the plan \
              would only add an allocation per cycle"
)]
pub(crate) enum Decision {
    /// The decision depends on a registry fact: look it up, add it to the input's
    /// [`Lookups`], and decide again. Nothing was changed locally.
    Need(Lookup),
    /// The plan for this attempt.
    Plan(Plan),
}

/// What to write, and what to adopt after the commit is confirmed.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) action: Action,
    /// The new leader record; when set, the leader key must also get a read-conflict range
    /// (and so must the registration of a candidate the record reserves the vacancy for).
    pub(crate) write: Option<LeaderRecord>,
    /// The new fence record, when ownership changes.
    pub(crate) fence: Option<FenceRecord>,
    /// The tenure to adopt once this attempt's commit is confirmed.
    pub(crate) adopt: Option<Adoption>,
    /// The earliest local instant at which this candidate could act without any change to the
    /// record (takeover eligibility, end of a handover grace).
    pub(crate) next_action_at: Option<LocalInstant>,
    /// The handover request (a candidate's or an operator's) this leader honours: it steps
    /// down now, or drains its work first (then the renewal keeps the request).
    pub(crate) honoured: Option<Party>,
    /// This leader is not eligible: it holds, or steps down (now, or once its work drained).
    pub(crate) ineligible: Option<Ineligible>,
    /// This leader refused an operator's directed request (its target not live and eligible),
    /// clearing it: why, to publish.
    pub(crate) refused: Option<String>,
}

/// Leadership prepared by an attempt, to adopt only after its commit is confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Adoption {
    pub(crate) seq: u64,
    pub(crate) tenure: Tenure,
}

fn nothing(next_action_at: Option<LocalInstant>) -> Decision {
    Decision::Plan(Plan {
        action: Action::None,
        write: None,
        fence: None,
        adopt: None,
        next_action_at,
        honoured: None,
        ineligible: None,
        refused: None,
    })
}

pub(crate) fn next_renewal(r: &LeaderRecord) -> Result<u64, ElectionError> {
    r.renewal
        .checked_add(1)
        .ok_or(ElectionError::CounterExhausted { what: "renewal" })
}

/// The instant `d` after `t`, saturating (durations are bounded by configuration).
fn after(t: LocalInstant, d: Duration) -> LocalInstant {
    t.saturating_add(d)
}

/// **The lapse rule**, the one place it is written: an observation identity first seen at
/// `first_seen` (a clock reading taken *after* the read that first saw it) has been unchanged
/// for a full `lease` from the returned instant on. A follower may take over from then
/// (comparing a reading taken *before* its attempt), and an observer reports the lease lapsed.
/// Used by followers' cycles, [`LeaderElection::current_leader`](crate::LeaderElection) and
/// the runner's observer mode.
pub(crate) fn lapse_at(first_seen: LocalInstant, lease: Duration) -> LocalInstant {
    after(first_seen, lease)
}

/// **The vacancy's lease**, the one place it is written: a vacancy written over `rec` makes
/// successors wait at least the lease `rec` was written with, the lease its owner (or any
/// other process with the owner's id) may still believe in, even when the configured lease
/// is shorter now. Used by resignations, stepping down, unregistering and `force_vacate`.
pub(crate) fn vacancy_lease(rec: &LeaderRecord, cfg: &ElectionConfig) -> Duration {
    rec.lease.max(cfg.lease_duration)
}
