//! Who owns each shard, as the records say: [`Assignments`] (a query in two range reads) and
//! the [`AssignmentChange`]s between two of them, for anyone (members or not) who routes work
//! to shard owners.

use std::collections::BTreeMap;

use super::election::ShardedElection;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, ShardId};
use crate::store::txn::ElectionTxn;

/// One shard's assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardAssignment {
    /// The shard.
    pub shard: ShardId,
    /// Its owner, if the records name one whose epoch has not ended. A member that died is
    /// still named until the coordinator fences it out (a full lease after its last renewal).
    pub owner: Option<CandidateId>,
    /// Its ballot: the owner's fencing token (or the last owner's, while vacant).
    pub ballot: Ballot,
    /// The member its owner was asked to hand it over to (a move in flight).
    pub moving_to: Option<CandidateId>,
    /// While vacant: the member that is to acquire it.
    pub reserved_for: Option<CandidateId>,
}

/// Every shard's assignment, by shard number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignments {
    shards: Vec<ShardAssignment>,
}

/// A change of one shard's owner between two [`Assignments`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AssignmentChange {
    /// The shard.
    pub shard: ShardId,
    /// The owner before (`None`: vacant).
    pub from: Option<CandidateId>,
    /// The owner now (`None`: vacant).
    pub to: Option<CandidateId>,
    /// The ballot now.
    pub ballot: Ballot,
}

impl Assignments {
    /// Every shard's assignment, by shard number.
    pub fn shards(&self) -> &[ShardAssignment] {
        &self.shards
    }

    /// `shard`'s assignment (`None`: out of range).
    pub fn get(&self, shard: ShardId) -> Option<&ShardAssignment> {
        self.shards.get(usize::try_from(shard.get()).ok()?)
    }

    /// `shard`'s owner and its fencing token, if it has one.
    pub fn owner_of(&self, shard: ShardId) -> Option<(&CandidateId, Ballot)> {
        let a = self.get(shard)?;
        a.owner.as_ref().map(|o| (o, a.ballot))
    }

    /// The shards `member` owns.
    pub fn shards_of(&self, member: &CandidateId) -> Vec<ShardId> {
        self.shards
            .iter()
            .filter(|a| a.owner.as_ref() == Some(member))
            .map(|a| a.shard)
            .collect()
    }

    /// How many shards each owner owns.
    pub fn counts(&self) -> BTreeMap<CandidateId, usize> {
        let mut out: BTreeMap<CandidateId, usize> = BTreeMap::new();
        for owner in self.shards.iter().filter_map(|a| a.owner.as_ref()) {
            let n = out.entry(owner.clone()).or_default();
            *n = n.saturating_add(1);
        }
        out
    }

    /// How many shards have no owner.
    pub fn vacant(&self) -> usize {
        self.shards.iter().filter(|a| a.owner.is_none()).count()
    }

    /// The shards whose owner (or ballot) differs from `before`, in shard order; a shard
    /// absent from `before` counts as vacant at ballot 0.
    pub fn changes_since(&self, before: &Assignments) -> Vec<AssignmentChange> {
        self.shards
            .iter()
            .filter_map(|now| {
                let then = before.get(now.shard);
                let (from, ballot) =
                    then.map_or((None, Ballot::ZERO), |t| (t.owner.clone(), t.ballot));
                (from != now.owner || ballot != now.ballot).then(|| AssignmentChange {
                    shard: now.shard,
                    from,
                    to: now.owner.clone(),
                    ballot: now.ballot,
                })
            })
            .collect()
    }
}

impl ShardedElection {
    /// Who owns each shard, as the records say now (a query in two range reads: the members
    /// and the shards; it times nothing and changes nothing). An owner is named while its
    /// epoch has not ended.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`]; corrupt values; database errors.
    pub async fn assignments<T: ElectionTxn>(&self, txn: &T) -> Result<Assignments, ElectionError> {
        let layout = self.layout(txn).await?;
        let (members, shards) =
            tokio::join!(self.read_members(txn), self.read_shards(txn, layout.shards));
        let (members, shards) = (members?, shards?);
        let shards = shards
            .into_iter()
            .zip(0u32..)
            .map(|(rec, n)| {
                let shard = ShardId::new(n);
                let Some(rec) = rec else {
                    return ShardAssignment {
                        shard,
                        owner: None,
                        ballot: Ballot::ZERO,
                        moving_to: None,
                        reserved_for: None,
                    };
                };
                let owner = rec.owner.as_ref().filter(|o| {
                    members
                        .records
                        .get(&o.member)
                        .is_some_and(|(m, _)| !m.fenced && m.epoch == o.epoch)
                });
                ShardAssignment {
                    shard,
                    owner: owner.map(|o| o.member.clone()),
                    ballot: rec.ballot,
                    moving_to: owner.and(rec.move_to.clone()),
                    reserved_for: rec.reserved_for.clone(),
                }
            })
            .collect();
        Ok(Assignments { shards })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn a(shard: u32, owner: Option<&str>, ballot: u64) -> ShardAssignment {
        ShardAssignment {
            shard: ShardId::new(shard),
            owner: owner.map(|o| CandidateId::parse(o).unwrap()),
            ballot: Ballot::new(ballot),
            moving_to: None,
            reserved_for: None,
        }
    }

    #[test]
    fn changes_name_each_shard_whose_owner_or_ballot_moved() {
        let before = Assignments {
            shards: vec![a(0, Some("x"), 1), a(1, Some("x"), 1), a(2, None, 0)],
        };
        let after = Assignments {
            shards: vec![a(0, Some("x"), 1), a(1, Some("y"), 2), a(2, Some("y"), 1)],
        };
        let id = |s: &str| Some(CandidateId::parse(s).unwrap());
        let changes = after.changes_since(&before);
        assert_eq!(
            changes,
            vec![
                AssignmentChange {
                    shard: ShardId::new(1),
                    from: id("x"),
                    to: id("y"),
                    ballot: Ballot::new(2)
                },
                AssignmentChange {
                    shard: ShardId::new(2),
                    from: None,
                    to: id("y"),
                    ballot: Ballot::new(1)
                },
            ]
        );
        assert!(after.changes_since(&after).is_empty());
        // From nothing, every owned shard is a change.
        assert_eq!(after.changes_since(&Assignments::default()).len(), 3);
        assert_eq!(
            after.counts().get(&CandidateId::parse("y").unwrap()),
            Some(&2)
        );
        assert_eq!(after.vacant(), 0);
        assert_eq!(
            after.owner_of(ShardId::new(1)).map(|(_, b)| b),
            Some(Ballot::new(2))
        );
        assert_eq!(after.owner_of(ShardId::new(9)), None);
    }
}
