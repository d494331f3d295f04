//! Operator overrides: forcing a vacancy and asking the leader to resign.

use crate::core::{self};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::FenceRecord;
use crate::store::txn::{ElectionTxn, ReadMode};

use super::{LeaderElection, OperatorOutcome};

impl LeaderElection {
    /// Operator override: fences the leader of ballot `expected` out at once. The ballot grows
    /// by one (so the old leader's fenced writes fail from this commit on) and the record
    /// becomes a vacancy *held for the operator* ([`LeaderRecord::operator_hold`](crate::LeaderRecord::operator_hold)). No
    /// candidate can fill it, whatever id `operator` is (even a registered candidate's): every
    /// candidate takes over with the next ballot only after a full lease of unchanged
    /// observation, by which time the old leader's own belief has ended. Use it for a leader
    /// that is wedged or misbehaving; [`request_resign`](Self::request_resign) is the
    /// cooperative way.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors. A ballot mismatch is [`OperatorOutcome::Rejected`].
    pub async fn force_vacate<T: ElectionTxn>(
        &self,
        txn: &T,
        operator: &CandidateId,
        expected: Ballot,
    ) -> Result<OperatorOutcome, ElectionError> {
        let (config, leader) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Serializable)
        );
        let (config, leader) = (config?, leader?);
        match core::operator::force_vacate(&leader, &config, operator, expected)? {
            Err(rejected) => Ok(OperatorOutcome::Rejected(rejected)),
            Ok(write) => {
                self.replace_fence(txn, &leader, &FenceRecord::of(&write))
                    .await?;
                self.write_leader(txn, &write)?;
                Ok(OperatorOutcome::Done {
                    ballot: write.ballot,
                })
            }
        }
    }

    /// Operator request: asks the leader of ballot `expected` to step down
    /// ([`LeaderRecord::operator_request`](crate::LeaderRecord::operator_request)). The leader honours it at its next cycle (at once
    /// if it watches the record), whatever the priorities and the preemption setting, after
    /// draining its in-flight work within the handover grace: it stops believing, then writes
    /// a vacancy reserved for the best live candidate other than itself, who takes over in one
    /// commit. With no other live candidate the vacancy is unreserved (and the old leader may
    /// take it again, with a new ballot). The ballot, the observation identity and the
    /// leader's attempt id are unchanged by the request. See
    /// [`force_vacate`](Self::force_vacate) for a leader that does not cycle any more.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors. No leader or a ballot mismatch is
    /// [`OperatorOutcome::Rejected`].
    pub async fn request_resign<T: ElectionTxn>(
        &self,
        txn: &T,
        operator: &CandidateId,
        expected: Ballot,
    ) -> Result<OperatorOutcome, ElectionError> {
        let leader = self.leader_with(txn, ReadMode::Serializable).await?;
        match core::operator::request_resign(&leader, operator, expected) {
            Err(rejected) => Ok(OperatorOutcome::Rejected(rejected)),
            Ok(write) => {
                self.write_leader(txn, &write)?;
                Ok(OperatorOutcome::Done {
                    ballot: write.ballot,
                })
            }
        }
    }
}
