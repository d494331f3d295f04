//! Fencing a shard's work (docs/design.md §12.1): the check that makes a write commit only while the
//! writer's ownership of the shard holds.

use super::election::ShardedElection;
use crate::error::ElectionError;
use crate::ids::{Ballot, ShardId};
use crate::record::shard::EpochMark;
use crate::store::txn::{ElectionTxn, ReadMode};

impl ShardedElection {
    /// Fences the caller's transaction for `shard`'s work: reads the shard's record and its
    /// owner's epoch mark serializably (the owner's record too, as a snapshot) and requires
    /// that `token` is the shard's ballot, owned by a member whose epoch is still the one it
    /// acquired the shard in. A write in the same transaction then commits only while that
    /// ownership holds. Member renewals never abort it (they write the member's record, not
    /// its epoch mark); a takeover of the member, its leave or its join at a new epoch, or a
    /// handover of the shard, does. (A member whose record predates epoch marks is fenced on
    /// its record, renewals included, until its epoch next changes.)
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] if another ballot owns the shard, it is vacant, or its
    /// owner's epoch ended; [`ElectionError::InvalidLayout`] for a shard out of range;
    /// corrupt values; database errors.
    pub async fn fence_shard<T: ElectionTxn>(
        &self,
        txn: &T,
        shard: ShardId,
        token: Ballot,
    ) -> Result<(), ElectionError> {
        let layout = self.layout(txn).await?;
        if shard.get() >= layout.shards {
            return Err(ElectionError::InvalidLayout {
                reason: "shard number out of range",
            });
        }
        let rec = self.shard_with(txn, shard, ReadMode::Serializable).await?;
        let stale = |vacant| ElectionError::StaleToken {
            token,
            current: rec.ballot,
            vacant,
        };
        let Some(owner) = &rec.owner else {
            return Err(stale(true));
        };
        if rec.ballot != token {
            return Err(stale(false));
        }
        let (mark, member) = tokio::join!(
            self.epoch_mark(txn, &owner.member, ReadMode::Serializable),
            self.member_with(txn, &owner.member, ReadMode::Snapshot),
        );
        let (mark, member) = (mark?, member?);
        if mark.is_none() {
            // No mark yet (a record written before marks existed): the record is the epoch.
            txn.add_read_conflict_key(&self.member_key(&owner.member))?;
        }
        // Both must say the owner's epoch lives (they agree unless a writer that predates the
        // marks ended the epoch in the record alone: then it has ended).
        let lives = mark.is_none_or(|m| m.lives(owner.epoch))
            && member.is_some_and(|m| EpochMark::of(&m).lives(owner.epoch));
        if lives { Ok(()) } else { Err(stale(true)) }
    }
}
