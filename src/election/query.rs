//! Queries: who leads, and watching the leader record; they never change local state.

use crate::candidate::Candidate;
use crate::error::ElectionError;
use crate::record::LeaderState;
use crate::store::txn::{ElectionTxn, ReadMode, Watch};

use super::LeaderElection;

impl LeaderElection {
    /// Whether `candidate` leads: it believes it leads now (its local lease is valid) and the
    /// record read in `txn` names it at the ballot it believes in.
    ///
    /// A query: it never changes what the candidate believes or times (docs/design.md §10.2). A record
    /// read at an older version (a renewal behind the candidate's own) still counts; a record
    /// showing this transaction's own uncommitted acquisition does not make a candidate that
    /// has not adopted it a leader. Demotion happens in cycles and at the local deadline.
    /// For the local check alone, without a read, see [`Candidate::believes_it_leads`].
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn is_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<bool, ElectionError> {
        self.bind(candidate)?;
        let leader = self.leader_with(txn, ReadMode::Snapshot).await?;
        Ok(candidate
            .fencing_token()
            .is_some_and(|ballot| leader.ballot == ballot && leader.is_owned_by(candidate.id())))
    }

    /// The leader named in the record, unless `observer`'s own election cycles have seen the
    /// record unchanged for a full lease (then the lease has lapsed and `None` is returned).
    ///
    /// A query: it never changes what the observer believes or times (docs/design.md §10.2), so the
    /// lapse is judged from the observation the observer's cycles made, with the same rule a
    /// follower uses to take over. A candidate that does not run cycles therefore never sees
    /// a lapse here; a process that only watches the election uses the runner's observer
    /// mode (`Runner::observer`), which times its own reads.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn current_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        observer: &Candidate,
    ) -> Result<Option<LeaderState>, ElectionError> {
        self.bind(observer)?;
        let leader = self.leader_with(txn, ReadMode::Snapshot).await?;
        let now = observer.now();
        let lapsed = observer
            .lock()
            .core
            .observed()
            .is_some_and(|o| o.lapsed(&leader, now));
        if lapsed {
            return Ok(None);
        }
        Ok(LeaderState::from_record(&leader))
    }

    /// The leader named in the record, with no lease check (v0.11's `get_leader_raw`).
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn current_leader_unchecked<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Option<LeaderState>, ElectionError> {
        Ok(LeaderState::from_record(&self.leader_record(txn).await?))
    }

    /// Watches the leader record: the watch resolves after the record changes (any renewal,
    /// handover request, release or acquisition). Armed when `txn` commits.
    ///
    /// Like a FoundationDB watch, it adds a read-conflict range on the leader key: arm it in a
    /// separate read-only transaction (read-only commits never conflict), not inside a
    /// follower's cycle, or that cycle would conflict with the leader's renewals.
    ///
    /// # Errors
    ///
    /// Database errors (including watches being disabled).
    pub fn watch_leader<T: ElectionTxn>(&self, txn: &T) -> Result<Watch, ElectionError> {
        Ok(txn.watch(&self.keys.leader)?)
    }
}
