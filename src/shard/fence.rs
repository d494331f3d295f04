//! Fencing a shard's work (DESIGN §12.1): the check that makes a write commit only while the
//! writer's ownership of the shard holds.

use super::election::ShardedElection;
use crate::error::ElectionError;
use crate::ids::{Ballot, ShardId};
use crate::store::txn::{ElectionTxn, ReadMode};

impl ShardedElection {
    /// Fences the caller's transaction for `shard`'s work: reads the shard's record and its
    /// owner's record serializably and requires that `token` is the shard's ballot, owned by a
    /// member whose epoch is still the one it acquired the shard in. A write in the same
    /// transaction then commits only while that ownership holds. Member renewals never abort
    /// it (they do not change the epoch); a takeover of the member, or a handover of the
    /// shard, does.
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
        let member = self
            .member_with(txn, &owner.member, ReadMode::Serializable)
            .await?;
        match member {
            Some(m) if !m.fenced && m.epoch == owner.epoch => Ok(()),
            _ => Err(stale(true)),
        }
    }
}
