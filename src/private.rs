//! Hidden hooks for this crate's own benchmarks, simulation and tools. Not public API: no
//! stability promise, and nothing here is needed to use the crate.

use std::time::Duration;

use crate::clock::LocalInstant;
use crate::codec;
use crate::config::ElectionConfig;
use crate::core::{self, CycleInput, Decision, LocalState, Mode};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::{AttemptId, LeaderRecord, Named};

/// Encodes a leader record exactly as the election stores it.
///
/// # Errors
///
/// Size limits.
pub fn encode_leader_record(record: &LeaderRecord) -> Result<Vec<u8>, ElectionError> {
    codec::encode_leader(record)
}

/// Decodes a stored leader record, strictly.
///
/// # Errors
///
/// [`ElectionError::Corrupt`].
pub fn decode_leader_record(bytes: &[u8]) -> Result<LeaderRecord, ElectionError> {
    codec::decode_leader(b"", bytes)
}

/// One pure decision, repeated: a follower watching a live leader, or a leader renewing.
#[derive(Debug)]
pub struct DecideBench {
    state: LocalState,
    config: ElectionConfig,
    record: LeaderRecord,
    t: LocalInstant,
}

fn id(s: &str) -> Result<CandidateId, ElectionError> {
    CandidateId::parse(s)
}

impl DecideBench {
    /// A follower that sees the same live leader every time.
    ///
    /// # Errors
    ///
    /// None in practice (ids are valid).
    pub fn follower() -> Result<Self, ElectionError> {
        let leader = id("leader-0000000000000001")?;
        Ok(DecideBench {
            state: LocalState::new(id("follower-0000000000000002")?),
            // No rank stagger: the bench measures the decision, not a registry scan.
            config: ElectionConfig::builder()
                .takeover_stagger(Duration::ZERO)
                .build()?,
            record: LeaderRecord {
                ballot: Ballot::new(42),
                owner: Some(Named::new(leader.clone(), Priority::new(1))),
                renewal: 1_000,
                lease: Duration::from_secs(10),
                handover: None,
                reservation: None,
                payload: Some(b"10.0.0.1:7000".to_vec()),
                writer: Some(AttemptId {
                    candidate: leader,
                    seq: 7,
                }),
            },
            t: LocalInstant::ZERO,
        })
    }

    /// A leader renewing its own record.
    ///
    /// # Errors
    ///
    /// None in practice.
    pub fn leader() -> Result<Self, ElectionError> {
        let mut b = Self::follower()?;
        b.state = LocalState::new(id("leader-0000000000000001")?);
        b.record.owner = None;
        b.record.payload = None;
        let plan = {
            let input = CycleInput {
                config: &b.config,
                leader: &b.record,
                priority: Priority::new(1),
                payload: Some(b"10.0.0.1:7000"),
                registration: 0,
                started_at: b.t,
                read_at: b.t,
                read_version: None,
                mode: Mode::Cycle,
                lookups: core::Lookups::default(),
            };
            core::decide_cycle(&mut b.state, &input)?
        };
        if let Decision::Plan(plan) = plan {
            if let (Some(write), Some(adopt)) = (plan.write, plan.adopt) {
                b.state.adopt(&adopt);
                b.record = write;
            }
        }
        Ok(b)
    }

    /// Decides once; returns whether the decision writes the leader record.
    ///
    /// # Errors
    ///
    /// Exhausted counters.
    pub fn decide(&mut self) -> Result<bool, ElectionError> {
        let input = CycleInput {
            config: &self.config,
            leader: &self.record,
            priority: Priority::new(1),
            payload: Some(b"10.0.0.1:7000"),
            registration: 0,
            started_at: self.t,
            read_at: self.t,
            read_version: None,
            mode: Mode::Cycle,
            lookups: core::Lookups::default(),
        };
        Ok(match core::decide_cycle(&mut self.state, &input)? {
            Decision::Plan(plan) => plan.write.is_some(),
            Decision::Need(_) => false,
        })
    }
}

/// The raw leader record of an acquisition by `owner` at `ballot`, exactly as the library
/// would store it: for planting faults (a takeover that skips the protocol) in the simulation.
///
/// # Errors
///
/// Size limits.
pub fn owned_record(
    ballot: Ballot,
    owner: &CandidateId,
    priority: Priority,
    renewal: u64,
    lease: Duration,
    seq: u64,
) -> Result<Vec<u8>, ElectionError> {
    codec::encode_leader(&LeaderRecord {
        ballot,
        owner: Some(Named::new(owner.clone(), priority)),
        renewal,
        lease,
        handover: None,
        reservation: None,
        payload: None,
        writer: Some(AttemptId {
            candidate: owner.clone(),
            seq,
        }),
    })
}

/// The raw fence record of `ballot`.
///
/// # Errors
///
/// Size limits.
pub fn fence_record(ballot: Ballot, vacant: bool) -> Result<Vec<u8>, ElectionError> {
    codec::encode_fence(&crate::record::FenceRecord { ballot, vacant })
}

/// The leader key of `election`.
pub fn leader_key(election: &crate::LeaderElection) -> Vec<u8> {
    election.keys().leader.clone()
}

/// The fence key of `election`.
pub fn fence_key(election: &crate::LeaderElection) -> Vec<u8> {
    election.keys().fence.clone()
}
