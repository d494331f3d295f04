//! Every durable value: one format-version byte, then a bincode 2 body (standard
//! configuration, serde). All encoding lives here, so the codec can be swapped by bumping the
//! version byte.
//!
//! Versions: 1 was the first format. 2 changed only the leader record: a reservation or a
//! handover request names either a candidate or an operator (so that no candidate can fill a
//! vacancy an operator holds). This build writes version 2 and reads both; a version-1 leader
//! record's reservation and request are a candidate's. Every other value has the same body in
//! both versions, except the fence.
//!
//! The fence is the one value other languages read (a fenced write from any FoundationDB
//! binding checks it in its own transaction), so since version 3 it is a FoundationDB tuple,
//! not bincode: `pack((3, ballot, vacant))`, an integer, an integer and a boolean, e.g.
//! `15 03 15 05 26` for ballot 5, not vacant. Its first byte (`0x15`, the tuple code of a
//! one-byte positive integer) is no version byte a version-1 or -2 reader knows, so an older
//! build refuses a version-3 fence as an unknown format (it never misreads it); this build
//! still reads the version-1 and -2 bincode fences older builds write. A tuple whose first
//! element is a version above 3 is an unknown version.
//!
//! Decoding is strict: an empty value, an unknown version, a malformed body, trailing bytes
//! or a state the protocol never writes is a [`DecodeError`], reported with the key as
//! [`ElectionError::Corrupt`]. Nothing that fails to decode is ever overwritten blindly.

use std::time::Duration;

use bincode::config::{Configuration, Limit, LittleEndian, Varint};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::config::ElectionConfig;
use crate::error::{DecodeError, ElectionError, printable_key};
use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::{
    AttemptId, CandidateRecord, FenceRecord, LeaderRecord, MAX_VALUE_BYTES, Named, Party,
};

mod shard;
pub(crate) use shard::{
    decode_epoch_mark, decode_inbox, decode_layout, decode_member, decode_shard, encode_epoch_mark,
    encode_inbox, encode_layout, encode_member, encode_shard,
};

/// The format version this build writes. It also reads every older version (down to 1).
pub const FORMAT_VERSION: u8 = 2;

/// The oldest format version this build reads.
const OLDEST_READ: u8 = 1;

type Config = Configuration<LittleEndian, Varint, Limit<MAX_VALUE_BYTES>>;

fn config() -> Config {
    bincode::config::standard().with_limit::<MAX_VALUE_BYTES>()
}

fn encode<T: Serialize>(what: &'static str, wire: &T) -> Result<Vec<u8>, ElectionError> {
    let mut out = Vec::with_capacity(128);
    out.push(FORMAT_VERSION);
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

/// The value's format version (one this build reads) and its body.
fn split_version(bytes: &[u8]) -> Result<(u8, &[u8]), DecodeError> {
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

/// Encodes a leader record.
pub(crate) fn encode_leader(r: &LeaderRecord) -> Result<Vec<u8>, ElectionError> {
    encode(
        "leader record",
        &LeaderWire {
            ballot: r.ballot,
            owner: r.owner.as_ref().map(named_wire),
            renewal: r.renewal,
            lease_nanos: nanos(r.lease),
            handover: r.handover.as_ref().map(party_wire),
            reservation: r.reservation.as_ref().map(party_wire),
            payload: r.payload.clone(),
            writer: r.writer.as_ref().map(attempt_wire),
        },
    )
}

/// Decodes a leader record stored at `key`.
pub(crate) fn decode_leader(key: &[u8], bytes: &[u8]) -> Result<LeaderRecord, ElectionError> {
    let w = split_version(bytes)
        .and_then(|(version, body)| match version {
            1 => decode_wire::<LeaderWireV1>(body).map(LeaderWire::from),
            _ => decode_wire::<LeaderWire>(body),
        })
        .map_err(|e| ElectionError::corrupt(key, e))?;
    let r = LeaderRecord {
        ballot: w.ballot,
        owner: w.owner.map(named),
        renewal: w.renewal,
        lease: Duration::from_nanos(w.lease_nanos),
        handover: w.handover.map(party),
        reservation: w.reservation.map(party),
        payload: w.payload,
        writer: w.writer.map(attempt),
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

/// Encodes a candidate record.
pub(crate) fn encode_candidate(r: &CandidateRecord) -> Result<Vec<u8>, ElectionError> {
    encode(
        "candidate record",
        &CandidateWire {
            priority: r.priority,
            registration: r.registration,
            heartbeat: r.heartbeat,
            seen_renewal: r.seen_renewal,
            metadata: r.metadata.clone(),
        },
    )
}

/// Decodes a candidate record stored at `key`.
pub(crate) fn decode_candidate(key: &[u8], bytes: &[u8]) -> Result<CandidateRecord, ElectionError> {
    let w: CandidateWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    let r = CandidateRecord {
        priority: w.priority,
        registration: w.registration,
        heartbeat: w.heartbeat,
        seen_renewal: w.seen_renewal,
        metadata: w.metadata,
    };
    r.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(r)
}

#[derive(Serialize, Deserialize)]
struct ConfigWire {
    lease_nanos: u64,
    heartbeat_nanos: u64,
    candidate_timeout_nanos: u64,
    election_enabled: bool,
    allow_preemption: bool,
    max_clock_rate_error_ppm: u32,
    min_tenure_nanos: u64,
    handover_grace_nanos: u64,
    takeover_stagger_nanos: u64,
    transaction_timeout_nanos: u64,
}

/// Encodes a configuration.
pub(crate) fn encode_config(c: &ElectionConfig) -> Result<Vec<u8>, ElectionError> {
    encode(
        "configuration",
        &ConfigWire {
            lease_nanos: nanos(c.lease_duration),
            heartbeat_nanos: nanos(c.heartbeat_interval),
            candidate_timeout_nanos: nanos(c.candidate_timeout),
            election_enabled: c.election_enabled,
            allow_preemption: c.allow_preemption,
            max_clock_rate_error_ppm: c.max_clock_rate_error_ppm,
            min_tenure_nanos: nanos(c.min_tenure),
            handover_grace_nanos: nanos(c.handover_grace),
            takeover_stagger_nanos: nanos(c.takeover_stagger),
            transaction_timeout_nanos: nanos(c.transaction_timeout),
        },
    )
}

/// Decodes a configuration stored at `key`, validating it like a freshly built one.
pub(crate) fn decode_config(key: &[u8], bytes: &[u8]) -> Result<ElectionConfig, ElectionError> {
    let w: ConfigWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    ElectionConfig::builder()
        .lease_duration(Duration::from_nanos(w.lease_nanos))
        .heartbeat_interval(Duration::from_nanos(w.heartbeat_nanos))
        .candidate_timeout(Duration::from_nanos(w.candidate_timeout_nanos))
        .election_enabled(w.election_enabled)
        .allow_preemption(w.allow_preemption)
        .max_clock_rate_error_ppm(w.max_clock_rate_error_ppm)
        .min_tenure(Duration::from_nanos(w.min_tenure_nanos))
        .handover_grace(Duration::from_nanos(w.handover_grace_nanos))
        .takeover_stagger(Duration::from_nanos(w.takeover_stagger_nanos))
        .transaction_timeout(Duration::from_nanos(w.transaction_timeout_nanos))
        .build()
        .map_err(|source| ElectionError::InvalidStoredConfig {
            key: printable_key(key),
            source,
        })
}

#[derive(Serialize, Deserialize)]
struct FenceWire {
    ballot: Ballot,
    vacant: bool,
}

/// The fence's format version: the first element of its tuple.
pub const FENCE_FORMAT_VERSION: u8 = 3;

/// The tuple code of a positive integer that fits in one byte (the fence's version).
const TUPLE_ONE_BYTE_INT: u8 = 0x15;

/// Encodes a fence record: the tuple `(3, ballot, vacant)`.
pub(crate) fn encode_fence(f: &FenceRecord) -> Result<Vec<u8>, ElectionError> {
    Ok(foundationdb_tuple::pack(&(
        u16::from(FENCE_FORMAT_VERSION),
        f.ballot.get(),
        f.vacant,
    )))
}

/// Decodes a fence record stored at `key`: the tuple format (version 3), or the bincode format
/// of versions 1 and 2.
pub(crate) fn decode_fence(key: &[u8], bytes: &[u8]) -> Result<FenceRecord, ElectionError> {
    let corrupt = |e| ElectionError::corrupt(key, e);
    let (ballot, vacant) = match bytes {
        [] => return Err(corrupt(DecodeError::Empty)),
        [TUPLE_ONE_BYTE_INT, version, ..] => {
            if *version != FENCE_FORMAT_VERSION {
                return Err(corrupt(DecodeError::UnknownVersion {
                    found: *version,
                    supported: FENCE_FORMAT_VERSION,
                }));
            }
            let (_, ballot, vacant): (u16, u64, bool) = foundationdb_tuple::unpack(bytes)
                .map_err(|e| corrupt(DecodeError::MalformedTuple(e)))?;
            (Ballot::new(ballot), vacant)
        }
        // Versions 1 and 2 (bincode), and anything else: refused by `split_version`.
        _ => {
            let w: FenceWire = decode_body(bytes).map_err(corrupt)?;
            (w.ballot, w.vacant)
        }
    };
    if !vacant && ballot == Ballot::ZERO {
        return Err(corrupt(DecodeError::Impossible("owned fence at ballot 0")));
    }
    Ok(FenceRecord { ballot, vacant })
}

/// The bincode fence of format versions 1 and 2, as older builds wrote it (for tests of
/// rolling upgrades).
#[cfg(test)]
pub(crate) fn encode_fence_v2(f: &FenceRecord) -> Result<Vec<u8>, ElectionError> {
    encode(
        "fence record",
        &FenceWire {
            ballot: f.ballot,
            vacant: f.vacant,
        },
    )
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
mod tests {
    use super::*;
    use crate::config::MAX_DURATION;
    use crate::record::MAX_PAYLOAD_BYTES;

    fn id(s: &str) -> CandidateId {
        CandidateId::parse(s).unwrap_or_else(|_| unreachable!())
    }

    fn owned() -> LeaderRecord {
        LeaderRecord {
            ballot: Ballot::new(7),
            owner: Some(Named::new(id("a"), Priority::new(2))),
            renewal: 41,
            lease: Duration::from_secs(10),
            handover: Some(Party::Candidate(Named::new(id("b"), Priority::new(3)))),
            reservation: None,
            payload: Some(b"10.0.0.1:80".to_vec()),
            writer: Some(AttemptId {
                candidate: id("a"),
                seq: 9,
            }),
        }
    }

    #[test]
    fn records_round_trip() -> Result<(), ElectionError> {
        let r = owned();
        assert_eq!(decode_leader(b"k", &encode_leader(&r)?)?, r);
        let init = LeaderRecord::initial(Duration::from_secs(1));
        assert_eq!(decode_leader(b"k", &encode_leader(&init)?)?, init);
        let c = CandidateRecord {
            priority: Priority::new(-4),
            registration: 3,
            heartbeat: 100,
            seen_renewal: 40,
            metadata: Some(vec![0, 255]),
        };
        assert_eq!(decode_candidate(b"k", &encode_candidate(&c)?)?, c);
        let cfg = ElectionConfig::default();
        assert_eq!(decode_config(b"k", &encode_config(&cfg)?)?, cfg);
        let f = FenceRecord {
            ballot: Ballot::new(3),
            vacant: true,
        };
        assert_eq!(decode_fence(b"k", &encode_fence(&f)?)?, f);
        assert_eq!(decode_counter(b"k", &encode_counter(u64::MAX)?)?, u64::MAX);
        Ok(())
    }

    fn reason(e: ElectionError) -> String {
        match e {
            ElectionError::Corrupt { reason, .. } => format!("{reason:?}"),
            other => format!("not corrupt: {other:?}"),
        }
    }

    #[test]
    fn bad_bytes_are_typed_errors() -> Result<(), ElectionError> {
        let good = encode_leader(&owned())?;
        assert!(
            reason(
                decode_leader(b"k", &[])
                    .err()
                    .unwrap_or(ElectionError::NotInitialized)
            )
            .contains("Empty")
        );
        for version in [0, FORMAT_VERSION + 1, u8::MAX] {
            let mut unknown = good.clone();
            unknown[0] = version;
            let e = decode_leader(b"k", &unknown).err();
            assert!(
                matches!(
                    e,
                    Some(ElectionError::Corrupt {
                        reason: DecodeError::UnknownVersion {
                            found,
                            supported: FORMAT_VERSION
                        },
                        ..
                    }) if found == version
                ),
                "version {version}: {e:?}"
            );
        }
        for cut in 1..good.len() {
            assert!(
                decode_leader(b"k", &good[..cut]).is_err(),
                "truncated at {cut}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            decode_leader(b"k", &long),
            Err(ElectionError::Corrupt {
                reason: DecodeError::TrailingBytes { extra: 1 },
                ..
            })
        ));
        Ok(())
    }

    /// The fence's bytes, pinned: any binding reads them with its tuple layer.
    #[test]
    fn the_fence_is_a_tuple_of_version_ballot_and_vacant_byte_for_byte() -> Result<(), ElectionError>
    {
        let fence = |ballot, vacant| FenceRecord {
            ballot: Ballot::new(ballot),
            vacant,
        };
        // 0x15 NN: a positive integer of one byte; 0x26/0x27: false/true.
        assert_eq!(encode_fence(&fence(5, false))?, [0x15, 3, 0x15, 5, 0x26]);
        assert_eq!(encode_fence(&fence(7, true))?, [0x15, 3, 0x15, 7, 0x27]);
        assert_eq!(encode_fence(&fence(0, true))?, [0x15, 3, 0x14, 0x27]);
        assert_eq!(
            encode_fence(&fence(300, false))?,
            [0x15, 3, 0x16, 0x01, 0x2c, 0x26]
        );
        let mut max = vec![0x15, 3, 0x1c];
        max.extend([0xff; 8]);
        max.push(0x26);
        assert_eq!(encode_fence(&fence(u64::MAX, false))?, max);
        for f in [
            fence(5, false),
            fence(7, true),
            fence(0, true),
            fence(u64::MAX, false),
        ] {
            assert_eq!(decode_fence(b"k", &encode_fence(&f)?)?, f);
        }
        Ok(())
    }

    /// A rolling upgrade: this build reads the fences older builds wrote (versions 1 and 2,
    /// bincode), and an older build's reader refuses a version-3 fence as an unknown version
    /// instead of misreading it.
    #[test]
    fn old_fences_are_read_and_old_readers_refuse_the_new_one() -> Result<(), ElectionError> {
        let f = FenceRecord {
            ballot: Ballot::new(5),
            vacant: false,
        };
        // Exactly what version 2 wrote: the version byte, varint 5, false.
        assert_eq!(encode_fence_v2(&f)?, [2, 5, 0]);
        assert_eq!(decode_fence(b"k", &[2, 5, 0])?, f);
        assert_eq!(decode_fence(b"k", &[1, 5, 0])?, f);
        // The reader of versions 1 and 2 (every value but the fence still decodes this way).
        let new = encode_fence(&f)?;
        assert!(matches!(
            decode_body::<FenceWire>(&new),
            Err(DecodeError::UnknownVersion { found: 0x15, .. })
        ));
        Ok(())
    }

    #[test]
    fn newer_or_malformed_fences_are_typed_errors() {
        let reason = |bytes: &[u8]| match decode_fence(b"k", bytes) {
            Err(ElectionError::Corrupt { reason, .. }) => Some(reason),
            _ => None,
        };
        assert!(matches!(
            reason(&[0x15, 4, 0x15, 5, 0x26]),
            Some(DecodeError::UnknownVersion {
                found: 4,
                supported: 3
            })
        ));
        assert!(matches!(
            reason(&[0x15, 3, 0x15]),
            Some(DecodeError::MalformedTuple(_))
        ));
        assert!(matches!(
            reason(&[0x15, 3, 0x15, 5, 0x26, 0x26]),
            Some(DecodeError::MalformedTuple(_))
        ));
        assert!(matches!(
            reason(&[0x15, 3, 0x02, b'x', 0, 0x26]),
            Some(DecodeError::MalformedTuple(_))
        ));
        assert!(matches!(reason(&[]), Some(DecodeError::Empty)));
        assert!(matches!(
            reason(&[0x15, 3, 0x14, 0x26]),
            Some(DecodeError::Impossible(_))
        ));
    }

    #[test]
    fn impossible_states_are_rejected() -> Result<(), ElectionError> {
        let mut r = owned();
        r.reservation = Some(Party::Candidate(Named::new(id("c"), Priority::new(1))));
        assert!(
            reason(
                decode_leader(b"k", &encode_leader(&r)?)
                    .err()
                    .unwrap_or(ElectionError::NotInitialized)
            )
            .contains("reservation while owned")
        );
        let mut r = owned();
        r.owner = None;
        r.payload = None;
        assert!(
            reason(
                decode_leader(b"k", &encode_leader(&r)?)
                    .err()
                    .unwrap_or(ElectionError::NotInitialized)
            )
            .contains("handover request without owner")
        );
        let mut r = owned();
        r.ballot = Ballot::ZERO;
        assert!(decode_leader(b"k", &encode_leader(&r)?).is_err());
        let mut r = owned();
        r.lease = Duration::ZERO;
        assert!(decode_leader(b"k", &encode_leader(&r)?).is_err());
        let mut r = owned();
        r.payload = Some(vec![0; MAX_PAYLOAD_BYTES + 1]);
        assert!(decode_leader(b"k", &encode_leader(&r)?).is_err());
        let bad_fence = encode_fence(&FenceRecord {
            ballot: Ballot::ZERO,
            vacant: false,
        })?;
        assert!(decode_fence(b"k", &bad_fence).is_err());
        Ok(())
    }

    fn impossible(r: &LeaderRecord) -> String {
        match encode_leader(r).and_then(|bytes| decode_leader(b"k", &bytes)) {
            Ok(_) => "decoded".to_owned(),
            Err(e) => reason(e),
        }
    }

    #[test]
    fn states_the_protocol_never_writes_fail_closed() {
        let mut r = owned();
        r.lease = MAX_DURATION + Duration::from_nanos(1);
        assert!(impossible(&r).contains("lease above"), "{}", impossible(&r));
        let mut r = owned();
        r.handover = Some(Party::Candidate(Named::new(id("a"), Priority::new(9))));
        assert!(impossible(&r).contains("from the owner itself"));
        // An operator may give the owner's id: it is still an operator's request.
        r.handover = Some(Party::Operator(id("a")));
        assert_eq!(impossible(&r), "decoded");
        let mut r = owned();
        r.renewal = 0;
        assert!(impossible(&r).contains("owned record at renewal 0"));
        let mut r = LeaderRecord::initial(Duration::from_secs(1));
        r.renewal = 1;
        r.writer = owned().writer;
        r.reservation = Some(Party::Operator(id("ops")));
        assert!(impossible(&r).contains("reservation at ballot 0"));
        r.ballot = Ballot::new(1);
        assert_eq!(impossible(&r), "decoded");
    }

    #[test]
    fn operator_parties_round_trip_and_are_not_candidates() -> Result<(), ElectionError> {
        let mut r = owned();
        r.handover = Some(Party::Operator(id("ops-1")));
        let back = decode_leader(b"k", &encode_leader(&r)?)?;
        assert_eq!(back, r);
        assert_eq!(back.operator_request(), Some(&id("ops-1")));
        assert_eq!(back.handover_request(), None);
        let mut v = owned();
        v.owner = None;
        v.payload = None;
        v.handover = None;
        v.reservation = Some(Party::Operator(id("b")));
        let back = decode_leader(b"k", &encode_leader(&v)?)?;
        assert_eq!(back.operator_hold(), Some(&id("b")));
        assert_eq!(back.reservation(), None);
        Ok(())
    }

    #[test]
    fn version_1_leader_records_still_decode() -> Result<(), ElectionError> {
        // A version-1 record, as the first format wrote it: requests and reservations are
        // candidates'.
        let v1 = LeaderWireV1 {
            ballot: Ballot::new(3),
            owner: None,
            renewal: 8,
            lease_nanos: 2_000_000_000,
            handover: None,
            reservation: Some(NamedWire {
                id: id("heir"),
                priority: Priority::new(4),
            }),
            payload: None,
            writer: Some(AttemptWire {
                candidate: id("old"),
                seq: 2,
            }),
        };
        let mut bytes = vec![1];
        bincode::serde::encode_into_std_write(&v1, &mut bytes, bincode::config::standard())
            .map_err(|source| ElectionError::Encode {
                what: "test",
                source,
            })?;
        let r = decode_leader(b"k", &bytes)?;
        assert_eq!(
            r.reservation(),
            Some(&Named::new(id("heir"), Priority::new(4)))
        );
        assert_eq!((r.ballot, r.renewal), (Ballot::new(3), 8));
        // Other values keep their body: a version-1 candidate record decodes as well.
        let c = CandidateRecord {
            priority: Priority::new(1),
            registration: 2,
            heartbeat: 3,
            seen_renewal: 4,
            metadata: None,
        };
        let mut old = encode_candidate(&c)?;
        old[0] = 1;
        assert_eq!(decode_candidate(b"k", &old)?, c);
        Ok(())
    }

    #[test]
    fn stored_config_is_validated() -> Result<(), ElectionError> {
        let c = ElectionConfig {
            heartbeat_interval: Duration::from_secs(9),
            ..ElectionConfig::default()
        };
        let bytes = encode_config(&c)?;
        assert!(matches!(
            decode_config(b"k", &bytes),
            Err(ElectionError::InvalidStoredConfig { .. })
        ));
        Ok(())
    }

    #[test]
    fn oversized_values_are_rejected_before_writing() {
        let c = CandidateRecord {
            priority: Priority::new(0),
            registration: 0,
            heartbeat: 0,
            seen_renewal: 0,
            metadata: Some(vec![1; MAX_VALUE_BYTES]),
        };
        assert!(matches!(
            encode_candidate(&c),
            Err(ElectionError::TooLarge { .. })
        ));
    }
}
