//! Oracle S10 of the sharded world: forgotten members, and the member records the oracles
//! follow.
//!
//! Oracle S10 (dead members forgotten, issue 29 item 3). When a commit removes a member's
//! record: before it the record was fenced out; after it no shard record names the member
//! (owner at any epoch, move request, reservation) and its epoch mark and inbox are gone too;
//! a coordinator attempt that removes it reports it in `Coordination::forgotten` (and removes
//! every member it reports). From then on no shard record names it at an epoch its fencing
//! ended (the fenced record's epoch minus one, or earlier), and its process, if it still runs,
//! never believes it owns a shard at such an epoch (its ownership view, or a guard issued at
//! such an epoch before its deadline). A forgotten member that still runs joins again at a new
//! epoch (its record is gone: one after the last it joined at) and may own shards then.
//!
//! Every commit that writes a member's record updates the oracles' view of it, which S9's
//! failover bound times too.

use std::collections::BTreeMap;

use fdb_leader_election::{ElectionError, ElectionTxn, ReadMode, ShardId};

use super::World;
use super::commit::{PKind, Pending};
use super::off::MemberView;
use crate::oracles::{OracleId, Violation};

/// What oracle S10 remembers: each forgotten member, with the last epoch its fencing ended.
#[derive(Debug, Default)]
pub(crate) struct ForgetState {
    pub(crate) forgotten: BTreeMap<String, u64>,
}

impl ForgetState {
    /// A member's record was removed while it read `before` (fenced at that epoch).
    pub(crate) fn note(&mut self, id: &str, before: &MemberView) {
        let ended = before.epoch.saturating_sub(1);
        let slot = self.forgotten.entry(id.to_owned()).or_insert(ended);
        *slot = (*slot).max(ended);
    }

    /// S10 on a shard record naming `owner` at `epoch`: a violation if that member was
    /// forgotten at that epoch or a later one.
    pub(crate) fn names_forgotten(
        &self,
        s: u32,
        ballot: u64,
        owner: &(String, u64),
    ) -> Option<String> {
        let ended = self.forgotten.get(&owner.0)?;
        (owner.1 <= *ended).then(|| {
            format!(
                "shard {s} (ballot {ballot}) is owned by {} at epoch {}, after it was forgotten \
                 (its fencing ended epoch {ended})",
                owner.0, owner.1
            )
        })
    }
}

impl World {
    /// After an applied commit: the member records it wrote, as the oracles follow them. A
    /// record now fenced out is a fencing S9 times; a record now gone is a member forgotten
    /// (S10).
    pub(super) fn on_member_writes(&mut self, p: &Pending, written: &[Vec<u8>], commit_on: bool) {
        let ids: Vec<(String, fdb_leader_election::CandidateId)> = self
            .members
            .iter()
            .filter(|m| written.contains(&m.record_key))
            .map(|m| (m.member.id().as_str().to_owned(), m.member.id().clone()))
            .collect();
        let mut removed = Vec::new();
        for (label, id) in ids {
            let rec = self.read_bypass(async |e, txn| e.member_record(txn, &id).await);
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    self.found.push(Violation::new(
                        OracleId::ShardForgotten,
                        format!("{label}'s record cannot be read: {e}"),
                    ));
                    continue;
                }
            };
            let before = self.oracles.member_views.get(&label).cloned();
            let Some(rec) = rec else {
                if before.as_ref().is_some_and(|v| !v.gone) {
                    self.on_removed(&label, &id, before.as_ref(), p);
                    removed.push(label.clone());
                }
                if let Some(v) = self.oracles.member_views.get_mut(&label) {
                    v.gone = true;
                    let v = v.clone();
                    self.note_probe_record(&label, &v);
                }
                continue;
            };
            let view = MemberView {
                epoch: rec.epoch(),
                fenced: rec.is_fenced(),
                gone: false,
                since: self.now,
                judged: false,
            };
            if let Some(b) = before.as_ref().filter(|b| !b.fenced && !b.gone) {
                if view.fenced {
                    self.judge_fencing(&label, b, commit_on);
                }
            }
            self.note_probe_record(&label, &view);
            self.oracles.member_views.insert(label, view);
        }
        if let PKind::Coordinate { forgotten, .. } = &p.kind {
            for id in forgotten.iter().filter(|id| !removed.contains(id)) {
                self.found.push(Violation::new(
                    OracleId::ShardForgotten,
                    format!("a coordinator attempt reported {id} forgotten and left its record"),
                ));
            }
        }
    }

    /// S10 on a commit that removed `label`'s record.
    fn on_removed(
        &mut self,
        label: &str,
        id: &fdb_leader_election::CandidateId,
        before: Option<&MemberView>,
        p: &Pending,
    ) {
        self.stats.sharded.forgotten = self.stats.sharded.forgotten.saturating_add(1);
        let mut bad = Vec::new();
        match before {
            Some(b) if b.fenced => {}
            Some(b) => bad.push(format!(
                "{label}'s record was removed while not fenced out (epoch {})",
                b.epoch
            )),
            None => bad.push(format!("{label}'s record was removed, never seen written")),
        }
        if let PKind::Coordinate { forgotten, .. } = &p.kind {
            if !forgotten.iter().any(|f| f == label) {
                bad.push(format!(
                    "a coordinator attempt removed {label}'s record without reporting it forgotten"
                ));
            }
        }
        let shards = self.p.shards;
        let keys = [self.election.epoch_key(id), self.election.inbox_key(id)];
        let left = self.read_bypass(async |e, txn| {
            let mut named = Vec::new();
            for s in 0..shards {
                let r = e.shard_record(txn, ShardId::new(s)).await?;
                let names = r.owner().is_some_and(|o| o.member() == id)
                    || r.move_to().is_some_and(|m| m == id)
                    || r.reserved_for().is_some_and(|m| m == id);
                if names {
                    named.push(s);
                }
            }
            let mut kept = Vec::new();
            for k in &keys {
                kept.push(
                    txn.get(k, ReadMode::Snapshot)
                        .await
                        .map_err(ElectionError::from)?
                        .is_some(),
                );
            }
            Ok((named, kept))
        });
        match left {
            Ok((named, kept)) => {
                if !named.is_empty() {
                    bad.push(format!(
                        "{label} was forgotten while shards {named:?} name it"
                    ));
                }
                if kept.iter().any(|k| *k) {
                    bad.push(format!(
                        "{label} was forgotten but its epoch mark or inbox stays ({kept:?})"
                    ));
                }
            }
            Err(e) => bad.push(format!(
                "records unreadable after {label} was forgotten: {e}"
            )),
        }
        let epoch = before.map_or(0, |b| b.epoch);
        self.log(format!("  {label} forgotten (record at epoch {epoch})"));
        if let Some(b) = before {
            self.oracles.forget.note(label, b);
        }
        for m in bad {
            self.found.push(Violation::new(OracleId::ShardForgotten, m));
        }
    }

    /// S10 after every step: no process of a forgotten member believes it owns a shard at an
    /// epoch its fencing ended.
    pub(super) fn check_forgotten_beliefs(&mut self) {
        if self.oracles.forget.forgotten.is_empty() {
            return;
        }
        let mut bad = Vec::new();
        for m in self.members.iter().filter(|m| m.alive) {
            let Some(ended) = self.oracles.forget.forgotten.get(m.member.id().as_str()) else {
                continue;
            };
            let owned = m.member.owned_shards();
            let epoch = m.member.epoch().unwrap_or(0);
            if epoch <= *ended && !owned.is_empty() {
                bad.push(format!(
                    "{} believes it owns shards {:?} at epoch {epoch}, after it was forgotten \
                     (its fencing ended epoch {ended})",
                    m.label,
                    owned.keys().map(|s| s.get()).collect::<Vec<_>>()
                ));
            }
            let local = m.clock.local_now();
            for (s, g) in &m.guards {
                if g.epoch <= *ended && local < g.deadline {
                    bad.push(format!(
                        "{} holds a live guard of shard {} (ballot {}) issued at epoch {}, after \
                         it was forgotten (its fencing ended epoch {ended})",
                        m.label,
                        s.get(),
                        g.ballot,
                        g.epoch
                    ));
                }
            }
        }
        for m in bad {
            self.found.push(Violation::new(OracleId::ShardForgotten, m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(epoch: u64) -> MemberView {
        MemberView {
            epoch,
            fenced: true,
            gone: false,
            since: 0,
            judged: false,
        }
    }

    // S10 on shard records: a forgotten member named at the epoch its fencing ended (or an
    // earlier one) fires; at a later epoch (it joined again), or another member, does not.
    #[test]
    fn a_record_naming_a_forgotten_member_at_an_ended_epoch_fires() {
        let mut f = ForgetState::default();
        f.note("a", &view(5));
        let owner = |id: &str, e: u64| (id.to_owned(), e);
        assert!(f.names_forgotten(0, 3, &owner("a", 4)).is_some());
        assert!(f.names_forgotten(0, 3, &owner("a", 2)).is_some());
        assert!(f.names_forgotten(0, 3, &owner("a", 5)).is_none());
        assert!(f.names_forgotten(0, 3, &owner("b", 4)).is_none());
        f.note("a", &view(8));
        assert!(f.names_forgotten(0, 3, &owner("a", 7)).is_some());
        f.note("a", &view(3));
        assert!(f.names_forgotten(0, 3, &owner("a", 7)).is_some());
    }
}
