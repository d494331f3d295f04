//! The operator and the application at the edges (DESIGN §9's coverage rule, §10): writes of
//! every configuration field (the lease shortened and lengthened while a leader holds it),
//! `force_vacate` with arbitrary ids (registered candidates' among them), `request_resign`,
//! registrations removed by id while their owners cycle, and queries on read versions older
//! than the leader's last renewal. Each chain draws its next time like the chaos chains, and
//! nothing new starts once the quiet phase begins (which restores the configuration).

use std::sync::Arc;

use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, ElectionError, ElectionTxn, LeaderRecord,
    MemTransaction, OperatorOutcome, ReadMode,
};
use rand::{Rng, RngCore};

use super::{Actor, Kind, Pending, Status, World};
use crate::events::{Chaos, Event};
use crate::history::{ConfigView, Entry, Op, RecordView};
use crate::oracles::{OracleId, Violation};
use crate::plants::Plant;
use crate::time::{Nanos, dur, nanos, secs};
use crate::wire;

/// An application transaction kept open to query later, on its old read version.
#[derive(Debug)]
pub(crate) struct StaleQuery {
    pub(crate) pid: usize,
    pub(crate) txn: MemTransaction,
    /// The leader record's renewal when the transaction took its read version.
    pub(crate) renewal: u64,
}

impl World {
    /// A configuration with every field drawn around the world's parameters. The clock-rate
    /// bound never drops below the world's (clocks are drawn within it).
    fn draw_config(&mut self) -> Result<ElectionConfig, String> {
        let lease = match self.rng.random_range(0..3u8) {
            0 => self.params.lease / 2,
            1 => self.params.lease,
            _ => self.params.lease.saturating_mul(3) / 2,
        };
        let heartbeat = lease
            .checked_div(self.rng.random_range(4..=5u64))
            .unwrap_or(lease);
        let rho = if self.rng.random_bool(0.5) {
            self.params.rho_ppm
        } else {
            self.params.rho_ppm.saturating_mul(2).min(100_000)
        };
        let pick = |rng: &mut rand_chacha::ChaCha8Rng, options: &[Nanos]| -> Nanos {
            options
                .get(rng.random_range(0..options.len()))
                .copied()
                .unwrap_or(0)
        };
        let min_tenure = pick(&mut self.rng, &[0, heartbeat, lease / 2]);
        let grace = pick(&mut self.rng, &[0, heartbeat, heartbeat.saturating_mul(2)]);
        let stagger = pick(&mut self.rng, &[0, lease / 30]);
        let timeout = pick(&mut self.rng, &[heartbeat / 3, heartbeat / 2]);
        let timeout_mult = self.rng.random_range(2..=3u64);
        ElectionConfig::builder()
            .lease_duration(dur(lease))
            .heartbeat_interval(dur(heartbeat))
            .candidate_timeout(dur(lease.saturating_mul(timeout_mult)))
            .election_enabled(self.rng.random_ratio(9, 10))
            .allow_preemption(self.rng.random_bool(0.7))
            .max_clock_rate_error_ppm(rho)
            .min_tenure(dur(min_tenure))
            .handover_grace(dur(grace))
            .takeover_stagger(dur(stagger))
            .transaction_timeout(dur(timeout))
            .build()
            .map_err(|e| e.to_string())
    }

    /// Writes `config` as the operator; `false` if the transaction failed before its commit
    /// (retried by the caller, if at all).
    pub(super) fn write_config(&mut self, config: ElectionConfig, why: &str) -> bool {
        let restore = config == self.params.config && self.quiet;
        let txn = self.open(Actor::Operator);
        let election = self.election.clone();
        let res = self
            .rt
            .block_on(async { election.write_config(&txn, &config).await });
        match res {
            Ok(()) => {
                let mut entry = Entry::new("operator", None, 0, Op::Config);
                entry.config = Some(ConfigView::of(&config));
                // Records written with this lease may outlive the faults: the quiet phase
                // waits for them.
                let longest = nanos(config.lease_duration()).max(self.params.lease);
                self.note_fault_end(
                    self.now
                        .saturating_add(longest.saturating_mul(2))
                        .saturating_add(self.params.heartbeat.saturating_mul(2)),
                );
                self.stats.config_changes = self.stats.config_changes.saturating_add(1);
                self.log(format!(
                    "operator writes the configuration ({why}): lease={} s heartbeat={} s \
                     rho={}ppm elections={} preemption={}",
                    secs(nanos(config.lease_duration())),
                    secs(nanos(config.heartbeat_interval())),
                    config.max_clock_rate_error_ppm(),
                    config.election_enabled(),
                    config.allow_preemption()
                ));
                self.schedule_commit(Pending {
                    actor: Actor::Operator,
                    txn,
                    kind: Kind::Config {
                        allow: config.allow_preemption(),
                        restore,
                    },
                    entry,
                    zombie: false,
                    faultless: false,
                    op: None,
                    landing: false,
                });
                true
            }
            Err(_) => {
                self.faults.close(txn.id());
                false
            }
        }
    }

    /// A chain step of the operator and application edges.
    pub(super) fn edge(&mut self, c: Chaos) {
        match c {
            Chaos::ConfigChange => match self.draw_config() {
                Ok(config) => {
                    let _ = self.write_config(config, "every field");
                }
                Err(e) => self.log(format!("operator drew an invalid configuration: {e}")),
            },
            Chaos::ForceVacate => self.force_vacate(),
            Chaos::OperatorResign => self.operator_resign(),
            Chaos::OperatorUnregister => self.operator_unregister(),
            Chaos::StaleQueryOpen => self.stale_query_open(),
            Chaos::StaleQueryAsk => self.stale_query_ask(),
            _ => {}
        }
    }

    /// The record now (outside faults), for operators deciding what to write.
    fn current_record(&mut self, txn: &MemTransaction) -> Option<LeaderRecord> {
        let election = self.election.clone();
        self.rt.block_on(election.leader_record(txn)).ok()
    }

    /// An id for the operator: half the time a registered candidate's (DESIGN §10.4: it must
    /// not let that candidate in early), else a fresh operator id.
    fn operator_id(&mut self) -> Option<(CandidateId, Option<usize>)> {
        let registered: Vec<usize> = self
            .procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status == Status::Running)
            .map(|(pid, _)| pid)
            .collect();
        if self.rng.random_bool(0.5) {
            if let Some(pid) = self.pick(&registered) {
                if let Some(p) = self.procs.get(pid) {
                    return Some((p.candidate.id().clone(), Some(pid)));
                }
            }
        }
        let nonce = self.rng.next_u64();
        CandidateId::with_nonce("operator", nonce)
            .ok()
            .map(|id| (id, None))
    }

    fn force_vacate(&mut self) {
        let txn = self.open(Actor::Operator);
        let Some(prior) = self.current_record(&txn) else {
            self.faults.close(txn.id());
            return;
        };
        if prior.owner().is_none() {
            self.faults.close(txn.id());
            return;
        }
        let Some((ops, holder)) = self.operator_id() else {
            self.faults.close(txn.id());
            return;
        };
        let election = self.election.clone();
        let expected = prior.ballot();
        let planted = self.plant == Some(Plant::OperatorReservesForCandidate);
        let res = if planted {
            // The planted defect: the vacancy is reserved for the id given, as a candidate
            // reservation that candidate fills at once.
            let holder = holder.and_then(|pid| self.procs.get(pid).map(|p| p.candidate.clone()));
            self.rogue_operator(&txn, &prior, &ops, holder.as_ref())
        } else {
            self.rt.block_on(async {
                let out = election.force_vacate(&txn, &ops, expected).await?;
                let written = election.leader_record(&txn).await?;
                Ok::<_, ElectionError>((out, written))
            })
        };
        match res {
            Ok((OperatorOutcome::Done { .. }, written)) => {
                let mut entry = Entry::new(
                    "operator",
                    Some(ops.to_string()),
                    0,
                    if planted {
                        Op::RogueOperator
                    } else {
                        Op::ForceVacate
                    },
                );
                entry.prior = Some(RecordView::of(&prior));
                entry.leader = Some(RecordView::of(&written));
                self.log(format!(
                    "operator force-vacates ballot {} as {ops}{}",
                    expected.get(),
                    if holder.is_some() {
                        " (a registered candidate's id)"
                    } else {
                        ""
                    }
                ));
                self.stats.force_vacates = self.stats.force_vacates.saturating_add(1);
                self.schedule_operator(txn, Kind::Operator, entry);
            }
            _ => self.faults.close(txn.id()),
        }
    }

    /// The planted faulty `force_vacate`: a raw vacancy at ballot + 1 reserved for `holder`.
    fn rogue_operator(
        &mut self,
        txn: &MemTransaction,
        prior: &LeaderRecord,
        ops: &CandidateId,
        holder: Option<&Candidate>,
    ) -> Result<(OperatorOutcome, LeaderRecord), ElectionError> {
        let Some(holder) = holder else {
            return Ok((
                OperatorOutcome::Rejected(fdb_leader_election::ResignRejected::NotLeader {
                    current: None,
                }),
                prior.clone(),
            ));
        };
        let election = self.election.clone();
        let ballot = prior.ballot().next()?;
        let lease = prior.lease_duration();
        let (leader_key, fence_key) = (wire::leader_key(), wire::fence_key());
        let Some((record, fence)) = wire::vacancy_reserved_for(
            ballot,
            prior.renewal().saturating_add(1),
            nanos(lease),
            holder.id(),
            holder.priority(),
            ops,
        ) else {
            return Err(ElectionError::NotInitialized);
        };
        self.rt.block_on(async {
            txn.add_read_conflict_key(&leader_key)?;
            txn.add_read_conflict_key(&fence_key)?;
            txn.set(&leader_key, &record);
            txn.set(&fence_key, &fence);
            let written = election.leader_record(txn).await?;
            Ok((OperatorOutcome::Done { ballot }, written))
        })
    }

    fn operator_resign(&mut self) {
        let txn = self.open(Actor::Operator);
        let Some(prior) = self.current_record(&txn) else {
            self.faults.close(txn.id());
            return;
        };
        let Some((ops, _)) = self.operator_id() else {
            self.faults.close(txn.id());
            return;
        };
        let election = self.election.clone();
        let expected = prior.ballot();
        let res = self.rt.block_on(async {
            let out = election.request_resign(&txn, &ops, expected).await?;
            let written = election.leader_record(&txn).await?;
            Ok::<_, ElectionError>((out, written))
        });
        match res {
            Ok((OperatorOutcome::Done { .. }, written)) => {
                let mut entry = Entry::new("operator", Some(ops.to_string()), 0, Op::RequestResign);
                entry.prior = Some(RecordView::of(&prior));
                entry.leader = Some(RecordView::of(&written));
                self.log(format!(
                    "operator asks the leader of ballot {} to step down, as {ops}",
                    expected.get()
                ));
                self.stats.operator_resigns = self.stats.operator_resigns.saturating_add(1);
                self.schedule_operator(txn, Kind::Operator, entry);
            }
            _ => self.faults.close(txn.id()),
        }
    }

    /// The operator removes a registration by id, with a `Candidate` value it builds for that
    /// id, while the real process cycles (it must never create a second believer).
    fn operator_unregister(&mut self) {
        let running: Vec<usize> = self
            .procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status == Status::Running && !p.shutdown)
            .map(|(pid, _)| pid)
            .collect();
        let txn = self.open(Actor::Operator);
        let Some(prior) = self.current_record(&txn) else {
            self.faults.close(txn.id());
            return;
        };
        // Mostly the leader (the case that must not create a second believer, above all
        // after a configuration shortened the lease), else anyone.
        let owner = prior.owner().and_then(|o| {
            running.iter().copied().find(|&pid| {
                self.procs
                    .get(pid)
                    .is_some_and(|p| p.candidate.id() == o.id())
            })
        });
        let pid = match owner {
            Some(pid) if self.rng.random_ratio(7, 10) => pid,
            _ => match self.pick(&running) {
                Some(pid) => pid,
                None => {
                    self.faults.close(txn.id());
                    return;
                }
            },
        };
        let Some((id, prio)) = self
            .procs
            .get(pid)
            .map(|p| (p.candidate.id().clone(), p.candidate.priority()))
        else {
            self.faults.close(txn.id());
            return;
        };
        let stranger = Candidate::with_clock(
            id.clone(),
            prio,
            Arc::new(crate::time::TrueClock(self.time.clone())),
        );
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            let out = election.unregister_candidate(&txn, &stranger).await?;
            let written = election.leader_record(&txn).await?;
            Ok::<_, ElectionError>((out, written))
        });
        match res {
            Ok((_, written)) => {
                let mut entry =
                    Entry::new("operator", Some(id.to_string()), 0, Op::OperatorUnregister);
                if written != prior {
                    entry.prior = Some(RecordView::of(&prior));
                    entry.leader = Some(RecordView::of(&written));
                }
                entry.candidates_cleared.push(id.to_string());
                let label = self.label(pid);
                self.log(format!("operator unregisters {label} by its id"));
                self.stats.operator_unregisters = self.stats.operator_unregisters.saturating_add(1);
                self.schedule_operator(txn, Kind::Operator, entry);
            }
            Err(_) => self.faults.close(txn.id()),
        }
    }

    fn schedule_operator(&mut self, txn: MemTransaction, kind: Kind, entry: Entry) {
        self.schedule_commit(Pending {
            actor: Actor::Operator,
            txn,
            kind,
            entry,
            zombie: false,
            faultless: false,
            op: None,
            landing: false,
        });
    }

    /// An application opens a transaction (taking its read version) to query later.
    fn stale_query_open(&mut self) {
        let running: Vec<usize> = self
            .procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status == Status::Running)
            .map(|(pid, _)| pid)
            .collect();
        let Some(pid) = self.pick(&running) else {
            return;
        };
        let txn = self.open(Actor::Proc(pid));
        let renewal = self.current_record(&txn).map(|r| r.renewal());
        let _ = self
            .rt
            .block_on(txn.get(wire::COUNTER_KEY, ReadMode::Snapshot));
        match renewal {
            Some(renewal) => self.stale.push(StaleQuery { pid, txn, renewal }),
            None => self.faults.close(txn.id()),
        }
        let d = self.leases(250, 1_000);
        self.queue.push(
            self.now.saturating_add(d),
            Event::Chaos(Chaos::StaleQueryAsk),
        );
    }

    /// The application queries on its old read version: the candidate's belief must not
    /// change (a renewal number behind the leader's own is no evidence of loss).
    fn stale_query_ask(&mut self) {
        let Some(q) = (!self.stale.is_empty()).then(|| self.stale.remove(0)) else {
            return;
        };
        let Some(cand) = self.procs.get(q.pid).map(|p| p.candidate.clone()) else {
            self.faults.close(q.txn.id());
            return;
        };
        let now_renewal = {
            let txn = self.db.create_transaction();
            self.current_record(&txn).map(|r| r.renewal())
        };
        let before = cand.leadership();
        let election = self.election.clone();
        let _ = self.rt.block_on(async {
            election.is_leader(&q.txn, &cand).await?;
            election.current_leader(&q.txn, &cand).await
        });
        self.faults.close(q.txn.id());
        if now_renewal.is_some_and(|r| r > q.renewal) {
            self.stats.stale_queries = self.stats.stale_queries.saturating_add(1);
        }
        let after = cand.leadership();
        if before.map(|l| (l.ballot, l.valid_until)) != after.map(|l| (l.ballot, l.valid_until)) {
            let label = self.label(q.pid);
            self.found.push(Violation::new(
                OracleId::Progress,
                format!("{label}: a query on an old read version changed what it believes"),
            ));
        }
    }
}
