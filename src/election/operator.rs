//! Operator overrides: forcing a vacancy and asking the leader to resign.

use std::collections::BTreeMap;

use crate::codec;
use crate::core::{self};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::{Eligibility, FenceRecord, ResignRefusal};
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
        match core::operator::request_resign(&leader, operator, expected, None) {
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

impl LeaderElection {
    /// Operator request directed at a candidate (docs/design.md §13.6, `resign --to`): asks the
    /// leader of ballot `expected` to step down and reserve its vacancy for the candidate `to`
    /// names, which takes over in one commit. `to` is a candidate's name
    /// ([`CandidateId::name`]: the best live eligible candidate of that name is chosen) or one
    /// candidate's id, as [`list_candidates`](Self::list_candidates) gives it (that candidate
    /// only; an id is its name, a `-` and 16 hexadecimal digits, which no name ends with).
    /// Refused here (nothing written) when the registry this transaction reads has no live
    /// eligible candidate it names other than the leader, or none that the version policy
    /// lets lead (docs/design.md §14.2: under `no-downgrade`, one older than the leader while a
    /// candidate at least as new is live; under `prefer-oldest` or `prefer-newest`, one while
    /// a candidate of a version the policy prefers is live). The leader checks again when
    /// it reads the request, before it stops its work: if none is there then, it keeps
    /// leading and clears the request, publishing why ([`resign_refusal`](Self::resign_refusal)).
    /// If the target dies or becomes ineligible while the leader drains its work (its guard
    /// already closed), the vacancy goes to the best live eligible candidate instead.
    ///
    /// # Errors
    ///
    /// [`ElectionError::OperatorRefused`] (no such candidate, or the version policy does not
    /// let it lead: the reason names the policy and the versions), [`ElectionError::InvalidId`]
    /// (an empty name); corrupt values; database errors. No leader or a ballot mismatch is
    /// [`OperatorOutcome::Rejected`].
    pub async fn request_resign_to<T: ElectionTxn>(
        &self,
        txn: &T,
        operator: &CandidateId,
        expected: Ballot,
        to: &str,
    ) -> Result<OperatorOutcome, ElectionError> {
        if to.is_empty() || to.len() > crate::ids::MAX_CANDIDATE_ID_BYTES {
            return Err(ElectionError::InvalidId {
                reason: "the name or id to hand over to is empty or too long",
            });
        }
        let (config, leader, roster) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Serializable),
            self.read_roster(txn, true),
        );
        let (config, leader, (rows, marks)) = (config?, leader?, roster?);
        if let Some(owner) = leader.owner.as_ref() {
            let target = core::operator::directed_target(
                &owner.id,
                core::rank::Roster::new(&rows, &marks),
                to,
                leader.renewal,
                config.renewals_before_dead(),
                core::rank::Ranking {
                    policy: config.version_policy(),
                    leader_version: leader.leader_version.as_ref(),
                },
            );
            if let Err(why) = target {
                return Err(ElectionError::OperatorRefused {
                    reason: why.to_string(),
                });
            }
        }
        match core::operator::request_resign(&leader, operator, expected, Some(to)) {
            Err(rejected) => Ok(OperatorOutcome::Rejected(rejected)),
            Ok(write) => {
                self.write_leader(txn, &write)?;
                Ok(OperatorOutcome::Done {
                    ballot: write.ballot,
                })
            }
        }
    }

    /// The last directed resign a leader refused, if any (a query). It belongs to the current
    /// leadership only if its [`ballot`](ResignRefusal::ballot) is the leader's.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn resign_refusal<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Option<ResignRefusal>, ElectionError> {
        let key = &self.keys.resign_refusal;
        txn.get(key, ReadMode::Snapshot)
            .await?
            .map(|bytes| codec::decode_refusal(key, &bytes))
            .transpose()
    }

    /// Operator mark (docs/design.md §13.6): excludes every candidate named `name` from leading
    /// (`eligible == false`, with `reason`), or lifts the mark (`true`). `name` is a
    /// candidate's stable name ([`CandidateId::name`]), so the mark outlives its restarts
    /// (Patroni's `nofailover`). Each candidate reads its mark at every cycle: an excluded
    /// follower stops campaigning, and an excluded leader hands over as for its own health
    /// (to the best live eligible candidate, or holding). From this commit on, no candidate
    /// of that name is chosen by another (a reservation, a takeover's rank, a directed
    /// resign), even one that has not cycled since: those choices read the marks with the
    /// registry. Returns the mark as it was before.
    ///
    /// ```
    /// use fdb_leader_election::{Candidate, CandidateId, Eligibility, LeaderElection, MemDb, Priority};
    /// use fdb_leader_election::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), fdb_leader_election::ElectionError> {
    /// let db = MemDb::new();
    /// let election = LeaderElection::new(Subspace::from("jobs"));
    /// let e = election.clone();
    /// db.run(|txn, _| {
    ///     let e = e.clone();
    ///     async move {
    ///         e.initialize(&txn).await?;
    ///         e.set_eligible(&txn, "db-host-3", false, "disk replacement").await
    ///     }
    /// })
    /// .await?;
    /// let me = Candidate::new(CandidateId::random("db-host-3")?, Priority::new(9));
    /// let e = election.clone();
    /// let m = me.clone();
    /// db.run(|txn, _| {
    ///     let (e, m) = (e.clone(), m.clone());
    ///     async move { e.register_candidate(&txn, &m).await }
    /// })
    /// .await?;
    /// // Marked: it never acquires, whatever its priority.
    /// assert!(!election.run_cycle(&db, &me).await?.is_leader());
    /// let marks = db
    ///     .run(|txn, _| {
    ///         let e = election.clone();
    ///         async move { e.eligibility_marks(&txn).await }
    ///     })
    ///     .await?;
    /// assert_eq!(marks.get("db-host-3").and_then(Eligibility::reason), Some("disk replacement"));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] for a reason past
    /// [`MAX_REASON_BYTES`](crate::MAX_REASON_BYTES) or a name past the key size limit;
    /// [`ElectionError::InvalidId`] for an empty name; [`ElectionError::NotInitialized`];
    /// corrupt values; database errors.
    pub async fn set_eligible<T: ElectionTxn>(
        &self,
        txn: &T,
        name: &str,
        eligible: bool,
        reason: &str,
    ) -> Result<Eligibility, ElectionError> {
        if name.is_empty() {
            return Err(ElectionError::InvalidId {
                reason: "the name is empty",
            });
        }
        let mark = if eligible {
            None
        } else {
            Some(Eligibility::ineligible(reason)?)
        };
        self.read_config(txn).await?;
        let key = self.keys.mark(name)?;
        let before = match txn.get(&key, ReadMode::Serializable).await? {
            Some(bytes) => codec::decode_mark(&key, &bytes)?,
            None => Eligibility::Eligible,
        };
        match mark.as_ref().and_then(Eligibility::reason) {
            Some(reason) => txn.set(&key, &codec::encode_mark(reason)?),
            None => txn.clear(&key),
        }
        Ok(before)
    }

    /// Every operator mark, by the name it excludes (a query).
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn eligibility_marks<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<BTreeMap<String, Eligibility>, ElectionError> {
        let (begin, end) = self.keys.marks_range();
        let rows = txn.get_range(&begin, &end, ReadMode::Snapshot).await?;
        rows.iter()
            .map(|(key, value)| Ok((self.keys.mark_name(key)?, codec::decode_mark(key, value)?)))
            .collect()
    }
}
