//! The oracles' view of the database: read after a step, outside every fault.

use std::collections::BTreeMap;

use fdb_leader_election::{ElectionError, ElectionTxn, ReadMode};

use super::World;
use crate::history::{CandView, ConfigView, Entry, RecordView};
use crate::oracles::DbState;
use crate::wire;

impl World {
    /// Reads the database state the oracles compare with; `registry` also lists every
    /// registration. `None` if the read fails (it cannot: faults are bypassed), which the
    /// oracles then treat as nothing to check.
    pub(super) fn snapshot(&mut self, registry: bool) -> Option<DbState> {
        self.faults.set_bypass(true);
        let txn = self.db.create_transaction();
        let election = self.election.clone();
        let from = wire::history_key(self.history.cursor.saturating_add(1));
        let res = self.rt.block_on(async {
            let leader = election.leader_record(&txn).await?;
            let config = election.read_config(&txn).await?;
            let owner_registered = match leader.owner() {
                Some(o) => election.get_candidate(&txn, o.id()).await?.is_some(),
                None => true,
            };
            let holder = match leader.reservation() {
                Some(r) => election.get_candidate(&txn, r.id()).await?.map(Some),
                None => Some(None),
            };
            let holder_registered = holder.is_some();
            // Live when it was reserved: measured against the record the reserving leader
            // read (one renewal before the vacancy), as the leader measures.
            let holder_live = match &holder {
                Some(Some(c)) => {
                    let read = leader.renewal().saturating_sub(1);
                    read.saturating_sub(c.seen_renewal()) <= config.renewals_before_dead()
                }
                Some(None) => true,
                None => false,
            };
            let register = txn.get(wire::REGISTER_KEY, ReadMode::Snapshot).await?;
            let counter = txn.get(wire::COUNTER_KEY, ReadMode::Snapshot).await?;
            let shadow = txn.get(wire::SHADOW_KEY, ReadMode::Snapshot).await?;
            let history = txn
                .get_range(&from, &wire::history_end(), ReadMode::Snapshot)
                .await?;
            let candidates = if registry {
                let list = election.list_candidates(&txn).await?;
                Some(
                    list.into_iter()
                        .map(|c| (c.id.to_string(), CandView::of(&c.record)))
                        .collect::<BTreeMap<String, CandView>>(),
                )
            } else {
                None
            };
            Ok::<_, ElectionError>(DbState {
                version: txn.read_version().unwrap_or(0),
                leader: RecordView::of(&leader),
                owner_registered,
                holder_registered,
                holder_live,
                register: wire::decode_register(register.as_deref()),
                counter: wire::decode_u64(counter.as_deref()),
                shadow: wire::decode_u64(shadow.as_deref()),
                config: ConfigView::of(&config),
                handover_grace: crate::time::nanos(config.handover_grace()),
                new_history: history
                    .into_iter()
                    .map(|(k, v)| {
                        let version = k
                            .get(wire::HISTORY_PREFIX.len()..)
                            .and_then(|b| <[u8; 8]>::try_from(b).ok())
                            .map_or(0, u64::from_be_bytes);
                        (version, Entry::decode(&v))
                    })
                    .collect(),
                candidates,
            })
        });
        self.faults.set_bypass(false);
        res.ok()
    }
}
