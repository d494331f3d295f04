//! [`LeaderElection`]: the election's operations, each run inside the caller's transaction.

use std::sync::{Arc, Mutex, PoisonError};

use foundationdb_tuple::Subspace;

use crate::Cycle;
use crate::candidate::Candidate;
use crate::codec;
use crate::config::ElectionConfig;
use crate::core::{self, CycleInput, Decision, Mode, ResignRejected};
use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId};
use crate::keys::Keys;
use crate::record::{
    CandidateInfo, CandidateRecord, FenceRecord, LeaderRecord, LeaderState, Named,
};
use crate::txn::{ElectionTxn, ReadMode, Watch};

/// A decoded configuration and the bytes it was decoded from.
type CachedConfig = (Vec<u8>, ElectionConfig);

/// An election under one subspace: a cheap, stateless `Clone` handle.
///
/// Every operation takes the caller's transaction and neither commits nor retries; run it
/// inside `Database::run` (FoundationDB) or [`MemDb::run`](crate::MemDb::run), so leader-only
/// writes can be fenced in the same commit. Local state lives in [`Candidate`].
#[derive(Clone, Debug)]
pub struct LeaderElection {
    subspace: Arc<Subspace>,
    keys: Arc<Keys>,
    /// The last configuration decoded, with its bytes: the configuration rarely changes, so a
    /// cycle that reads the same bytes skips decoding and validating them again.
    config_cache: Arc<Mutex<Option<CachedConfig>>>,
}

/// The outcome of an operator override ([`LeaderElection::force_vacate`],
/// [`LeaderElection::request_resign`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperatorOutcome {
    /// Written (effective once the transaction commits).
    Done {
        /// The ballot in the record after the write.
        ballot: Ballot,
    },
    /// Nothing was written.
    Rejected(ResignRejected),
}

/// The outcome of a resignation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResignOutcome {
    /// The vacancy was written (effective once the transaction commits). The candidate stopped
    /// believing it leads before the write.
    Resigned {
        /// The ballot that ended; the next leader gets a higher one.
        ballot: Ballot,
        /// The candidate the vacancy is reserved for, if a live one was registered.
        reserved_for: Option<Named>,
    },
    /// Nothing was written.
    Rejected(ResignRejected),
}

impl LeaderElection {
    /// An election whose keys live under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        LeaderElection {
            keys: Arc::new(Keys::new(&subspace)),
            config_cache: Arc::new(Mutex::new(None)),
            subspace: Arc::new(subspace),
        }
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The election's subspace.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    /// Creates the election with the default configuration if it does not exist. Idempotent;
    /// never changes an existing configuration and never resets the ballot.
    ///
    /// # Errors
    ///
    /// Database errors; [`ElectionError::Corrupt`] if an existing value does not decode.
    pub async fn initialize<T: ElectionTxn>(&self, txn: &T) -> Result<(), ElectionError> {
        self.initialize_with_config(txn, &ElectionConfig::default())
            .await
    }

    /// Creates the election with `config` if it does not exist. Idempotent; never changes an
    /// existing configuration and never resets the ballot.
    ///
    /// # Errors
    ///
    /// As [`initialize`](Self::initialize).
    pub async fn initialize_with_config<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        match self.config_opt(txn).await? {
            Some(_) => {}
            None => txn.set(&self.keys.config, &codec::encode_config(config)?),
        }
        self.ensure_records(txn, config).await
    }

    /// Reads the configuration.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`] if absent; [`ElectionError::Corrupt`] or
    /// [`ElectionError::InvalidStoredConfig`] if it does not decode or validate.
    pub async fn read_config<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<ElectionConfig, ElectionError> {
        self.config_opt(txn)
            .await?
            .ok_or(ElectionError::NotInitialized)
    }

    /// Replaces the configuration (creating the election if needed). Leaders pick up a new
    /// lease at their next renewal; followers keep timing the lease stored with the record
    /// they observe. The ballot is untouched.
    ///
    /// # Errors
    ///
    /// Database errors; [`ElectionError::Corrupt`] if the leader record does not decode.
    pub async fn write_config<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        txn.set(&self.keys.config, &codec::encode_config(config)?);
        self.ensure_records(txn, config).await
    }

    async fn ensure_records<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        let (leader, fence) = tokio::join!(
            txn.get(&self.keys.leader, ReadMode::Serializable),
            txn.get(&self.keys.fence, ReadMode::Serializable)
        );
        let fence = fence?;
        let leader = match leader? {
            Some(bytes) => codec::decode_leader(&self.keys.leader, &bytes)?,
            // The fence remembers a ballot: recreating the record would restart ballots.
            None if fence.is_some() => {
                return Err(ElectionError::corrupt(
                    &self.keys.leader,
                    DecodeError::Impossible("leader record missing while the fence exists"),
                ));
            }
            None => {
                let rec = LeaderRecord::initial(config.lease_duration());
                txn.set(&self.keys.leader, &codec::encode_leader(&rec)?);
                rec
            }
        };
        match fence {
            Some(bytes) => {
                let fence = codec::decode_fence(&self.keys.fence, &bytes)?;
                if fence != FenceRecord::of(&leader) {
                    return Err(ElectionError::corrupt(
                        &self.keys.fence,
                        DecodeError::Impossible("fence disagrees with the leader record"),
                    ));
                }
            }
            None => txn.set(
                &self.keys.fence,
                &codec::encode_fence(&FenceRecord::of(&leader))?,
            ),
        }
        Ok(())
    }

    async fn config_opt<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Option<ElectionConfig>, ElectionError> {
        let Some(bytes) = txn.get(&self.keys.config, ReadMode::Serializable).await? else {
            return Ok(None);
        };
        let mut cache = self
            .config_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((cached, config)) = cache.as_ref() {
            if *cached == bytes {
                return Ok(Some(config.clone()));
            }
        }
        let config = codec::decode_config(&self.keys.config, &bytes)?;
        *cache = Some((bytes, config.clone()));
        Ok(Some(config))
    }

    /// Replaces the fence record, after checking that the stored one agrees with the leader
    /// record this transaction read: a corrupt or inconsistent fence is reported, never
    /// overwritten.
    async fn replace_fence<T: ElectionTxn>(
        &self,
        txn: &T,
        read: &LeaderRecord,
        fence: &FenceRecord,
    ) -> Result<(), ElectionError> {
        let stored = match txn.get(&self.keys.fence, ReadMode::Serializable).await? {
            Some(bytes) => codec::decode_fence(&self.keys.fence, &bytes)?,
            None => {
                return Err(ElectionError::corrupt(
                    &self.keys.fence,
                    DecodeError::Impossible("fence record missing"),
                ));
            }
        };
        if stored != FenceRecord::of(read) {
            return Err(ElectionError::corrupt(
                &self.keys.fence,
                DecodeError::Impossible("fence disagrees with the leader record"),
            ));
        }
        txn.set(&self.keys.fence, &codec::encode_fence(fence)?);
        Ok(())
    }

    fn decode_leader_opt(&self, bytes: Option<Vec<u8>>) -> Result<LeaderRecord, ElectionError> {
        match bytes {
            Some(bytes) => codec::decode_leader(&self.keys.leader, &bytes),
            None => Err(ElectionError::NotInitialized),
        }
    }

    async fn leader_with<T: ElectionTxn>(
        &self,
        txn: &T,
        mode: ReadMode,
    ) -> Result<LeaderRecord, ElectionError> {
        self.decode_leader_opt(txn.get(&self.keys.leader, mode).await?)
    }

    /// Reads the whole leader record (no conflict range).
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`] if absent; [`ElectionError::Corrupt`] if it does not
    /// decode.
    pub async fn leader_record<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<LeaderRecord, ElectionError> {
        self.leader_with(txn, ReadMode::Snapshot).await
    }

    async fn candidate_opt<T: ElectionTxn>(
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
        let (config, leader, existing) = tokio::join!(
            self.config_opt(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.candidate_opt(txn, &key, ReadMode::Serializable)
        );
        config?.ok_or(ElectionError::NotInitialized)?;
        let leader = leader?;
        let existing = existing?;
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
        let (leader, existing) = tokio::join!(
            self.leader_with(txn, ReadMode::Snapshot),
            self.candidate_opt(txn, &key, ReadMode::Serializable)
        );
        let leader = leader?;
        let existing = existing?.ok_or_else(|| ElectionError::NotRegistered {
            candidate: candidate.id().clone(),
        })?;
        self.write_heartbeat(txn, candidate, &key, &existing, leader.renewal)
    }

    fn write_heartbeat<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
        key: &[u8],
        existing: &CandidateRecord,
        seen_renewal: u64,
    ) -> Result<(), ElectionError> {
        let local = candidate.lock();
        let rec = CandidateRecord {
            priority: local.priority,
            registration: existing.registration,
            heartbeat: existing.heartbeat.wrapping_add(1),
            seen_renewal,
            metadata: local.metadata.clone(),
        };
        drop(local);
        txn.set(key, &codec::encode_candidate(&rec)?);
        Ok(())
    }

    /// Removes `candidate`'s registration. If it still owns the leader record, it first
    /// resigns in the same transaction (reserving the vacancy for the best live candidate).
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
        let leader = self.leader_with(txn, ReadMode::Snapshot).await?;
        let resigned = if leader.is_owned_by(candidate.id()) {
            Some(self.resign_leadership(txn, candidate, None).await?)
        } else {
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

    async fn scan<T: ElectionTxn>(
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
    /// (liveness is measured in leader renewals seen, never by comparing clocks).
    ///
    /// # Errors
    ///
    /// [`ElectionError::Corrupt`] naming the first registration that does not decode.
    pub async fn list_candidates<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Vec<CandidateInfo>, ElectionError> {
        let (config, leader, rows) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.scan(txn, ReadMode::Snapshot, false)
        );
        let (config, leader) = (config?, leader?);
        let lag = config.renewals_before_dead();
        let mut out: Vec<CandidateInfo> = rows?
            .into_iter()
            .map(|(id, record)| CandidateInfo {
                live: record.is_live(leader.renewal, lag),
                id,
                record,
            })
            .collect();
        out.sort_by_key(|c| c.record.registration);
        Ok(out)
    }

    /// Removes the registrations of dead candidates (more than
    /// [`renewals_before_dead`](ElectionConfig::renewals_before_dead) leader renewals behind),
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
        let (config, leader, rows) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.scan(txn, ReadMode::Serializable, false)
        );
        let (config, leader, rows) = (config?, leader?, rows?);
        let lag = config.renewals_before_dead();
        let protected: Vec<&CandidateId> = [&leader.owner, &leader.reservation, &leader.handover]
            .into_iter()
            .filter_map(|n| n.as_ref().map(|n| &n.id))
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

    /// One election cycle: heartbeat, then acquire, renew, request or honour a handover, or
    /// step down, as the protocol says. Reads config, leader record (snapshot) and the
    /// candidate's registration concurrently, writes the candidate's registration, and writes
    /// the leader record only when it changes it (with a read-conflict range then). A follower
    /// cycle therefore never conflicts with the leader's renewals.
    ///
    /// The result is prepared state: adopt it with [`Candidate::adopt`] after the commit.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotRegistered`] (the candidate also stops believing it leads);
    /// [`ElectionError::NotInitialized`]; corrupt values (the candidate stays a follower);
    /// database errors.
    pub async fn run_election_cycle<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<Cycle, ElectionError> {
        self.cycle(txn, candidate, Mode::Cycle, true).await
    }

    /// Acquires or renews leadership as [`run_election_cycle`](Self::run_election_cycle) does,
    /// without writing a heartbeat.
    ///
    /// # Errors
    ///
    /// As [`run_election_cycle`](Self::run_election_cycle).
    pub async fn try_claim_leadership<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<Cycle, ElectionError> {
        self.cycle(txn, candidate, Mode::Cycle, false).await
    }

    /// Renews the candidate's lease if it believes it leads and the record is unchanged; never
    /// acquires.
    ///
    /// # Errors
    ///
    /// As [`run_election_cycle`](Self::run_election_cycle).
    pub async fn refresh_lease<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<Cycle, ElectionError> {
        self.cycle(txn, candidate, Mode::RefreshOnly, false).await
    }

    async fn cycle<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
        mode: Mode,
        heartbeat: bool,
    ) -> Result<Cycle, ElectionError> {
        let key = self.keys.candidate(candidate.id())?;
        let started_at = candidate.now();
        let (config, leader, me) = tokio::join!(
            self.config_opt(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.candidate_opt(txn, &key, ReadMode::Serializable)
        );
        let read_at = candidate.now();
        let config = config?.ok_or(ElectionError::NotInitialized)?;
        let leader = leader?;
        let Some(me) = me? else {
            candidate.step_down_locally();
            return Err(ElectionError::NotRegistered {
                candidate: candidate.id().clone(),
            });
        };

        let mut ranked = false;
        let plan = loop {
            let decision = {
                let mut local = candidate.lock();
                let local = &mut *local;
                let input = CycleInput {
                    config: &config,
                    leader: &leader,
                    priority: local.priority,
                    payload: local.payload.as_deref(),
                    started_at,
                    read_at,
                    mode,
                };
                core::decide_cycle(&mut local.core, &input)?
            };
            match decision {
                Decision::Plan(plan) => break plan,
                Decision::NeedRank if !ranked => {
                    ranked = true;
                    let rows = self.scan(txn, ReadMode::Snapshot, true).await?;
                    let exclude: Vec<&CandidateId> = [&leader.owner, &leader.reservation]
                        .into_iter()
                        .filter_map(|n| n.as_ref().map(|n| &n.id))
                        .collect();
                    let rank = core::rank_among(
                        candidate.id(),
                        candidate.priority(),
                        me.registration,
                        &rows,
                        leader.renewal,
                        config.renewals_before_dead(),
                        &exclude,
                    );
                    candidate.lock().core.set_rank(rank);
                }
                // The observation changed under a concurrent cycle of the same candidate:
                // decide nothing this attempt.
                Decision::NeedRank => {
                    break core::Plan {
                        action: core::Action::None,
                        write: None,
                        fence: None,
                        adopt: None,
                        next_action_at: None,
                    };
                }
            }
        };

        if let Some(fence) = plan.fence.as_ref() {
            self.replace_fence(txn, &leader, fence).await?;
        }
        let record = match plan.write {
            Some(write) => {
                txn.add_read_conflict_key(&self.keys.leader)?;
                txn.set(&self.keys.leader, &codec::encode_leader(&write)?);
                write
            }
            None => leader,
        };
        if heartbeat {
            self.write_heartbeat(txn, candidate, &key, &me, record.renewal)?;
        }
        Ok(Cycle {
            action: plan.action,
            record,
            adoption: plan.adopt,
            next_action_at: plan.next_action_at,
            config,
        })
    }

    /// Resigns: writes a vacancy (same ballot) reserved for the best live candidate, so the
    /// next leader takes over in one commit instead of one lease. The candidate stops
    /// believing it leads before the write, whatever the commit's fate. With `expected`, the
    /// resignation applies only to that ballot.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors. "Not the leader" is [`ResignOutcome::Rejected`].
    pub async fn resign_leadership<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
        expected: Option<Ballot>,
    ) -> Result<ResignOutcome, ElectionError> {
        let started_at = candidate.now();
        let (config, leader) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Serializable)
        );
        let (config, leader) = (config?, leader?);
        let best = if leader.is_owned_by(candidate.id()) {
            let rows = self.scan(txn, ReadMode::Snapshot, true).await?;
            core::best_live(
                candidate.id(),
                &rows,
                leader.renewal,
                config.renewals_before_dead(),
            )
        } else {
            None
        };
        let decided = {
            let mut local = candidate.lock();
            core::decide_resign(
                &mut local.core,
                &leader,
                &config,
                expected,
                best,
                started_at,
            )?
        };
        match decided {
            Err(rejected) => Ok(ResignOutcome::Rejected(rejected)),
            Ok(plan) => {
                let Some(write) = plan.write else {
                    return Ok(ResignOutcome::Rejected(ResignRejected::NotLeader {
                        current: None,
                    }));
                };
                if let Some(fence) = plan.fence.as_ref() {
                    self.replace_fence(txn, &leader, fence).await?;
                }
                txn.set(&self.keys.leader, &codec::encode_leader(&write)?);
                Ok(ResignOutcome::Resigned {
                    ballot: write.ballot,
                    reserved_for: write.reservation,
                })
            }
        }
    }

    /// Whether `candidate` leads: the record names it at the ballot it believes in, and its
    /// local lease is valid now.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn is_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        candidate: &Candidate,
    ) -> Result<bool, ElectionError> {
        let (config, leader) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Snapshot)
        );
        let (config, leader) = (config?, leader?);
        let now = candidate.now();
        let mut local = candidate.lock();
        local.core.recognize_own_write(&leader, &config);
        local.core.check_tenure(&leader, now);
        Ok(local.core.valid_tenure(now).is_some())
    }

    /// The leader named in the record, unless `observer` has watched the record unchanged for
    /// a full lease (then the lease has lapsed and `None` is returned). An observer seeing the
    /// record for the first time cannot tell a live leader from a crashed one and reports it;
    /// call this repeatedly with the same observer to detect lapses.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn current_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        observer: &Candidate,
    ) -> Result<Option<LeaderState>, ElectionError> {
        let leader = self.leader_with(txn, ReadMode::Snapshot).await?;
        let now = observer.now();
        let lapsed = {
            let mut local = observer.lock();
            local.core.observe(&leader, now);
            local
                .core
                .observed()
                .is_some_and(|o| now >= o.first_seen.saturating_add(leader.lease))
        };
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

    /// Operator override: fences the leader of ballot `expected` out at once. The ballot grows
    /// by one (so the old leader's fenced writes fail from this commit on) and the record
    /// becomes a vacancy reserved for `operator`, who never fills it: candidates take over
    /// with the next ballot after a full lease of unchanged observation, by which time the old
    /// leader's own belief has ended. Use it for a leader that is wedged or misbehaving.
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
                txn.set(&self.keys.leader, &codec::encode_leader(&write)?);
                Ok(OperatorOutcome::Done {
                    ballot: write.ballot,
                })
            }
        }
    }

    /// Operator request: asks the leader of ballot `expected` to step down. It writes a
    /// handover request at the highest priority; the leader honours it at its next cycle (at
    /// once if it watches the record), after its minimum tenure and after draining its work
    /// within the grace, and leaves a vacancy that candidates take over after a full lease.
    /// Requires preemption to be enabled (otherwise the leader drops the request); see
    /// [`force_vacate`](Self::force_vacate) for the unconditional override.
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
                txn.set(&self.keys.leader, &codec::encode_leader(&write)?);
                Ok(OperatorOutcome::Done {
                    ballot: write.ballot,
                })
            }
        }
    }

    /// Fences the caller's transaction: reads the fence record with a conflict range and
    /// requires that `token` is the current ballot and its leader has not stepped down. A
    /// write in the same transaction then commits only while that ballot leads. The fence
    /// changes only when ownership changes, so renewals do not abort fenced transactions.
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] if another ballot leads or the leader stepped down;
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn fence<T: ElectionTxn>(&self, txn: &T, token: Ballot) -> Result<(), ElectionError> {
        let bytes = txn
            .get(&self.keys.fence, ReadMode::Serializable)
            .await?
            .ok_or(ElectionError::NotInitialized)?;
        let fence = codec::decode_fence(&self.keys.fence, &bytes)?;
        if fence.ballot != token || fence.vacant {
            return Err(ElectionError::StaleToken {
                token,
                current: fence.ballot,
                vacant: fence.vacant,
            });
        }
        Ok(())
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
