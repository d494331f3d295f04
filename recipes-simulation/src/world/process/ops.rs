//! Operations: the transactions the machine asks for, opened at one event and committed at
//! a later one, with their faults, timeouts, abandonment and the delivery of their outcome.

use fdb_leader_election::runner::machine::{CycleReport, Event as In, Failure};
use fdb_leader_election::{ElectionError, ResignOutcome, TxnError, TxnErrorKind};

use super::{OpKind, Status, unexpected};
use crate::events::Event;
use crate::history::{CandView, Entry, Op, RecordView};
use crate::oracles::{Progress, TxnRead};
use crate::time::nanos;
use crate::world::commit::kind_name;
use crate::world::{Actor, Kind, Pending, World};

impl World {
    pub(super) fn start_op(&mut self, pid: usize, kind: OpKind) {
        self.start_op_with(pid, kind, None);
    }

    /// Plant `keep-closed-guard`: an operation with no transaction, ended by its timeout.
    pub(super) fn start_dropped(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.op_seq = p.op_seq.saturating_add(1);
        let seq = p.op_seq;
        p.op = Some((seq, OpKind::DroppedResign));
        let timeout = nanos(p.machine.config().transaction_timeout());
        let d = self.local_delay(pid, timeout);
        self.queue
            .push(self.now.saturating_add(d), Event::Timeout { pid, op: seq });
    }

    /// Starts an operation: its first attempt now, and the executor's timeout.
    pub(super) fn start_op_with(&mut self, pid: usize, kind: OpKind, expected: Option<u64>) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.op_seq = p.op_seq.saturating_add(1);
        let seq = p.op_seq;
        p.op = Some((seq, kind));
        let timeout = nanos(p.machine.config().transaction_timeout());
        let d = self.local_delay(pid, timeout);
        self.queue
            .push(self.now.saturating_add(d), Event::Timeout { pid, op: seq });
        self.attempt(pid, seq, kind, expected);
    }

    /// One attempt of the operation `seq`: runs it on a fresh transaction and schedules its
    /// commit. A conflict or `transaction_too_old` runs it again (the store's retry loop).
    pub(super) fn attempt(&mut self, pid: usize, seq: u64, kind: OpKind, expected: Option<u64>) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        if kind == OpKind::Cycle && self.rogue_due(pid) {
            self.start_rogue(pid, seq);
            return;
        }
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let believed = cand.leadership().is_some();
        let result: Result<(Kind, Entry, Option<Box<TxnRead>>), ElectionError> = match kind {
            OpKind::DroppedResign => {
                // No transaction: the plant's executor never runs it.
                self.faults.close(txn.id());
                return;
            }
            OpKind::Register => {
                let init = self.params.config.clone();
                let res = self.rt.block_on(async {
                    election.initialize_with_config(&txn, &init).await?;
                    election.register_candidate(&txn, &cand).await?;
                    let config = election.read_config(&txn).await?;
                    let me = election.get_candidate(&txn, cand.id()).await?;
                    Ok::<_, ElectionError>((config, me))
                });
                res.map(|(config, me)| {
                    let mut entry = self.entry_for(pid, Op::Register);
                    if let Some(rec) = me {
                        entry
                            .candidates_set
                            .push((cand.id().to_string(), CandView::of(&rec)));
                    }
                    (Kind::Register(Box::new(config)), entry, None)
                })
            }
            OpKind::Cycle => self.cycle_body(pid, &txn, &cand),
            OpKind::Resign => {
                let expected = expected.map(fdb_leader_election::Ballot::new);
                let res = self.rt.block_on(async {
                    let prior = election.leader_record(&txn).await?;
                    let outcome = election.resign_leadership(&txn, &cand, expected).await?;
                    let written = election.leader_record(&txn).await?;
                    Ok::<_, ElectionError>((prior, outcome, written))
                });
                // Inside the transaction, before its commit.
                self.feed(pid, In::ResignDecided);
                res.map(|(prior, outcome, written)| {
                    let mut entry = self.entry_for(pid, Op::Resign);
                    let mut read = None;
                    if matches!(outcome, ResignOutcome::Resigned { .. }) {
                        read = self.txn_read(pid, &txn, true, believed);
                        let written = self
                            .planted_reservation(pid, &txn, Op::Resign, read.as_deref(), &written)
                            .unwrap_or(written);
                        entry.prior = Some(RecordView::of(&prior));
                        entry.leader = Some(RecordView::of(&written));
                    } else {
                        entry.op = Op::ResignRejected;
                    }
                    (Kind::Resign, entry, read)
                })
            }
            OpKind::Leave => {
                let res = self.rt.block_on(async {
                    let prior = election.leader_record(&txn).await?;
                    let outcome = election.unregister_candidate(&txn, &cand).await?;
                    let written = election.leader_record(&txn).await?;
                    Ok::<_, ElectionError>((prior, outcome, written))
                });
                res.map(|(prior, outcome, written)| {
                    let resigned = matches!(outcome, Some(ResignOutcome::Resigned { .. }));
                    let mut entry = self.entry_for(pid, Op::Unregister { resigned });
                    let mut read = None;
                    if prior != written {
                        read = self.txn_read(pid, &txn, true, believed);
                        let op = Op::Unregister { resigned };
                        let written = self
                            .planted_reservation(pid, &txn, op, read.as_deref(), &written)
                            .unwrap_or(written);
                        entry.prior = Some(RecordView::of(&prior));
                        entry.leader = Some(RecordView::of(&written));
                    }
                    entry.candidates_cleared.push(cand.id().to_string());
                    (Kind::Unregister, entry, read)
                })
            }
        };
        // The process's new transaction has taken its read version: commits of its earlier
        // ones that are still in flight land now.
        self.land_held_commits(pid);
        match result {
            Ok((kind, entry, read)) => {
                self.schedule_commit(Pending {
                    op: Some(seq),
                    read,
                    ..Pending::new(Actor::Proc(pid), txn, kind, entry)
                });
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, seq, &e);
            }
        }
    }

    /// An operation's attempt failed before its commit (or its commit failed).
    pub(super) fn op_failed(&mut self, pid: usize, seq: u64, e: &ElectionError) {
        let label = self.label(pid);
        if let Some(what) = unexpected(e) {
            self.log(format!("{label} failed: {what}"));
            self.found
                .push(Progress::unexpected_error(&label, "operation", &what));
        }
        if let ElectionError::Database(t) = e {
            self.count_txn_error(t);
            self.log(format!("{label} operation failed: {}", kind_name(t)));
        }
        let Some(kind) = self.current_op(pid, seq) else {
            return;
        };
        if let ElectionError::Database(t) = e {
            if matches!(t.kind(), TxnErrorKind::Conflict | TxnErrorKind::TooOld) {
                // The store's retry loop runs the transaction again at once.
                let expected = self
                    .procs
                    .get(pid)
                    .and_then(|p| p.guard.as_ref().map(|g| g.ballot).or(p.cached_token));
                self.attempt(pid, seq, kind, expected);
                return;
            }
        }
        self.finish_op(pid, Err(Failure::of(e)));
    }

    /// The kind of operation `seq`, if it is the one in flight.
    pub(in crate::world) fn current_op(&self, pid: usize, seq: u64) -> Option<OpKind> {
        self.procs
            .get(pid)
            .and_then(|p| p.op)
            .filter(|(s, _)| *s == seq)
            .map(|(_, k)| k)
    }

    /// The operation in flight ended: feed the machine its result.
    pub(in crate::world) fn finish_op(&mut self, pid: usize, result: Result<Kind, Failure>) {
        let Some((_, kind)) = self.procs.get_mut(pid).and_then(|p| p.op.take()) else {
            return;
        };
        self.release_held_revoke(pid);
        let event = match (kind, result) {
            (OpKind::Register, Ok(Kind::Register(config))) => {
                if let Some(p) = self.procs.get_mut(pid) {
                    if p.status == Status::Registering {
                        p.status = Status::Running;
                    }
                }
                In::Registered(Ok(*config))
            }
            (OpKind::Register, Err(f)) => In::Registered(Err(f)),
            (OpKind::Cycle, Ok(Kind::Cycle(cycle))) => {
                let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
                    return;
                };
                let adopted = cand.adopt((*cycle).clone());
                let report = CycleReport::new(&cycle, &adopted);
                drop(cycle);
                self.rogue_observe(pid, report.record());
                self.note_seen(pid, report.record());
                // (The planted uncapped belief ends where the library's would have: when a
                // cycle finds the record no longer names it at that ballot.)
                if let Some(p) = self.procs.get_mut(pid) {
                    let mine = report.record().owner().is_some_and(|o| o.id() == cand.id());
                    if p.uncapped
                        .is_some_and(|(b, _)| !mine || report.record().ballot().get() != b)
                    {
                        p.uncapped = None;
                    }
                }
                In::CycleCommitted(report)
            }
            (OpKind::Cycle, Err(f)) => {
                self.closed_op_failed(pid);
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cycle_failed = true;
                }
                if f.kind() == "not_registered" {
                    self.stats.reregistrations = self.stats.reregistrations.saturating_add(1);
                }
                In::CycleFailed(f)
            }
            (OpKind::Resign, result) => {
                if result.is_err() {
                    self.closed_op_failed(pid);
                }
                In::ResignDone
            }
            (OpKind::DroppedResign, _) => In::ResignDone,
            (OpKind::Leave, Ok(_)) => In::Left(Ok(())),
            (OpKind::Leave, Err(f)) => In::Left(Err(f)),
            (_, Ok(_)) => In::Tick,
        };
        if let Some(p) = self.procs.get_mut(pid) {
            if p.status == Status::Registering && !matches!(event, In::Registered(Err(_))) {
                // Registered before (an eviction made it register again).
                p.status = Status::Running;
            }
        }
        self.feed(pid, event);
    }

    /// The plants' held revoke and held deadline take effect once the transaction ended.
    pub(super) fn release_held_revoke(&mut self, pid: usize) {
        if let Some(p) = self.procs.get_mut(pid) {
            if p.held_revoke {
                p.held_revoke = false;
                if let Some(g) = p.guard.as_mut() {
                    g.revoked = true;
                }
            }
            if let Some(deadline) = p.held_deadline.take() {
                if let Some(g) = p.guard.as_mut() {
                    g.deadline = deadline;
                }
            }
        }
    }

    /// The executor's transaction timeout: an operation still in flight fails as maybe
    /// committed; its commit, if still pending, lands later with nobody listening.
    pub(in crate::world) fn op_timeout(&mut self, pid: usize, seq: u64) {
        match self.current_op(pid, seq) {
            None => return,
            Some(OpKind::DroppedResign) => {
                self.finish_op(pid, Ok(Kind::Resign));
                return;
            }
            Some(_) => {}
        }
        self.abandon(pid, seq);
        let label = self.label(pid);
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
        self.log(format!("{label} operation timed out (maybe committed)"));
        let timeout = fdb_leader_election::TransactionTimedOut {
            after: self.procs.get(pid).map_or_else(Default::default, |p| {
                p.machine.config().transaction_timeout()
            }),
        };
        self.finish_op(pid, Err(Failure::of(&timeout.into_error())));
    }

    /// Abandons operation `seq`, as the tokio runner drops a transaction it stops waiting for:
    /// its commit, if pending, still lands (nobody hears of it), and what the attempt
    /// prepared (a cycle) is dropped.
    pub(super) fn abandon(&mut self, pid: usize, seq: u64) {
        for q in self.pending.values_mut() {
            if q.actor == Actor::Proc(pid) && q.op == Some(seq) {
                q.zombie = true;
                q.kind = Kind::Abandoned;
            }
        }
        // A slow reply on its way is ignored when it arrives; what it carries (a cycle) is
        // dropped now.
        for r in self.replies.values_mut() {
            if r.pid == pid && r.op == Some(seq) {
                r.kind = Kind::Abandoned;
            }
        }
    }

    /// A commit's result reaches its process.
    pub(in crate::world) fn deliver(
        &mut self,
        pid: usize,
        op: Option<u64>,
        kind: Kind,
        result: Result<(), TxnError>,
    ) {
        if matches!(kind, Kind::Work | Kind::Shadow) {
            if let Some(p) = self.procs.get_mut(pid) {
                p.work_inflight = p.work_inflight.saturating_sub(1);
            }
            self.work_done(pid);
            return;
        }
        if self.procs.get(pid).is_none_or(|p| p.status == Status::Dead) {
            return;
        }
        let Some(seq) = op else {
            return;
        };
        if let Kind::Rogue {
            ballot,
            valid_until,
        } = kind
        {
            // Its commit result, known or not, is what the rogue acts on (only a confirmed
            // commit makes it believe).
            self.rogue_done(pid, seq, ballot, valid_until, result.is_ok());
            return;
        }
        match result {
            Ok(()) => {
                if self.current_op(pid, seq).is_some() {
                    self.finish_op(pid, Ok(kind));
                }
            }
            Err(e) => {
                // The failed attempt's cycle ends with its transaction, before a retry.
                drop(kind);
                self.op_failed(pid, seq, &ElectionError::Database(e));
            }
        }
    }
}
