//! Pending transactions and their commits: fault decisions, the co-logged history entry, and
//! what each committer learns.

use fdb_leader_election::memdb::CommitFault;
use fdb_leader_election::{
    Cycle, ElectionConfig, ElectionTxn, MemTransaction, TxnError, TxnErrorKind,
};
use rand::Rng;

use super::World;
use crate::events::Event;
pub(crate) use crate::history::Entry;
use crate::history::{CycleAction, Op};
use crate::oracles::{
    CommitFacts, EligibleReservation, HistoryReplay, Hold, IneligibleAcquires, TxnRead,
};
use crate::plants::Plant;
use crate::time::Nanos;
use crate::wire;

/// Who opened a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Actor {
    /// A process (by index).
    Proc(usize),
    /// The operator.
    Operator,
}

/// What a pending transaction is, and what its committer does with the result.
#[derive(Debug)]
pub(crate) enum Kind {
    /// Election initialisation.
    Init,
    /// Registration, with the stored configuration it read.
    Register(Box<ElectionConfig>),
    /// An election cycle, to adopt after the commit.
    Cycle(Box<Cycle>),
    /// A resignation (graceful shutdown or voluntary).
    Resign,
    /// Unregistration (graceful shutdown).
    Unregister,
    /// Fenced leader work.
    Work,
    /// Unfenced shadow work.
    Shadow,
    /// A configuration write.
    Config {
        /// The preemption setting written.
        allow: bool,
        /// Whether this is the quiet phase's restore of the world's configuration.
        restore: bool,
    },
    /// Eviction of dead candidates.
    Evict,
    /// Another operator override (force-vacate, resign request, unregistration by id).
    Operator,
    /// Operator marks: names excluded, names allowed again; `quiet`: the quiet phase's.
    Marks {
        marked: Vec<String>,
        cleared: Vec<String>,
        quiet: bool,
    },
    /// An operation its process stopped waiting for (timed out, or shut down): its commit
    /// still lands, and what it prepared is gone.
    Abandoned,
    /// The planted rogue takeover.
    Rogue {
        /// The ballot written.
        ballot: u64,
        /// Local validity end, if the commit is confirmed.
        valid_until: Nanos,
    },
}

use crate::faults::Drawn;

/// The reply of an applied commit on its way to its process (a slow reply).
#[derive(Debug)]
pub(crate) struct LateReply {
    pub(crate) pid: usize,
    pub(crate) op: Option<u64>,
    pub(crate) kind: Kind,
}

/// A transaction whose operation ran, waiting for its commit event.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) actor: Actor,
    pub(crate) txn: MemTransaction,
    pub(crate) kind: Kind,
    pub(crate) entry: Entry,
    /// The committer crashed; the commit was already on the wire and lands anyway.
    pub(crate) zombie: bool,
    /// Never injected with a fault (set-up).
    pub(crate) faultless: bool,
    /// The process operation this commit ends, if any.
    pub(crate) op: Option<u64>,
    /// A commit in flight whose reply was lost: it lands later, with no fault of its own.
    pub(crate) landing: bool,
    /// What a process's transaction that changes who owns the record read (the
    /// eligibility and version oracles judge it by this).
    pub(crate) read: Option<Box<TxnRead>>,
}

impl Pending {
    /// A commit by `actor` as most are: open to injected faults, not a crashed committer's
    /// nor one whose reply was lost, ending no process operation, with no read to judge.
    pub(crate) fn new(actor: Actor, txn: MemTransaction, kind: Kind, entry: Entry) -> Self {
        Pending {
            actor,
            txn,
            kind,
            entry,
            zombie: false,
            faultless: false,
            op: None,
            landing: false,
            read: None,
        }
    }
}

impl World {
    /// Lands the commits of `pid` still in flight (their replies were lost): called once the
    /// process's next transaction has taken its read version, as FoundationDB can do.
    pub(super) fn land_held_commits(&mut self, pid: usize) {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(p, _)| *p == pid);
        self.held = rest;
        for (_, token) in mine {
            self.commit(token);
        }
    }
}

impl World {
    /// How long until a commit: usually milliseconds, sometimes a tenth of a lease to a lease,
    /// rarely up to four leases (long enough for `transaction_too_old`).
    pub(super) fn commit_delay(&mut self) -> Nanos {
        let (d, slow) = crate::faults::commit_delay(
            &mut self.rng,
            self.params.lease,
            self.quiet,
            &mut self.stats.faults,
        );
        if slow {
            self.note_fault_end(self.now.saturating_add(d));
        }
        d
    }

    /// Records that a fault lasts until `t`.
    pub(super) fn note_fault_end(&mut self, t: Nanos) {
        self.faults_end_at = self.faults_end_at.max(t);
    }

    /// Queues `p` for commit after a drawn delay.
    pub(super) fn schedule_commit(&mut self, p: Pending) {
        let delay = self.commit_delay();
        let token = self.add_pending(p);
        self.queue
            .push(self.now.saturating_add(delay), Event::Commit { token });
    }

    /// A commit fault, or a slow reply (counted when it happens: only a process's operation
    /// whose commit applies gets one).
    fn draw_commit_fault(&mut self) -> Option<Drawn> {
        crate::faults::draw_commit_fault(&mut self.rng, &mut self.stats.faults)
    }

    /// The reply of an applied commit of `pid`'s operation reaches it after a drawn delay of
    /// up to 1.5 times its transaction timeout (on its clock; at least half of it if the
    /// commit `capped` the leader's belief with a shorter lease): its executor's timeout may
    /// fire first, abandoning the operation as maybe committed, and the late reply is then
    /// ignored.
    fn reply_late(&mut self, pid: usize, op: Option<u64>, kind: Kind, capped: bool) {
        let timeout = self.procs.get(pid).map_or(0, |p| {
            crate::time::nanos(p.machine.config().transaction_timeout())
        });
        let least = if capped { timeout / 2 } else { 0 };
        let local = self.between(least, timeout.saturating_mul(3) / 2);
        let d = self.local_delay(pid, local);
        self.stats.faults.slow_replies = self.stats.faults.slow_replies.saturating_add(1);
        let at = self.now.saturating_add(d);
        self.note_fault_end(at);
        let token = self.next_token;
        self.next_token = token.saturating_add(1);
        self.replies.insert(token, LateReply { pid, op, kind });
        self.queue.push(at, Event::Reply { token });
        let label = self.label(pid);
        self.log(format!(
            "{label} commit applied; its reply arrives at {}{}",
            crate::time::secs(at),
            if capped {
                " (a renewal that cut the lease)"
            } else {
                ""
            }
        ));
    }

    /// A late reply reaches its process (ignored if the operation was abandoned meanwhile).
    pub(super) fn late_reply(&mut self, token: u64) {
        if let Some(r) = self.replies.remove(&token) {
            self.deliver(r.pid, r.op, r.kind, Ok(()));
        }
    }

    /// Whether `p` is a renewal that writes a lease shorter than its process's transaction
    /// timeout (of the configuration it ran with, the old one): its belief, capped inside the
    /// transaction, may end well before a late reply arrives.
    fn cuts_below_timeout(&self, p: &Pending) -> bool {
        let Actor::Proc(pid) = p.actor else {
            return false;
        };
        let timeout = self.procs.get(pid).map_or(0, |q| {
            crate::time::nanos(q.machine.config().transaction_timeout())
        });
        matches!(p.entry.op, Op::Cycle(CycleAction::Renewed))
            && matches!((&p.entry.prior, &p.entry.leader),
                (Some(a), Some(b)) if b.lease < a.lease && b.lease < timeout)
    }

    /// Commits the pending transaction `token`.
    pub(super) fn commit(&mut self, token: u64) {
        let Some(mut p) = self.pending.remove(&token) else {
            return;
        };
        let txn_id = p.txn.id();
        let blocked = self.faults.blocked(txn_id);
        // A renewal that cuts the lease below its transaction timeout (its belief capped inside
        // the transaction) gets a slow reply three times in four, at least half its
        // transaction timeout late: the case of DESIGN §10.3.
        let cuts_lease = self.cuts_below_timeout(&p);
        let drawn = if p.faultless || self.quiet || blocked || p.landing {
            None
        } else if cuts_lease && p.op.is_some() && self.rng.random_ratio(7, 8) {
            Some(Drawn::SlowReply)
        } else {
            self.draw_commit_fault()
        };
        let slow_reply = drawn == Some(Drawn::SlowReply);
        let fault = match drawn {
            Some(Drawn::Db(f)) => Some(f),
            _ => None,
        };
        if let (Some(CommitFault::UnknownAppliedLater), Actor::Proc(pid), Some(_)) =
            (fault, p.actor, p.op)
        {
            // The reply is lost while the commit is still in flight: the process hears
            // "unknown" now, and the commit lands after its next transaction has started
            // (see `land_held_commits`).
            let kind = std::mem::replace(&mut p.kind, Kind::Abandoned);
            let op = p.op;
            p.zombie = true;
            p.landing = true;
            let label = p.entry.actor.clone();
            self.pending.insert(token, p);
            self.held.push((pid, token));
            self.log(format!(
                "{label} commit in flight: the reply is lost, it lands later"
            ));
            let unknown = TxnError::new(TxnErrorKind::CommitUnknown).with_code(1021);
            self.count_txn_error(&unknown);
            self.deliver(pid, op, kind, Err(unknown));
            return;
        }
        let fault = fault
            .filter(|f| *f != CommitFault::UnknownAppliedLater)
            .or(match fault {
                Some(CommitFault::UnknownAppliedLater) => Some(CommitFault::UnknownApplied),
                _ => None,
            });
        if let Some(f) = fault {
            self.faults.plan(txn_id, f);
        }
        let version = self.db.committed_version().saturating_add(1);
        let mut entry = p.entry;
        entry.version = version;
        entry.at = self.now;
        let drop_entry = self.plant == Some(Plant::HistoryDropsEntry)
            && !p.faultless
            && self.rng.random_ratio(1, 100);
        if !drop_entry {
            p.txn.set(&wire::history_key(version), &entry.encode());
        }
        let result = self.rt.block_on(p.txn.clone().commit());
        let written = self.faults.take_last_written();
        self.faults.close(txn_id);
        let applied = self.db.committed_version() == version;
        if applied {
            let wrote_leader = written.contains(&self.leader_key);
            if let Some(v) = HistoryReplay::check_keys(
                &entry.actor,
                version,
                entry.leader.is_some(),
                wrote_leader,
            ) {
                self.found.push(v);
            }
            if p.zombie {
                self.stats.faults.zombie_commits =
                    self.stats.faults.zombie_commits.saturating_add(1);
            }
            self.count_applied(&entry);
        }
        let facts = CommitFacts {
            at: self.now,
            entry: &entry,
            applied,
            read: p.read.as_deref(),
        };
        let found: Vec<_> = [
            self.fencing.on_commit(&facts),
            self.ballots.on_commit(&facts),
            self.preemption.on_commit(&facts),
            EligibleReservation::on_commit(&facts),
            IneligibleAcquires::on_commit(&facts),
            Hold::on_commit(&facts),
            self.successor.on_commit(&facts),
        ]
        .into_iter()
        .flatten()
        .collect();
        self.found.extend(found);
        self.reservation_timeout.on_commit(&facts);
        let outcome = match &result {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("err({})", kind_name(e)),
        };
        self.log(format!(
            "{}@{} commit {:?} v{} {}{}{}{}",
            entry.actor,
            entry.actor_priority,
            entry.op,
            version,
            outcome,
            if applied { " applied" } else { "" },
            if p.zombie { " zombie" } else { "" },
            describe(&entry),
        ));
        if let Err(e) = &result {
            self.count_txn_error(e);
        }
        if p.zombie {
            return;
        }
        match p.actor {
            Actor::Proc(pid) if slow_reply && result.is_ok() && p.op.is_some() => {
                if cuts_lease {
                    self.stats.capped_late_replies =
                        self.stats.capped_late_replies.saturating_add(1);
                }
                self.reply_late(pid, p.op, p.kind, cuts_lease);
            }
            Actor::Proc(pid) => self.deliver(pid, p.op, p.kind, result),
            Actor::Operator => self.operator_result(p.kind, result.is_ok(), applied),
        }
    }

    fn count_applied(&mut self, e: &Entry) {
        let s = &mut self.stats;
        match e.op {
            Op::Cycle(CycleAction::Renewed) => s.renewals = s.renewals.saturating_add(1),
            Op::Cycle(CycleAction::RequestedHandover) => {
                s.handover_requests = s.handover_requests.saturating_add(1);
            }
            Op::Resign | Op::Unregister { resigned: true } => {
                s.resigns = s.resigns.saturating_add(1);
            }
            Op::Shadow => s.shadow_committed = s.shadow_committed.saturating_add(1),
            _ => {}
        }
        let h = &mut s.health;
        if e.op == Op::Cycle(CycleAction::SteppedDownIneligible) {
            h.stepped_down_ineligible = h.stepped_down_ineligible.saturating_add(1);
            if e.leader.as_ref().is_some_and(|l| l.reservation.is_none()) {
                h.released = h.released.saturating_add(1);
            }
        }
        if let (Op::Cycle(CycleAction::Renewed), Some(prior), Some(new)) =
            (e.op, &e.prior, &e.leader)
        {
            if prior.operator_request_to.is_some() && new.operator_request.is_none() {
                h.directed_refused_by_leader = h.directed_refused_by_leader.saturating_add(1);
            }
        }
        let acquired = matches!(e.op, Op::Cycle(CycleAction::Acquired) | Op::RogueTakeover);
        if let (true, Some(prior), Some(new)) = (acquired, &e.prior, &e.leader) {
            s.elections = s.elections.saturating_add(1);
            let me = new.owner_id();
            match (&prior.owner, &prior.reservation) {
                (None, Some(r)) if Some(r.0.as_str()) == me => {
                    s.handovers = s.handovers.saturating_add(1);
                }
                (None, None) => s.vacancy_fills = s.vacancy_fills.saturating_add(1),
                _ => s.takeovers = s.takeovers.saturating_add(1),
            }
        }
    }

    /// Counts a database error a process saw.
    pub(super) fn count_txn_error(&mut self, e: &TxnError) {
        let s = &mut self.stats;
        match e.kind() {
            TxnErrorKind::Conflict => s.conflicts_seen = s.conflicts_seen.saturating_add(1),
            TxnErrorKind::TooOld => s.too_old_seen = s.too_old_seen.saturating_add(1),
            TxnErrorKind::CommitUnknown => s.unknown_seen = s.unknown_seen.saturating_add(1),
            TxnErrorKind::Unavailable => {
                s.unavailable_seen = s.unavailable_seen.saturating_add(1);
            }
            _ => {}
        }
    }
}

/// A short name for a database error.
pub(crate) fn kind_name(e: &TxnError) -> &'static str {
    match e.kind() {
        TxnErrorKind::Conflict => "conflict",
        TxnErrorKind::TooOld => "too_old",
        TxnErrorKind::CommitUnknown => "unknown_result",
        TxnErrorKind::Unavailable => "unavailable",
        TxnErrorKind::OtherRetryable => "retryable",
        _ => "fatal",
    }
}

/// A compact description of an entry's effects, for the trace.
fn describe(e: &Entry) -> String {
    let mut s = String::new();
    if let Some(l) = &e.leader {
        s.push_str(&format!(
            " leader=b{}/r{}/{}",
            l.ballot,
            l.renewal,
            match (&l.owner, &l.reservation) {
                (Some(o), _) => format!("owner:{}@{}", o.0, o.1),
                (None, Some(r)) => format!("reserved:{}@{}", r.0, r.1),
                (None, None) => "vacant".to_owned(),
            }
        ));
        if let Some(h) = &l.handover {
            s.push_str(&format!(" request:{}@{}", h.0, h.1));
        }
    }
    if let Some((b, q)) = e.register {
        s.push_str(&format!(" register=b{b}#{q}"));
    }
    if let Some(c) = e.counter {
        s.push_str(&format!(" counter={c}"));
    }
    if let Some(c) = e.shadow {
        s.push_str(&format!(" shadow={c}"));
    }
    if let Some(c) = &e.config {
        s.push_str(&format!(" preemption={}", c.allow_preemption));
    }
    if !e.candidates_cleared.is_empty() {
        s.push_str(&format!(" cleared={}", e.candidates_cleared.join(",")));
    }
    s
}
