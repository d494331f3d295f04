//! A member's writes (docs/design.md §12.1, §12.2, §12.4): its cycle (renew or join, acquire what is
//! reserved for it, hand over what it is asked to) and its graceful leave.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::future::try_join_all;

use super::election::ShardedElection;
use super::member::{Member, MemberCycle};
use super::record::ShardRecord;
use crate::codec;
use crate::core::shard::leave::{decide_leave, leave_lookups};
use crate::core::shard::member::{MemberDecision, MemberInput, MemberLookups, decide_member};
use crate::error::{DecodeError, ElectionError};
use crate::ids::ShardId;
use crate::store::txn::{ElectionTxn, ReadMode};

impl ShardedElection {
    /// One member cycle: renew the member's lease (or join), acquire the shards reserved for
    /// it, hand over those it was asked to whose work has stopped (`ready`). A member with
    /// nothing asked reads three keys (configuration, its record, its inbox) and writes one,
    /// whatever the number of shards; when its inbox asks something, it also reads the layout
    /// and the records named (an inbox naming a shard beyond the layout fails closed). Adopt the returned cycle **after** the commit
    /// ([`Member::adopt`]); a handed-over shard is no longer owned from now on. A handover
    /// whose commit is not confirmed is written again by the next cycles while the shard's
    /// record names this member (its work stopped with the belief: no need to list it in
    /// `ready` again), so a failed commit leaves no shard owned by nobody's work.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; [`ElectionError::CycleInProgress`] while another
    /// cycle of this member is unsettled; corrupt values; database errors.
    pub async fn member_cycle<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &Member,
        ready: &BTreeSet<ShardId>,
    ) -> Result<MemberCycle, ElectionError> {
        let settle = member.open_cycle()?;
        let started_at = member.now();
        let id = member.id().clone();
        let (config, record, inbox) = tokio::join!(
            self.config(txn),
            self.member_with(txn, &id, ReadMode::Serializable),
            self.inbox(txn, &id, ReadMode::Serializable),
        );
        let (config, record, inbox) = (config?, record?, inbox?);
        let read_version = txn.read_version().await?;
        let mut lookups: Option<MemberLookups> = None;
        let plan = loop {
            let decision = {
                let mut local = member.lock();
                let local = &mut *local;
                let input = MemberInput {
                    config: &config,
                    record: record.as_ref(),
                    inbox: &inbox,
                    priority: local.priority,
                    weight: local.weight,
                    eligibility: &local.eligibility,
                    ready,
                    started_at,
                    read_version,
                    lookups: lookups.as_ref(),
                    keys: self.key_lens,
                };
                decide_member(&mut local.core, &input)?
            };
            match decision {
                MemberDecision::Plan(plan) => break plan,
                MemberDecision::Need { shards, inboxes } if lookups.is_none() => {
                    let shard_count = self.layout(txn).await?.shards;
                    let mut found = MemberLookups {
                        shard_count,
                        ..MemberLookups::default()
                    };
                    // A shard beyond the layout is not read: the decision refuses the inbox.
                    // The reads are issued together: one round trip on FoundationDB, however
                    // many shards the inbox names.
                    let shards: Vec<ShardId> = shards
                        .into_iter()
                        .filter(|s| s.get() < shard_count)
                        .collect();
                    let (records, boxes) = tokio::join!(
                        self.shards_with(txn, &shards),
                        try_join_all(inboxes.iter().map(|t| self.inbox(
                            txn,
                            t,
                            ReadMode::Serializable
                        )),),
                    );
                    found.shards = shards.into_iter().zip(records?).collect();
                    found.inboxes = inboxes.into_iter().zip(boxes?).collect();
                    lookups = Some(found);
                }
                MemberDecision::CorruptInbox(why) => {
                    return Err(ElectionError::corrupt(
                        &self.inbox_key(&id),
                        DecodeError::Impossible(why),
                    ));
                }
                MemberDecision::Need { .. } => {
                    return Err(ElectionError::corrupt(
                        &self.inbox_key(&id),
                        DecodeError::Impossible("a member decision asked twice for its lookups"),
                    ));
                }
            }
        };
        if plan.config_conflict {
            // Read as a snapshot: decided on, so an election-disabling write fails this commit.
            txn.add_read_conflict_key(&self.config)?;
        }
        self.set_member(txn, &id, &plan.record, record.as_ref())?;
        for (shard, rec) in &plan.shards {
            txn.set(&self.shard_key(*shard), &codec::encode_shard(rec)?);
        }
        for (who, inbox) in &plan.inboxes {
            txn.set(&self.inbox_key(who), &codec::encode_inbox(inbox)?);
        }
        Ok(MemberCycle {
            member: id,
            _settle: settle,
            adoption: plan.adoption,
            joined: plan.joined,
            stop: plan.stop,
            more: plan.more,
            config: Box::new(config),
        })
    }

    /// A member leaves gracefully: every shard it owns is written vacant, every reservation for
    /// it is withdrawn, and its epoch ends (its record fenced, its inbox cleared), in one commit,
    /// so the coordinator places those shards again at once, without a lease's wait. The member owns nothing from now on
    /// (before the commit), and no cycle it ran before the leave is adopted afterwards, even
    /// one whose commit was confirmed: a cycle unsettled on another task is to be dropped (its
    /// [`Member::adopt`] returns nothing). Joining again takes a new cycle, at a new epoch.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn leave<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &Member,
    ) -> Result<(), ElectionError> {
        let id = member.id().clone();
        let believed = member.lock().core.begin_leave();
        let (record, inbox) = tokio::join!(
            self.member_with(txn, &id, ReadMode::Serializable),
            self.inbox(txn, &id, ReadMode::Serializable),
        );
        let (record, inbox) = (record?, inbox?);
        let mut shards = BTreeMap::new();
        if record.as_ref().is_some_and(|r| !r.fenced) {
            let wanted = leave_lookups(&believed, &inbox, self.key_lens);
            let records = self.shards_with(txn, &wanted).await?;
            shards.extend(wanted.into_iter().zip(records));
        }
        let plan = decide_leave(
            &mut member.lock().core,
            record.as_ref(),
            &shards,
            self.key_lens,
        )?;
        let Some(plan) = plan else {
            return Ok(());
        };
        for (shard, rec) in &plan.shards {
            txn.set(&self.shard_key(*shard), &codec::encode_shard(rec)?);
        }
        self.set_member(txn, &id, &plan.record, record.as_ref())?;
        txn.clear(&self.inbox_key(&id));
        Ok(())
    }

    /// The records of `shards` (serializable reads), in order, read together.
    async fn shards_with<T: ElectionTxn>(
        &self,
        txn: &T,
        shards: &[ShardId],
    ) -> Result<Vec<ShardRecord>, ElectionError> {
        try_join_all(
            shards
                .iter()
                .map(|s| self.shard_with(txn, *s, ReadMode::Serializable)),
        )
        .await
    }
}
