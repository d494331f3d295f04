//! The quiet-phase oracles S4–S6 of the sharded world.
//!
//! The quiet phase's oracles: S4 (every shard owned within lease + 2 heartbeats of the faults
//! stopping, then balanced within a bounded number of rounds), S5 (the final rolling deploy
//! ends with every shard on a new member; a graceful leave's shards are owned again without a
//! lease's wait) and S6 (no more changes of owner than the placement bound).

use std::collections::BTreeMap;

use super::World;
use crate::oracles::{OracleId, Violation};
use crate::time::{Nanos, secs};

/// A shard record as the oracles keep it: ballot and owner (member id, epoch).
pub(crate) type Rec = (u64, Option<(String, u64)>);

/// What the quiet-phase oracles remember.
#[derive(Debug, Default)]
pub(crate) struct QuietState {
    /// The final deploy began (every fault over).
    pub(crate) final_deploy: bool,
    /// When the final deploy ended (the oracles armed).
    armed_at: Option<Nanos>,
    /// The generation every member must be of at the end.
    final_generation: u32,
    /// S6: armed, the bound, and the changes of owner counted since arming.
    moves_armed: bool,
    move_bound: u64,
    changes: u64,
    owned_at: Option<Nanos>,
    balanced_at: Option<Nanos>,
    /// Shards a member owned when asked to shut down gracefully (quiet phase), by member.
    handing: BTreeMap<usize, Vec<u32>>,
    /// S5: shards to be owned again by then, after a graceful leave.
    leave_deadlines: Vec<(u32, Nanos, String)>,
    /// Oracles already reported (each reports once).
    reported: Vec<OracleId>,
}

/// Each live member's floor and ceiling of M·w/W.
fn shares(weights: &BTreeMap<String, u64>, m: u64) -> BTreeMap<String, (u64, u64)> {
    let total: u64 = weights.values().sum();
    weights
        .iter()
        .map(|(id, w)| {
            let share = m.saturating_mul(*w);
            (
                id.clone(),
                (
                    share.checked_div(total).unwrap_or(0),
                    share.div_ceil(total.max(1)),
                ),
            )
        })
        .collect()
}

/// The placement bound: shards no live member holds, plus what each holds above its floor.
pub(crate) fn move_bound(records: &[Rec], weights: &BTreeMap<String, u64>, m: u64) -> u64 {
    let mut held: BTreeMap<&str, u64> = BTreeMap::new();
    let mut orphans = 0u64;
    for (_, owner) in records {
        match owner {
            Some((id, _)) if weights.contains_key(id) => {
                let n = held.entry(id.as_str()).or_default();
                *n = n.saturating_add(1);
            }
            _ => orphans = orphans.saturating_add(1),
        }
    }
    let bounds = shares(weights, m);
    let above: u64 = held
        .iter()
        .map(|(id, n)| n.saturating_sub(bounds.get(*id).map_or(0, |b| b.0)))
        .sum();
    orphans.saturating_add(above)
}

impl World {
    /// The live members' weights, by id.
    fn live_weights(&self) -> BTreeMap<String, u64> {
        self.members
            .iter()
            .filter(|m| m.alive)
            .map(|m| (m.member.id().as_str().to_owned(), u64::from(m.weight)))
            .collect()
    }

    /// The final deploy is over: S4 and S5 arm once every member of an older generation is
    /// gone (a graceful leave may still be draining); S6 once every crashed member is fenced
    /// out too (placement counts a member live until then, and plans for it).
    pub(super) fn arm(&mut self) {
        let generation = self.nodes.iter().map(|n| n.1).max().unwrap_or(0);
        let again = self.now.saturating_add(self.p.heartbeat / 4);
        if self
            .members
            .iter()
            .any(|m| m.alive && m.generation < generation)
        {
            self.queue.push(again, super::Ev::Arm);
            return;
        }
        if self.oracles.quiet.armed_at.is_none() {
            let q = &mut self.oracles.quiet;
            q.armed_at = Some(self.now);
            q.final_generation = generation;
            let owned = self.now.saturating_add(self.p.owned_bound());
            let balanced = owned.saturating_add(self.p.balance_bound());
            self.queue.push(owned, super::Ev::Deadline);
            self.queue.push(balanced, super::Ev::Deadline);
            self.log(format!(
                "quiet oracles armed: owned by {}, balanced by {}",
                secs(owned),
                secs(balanced)
            ));
        }
        let dead: Vec<_> = self
            .members
            .iter()
            .filter(|m| !m.alive)
            .map(|m| m.member.id().clone())
            .collect();
        let unfenced = self.read_bypass(async |e, txn| {
            let mut n = 0u32;
            for id in &dead {
                if e.member_record(txn, id)
                    .await?
                    .is_some_and(|r| !r.is_fenced())
                {
                    n = n.saturating_add(1);
                }
            }
            Ok(n)
        });
        if !matches!(unfenced, Ok(0)) {
            self.queue.push(again, super::Ev::Arm);
            return;
        }
        let weights = self.live_weights();
        let bound = move_bound(&self.oracles.records, &weights, u64::from(self.p.shards));
        self.oracles.quiet.move_bound = bound;
        self.oracles.quiet.moves_armed = true;
        self.log(format!("move oracle armed: bound {bound}"));
    }

    /// A member is asked to shut down: remember what it owns (final deploy).
    pub(super) fn note_shutdown(&mut self, pid: usize) {
        if !self.oracles.quiet.final_deploy {
            return;
        }
        let Some(id) = self
            .members
            .get(pid)
            .map(|m| m.member.id().as_str().to_owned())
        else {
            return;
        };
        let mine: Vec<u32> = (0..self.p.shards)
            .filter(|s| {
                self.oracles
                    .records
                    .get(usize::try_from(*s).unwrap_or(0))
                    .is_some_and(|(_, o)| o.as_ref().is_some_and(|(i, _)| *i == id))
            })
            .collect();
        self.oracles.quiet.handing.insert(pid, mine);
    }

    /// A graceful shutdown ended: what the member owned must be owned again soon.
    pub(super) fn note_graceful_stop(&mut self, pid: usize) {
        let Some(shards) = self.oracles.quiet.handing.remove(&pid) else {
            return;
        };
        let label = self.label(pid);
        let by = self.now.saturating_add(self.p.leave_bound());
        for s in shards {
            self.oracles
                .quiet
                .leave_deadlines
                .push((s, by, label.clone()));
        }
    }

    /// S6: a shard's owner changed after arming.
    pub(super) fn quiet_on_record(&mut self, s: u32, before: Option<&Rec>, after: &Rec) {
        let q = &mut self.oracles.quiet;
        if !q.moves_armed {
            return;
        }
        let changed = after.1.is_some() && before.is_some_and(|b| b.1 != after.1);
        if changed {
            q.changes = q.changes.saturating_add(1);
            if q.changes > q.move_bound {
                let m = format!(
                    "{} changes of owner since the faults stopped (shard {s} the last), above the placement bound {}",
                    q.changes, q.move_bound
                );
                self.report(OracleId::ShardMoves, m);
            }
        }
    }

    fn report(&mut self, oracle: OracleId, message: String) {
        if !self.oracles.quiet.reported.contains(&oracle) {
            self.oracles.quiet.reported.push(oracle);
            self.found.push(Violation::new(oracle, message));
        }
    }

    /// The shards not owned (record and belief) by a live member.
    fn unowned(&self) -> Vec<u32> {
        (0..self.p.shards)
            .filter(|s| {
                let rec = self.oracles.records.get(usize::try_from(*s).unwrap_or(0));
                let owner = rec.and_then(|(_, o)| o.as_ref());
                !self.members.iter().any(|m| {
                    m.alive
                        && owner.is_some_and(|(id, _)| id == m.member.id().as_str())
                        && m.member
                            .shard_token(fdb_leader_election::ShardId::new(*s))
                            .is_some()
                })
            })
            .collect()
    }

    /// The shards whose record names a member of a generation before the final deploy's.
    fn on_old_members(&self) -> Vec<u32> {
        let generation = self.oracles.quiet.final_generation;
        (0..self.p.shards)
            .filter(|s| {
                let rec = self.oracles.records.get(usize::try_from(*s).unwrap_or(0));
                let owner = rec.and_then(|(_, o)| o.as_ref());
                self.members.iter().any(|m| {
                    m.generation < generation
                        && owner.is_some_and(|(id, _)| id == m.member.id().as_str())
                })
            })
            .collect()
    }

    fn balanced(&self) -> bool {
        let weights = self.live_weights();
        let bounds = shares(&weights, u64::from(self.p.shards));
        bounds.iter().all(|(id, (lo, hi))| {
            let n = self
                .oracles
                .records
                .iter()
                .filter(|(_, o)| o.as_ref().is_some_and(|(i, _)| i == id))
                .count();
            let n = u64::try_from(n).unwrap_or(u64::MAX);
            *lo <= n && n <= *hi
        })
    }

    /// After every step: the quiet-phase bounds.
    pub(super) fn check_quiet_bounds(&mut self) {
        let now = self.now;
        if !self.oracles.quiet.leave_deadlines.is_empty() {
            // Placement may reserve a shard for a member that crashed and is not yet fenced
            // out: that wait is the crash's (S4 bounds it), not the graceful leave's.
            let to_dead: Vec<u32> = (0..self.p.shards)
                .filter(|s| {
                    self.oracles
                        .reserved
                        .get(usize::try_from(*s).unwrap_or(0))
                        .and_then(Option::as_ref)
                        .is_some_and(|h| {
                            self.members
                                .iter()
                                .any(|m| !m.alive && m.member.id().as_str() == h)
                        })
                })
                .collect();
            let unowned = self.unowned();
            let late: Vec<(u32, String)> = self
                .oracles
                .quiet
                .leave_deadlines
                .iter()
                .filter(|(s, by, _)| now > *by && unowned.contains(s) && !to_dead.contains(s))
                .map(|(s, _, who)| (*s, who.clone()))
                .collect();
            self.oracles
                .quiet
                .leave_deadlines
                .retain(|(s, by, _)| now <= *by && unowned.contains(s) && !to_dead.contains(s));
            for (s, who) in late {
                let m = format!(
                    "shard {s}, handed back by {who}'s graceful leave, is not owned again within {} (a lease's wait)",
                    secs(self.p.leave_bound())
                );
                self.report(OracleId::ShardDeploy, m);
            }
        }
        let Some(armed) = self.oracles.quiet.armed_at else {
            return;
        };
        let owned_by = armed.saturating_add(self.p.owned_bound());
        if self.oracles.quiet.owned_at.is_none() {
            if self.unowned().is_empty() {
                self.oracles.quiet.owned_at = Some(now);
            } else if now > owned_by {
                let m = format!(
                    "shards {:?} not owned by a live member within lease + 2 heartbeats ({}) of the faults stopping",
                    self.unowned(),
                    secs(self.p.owned_bound())
                );
                self.report(OracleId::ShardLiveness, m);
            }
        }
        if now > owned_by {
            let old = self.on_old_members();
            if !old.is_empty() {
                let m = format!("after the rolling deploy, shards {old:?} are not on a new member");
                self.report(OracleId::ShardDeploy, m);
            }
        }
        let balanced_by = owned_by.saturating_add(self.p.balance_bound());
        if self.oracles.quiet.owned_at.is_some() && self.oracles.quiet.balanced_at.is_none() {
            if self.balanced() {
                self.oracles.quiet.balanced_at = Some(now);
            } else if now > balanced_by {
                let m = format!(
                    "placement not balanced within {} of every shard being owned",
                    secs(self.p.balance_bound())
                );
                self.report(OracleId::ShardLiveness, m);
            }
        }
    }

    /// The end of the run.
    pub(super) fn finish(&mut self) {
        self.check_quiet_bounds();
        if self.oracles.quiet.armed_at.is_none() {
            self.report(
                OracleId::ShardLiveness,
                "the final deploy never ended".to_owned(),
            );
        }
        if self.oracles.quiet.balanced_at.is_none() {
            self.report(OracleId::ShardLiveness, "never balanced".to_owned());
        }
        let s = &self.stats.sharded;
        if s.acquisitions == 0 || s.cycles == 0 || self.stats.fenced_committed == 0 {
            self.report(
                OracleId::ShardLiveness,
                "no progress: no acquisition, cycle or fenced write".to_owned(),
            );
        }
        let q = &self.oracles.quiet;
        let line = format!(
            "end: changes={} bound={} owned_at={:?} balanced_at={:?}",
            q.changes, q.move_bound, q.owned_at, q.balanced_at
        );
        self.log(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(owner: Option<&str>) -> Rec {
        (1, owner.map(|o| (o.to_owned(), 1)))
    }

    #[test]
    fn the_move_bound_counts_orphans_and_shards_above_the_floor() {
        let weights: BTreeMap<String, u64> = [("a".to_owned(), 1), ("b".to_owned(), 1)]
            .into_iter()
            .collect();
        // a holds 3 of 4 (floor 2: one above), one shard held by a dead member.
        let records = vec![
            rec(Some("a")),
            rec(Some("a")),
            rec(Some("a")),
            rec(Some("x")),
        ];
        assert_eq!(move_bound(&records, &weights, 4), 2);
        assert_eq!(shares(&weights, 5).get("a"), Some(&(2, 3)));
    }
}
