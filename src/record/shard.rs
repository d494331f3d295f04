//! The durable records of a sharded election (docs/design.md §12), as validated values: a member's
//! lease, a shard's owner and ballot, a member's inbox, and the layout. Only the codec turns
//! them into bytes; every value here passed the same checks whether built or decoded.

use std::time::Duration;

use crate::config::MAX_DURATION;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::{AttemptId, Eligibility};

/// The most shards a sharded election may have: 65,536, the largest count proven on
/// FoundationDB. The coordinator reads every shard record at each attempt, and a lone member
/// takes every shard: at this count both stay well within FoundationDB's limits (every value
/// under 100,000 bytes, every transaction under 10,000,000), which the test suite checks on
/// MemDb (which enforces them) and on a FoundationDB cluster.
pub const MAX_SHARDS: u32 = 1 << 16;

/// A member's record: its lease, which covers every shard it owns (one renewal per heartbeat,
/// whatever the number of shards), and the epoch its ownerships are tied to.
///
/// `(epoch, renewal)` is its observation identity: it changes on every renewal and on a
/// takeover, and never repeats. A member is fenced out (`fenced`) by a takeover, which bumps
/// the epoch in the same commit: every shard it owned under the old epoch is then nobody's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemberRecord {
    pub(crate) epoch: u64,
    pub(crate) renewal: u64,
    pub(crate) lease: Duration,
    pub(crate) priority: Priority,
    pub(crate) weight: Weight,
    pub(crate) fenced: bool,
    pub(crate) writer: Option<AttemptId>,
    /// Whether it may own shards (docs/design.md §13.8): an ineligible member counts with weight 0,
    /// so its shards move away cooperatively (records written before this field read as
    /// eligible).
    pub(crate) eligibility: Eligibility,
}

impl MemberRecord {
    /// The epoch its shard ownerships are tied to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The renewal counter.
    pub fn renewal(&self) -> u64 {
        self.renewal
    }

    /// The lease the member renewed with; a member whose record is unchanged for this long
    /// (on the observer's clock) is taken over.
    pub fn lease_duration(&self) -> Duration {
        self.lease
    }

    /// Its priority (the larger shares go to higher priorities).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Its weight (0: drained).
    pub fn weight(&self) -> Weight {
        self.weight
    }

    /// Whether a takeover fenced it out: it owns nothing until it joins again (a new epoch).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// Whether it may own shards, as it last renewed: an ineligible member is placed as if
    /// drained (its shards move away at the move limit; it keeps them while nobody else may
    /// take them).
    pub fn eligibility(&self) -> &Eligibility {
        &self.eligibility
    }

    /// The attempt that last wrote it.
    pub fn writer(&self) -> Option<&AttemptId> {
        self.writer.as_ref()
    }

    /// The protocol's invariants; `Err` names the first one broken.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self.lease.is_zero() || self.lease > MAX_DURATION {
            return Err("member lease out of range");
        }
        if self.epoch == 0 {
            return Err("member at epoch 0");
        }
        if !self.fenced && self.writer.is_none() {
            return Err("live member record without its writer");
        }
        self.eligibility.check()
    }
}

/// A member's epoch mark: the epoch of its record and whether that epoch has ended, kept under
/// a key of its own and written only when they change (a join, a fencing, a leave), never by a
/// renewal. Fencing a shard's write reads it, so the write conflicts with the end of its
/// owner's epoch and never with the owner's heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpochMark {
    pub(crate) epoch: u64,
    pub(crate) fenced: bool,
}

impl EpochMark {
    /// The mark of `record`.
    pub(crate) fn of(record: &MemberRecord) -> Self {
        EpochMark {
            epoch: record.epoch,
            fenced: record.fenced,
        }
    }

    /// Whether an ownership at `epoch` still lives under this mark.
    pub(crate) fn lives(&self, epoch: u64) -> bool {
        !self.fenced && self.epoch == epoch
    }
}

/// The owner of a shard: a member, at the epoch it acquired the shard in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardOwner {
    pub(crate) member: CandidateId,
    pub(crate) epoch: u64,
}

impl ShardOwner {
    /// The member.
    pub fn member(&self) -> &CandidateId {
        &self.member
    }

    /// The member's epoch when it acquired the shard: the ownership ends when that epoch does.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// A shard's record: its ballot (the fencing token of its owner), its owner, and a move
/// request or a reservation. The ballot grows by one on every change of owner, and never
/// otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardRecord {
    pub(crate) ballot: Ballot,
    pub(crate) owner: Option<ShardOwner>,
    /// While owned: the member the coordinator asked the owner to hand the shard over to.
    pub(crate) move_to: Option<CandidateId>,
    /// While vacant: the member that is to acquire it.
    pub(crate) reserved_for: Option<CandidateId>,
    pub(crate) writer: Option<AttemptId>,
}

impl ShardRecord {
    /// A shard that never had an owner.
    pub(crate) fn initial() -> Self {
        ShardRecord {
            ballot: Ballot::ZERO,
            owner: None,
            move_to: None,
            reserved_for: None,
            writer: None,
        }
    }

    /// The shard's ballot: its owner's fencing token (or the last owner's, while vacant).
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// Its owner, if any (an owner whose epoch has ended owns nothing any more; see
    /// [`MemberRecord::is_fenced`]).
    pub fn owner(&self) -> Option<&ShardOwner> {
        self.owner.as_ref()
    }

    /// The member its owner was asked to hand it over to.
    pub fn move_to(&self) -> Option<&CandidateId> {
        self.move_to.as_ref()
    }

    /// The member it is reserved for, while vacant.
    pub fn reserved_for(&self) -> Option<&CandidateId> {
        self.reserved_for.as_ref()
    }

    /// The protocol's invariants; `Err` names the first one broken.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        match (&self.owner, &self.move_to, &self.reserved_for) {
            (Some(_), _, Some(_)) => Err("owned shard with a reservation"),
            (None, Some(_), _) => Err("vacant shard with a move request"),
            (Some(o), _, _) if o.epoch == 0 => Err("shard owned at epoch 0"),
            (Some(_), _, _) if self.ballot == Ballot::ZERO => Err("shard owned at ballot 0"),
            _ => Ok(()),
        }
    }
}

/// What the coordinator asks of one member, read by that member at every heartbeat (one key,
/// whatever the number of shards): shards reserved for it to acquire, and its shards to hand
/// over. `seq` changes with every change, so a watch on the key wakes the member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Inbox {
    pub(crate) seq: u64,
    pub(crate) reserved: Vec<ShardId>,
    pub(crate) hand_over: Vec<(ShardId, CandidateId)>,
}

impl Inbox {
    /// The change counter.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Shards reserved for this member.
    pub fn reserved(&self) -> &[ShardId] {
        &self.reserved
    }

    /// This member's shards to hand over, and to whom.
    pub fn hand_over(&self) -> &[(ShardId, CandidateId)] {
        &self.hand_over
    }

    /// Whether nothing is asked.
    pub fn is_empty(&self) -> bool {
        self.reserved.is_empty() && self.hand_over.is_empty()
    }
}

/// The sharded election's layout: how many shards, the move limit, and whether placement is
/// frozen by an operator (no moves; shards nobody live holds are still reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub(crate) shards: u32,
    pub(crate) max_concurrent_moves: u32,
    pub(crate) frozen: bool,
}

impl Layout {
    /// A layout of `shards` shards and at most `max_concurrent_moves` moves in flight.
    ///
    /// # Errors
    ///
    /// [`ElectionError::InvalidLayout`](crate::ElectionError::InvalidLayout) for zero shards,
    /// more than [`MAX_SHARDS`], or a move limit of zero.
    pub fn new(shards: u32, max_concurrent_moves: u32) -> Result<Self, ElectionError> {
        let layout = Layout {
            shards,
            max_concurrent_moves,
            frozen: false,
        };
        layout
            .check()
            .map_err(|reason| ElectionError::InvalidLayout { reason })?;
        Ok(layout)
    }

    /// How many shards.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The most cooperative moves in flight at once.
    pub fn max_concurrent_moves(&self) -> u32 {
        self.max_concurrent_moves
    }

    /// Whether an operator froze placement.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self.shards == 0 {
            return Err("a sharded election needs at least one shard");
        }
        if self.shards > MAX_SHARDS {
            return Err("more shards than MAX_SHARDS");
        }
        if self.max_concurrent_moves == 0 {
            return Err("max_concurrent_moves must be at least 1");
        }
        Ok(())
    }
}
