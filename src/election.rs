//! [`LeaderElection`]: the election's operations, each run inside the caller's transaction.

use std::sync::{Arc, Mutex, PoisonError};

use foundationdb_tuple::Subspace;

use crate::candidate::{Candidate, Cycle, CycleOutcome};
use crate::codec;
use crate::config::ElectionConfig;
use crate::core::{self, CycleInput, Decision, Lookup, Lookups, Mode, ResignRejected};
use crate::database::ElectionDatabase;
use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId};
use crate::keys::Keys;
use crate::record::{
    CandidateInfo, CandidateRecord, FenceRecord, LeaderRecord, LeaderState, Named, Party,
};
use crate::txn::{ElectionTxn, ReadMode, Watch};

/// A decoded configuration and the bytes it was decoded from.
type CachedConfig = (Vec<u8>, ElectionConfig);

/// An election under one subspace: a cheap `Clone` handle.
///
/// Every operation takes the caller's transaction and neither commits nor retries; run it
/// inside `Database::run` (FoundationDB) or [`MemDb::run`](crate::MemDb::run), so leader-only
/// writes can be fenced in the same commit. [`run_cycle`](Self::run_cycle) is the exception:
/// it runs a cycle in a transaction of its own and adopts it after the commit.
///
/// Election state lives in the database and in each [`Candidate`]; the handle holds only the
/// election's keys and a cache of the last configuration it decoded, with its bytes (shared by
/// its clones), so that a cycle reading unchanged configuration bytes does not decode and
/// validate them again. The cache never changes what an operation decides: every operation
/// reads the configuration key, and a different value is decoded afresh.
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
    /// Binds `candidate` to this election on its first use, or refuses it if it already takes
    /// part in another one (its local state belongs to that election).
    pub(crate) fn bind(&self, candidate: &Candidate) -> Result<(), ElectionError> {
        candidate.bind(&self.keys.leader)
    }

    /// An election whose keys live under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        LeaderElection {
            keys: Arc::new(Keys::new(&subspace)),
            config_cache: Arc::new(Mutex::new(None)),
            subspace: Arc::new(subspace),
        }
    }

    /// The election's subspace.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    /// The key of the leader record (for tools, and for fault injection with [`raw`]
    /// records).
    ///
    /// [`raw`]: crate::raw
    pub fn leader_key(&self) -> &[u8] {
        &self.keys.leader
    }

    /// The key of the fence record.
    pub fn fence_key(&self) -> &[u8] {
        &self.keys.fence
    }

    /// The key of the configuration.
    pub fn config_key(&self) -> &[u8] {
        &self.keys.config
    }

    /// The key of `id`'s registration.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] beyond FoundationDB's key size limit.
    pub fn candidate_key(&self, id: &CandidateId) -> Result<Vec<u8>, ElectionError> {
        self.keys.candidate(id)
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

    /// The configuration this handle last decoded, if any.
    fn cached_config(&self) -> Option<ElectionConfig> {
        self.config_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(_, config)| config.clone())
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
        self.bind(candidate)?;
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
        self.bind(candidate)?;
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

    /// Removes `candidate`'s registration, keeping the leader record consistent with it
    /// (DESIGN §10.5), in the same transaction (which conflicts on the leader key):
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
        // The leader record is read with a conflict range: a candidate that becomes owner (or
        // is named in a request or reservation) in a concurrent transaction makes this one
        // retry, so eviction never unregisters an owner (DESIGN §10.5).
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
        self.bind(candidate)?;
        self.cycle(txn, candidate, Mode::Cycle, true).await
    }

    /// Runs one election cycle in a transaction of its own, through `db`'s retry loop, and
    /// adopts it only once its commit is confirmed: the safe flow in one call (DESIGN §10.7).
    ///
    /// Each attempt runs [`run_election_cycle`](Self::run_election_cycle); conflicts are
    /// retried inside, a commit whose result is unknown is returned as an error (the next
    /// `run_cycle` recognises it from the attempt id in the record), and the whole call is
    /// bounded by the configuration's
    /// [`transaction_timeout`](ElectionConfig::transaction_timeout) (the last configuration
    /// this handle read; the default one before any). Call it once per heartbeat, or use the
    /// tokio runner, which also keeps a guard and wakes on watches.
    ///
    /// ```
    /// use fdb_leader_election::{Candidate, CandidateId, LeaderElection, MemDb, Priority};
    /// use foundationdb_tuple::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), fdb_leader_election::ElectionError> {
    /// let db = MemDb::new();
    /// let election = LeaderElection::new(Subspace::from("jobs"));
    /// let me = Candidate::new(CandidateId::random("worker")?, Priority::new(1));
    /// db.run(|txn, _| {
    ///     let (election, me) = (election.clone(), me.clone());
    ///     async move {
    ///         election.initialize(&txn).await?;
    ///         election.register_candidate(&txn, &me).await
    ///     }
    /// })
    /// .await?;
    /// let result = election.run_cycle(&db, &me).await?;
    /// assert!(result.is_leader() && me.believes_it_leads());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`run_election_cycle`](Self::run_election_cycle), plus the database's errors that
    /// its retry loop does not retry (unavailability, unknown commit results, timeouts).
    pub async fn run_cycle<D: ElectionDatabase>(
        &self,
        db: &D,
        candidate: &Candidate,
    ) -> Result<CycleOutcome, ElectionError> {
        self.bind(candidate)?;
        let timeout = self.cached_config().map_or_else(
            || ElectionConfig::default().transaction_timeout(),
            |c| c.transaction_timeout(),
        );
        let cycle = db
            .transact(timeout, |txn| {
                let (election, candidate) = (self.clone(), candidate.clone());
                async move { election.run_election_cycle(&txn, &candidate).await }
            })
            .await?;
        let (action, record) = (cycle.action(), cycle.record().clone());
        let next_action_at = cycle.next_action_at();
        let result = candidate.adopt(cycle);
        Ok(CycleOutcome {
            action,
            record,
            result,
            next_action_at,
        })
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
        self.bind(candidate)?;
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
        self.bind(candidate)?;
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
        // One unsettled cycle per candidate: dropped (settling the cycle) on any error below.
        let settle = candidate.open_cycle()?;
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
        let read_version = txn.read_version().await?;

        // Decide; look up what the decision asks for (at most the requester and the registry),
        // and decide again.
        let mut registry: Option<Vec<(CandidateId, CandidateRecord)>> = None;
        let mut requester: Option<Option<CandidateRecord>> = None;
        let plan = loop {
            let decision = {
                let mut local = candidate.lock();
                let local = &mut *local;
                let input = CycleInput {
                    config: &config,
                    leader: &leader,
                    priority: local.priority,
                    registration: me.registration,
                    payload: local.payload.as_deref(),
                    started_at,
                    read_at,
                    read_version,
                    mode,
                    lookups: Lookups {
                        registry: registry.as_deref(),
                        requester: requester.as_ref().map(Option::as_ref),
                    },
                };
                core::decide_cycle(&mut local.core, &input)?
            };
            match decision {
                Decision::Plan(plan) => break plan,
                Decision::Need(Lookup::Registry) if registry.is_none() => {
                    registry = Some(self.scan(txn, ReadMode::Snapshot, true).await?);
                }
                Decision::Need(Lookup::Requester(id)) if requester.is_none() => {
                    let key = self.keys.candidate(&id)?;
                    requester = Some(self.candidate_opt(txn, &key, ReadMode::Snapshot).await?);
                }
                Decision::Need(_) => {
                    // The same fact asked for twice: a defect in the core, never a reason to
                    // loop. Decide nothing this attempt.
                    break core::Plan {
                        action: core::Action::None,
                        write: None,
                        fence: None,
                        adopt: None,
                        next_action_at: None,
                        honoured: None,
                    };
                }
            }
        };

        if let Some(fence) = plan.fence.as_ref() {
            self.replace_fence(txn, &leader, fence).await?;
        }
        let record = match plan.write {
            Some(write) => {
                self.write_leader(txn, &write)?;
                write
            }
            None => leader,
        };
        if heartbeat {
            self.write_heartbeat(txn, candidate, &key, &me, record.renewal)?;
        }
        Ok(Cycle {
            candidate: candidate.id().clone(),
            _settle: std::sync::Arc::new(settle),
            action: plan.action,
            record,
            adoption: plan.adopt,
            next_action_at: plan.next_action_at,
            honoured: plan.honoured,
            config,
        })
    }

    /// Writes the leader record, conflict-checked: on the leader key, and on the registration
    /// of a candidate the record reserves the vacancy for, so that a reservation never lands
    /// for a candidate that unregistered concurrently (DESIGN §10.5).
    fn write_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        write: &LeaderRecord,
    ) -> Result<(), ElectionError> {
        txn.add_read_conflict_key(&self.keys.leader)?;
        if let Some(holder) = write.reservation.as_ref().and_then(Party::candidate) {
            txn.add_read_conflict_key(&self.keys.candidate(&holder.id)?)?;
        }
        txn.set(&self.keys.leader, &codec::encode_leader(write)?);
        Ok(())
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
        self.bind(candidate)?;
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
                self.write_leader(txn, &write)?;
                Ok(ResignOutcome::Resigned {
                    ballot: write.ballot,
                    reserved_for: write.reservation().cloned(),
                })
            }
        }
    }

    /// Whether `candidate` leads: it believes it leads now (its local lease is valid) and the
    /// record read in `txn` names it at the ballot it believes in.
    ///
    /// A query: it never changes what the candidate believes or times (DESIGN §10.2). A record
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
    /// A query: it never changes what the observer believes or times (DESIGN §10.2), so the
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

    /// Operator override: fences the leader of ballot `expected` out at once. The ballot grows
    /// by one (so the old leader's fenced writes fail from this commit on) and the record
    /// becomes a vacancy *held for the operator* ([`LeaderRecord::operator_hold`]). No
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
    /// ([`LeaderRecord::operator_request`]). The leader honours it at its next cycle (at once
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
