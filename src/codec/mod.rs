//! Every durable value: one format-version byte, then a bincode 2 body (standard
//! configuration, serde). All encoding lives here, so the codec can be swapped by bumping the
//! version byte.
//!
//! Versions: 1 was the first format. 2 changed only the leader record: a reservation or a
//! handover request names either a candidate or an operator (so that no candidate can fill a
//! vacancy an operator holds). This build writes version 2 and reads both; a version-1 leader
//! record's reservation and request are a candidate's. Every other value has the same body in
//! both versions, except the fence ([`fence`]).
//!
//! Decoding is strict: an empty value, an unknown version, a malformed body, trailing bytes
//! or a state the protocol never writes is a [`DecodeError`], reported with the key as
//! [`ElectionError::Corrupt`]. Nothing that fails to decode is ever overwritten blindly.

use std::time::Duration;

use bincode::config::{Configuration, Limit, LittleEndian, Varint};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::{
    AttemptId, CandidateRecord, Eligibility, LeaderRecord, MAX_VALUE_BYTES, Named, Party,
    ResignRefusal,
};

mod config;
mod fence;
mod shard;
pub(crate) use config::{decode_config, encode_config};
pub use fence::FENCE_FORMAT_VERSION;
pub(crate) use fence::{decode_fence, encode_fence};
pub(crate) use shard::{
    EPOCH_MARK_MAX, INBOX_PREFIX_GROWTH, decode_epoch_mark, decode_inbox, decode_layout,
    decode_member, decode_shard, encode_epoch_mark, encode_inbox, encode_layout, encode_member,
    encode_shard, hand_over_entry_len, inbox_len, member_len, reserved_entry_len, shard_len,
};

/// The newest format version this build reads (it reads every older one, down to 1). It writes
/// it only for the values whose body this version changed, and only when the value needs it
/// (a candidate's eligibility, a configuration's reservation timeout); every other value is
/// written at version 2 (`BASE_VERSION`), so that a build of the previous version keeps reading it during
/// a rolling upgrade, and refuses (as an unknown version) only what it could not represent.
pub const FORMAT_VERSION: u8 = 3;

/// The version every value whose body is unchanged since is written at.
const BASE_VERSION: u8 = 2;

/// The oldest format version this build reads.
const OLDEST_READ: u8 = 1;

/// How much memory bincode may claim while decoding one value: a guard against a corrupt
/// length prefix (a body claiming 2^60 elements), not a size rule. The size rule is
/// [`MAX_VALUE_BYTES`] of encoded bytes, which the encoder and the decoder both apply. A value
/// within it may claim more memory than its encoded length (bincode claims the in-memory
/// size of each element: 32 bytes for a `(ShardId, CandidateId)` encoded in 2), at most 16
/// times as much for every type stored here, plus its strings' bytes; twice that is allowed.
const DECODE_MEMORY_LIMIT: usize = 32 * MAX_VALUE_BYTES;

type Config = Configuration<LittleEndian, Varint, Limit<DECODE_MEMORY_LIMIT>>;

fn config() -> Config {
    bincode::config::standard().with_limit::<DECODE_MEMORY_LIMIT>()
}

fn encode<T: Serialize>(what: &'static str, wire: &T) -> Result<Vec<u8>, ElectionError> {
    encode_at(what, BASE_VERSION, wire)
}

/// Encodes `wire` as format `version`.
fn encode_at<T: Serialize>(
    what: &'static str,
    version: u8,
    wire: &T,
) -> Result<Vec<u8>, ElectionError> {
    let mut out = Vec::with_capacity(128);
    out.push(version);
    bincode::serde::encode_into_std_write(wire, &mut out, bincode::config::standard())
        .map_err(|source| ElectionError::Encode { what, source })?;
    if out.len() > MAX_VALUE_BYTES {
        return Err(ElectionError::TooLarge {
            what,
            len: out.len(),
            max: MAX_VALUE_BYTES,
        });
    }
    Ok(out)
}

/// The value's format version (one this build reads) and its body. A value longer than
/// [`MAX_VALUE_BYTES`] was never written by the encoder (the one limit of both).
fn split_version(bytes: &[u8]) -> Result<(u8, &[u8]), DecodeError> {
    if bytes.len() > MAX_VALUE_BYTES {
        return Err(DecodeError::TooLarge {
            len: bytes.len(),
            max: MAX_VALUE_BYTES,
        });
    }
    let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if !(OLDEST_READ..=FORMAT_VERSION).contains(&version) {
        return Err(DecodeError::UnknownVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok((version, body))
}

/// Decodes a whole body: a malformed body or trailing bytes are errors.
fn decode_wire<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let (value, used) = bincode::serde::decode_from_slice::<T, Config>(body, config())
        .map_err(DecodeError::Malformed)?;
    let extra = body.len().saturating_sub(used);
    if extra != 0 {
        return Err(DecodeError::TrailingBytes { extra });
    }
    Ok(value)
}

/// Decodes a value whose body is the same in every version this build reads.
fn decode_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let (_, body) = split_version(bytes)?;
    decode_wire(body)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Serialize, Deserialize)]
struct NamedWire {
    id: CandidateId,
    priority: Priority,
}

/// The wire form of an attempt id.
fn attempt_wire(a: &AttemptId) -> AttemptWire {
    AttemptWire {
        candidate: a.candidate.clone(),
        seq: a.seq,
    }
}

/// An attempt id from its wire form.
fn attempt(w: AttemptWire) -> AttemptId {
    AttemptId {
        candidate: w.candidate,
        seq: w.seq,
    }
}

#[derive(Serialize, Deserialize)]
struct AttemptWire {
    candidate: CandidateId,
    seq: u64,
}

#[derive(Serialize, Deserialize)]
enum PartyWire {
    Candidate(NamedWire),
    Operator(CandidateId),
}

/// The leader record, format version 2.
#[derive(Serialize, Deserialize)]
struct LeaderWire {
    ballot: Ballot,
    owner: Option<NamedWire>,
    renewal: u64,
    lease_nanos: u64,
    handover: Option<PartyWire>,
    reservation: Option<PartyWire>,
    payload: Option<Vec<u8>>,
    writer: Option<AttemptWire>,
}

/// The leader record, format version 1: requests and reservations were always candidates'.
#[derive(Serialize, Deserialize)]
struct LeaderWireV1 {
    ballot: Ballot,
    owner: Option<NamedWire>,
    renewal: u64,
    lease_nanos: u64,
    handover: Option<NamedWire>,
    reservation: Option<NamedWire>,
    payload: Option<Vec<u8>>,
    writer: Option<AttemptWire>,
}

impl From<LeaderWireV1> for LeaderWire {
    fn from(w: LeaderWireV1) -> Self {
        LeaderWire {
            ballot: w.ballot,
            owner: w.owner,
            renewal: w.renewal,
            lease_nanos: w.lease_nanos,
            handover: w.handover.map(PartyWire::Candidate),
            reservation: w.reservation.map(PartyWire::Candidate),
            payload: w.payload,
            writer: w.writer,
        }
    }
}

fn named_wire(n: &Named) -> NamedWire {
    NamedWire {
        id: n.id.clone(),
        priority: n.priority,
    }
}

fn named(w: NamedWire) -> Named {
    Named::new(w.id, w.priority)
}

fn party_wire(p: &Party) -> PartyWire {
    match p {
        Party::Candidate(n) => PartyWire::Candidate(named_wire(n)),
        Party::Operator(id) => PartyWire::Operator(id.clone()),
    }
}

fn party(w: PartyWire) -> Party {
    match w {
        PartyWire::Candidate(n) => Party::Candidate(named(n)),
        PartyWire::Operator(id) => Party::Operator(id),
    }
}

/// The leader record, format version 3: version 2's, and the name an operator's request asks
/// the vacancy to be reserved for.
#[derive(Serialize, Deserialize)]
struct LeaderWireV3 {
    base: LeaderWire,
    handover_to: Option<String>,
    leader_version: Option<String>,
}

/// Encodes a leader record: version 2's body unless an operator directed its request
/// (version 3, which a build of the previous version refuses rather than ignore the target).
pub(crate) fn encode_leader(r: &LeaderRecord) -> Result<Vec<u8>, ElectionError> {
    let base = LeaderWire {
        ballot: r.ballot,
        owner: r.owner.as_ref().map(named_wire),
        renewal: r.renewal,
        lease_nanos: nanos(r.lease),
        handover: r.handover.as_ref().map(party_wire),
        reservation: r.reservation.as_ref().map(party_wire),
        payload: r.payload.clone(),
        writer: r.writer.as_ref().map(attempt_wire),
    };
    if r.handover_to.is_none() && r.leader_version.is_none() {
        return encode("leader record", &base);
    }
    encode_at(
        "leader record",
        3,
        &LeaderWireV3 {
            base,
            handover_to: r.handover_to.clone(),
            leader_version: r.leader_version.as_ref().map(ToString::to_string),
        },
    )
}

/// Decodes a leader record stored at `key`.
pub(crate) fn decode_leader(key: &[u8], bytes: &[u8]) -> Result<LeaderRecord, ElectionError> {
    let (w, handover_to, leader_version) = split_version(bytes)
        .and_then(|(version, body)| match version {
            1 => decode_wire::<LeaderWireV1>(body).map(|w| (LeaderWire::from(w), None, None)),
            2 => decode_wire::<LeaderWire>(body).map(|w| (w, None, None)),
            _ => {
                decode_wire::<LeaderWireV3>(body).map(|w| (w.base, w.handover_to, w.leader_version))
            }
        })
        .map_err(|e| ElectionError::corrupt(key, e))?;
    let leader_version = parse_version(key, leader_version)?;
    let r = LeaderRecord {
        ballot: w.ballot,
        owner: w.owner.map(named),
        renewal: w.renewal,
        lease: Duration::from_nanos(w.lease_nanos),
        handover: w.handover.map(party),
        reservation: w.reservation.map(party),
        payload: w.payload,
        writer: w.writer.map(attempt),
        handover_to,
        leader_version,
    };
    r.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(r)
}

#[derive(Serialize, Deserialize)]
struct CandidateWire {
    priority: Priority,
    registration: u64,
    heartbeat: u64,
    seen_renewal: u64,
    metadata: Option<Vec<u8>>,
}

/// A candidate record, format version 3: version 2's, and its eligibility (`None`: eligible;
/// `Some(reason)`: ineligible).
#[derive(Serialize, Deserialize)]
struct CandidateWireV3 {
    base: CandidateWire,
    ineligible: Option<String>,
    version: Option<String>,
}

/// Encodes a candidate record: version 2's body while it is eligible (a build of the previous
/// version reads it), version 3's when it is not (that build refuses it rather than take an
/// ineligible candidate for an eligible one).
pub(crate) fn encode_candidate(r: &CandidateRecord) -> Result<Vec<u8>, ElectionError> {
    let base = CandidateWire {
        priority: r.priority,
        registration: r.registration,
        heartbeat: r.heartbeat,
        seen_renewal: r.seen_renewal,
        metadata: r.metadata.clone(),
    };
    if r.eligibility.is_eligible() && r.version.is_none() {
        return encode("candidate record", &base);
    }
    encode_at(
        "candidate record",
        3,
        &CandidateWireV3 {
            base,
            ineligible: r.eligibility.reason().map(str::to_owned),
            version: r.version.as_ref().map(ToString::to_string),
        },
    )
}

/// A version as stored: its text, parsed strictly.
fn parse_version(
    key: &[u8],
    text: Option<String>,
) -> Result<Option<semver::Version>, ElectionError> {
    text.map(|t| {
        semver::Version::parse(&t)
            .map_err(|_| ElectionError::corrupt(key, DecodeError::Impossible("invalid version")))
    })
    .transpose()
}

/// Decodes a candidate record stored at `key`.
pub(crate) fn decode_candidate(key: &[u8], bytes: &[u8]) -> Result<CandidateRecord, ElectionError> {
    let (w, ineligible, version) = split_version(bytes)
        .and_then(|(version, body)| match version {
            1 | 2 => decode_wire::<CandidateWire>(body).map(|w| (w, None, None)),
            _ => decode_wire::<CandidateWireV3>(body).map(|w| (w.base, w.ineligible, w.version)),
        })
        .map_err(|e| ElectionError::corrupt(key, e))?;
    let version = parse_version(key, version)?;
    let r = CandidateRecord {
        priority: w.priority,
        registration: w.registration,
        heartbeat: w.heartbeat,
        seen_renewal: w.seen_renewal,
        metadata: w.metadata,
        eligibility: match ineligible {
            None => Eligibility::Eligible,
            Some(reason) => Eligibility::Ineligible { reason },
        },
        version,
    };
    r.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(r)
}

#[derive(Serialize, Deserialize)]
struct RefusalWire {
    ballot: Ballot,
    operator: CandidateId,
    to: String,
    reason: String,
}

/// Encodes a refused directed resign.
pub(crate) fn encode_refusal(r: &ResignRefusal) -> Result<Vec<u8>, ElectionError> {
    encode(
        "resign refusal",
        &RefusalWire {
            ballot: r.ballot,
            operator: r.operator.clone(),
            to: r.to.clone(),
            reason: r.reason.clone(),
        },
    )
}

/// Decodes the refused directed resign stored at `key`.
pub(crate) fn decode_refusal(key: &[u8], bytes: &[u8]) -> Result<ResignRefusal, ElectionError> {
    let w: RefusalWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    if !w.operator.is_valid() {
        return Err(ElectionError::corrupt(
            key,
            DecodeError::Impossible("invalid operator id in a resign refusal"),
        ));
    }
    Ok(ResignRefusal {
        ballot: w.ballot,
        operator: w.operator,
        to: w.to,
        reason: w.reason,
    })
}

/// Encodes an operator's ineligibility mark: its reason.
pub(crate) fn encode_mark(reason: &str) -> Result<Vec<u8>, ElectionError> {
    encode("eligibility mark", &reason)
}

/// Decodes the ineligibility mark stored at `key`: the eligibility it imposes.
pub(crate) fn decode_mark(key: &[u8], bytes: &[u8]) -> Result<Eligibility, ElectionError> {
    let reason: String = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    let e = Eligibility::Ineligible { reason };
    e.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(e)
}

/// Encodes the registration counter.
pub(crate) fn encode_counter(n: u64) -> Result<Vec<u8>, ElectionError> {
    encode("registration counter", &n)
}

/// Decodes the registration counter stored at `key`.
pub(crate) fn decode_counter(key: &[u8], bytes: &[u8]) -> Result<u64, ElectionError> {
    decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))
}

#[cfg(test)]
mod tests;
