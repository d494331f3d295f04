//! [`ShardedElection`]: a sharded election's operations, each run inside the caller's
//! transaction (docs/design.md §12).
//!
//! ```text
//! S + ("config",)                 -> ElectionConfig (the single election's format)
//! S + ("layout",)                 -> Layout
//! S + ("assignments",)            -> 8-byte digest      rewritten on every change of owner
//! S + ("members", id)             -> MemberRecord       one lease per member
//! S + ("members", id, "epoch")    -> its epoch mark     written when the epoch starts or ends
//! S + ("members", id, "inbox")    -> Inbox              what the coordinator asks of it
//! S + ("members", id, "drained")  -> (empty)            an operator drained it
//! S + ("shards", n)               -> ShardRecord        ballot, owner (member, epoch)
//! S + ("coordinator", ...)        -> the coordinator election (a LeaderElection)
//! ```
//!
//! A member's epoch mark repeats its record's epoch and whether that epoch ended; every write
//! that changes them writes both, in the same transaction ([`ShardedElection::set_member`]). A
//! renewal writes the record only, so a write fenced on the mark
//! ([`ShardedElection::fence_shard`]) conflicts with the end of its owner's epoch and never
//! with the owner's heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use foundationdb_tuple::Subspace;

use crate::codec;
use crate::config::ElectionConfig;
use crate::core::shard::budget::KeyLens;
use crate::election::LeaderElection;
use crate::error::{DecodeError, ElectionError};
use crate::ids::{CandidateId, ShardId};
use crate::record::shard::{EpochMark, Inbox, Layout, MAX_SHARDS, MemberRecord, ShardRecord};
use crate::store::txn::{ElectionTxn, ReadMode};

/// The coordinator election's configuration: the sharded election's, with elections always
/// enabled. Disabling elections stops placement (members give their shards back, nothing is
/// reserved), never the coordinator, which keeps fencing out the members that lapse: no
/// configuration leaves a dead member's shards owned by it.
/// (Whether elections run is no part of a configuration's validation.)
fn coordinator_config(config: &ElectionConfig) -> ElectionConfig {
    ElectionConfig {
        election_enabled: true,
        ..config.clone()
    }
}

/// The bytes a member key takes beyond the members' subspace and the id's own bytes: the id's
/// tuple framing (a type code and a terminator) and the longest suffix, `"drained"` (9).
const MEMBER_KEY_FRAMING: usize = 11;

/// A sharded election under one subspace: a cheap `Clone` handle.
#[derive(Clone, Debug)]
pub struct ShardedElection {
    subspace: Subspace,
    pub(super) config: Vec<u8>,
    pub(super) layout: Vec<u8>,
    pub(super) assignments: Vec<u8>,
    members: Subspace,
    shards: Subspace,
    pub(super) coordinator: LeaderElection,
    /// Its keys' lengths, which every transaction's budget counts.
    pub(super) key_lens: KeyLens,
}

/// Every member's record and inbox, and the members an operator drained, as one range read
/// returns them.
#[derive(Debug, Default)]
pub(super) struct MembersRead {
    pub(super) records: BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    pub(super) drained: BTreeSet<CandidateId>,
}

impl ShardedElection {
    /// The sharded election under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        let members = subspace.subspace(&("members",));
        let shards = subspace.subspace(&("shards",));
        let key_lens = KeyLens {
            // Tuple integers grow with their value: the largest shard number has the longest.
            shard: shards.pack(&(MAX_SHARDS.saturating_sub(1),)).len(),
            // (id, "drained"): the id's framing (2 bytes) and the longest suffix (9).
            member_base: members.bytes().len().saturating_add(MEMBER_KEY_FRAMING),
        };
        ShardedElection {
            config: subspace.pack(&("config",)),
            layout: subspace.pack(&("layout",)),
            assignments: subspace.pack(&("assignments",)),
            members,
            shards,
            coordinator: LeaderElection::new(subspace.subspace(&("coordinator",))),
            key_lens,
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

    /// The key of `member`'s epoch mark: its epoch and whether that epoch ended, written only
    /// when they change (a join, a fencing, a leave), never by a renewal.
    pub fn epoch_key(&self, member: &CandidateId) -> Vec<u8> {
        self.members.pack(&(member.as_str(), "epoch"))
    }

    /// Writes `member`'s record, and its epoch mark when the record's epoch or its end differs
    /// from `before` (the record as read in this transaction): the one place the two keys are
    /// kept in step.
    pub(super) fn set_member<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &CandidateId,
        record: &MemberRecord,
        before: Option<&MemberRecord>,
    ) -> Result<(), ElectionError> {
        txn.set(&self.member_key(member), &codec::encode_member(record)?);
        let mark = EpochMark::of(record);
        if before.map(EpochMark::of) != Some(mark) {
            txn.set(&self.epoch_key(member), &codec::encode_epoch_mark(&mark)?);
        }
        Ok(())
    }

    /// `member`'s epoch mark, if one was ever written.
    pub(super) async fn epoch_mark<T: ElectionTxn>(
        &self,
        txn: &T,
        member: &CandidateId,
        mode: ReadMode,
    ) -> Result<Option<EpochMark>, ElectionError> {
        let key = self.epoch_key(member);
        txn.get(&key, mode)
            .await?
            .map(|bytes| codec::decode_epoch_mark(&key, &bytes))
            .transpose()
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
        self.coordinator
            .initialize_with_config(txn, &coordinator_config(config))
            .await
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

    /// The stored configuration: the one every member cycle reads (and paces its member by),
    /// and the coordinator election's.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn read_config<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<ElectionConfig, ElectionError> {
        self.config(txn).await
    }

    /// Replaces the configuration of an existing sharded election: the one its members read
    /// at every cycle and its coordinator election's, in this transaction (one configuration
    /// for both). A member picks it up at its next cycle; a shorter lease caps its belief
    /// before that cycle's commit, and the coordinator keeps timing each member by the lease
    /// its record was renewed with (docs/design.md §10.3, per member), so no change of configuration
    /// lets a member be taken over while it still believes. The layout never changes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fdb_leader_election::shard::{Layout, ShardedElection};
    /// use fdb_leader_election::{ElectionConfig, MemDb};
    /// use fdb_leader_election::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let db = MemDb::new();
    /// let election = ShardedElection::new(Subspace::from("jobs"));
    /// let first = ElectionConfig::with_lease_duration(Duration::from_secs(10))?;
    /// let layout = Layout::new(16, 4)?;
    /// let e = election.clone();
    /// db.run(|txn, _| {
    ///     let (e, first) = (e.clone(), first.clone());
    ///     async move { e.initialize(&txn, &first, &layout).await }
    /// })
    /// .await?;
    /// // Later: a larger clock-rate bound for every member, from its next cycle.
    /// let wider = first.to_builder().max_clock_rate_error_ppm(50_000).build()?;
    /// let e = election.clone();
    /// let stored = db
    ///     .run(|txn, _| {
    ///         let (e, wider) = (e.clone(), wider.clone());
    ///         async move {
    ///             e.write_config(&txn, &wider).await?;
    ///             e.read_config(&txn).await
    ///         }
    ///     })
    ///     .await?;
    /// assert_eq!(stored.max_clock_rate_error_ppm(), 50_000);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`] (create it with [`initialize`](Self::initialize));
    /// corrupt values; database errors.
    pub async fn write_config<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        self.layout(txn).await?;
        txn.set(&self.config, &codec::encode_config(config)?);
        self.coordinator
            .write_config(txn, &coordinator_config(config))
            .await
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
                    "epoch" => {
                        id(&name)?;
                        codec::decode_epoch_mark(&key, &value)?;
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
}
