//! The fence check of leader-only writes, inside the caller's transaction.

use crate::error::ElectionError;
use crate::ids::Ballot;
use crate::store::txn::ElectionTxn;

use super::LeaderElection;

impl LeaderElection {
    /// Fences the caller's transaction: reads the fence record with a conflict range and
    /// requires that `token` is the current ballot and its leader has not stepped down. A
    /// write in the same transaction then commits only while that ballot leads. The fence
    /// changes only when ownership changes, so renewals do not abort fenced transactions. The
    /// rule is [`check_fence`](crate::check_fence)'s, the one every FoundationDB binding
    /// applies.
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] if another ballot leads or the leader stepped down;
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn fence<T: ElectionTxn>(&self, txn: &T, token: Ballot) -> Result<(), ElectionError> {
        crate::fence::check_fence_at(txn, &self.keys.fence, token).await
    }
}
