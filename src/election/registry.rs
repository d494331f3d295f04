//! The candidate registry: registering, heartbeats, unregistering, listing and eviction.

use crate::candidate::Candidate;
use crate::codec;
use crate::core::rank::{Marks, Roster};
use crate::error::ElectionError;
use crate::ids::CandidateId;
use crate::record::{CandidateInfo, CandidateRecord, Eligibility, Party};
use crate::store::txn::{ElectionTxn, ReadMode};

use super::{LeaderElection, ResignOutcome};

impl LeaderElection {
    pub(super) async fn candidate_opt<T: ElectionTxn>(
        &self,
        txn: &T,
        key: &[u8],
        mode: ReadMode,
    ) -> Result<Option<CandidateRecord>, ElectionError> {
        match txn.get(key, mode).await? {
            Some(bytes) => Ok(Some(codec::decode_candidate(key, &bytes)?)),
            None => Ok(None),
        }
    }

    /// The eligibility an operator's mark imposes on `candidate` ([`Eligibility::Eligible`]
    /// without one), read without a conflict: a mark written meanwhile is read at the next
    /// cycle.
    pub(super) async fn mark_of<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &CandidateId,
    ) -> Result<Eligibility, ElectionError> {
        let key = self.keys.mark(candidate.name())?;
        match txn.get(&key, ReadMode::Snapshot).await? {
            Some(bytes) => codec::decode_mark(&key, &bytes),
            None => Ok(Eligibility::Eligible),
        }
    }

    /// The registry as a decision reads it ([`Roster`](crate::core::rank::Roster)): every
    /// registration and every operator's mark, both snapshot reads issued together. Every
    /// decision that ranks or chooses another candidate (a reservation, a takeover's rank, a
    /// directed resign, what the version policy allows) reads it here, never the
    /// registrations alone: a mark reaches a registration only when that candidate writes its
    /// next one.
    pub(super) async fn read_roster<T: ElectionTxn>(
        &self,
        txn: &T,
        skip_corrupt: bool,
    ) -> Result<(Vec<(CandidateId, CandidateRecord)>, Marks), ElectionError> {
        let (rows, marks) = tokio::join!(
            self.scan(txn, ReadMode::Snapshot, skip_corrupt),
            self.eligibility_marks(txn)
        );
        Ok((rows?, marks?))
    }

    /// The registration of `id` and the mark on its name, as a roster of at most one row (the
    /// author of a handover request, [`Lookup::Requester`](crate::core::Lookup::Requester)).
    pub(super) async fn read_one<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &CandidateId,
    ) -> Result<(Vec<(CandidateId, CandidateRecord)>, Marks), ElectionError> {
        let key = self.keys.candidate(id)?;
        let (reg, mark) = tokio::join!(
            self.candidate_opt(txn, &key, ReadMode::Snapshot),
            self.mark_of(txn, id)
        );
        let rows = reg?.map(|r| (id.clone(), r)).into_iter().collect();
        let marks = match mark? {
            Eligibility::Eligible => Marks::new(),
            marked => Marks::from([(id.name().to_owned(), marked)]),
        };
        Ok((rows, marks))
    }

    /// What `candidate`'s registration says of its eligibility: its own, unless an operator's
    /// `mark` excludes it.
    pub(super) fn eligibility_of(candidate: &Candidate, mark: Eligibility) -> Eligibility {
        candidate.lock().eligibility.clone().and(mark)
    }

    /// Registers `candidate` (or updates its priority and metadata if already registered,
    /// keeping its registration order). Registration is allowed while elections are disabled.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; size limits; corrupt values; database errors.
    pub async fn register_candidate<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<(), ElectionError> {
        let key = self.keys.candidate(candidate.id())?;
        self.bind(candidate)?;
        let (config, leader, existing, mark) = tokio::join!(
            self.config_opt(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.candidate_opt(txn, &key, ReadMode::Serializable),
            self.mark_of(txn, candidate.id()),
        );
        config?.ok_or(ElectionError::NotInitialized)?;
        let leader = leader?;
        let existing = existing?;
        let eligibility = Self::eligibility_of(candidate, mark?);
        let heartbeat = existing
            .as_ref()
            .map_or(0, |rec| rec.heartbeat.wrapping_add(1));
        let registration = match existing {
            Some(rec) => rec.registration,
            None => {
                let next = match txn
                    .get(&self.keys.registrations, ReadMode::Serializable)
                    .await?
                {
                    Some(bytes) => codec::decode_counter(&self.keys.registrations, &bytes)?,
                    None => 0,
                };
                let after = next.checked_add(1).ok_or(ElectionError::CounterExhausted {
                    what: "registration",
                })?;
                txn.set(&self.keys.registrations, &codec::encode_counter(after)?);
                next
            }
        };
        let local = candidate.lock();
        let rec = CandidateRecord {
            priority: local.priority,
            registration,
            heartbeat,
            seen_renewal: leader.renewal,
            metadata: local.metadata.clone(),
            eligibility,
            version: local.version.clone(),
        };
        drop(local);
        txn.set(&key, &codec::encode_candidate(&rec)?);
        Ok(())
    }

    /// Records a heartbeat for `candidate`, writing its current priority and metadata.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotRegistered`]; corrupt values; database errors.
    pub async fn heartbeat_candidate<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<(), ElectionError> {
        let key = self.keys.candidate(candidate.id())?;
        self.bind(candidate)?;
        let (leader, existing, mark) = tokio::join!(
            self.leader_with(txn, ReadMode::Snapshot),
            self.candidate_opt(txn, &key, ReadMode::Serializable),
            self.mark_of(txn, candidate.id()),
        );
        let leader = leader?;
        let existing = existing?.ok_or_else(|| ElectionError::NotRegistered {
            candidate: candidate.id().clone(),
        })?;
        let eligibility = Self::eligibility_of(candidate, mark?);
        self.write_heartbeat(txn, candidate, &key, &existing, leader.renewal, eligibility)
    }

    pub(super) fn write_heartbeat<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
        key: &[u8],
        existing: &CandidateRecord,
        seen_renewal: u64,
        eligibility: Eligibility,
    ) -> Result<(), ElectionError> {
        let local = candidate.lock();
        let rec = CandidateRecord {
            priority: local.priority,
            registration: existing.registration,
            heartbeat: existing.heartbeat.wrapping_add(1),
            seen_renewal,
            metadata: local.metadata.clone(),
            eligibility,
            version: local.version.clone(),
        };
        drop(local);
        txn.set(key, &codec::encode_candidate(&rec)?);
        Ok(())
    }

    /// Removes `candidate`'s registration, keeping the leader record consistent with it
    /// (docs/design.md §10.5), in the same transaction (which conflicts on the leader key):
    ///
    /// - if the candidate owns the leader record, it first resigns (reserving the vacancy for
    ///   the best live candidate);
    /// - otherwise its own handover request, and a vacancy reserved for it, are withdrawn (the
    ///   vacancy becomes unreserved), so that no leader steps down for a candidate that left
    ///   and nobody waits a lease for it.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn unregister_candidate<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<Option<ResignOutcome>, ElectionError> {
        let key = self.keys.candidate(candidate.id())?;
        self.bind(candidate)?;
        let leader = self.leader_with(txn, ReadMode::Serializable).await?;
        let resigned = if leader.is_owned_by(candidate.id()) {
            Some(self.resign_leadership(txn, candidate, None).await?)
        } else {
            let mine =
                |p: &Option<Party>| p.as_ref().is_some_and(|p| p.is_candidate(candidate.id()));
            if mine(&leader.handover) || mine(&leader.reservation) {
                let mut write = leader.clone();
                if mine(&write.handover) {
                    write.handover = None;
                }
                if mine(&write.reservation) {
                    write.reservation = None;
                }
                self.write_leader(txn, &write)?;
            }
            None
        };
        txn.clear(&key);
        Ok(resigned)
    }

    /// Reads one candidate's registration.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn get_candidate<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &CandidateId,
    ) -> Result<Option<CandidateRecord>, ElectionError> {
        let key = self.keys.candidate(id)?;
        self.candidate_opt(txn, &key, ReadMode::Snapshot).await
    }

    pub(super) async fn scan<T: ElectionTxn>(
        &self,
        txn: &T,
        mode: ReadMode,
        skip_corrupt: bool,
    ) -> Result<Vec<(CandidateId, CandidateRecord)>, ElectionError> {
        let (begin, end) = self.keys.candidates_range();
        let rows = txn.get_range(&begin, &end, mode).await?;
        let mut out = Vec::with_capacity(rows.len());
        for (key, value) in rows {
            let decoded = self
                .keys
                .candidate_id(&key)
                .and_then(|id| Ok((id, codec::decode_candidate(&key, &value)?)));
            match decoded {
                Ok(row) => out.push(row),
                Err(_) if skip_corrupt => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Lists every registered candidate in registration order, each marked live or not
    /// (liveness is measured in leader renewals seen, never by comparing clocks) and whether
    /// the version policy lets it lead ([`CandidateInfo::policy_allows`]).
    ///
    /// # Errors
    ///
    /// [`ElectionError::Corrupt`] naming the first registration that does not decode.
    pub async fn list_candidates<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Vec<CandidateInfo>, ElectionError> {
        let (config, leader, roster) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.read_roster(txn, false)
        );
        let (config, leader, (rows, marks)) = (config?, leader?, roster?);
        let roster = Roster::new(&rows, &marks);
        let lag = config.renewals_before_dead();
        let ranking = crate::core::rank::Ranking {
            policy: config.version_policy(),
            leader_version: leader.leader_version.as_ref(),
        };
        let owner = leader.owner.as_ref().map(|o| &o.id);
        let allows: Vec<bool> = rows
            .iter()
            .map(|(id, record)| {
                let exclude: Vec<&CandidateId> = [Some(id), owner].into_iter().flatten().collect();
                crate::core::rank::policy_ahead(
                    &roster.standing(id, record),
                    roster,
                    leader.renewal,
                    lag,
                    &exclude,
                    ranking,
                )
                .is_empty()
            })
            .collect();
        let mut out: Vec<CandidateInfo> = rows
            .into_iter()
            .zip(allows)
            .map(|((id, record), policy_allows)| CandidateInfo {
                live: record.is_live(leader.renewal, lag),
                policy_allows,
                id,
                record,
            })
            .collect();
        out.sort_by_key(|c| c.record.registration);
        Ok(out)
    }

    /// Removes the registrations of dead candidates (more than
    /// [`renewals_before_dead`](crate::ElectionConfig::renewals_before_dead) leader renewals behind),
    /// never the owner, the reservation holder or the handover requester. Returns the ids
    /// removed.
    ///
    /// # Errors
    ///
    /// [`ElectionError::Corrupt`] if a registration does not decode (nothing is removed).
    pub async fn evict_dead_candidates<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Vec<CandidateId>, ElectionError> {
        // The leader record is read with a conflict range: a candidate that becomes owner (or
        // is named in a request or reservation) in a concurrent transaction makes this one
        // retry, so eviction never unregisters an owner (docs/design.md §10.5).
        let (config, leader, rows) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Serializable),
            self.scan(txn, ReadMode::Serializable, false)
        );
        let (config, leader, rows) = (config?, leader?, rows?);
        let lag = config.renewals_before_dead();
        let protected: Vec<&CandidateId> = [
            leader.owner.as_ref().map(|o| &o.id),
            leader
                .reservation
                .as_ref()
                .and_then(Party::candidate)
                .map(|n| &n.id),
            leader
                .handover
                .as_ref()
                .and_then(Party::candidate)
                .map(|n| &n.id),
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut evicted = Vec::new();
        for (id, rec) in rows {
            if !rec.is_live(leader.renewal, lag) && !protected.contains(&&id) {
                txn.clear(&self.keys.candidate(&id)?);
                evicted.push(id);
            }
        }
        Ok(evicted)
    }
}
