//! The sharded election's values (docs/design.md §12): members, shards, inboxes, the layout. Same
//! framing as every other value: the format version byte, then a bincode 2 body.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    AttemptWire, attempt, attempt_wire, decode_body, decode_wire, encode, encode_at, nanos,
    split_version,
};
use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::Eligibility;
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

/// A member record, format version 3: version 2's, and why it may not own shards, if not.
#[derive(Serialize, Deserialize)]
struct MemberWireV3 {
    base: MemberWire,
    ineligible: Option<String>,
}

/// Encodes a member record: version 2's body while it is eligible, version 3's when not (a
/// build of the previous version refuses it rather than place shards on it).
pub(crate) fn encode_member(r: &MemberRecord) -> Result<Vec<u8>, ElectionError> {
    let base = MemberWire {
        epoch: r.epoch,
        renewal: r.renewal,
        lease_nanos: nanos(r.lease),
        priority: r.priority,
        weight: r.weight,
        fenced: r.fenced,
        writer: r.writer.as_ref().map(attempt_wire),
    };
    match r.eligibility.reason() {
        None => encode("member record", &base),
        Some(reason) => encode_at(
            "member record",
            3,
            &MemberWireV3 {
                base,
                ineligible: Some(reason.to_owned()),
            },
        ),
    }
}

/// Decodes the member record stored at `key`.
pub(crate) fn decode_member(key: &[u8], bytes: &[u8]) -> Result<MemberRecord, ElectionError> {
    let (w, ineligible) = split_version(bytes)
        .and_then(|(version, body)| match version {
            1 | 2 => decode_wire::<MemberWire>(body).map(|w| (w, None)),
            _ => decode_wire::<MemberWireV3>(body).map(|w| (w.base, w.ineligible)),
        })
        .map_err(|e| ElectionError::corrupt(key, e))?;
    let r = MemberRecord {
        epoch: w.epoch,
        renewal: w.renewal,
        lease: Duration::from_nanos(w.lease_nanos),
        priority: w.priority,
        weight: w.weight,
        fenced: w.fenced,
        writer: w.writer.map(attempt),
        eligibility: match ineligible {
            None => Eligibility::Eligible,
            Some(reason) => Eligibility::Ineligible { reason },
        },
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

/// Decodes the inbox stored at `key`: strict like the records (docs/design.md §6), so a member never
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

/// How many bytes bincode's variable-length encoding of `v` takes (standard configuration):
/// one below 251, then a marker byte and 2, 4 or 8 bytes.
fn varint_len(v: u64) -> usize {
    match v {
        0..=250 => 1,
        251..=0xFFFF => 3,
        0x1_0000..=0xFFFF_FFFF => 5,
        _ => 9,
    }
}

fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The encoded length of an id: its length, then its bytes.
fn id_len(id: &CandidateId) -> usize {
    let n = id.as_str().len();
    varint_len(len_u64(n)).saturating_add(n)
}

/// The encoded length of an optional value: a tag byte, then the value.
fn option_len<T>(v: Option<T>, len: impl FnOnce(T) -> usize) -> usize {
    1usize.saturating_add(v.map_or(0, len))
}

/// Exactly how many bytes [`encode_shard`] writes for `r` (the format version included),
/// without encoding it: what a transaction's budget is charged for writing it.
pub(crate) fn shard_len(r: &ShardRecord) -> usize {
    [
        1,
        varint_len(r.ballot.get()),
        option_len(r.owner.as_ref(), |o| {
            id_len(&o.member).saturating_add(varint_len(o.epoch))
        }),
        option_len(r.move_to.as_ref(), id_len),
        option_len(r.reserved_for.as_ref(), id_len),
        option_len(r.writer.as_ref(), |w| {
            id_len(&w.candidate).saturating_add(varint_len(w.seq))
        }),
    ]
    .into_iter()
    .fold(0usize, usize::saturating_add)
}

/// Exactly how many bytes [`encode_member`] writes for `r` (the format version included).
pub(crate) fn member_len(r: &MemberRecord) -> usize {
    // The priority is signed: zigzag-encoded before its variable length.
    let p = i64::from(r.priority.get());
    let zigzag = u64::try_from(p).map_or_else(
        |_| p.unsigned_abs().saturating_mul(2).saturating_sub(1),
        |v| v.saturating_mul(2),
    );
    [
        1,
        varint_len(r.epoch),
        varint_len(r.renewal),
        varint_len(nanos(r.lease)),
        varint_len(zigzag),
        varint_len(u64::from(r.weight.get())),
        1,
        option_len(r.writer.as_ref(), |w| {
            id_len(&w.candidate).saturating_add(varint_len(w.seq))
        }),
        // Version 3: the reason, as an option after the base.
        r.eligibility.reason().map_or(0, |reason| {
            let n = reason.len();
            1usize
                .saturating_add(varint_len(len_u64(n)))
                .saturating_add(n)
        }),
    ]
    .into_iter()
    .fold(0usize, usize::saturating_add)
}

/// The most bytes [`encode_epoch_mark`] writes: the version, an epoch, a flag.
pub(crate) const EPOCH_MARK_MAX: usize = 11;

/// The encoded length of one reservation in an inbox.
pub(crate) fn reserved_entry_len(shard: ShardId) -> usize {
    varint_len(u64::from(shard.get()))
}

/// The encoded length of one request to hand a shard over, in an inbox.
pub(crate) fn hand_over_entry_len(shard: ShardId, to: &CandidateId) -> usize {
    reserved_entry_len(shard).saturating_add(id_len(to))
}

/// The most the two length prefixes of an inbox's lists can grow by as entries are added:
/// each from one byte to nine. Added once to an inbox's length when entries are counted
/// one by one ([`reserved_entry_len`], [`hand_over_entry_len`]) rather than re-measured.
pub(crate) const INBOX_PREFIX_GROWTH: usize = 16;

/// Exactly how many bytes [`encode_inbox`] writes for `i` (the format version included).
pub(crate) fn inbox_len(i: &Inbox) -> usize {
    let reserved = i
        .reserved
        .iter()
        .map(|s| reserved_entry_len(*s))
        .fold(varint_len(len_u64(i.reserved.len())), usize::saturating_add);
    let hand_over = i
        .hand_over
        .iter()
        .map(|(s, to)| hand_over_entry_len(*s, to))
        .fold(
            varint_len(len_u64(i.hand_over.len())),
            usize::saturating_add,
        );
    [1, varint_len(i.seq), reserved, hand_over]
        .into_iter()
        .fold(0usize, usize::saturating_add)
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
mod tests;
