//! The operator and the application at the edges (DESIGN §9's coverage rule, §10): writes of
//! every configuration field (the lease shortened and lengthened while a leader holds it),
//! `force_vacate` with arbitrary ids (registered candidates' among them), `request_resign`,
//! registrations removed by id while their owners cycle, and queries on read versions older
//! than the leader's last renewal. Each chain draws its next time like the chaos chains, and
//! nothing new starts once the quiet phase begins (which restores the configuration).

mod config;
pub(super) mod stale;
mod steps;

use std::sync::Arc;

use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, ElectionTxn, LeaderRecord, MemTransaction,
    OperatorOutcome,
};
use rand::{Rng, RngCore};

use super::{Actor, Kind, Pending, Status, World};
use crate::events::{Chaos, Event, Shape};
use crate::history::{Entry, Op, RecordView};
use crate::plants::Plant;
use crate::time::nanos;
use crate::wire;

impl World {
    /// A chain step of the operator and application edges.
    pub(super) fn edge(&mut self, c: Chaos) {
        match c {
            Chaos::ConfigChange => {
                if self.rng.random_ratio(1, 2) {
                    let rounds = self.rng.random_range(1..=3u8);
                    self.change_config(Shape::LongAttempts, rounds);
                } else {
                    self.change_config(Shape::Any, 0);
                }
            }
            Chaos::ConfigStep {
                shape,
                waits,
                rounds,
            } if !self.quiet => {
                if shape == Shape::ShortLease && waits > 0 && !self.leader_on_written_config() {
                    // The cut waits (a few times) for a leader renewing with the long attempts.
                    let hb = self.operator.heartbeat;
                    let d = self.between(hb / 2, hb);
                    self.queue.push(
                        self.now.saturating_add(d),
                        Event::Chaos(Chaos::ConfigStep {
                            shape,
                            waits: waits.saturating_sub(1),
                            rounds,
                        }),
                    );
                } else {
                    self.change_config(shape, rounds);
                }
            }
            Chaos::ForceVacate => self.force_vacate(),
            Chaos::OperatorResign => self.operator_resign(),
            Chaos::OperatorUnregister => self.operator_unregister(),
            Chaos::StaleQueryOpen => self.stale_query_open(),
            Chaos::StaleQueryAsk => self.stale_query_ask(),
            _ => {}
        }
    }

    /// The record now (outside faults), for operators deciding what to write.
    pub(super) fn current_record(&mut self, txn: &MemTransaction) -> Option<LeaderRecord> {
        let election = self.election.clone();
        self.rt.block_on(election.leader_record(txn)).ok()
    }

    /// The running (registered) processes, in pid order.
    pub(super) fn running(&self) -> Vec<usize> {
        let running =
            |(pid, p): (usize, &super::Process)| (p.status == Status::Running).then_some(pid);
        self.procs.iter().enumerate().filter_map(running).collect()
    }

    /// An id for the operator: half the time a registered candidate's (DESIGN §10.4: it must
    /// not let that candidate in early), else a fresh operator id.
    pub(super) fn operator_id(&mut self) -> Option<(CandidateId, Option<usize>)> {
        let registered = self.running();
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
        match self.ask_resign(&txn, &prior, &ops, None) {
            Ok(Some(entry)) => {
                self.log(format!(
                    "operator asks the leader of ballot {} to step down, as {ops}",
                    prior.ballot().get()
                ));
                self.stats.operator_resigns = self.stats.operator_resigns.saturating_add(1);
                self.schedule_operator(txn, Kind::Operator, entry);
            }
            _ => self.faults.close(txn.id()),
        }
    }

    /// The operator `ops` asks the leader of `prior` to step down in `txn` (`resign`), or to
    /// hand over to the candidate `to` names (`resign --to`): the history entry of a request
    /// written, `None` if the leader changed meanwhile, or the refusal.
    pub(super) fn ask_resign(
        &mut self,
        txn: &MemTransaction,
        prior: &LeaderRecord,
        ops: &CandidateId,
        to: Option<&str>,
    ) -> Result<Option<Entry>, ElectionError> {
        let election = self.election.clone();
        let expected = prior.ballot();
        let (out, written) = self.rt.block_on(async {
            let out = match to {
                Some(to) => election.request_resign_to(txn, ops, expected, to).await?,
                None => election.request_resign(txn, ops, expected).await?,
            };
            let written = election.leader_record(txn).await?;
            Ok::<_, ElectionError>((out, written))
        })?;
        if !matches!(out, OperatorOutcome::Done { .. }) {
            return Ok(None);
        }
        let mut entry = Entry::new("operator", Some(ops.to_string()), 0, Op::RequestResign);
        entry.prior = Some(RecordView::of(prior));
        entry.leader = Some(RecordView::of(&written));
        Ok(Some(entry))
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
        self.unregister_by_id(pid, txn, &prior);
    }

    /// The operator removes the registration of `pid` (a process that crashed) by its id.
    pub(super) fn operator_remove(&mut self, pid: usize) {
        let txn = self.open(Actor::Operator);
        let Some(prior) = self.current_record(&txn) else {
            self.faults.close(txn.id());
            return;
        };
        self.unregister_by_id(pid, txn, &prior);
    }

    /// The operator's `unregister_candidate` for `pid`'s id, in `txn` (which read `prior`).
    fn unregister_by_id(&mut self, pid: usize, txn: MemTransaction, prior: &LeaderRecord) {
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
                if written != *prior {
                    entry.prior = Some(RecordView::of(prior));
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

    pub(super) fn schedule_operator(&mut self, txn: MemTransaction, kind: Kind, entry: Entry) {
        self.schedule_commit(Pending::new(Actor::Operator, txn, kind, entry));
    }
}
