//! The sharded world's pending transactions and their commits.
//!
//! Pending transactions of the sharded world and their commits: latency, the per-commit fault
//! draw shared with the single world, late-landing commits, slow replies, and what each
//! committer learns.

use fdb_leader_election::memdb::CommitFault;
use fdb_leader_election::shard::MemberCycle;
use fdb_leader_election::{Cycle, ElectionError, MemTransaction, TxnError, TxnErrorKind};

use super::{Ev, World, coord_fpid};
use crate::faults::{Drawn, draw_commit_fault};
use crate::time::Nanos;

/// Who opened a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    Member(usize),
    Coord(usize),
    Operator,
}

/// What a pending transaction is.
#[derive(Debug)]
pub(crate) enum PKind {
    /// A member cycle, to adopt after the commit.
    Cycle(Box<MemberCycle>),
    /// A member's leave.
    Leave,
    /// A coordinator candidate's election cycle.
    CoordCycle(Box<Cycle>),
    /// A coordinator attempt (`fenced`: members it fences out; `forgotten`: the members it
    /// reports forgotten).
    Coordinate { fenced: u64, forgotten: Vec<String> },
    /// Fenced shard work: the register written with `ballot`, the counter plus one.
    Work { shard: u32, ballot: u64 },
    /// An operator action (named for the trace).
    Operator(&'static str),
    /// An operation its process stopped waiting for: the commit still lands.
    Abandoned,
}

/// A transaction waiting for its commit event.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) who: Who,
    pub(crate) txn: MemTransaction,
    pub(crate) kind: PKind,
    pub(crate) op: Option<u64>,
    /// Its process crashed or gave up on it; it lands anyway, nobody listening.
    pub(crate) zombie: bool,
    /// A commit whose reply was lost while in flight: it lands now, with no fault of its own.
    landing: bool,
    /// When it was queued for commit (true time).
    queued_at: Nanos,
}

impl Pending {
    pub(crate) fn new(who: Who, txn: MemTransaction, kind: PKind, op: Option<u64>) -> Self {
        Pending {
            who,
            txn,
            kind,
            op,
            zombie: false,
            landing: false,
            queued_at: 0,
        }
    }
}

/// A result on its way to its process.
#[derive(Debug)]
pub(crate) struct Reply {
    who: Who,
    op: Option<u64>,
    kind: PKind,
    result: Result<(), TxnError>,
}

impl World {
    /// How long until a commit: milliseconds, sometimes a tenth of a lease to a lease, rarely
    /// up to four leases (`transaction_too_old`); shard work and operators are never slow.
    fn commit_delay(&mut self, fast: bool) -> (Nanos, bool) {
        let quiet = self.quiet || fast;
        let (d, slow) =
            crate::faults::commit_delay(&mut self.rng, self.p.lease, quiet, &mut self.stats.faults);
        if slow {
            self.note_fault_end(self.now.saturating_add(d));
        }
        (d, slow)
    }

    /// Queues `p` for commit after a drawn delay.
    pub(super) fn schedule_commit(&mut self, mut p: Pending) {
        let fast = matches!(p.kind, PKind::Work { .. } | PKind::Operator(_));
        let (delay, slow) = self.commit_delay(fast);
        p.queued_at = self.now;
        if let (true, Who::Coord(cid)) = (slow, p.who) {
            if self.coordinator_leads(cid) {
                // S9: the leading coordinator's slow commit delays a fencing.
                let end = self.now.saturating_add(delay);
                let extra = self.p.delay_after(delay);
                self.oracles.off.delay(self.now, end, extra);
            }
        }
        let token = self.token();
        self.pending.insert(token, p);
        self.queue
            .push(self.now.saturating_add(delay), Ev::Commit { token });
    }

    /// Lands the commits of fault-injector process `fpid` still in flight (their replies were
    /// lost), once its next transaction took its read version.
    pub(super) fn land_held(&mut self, fpid: usize) {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(p, _)| *p == fpid);
        self.held = rest;
        for (_, token) in mine {
            self.commit(token);
        }
    }

    fn fpid(who: Who) -> Option<usize> {
        match who {
            Who::Member(pid) => Some(pid),
            Who::Coord(cid) => Some(coord_fpid(cid)),
            Who::Operator => None,
        }
    }

    /// Commits the pending transaction `token`.
    pub(super) fn commit(&mut self, token: u64) {
        let Some(mut p) = self.pending.remove(&token) else {
            return;
        };
        let txn_id = p.txn.id();
        let blocked = self.faults.blocked(txn_id);
        let work = matches!(p.kind, PKind::Work { .. });
        let drawn = if self.quiet || blocked || p.landing {
            None
        } else {
            draw_commit_fault(&mut self.rng, &mut self.stats.faults)
        };
        if let (true, Who::Coord(cid)) = (drawn.is_some(), p.who) {
            // S9: the leading coordinator's commit that fails, lands later or replies late (up
            // to 1.5 transaction timeouts) delays a fencing.
            let end = self
                .now
                .saturating_add(self.p.txn_timeout.saturating_mul(3) / 2);
            if self.coordinator_leads(cid) {
                let extra = self.p.delay_after(end.saturating_sub(p.queued_at));
                self.oracles.off.delay(p.queued_at, end, extra);
            }
        }
        let mut fault = match drawn {
            Some(Drawn::Db(f)) => Some(f),
            _ => None,
        };
        if fault == Some(CommitFault::UnknownAppliedLater) {
            match Self::fpid(p.who) {
                Some(fpid) if !work && p.op.is_some() && !p.zombie => {
                    // The reply is lost while the commit is in flight: the process hears
                    // "unknown" now; the commit lands after its next transaction started.
                    let kind = std::mem::replace(&mut p.kind, PKind::Abandoned);
                    let (who, op) = (p.who, p.op);
                    p.zombie = true;
                    p.landing = true;
                    self.pending.insert(token, p);
                    self.held.push((fpid, token));
                    self.log(format!("{who:?} commit in flight: reply lost, lands later"));
                    let unknown = TxnError::new(TxnErrorKind::CommitUnknown).with_code(1021);
                    self.deliver(who, op, kind, Err(unknown));
                    return;
                }
                _ => fault = Some(CommitFault::UnknownApplied),
            }
        }
        if let Some(f) = fault {
            self.faults.plan(txn_id, f);
        }
        let version = self.db.committed_version().saturating_add(1);
        let result = self.rt.block_on(p.txn.clone().commit());
        let written = self.faults.take_last_written();
        self.faults.close(txn_id);
        let applied = self.db.committed_version() == version;
        self.log(format!(
            "{:?} commit {} v{version} {}{}{}",
            p.who,
            kind_name(&p.kind),
            match &result {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("err({:?})", e.kind()),
            },
            if applied { " applied" } else { "" },
            if p.zombie { " zombie" } else { "" },
        ));
        if applied {
            self.on_applied(&p, &written);
        }
        if p.zombie {
            if applied {
                self.stats.faults.zombie_commits =
                    self.stats.faults.zombie_commits.saturating_add(1);
            }
            return;
        }
        if drawn == Some(Drawn::SlowReply) && result.is_ok() && p.op.is_some() {
            // Applied now; the reply reaches the process up to 1.5 transaction timeouts late
            // (its executor's timeout may fire first).
            let late = self.between(0, self.p.txn_timeout.saturating_mul(3) / 2);
            self.stats.faults.slow_replies = self.stats.faults.slow_replies.saturating_add(1);
            let at = self.now.saturating_add(late);
            self.note_fault_end(at);
            self.hold_reply(p.who, p.op, p.kind, result, at);
            return;
        }
        self.deliver(p.who, p.op, p.kind, result);
    }

    fn hold_reply(
        &mut self,
        who: Who,
        op: Option<u64>,
        kind: PKind,
        result: Result<(), TxnError>,
        at: Nanos,
    ) {
        let token = self.token();
        self.replies.insert(
            token,
            Reply {
                who,
                op,
                kind,
                result,
            },
        );
        self.queue.push(at, Ev::Reply { token });
    }

    /// A held-back reply arrives.
    pub(super) fn reply(&mut self, token: u64) {
        if let Some(r) = self.replies.remove(&token) {
            self.deliver(r.who, r.op, r.kind, r.result);
        }
    }

    /// A result reaches its process (after its pause, if it is paused).
    pub(super) fn deliver(
        &mut self,
        who: Who,
        op: Option<u64>,
        kind: PKind,
        result: Result<(), TxnError>,
    ) {
        if let Err(e) = &result {
            self.count_txn_error(e);
        }
        let paused = match who {
            Who::Member(pid) => self.members.get(pid).map_or(0, |m| m.paused_until),
            Who::Coord(cid) => self.coords.get(cid).map_or(0, |c| c.paused_until),
            Who::Operator => 0,
        };
        if paused > self.now {
            self.hold_reply(who, op, kind, result, paused);
            return;
        }
        match (who, kind) {
            (Who::Member(pid), PKind::Work { shard, ballot }) => {
                self.work_result(pid, shard, ballot, result.is_ok());
            }
            (Who::Member(pid), kind) => self.member_result(pid, op, kind, result),
            (Who::Coord(cid), kind) => self.coord_result(cid, op, kind, result),
            (Who::Operator, kind) => self.operator_result(kind, result.is_ok()),
        }
    }

    /// Abandons operation `op` of `who`: its commit, if pending, still lands (nobody hears),
    /// and what it prepared is dropped.
    pub(super) fn abandon(&mut self, who: Who, op: u64) {
        for q in self.pending.values_mut() {
            if q.who == who && q.op == Some(op) {
                q.zombie = true;
                q.kind = PKind::Abandoned;
            }
        }
        for r in self.replies.values_mut() {
            if r.who == who && r.op == Some(op) {
                r.kind = PKind::Abandoned;
            }
        }
    }

    /// A crashed process's transactions: each commit still on the wire lands with
    /// probability 0.3, the others are dropped.
    pub(super) fn crash_pending(&mut self, who: Who) {
        let tokens: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, q)| q.who == who)
            .map(|(t, _)| *t)
            .collect();
        for t in tokens {
            if self.chance(3, 10) {
                if let Some(q) = self.pending.get_mut(&t) {
                    q.zombie = true;
                }
            } else if let Some(q) = self.pending.remove(&t) {
                self.faults.close(q.txn.id());
            }
        }
        self.replies.retain(|_, r| r.who != who);
    }

    pub(super) fn count_error(&mut self, e: &ElectionError) {
        if let ElectionError::Database(t) = e {
            self.count_txn_error(t);
        }
    }

    fn count_txn_error(&mut self, e: &TxnError) {
        let s = &mut self.stats;
        let c = match e.kind() {
            TxnErrorKind::Conflict => &mut s.conflicts_seen,
            TxnErrorKind::TooOld => &mut s.too_old_seen,
            TxnErrorKind::CommitUnknown => &mut s.unknown_seen,
            _ => &mut s.unavailable_seen,
        };
        *c = c.saturating_add(1);
    }
}

fn kind_name(k: &PKind) -> String {
    match k {
        PKind::Cycle(c) => format!("cycle(acquires {:?})", c.acquired()),
        PKind::Leave => "leave".to_owned(),
        PKind::CoordCycle(_) => "coordinator-cycle".to_owned(),
        PKind::Coordinate { fenced, forgotten } => {
            format!("coordinate(fences {fenced}, forgets {})", forgotten.len())
        }
        PKind::Work { shard, ballot } => format!("work(shard {shard} ballot {ballot})"),
        PKind::Operator(name) => format!("operator({name})"),
        PKind::Abandoned => "abandoned".to_owned(),
    }
}
