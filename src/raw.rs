//! Raw records, byte for byte as the library stores them: for tools (inspecting or repairing
//! an election) and for fault injection in tests (planting the record an older or faulty
//! version would have written, as this crate's simulation does). The keys they live at are
//! [`LeaderElection::leader_key`](crate::LeaderElection::leader_key) and its siblings.
//!
//! Writing raw records bypasses the protocol: production code uses the operations of
//! [`LeaderElection`](crate::LeaderElection). Every record built here passes the same checks
//! a decoded one does, so the library reads back exactly what was written.
//!
//! ```
//! use std::time::Duration;
//! use fdb_leader_election::{raw, Ballot, CandidateId, Priority};
//!
//! let owner = CandidateId::parse("node-a-0000000000000001")?;
//! let record = raw::owned_record(Ballot::new(3), &owner, Priority::new(1), 7, Duration::from_secs(10), 1)?;
//! let bytes = raw::encode_leader(&record)?;
//! assert_eq!(raw::decode_leader(&bytes)?, record);
//! # Ok::<(), fdb_leader_election::ElectionError>(())
//! ```

use std::time::Duration;

use crate::codec;
use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::{AttemptId, FenceRecord, LeaderRecord, Named, Party};

/// Encodes a leader record exactly as the election stores it.
///
/// # Errors
///
/// Size limits.
pub fn encode_leader(record: &LeaderRecord) -> Result<Vec<u8>, ElectionError> {
    codec::encode_leader(record)
}

/// Decodes a stored leader record, strictly (as every operation does).
///
/// # Errors
///
/// [`ElectionError::Corrupt`].
pub fn decode_leader(bytes: &[u8]) -> Result<LeaderRecord, ElectionError> {
    codec::decode_leader(b"", bytes)
}

fn checked(r: LeaderRecord) -> Result<LeaderRecord, ElectionError> {
    r.check()
        .map_err(|why| ElectionError::corrupt(b"", DecodeError::Impossible(why)))?;
    Ok(r)
}

/// The record of `owner` leading `ballot` at `renewal`, with `lease`, written by `owner`'s
/// attempt `seq`, with no request, reservation or payload.
///
/// # Errors
///
/// [`ElectionError::Corrupt`] for a state the protocol never writes (ballot 0, renewal 0, a
/// zero or oversized lease).
pub fn owned_record(
    ballot: Ballot,
    owner: &CandidateId,
    priority: Priority,
    renewal: u64,
    lease: Duration,
    seq: u64,
) -> Result<LeaderRecord, ElectionError> {
    checked(LeaderRecord {
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
        handover_to: None,
    })
}

/// The record of a vacancy at `ballot` and `renewal`, with `lease`, reserved for a
/// candidate (`reserved_for`) or not, written by attempt `writer`.
///
/// # Errors
///
/// [`ElectionError::Corrupt`] for a state the protocol never writes.
pub fn vacancy_record(
    ballot: Ballot,
    renewal: u64,
    lease: Duration,
    reserved_for: Option<(&CandidateId, Priority)>,
    writer: (&CandidateId, u64),
) -> Result<LeaderRecord, ElectionError> {
    checked(LeaderRecord {
        ballot,
        owner: None,
        renewal,
        lease,
        handover: None,
        reservation: reserved_for.map(|(id, p)| Party::Candidate(Named::new(id.clone(), p))),
        payload: None,
        writer: Some(AttemptId {
            candidate: writer.0.clone(),
            seq: writer.1,
        }),
        handover_to: None,
    })
}

/// The fence record of `ballot`: owned, or `vacant` (its leader stepped down), exactly as the
/// election stores it.
///
/// # Errors
///
/// Size limits.
pub fn fence_record(ballot: Ballot, vacant: bool) -> Result<Vec<u8>, ElectionError> {
    codec::encode_fence(&FenceRecord { ballot, vacant })
}

/// The fence record that agrees with `record` (what the election writes with it).
///
/// # Errors
///
/// Size limits.
pub fn fence_of(record: &LeaderRecord) -> Result<Vec<u8>, ElectionError> {
    codec::encode_fence(&FenceRecord::of(record))
}
