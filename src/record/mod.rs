//! The durable records, as validated values. Only the codec module turns them into
//! bytes; every value here has passed the same checks whether it was built or decoded.

mod eligibility;
pub mod shard;

pub use eligibility::{Eligibility, MAX_REASON_BYTES};

use std::time::Duration;

use crate::config::MAX_DURATION;
use crate::ids::{Ballot, CandidateId, Priority};

/// The largest leader payload (for example, the leader's address), in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// The largest candidate metadata, in bytes.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
/// FoundationDB's value size limit.
pub const MAX_VALUE_BYTES: usize = 100_000;

/// A candidate named in the leader record, with the priority it had when named.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Named {
    pub(crate) id: CandidateId,
    pub(crate) priority: Priority,
}

impl Named {
    pub(crate) fn new(id: CandidateId, priority: Priority) -> Self {
        Named { id, priority }
    }

    /// The candidate.
    pub fn id(&self) -> &CandidateId {
        &self.id
    }

    /// Its priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }
}

/// Who a vacancy is held for, or who asked the leader to step down: a candidate, or an
/// operator. An operator is not a candidate: no candidate can fill a vacancy held for an
/// operator (every candidate waits a full lease of unchanged observation first), whatever id
/// the operator gave (docs/design.md §10.4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Party {
    /// A registered candidate, with the priority it had when named.
    Candidate(Named),
    /// An operator, by the id it gave for the record.
    Operator(CandidateId),
}

impl Party {
    /// The candidate, if the party is one.
    pub(crate) fn candidate(&self) -> Option<&Named> {
        match self {
            Party::Candidate(n) => Some(n),
            Party::Operator(_) => None,
        }
    }

    /// The operator, if the party is one.
    pub(crate) fn operator(&self) -> Option<&CandidateId> {
        match self {
            Party::Operator(id) => Some(id),
            Party::Candidate(_) => None,
        }
    }

    /// The id named, whoever it is.
    pub(crate) fn id(&self) -> &CandidateId {
        match self {
            Party::Candidate(n) => &n.id,
            Party::Operator(id) => id,
        }
    }

    /// Whether this is the candidate `id` (an operator never is, whatever id it gave).
    pub(crate) fn is_candidate(&self, id: &CandidateId) -> bool {
        self.candidate().is_some_and(|n| &n.id == id)
    }
}

/// Which attempt of which candidate last wrote the leader record. A participant that finds its
/// own attempt here knows that attempt committed, even if its commit result was unknown.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttemptId {
    pub(crate) candidate: CandidateId,
    pub(crate) seq: u64,
}

impl AttemptId {
    /// The writer.
    pub fn candidate(&self) -> &CandidateId {
        &self.candidate
    }

    /// The writer's attempt number (unique per candidate incarnation).
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// The single leader record of an election. It holds no timestamps.
///
/// `(ballot, renewal)` is its *observation identity*: it changes on every acquisition,
/// renewal and release, and never repeats.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaderRecord {
    pub(crate) ballot: Ballot,
    pub(crate) owner: Option<Named>,
    pub(crate) renewal: u64,
    pub(crate) lease: Duration,
    pub(crate) handover: Option<Party>,
    pub(crate) reservation: Option<Party>,
    pub(crate) payload: Option<Vec<u8>>,
    pub(crate) writer: Option<AttemptId>,
    /// With an operator's request: the stable name ([`CandidateId::name`]) of the candidate
    /// it asks the vacancy to be reserved for (`resign --to NAME`).
    pub(crate) handover_to: Option<String>,
    /// The version of the candidate that acquired this ballot (kept while it is vacant): the
    /// leader's version, which `no-downgrade` ranks against (docs/design.md §14.2).
    pub(crate) leader_version: Option<semver::Version>,
}

impl LeaderRecord {
    /// The record of an election that has never had a leader.
    pub(crate) fn initial(lease: Duration) -> Self {
        LeaderRecord {
            ballot: Ballot::ZERO,
            owner: None,
            renewal: 0,
            lease,
            handover: None,
            reservation: None,
            payload: None,
            writer: None,
            handover_to: None,
            leader_version: None,
        }
    }

    /// The current ballot: the term of the current (or, if vacant, the last) leader.
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// The leader, or `None` while the leadership is vacant. A leader named here may have
    /// crashed: the record says who holds the ballot, not who is alive.
    pub fn owner(&self) -> Option<&Named> {
        self.owner.as_ref()
    }

    /// The renewal counter; it changes with every write that changes the observation identity.
    pub fn renewal(&self) -> u64 {
        self.renewal
    }

    /// The lease duration the last writer used. Followers wait this long, unchanged, before
    /// taking over.
    pub fn lease_duration(&self) -> Duration {
        self.lease
    }

    /// A pending handover request from a candidate (of a strictly higher priority than the
    /// leader's when it was written). An operator's request is
    /// [`operator_request`](Self::operator_request).
    pub fn handover_request(&self) -> Option<&Named> {
        self.handover.as_ref().and_then(Party::candidate)
    }

    /// A pending operator request that the leader step down
    /// ([`LeaderElection::request_resign`](crate::LeaderElection::request_resign)), by the id
    /// the operator gave. The leader honours it at its next cycle and reserves the vacancy for
    /// the best live candidate.
    pub fn operator_request(&self) -> Option<&CandidateId> {
        self.handover.as_ref().and_then(Party::operator)
    }

    /// The version of the candidate that acquired this ballot, if it registered one (kept
    /// while the leadership is vacant).
    pub fn leader_version(&self) -> Option<&semver::Version> {
        self.leader_version.as_ref()
    }

    /// With an [`operator_request`](Self::operator_request): the name of the candidate the
    /// operator asked the leader to hand over to
    /// ([`LeaderElection::request_resign_to`](crate::LeaderElection::request_resign_to)).
    pub fn operator_request_to(&self) -> Option<&str> {
        self.handover_to.as_deref()
    }

    /// While vacant: the candidate the vacancy is reserved for. It takes over at once; the
    /// others once it has not for the reservation timeout.
    pub fn reservation(&self) -> Option<&Named> {
        self.reservation.as_ref().and_then(Party::candidate)
    }

    /// While vacant after an operator's
    /// [`force_vacate`](crate::LeaderElection::force_vacate): the operator's id. No candidate
    /// fills the vacancy before it has seen it unchanged for a full lease.
    pub fn operator_hold(&self) -> Option<&CandidateId> {
        self.reservation.as_ref().and_then(Party::operator)
    }

    /// The leader's payload (for example, its address).
    pub fn payload(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }

    /// The attempt that last wrote this record.
    pub fn writer(&self) -> Option<&AttemptId> {
        self.writer.as_ref()
    }

    /// Whether `id` owns this record.
    pub(crate) fn is_owned_by(&self, id: &CandidateId) -> bool {
        self.owner.as_ref().is_some_and(|o| &o.id == id)
    }

    /// The protocol's invariants on one record; `Err` names the first one broken.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self.lease.is_zero() {
            return Err("zero lease duration");
        }
        if self.lease > MAX_DURATION {
            return Err("lease above the longest duration a configuration allows");
        }
        if self.owner.is_some() && self.ballot == Ballot::ZERO {
            return Err("owner at ballot 0");
        }
        if self.owner.is_some() && self.renewal == 0 {
            return Err("owned record at renewal 0");
        }
        if self.reservation.is_some() && self.ballot == Ballot::ZERO {
            return Err("reservation at ballot 0");
        }
        if let (Some(owner), Some(request)) = (&self.owner, &self.handover) {
            if request.is_candidate(&owner.id) {
                return Err("handover request from the owner itself");
            }
        }
        if self.owner.is_some() && self.reservation.is_some() {
            return Err("reservation while owned");
        }
        if self.owner.is_none() && self.handover.is_some() {
            return Err("handover request without owner");
        }
        if let Some(to) = &self.handover_to {
            if self.operator_request().is_none() {
                return Err("a handover target without an operator's request");
            }
            if to.is_empty() || to.len() > crate::ids::MAX_CANDIDATE_ID_BYTES {
                return Err("invalid handover target name");
            }
        }
        if self.owner.is_none() && self.payload.is_some() {
            return Err("payload without owner");
        }
        if self
            .payload
            .as_ref()
            .is_some_and(|p| p.len() > MAX_PAYLOAD_BYTES)
        {
            return Err("payload too large");
        }
        let named = [&self.handover, &self.reservation].map(|p| p.as_ref().map(Party::id));
        if self.owner.as_ref().is_some_and(|n| !n.id.is_valid())
            || named.iter().flatten().any(|id| !id.is_valid())
            || self
                .writer
                .as_ref()
                .is_some_and(|w| !w.candidate.is_valid())
        {
            return Err("invalid candidate id");
        }
        if self.writer.is_none() && (self.renewal != 0 || self.ballot != Ballot::ZERO) {
            return Err("written record without writer");
        }
        Ok(())
    }
}

/// A leader as seen by anyone: the view of an owned [`LeaderRecord`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderState {
    /// The leader's ballot, its fencing token.
    pub ballot: Ballot,
    /// The leader.
    pub leader_id: CandidateId,
    /// The leader's priority.
    pub priority: Priority,
    /// The record's renewal counter.
    pub renewal: u64,
    /// The lease duration the leader used.
    pub lease_duration: Duration,
    /// A pending handover request, if a higher-priority candidate asked for one.
    pub handover_requested_by: Option<Named>,
    /// A pending operator request that the leader step down, by the operator's id.
    pub operator_request: Option<CandidateId>,
    /// The leader's payload (for example, its address).
    pub payload: Option<Vec<u8>>,
}

impl LeaderState {
    pub(crate) fn from_record(r: &LeaderRecord) -> Option<Self> {
        let owner = r.owner.as_ref()?;
        Some(LeaderState {
            ballot: r.ballot,
            leader_id: owner.id.clone(),
            priority: owner.priority,
            renewal: r.renewal,
            lease_duration: r.lease,
            handover_requested_by: r.handover_request().cloned(),
            operator_request: r.operator_request().cloned(),
            payload: r.payload.clone(),
        })
    }
}

/// A directed resign (`resign --to NAME`) its leader refused, and why: the leader keeps
/// leading and clears the request when no live eligible candidate of that name is there
/// (docs/design.md §13.6). Kept until the next refusal; compare its ballot with the leader's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResignRefusal {
    pub(crate) ballot: Ballot,
    pub(crate) operator: CandidateId,
    pub(crate) to: String,
    pub(crate) reason: String,
}

impl ResignRefusal {
    /// The ballot of the leader that refused.
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// The operator's id, as its request gave it.
    pub fn operator(&self) -> &CandidateId {
        &self.operator
    }

    /// The name the request directed the vacancy to.
    pub fn to(&self) -> &str {
        &self.to
    }

    /// Why it was refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// One candidate's registration record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CandidateRecord {
    pub(crate) priority: Priority,
    pub(crate) registration: u64,
    pub(crate) heartbeat: u64,
    pub(crate) seen_renewal: u64,
    pub(crate) metadata: Option<Vec<u8>>,
    /// Whether it may lead (records written before this field read as eligible).
    pub(crate) eligibility: Eligibility,
    /// The version it runs (docs/design.md §14.1), if it registered one.
    pub(crate) version: Option<semver::Version>,
}

impl CandidateRecord {
    /// The registered priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Registration order: lower registered earlier.
    pub fn registration(&self) -> u64 {
        self.registration
    }

    /// The heartbeat counter; grows with every heartbeat.
    pub fn heartbeat(&self) -> u64 {
        self.heartbeat
    }

    /// The leader record's renewal counter this candidate saw at its last heartbeat.
    /// Liveness is measured against it: no clock is compared across processes.
    pub fn seen_renewal(&self) -> u64 {
        self.seen_renewal
    }

    /// Optional application metadata (for example, the candidate's address).
    pub fn metadata(&self) -> Option<&[u8]> {
        self.metadata.as_deref()
    }

    /// Whether it may lead, as it last registered (its health, and an operator's mark).
    pub fn eligibility(&self) -> &Eligibility {
        &self.eligibility
    }

    /// Whether it may lead.
    pub fn is_eligible(&self) -> bool {
        self.eligibility.is_eligible()
    }

    /// The version it runs, if it registered one (the oldest of all under every version
    /// policy, if not).
    pub fn version(&self) -> Option<&semver::Version> {
        self.version.as_ref()
    }

    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self
            .metadata
            .as_ref()
            .is_some_and(|m| m.len() > MAX_METADATA_BYTES)
        {
            return Err("metadata too large");
        }
        self.eligibility.check()
    }

    /// Whether this candidate heartbeated recently, measured in leader renewals: it has seen
    /// a renewal at most `max_lag` behind `current_renewal`.
    pub(crate) fn is_live(&self, current_renewal: u64, max_lag: u64) -> bool {
        current_renewal.saturating_sub(self.seen_renewal) <= max_lag
    }
}

/// A registered candidate, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CandidateInfo {
    /// The candidate.
    pub id: CandidateId,
    /// Its registration record.
    pub record: CandidateRecord,
    /// Whether it counts as live against the leader record's current renewal counter.
    pub live: bool,
    /// Whether the election's version policy lets it lead now (docs/design.md §14.2): no live
    /// eligible candidate other than the leader and itself has a version the policy ranks
    /// ahead of its own (judged against the leader's version). Under `ignore`, every eligible
    /// candidate; a candidate the policy does not allow takes over no lapsed lease while
    /// one ahead of it heartbeats, and no operator's `resign --to` may name it. Its own
    /// eligibility (health, marks) is [`CandidateRecord::is_eligible`], apart.
    pub policy_allows: bool,
}

/// The fence record: the ballot and whether its leader still holds it. It changes only when
/// ownership changes, so fenced transactions do not conflict with renewals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FenceRecord {
    pub(crate) ballot: Ballot,
    pub(crate) vacant: bool,
}

impl FenceRecord {
    pub(crate) fn of(r: &LeaderRecord) -> Self {
        FenceRecord {
            ballot: r.ballot,
            vacant: r.owner.is_none(),
        }
    }
}
