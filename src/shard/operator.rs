//! Operator overrides of a sharded election (docs/design.md §12.5): freeze placement, drain a member,
//! move a shard to a member by hand. Each runs inside the caller's transaction and follows the
//! §10 rules per shard: nothing an owner holds is taken from it, only asked of it.

use std::collections::{BTreeMap, BTreeSet};

use super::election::ShardedElection;
use crate::codec;
use crate::core::shard::operator::{MoveInput, ShardMove, decide_move};
use crate::error::ElectionError;
use crate::ids::{CandidateId, ShardId, Weight};
use crate::record::AttemptId;
use crate::store::txn::{ElectionTxn, ReadMode};

impl ShardedElection {
    /// Freezes placement or unfreezes it. While frozen, the coordinator moves nothing a live
    /// member holds (no move requests, no reservation taken from a live holder); shards nobody
    /// live holds (a dead member's, after the usual full lease) are still reserved, so a
    /// frozen election still fails over. Unfreezing hands placement back to the coordinator,
    /// which restores balance with the fewest moves.
    ///
    /// # Errors
    ///
    /// As [`layout`](Self::layout).
    pub async fn set_frozen<T: ElectionTxn>(
        &self,
        txn: &T,
        frozen: bool,
    ) -> Result<(), ElectionError> {
        let mut layout = self.layout(txn).await?;
        txn.add_read_conflict_key(&self.layout)?;
        layout.frozen = frozen;
        txn.set(&self.layout, &codec::encode_layout(&layout)?);
        Ok(())
    }

    /// Drains `member` (`drained`: placement gives it a weight of 0, so the coordinator moves
    /// its shards to the others, cooperatively and at most the move limit at a time) or
    /// undrains it. The mark is the operator's and outlives the member's restarts: a member
    /// that joins again under the same id stays drained until undrained. A member may be
    /// drained before it ever joins. Its own weight ([`Member::set_weight`]) is untouched.
    ///
    /// [`Member::set_weight`]: super::Member::set_weight
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn set_drained<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &CandidateId,
        drained: bool,
    ) -> Result<(), ElectionError> {
        self.layout(txn).await?;
        let key = self.drained_key(member);
        if drained {
            txn.set(&key, &[]);
        } else {
            txn.clear(&key);
        }
        Ok(())
    }

    /// The members an operator drained (a query).
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn drained_members<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<BTreeSet<CandidateId>, ElectionError> {
        Ok(self.read_members(txn).await?.drained)
    }

    /// Moves `shard` to the member `to` by hand, `operator` naming who asked (it is recorded
    /// as the shard record's writer). Only while placement is frozen
    /// ([`set_frozen`](Self::set_frozen)): otherwise the coordinator, which keeps the shard
    /// counts balanced, would move it back. A shard a live member owns is asked of its owner,
    /// which stops the shard's work (at most the grace) and hands it over as for a
    /// coordinator's move; a shard nobody live holds is reserved for `to` at once. The
    /// ballot grows only when `to` acquires the shard.
    ///
    /// If the owner dies before handing the shard over, the coordinator fences it out after a
    /// full lease and reserves the shard as placement says, not necessarily for `to`.
    ///
    /// # Errors
    ///
    /// [`ElectionError::OperatorRefused`] while the configuration disables elections (no
    /// shard changes hands then), if placement is not frozen, `to` is drained (by an
    /// operator, or by its own weight of 0), or an inbox the move writes is full;
    /// [`ElectionError::NotRegistered`] if `to` has not joined or is fenced out;
    /// [`ElectionError::InvalidLayout`] for a shard out of range;
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn move_shard<T: ElectionTxn>(
        &self,
        txn: &T,
        shard: ShardId,
        to: &CandidateId,
        operator: &CandidateId,
    ) -> Result<ShardMove, ElectionError> {
        let layout = self.layout(txn).await?;
        txn.add_read_conflict_key(&self.layout)?;
        let config = self.config(txn).await?;
        txn.add_read_conflict_key(&self.config)?;
        if shard.get() >= layout.shards {
            return Err(ElectionError::InvalidLayout {
                reason: "shard number out of range",
            });
        }
        let serializable = ReadMode::Serializable;
        let record = self.shard_with(txn, shard, serializable).await?;
        let target = self.member_with(txn, to, serializable).await?;
        let to_drained = txn
            .get(&self.drained_key(to), serializable)
            .await?
            .is_some();
        let owner_live = match &record.owner {
            Some(o) => self
                .member_with(txn, &o.member, serializable)
                .await?
                .is_some_and(|m| !m.fenced && m.epoch == o.epoch),
            None => false,
        };
        let mut inboxes = BTreeMap::new();
        let involved = record
            .owner
            .as_ref()
            .map(|o| &o.member)
            .into_iter()
            .chain(record.reserved_for.as_ref())
            .chain([to]);
        for who in involved {
            if !inboxes.contains_key(who) {
                inboxes.insert(who.clone(), self.inbox(txn, who, serializable).await?);
            }
        }
        let plan = decide_move(&MoveInput {
            shard,
            elections: config.election_enabled(),
            frozen: layout.frozen,
            record: &record,
            owner_live,
            to,
            to_live: target.as_ref().is_some_and(|m| !m.fenced),
            to_drained,
            to_weight: target.as_ref().map_or(Weight::DRAINED, |m| m.weight),
            inboxes: &inboxes,
            writer: AttemptId {
                candidate: operator.clone(),
                seq: 0,
            },
        })?;
        if let Some(rec) = &plan.record {
            txn.set(&self.shard_key(shard), &codec::encode_shard(rec)?);
        }
        for (who, inbox) in &plan.inboxes {
            txn.set(&self.inbox_key(who), &codec::encode_inbox(inbox)?);
        }
        Ok(plan.outcome)
    }
}
