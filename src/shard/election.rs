//! [`ShardedElection`]: a sharded election's operations, each run inside the caller's
//! transaction (DESIGN §12).
//!
//! ```text
//! S + ("config",)                 -> ElectionConfig (the single election's format)
//! S + ("layout",)                 -> Layout
//! S + ("members", id)             -> MemberRecord       one lease per member
//! S + ("members", id, "inbox")    -> Inbox              what the coordinator asks of it
//! S + ("shards", n)               -> ShardRecord        ballot, owner (member, epoch)
//! S + ("coordinator", ...)        -> the coordinator election (a LeaderElection)
//! ```

use std::collections::{BTreeMap, BTreeSet};

use foundationdb_tuple::Subspace;

use super::member::{Coordinator, Member, MemberCycle};
use super::record::{Inbox, Layout, MemberRecord, ShardRecord};
use crate::codec;
use crate::config::ElectionConfig;
use crate::core::shard::coordinator::{
    CoordinatorInput, decide_coordinator, effective_weight, place, time_members,
};
use crate::core::shard::member::{MemberDecision, MemberInput, MemberLookups, decide_member};
use crate::core::shard::placement::{self, MemberShare, Placement};
use crate::election::LeaderElection;
use crate::error::{DecodeError, ElectionError};
use crate::ids::{Ballot, CandidateId, ShardId};
use crate::store::txn::{ElectionTxn, ReadMode};

/// A sharded election under one subspace: a cheap `Clone` handle.
#[derive(Clone, Debug)]
pub struct ShardedElection {
    subspace: Subspace,
    config: Vec<u8>,
    pub(super) layout: Vec<u8>,
    assignments: Vec<u8>,
    members: Subspace,
    shards: Subspace,
    coordinator: LeaderElection,
}

/// Every member's record and inbox, and the members an operator drained, as one range read
/// returns them.
#[derive(Debug, Default)]
pub(super) struct MembersRead {
    pub(super) records: BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    pub(super) drained: BTreeSet<CandidateId>,
}

/// What a coordinator attempt wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Coordination {
    /// Members fenced out (their epoch ended: their shards are nobody's).
    pub fenced: Vec<CandidateId>,
    /// Shard records written (reservations, move requests, withdrawals).
    pub shards_written: usize,
    /// The placement computed.
    pub placement: Placement,
}

impl ShardedElection {
    /// The sharded election under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        ShardedElection {
            config: subspace.pack(&("config",)),
            layout: subspace.pack(&("layout",)),
            assignments: subspace.pack(&("assignments",)),
            members: subspace.subspace(&("members",)),
            shards: subspace.subspace(&("shards",)),
            coordinator: LeaderElection::new(subspace.subspace(&("coordinator",))),
            subspace,
        }
    }

    /// The subspace.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    /// The coordinator election: its leader places the shards ([`coordinate`](Self::coordinate)).
    pub fn coordinator_election(&self) -> &LeaderElection {
        &self.coordinator
    }

    /// The assignments marker: the coordinator rewrites it whenever the ownership records it
    /// reads have changed since it last did (an opaque 8-byte digest), so an observer watches
    /// this one key instead of M shard records
    /// ([`AssignmentObserver`](super::AssignmentObserver)).
    pub fn assignments_key(&self) -> &[u8] {
        &self.assignments
    }

    /// The key of `member`'s record.
    pub fn member_key(&self, member: &CandidateId) -> Vec<u8> {
        self.members.pack(&(member.as_str(),))
    }

    /// The key of `member`'s inbox.
    pub fn inbox_key(&self, member: &CandidateId) -> Vec<u8> {
        self.members.pack(&(member.as_str(), "inbox"))
    }

    /// The key that marks `member` drained by an operator
    /// ([`set_drained`](Self::set_drained)).
    pub fn drained_key(&self, member: &CandidateId) -> Vec<u8> {
        self.members.pack(&(member.as_str(), "drained"))
    }

    /// The key of `shard`'s record.
    pub fn shard_key(&self, shard: ShardId) -> Vec<u8> {
        self.shards.pack(&(shard.get(),))
    }

    /// Creates the sharded election (and its coordinator election) with `config` and
    /// `layout` if it does not exist. Idempotent; never changes an existing one.
    ///
    /// # Errors
    ///
    /// Database errors; corrupt values.
    pub async fn initialize<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
        layout: &Layout,
    ) -> Result<(), ElectionError> {
        if txn
            .get(&self.config, ReadMode::Serializable)
            .await?
            .is_none()
        {
            txn.set(&self.config, &codec::encode_config(config)?);
        }
        if txn
            .get(&self.layout, ReadMode::Serializable)
            .await?
            .is_none()
        {
            txn.set(&self.layout, &codec::encode_layout(layout)?);
        }
        self.coordinator.initialize_with_config(txn, config).await
    }

    /// The stored layout.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn layout<T: ElectionTxn>(&self, txn: &T) -> Result<Layout, ElectionError> {
        let bytes = txn
            .get(&self.layout, ReadMode::Snapshot)
            .await?
            .ok_or(ElectionError::NotInitialized)?;
        codec::decode_layout(&self.layout, &bytes)
    }

    pub(super) async fn config<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<ElectionConfig, ElectionError> {
        let bytes = txn
            .get(&self.config, ReadMode::Snapshot)
            .await?
            .ok_or(ElectionError::NotInitialized)?;
        codec::decode_config(&self.config, &bytes)
    }

    pub(super) async fn inbox<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &CandidateId,
        mode: ReadMode,
    ) -> Result<Inbox, ElectionError> {
        let key = self.inbox_key(member);
        match txn.get(&key, mode).await? {
            Some(bytes) => codec::decode_inbox(&key, &bytes),
            None => Ok(Inbox::default()),
        }
    }

    /// `member`'s record, if it has joined.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn member_record<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &CandidateId,
    ) -> Result<Option<MemberRecord>, ElectionError> {
        self.member_with(txn, member, ReadMode::Snapshot).await
    }

    /// Every member's record, by id, those fenced out included (a query in one range read: it
    /// times nothing and changes nothing). A member whose record is not fenced may still have
    /// died: the coordinator fences it out a full lease after its last renewal.
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn members<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<BTreeMap<CandidateId, MemberRecord>, ElectionError> {
        let read = self.read_members(txn).await?;
        Ok(read
            .records
            .into_iter()
            .map(|(id, (record, _))| (id, record))
            .collect())
    }

    pub(super) async fn member_with<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &CandidateId,
        mode: ReadMode,
    ) -> Result<Option<MemberRecord>, ElectionError> {
        let key = self.member_key(member);
        txn.get(&key, mode)
            .await?
            .map(|bytes| codec::decode_member(&key, &bytes))
            .transpose()
    }

    /// `shard`'s record (a shard never written is vacant at ballot 0).
    ///
    /// # Errors
    ///
    /// Corrupt values; database errors.
    pub async fn shard_record<T: ElectionTxn>(
        &self,
        txn: &T,
        shard: ShardId,
    ) -> Result<ShardRecord, ElectionError> {
        self.shard_with(txn, shard, ReadMode::Snapshot).await
    }

    pub(super) async fn shard_with<T: ElectionTxn>(
        &self,
        txn: &T,
        shard: ShardId,
        mode: ReadMode,
    ) -> Result<ShardRecord, ElectionError> {
        let key = self.shard_key(shard);
        match txn.get(&key, mode).await? {
            Some(bytes) => codec::decode_shard(&key, &bytes),
            None => Ok(ShardRecord::initial()),
        }
    }

    /// One member cycle: renew the member's lease (or join), acquire the shards reserved for
    /// it, hand over those it was asked to whose work has stopped (`ready`). A member with
    /// nothing asked reads three keys (configuration, its record, its inbox) and writes one,
    /// whatever the number of shards. Adopt the returned cycle **after** the commit
    /// ([`Member::adopt`]); a handed-over shard is no longer owned from now on.
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
                    ready,
                    started_at,
                    read_version,
                    lookups: lookups.as_ref(),
                };
                decide_member(&mut local.core, &input)?
            };
            match decision {
                MemberDecision::Plan(plan) => break plan,
                MemberDecision::Need { shards, inboxes } if lookups.is_none() => {
                    let mut found = MemberLookups::default();
                    for shard in shards {
                        let rec = self.shard_with(txn, shard, ReadMode::Serializable).await?;
                        found.shards.insert(shard, rec);
                    }
                    for target in inboxes {
                        let i = self.inbox(txn, &target, ReadMode::Serializable).await?;
                        found.inboxes.insert(target, i);
                    }
                    lookups = Some(found);
                }
                MemberDecision::Need { .. } => {
                    return Err(ElectionError::corrupt(
                        &self.inbox_key(&id),
                        DecodeError::Impossible("a member decision asked twice for its lookups"),
                    ));
                }
            }
        };
        txn.set(&self.member_key(&id), &codec::encode_member(&plan.record)?);
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
            released: plan.released,
            joined: plan.joined,
            remaining: plan.remaining,
        })
    }

    /// A member leaves gracefully: every shard it owns is written vacant and its epoch ends
    /// (its record fenced, its inbox cleared), in one commit, so the coordinator reserves its
    /// shards for others at once, without a lease's wait. The member owns nothing from now on
    /// (before the commit).
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
        let owned = {
            let mut local = member.lock();
            let owned: Vec<ShardId> = local.core.owned.keys().copied().collect();
            local.core.lose_all();
            owned
        };
        let Some(record) = self.member_with(txn, &id, ReadMode::Serializable).await? else {
            return Ok(());
        };
        if record.fenced {
            return Ok(());
        }
        for shard in owned {
            let rec = self.shard_with(txn, shard, ReadMode::Serializable).await?;
            if rec
                .owner
                .as_ref()
                .is_some_and(|o| o.member == id && o.epoch == record.epoch)
            {
                let vacant = ShardRecord {
                    owner: None,
                    move_to: None,
                    reserved_for: None,
                    ..rec
                };
                txn.set(&self.shard_key(shard), &codec::encode_shard(&vacant)?);
            }
        }
        let gone = MemberRecord {
            epoch: record
                .epoch
                .checked_add(1)
                .ok_or(ElectionError::CounterExhausted { what: "epoch" })?,
            renewal: record
                .renewal
                .checked_add(1)
                .ok_or(ElectionError::CounterExhausted { what: "renewal" })?,
            fenced: true,
            writer: None,
            ..record
        };
        txn.set(&self.member_key(&id), &codec::encode_member(&gone)?);
        txn.clear(&self.inbox_key(&id));
        Ok(())
    }

    /// One coordinator attempt, by the leader of the [coordinator
    /// election](Self::coordinator_election) holding `token`: times every member, fences
    /// out those whose record stayed unchanged for a full lease (their epoch ends, in the
    /// same commit as the reservations of their shards), and writes the next placement steps
    /// (reservations, at most the layout's move limit of move requests, withdrawals). Reads
    /// the members and the shards in two range reads.
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
        let layout = self.layout(txn).await?;
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
                    members: &members.records,
                    shards: &shards,
                    drained: &members.drained,
                    read_at,
                    marker,
                },
            )?
        };
        for (id, rec) in &plan.fenced {
            let key = self.member_key(id);
            txn.add_read_conflict_key(&key)?;
            txn.set(&key, &codec::encode_member(rec)?);
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
        if let Some(digest) = plan.publish {
            txn.set(&self.assignments, &digest.to_be_bytes());
        }
        Ok(Coordination {
            fenced: plan.fenced.into_iter().map(|(id, _)| id).collect(),
            shards_written: plan.shards.len(),
            placement: plan
                .placement
                .unwrap_or_else(|| placement::plan(&[], &[], 1)),
        })
    }

    /// A standby's timing: a member that may become coordinator reads every member's record
    /// (one range read, nothing written) and times it on `coordinator`'s clock, as the
    /// coordinator does at each attempt. Run it about once per heartbeat while another member
    /// coordinates: when this one takes over, a member that died meanwhile has already been
    /// seen unchanged for most of a lease, and is fenced out within about a lease of its death
    /// rather than a lease after the takeover.
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

    /// Every member's record and inbox, and the drained members (one range read).
    pub(super) async fn read_members<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<MembersRead, ElectionError> {
        let (begin, end) = self.members.range();
        let rows = txn.get_range(&begin, &end, ReadMode::Snapshot).await?;
        let mut records: BTreeMap<CandidateId, MemberRecord> = BTreeMap::new();
        let mut inboxes: BTreeMap<CandidateId, Inbox> = BTreeMap::new();
        let mut drained = BTreeSet::new();
        for (key, value) in rows {
            let bad = |why| ElectionError::corrupt(&key, DecodeError::Impossible(why));
            let id = |name: &str| CandidateId::parse(name).map_err(|_| bad("invalid member id"));
            if let Ok((name,)) = self.members.unpack::<(String,)>(&key) {
                records.insert(id(&name)?, codec::decode_member(&key, &value)?);
            } else if let Ok((name, kind)) = self.members.unpack::<(String, String)>(&key) {
                match kind.as_str() {
                    "inbox" => {
                        inboxes.insert(id(&name)?, codec::decode_inbox(&key, &value)?);
                    }
                    "drained" => {
                        drained.insert(id(&name)?);
                    }
                    _ => return Err(bad("unknown key under the members")),
                }
            } else {
                return Err(bad("unknown key under the members"));
            }
        }
        let records = records
            .into_iter()
            .map(|(id, rec)| {
                let inbox = inboxes.remove(&id).unwrap_or_default();
                (id, (rec, inbox))
            })
            .collect();
        Ok(MembersRead { records, drained })
    }

    /// Every shard's record, by number (one range read).
    pub(super) async fn read_shards<T: ElectionTxn>(
        &self,
        txn: &T,
        count: u32,
    ) -> Result<Vec<Option<ShardRecord>>, ElectionError> {
        let (begin, end) = self.shards.range();
        let rows = txn.get_range(&begin, &end, ReadMode::Snapshot).await?;
        let mut out: Vec<Option<ShardRecord>> =
            vec![None; usize::try_from(count).unwrap_or(usize::MAX)];
        for (key, value) in rows {
            let (n,): (u32,) = self.shards.unpack(&key).map_err(|_| {
                ElectionError::corrupt(
                    &key,
                    DecodeError::Impossible("unknown key under the shards"),
                )
            })?;
            if let Some(slot) = out.get_mut(usize::try_from(n).unwrap_or(usize::MAX)) {
                *slot = Some(codec::decode_shard(&key, &value)?);
            }
        }
        Ok(out)
    }

    /// Fences the caller's transaction for `shard`'s work: reads the shard's record and its
    /// owner's record serializably and requires that `token` is the shard's ballot, owned by a
    /// member whose epoch is still the one it acquired the shard in. A write in the same
    /// transaction then commits only while that ownership holds. Member renewals never abort
    /// it (they do not change the epoch); a takeover of the member, or a handover of the
    /// shard, does.
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] if another ballot owns the shard, it is vacant, or its
    /// owner's epoch ended; [`ElectionError::InvalidLayout`] for a shard out of range;
    /// corrupt values; database errors.
    pub async fn fence_shard<T: ElectionTxn>(
        &self,
        txn: &T,
        shard: ShardId,
        token: Ballot,
    ) -> Result<(), ElectionError> {
        let layout = self.layout(txn).await?;
        if shard.get() >= layout.shards {
            return Err(ElectionError::InvalidLayout {
                reason: "shard number out of range",
            });
        }
        let rec = self.shard_with(txn, shard, ReadMode::Serializable).await?;
        let stale = |vacant| ElectionError::StaleToken {
            token,
            current: rec.ballot,
            vacant,
        };
        let Some(owner) = &rec.owner else {
            return Err(stale(true));
        };
        if rec.ballot != token {
            return Err(stale(false));
        }
        let member = self
            .member_with(txn, &owner.member, ReadMode::Serializable)
            .await?;
        match member {
            Some(m) if !m.fenced && m.epoch == owner.epoch => Ok(()),
            _ => Err(stale(true)),
        }
    }

    /// The placement as the records show it now, every member not fenced out counted live (a
    /// query: it times nothing and changes nothing). Under a frozen layout its steps are only
    /// those the coordinator would still write.
    ///
    /// # Errors
    ///
    /// As [`layout`](Self::layout).
    pub async fn placement<T: ElectionTxn>(&self, txn: &T) -> Result<Placement, ElectionError> {
        let layout = self.layout(txn).await?;
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
        Ok(place(&layout, &live, &epochs, &shards))
    }
}
