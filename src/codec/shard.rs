//! The sharded election's values (DESIGN §12): members, shards, inboxes, the layout. Same
//! framing as every other value: the format version byte, then a bincode 2 body.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{AttemptWire, attempt, attempt_wire, decode_body, encode, nanos};
use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::shard::{
    EpochMark, Inbox, Layout, MAX_SHARDS, MemberRecord, ShardOwner, ShardRecord,
};

#[derive(Serialize, Deserialize)]
struct MemberWire {
    epoch: u64,
    renewal: u64,
    lease_nanos: u64,
    priority: Priority,
    weight: Weight,
    fenced: bool,
    writer: Option<AttemptWire>,
}

/// Encodes a member record.
pub(crate) fn encode_member(r: &MemberRecord) -> Result<Vec<u8>, ElectionError> {
    encode(
        "member record",
        &MemberWire {
            epoch: r.epoch,
            renewal: r.renewal,
            lease_nanos: nanos(r.lease),
            priority: r.priority,
            weight: r.weight,
            fenced: r.fenced,
            writer: r.writer.as_ref().map(attempt_wire),
        },
    )
}

/// Decodes the member record stored at `key`.
pub(crate) fn decode_member(key: &[u8], bytes: &[u8]) -> Result<MemberRecord, ElectionError> {
    let w: MemberWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    let r = MemberRecord {
        epoch: w.epoch,
        renewal: w.renewal,
        lease: Duration::from_nanos(w.lease_nanos),
        priority: w.priority,
        weight: w.weight,
        fenced: w.fenced,
        writer: w.writer.map(attempt),
    };
    r.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(r)
}

#[derive(Serialize, Deserialize)]
struct EpochMarkWire {
    epoch: u64,
    fenced: bool,
}

/// Encodes a member's epoch mark.
pub(crate) fn encode_epoch_mark(m: &EpochMark) -> Result<Vec<u8>, ElectionError> {
    encode(
        "member epoch mark",
        &EpochMarkWire {
            epoch: m.epoch,
            fenced: m.fenced,
        },
    )
}

/// Decodes the epoch mark stored at `key`.
pub(crate) fn decode_epoch_mark(key: &[u8], bytes: &[u8]) -> Result<EpochMark, ElectionError> {
    let w: EpochMarkWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    if w.epoch == 0 {
        return Err(ElectionError::corrupt(
            key,
            DecodeError::Impossible("member epoch mark at epoch 0"),
        ));
    }
    Ok(EpochMark {
        epoch: w.epoch,
        fenced: w.fenced,
    })
}

#[derive(Serialize, Deserialize)]
struct ShardWire {
    ballot: Ballot,
    owner: Option<(CandidateId, u64)>,
    move_to: Option<CandidateId>,
    reserved_for: Option<CandidateId>,
    writer: Option<AttemptWire>,
}

/// Encodes a shard record.
pub(crate) fn encode_shard(r: &ShardRecord) -> Result<Vec<u8>, ElectionError> {
    encode(
        "shard record",
        &ShardWire {
            ballot: r.ballot,
            owner: r.owner.as_ref().map(|o| (o.member.clone(), o.epoch)),
            move_to: r.move_to.clone(),
            reserved_for: r.reserved_for.clone(),
            writer: r.writer.as_ref().map(attempt_wire),
        },
    )
}

/// Decodes the shard record stored at `key`.
pub(crate) fn decode_shard(key: &[u8], bytes: &[u8]) -> Result<ShardRecord, ElectionError> {
    let w: ShardWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    let r = ShardRecord {
        ballot: w.ballot,
        owner: w.owner.map(|(member, epoch)| ShardOwner { member, epoch }),
        move_to: w.move_to,
        reserved_for: w.reserved_for,
        writer: w.writer.map(attempt),
    };
    let ids_ok = r.owner.as_ref().is_none_or(|o| o.member.is_valid())
        && r.move_to.as_ref().is_none_or(CandidateId::is_valid)
        && r.reserved_for.as_ref().is_none_or(CandidateId::is_valid);
    if !ids_ok {
        return Err(ElectionError::corrupt(
            key,
            DecodeError::Impossible("invalid member id in a shard record"),
        ));
    }
    r.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(r)
}

#[derive(Serialize, Deserialize)]
struct InboxWire {
    seq: u64,
    reserved: Vec<ShardId>,
    hand_over: Vec<(ShardId, CandidateId)>,
}

/// Encodes an inbox.
pub(crate) fn encode_inbox(i: &Inbox) -> Result<Vec<u8>, ElectionError> {
    encode(
        "member inbox",
        &InboxWire {
            seq: i.seq,
            reserved: i.reserved.clone(),
            hand_over: i.hand_over.clone(),
        },
    )
}

/// Decodes the inbox stored at `key`: strict like the records (DESIGN §6), so a member never
/// acts on a request it could not have been sent -- a target that is no valid member id, a
/// shard number no layout has -- nor writes a record the library cannot read back.
pub(crate) fn decode_inbox(key: &[u8], bytes: &[u8]) -> Result<Inbox, ElectionError> {
    let w: InboxWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    let impossible = |why| Err(ElectionError::corrupt(key, DecodeError::Impossible(why)));
    if !w.hand_over.iter().all(|(_, to)| to.is_valid()) {
        return impossible("invalid member id in an inbox");
    }
    let shards = w.reserved.iter().chain(w.hand_over.iter().map(|(s, _)| s));
    if shards.into_iter().any(|s| s.get() >= MAX_SHARDS) {
        return impossible("shard number beyond MAX_SHARDS in an inbox");
    }
    Ok(Inbox {
        seq: w.seq,
        reserved: w.reserved,
        hand_over: w.hand_over,
    })
}

#[derive(Serialize, Deserialize)]
struct LayoutWire {
    shards: u32,
    max_concurrent_moves: u32,
    frozen: bool,
}

/// Encodes the layout.
pub(crate) fn encode_layout(l: &Layout) -> Result<Vec<u8>, ElectionError> {
    encode(
        "shard layout",
        &LayoutWire {
            shards: l.shards,
            max_concurrent_moves: l.max_concurrent_moves,
            frozen: l.frozen,
        },
    )
}

/// Decodes the layout stored at `key`.
pub(crate) fn decode_layout(key: &[u8], bytes: &[u8]) -> Result<Layout, ElectionError> {
    let w: LayoutWire = decode_body(bytes).map_err(|e| ElectionError::corrupt(key, e))?;
    let l = Layout {
        shards: w.shards,
        max_concurrent_moves: w.max_concurrent_moves,
        frozen: w.frozen,
    };
    l.check()
        .map_err(|why| ElectionError::corrupt(key, DecodeError::Impossible(why)))?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::AttemptId;

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
        };
        assert_eq!(decode_member(b"k", &encode_member(&member)?)?, member);
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
}
