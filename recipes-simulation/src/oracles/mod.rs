//! The seven oracles of DESIGN §9, one per file, each checked after every simulation step
//! against true time; and the runner's: oracle 8 (guarded work) lives with the work it
//! checks (`world/work.rs`), oracles 9 (renewal cadence) and 10 (closed guards) are kept
//! here and fed by the simulation's executor of each process's runner machine, on that
//! process's clock.
//!
//! The world feeds them three kinds of facts:
//! - every committed transaction, as the simulation knows it (which operation, what it read
//!   and wrote, whether it applied: the simulation decides every injected fault, so it knows
//!   even when the committer does not);
//! - after every step that committed something, a snapshot of the database read outside any
//!   fault (leader record, application keys, configuration, new history entries);
//! - after every step, what every live process believes at the current true instant.

mod ballots;
mod belief;
mod cadence;
mod closed_guard;
pub mod drain_served;
mod eligible_leads;
mod eligible_reservation;
mod fencing;
mod history;
mod hold;
mod ineligible_acquires;
mod liveness;
mod preemption;
mod progress;
pub mod rank;
mod reservation_timeout;
mod successor;

use std::collections::BTreeMap;
use std::fmt;

pub use ballots::Ballots;
pub use belief::BeliefOverlap;
pub use cadence::{Cadence, MAX_RENEWALS_PER_HEARTBEAT, Renewal};
pub use closed_guard::{Bounds, Closed};
pub use eligible_leads::EligibleLeads;
pub use eligible_reservation::EligibleReservation;
pub use fencing::Fencing;
pub use history::HistoryReplay;
pub use hold::Hold;
pub use ineligible_acquires::IneligibleAcquires;
pub use liveness::{Liveness, LivenessWindow};
pub use preemption::Preemption;
pub use progress::{Achieved, Progress};
pub use reservation_timeout::ReservationTimeout;
pub use successor::Successor;

use crate::history::{CandView, ConfigView, Entry, RecordView};
use crate::time::Nanos;
use rank::RegView;

/// The oracles, numbered as in DESIGN §9.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OracleId {
    /// 1. No two processes believe they lead at the same true instant.
    BeliefOverlap,
    /// 2. No older-ballot write accepted after a newer one; the fenced counter loses nothing.
    Fencing,
    /// 3. Ballots never decrease; one owner per ballot; the owner is registered.
    Ballots,
    /// 4. Preemption only by strictly higher priority, only when enabled, only via handover.
    Preemption,
    /// 5. Once faults stop: a leader within lease + 2 heartbeats, then the highest-priority
    ///    live candidate within a further handover.
    Liveness,
    /// 6. A run with no election, renewal or handover fails.
    Progress,
    /// 7. The commit-ordered history replays to the database state.
    History,
    /// 8. No guarded work runs outside its guard's validity (the candidate believes in the
    ///    guard's ballot whenever a guarded task runs).
    Guard,
    /// 9. A leader renews at a sane cadence: not in a loop, and its last attempt before its
    ///    deadline leaves room for a whole attempt.
    Cadence,
    /// 10. No leader keeps a closed guard longer than the grace and a heartbeat (plus its
    ///     transactions): the guard ends, or the lease lapses.
    ClosedGuard,
    /// 21. Once faults stop, no vacancy its leader reserved stays unfilled longer than the
    ///     reservation timeout and a heartbeat while an eligible candidate is live (DESIGN §4).
    ReservationTimeout,
    /// 22. No vacancy is reserved for a candidate the registry its transaction read shows
    ///     ineligible (DESIGN §13.2, §13.9).
    EligibleReservation,
    /// 23. An ineligible candidate never acquires or takes over (DESIGN §13.2, §13.9).
    IneligibleAcquires,
    /// 24. Once faults stop with an eligible candidate live, an eligible candidate leads
    ///     within lease + 2 heartbeats + the cool-down (DESIGN §13.9).
    EligibleLeads,
    /// 25. Under `hold`, a leader that is not eligible never lets go while nobody live is
    ///     eligible (DESIGN §13.3, §13.9).
    Hold,
    /// 26. Every vacancy a leader writes goes to the candidate the version policy allows,
    ///     given the registry its transaction read: the requester that outranks it, the
    ///     directed target, or the best live eligible candidate; and no takeover lands on a
    ///     candidate while one the policy ranks ahead still heartbeats (DESIGN §4, §14.5).
    Successor,
    /// 27. A leader whose guard closed with guarded work in flight ends it, while the work
    ///     still runs, only once the grace from the closing has passed (DESIGN §10.6).
    DrainServed,
    /// S1 (sharded, 11). At most one member believes it owns a shard at any true instant
    ///     (its lease and ownership view, or a live guard), and queries never change it.
    ShardBelief,
    /// S2 (sharded, 12). Fenced writes per shard in ballot order; no lost update.
    ShardFencing,
    /// S3 (sharded, 13). A shard's ballot never decreases, grows by one per new owner, and
    ///     each (shard, ballot) has one owner and one believer.
    ShardBallots,
    /// S4 (sharded, 14). After faults stop: every shard owned within lease + 2 heartbeats,
    ///     then the placement balanced within a bounded number of rounds.
    ShardLiveness,
    /// S5 (sharded, 15). A rolling deploy ends with every shard on a new member; a graceful
    ///     leave's shards are owned again without a lease's wait; once a leave has landed, no
    ///     shard record names the member at the epoch it ended.
    ShardDeploy,
    /// S6 (sharded, 16). No more changes of owner after quiescence than the placement bound.
    ShardMoves,
    /// S7 (sharded, 17). Guarded shard work runs only while its member owns the shard at the
    ///     guard's ballot.
    ShardGuard,
    /// S8 (sharded, 18). A member whose cycle failed starts its next one within its back-off:
    ///     not sooner than the least delay (no retries back to back), not later than the cap.
    ShardCadence,
    /// S9 (sharded, 19). Elections off: no commit acquires a shard and no coordinator or
    ///     member commit writes a reservation or a move request on a configuration that
    ///     disables elections; and failover never stops (a member record unchanged for a lease
    ///     is fenced out within a bound, whatever the configuration).
    ShardElectionsOff,
    /// S10 (sharded, 20). A member's record is removed only once fenced and named by no
    ///     shard record, with its epoch mark and inbox; afterwards nothing names it, nor does
    ///     it believe it owns a shard, at an epoch its fencing ended.
    ShardForgotten,
}

impl OracleId {
    /// Every oracle, in order.
    pub const ALL: [OracleId; 17] = [
        OracleId::BeliefOverlap,
        OracleId::Fencing,
        OracleId::Ballots,
        OracleId::Preemption,
        OracleId::Liveness,
        OracleId::Progress,
        OracleId::History,
        OracleId::Guard,
        OracleId::Cadence,
        OracleId::ClosedGuard,
        OracleId::ReservationTimeout,
        OracleId::EligibleReservation,
        OracleId::IneligibleAcquires,
        OracleId::EligibleLeads,
        OracleId::Hold,
        OracleId::Successor,
        OracleId::DrainServed,
    ];

    /// The sharded simulation's oracles (`sim --sharded`), in order.
    pub const SHARDED: [OracleId; 10] = [
        OracleId::ShardBelief,
        OracleId::ShardFencing,
        OracleId::ShardBallots,
        OracleId::ShardLiveness,
        OracleId::ShardDeploy,
        OracleId::ShardMoves,
        OracleId::ShardGuard,
        OracleId::ShardCadence,
        OracleId::ShardElectionsOff,
        OracleId::ShardForgotten,
    ];

    /// The oracle's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            OracleId::BeliefOverlap => "belief-overlap",
            OracleId::Fencing => "fencing",
            OracleId::Ballots => "ballots",
            OracleId::Preemption => "preemption",
            OracleId::Liveness => "liveness",
            OracleId::Progress => "progress",
            OracleId::History => "history",
            OracleId::Guard => "guard",
            OracleId::Cadence => "cadence",
            OracleId::ClosedGuard => "closed-guard",
            OracleId::ReservationTimeout => "reservation-timeout",
            OracleId::EligibleReservation => "eligible-reservation",
            OracleId::IneligibleAcquires => "ineligible-acquires",
            OracleId::EligibleLeads => "eligible-leads",
            OracleId::Hold => "hold",
            OracleId::Successor => "successor",
            OracleId::DrainServed => "drain-served",
            OracleId::ShardBelief => "shard-belief",
            OracleId::ShardFencing => "shard-fencing",
            OracleId::ShardBallots => "shard-ballots",
            OracleId::ShardLiveness => "shard-liveness",
            OracleId::ShardDeploy => "shard-deploy",
            OracleId::ShardMoves => "shard-moves",
            OracleId::ShardGuard => "shard-guard",
            OracleId::ShardCadence => "shard-cadence",
            OracleId::ShardElectionsOff => "shard-elections-off",
            OracleId::ShardForgotten => "shard-forgotten",
        }
    }

    /// Its number in DESIGN §9.
    pub fn number(self) -> u8 {
        match self {
            OracleId::BeliefOverlap => 1,
            OracleId::Fencing => 2,
            OracleId::Ballots => 3,
            OracleId::Preemption => 4,
            OracleId::Liveness => 5,
            OracleId::Progress => 6,
            OracleId::History => 7,
            OracleId::Guard => 8,
            OracleId::Cadence => 9,
            OracleId::ClosedGuard => 10,
            OracleId::ReservationTimeout => 21,
            OracleId::EligibleReservation => 22,
            OracleId::IneligibleAcquires => 23,
            OracleId::EligibleLeads => 24,
            OracleId::Hold => 25,
            OracleId::Successor => 26,
            OracleId::DrainServed => 27,
            OracleId::ShardBelief => 11,
            OracleId::ShardFencing => 12,
            OracleId::ShardBallots => 13,
            OracleId::ShardLiveness => 14,
            OracleId::ShardDeploy => 15,
            OracleId::ShardMoves => 16,
            OracleId::ShardGuard => 17,
            OracleId::ShardCadence => 18,
            OracleId::ShardElectionsOff => 19,
            OracleId::ShardForgotten => 20,
        }
    }
}

impl std::str::FromStr for OracleId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OracleId::ALL
            .into_iter()
            .chain(OracleId::SHARDED)
            .find(|o| o.name() == s || o.number().to_string() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = OracleId::ALL
                    .iter()
                    .chain(&OracleId::SHARDED)
                    .map(|o| o.name())
                    .collect();
                format!("unknown oracle {s:?}; oracles: {}", names.join(", "))
            })
    }
}

impl fmt::Display for OracleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oracle {} ({})", self.number(), self.name())
    }
}

/// An oracle's finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which oracle.
    pub oracle: OracleId,
    /// What it saw.
    pub message: String,
}

impl Violation {
    /// A finding of `oracle`.
    pub fn new(oracle: OracleId, message: impl Into<String>) -> Self {
        Violation {
            oracle,
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.oracle, self.message)
    }
}

/// A transaction the simulation committed (or tried to), as the simulation knows it.
#[derive(Debug)]
pub struct CommitFacts<'a> {
    /// True time of the commit.
    pub at: Nanos,
    /// The effects it wrote (its history entry).
    pub entry: &'a Entry,
    /// Whether it applied (the commit version moved), whatever the committer was told.
    pub applied: bool,
    /// What it read, for a process's transaction that changes who owns the record.
    pub read: Option<&'a TxnRead>,
}

impl<'a> CommitFacts<'a> {
    /// What the transaction read, if it applied and is a process's cycle that did `action`.
    pub fn read_of_applied(&self, action: crate::history::CycleAction) -> Option<&'a TxnRead> {
        let cycle = crate::history::Op::Cycle(action);
        (self.applied && self.entry.op == cycle).then_some(self.read?)
    }

    #[cfg(test)]
    /// The oracles' tables: `entry` applied at `at`, having read `read`.
    pub(crate) fn applied(at: Nanos, entry: &'a Entry, read: Option<&'a TxnRead>) -> Self {
        CommitFacts {
            at,
            entry,
            applied: true,
            read,
        }
    }
}

/// What a process's transaction that changes who owns the leader record (an acquisition, or
/// a vacancy written over its own leadership) read, read back through the transaction before
/// its commit with snapshot reads (no conflict is added): the eligibility and version oracles
/// judge the transaction by what it saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnRead {
    /// The configuration.
    pub config: ConfigView,
    /// Every registration (its own write included). Empty for an acquisition (not needed).
    pub registry: Vec<RegView>,
    /// The actor's eligibility as the world knows it: what its health checks make of it
    /// (the simulation's own run of them), unless the operator's mark the transaction read
    /// excludes it.
    pub eligible: bool,
    /// The actor keeps leading when it is not eligible and nobody live is (`hold`), as the
    /// world configured it.
    pub holds: bool,
    /// The actor believed it led when the operation began.
    pub believed: bool,
    /// The true time at which the transaction read (its operation ran).
    pub at: Nanos,
}

/// A process that believes, at the current true instant, that it leads.
#[derive(Clone, Debug)]
pub struct Belief {
    /// The process's label.
    pub label: String,
    /// The ballot it believes in.
    pub ballot: u64,
    /// The process's current priority.
    pub priority: i32,
    /// How long the belief still lasts, on its own clock (nanoseconds).
    pub remaining: Nanos,
    /// Its version.
    pub version: Option<fdb_leader_election::Version>,
    /// Whether it may lead, as the world knows it (its health, the operator's marks).
    pub eligible: bool,
}

/// A live process (running, registered, not shutting down), as the liveness oracles see it.
#[derive(Clone, Debug)]
pub struct LiveProc {
    /// Its label.
    pub label: String,
    /// How it stands (version, priority).
    pub stand: rank::Stand,
    /// Whether it may lead, as the world knows it.
    pub eligible: bool,
}

/// The database as read after a step, outside any fault.
#[derive(Clone, Debug)]
pub struct DbState {
    /// Latest commit version.
    pub version: u64,
    /// The leader record.
    pub leader: RecordView,
    /// Whether the leader record's owner (if any) has a registration.
    pub owner_registered: bool,
    /// Whether the candidate the vacancy is reserved for (if any) is registered.
    pub holder_registered: bool,
    /// Whether that candidate was live (by its registration) when the vacancy was reserved.
    pub holder_live: bool,
    /// The protected register.
    pub register: Option<(u64, u64)>,
    /// The fenced counter.
    pub counter: Option<u64>,
    /// The shadow counter.
    pub shadow: Option<u64>,
    /// The configuration.
    pub config: ConfigView,
    /// The configuration's handover grace, nanoseconds.
    pub handover_grace: Nanos,
    /// History entries committed since the last snapshot: (version in the key, entry).
    pub new_history: Vec<(u64, Option<Entry>)>,
    /// Every registration (read at the end of a run only).
    pub candidates: Option<BTreeMap<String, CandView>>,
}

#[cfg(test)]
impl DbState {
    /// The oracles' tables: version 0, an empty record whose parties are registered and live,
    /// nothing else, under [`ConfigView::enabled`]`(1)`.
    pub(crate) fn for_tests() -> Self {
        DbState {
            version: 0,
            leader: RecordView::default(),
            owner_registered: true,
            holder_registered: true,
            holder_live: true,
            register: None,
            counter: None,
            shadow: None,
            config: ConfigView::enabled(1),
            handover_grace: 0,
            new_history: Vec::new(),
            candidates: None,
        }
    }
}
