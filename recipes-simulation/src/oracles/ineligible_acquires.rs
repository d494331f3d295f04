//! Oracle 23: an ineligible candidate never acquires or takes over (DESIGN §13.2, §13.9).
//!
//! Judged on every applied acquisition by a process's cycle: the acquirer must be eligible as
//! the world knows it when the cycle ran — what its health checks made of it (the
//! simulation runs them, as the tokio runner's checks task does, and knows their verdict
//! whatever the candidate was told), and no operator's mark that the transaction read.

use super::{CommitFacts, OracleId, Violation};
use crate::history::CycleAction;

/// Oracle 23.
#[derive(Debug, Default)]
pub struct IneligibleAcquires;

impl IneligibleAcquires {
    /// Checks a committed transaction.
    pub fn on_commit(c: &CommitFacts<'_>) -> Option<Violation> {
        let read = c.read_of_applied(CycleAction::Acquired)?;
        if read.eligible {
            return None;
        }
        let ballot = c.entry.leader.as_ref().map_or(0, |l| l.ballot);
        Some(Violation::new(
            OracleId::IneligibleAcquires,
            format!(
                "{} acquired ballot {ballot} while not eligible (its health checks, or an \
                 operator's mark its transaction read) (version {})",
                c.entry.actor, c.entry.version
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Entry, Op};
    use crate::oracles::TxnRead;

    #[test]
    fn an_ineligible_acquirer_fails() {
        let e = Entry::new("n1v1", None, 1, Op::Cycle(CycleAction::Acquired));
        let mut read = TxnRead {
            eligible: true,
            ..TxnRead::default()
        };
        assert!(IneligibleAcquires::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_none());
        read.eligible = false;
        assert!(IneligibleAcquires::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_some());
    }
}
