//! The sharded safety oracles S1–S3, S5's check of the records a leave lands on, and the facts
//! they are fed.
//!
//! The sharded safety oracles, checked against true time: S1 (one believer per shard at every
//! step; queries never change a belief), S2 (fenced writes per shard in ballot order, no lost
//! update) and S3 (ballots per shard), and the facts they are fed after every applied commit;
//! with them, S5's check that once a graceful leave has landed no shard record names the
//! member at the epoch it ended (the rest of S5 is the quiet phase's).

use std::collections::{BTreeMap, BTreeSet};

use fdb_leader_election::shard::{Member, ShardedElection};
use fdb_leader_election::{ElectionError, MemTransaction, ShardId};
use foundationdb_tuple::Subspace;

use super::commit::{PKind, Pending, Who};
use super::forget::ForgetState;
use super::off::{MemberView, OffState, Written, placed_while_off};
use super::quiet::{QuietState, Rec};
use super::work::{be_u64, counter_key};
use super::{SUBSPACE, World};
use crate::oracles::{OracleId, Violation};

/// The oracles' memory.
#[derive(Debug)]
pub(crate) struct ShardOracles {
    /// Each shard's record key.
    shard_keys: Vec<Vec<u8>>,
    /// Each shard's last record read.
    pub(crate) records: Vec<Rec>,
    /// Whom each shard's vacancy is reserved for, as last read.
    pub(crate) reserved: Vec<Option<String>>,
    /// The owner of every (shard, ballot) seen.
    owner_of: BTreeMap<(u32, u64), (String, u64)>,
    /// The member that believed every (shard, ballot).
    believer_of: BTreeMap<(u32, u64), String>,
    /// S2: each shard's highest ballot written, and its fenced increments applied.
    written: Vec<(u64, u64)>,
    /// S5: every (member, epoch) a graceful leave ended (the live epoch its record had; the
    /// leave writes it fenced at the next): no shard record may name that member at that
    /// epoch from then on (the leave gives back every shard of it in its one commit; shards of
    /// earlier epochs, ended by a takeover, are the coordinator's to reserve).
    left: BTreeSet<(String, u64)>,
    /// The quiet phase's oracles (S4–S6).
    pub(crate) quiet: QuietState,
    /// Every member's record as last read, by member id (S9, S10).
    pub(crate) member_views: BTreeMap<String, MemberView>,
    /// S9: the configuration's history and coordinators' faults.
    pub(crate) off: OffState,
    /// S10: the members forgotten.
    pub(crate) forget: ForgetState,
}

impl ShardOracles {
    pub(crate) fn new(shards: u32) -> Self {
        let e = ShardedElection::new(Subspace::from(SUBSPACE));
        let n = usize::try_from(shards).unwrap_or(0);
        ShardOracles {
            shard_keys: (0..shards).map(|s| e.shard_key(ShardId::new(s))).collect(),
            records: vec![(0, None); n],
            reserved: vec![None; n],
            owner_of: BTreeMap::new(),
            believer_of: BTreeMap::new(),
            written: vec![(0, 0); n],
            left: BTreeSet::new(),
            quiet: QuietState::default(),
            member_views: BTreeMap::new(),
            off: OffState::default(),
            forget: ForgetState::default(),
        }
    }

    /// S3 on shard `s`'s new record; returns the violation, if any.
    pub(crate) fn on_record(&mut self, s: u32, rec: Rec) -> Option<String> {
        let i = usize::try_from(s).ok()?;
        let (b0, o0) = self.records.get(i)?.clone();
        let (b, o) = rec.clone();
        if let Some(slot) = self.records.get_mut(i) {
            *slot = rec;
        }
        if let Some(owner) = &o {
            if let Some(prev) = self.owner_of.insert((s, b), owner.clone()) {
                if &prev != owner {
                    return Some(format!(
                        "shard {s} ballot {b} has two owners: {prev:?} and {owner:?}"
                    ));
                }
            }
        }
        if b < b0 {
            return Some(format!("shard {s}'s ballot went from {b0} to {b}"));
        }
        match (&o0, &o) {
            (Some(x), Some(y)) if x == y && b != b0 => {
                Some(format!("shard {s}: same owner {y:?}, ballot {b0} -> {b}"))
            }
            (x, Some(y)) if x.as_ref() != Some(y) && b != b0.saturating_add(1) => Some(format!(
                "shard {s}: new owner {y:?} with ballot {b} after {b0} (must add exactly one)"
            )),
            (_, None) if b != b0 => {
                Some(format!("shard {s} vacated with a new ballot {b0} -> {b}"))
            }
            _ => None,
        }
    }

    /// S5 on a graceful leave that landed: `member`'s record is fenced at `fenced_epoch`, so
    /// the leave ended the epoch before it. Returns the shards whose record still names the
    /// member at that epoch.
    pub(crate) fn on_leave(&mut self, member: &str, fenced_epoch: u64) -> Vec<String> {
        let Some(ended) = fenced_epoch.checked_sub(1) else {
            return Vec::new();
        };
        self.left.insert((member.to_owned(), ended));
        self.records
            .iter()
            .enumerate()
            .filter_map(|(i, rec)| self.left_behind(u32::try_from(i).ok()?, rec))
            .collect()
    }

    /// S5 on shard `s`'s record: a violation if it names a member at an epoch its graceful
    /// leave ended.
    pub(crate) fn left_behind(&self, s: u32, rec: &Rec) -> Option<String> {
        let (b, Some(owner)) = rec else {
            return None;
        };
        self.left.contains(owner).then(|| {
            format!(
                "shard {s} (ballot {b}) is owned by {} at epoch {}, which its graceful leave \
                 ended: the leave gives back every shard of its epoch in its commit",
                owner.0, owner.1
            )
        })
    }

    /// S3: each (shard, ballot) believed by one member.
    pub(crate) fn on_belief(&mut self, s: u32, ballot: u64, member: &str) -> Option<String> {
        let prev = self.believer_of.insert((s, ballot), member.to_owned())?;
        (prev != member).then(|| {
            format!("shard {s} ballot {ballot} believed by two members: {prev} and {member}")
        })
    }

    /// S2 on an applied fenced write; returns the increments applied to that shard so far.
    pub(crate) fn on_write(&mut self, s: u32, ballot: u64) -> Result<u64, String> {
        let i = usize::try_from(s).map_err(|e| e.to_string())?;
        let Some(w) = self.written.get_mut(i) else {
            return Err(format!("shard {s} out of range"));
        };
        w.1 = w.1.saturating_add(1);
        if ballot < w.0 {
            return Err(format!(
                "shard {s}'s register written with ballot {ballot} after ballot {} wrote it",
                w.0
            ));
        }
        w.0 = ballot;
        Ok(w.1)
    }
}

impl World {
    /// Reads, outside any fault, what the oracles need.
    pub(super) fn read_bypass<T>(
        &self,
        f: impl AsyncFnOnce(&ShardedElection, &MemTransaction) -> Result<T, ElectionError>,
    ) -> Result<T, ElectionError> {
        self.faults.set_bypass(true);
        let txn = self.db.create_transaction();
        let r = self.rt.block_on(f(&self.election, &txn));
        self.faults.set_bypass(false);
        r
    }

    /// An applied commit: S2 for shard work, S3 for every shard record written, and the
    /// inbox watches of the members whose inbox it wrote.
    pub(super) fn on_applied(&mut self, p: &Pending, written: &[Vec<u8>]) {
        if let PKind::Work { shard, ballot } = p.kind {
            self.stats.fenced_committed = self.stats.fenced_committed.saturating_add(1);
            match self.oracles.on_write(shard, ballot) {
                Err(m) => self.found.push(Violation::new(OracleId::ShardFencing, m)),
                Ok(expected) => {
                    let stored = self.read_bypass(async |_, txn| {
                        use fdb_leader_election::ElectionTxn;
                        txn.get(&counter_key(shard), fdb_leader_election::ReadMode::Snapshot)
                            .await
                            .map_err(ElectionError::from)
                    });
                    let got = stored.ok().flatten();
                    let got = be_u64(got.as_deref()).unwrap_or(0);
                    if got != expected {
                        self.stats.fenced_lost = self.stats.fenced_lost.saturating_add(1);
                        self.found.push(Violation::new(
                            OracleId::ShardFencing,
                            format!(
                                "shard {shard}'s fenced counter is {got} after {expected} applied increments (a lost update)"
                            ),
                        ));
                    }
                }
            }
            return;
        }
        // S9: the configuration as of this commit's read version and just before it.
        let version = self.db.committed_version();
        let read_on = p.txn.read_version().map(|v| self.oracles.off.enabled_at(v));
        let commit_on = self.oracles.off.enabled_at(version.saturating_sub(1));
        let shards: Vec<u32> = (0..self.p.shards)
            .filter(|s| {
                usize::try_from(*s)
                    .ok()
                    .and_then(|i| self.oracles.shard_keys.get(i))
                    .is_some_and(|k| written.contains(k))
            })
            .collect();
        if !shards.is_empty() {
            self.log(format!("  wrote shard records {shards:?}"));
        }
        for s in shards {
            let rec = self.read_bypass(async |e, txn| e.shard_record(txn, ShardId::new(s)).await);
            let full = match rec {
                Ok(r) => Written {
                    ballot: r.ballot().get(),
                    owner: r
                        .owner()
                        .map(|o| (o.member().as_str().to_owned(), o.epoch())),
                    move_to: r.move_to().map(|m| m.as_str().to_owned()),
                    reserved_for: r.reserved_for().map(|h| h.as_str().to_owned()),
                },
                Err(e) => {
                    self.found.push(Violation::new(
                        OracleId::ShardBallots,
                        format!("shard {s}'s record cannot be read: {e}"),
                    ));
                    continue;
                }
            };
            if let Some(slot) = self
                .oracles
                .reserved
                .get_mut(usize::try_from(s).unwrap_or(0))
            {
                slot.clone_from(&full.reserved_for);
            }
            let rec: Rec = (full.ballot, full.owner.clone());
            let before = self
                .oracles
                .records
                .get(usize::try_from(s).unwrap_or(0))
                .cloned();
            let before_owner = before.as_ref().and_then(|b| b.1.as_ref());
            if let Some(m) = placed_while_off(p.who, s, before_owner, &full, read_on, commit_on) {
                self.found
                    .push(Violation::new(OracleId::ShardElectionsOff, m));
            }
            if let Some(owner) = &full.owner {
                if let Some(m) = self.oracles.forget.names_forgotten(s, full.ballot, owner) {
                    self.found.push(Violation::new(OracleId::ShardForgotten, m));
                }
            }
            if let Some(m) = self.oracles.on_record(s, rec.clone()) {
                self.found.push(Violation::new(OracleId::ShardBallots, m));
            }
            if let Some(m) = self.oracles.left_behind(s, &rec) {
                self.found.push(Violation::new(OracleId::ShardDeploy, m));
            }
            self.quiet_on_record(s, before.as_ref(), &rec);
        }
        self.on_member_writes(p, written, commit_on);
        // The configuration this commit leaves (only operators write it; read after every
        // commit all the same).
        match self.read_bypass(async |e, txn| e.read_config(txn).await) {
            Ok(c) => self.note_config(version, c.election_enabled()),
            Err(e) => self.found.push(Violation::new(
                OracleId::ShardElectionsOff,
                format!("the configuration cannot be read: {e}"),
            )),
        }
        if matches!(p.who, Who::Member(_)) {
            self.on_member_records(written);
        }
        let writer = match p.who {
            Who::Member(pid) => Some(pid),
            _ => None,
        };
        let woken: Vec<usize> = (0..self.members.len())
            .filter(|pid| Some(*pid) != writer)
            .filter(|pid| {
                self.members.get(*pid).is_some_and(|m| {
                    m.alive && written.contains(&self.election.inbox_key(m.member.id()))
                })
            })
            .collect();
        for pid in woken {
            self.inbox_changed(pid);
        }
    }

    /// S5 after a member's commit (whatever its kind: a leave whose reply was lost lands as an
    /// abandoned operation): each member record it wrote that is now fenced is a graceful
    /// leave that landed (a member fences nothing else; a takeover is the coordinator's), and
    /// no shard record may name that member at an epoch the leave ended.
    fn on_member_records(&mut self, written: &[Vec<u8>]) {
        let ids: Vec<fdb_leader_election::CandidateId> = self
            .members
            .iter()
            .map(|m| m.member.id().clone())
            .filter(|id| written.contains(&self.election.member_key(id)))
            .collect();
        for id in ids {
            let rec = self.read_bypass(async |e, txn| e.member_record(txn, &id).await);
            let Ok(Some(rec)) = rec else {
                continue;
            };
            if !rec.is_fenced() {
                continue;
            }
            let label = id.as_str().to_owned();
            self.log(format!("  {label} left at epoch {}", rec.epoch()));
            for m in self.oracles.on_leave(&label, rec.epoch()) {
                self.found.push(Violation::new(OracleId::ShardDeploy, m));
            }
        }
    }

    /// S1 after every step: at most one member believes it owns a shard at this true instant
    /// (its library ownership view, or a guard not yet past its deadline on its clock).
    pub(super) fn check_beliefs(&mut self) {
        let mut by_shard: BTreeMap<u32, Vec<(String, u64)>> = BTreeMap::new();
        for m in self.members.iter().filter(|m| m.alive) {
            let mut mine: BTreeMap<u32, u64> = m
                .member
                .owned_shards()
                .into_iter()
                .map(|(s, b)| (s.get(), b.get()))
                .collect();
            let local = m.clock.local_now();
            for (s, g) in &m.guards {
                if local < g.deadline {
                    mine.entry(s.get()).or_insert(g.ballot);
                }
            }
            for (s, b) in mine {
                by_shard
                    .entry(s)
                    .or_default()
                    .push((m.member.id().as_str().to_owned(), b));
            }
        }
        for (s, believers) in by_shard {
            if believers.len() > 1 {
                self.found.push(Violation::new(
                    OracleId::ShardBelief,
                    format!(
                        "shard {s} believed owned by {} members at once: {believers:?}",
                        believers.len()
                    ),
                ));
            }
            for (id, b) in believers {
                if let Some(m) = self.oracles.on_belief(s, b, &id) {
                    self.found.push(Violation::new(OracleId::ShardBallots, m));
                }
            }
        }
    }

    /// Composed transactions: now and then a member's cycle shares its transaction with
    /// queries reading its own uncommitted writes (which must not change its belief), or with
    /// a second cycle (which must be refused).
    pub(super) fn compose(&mut self, pid: usize, txn: &MemTransaction, member: &Member) {
        let queries = self.chance(1, 5);
        let second = self.chance(1, 20);
        if !queries && !second {
            return;
        }
        self.stats.composed_cycles = self.stats.composed_cycles.saturating_add(1);
        let before = member.owned_shards();
        let e = self.election.clone();
        if queries {
            let shards: BTreeSet<ShardId> = (0..self.p.shards).map(ShardId::new).collect();
            let _ = self.rt.block_on(async {
                for s in &shards {
                    e.shard_record(txn, *s).await?;
                }
                e.member_record(txn, member.id()).await?;
                e.placement(txn).await.map(|_| ())
            });
        }
        if second {
            let again = self
                .rt
                .block_on(e.member_cycle(txn, member, &BTreeSet::new()));
            if matches!(again, Err(ElectionError::CycleInProgress { .. })) {
                self.stats.sharded.refused_second_cycles =
                    self.stats.sharded.refused_second_cycles.saturating_add(1);
            } else if again.is_ok() {
                let label = self.label(pid);
                self.found.push(Violation::new(
                    OracleId::ShardBelief,
                    format!("{label}: a second member cycle in one transaction was not refused"),
                ));
            }
        }
        if member.owned_shards() != before {
            let label = self.label(pid);
            self.found.push(Violation::new(
                OracleId::ShardBelief,
                format!("{label}: a query in its own cycle's transaction changed its belief"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(id: &str, epoch: u64) -> Option<(String, u64)> {
        Some((id.to_owned(), epoch))
    }

    // S3 is covered by no plant (the library writes every shard record); it fires on planted
    // histories: a ballot that goes back, a new owner skipping a ballot, two owners of one
    // ballot, a renewal that bumps the ballot, and two believers of one ballot.
    #[test]
    fn the_ballot_oracle_fires_on_planted_histories() {
        let mut o = ShardOracles::new(2);
        assert_eq!(o.on_record(0, (1, owner("a", 1))), None);
        assert_eq!(o.on_record(0, (1, None)), None);
        assert_eq!(o.on_record(0, (2, owner("b", 1))), None);
        assert!(o.on_record(0, (1, owner("b", 1))).is_some(), "decrease");
        let mut o = ShardOracles::new(2);
        assert!(
            o.on_record(1, (2, owner("a", 1))).is_some(),
            "skips a ballot"
        );
        let mut o = ShardOracles::new(2);
        assert_eq!(o.on_record(0, (1, owner("a", 1))), None);
        assert!(
            o.on_record(0, (2, owner("a", 1))).is_some(),
            "renewal bumps"
        );
        let mut o = ShardOracles::new(2);
        assert_eq!(o.on_record(0, (1, owner("a", 1))), None);
        o.records[0] = (0, None);
        assert!(o.on_record(0, (1, owner("b", 1))).is_some(), "two owners");
        assert_eq!(o.on_belief(0, 1, "a"), None);
        assert!(o.on_belief(0, 1, "b").is_some(), "two believers");
    }

    // S5 on the records a leave lands on: a shard still owned at the epoch the leave ended
    // fires, at the leave or at any later record; the member's earlier epochs (ended by a
    // takeover) and its later ones (joined anew) do not.
    #[test]
    fn the_leave_check_fires_on_a_shard_left_owned_at_the_epoch_the_leave_ended() {
        let mut o = ShardOracles::new(3);
        assert_eq!(o.on_record(0, (1, owner("a", 4))), None);
        assert_eq!(o.on_record(1, (1, owner("a", 3))), None);
        assert_eq!(o.on_record(2, (1, owner("b", 4))), None);
        let found = o.on_leave("a", 5);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("shard 0 "), "{found:?}");
        assert!(o.left_behind(0, &(2, owner("a", 4))).is_some());
        assert!(o.left_behind(0, &(2, owner("a", 5))).is_none());
        assert!(o.left_behind(0, &(2, owner("b", 4))).is_none());
        assert!(o.left_behind(0, &(2, None)).is_none());
    }

    #[test]
    fn the_fencing_oracle_fires_on_an_older_ballot_after_a_newer_one() {
        let mut o = ShardOracles::new(1);
        assert_eq!(o.on_write(0, 1), Ok(1));
        assert_eq!(o.on_write(0, 2), Ok(2));
        assert!(o.on_write(0, 1).is_err());
    }
}
