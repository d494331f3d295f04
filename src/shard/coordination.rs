//! The coordinator's side of a [`ShardedElection`] (docs/design.md §12.2, §12.3): an attempt (fence
//! out the members that lapsed, write the next placement steps), a standby's timing, and the
//! placement as a query.

use std::collections::BTreeMap;

use super::election::ShardedElection;
use super::member::Coordinator;
use crate::codec;
use crate::core::shard::coordinator::{CoordinatorInput, decide_coordinator, time_members};
use crate::core::shard::placement::{self, MemberShare, Placement};
use crate::core::shard::steps::{effective_weight, place};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::store::txn::{ElectionTxn, ReadMode};

/// What a coordinator attempt wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Coordination {
    /// Members fenced out (their epoch ended: their shards are nobody's).
    pub fenced: Vec<CandidateId>,
    /// Members forgotten: fenced out earlier and named by no shard record any more, their
    /// record, epoch mark and inbox removed (an operator's drain mark stays).
    pub forgotten: Vec<CandidateId>,
    /// Placement steps left to the next attempts: this transaction's budget was spent (the
    /// next attempt is due at once), or a member's inbox is full (it acquires what its inbox
    /// holds first).
    pub deferred: usize,
    /// Shard records written (reservations, move requests, withdrawals).
    pub shards_written: usize,
    /// The placement computed.
    pub placement: Placement,
}

impl ShardedElection {
    /// One coordinator attempt, by the leader of the [coordinator
    /// election](Self::coordinator_election) holding `token`: times every member, fences
    /// out those whose record stayed unchanged for a full lease (their epoch ends, in the
    /// same commit as the reservations of their shards), and writes the next placement steps
    /// (reservations, at most the layout's move limit of move requests, withdrawals). Reads
    /// the members and the shards in two range reads. An attempt that writes placement steps
    /// conflicts with an operator's freeze or drain committed after its reads (it is retried
    /// on what the operator wrote), so no step decided before a freeze lands after it.
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] unless `token` leads the coordinator election;
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn coordinate<T: ElectionTxn>(
        &self,
        txn: &T,
        coordinator: &Coordinator,
        token: Ballot,
    ) -> Result<Coordination, ElectionError> {
        self.coordinator.fence(txn, token).await?;
        let (layout, config) = tokio::join!(self.layout(txn), self.config(txn));
        let (layout, config) = (layout?, config?);
        let (members, shards, marker) = tokio::join!(
            self.read_members(txn),
            self.read_shards(txn, layout.shards),
            txn.get(&self.assignments, ReadMode::Snapshot),
        );
        let (members, shards) = (members?, shards?);
        let marker = marker?
            .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
            .map(u64::from_be_bytes);
        let read_at = coordinator.clock.now();
        let plan = {
            let mut st = coordinator.lock();
            decide_coordinator(
                &mut st,
                &CoordinatorInput {
                    me: &coordinator.id,
                    layout: &layout,
                    elections: config.election_enabled(),
                    members: &members.records,
                    shards: &shards,
                    drained: &members.drained,
                    read_at,
                    marker,
                    keys: self.key_lens,
                },
            )?
        };
        if !plan.shards.is_empty() || !plan.inboxes.is_empty() {
            // The placement steps were decided on this layout (frozen or not, the move limit),
            // this configuration (elections enabled or not) and these drain marks: an
            // operator's change of any, committed meanwhile, aborts the attempt, which then
            // decides again on what the operator wrote.
            txn.add_read_conflict_key(&self.layout)?;
            txn.add_read_conflict_key(&self.config)?;
            for id in members.records.keys().chain(&members.drained) {
                txn.add_read_conflict_key(&self.drained_key(id))?;
            }
        }
        for (id, rec) in &plan.fenced {
            txn.add_read_conflict_key(&self.member_key(id))?;
            let before = members.records.get(id).map(|(r, _)| r);
            self.set_member(txn, id, rec, before)?;
        }
        for (shard, rec) in &plan.shards {
            let key = self.shard_key(*shard);
            txn.add_read_conflict_key(&key)?;
            txn.set(&key, &codec::encode_shard(rec)?);
        }
        for (id, inbox) in &plan.inboxes {
            let key = self.inbox_key(id);
            txn.add_read_conflict_key(&key)?;
            txn.set(&key, &codec::encode_inbox(inbox)?);
        }
        for id in &plan.forgotten {
            // Conflicts with its own join (its record), a handover to it (its inbox) and a
            // fencing or leave (its mark): nothing can name it again once this commits.
            for key in [self.member_key(id), self.epoch_key(id), self.inbox_key(id)] {
                txn.add_read_conflict_key(&key)?;
                txn.clear(&key);
            }
        }
        if let Some(digest) = plan.publish {
            txn.set(&self.assignments, &digest.to_be_bytes());
        }
        Ok(Coordination {
            fenced: plan.fenced.into_iter().map(|(id, _)| id).collect(),
            forgotten: plan.forgotten,
            deferred: plan.deferred,
            shards_written: plan.shards.len(),
            placement: plan
                .placement
                .unwrap_or_else(|| placement::plan(&[], &[], 1)),
        })
    }

    /// A standby's timing: a member that may become coordinator reads every member's record
    /// (one range read, nothing written) and times it on `coordinator`'s clock, as the
    /// coordinator does at each attempt. Run it at least once per heartbeat while another
    /// member coordinates, and best each time the coordinating member's record changes (a
    /// watch on [`member_key`](Self::member_key) of it; the runner does both): when this one
    /// takes over, a member that died meanwhile, the coordinator included, has been timed from
    /// its last renewal, and is fenced out within about a lease of its death rather than a
    /// lease after the takeover.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn time_members<T: ElectionTxn>(
        &self,
        txn: &T,
        coordinator: &Coordinator,
    ) -> Result<(), ElectionError> {
        let members = self.read_members(txn).await?;
        let read_at = coordinator.clock.now();
        time_members(&mut coordinator.lock(), &members.records, read_at);
        Ok(())
    }

    /// The placement as the records show it now, every member not fenced out counted live (a
    /// query: it times nothing and changes nothing). Under a frozen layout, or with elections
    /// disabled, its steps are only those the coordinator would still write.
    ///
    /// # Errors
    ///
    /// As [`layout`](Self::layout).
    pub async fn placement<T: ElectionTxn>(&self, txn: &T) -> Result<Placement, ElectionError> {
        let layout = self.layout(txn).await?;
        let config = self.config(txn).await?;
        let members = self.read_members(txn).await?;
        let shards = self.read_shards(txn, layout.shards).await?;
        let live_records = || members.records.iter().filter(|(_, (r, _))| !r.fenced);
        let live: Vec<MemberShare> = live_records()
            .map(|(id, (r, _))| MemberShare {
                id: id.clone(),
                priority: r.priority,
                weight: effective_weight(id, r, &members.drained),
            })
            .collect();
        let epochs: BTreeMap<&CandidateId, u64> =
            live_records().map(|(id, (r, _))| (id, r.epoch)).collect();
        Ok(place(
            &layout,
            config.election_enabled(),
            &live,
            &epochs,
            &shards,
        ))
    }
}
