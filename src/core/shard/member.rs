//! A member's decisions (docs/design.md §12.1, §12.2, §12.4): renew its one lease, join (or join again
//! at a new epoch), acquire the shards reserved for it, hand over the shards it was asked to
//! once their work has stopped. Pure: the records read, the local state and two clock readings
//! in; what to write and what to adopt after the commit out.
//!
//! The single election's asymmetry holds per shard: ownership is **lost early** (a handed-over
//! shard is dropped from the local state before the commit; a lapsed lease or an ended epoch
//! drops every shard at once) and **gained late** (an acquisition is adopted only after its
//! commit is confirmed, or recognised by this member's attempt id in its own record, dated
//! from that attempt's start).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::clock::LocalInstant;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, ShardId};
use crate::record::AttemptId;

pub(crate) use super::member_cycle::lookups::MemberLookups;
pub(crate) use super::member_cycle::{MemberDecision, MemberInput, decide_member};

/// How many unconfirmed attempts a member remembers (as a candidate does).
const MAX_PENDING: usize = 16;

/// How many shards one member cycle acquires at most (the rest, at the next cycles): bounds
/// the transaction's size whatever the number of shards.
pub(crate) const ACQUIRE_PER_CYCLE: usize = 512;

/// A member's lease, dated on its own clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemberLease {
    pub(crate) epoch: u64,
    pub(crate) renewal: u64,
    /// Attempt start + lease × (1 − ρ)/(1 + ρ).
    pub(crate) valid_until: LocalInstant,
}

/// A member attempt whose commit is not (yet) confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingMember {
    pub(crate) adoption: MemberAdoption,
    /// The read version of the attempt's transaction, when the store reports one.
    pub(crate) read_version: Option<u64>,
}

/// What a member adopts once its cycle's commit is confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberAdoption {
    pub(crate) seq: u64,
    pub(crate) started_at: LocalInstant,
    pub(crate) lease: MemberLease,
    /// The shards this attempt acquired, with their new ballots.
    pub(crate) acquired: Vec<(ShardId, Ballot)>,
    /// The shards this attempt released (handed over, or written vacant again).
    pub(crate) released: Vec<ShardId>,
}

/// Everything one member incarnation knows locally.
#[derive(Clone, Debug)]
pub(crate) struct MemberState {
    pub(crate) id: CandidateId,
    /// Its lease, while it believes in one.
    pub(crate) lease: Option<MemberLease>,
    /// The epoch it last joined at (kept when the lease lapses: the next join bumps it).
    pub(crate) epoch: Option<u64>,
    /// The shards it owns (under `lease`), with their ballots.
    pub(crate) owned: BTreeMap<ShardId, Ballot>,
    /// Shards it handed over (dropped from `owned` before the commit) whose release is not
    /// confirmed, with their ballots: written again while their records name it.
    pub(crate) unreleased: BTreeMap<ShardId, Ballot>,
    /// The shards a leave gives back beyond those owned now: those of a leave begun and not
    /// known to have landed, kept across the leave's retries (a retried leave owns nothing
    /// locally any more, yet must vacate what the first try would have), and those a lapsed
    /// lease left in the records at an epoch not known to have ended; until a leave reads its
    /// epoch already ended or a cycle is adopted again (the member joined anew).
    pub(crate) leaving: BTreeSet<ShardId>,
    pending: VecDeque<PendingMember>,
    next_seq: u64,
    /// A cycle of this member whose transaction has not ended.
    pub(crate) cycle_open: bool,
}

impl MemberState {
    pub(crate) fn new(id: CandidateId) -> Self {
        MemberState {
            id,
            lease: None,
            epoch: None,
            owned: BTreeMap::new(),
            unreleased: BTreeMap::new(),
            leaving: BTreeSet::new(),
            pending: VecDeque::new(),
            next_seq: 1,
            cycle_open: false,
        }
    }

    /// The shards this member owns at `now`, with their fencing tokens: none once its lease
    /// has ended. (A copy, O(M): [`owned_ref_at`](Self::owned_ref_at) or
    /// [`token_at`](Self::token_at) look without copying.)
    pub(crate) fn owned_at(&self, now: LocalInstant) -> BTreeMap<ShardId, Ballot> {
        self.owned_ref_at(now).cloned().unwrap_or_default()
    }

    /// The shards this member owns at `now`, without copying them: `None` once its lease has
    /// ended (the one rule of a belief's end, which [`owned_at`](Self::owned_at) and
    /// [`token_at`](Self::token_at) read through).
    pub(crate) fn owned_ref_at(&self, now: LocalInstant) -> Option<&BTreeMap<ShardId, Ballot>> {
        self.lease
            .filter(|l| now < l.valid_until)
            .map(|_| &self.owned)
    }

    /// The fencing token of `shard` if this member owns it at `now`: O(log M).
    pub(crate) fn token_at(&self, shard: ShardId, now: LocalInstant) -> Option<Ballot> {
        self.owned_ref_at(now)?.get(&shard).copied()
    }

    /// Keeps what the records may still tie to this member at its epoch (the shards it owns,
    /// its releases not confirmed) to give back at a leave, before the local state forgets it.
    pub(crate) fn keep_to_give_back(&mut self) {
        self.leaving
            .extend(self.owned.keys().chain(self.unreleased.keys()).copied());
    }

    /// Loses every shard and the lease (an ended epoch, a lapsed lease, leaving). Releases
    /// not confirmed are forgotten too: what the records still give this member is tied to an
    /// epoch that has ended (or ends at its next join), so nobody's.
    pub(crate) fn lose_all(&mut self) {
        self.lease = None;
        self.owned.clear();
        self.unreleased.clear();
    }

    /// Caps the belief held now (if any) at `valid_until`, the end the lease this member is
    /// about to write gives it (docs/design.md §10.3, per member): when that lease is shorter than the
    /// one the belief was computed from, the belief ends no later than the shorter lease says,
    /// before the commit and whatever becomes of it (a commit whose result is unknown may have
    /// applied, and the coordinator then times the shorter lease). A longer or equal lease
    /// leaves the belief as it is (an attempt starts no earlier than the last one did).
    pub(crate) fn cap_belief(&mut self, valid_until: LocalInstant) {
        if let Some(l) = &mut self.lease {
            l.valid_until = l.valid_until.min(valid_until);
        }
    }

    /// Adopts a confirmed attempt: the lease from its start, the shards it acquired.
    pub(crate) fn adopt(&mut self, a: &MemberAdoption) {
        // A later adopted attempt already superseded this one.
        if self
            .lease
            .is_some_and(|l| l.epoch == a.lease.epoch && l.renewal >= a.lease.renewal)
        {
            return;
        }
        if self.epoch != Some(a.lease.epoch) {
            return; // the member joined again meanwhile: this epoch's shards are gone
        }
        // Adopted at the member's epoch: no leave is under way (one ends the epoch locally
        // first), and what an earlier leave left to give back belongs to an ended epoch.
        self.leaving.clear();
        self.lease = Some(a.lease);
        for (shard, ballot) in &a.acquired {
            self.owned.insert(*shard, *ballot);
            self.unreleased.remove(shard);
        }
        for shard in &a.released {
            self.unreleased.remove(shard);
        }
        self.pending.retain(|p| p.adoption.seq > a.seq);
    }

    /// Forgets every attempt not yet confirmed: none of them will be adopted or recognised.
    pub(crate) fn forget_attempts(&mut self) {
        self.pending.clear();
    }

    pub(super) fn next_seq(&mut self) -> Result<u64, ElectionError> {
        let seq = self.next_seq;
        self.next_seq = seq
            .checked_add(1)
            .ok_or(ElectionError::CounterExhausted { what: "attempt" })?;
        Ok(seq)
    }

    pub(crate) fn push_pending(&mut self, p: PendingMember) {
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back(p);
    }

    /// The shards acquired by attempts whose commit is not confirmed (they may have landed).
    pub(super) fn pending_acquisitions(&self) -> impl Iterator<Item = ShardId> + '_ {
        self.pending
            .iter()
            .flat_map(|p| p.adoption.acquired.iter().map(|(s, _)| *s))
    }

    /// The pending attempt that wrote `writer`, if it is one of this member's.
    pub(super) fn pending_of(&self, writer: Option<&AttemptId>) -> Option<&PendingMember> {
        let w = writer.filter(|w| w.candidate == self.id)?;
        self.pending.iter().find(|p| p.adoption.seq == w.seq)
    }
}
