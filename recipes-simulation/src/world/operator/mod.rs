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
use crate::events::{Chaos, Event, Shape};
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

/// The lease factors (numerator, denominator) of the world's lease each shape draws from.
fn lease_factors(shape: Shape) -> &'static [(u64, u64)] {
    match shape {
        Shape::Any => &[
            (1, 4),
            (1, 3),
            (1, 2),
            (2, 3),
            (1, 1),
            (3, 2),
            (2, 1),
            (3, 1),
        ],
        Shape::Normal => &[(1, 2), (2, 3), (1, 1), (3, 2), (2, 1), (3, 1)],
        Shape::LongAttempts => &[(2, 1), (3, 1)],
        Shape::ShortLease => &[(1, 8), (1, 6)],
    }
}

/// How many times a lease cut waits for a leader renewing with the long attempts.
const CUT_WAITS: u8 = 6;

/// How many times the operator draws again when the library refuses a configuration.
const CONFIG_DRAWS: u32 = 8;

/// The shortest transaction timeout the operator draws when the heartbeat leaves room.
const MIN_ATTEMPT: Nanos = 20 * crate::time::MS;

/// The largest clock-rate bound the operator writes (the library accepts below 50%).
const MAX_RHO_PPM: u32 = 450_000;

impl World {
    /// A valid configuration with every field drawn (DESIGN §10.6: the library refuses one
    /// whose belief cannot be renewed without a loop, `ConfigError::BeliefTooShortToRenew`;
    /// the draw is repeated, a bounded number of times, when it does). Leases from an eighth
    /// of the world's to three times it, heartbeats of a third to a sixth of the lease,
    /// transaction timeouts up to 0.9 heartbeat, ρ from the world's (never below the clocks'
    /// bound: clocks are drawn within it) up to 45%.
    fn draw_config(&mut self, shape: Shape) -> Result<ElectionConfig, String> {
        let mut refused = String::new();
        for _ in 0..CONFIG_DRAWS {
            match self.draw_config_once(shape) {
                Ok(config) => return Ok(config),
                Err(e) => refused = e,
            }
        }
        Err(refused)
    }

    fn draw_config_once(&mut self, shape: Shape) -> Result<ElectionConfig, String> {
        let factors = lease_factors(shape);
        let (num, den) = factors
            .get(self.rng.random_range(0..factors.len()))
            .copied()
            .unwrap_or((1, 1));
        let lease = crate::time::scale(self.params.lease, num, den);
        let most = if shape == Shape::LongAttempts { 4 } else { 6 };
        let heartbeat = lease
            .checked_div(self.rng.random_range(3..=most))
            .unwrap_or(lease);
        let world_rho = self.params.rho_ppm;
        let rho = if shape == Shape::LongAttempts || self.rng.random_bool(0.5) {
            world_rho
        } else {
            self.rng
                .random_range(world_rho..=MAX_RHO_PPM.max(world_rho))
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
        let (lo, hi) = match shape {
            Shape::LongAttempts => (6, 9),
            Shape::ShortLease => (1, 5),
            Shape::Any | Shape::Normal => (1, 9),
        };
        // Attempts of at least 20 ms where the heartbeat allows (most commits take 0.5–15
        // ms): shorter ones would time out nearly always.
        let top = crate::time::scale(heartbeat, hi, 10);
        let floor = crate::time::scale(heartbeat, lo, 10)
            .max(MIN_ATTEMPT)
            .min(top);
        let timeout = self.between(floor, top).max(crate::time::MS);
        let timeout_mult = self.rng.random_range(2..=3u64);
        let builder = ElectionConfig::builder()
            .lease_duration(dur(lease))
            .heartbeat_interval(dur(heartbeat))
            .candidate_timeout(dur(lease.saturating_mul(timeout_mult)))
            .election_enabled(self.rng.random_ratio(9, 10))
            .allow_preemption(self.rng.random_bool(0.7))
            .max_clock_rate_error_ppm(rho)
            .min_tenure(dur(min_tenure))
            .handover_grace(dur(grace))
            .takeover_stagger(dur(stagger))
            .transaction_timeout(dur(timeout));
        // The reservation timeout: its default (two heartbeats), or anywhere up to the lease.
        let builder = if self.rng.random_bool(0.5) {
            builder
        } else {
            builder.reservation_timeout(dur(self.between(heartbeat / 2, lease).max(1)))
        };
        // The version policy, any of them.
        let policy = fdb_leader_election::VersionPolicy::ALL
            .get(self.rng.random_range(0..4usize))
            .copied()
            .unwrap_or_default();
        builder
            .version_policy(policy)
            .build()
            .map_err(|e| e.to_string())
    }

    /// The operator writes a configuration drawn from `shape`. A configuration with long
    /// attempts is followed, a little over one of the previous configuration's heartbeats
    /// later and once a leader renews with it, by a lease of an eighth to a quarter of the
    /// world's: a leader whose renewal writes it caps its belief inside the transaction,
    /// while the reply may come as late as the old configuration's transaction timeout
    /// (DESIGN §10.3). A cut is `rounds` such pairs in a row. A lease shorter than half the
    /// world's is replaced a little over one of the previous configuration's heartbeats later
    /// (short heartbeats cost many events).
    fn change_config(&mut self, shape: Shape, rounds: u8) {
        match self.draw_config(shape) {
            Ok(config) => {
                let lease = nanos(config.lease_duration());
                let heartbeat = nanos(config.heartbeat_interval());
                let previous = self.operator.heartbeat;
                let cut = matches!(shape, Shape::LongAttempts | Shape::ShortLease);
                let why = if cut { "a lease cut" } else { "every field" };
                if !self.write_config_with(config.clone(), why, cut) {
                    return;
                }
                self.operator.heartbeat = heartbeat;
                self.operator.written = Some(config);
                let (lo, hi) = (previous, previous.saturating_mul(3) / 2);
                let next = match shape {
                    Shape::LongAttempts => Some((
                        self.between(previous.saturating_mul(6) / 5, previous.saturating_mul(2)),
                        Shape::ShortLease,
                        rounds,
                    )),
                    Shape::ShortLease if rounds > 1 => Some((
                        self.between(lo, hi),
                        Shape::LongAttempts,
                        rounds.saturating_sub(1),
                    )),
                    _ if lease < self.params.lease / 2 => {
                        Some((self.between(lo, hi), Shape::Normal, 0))
                    }
                    _ => None,
                };
                if let Some((d, shape, rounds)) = next {
                    self.queue.push(
                        self.now.saturating_add(d),
                        Event::Chaos(Chaos::ConfigStep {
                            shape,
                            waits: CUT_WAITS,
                            rounds,
                        }),
                    );
                }
            }
            Err(e) => self.log(format!("operator drew no valid configuration: {e}")),
        }
    }

    /// Whether some running process leads (a live guard) with the configuration the
    /// operator wrote last.
    fn leader_on_written_config(&self) -> bool {
        let Some(written) = self.operator.written.as_ref() else {
            return false;
        };
        self.procs.iter().any(|p| {
            p.status == Status::Running
                && p.paused_until <= self.now
                && p.guard.as_ref().is_some_and(|g| !g.revoked)
                && p.machine.config() == written
        })
    }

    /// Writes `config` as the operator; `false` if the transaction failed before its commit
    /// (retried by the caller, if at all).
    pub(super) fn write_config(&mut self, config: ElectionConfig, why: &str) -> bool {
        self.write_config_with(config, why, false)
    }

    /// Writes `config` as the operator; a `faultless` commit gets no injected fault (the
    /// steps of a lease cut: an operator retrying until the write commits).
    fn write_config_with(&mut self, config: ElectionConfig, why: &str, faultless: bool) -> bool {
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
                    faultless,
                    op: None,
                    landing: false,
                    read: None,
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

    /// An id for the operator: half the time a registered candidate's (DESIGN §10.4: it must
    /// not let that candidate in early), else a fresh operator id.
    pub(super) fn operator_id(&mut self) -> Option<(CandidateId, Option<usize>)> {
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
        self.schedule_commit(Pending {
            actor: Actor::Operator,
            txn,
            kind,
            entry,
            zombie: false,
            faultless: false,
            op: None,
            landing: false,
            read: None,
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
