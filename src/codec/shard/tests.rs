use super::*;
use crate::record::AttemptId;
use proptest::prelude::*;

fn any_id() -> impl Strategy<Value = CandidateId> {
    prop_oneof![
        "[a-z]{1,12}",
        "[\\x00-\\x7f]{1,40}",
        Just("x".repeat(crate::ids::MAX_CANDIDATE_ID_BYTES)),
    ]
    .prop_map(|s| CandidateId::parse(&s).unwrap_or_else(|_| unreachable!()))
}

fn any_shard() -> impl Strategy<Value = ShardId> {
    prop_oneof![0u32..251, 251u32..70_000, any::<u32>()].prop_map(ShardId::new)
}

proptest! {
    // The lengths a transaction's budget is charged are the encoder's, byte for byte.
    #[test]
    fn lengths_are_exactly_what_the_encoder_writes(
        ballot in any::<u64>(),
        owner in proptest::option::of((any_id(), any::<u64>())),
        move_to in proptest::option::of(any_id()),
        reserved_for in proptest::option::of(any_id()),
        writer in proptest::option::of((any_id(), any::<u64>())),
        seq in any::<u64>(),
        reserved in proptest::collection::vec(any_shard(), 0..300),
        hand_over in proptest::collection::vec((any_shard(), any_id()), 0..30),
        epoch in 1u64..,
        priority in any::<i32>(),
        weight in any::<u32>(),
        lease_ms in 1u64..1_000_000,
    ) {
        let shard = ShardRecord {
            ballot: Ballot::new(ballot),
            owner: owner.map(|(member, epoch)| ShardOwner { member, epoch }),
            move_to,
            reserved_for,
            writer: writer.clone().map(|(candidate, seq)| AttemptId { candidate, seq }),
        };
        prop_assert_eq!(shard_len(&shard), encode_shard(&shard)?.len());
        let inbox = Inbox { seq, reserved, hand_over };
        prop_assert_eq!(inbox_len(&inbox), encode_inbox(&inbox)?.len());
        let member = MemberRecord {
            epoch,
            renewal: seq,
            lease: Duration::from_millis(lease_ms),
            priority: Priority::new(priority),
            weight: Weight::new(weight),
            fenced: writer.is_none(),
            writer: writer.map(|(candidate, seq)| AttemptId { candidate, seq }),
            eligibility: if priority % 2 == 0 {
                Eligibility::Eligible
            } else {
                Eligibility::Ineligible { reason: "sick".repeat(usize::try_from(weight % 60).unwrap_or(0)) }
            },
        };
        prop_assert_eq!(member_len(&member), encode_member(&member)?.len());
        let mark = EpochMark { epoch, fenced: true };
        prop_assert!(encode_epoch_mark(&mark)?.len() <= EPOCH_MARK_MAX);
    }
}

#[test]
fn every_inbox_the_encoder_writes_the_decoder_reads() -> Result<(), ElectionError> {
    // 30,000 shard numbers (3 bytes each): 90,000 bytes written. The decoder once
    // counted the memory they take (4 bytes a shard) against the value limit and refused
    // its own encoder's output.
    let big = Inbox {
        seq: 1,
        reserved: (0..30_000).map(|s| ShardId::new(s + 300)).collect(),
        hand_over: vec![],
    };
    let bytes = encode_inbox(&big)?;
    assert!(bytes.len() > 89_000, "{}", bytes.len());
    assert_eq!(decode_inbox(b"k", &bytes).ok(), Some(big.clone()));
    // The densest: one-byte shard numbers and one-byte ids fill the limit exactly.
    let dense = Inbox {
        seq: 0,
        reserved: vec![ShardId::new(1); 49_990],
        hand_over: vec![(ShardId::new(2), id("t")); 16_000],
    };
    let bytes = encode_inbox(&dense)?;
    assert!(bytes.len() > 97_000 && bytes.len() <= crate::MAX_VALUE_BYTES);
    assert_eq!(decode_inbox(b"k", &bytes).ok(), Some(dense));
    // Past the limit: refused by both, as too large.
    let over = Inbox {
        seq: 0,
        reserved: vec![ShardId::new(1); crate::MAX_VALUE_BYTES],
        hand_over: vec![],
    };
    assert!(matches!(
        encode_inbox(&over),
        Err(ElectionError::TooLarge { .. })
    ));
    let mut raw = encode_inbox(&big)?;
    raw.resize(crate::MAX_VALUE_BYTES + 1, 0);
    assert!(matches!(
        decode_inbox(b"k", &raw),
        Err(ElectionError::Corrupt {
            reason: DecodeError::TooLarge { .. },
            ..
        })
    ));
    Ok(())
}

fn id(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap_or_else(|_| unreachable!())
}

#[test]
fn shard_values_round_trip_and_impossible_states_fail_closed() -> Result<(), ElectionError> {
    let writer = Some(AttemptId {
        candidate: id("m"),
        seq: 3,
    });
    let member = MemberRecord {
        epoch: 2,
        renewal: 7,
        lease: Duration::from_secs(3),
        priority: Priority::new(1),
        weight: Weight::new(2),
        fenced: false,
        writer: writer.clone(),
        eligibility: Eligibility::Eligible,
    };
    assert_eq!(decode_member(b"k", &encode_member(&member)?)?, member);
    let sick = MemberRecord {
        eligibility: Eligibility::ineligible("disk full")?,
        ..member.clone()
    };
    let bytes = encode_member(&sick)?;
    assert_eq!(
        bytes.first(),
        Some(&3),
        "an ineligible member needs format 3"
    );
    assert_eq!(decode_member(b"k", &bytes)?, sick);
    let owned = ShardRecord {
        ballot: Ballot::new(4),
        owner: Some(ShardOwner {
            member: id("m"),
            epoch: 2,
        }),
        move_to: Some(id("n")),
        reserved_for: None,
        writer,
    };
    assert_eq!(decode_shard(b"k", &encode_shard(&owned)?)?, owned);
    let inbox = Inbox {
        seq: 9,
        reserved: vec![ShardId::new(1), ShardId::new(5)],
        hand_over: vec![(ShardId::new(2), id("n"))],
    };
    assert_eq!(decode_inbox(b"k", &encode_inbox(&inbox)?)?, inbox);
    // An inbox naming an impossible target or shard fails closed.
    #[derive(Serialize)]
    struct Raw {
        seq: u64,
        reserved: Vec<u32>,
        hand_over: Vec<(u32, String)>,
    }
    let raw = |reserved: Vec<u32>, to: String| Raw {
        seq: 1,
        reserved,
        hand_over: vec![(0, to)],
    };
    for wire in [
        raw(vec![], String::new()),
        raw(vec![], "x".repeat(crate::ids::MAX_CANDIDATE_ID_BYTES + 1)),
        raw(vec![MAX_SHARDS], "ok".to_owned()),
    ] {
        let bytes = encode("member inbox", &wire)?;
        assert!(matches!(
            decode_inbox(b"k", &bytes),
            Err(ElectionError::Corrupt {
                reason: DecodeError::Impossible(_),
                ..
            })
        ));
    }
    let layout = Layout::new(64, 8)?;
    assert_eq!(decode_layout(b"k", &encode_layout(&layout)?)?, layout);
    let mark = EpochMark {
        epoch: 3,
        fenced: true,
    };
    assert_eq!(decode_epoch_mark(b"k", &encode_epoch_mark(&mark)?)?, mark);
    assert!(matches!(
        decode_epoch_mark(b"k", &encode_epoch_mark(&EpochMark { epoch: 0, ..mark })?),
        Err(ElectionError::Corrupt {
            reason: DecodeError::Impossible(_),
            ..
        })
    ));
    assert!(decode_epoch_mark(b"k", &[9, 1]).is_err());

    let impossible = [
        encode_shard(&ShardRecord {
            reserved_for: Some(id("x")),
            ..owned.clone()
        })?,
        encode_shard(&ShardRecord {
            owner: None,
            move_to: Some(id("n")),
            reserved_for: None,
            ..owned.clone()
        })?,
        encode_shard(&ShardRecord {
            ballot: Ballot::ZERO,
            move_to: None,
            ..owned.clone()
        })?,
        encode_member(&MemberRecord {
            epoch: 0,
            ..member.clone()
        })?,
        encode_layout(&Layout {
            shards: 0,
            max_concurrent_moves: 1,
            frozen: false,
        })?,
    ];
    for (i, bytes) in impossible.iter().enumerate() {
        let decoded = match i {
            0..=2 => decode_shard(b"k", bytes).map(drop),
            3 => decode_member(b"k", bytes).map(drop),
            _ => decode_layout(b"k", bytes).map(drop),
        };
        assert!(
            matches!(
                decoded,
                Err(ElectionError::Corrupt {
                    reason: DecodeError::Impossible(_),
                    ..
                })
            ),
            "case {i}: {decoded:?}"
        );
    }
    let mut long = encode_member(&member)?;
    long.push(0);
    assert!(decode_member(b"k", &long).is_err());
    assert!(decode_member(b"k", &[9, 1, 2]).is_err());
    Ok(())
}
