//! Election cycles (run, claim, refresh) and resignation, adopted only after their commit.

use crate::candidate::Candidate;
use crate::candidate::cycle::{Cycle, CycleOutcome};
use crate::codec;
use crate::config::ElectionConfig;
use crate::core::rank::{Marks, Roster};
use crate::core::resign::ResignRejected;
use crate::core::{self, CycleInput, Decision, Lookup, Lookups, Mode};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::{CandidateRecord, ResignRefusal};
use crate::store::database::ElectionDatabase;
use crate::store::txn::{ElectionTxn, ReadMode};

use super::{LeaderElection, ResignOutcome};

impl LeaderElection {
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
    /// adopts it only once its commit is confirmed: the safe flow in one call (docs/design.md §10.7).
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
    /// use fdb_leader_election::Subspace;
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

    pub(super) async fn cycle<T: ElectionTxn>(
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
        let (config, leader, me, mark) = tokio::join!(
            self.config_opt(txn),
            self.leader_with(txn, ReadMode::Snapshot),
            self.candidate_opt(txn, &key, ReadMode::Serializable),
            self.mark_of(txn, candidate.id()),
        );
        let read_at = candidate.now();
        let config = config?.ok_or(ElectionError::NotInitialized)?;
        let leader = leader?;
        let mark = mark?;
        let eligibility = Self::eligibility_of(candidate, mark.clone());
        let Some(me) = me? else {
            candidate.step_down_locally();
            return Err(ElectionError::NotRegistered {
                candidate: candidate.id().clone(),
            });
        };
        let read_version = txn.read_version().await?;

        // Decide; look up what the decision asks for (at most the requester and the registry),
        // and decide again.
        let mut registry: Option<(Vec<(CandidateId, CandidateRecord)>, Marks)> = None;
        let mut requester: Option<(Vec<(CandidateId, CandidateRecord)>, Marks)> = None;
        let plan = loop {
            let decision = {
                let mut local = candidate.lock();
                let local = &mut *local;
                let input = CycleInput {
                    config: &config,
                    leader: &leader,
                    priority: local.priority,
                    eligible: eligibility.is_eligible(),
                    when_ineligible: local.unhealthy,
                    version: local.version.as_ref(),
                    registration: me.registration,
                    payload: local.payload.as_deref(),
                    started_at,
                    read_at,
                    read_version,
                    mode,
                    lookups: Lookups {
                        registry: registry.as_ref().map(|(r, m)| Roster::new(r, m)),
                        requester: requester.as_ref().map(|(r, m)| Roster::new(r, m)),
                    },
                };
                core::cycle::decide_cycle(&mut local.core, &input)?
            };
            match decision {
                Decision::Plan(plan) => break plan,
                Decision::Need(Lookup::Registry) if registry.is_none() => {
                    registry = Some(self.read_roster(txn, true).await?);
                }
                Decision::Need(Lookup::Requester(id)) if requester.is_none() => {
                    requester = Some(self.read_one(txn, &id).await?);
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
                        ineligible: None,
                        refused: None,
                    };
                }
            }
        };

        if let Some(fence) = plan.fence.as_ref() {
            self.replace_fence(txn, &leader, fence).await?;
        }
        if let (Some(reason), Some(operator)) = (&plan.refused, leader.operator_request()) {
            // The directed request cleared by this renewal: why, for `status` (docs/design.md §13.6).
            let refusal = ResignRefusal {
                ballot: leader.ballot,
                operator: operator.clone(),
                to: leader.handover_to.clone().unwrap_or_default(),
                reason: reason.clone(),
            };
            txn.set(&self.keys.resign_refusal, &codec::encode_refusal(&refusal)?);
        }
        let record = match plan.write {
            Some(write) => {
                self.write_leader(txn, &write)?;
                write
            }
            None => leader,
        };
        if heartbeat {
            self.write_heartbeat(
                txn,
                candidate,
                &key,
                &me,
                record.renewal,
                eligibility.clone(),
            )?;
        }
        Ok(Cycle {
            candidate: candidate.id().clone(),
            _settle: std::sync::Arc::new(settle),
            action: plan.action,
            record,
            adoption: plan.adopt,
            next_action_at: plan.next_action_at,
            honoured: plan.honoured,
            ineligible: plan.ineligible,
            config,
            eligibility,
            mark,
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
        self.bind(candidate)?;
        let started_at = candidate.now();
        let (config, leader) = tokio::join!(
            self.read_config(txn),
            self.leader_with(txn, ReadMode::Serializable)
        );
        let (config, leader) = (config?, leader?);
        let best = if leader.is_owned_by(candidate.id()) {
            let (rows, marks) = self.read_roster(txn, true).await?;
            core::rank::best_live(
                candidate.id(),
                Roster::new(&rows, &marks),
                leader.renewal,
                config.renewals_before_dead(),
                core::rank::Ranking {
                    policy: config.version_policy(),
                    leader_version: leader.leader_version.as_ref(),
                },
            )
        } else {
            None
        };
        let decided = {
            let mut local = candidate.lock();
            core::resign::decide_resign(
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
}
