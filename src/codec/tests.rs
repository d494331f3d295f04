//! The codec's round trips, the formats older builds wrote, and what decoding refuses.

use super::fence::{FenceWire, encode_fence_v2};
use super::*;
use crate::config::{ElectionConfig, MAX_DURATION};
use crate::record::{FenceRecord, MAX_PAYLOAD_BYTES};

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
        handover_to: None,
        leader_version: None,
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
        eligibility: Eligibility::Eligible,
        version: None,
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
fn the_fence_is_a_tuple_of_version_ballot_and_vacant_byte_for_byte() -> Result<(), ElectionError> {
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
    bincode::serde::encode_into_std_write(&v1, &mut bytes, bincode::config::standard()).map_err(
        |source| ElectionError::Encode {
            what: "test",
            source,
        },
    )?;
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
        eligibility: Eligibility::Eligible,
        version: None,
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
        eligibility: Eligibility::Eligible,
        version: None,
    };
    assert!(matches!(
        encode_candidate(&c),
        Err(ElectionError::TooLarge { .. })
    ));
}
