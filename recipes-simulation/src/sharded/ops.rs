//! A member's operations: its cycles and its leave, and their results.
//!
//! A member's operations, as the executor of its `ShardMachine` runs them: the member cycle
//! and the leave (each in a transaction opened at one event and committed at a later one,
//! retried by the store's retry loop, abandoned at the executor's timeout), and their results.

use std::collections::BTreeSet;

use fdb_leader_election::runner::machine::Failure;
use fdb_leader_election::shard::MemberCycle;
use fdb_leader_election::shard::machine::ShardEvent;
use fdb_leader_election::{
    ElectionError, ElectionTxn, ReadMode, ShardId, TransactionTimedOut, TxnErrorKind,
};

use super::commit::{PKind, Pending, Who};
use super::{Ev, World};
use crate::shard_plants::ShardPlant;
use crate::time::dur;

impl World {
    pub(super) fn start_cycle(
        &mut self,
        pid: usize,
        ready: BTreeSet<ShardId>,
    ) -> Option<ShardEvent> {
        let heartbeat = self.p.heartbeat;
        let m = self.members.get_mut(pid)?;
        let late = m
            .pacing
            .cycle_started(&m.label, m.clock.local_now(), heartbeat);
        let seq = m.next_op;
        m.next_op = seq.saturating_add(1);
        m.op = Some(seq);
        m.op_leave = false;
        m.ready = ready;
        if let Some(v) = late {
            self.found.push(v);
        }
        let timeout = self.local_delay(pid, self.p.txn_timeout);
        self.queue.push(
            self.now.saturating_add(timeout),
            Ev::Timeout { pid, op: seq },
        );
        self.attempt_cycle(pid, seq)
    }

    /// One attempt of cycle `seq`; a retryable error before the commit is retried after a
    /// short back-off until the executor's timeout, as the store's retry loop does.
    pub(super) fn attempt_cycle(&mut self, pid: usize, seq: u64) -> Option<ShardEvent> {
        let m = self
            .members
            .get(pid)
            .filter(|m| m.alive && m.op == Some(seq))?;
        let (member, ready) = (m.member.clone(), m.ready.clone());
        let txn = self.open(pid);
        let result = self
            .rt
            .block_on(self.election.member_cycle(&txn, &member, &ready));
        // Commits of this member whose replies were lost land now, after the read.
        self.land_held(pid);
        let cycle = match result {
            Ok(c) => c,
            Err(e) => {
                self.faults.close(txn.id());
                let label = self.label(pid);
                self.log(format!("{label} cycle refused: {e}"));
                if e.is_retryable() {
                    self.count_error(&e);
                    self.retry_later(pid, seq);
                    return None;
                }
                return self.op_failed(pid, &e);
            }
        };
        self.compose(pid, &txn, &member);
        let label = self.label(pid);
        self.log(format!(
            "{label} cycle: acquires {:?} hands over {:?}",
            cycle.acquired(),
            cycle.released()
        ));
        // Inside the transaction, before the commit: the machine revokes what is handed over
        // and caps the guards' deadline.
        self.feed(pid, ShardEvent::CycleDecided);
        self.schedule_commit(Pending::new(
            Who::Member(pid),
            txn,
            PKind::Cycle(Box::new(cycle)),
            Some(seq),
        ));
        None
    }

    fn retry_later(&mut self, pid: usize, op: u64) {
        let d = self.between(crate::time::MS, 10 * crate::time::MS);
        self.queue
            .push(self.now.saturating_add(d), Ev::Retry { pid, op });
    }

    /// A retry of operation `op` is due.
    pub(super) fn retry(&mut self, pid: usize, op: u64) {
        let leave = self.members.get(pid).is_some_and(|m| m.op_leave);
        let next = if leave {
            self.attempt_leave(pid, op)
        } else {
            self.attempt_cycle(pid, op)
        };
        if let Some(ev) = next {
            self.feed(pid, ev);
        }
    }

    pub(super) fn start_leave(&mut self, pid: usize) -> Option<ShardEvent> {
        if self.plant == Some(ShardPlant::LeaveWithoutHandover) {
            return Some(ShardEvent::Left(Ok(())));
        }
        let m = self.members.get_mut(pid)?;
        let seq = m.next_op;
        m.next_op = seq.saturating_add(1);
        m.op = Some(seq);
        m.op_leave = true;
        let timeout = self.local_delay(pid, self.p.txn_timeout);
        self.queue.push(
            self.now.saturating_add(timeout),
            Ev::Timeout { pid, op: seq },
        );
        self.attempt_leave(pid, seq)
    }

    fn attempt_leave(&mut self, pid: usize, seq: u64) -> Option<ShardEvent> {
        let m = self
            .members
            .get(pid)
            .filter(|m| m.alive && m.op == Some(seq))?;
        let member = m.member.clone();
        let label = m.label.clone();
        self.log(format!(
            "{label} leaves, owning {:?}",
            member.owned_shards()
        ));
        let kept = if self.plant == Some(ShardPlant::LeaveKeepsAShard) {
            self.a_shard_of(member.id().as_str())
        } else {
            None
        };
        let txn = self.open(pid);
        let result = self.rt.block_on(self.election.leave(&txn, &member));
        if let (Ok(()), Some((key, raw))) = (&result, kept) {
            txn.set(&key, &raw);
        }
        self.land_held(pid);
        if let Err(e) = result {
            self.faults.close(txn.id());
            self.count_error(&e);
            if e.is_retryable() {
                self.retry_later(pid, seq);
                return None;
            }
            let m = self.members.get_mut(pid)?;
            m.op = None;
            return Some(ShardEvent::Left(Err(Failure::of(&e))));
        }
        self.schedule_commit(Pending::new(Who::Member(pid), txn, PKind::Leave, Some(seq)));
        None
    }

    /// The leave-keeps-a-shard plant: the key and stored record of the first shard the
    /// oracles last saw owned by `member`, read outside any fault.
    fn a_shard_of(&self, member: &str) -> Option<(Vec<u8>, Vec<u8>)> {
        let s = self
            .oracles
            .records
            .iter()
            .position(|(_, o)| o.as_ref().is_some_and(|(id, _)| id == member))?;
        let key = self
            .election
            .shard_key(ShardId::new(u32::try_from(s).ok()?));
        let raw = self.read_bypass(async |_, txn| {
            txn.get(&key, ReadMode::Snapshot)
                .await
                .map_err(ElectionError::from)
        });
        Some((key, raw.ok().flatten()?))
    }

    fn op_failed(&mut self, pid: usize, e: &ElectionError) -> Option<ShardEvent> {
        self.count_error(e);
        let m = self.members.get_mut(pid)?;
        m.op = None;
        self.cycle_failed(pid, Failure::of(e))
    }

    /// The executor learned that a member cycle failed: the machine hears it (S8 times the
    /// next cycle from now). The retry-without-back-off plant instead runs the cycle again at
    /// once, once, without telling the machine.
    fn cycle_failed(&mut self, pid: usize, failure: Failure) -> Option<ShardEvent> {
        let retry_inline = self.plant == Some(ShardPlant::RetryWithoutBackOff);
        let m = self.members.get_mut(pid)?;
        m.pacing.failed(m.clock.local_now());
        if retry_inline && !std::mem::replace(&mut m.retried_inline, true) {
            let ready = m.ready.clone();
            return self.start_cycle(pid, ready);
        }
        m.retried_inline = false;
        Some(ShardEvent::CycleFailed(failure))
    }

    /// The executor's timeout: the operation fails as maybe committed; its commit, if still
    /// pending, lands later with nobody listening.
    pub(super) fn op_timeout(&mut self, pid: usize, op: u64) {
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        if !m.alive || m.op != Some(op) {
            return;
        }
        m.op = None;
        let leaving = m.op_leave;
        self.abandon(Who::Member(pid), op);
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
        let label = self.label(pid);
        self.log(format!("{label} operation timed out (maybe committed)"));
        let failure = Failure::of(
            &TransactionTimedOut {
                after: dur(self.p.txn_timeout),
            }
            .into_error(),
        );
        let event = if leaving {
            Some(ShardEvent::Left(Err(failure)))
        } else {
            self.cycle_failed(pid, failure)
        };
        if let Some(event) = event {
            self.feed(pid, event);
        }
    }

    /// A member's operation result.
    pub(super) fn member_result(
        &mut self,
        pid: usize,
        op: Option<u64>,
        kind: PKind,
        result: Result<(), fdb_leader_election::TxnError>,
    ) {
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        if !m.alive || op.is_none() || m.op != op {
            return;
        }
        m.op = None;
        match (kind, result) {
            (PKind::Cycle(cycle), Ok(())) => self.cycle_committed(pid, *cycle),
            (PKind::Cycle(cycle), Err(e)) => {
                // Dropped before the machine hears: its next cycle may start at once.
                drop(cycle);
                if let (Some(seq), TxnErrorKind::Conflict | TxnErrorKind::TooOld) = (op, e.kind()) {
                    // The store's retry loop runs the cycle again at once.
                    if let Some(m) = self.members.get_mut(pid) {
                        m.op = Some(seq);
                    }
                    if let Some(next) = self.attempt_cycle(pid, seq) {
                        self.feed(pid, next);
                    }
                    return;
                }
                let e = ElectionError::from(e);
                self.count_error(&e);
                if let Some(event) = self.cycle_failed(pid, Failure::of(&e)) {
                    self.feed(pid, event);
                }
            }
            (PKind::Leave, Ok(())) => {
                self.stats.sharded.leaves = self.stats.sharded.leaves.saturating_add(1);
                self.feed(pid, ShardEvent::Left(Ok(())));
            }
            (PKind::Leave, Err(e)) => {
                let e = ElectionError::from(e);
                self.count_error(&e);
                self.feed(pid, ShardEvent::Left(Err(Failure::of(&e))));
            }
            _ => {}
        }
    }

    fn cycle_committed(&mut self, pid: usize, cycle: MemberCycle) {
        let hand_over = cycle.hand_over_requested();
        let more = cycle.more_to_acquire();
        let config = cycle.config().clone();
        let acquired = u64::try_from(cycle.acquired().len()).unwrap_or(0);
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        m.retried_inline = false;
        m.member.adopt(cycle);
        let s = &mut self.stats.sharded;
        s.cycles = s.cycles.saturating_add(1);
        s.acquisitions = s.acquisitions.saturating_add(acquired);
        self.feed(
            pid,
            ShardEvent::CycleCommitted {
                hand_over,
                more,
                config,
            },
        );
    }
}
