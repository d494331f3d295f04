//! Oracle 3: ballots never decrease, each ballot has exactly one owner, the owner is a
//! registered candidate when it acquires, an acquisition moves the ballot by exactly one, and a
//! vacancy is reserved only for a registered candidate that was live when it was reserved.

use std::collections::BTreeMap;

use super::{CommitFacts, DbState, OracleId, Violation};
use crate::history::{CycleAction, Op};

/// Oracle 3.
#[derive(Debug, Default)]
pub struct Ballots {
    last: u64,
    owners: BTreeMap<u64, String>,
    /// The (ballot, renewal) of the last record whose reservation was judged: it is judged
    /// once, in the step that wrote it (a later configuration change moves the liveness bar).
    judged: Option<(u64, u64)>,
}

impl Ballots {
    /// Checks an acquisition's step: the ballot moves by one.
    pub fn on_commit(&mut self, c: &CommitFacts<'_>) -> Option<Violation> {
        let acquires = matches!(
            c.entry.op,
            Op::Cycle(CycleAction::Acquired) | Op::RogueTakeover
        );
        if !c.applied || !acquires {
            return None;
        }
        let (prior, new) = (c.entry.prior.as_ref()?, c.entry.leader.as_ref()?);
        if Some(new.ballot) != prior.ballot.checked_add(1) {
            return Some(Violation::new(
                OracleId::Ballots,
                format!(
                    "{} acquired ballot {} over ballot {}: an acquisition must add exactly one",
                    c.entry.actor, new.ballot, prior.ballot
                ),
            ));
        }
        None
    }

    /// Checks the record in the database.
    pub fn check(&mut self, db: &DbState) -> Option<Violation> {
        let rec = &db.leader;
        if rec.ballot < self.last {
            return Some(Violation::new(
                OracleId::Ballots,
                format!("the ballot went back from {} to {}", self.last, rec.ballot),
            ));
        }
        self.last = rec.ballot;
        if !db.holder_registered {
            return Some(Violation::new(
                OracleId::Ballots,
                format!(
                    "ballot {} is reserved for {:?}, which is not registered",
                    rec.ballot, rec.reservation
                ),
            ));
        }
        let first_sight = self.judged != Some((rec.ballot, rec.renewal));
        self.judged = Some((rec.ballot, rec.renewal));
        if first_sight && !db.holder_live {
            return Some(Violation::new(
                OracleId::Ballots,
                format!(
                    "ballot {} is reserved for {:?}, which was not live when it was reserved \
                     (a leader hands over only to a registered, live candidate)",
                    rec.ballot, rec.reservation
                ),
            ));
        }
        let owner = rec.owner_id()?;
        if !db.owner_registered && self.owners.get(&rec.ballot).is_some_and(|o| o == owner) {
            return Some(Violation::new(
                OracleId::Ballots,
                format!(
                    "{owner} owns ballot {} but is no longer registered (the registry must \
                     stay consistent with ownership)",
                    rec.ballot
                ),
            ));
        }
        match self.owners.get(&rec.ballot) {
            Some(first) if first != owner => Some(Violation::new(
                OracleId::Ballots,
                format!("ballot {} has two owners: {first} and {owner}", rec.ballot),
            )),
            Some(_) => None,
            None => {
                self.owners.insert(rec.ballot, owner.to_owned());
                (!db.owner_registered).then(|| {
                    Violation::new(
                        OracleId::Ballots,
                        format!(
                            "{owner} acquired ballot {} without being a registered candidate",
                            rec.ballot
                        ),
                    )
                })
            }
        }
    }
}
