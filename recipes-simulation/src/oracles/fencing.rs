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
use crate::history::Op;

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
        if !c.applied || c.entry.op != Op::Work {
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
