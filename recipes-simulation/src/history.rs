//! The commit-ordered history: one entry per committed transaction, written into the database
//! by the transaction itself (under [`history_key`](crate::wire::history_key) of its own commit
//! version, so the log is in true commit order and lands if and only if the transaction does),
//! and the replay that folds it into the state it must produce.
//!
//! Entries hold the *effects* a transaction wrote, read back through the transaction itself
//! (read-your-writes) just before the commit, and, for writes to the leader record, the record
//! the transaction read (its prior state).

use std::collections::BTreeMap;

use fdb_leader_election::{CandidateRecord, ElectionConfig, LeaderRecord, Named, VersionPolicy};
use serde::{Deserialize, Serialize};

/// A candidate as named in a record: (id, priority).
pub type NamedView = (String, i32);

fn named(n: Option<&Named>) -> Option<NamedView> {
    n.map(|n| (n.id().to_string(), n.priority().get()))
}

/// Every field of a leader record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordView {
    /// The ballot.
    pub ballot: u64,
    /// The owner, if owned.
    pub owner: Option<NamedView>,
    /// The renewal counter.
    pub renewal: u64,
    /// The lease stored with the record, in nanoseconds.
    pub lease: u64,
    /// A pending handover request.
    pub handover: Option<NamedView>,
    /// A reservation, while vacant.
    pub reservation: Option<NamedView>,
    /// An operator's request that the leader step down (the operator's id).
    pub operator_request: Option<String>,
    /// While vacant after `force_vacate`: the operator's id.
    pub operator_hold: Option<String>,
    /// The attempt that wrote it: (candidate, sequence).
    pub writer: Option<(String, u64)>,
    /// The version of its ballot's leader (DESIGN §14: `no-downgrade` ranks against it).
    pub leader_version: Option<String>,
    /// The name an operator's directed request hands over to (`resign --to NAME`).
    pub operator_request_to: Option<String>,
}

impl RecordView {
    /// The view of `r`.
    pub fn of(r: &LeaderRecord) -> Self {
        RecordView {
            ballot: r.ballot().get(),
            owner: named(r.owner()),
            renewal: r.renewal(),
            lease: crate::time::nanos(r.lease_duration()),
            handover: named(r.handover_request()),
            reservation: named(r.reservation()),
            operator_request: r.operator_request().map(ToString::to_string),
            operator_hold: r.operator_hold().map(ToString::to_string),
            writer: r.writer().map(|w| (w.candidate().to_string(), w.seq())),
            leader_version: r.leader_version().map(ToString::to_string),
            operator_request_to: r.operator_request_to().map(str::to_owned),
        }
    }

    /// The observation identity (ballot, renewal).
    pub fn identity(&self) -> (u64, u64) {
        (self.ballot, self.renewal)
    }

    /// The owner's id.
    pub fn owner_id(&self) -> Option<&str> {
        self.owner.as_ref().map(|o| o.0.as_str())
    }
}

/// Every field of a candidate registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandView {
    /// Registered priority.
    pub priority: i32,
    /// Registration order.
    pub registration: u64,
    /// Heartbeat counter.
    pub heartbeat: u64,
    /// Leader renewal seen at the last heartbeat.
    pub seen_renewal: u64,
    /// Whether it may lead, as registered (its health and an operator's mark).
    pub eligible: bool,
    /// The version it registered.
    pub version: Option<String>,
}

impl CandView {
    /// The view of `r`.
    pub fn of(r: &CandidateRecord) -> Self {
        CandView {
            priority: r.priority().get(),
            registration: r.registration(),
            heartbeat: r.heartbeat(),
            seen_renewal: r.seen_renewal(),
            eligible: r.is_eligible(),
            version: r.version().map(ToString::to_string),
        }
    }
}

/// The configuration fields the oracles use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigView {
    /// Lease, nanoseconds.
    pub lease: u64,
    /// Whether elections are enabled.
    pub election_enabled: bool,
    /// Whether preemption is allowed.
    pub allow_preemption: bool,
    /// How long a vacancy its leader reserved waits for its holder, nanoseconds.
    pub reservation_timeout: u64,
    /// The heartbeat interval, nanoseconds.
    #[serde(default)]
    pub heartbeat: u64,
    /// The version policy (DESIGN §14.2), by its name.
    pub version_policy: String,
    /// Leader renewals a registration may lag and still count as live.
    pub renewals_before_dead: u64,
}

impl ConfigView {
    /// The view of `c`.
    pub fn of(c: &ElectionConfig) -> Self {
        ConfigView {
            lease: crate::time::nanos(c.lease_duration()),
            election_enabled: c.election_enabled(),
            allow_preemption: c.allow_preemption(),
            reservation_timeout: crate::time::nanos(c.reservation_timeout()),
            heartbeat: crate::time::nanos(c.heartbeat_interval()),
            version_policy: c.version_policy().as_str().to_owned(),
            renewals_before_dead: c.renewals_before_dead(),
        }
    }

    /// The version policy.
    pub fn policy(&self) -> VersionPolicy {
        self.version_policy.parse().unwrap_or_default()
    }

    /// The oracles' tables: elections and preemption on, a lease and reservation timeout of
    /// `lease` nanoseconds, no heartbeat.
    #[cfg(test)]
    pub(crate) fn enabled(lease: u64) -> Self {
        ConfigView {
            lease,
            election_enabled: true,
            allow_preemption: true,
            reservation_timeout: lease,
            heartbeat: 0,
            ..ConfigView::default()
        }
    }
}

/// What a transaction was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `initialize_with_config`.
    Init,
    /// `register_candidate`.
    Register,
    /// `run_election_cycle`, with the action it reported.
    Cycle(CycleAction),
    /// `resign_leadership` that resigned.
    Resign,
    /// `resign_leadership` that was rejected (nothing written).
    ResignRejected,
    /// `unregister_candidate` (resigning first if `resigned`).
    Unregister {
        /// Whether it resigned the leadership in the same transaction.
        resigned: bool,
    },
    /// `write_config`.
    Config,
    /// `evict_dead_candidates`.
    Evict,
    /// Fenced leader work (protected register and fenced counter).
    Work,
    /// Unfenced shadow work.
    Shadow,
    /// The planted rogue takeover (raw write of the leader record).
    RogueTakeover,
    /// An operator's `force_vacate`.
    ForceVacate,
    /// An operator's `request_resign`.
    RequestResign,
    /// The operator removed a registration (`unregister_candidate` of a `Candidate` value it
    /// built for a registered id).
    OperatorUnregister,
    /// A planted raw write of the leader record by a faulty operator override.
    RogueOperator,
    /// Operator marks (`set_eligible` by name).
    Mark,
}

/// [`fdb_leader_election::Action`], serialisable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CycleAction {
    /// Nothing written to the leader record.
    None,
    /// A new ballot.
    Acquired,
    /// Same ballot, renewal + 1.
    Renewed,
    /// A handover request.
    RequestedHandover,
    /// A vacancy reserved for the requester.
    HandedOver,
    /// A vacancy because elections are disabled.
    SteppedDown,
    /// A resignation (a cycle writes one again when a step-down's write never landed).
    Resigned,
    /// A vacancy because the leader is not eligible (DESIGN §13.3): reserved for the best live
    /// eligible candidate, or unreserved under the `release` policy with none.
    SteppedDownIneligible,
}

impl CycleAction {
    /// The serialisable form of `a`.
    pub fn of(a: fdb_leader_election::Action) -> Self {
        use fdb_leader_election::Action as A;
        match a {
            A::Acquired => CycleAction::Acquired,
            A::Renewed => CycleAction::Renewed,
            A::RequestedHandover => CycleAction::RequestedHandover,
            A::HandedOver => CycleAction::HandedOver,
            A::SteppedDown => CycleAction::SteppedDown,
            A::Resigned => CycleAction::Resigned,
            A::SteppedDownIneligible => CycleAction::SteppedDownIneligible,
            _ => CycleAction::None,
        }
    }
}

/// One committed transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Commit version (also the entry's key).
    pub version: u64,
    /// True commit time, nanoseconds.
    pub at: u64,
    /// Who ran it: a process label, or "operator".
    pub actor: String,
    /// The actor's candidate id, if a process.
    pub actor_id: Option<String>,
    /// The actor's priority when it ran the operation.
    pub actor_priority: i32,
    /// The actor's version when it ran the operation.
    pub actor_version: Option<String>,
    /// What it was.
    pub op: Op,
    /// The leader record the transaction read, when it writes the leader record.
    pub prior: Option<RecordView>,
    /// The leader record it wrote.
    pub leader: Option<RecordView>,
    /// Candidate registrations it wrote.
    pub candidates_set: Vec<(String, CandView)>,
    /// Candidate registrations it cleared.
    pub candidates_cleared: Vec<String>,
    /// The configuration it wrote.
    pub config: Option<ConfigView>,
    /// The protected register it wrote: (ballot, sequence).
    pub register: Option<(u64, u64)>,
    /// The fenced counter it wrote.
    pub counter: Option<u64>,
    /// The shadow counter it wrote.
    pub shadow: Option<u64>,
}

impl Entry {
    /// An entry with no effects yet.
    pub fn new(actor: &str, actor_id: Option<String>, actor_priority: i32, op: Op) -> Self {
        Entry {
            version: 0,
            at: 0,
            actor: actor.to_owned(),
            actor_id,
            actor_priority,
            actor_version: None,
            op,
            prior: None,
            leader: None,
            candidates_set: Vec::new(),
            candidates_cleared: Vec::new(),
            config: None,
            register: None,
            counter: None,
            shadow: None,
        }
    }

    /// The encoded entry.
    pub fn encode(&self) -> Vec<u8> {
        bincode::serde::encode_to_vec(self, bincode::config::standard()).unwrap_or_default()
    }

    /// Decodes an entry.
    pub fn decode(bytes: &[u8]) -> Option<Entry> {
        bincode::serde::decode_from_slice::<Entry, _>(bytes, bincode::config::standard())
            .ok()
            .map(|(e, _)| e)
    }
}

/// The state a history replays to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// The leader record.
    pub leader: Option<RecordView>,
    /// Registrations.
    pub candidates: BTreeMap<String, CandView>,
    /// The configuration.
    pub config: Option<ConfigView>,
    /// The protected register.
    pub register: Option<(u64, u64)>,
    /// The fenced counter.
    pub counter: Option<u64>,
    /// The shadow counter.
    pub shadow: Option<u64>,
}

impl Replayed {
    /// Applies one entry's effects.
    pub fn apply(&mut self, e: &Entry) {
        if let Some(l) = &e.leader {
            self.leader = Some(l.clone());
        }
        for (id, c) in &e.candidates_set {
            self.candidates.insert(id.clone(), c.clone());
        }
        for id in &e.candidates_cleared {
            self.candidates.remove(id);
        }
        if let Some(c) = &e.config {
            self.config = Some(c.clone());
        }
        if e.register.is_some() {
            self.register = e.register;
        }
        if e.counter.is_some() {
            self.counter = e.counter;
        }
        if e.shadow.is_some() {
            self.shadow = e.shadow;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn entries_round_trip_and_replay() {
        let mut e = Entry::new(
            "n1v1",
            Some("x".into()),
            3,
            Op::Cycle(CycleAction::Acquired),
        );
        e.version = 7;
        e.leader = Some(RecordView {
            ballot: 2,
            owner: Some(("x".into(), 3)),
            ..RecordView::default()
        });
        e.candidates_set.push((
            "x".into(),
            CandView {
                priority: 3,
                registration: 0,
                heartbeat: 1,
                seen_renewal: 0,
                eligible: true,
                version: None,
            },
        ));
        let back = Entry::decode(&e.encode()).unwrap();
        assert_eq!(back, e);
        let mut r = Replayed::default();
        r.apply(&back);
        assert_eq!(r.leader.as_ref().map(|l| l.ballot), Some(2));
        assert_eq!(r.candidates.len(), 1);
    }
}
