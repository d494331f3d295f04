//! What a process's transaction that changes who owns the record read, read back through the
//! transaction itself before its commit ([`TxnRead`]): the configuration (the transaction read
//! it with a conflict already), the operator's marks and the registry (snapshot reads: they add
//! no conflict, so the commit's fate is unchanged), each row's eligibility under the marks read.
//! The eligibility and version oracles judge the transaction by it.

use fdb_leader_election::{ElectionError, MemTransaction};

use super::World;
use crate::history::{CandView, ConfigView};
use crate::oracles::TxnRead;
use crate::oracles::rank::RegView;

impl World {
    /// What `pid`'s transaction `txn` read: with `registry`, every registration too (for a
    /// vacancy it writes); `believed`: it believed it led when the operation began. `None` if
    /// a read fails (it cannot: the transaction read the same keys already).
    pub(super) fn txn_read(
        &self,
        pid: usize,
        txn: &MemTransaction,
        registry: bool,
        believed: bool,
    ) -> Option<Box<TxnRead>> {
        let p = self.procs.get(pid)?;
        let name = p.candidate.id().name().to_owned();
        let election = self.election.clone();
        let read = self.rt.block_on(async {
            let config = election.read_config(txn).await?;
            let marks = election.eligibility_marks(txn).await?;
            let rows = if registry {
                election.list_candidates(txn).await?
            } else {
                Vec::new()
            };
            Ok::<_, ElectionError>((config, marks, rows))
        });
        let (config, marks, rows) = read.ok()?;
        let marked = marks.get(&name).is_some_and(|m| !m.is_eligible());
        Some(Box::new(TxnRead {
            config: ConfigView::of(&config),
            // A row is eligible as the library judges another candidate: its registration,
            // and the mark on its name that this transaction read (DESIGN §13.2), which
            // reaches the registration only at that candidate's next heartbeat.
            registry: rows
                .into_iter()
                .map(|c| {
                    let mut cand = CandView::of(&c.record);
                    cand.eligible &= marks.get(c.id.name()).is_none_or(|m| m.is_eligible());
                    RegView {
                        name: c.id.name().to_owned(),
                        id: c.id.to_string(),
                        cand,
                    }
                })
                .collect(),
            eligible: p.checks.own.is_eligible() && !marked,
            holds: p.checks.holds,
            believed,
            at: self.now,
        }))
    }
}
