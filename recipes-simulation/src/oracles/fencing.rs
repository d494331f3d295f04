//! Oracle 2: fencing. No write to the protected register with an older ballot is accepted
//! after a newer ballot wrote, and the fenced counter equals the number of committed fenced
//! increments (no update lost).
//!
//! Each leader-work transaction reads the counter with a *snapshot* read (no conflict range)
//! and writes it plus one, as a leader that trusts its leadership would; only the fence's
//! conflict range on the fence key protects it. The simulation knows which of these
//! transactions applied (including those whose committer was told "unknown result"), so the
//! expected counter is exact.

use super::{CommitFacts, DbState, OracleId, Violation};

/// Oracle 2.
#[derive(Debug, Default)]
pub struct Fencing {
    highest_register_ballot: Option<u64>,
    last_register: Option<(u64, u64)>,
    /// Fenced increments that applied.
    pub committed: u64,
}

impl Fencing {
    /// Notes a committed transaction.
    pub fn on_commit(&mut self, c: &CommitFacts<'_>) -> Option<Violation> {
        // Fenced work: a work transaction, or leader work composed into a cycle's.
        if !c.applied || c.entry.register.is_none() {
            return None;
        }
        self.committed = self.committed.saturating_add(1);
        let (ballot, seq) = c.entry.register?;
        self.last_register = Some((ballot, seq));
        match self.highest_register_ballot {
            Some(high) if ballot < high => Some(Violation::new(
                OracleId::Fencing,
                format!(
                    "{} wrote the protected register with ballot {ballot} after ballot {high} \
                     had written it (commit version {})",
                    c.entry.actor, c.entry.version
                ),
            )),
            _ => {
                self.highest_register_ballot = Some(ballot);
                None
            }
        }
    }

    /// Compares the database with the committed increments.
    pub fn check(&self, db: &DbState) -> Option<Violation> {
        let counter = db.counter.unwrap_or(0);
        if counter != self.committed {
            return Some(Violation::new(
                OracleId::Fencing,
                format!(
                    "the fenced counter reads {counter} but {} fenced increments committed \
                     ({} lost)",
                    self.committed,
                    self.committed.saturating_sub(counter)
                ),
            ));
        }
        if db.register != self.last_register {
            return Some(Violation::new(
                OracleId::Fencing,
                format!(
                    "the protected register reads {:?} but the last accepted write was {:?}",
                    db.register, self.last_register
                ),
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Entry, Op};

    fn work(ballot: u64, seq: u64, counter: u64) -> Entry {
        let mut e = Entry::new("p", None, 0, Op::Work);
        e.register = Some((ballot, seq));
        e.counter = Some(counter);
        e
    }

    fn db(counter: u64, register: (u64, u64)) -> DbState {
        DbState {
            register: Some(register),
            counter: Some(counter),
            ..DbState::for_tests()
        }
    }

    #[test]
    fn an_older_ballot_after_a_newer_one_fails() {
        let mut o = Fencing::default();
        let (e1, e2, e3) = (work(3, 0, 1), work(4, 0, 2), work(3, 1, 3));
        let c = |e| CommitFacts::applied(0, e, None);
        assert!(o.on_commit(&c(&e1)).is_none());
        assert!(o.on_commit(&c(&e2)).is_none());
        assert!(o.on_commit(&c(&e3)).is_some());
    }

    #[test]
    fn a_lost_increment_fails() {
        let mut o = Fencing::default();
        let e = work(3, 0, 1);
        let facts = CommitFacts::applied(0, &e, None);
        assert!(o.on_commit(&facts).is_none());
        assert!(o.check(&db(1, (3, 0))).is_none());
        assert!(o.check(&db(0, (3, 0))).is_some());
        let not_applied = CommitFacts {
            at: 0,
            entry: &e,
            applied: false,
            read: None,
        };
        assert!(o.on_commit(&not_applied).is_none());
        assert_eq!(o.committed, 1);
    }
}
