//! Application queries on an old read version: a transaction opened to query later, whose
//! query must not change what the candidate believes.

use fdb_leader_election::{ElectionTxn, MemTransaction, ReadMode};

use crate::events::{Chaos, Event};
use crate::oracles::{OracleId, Violation};
use crate::wire;
use crate::world::{Actor, World};

/// An application transaction kept open to query later, on its old read version.
#[derive(Debug)]
pub(in crate::world) struct StaleQuery {
    pub(in crate::world) pid: usize,
    pub(in crate::world) txn: MemTransaction,
    /// The leader record's renewal when the transaction took its read version.
    pub(in crate::world) renewal: u64,
}

impl World {
    /// An application opens a transaction (taking its read version) to query later.
    pub(super) fn stale_query_open(&mut self) {
        let running = self.running();
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
    pub(super) fn stale_query_ask(&mut self) {
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
