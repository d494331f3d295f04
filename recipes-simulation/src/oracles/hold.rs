//! Oracle 25: under `hold`, a leader that is not eligible never lets go while nobody live is
//! eligible (DESIGN §13.3: "With no live eligible candidate the policy decides: `hold`
//! (default) keeps leading ... `release` writes an unreserved vacancy anyway").
//!
//! Judged on every applied commit of a process's cycle that steps down for ineligibility: a
//! leader that believed it led when its cycle began and writes an unreserved vacancy for
//! it must run under `release`. (With a live eligible candidate it reserves for it, which
//! oracles 22 and 26 judge; a leader whose earlier step-down never landed writes its vacancy
//! again without believing, whatever the policy: it let go already.)

use super::{CommitFacts, OracleId, Violation};
use crate::history::CycleAction;

/// Oracle 25.
#[derive(Debug, Default)]
pub struct Hold;

impl Hold {
    /// Checks a committed transaction.
    pub fn on_commit(c: &CommitFacts<'_>) -> Option<Violation> {
        let read = c.read_of_applied(CycleAction::SteppedDownIneligible)?;
        let new = c.entry.leader.as_ref()?;
        let released = new.owner.is_none() && new.reservation.is_none();
        if !(released && read.holds && read.believed) {
            return None;
        }
        Some(Violation::new(
            OracleId::Hold,
            format!(
                "{} let go of ballot {} (an unreserved vacancy) because it is not eligible, \
                 under the hold policy (version {})",
                c.entry.actor, new.ballot, c.entry.version
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Entry, Op, RecordView};
    use crate::oracles::TxnRead;

    #[test]
    fn a_release_under_hold_fails() {
        let mut e = Entry::new(
            "n1v1",
            None,
            1,
            Op::Cycle(CycleAction::SteppedDownIneligible),
        );
        e.leader = Some(RecordView {
            ballot: 2,
            ..RecordView::default()
        });
        let mut read = TxnRead {
            holds: false,
            believed: true,
            ..TxnRead::default()
        };
        assert!(
            Hold::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_none(),
            "release"
        );
        read.holds = true;
        assert!(Hold::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_some());
        read.believed = false;
        assert!(
            Hold::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_none(),
            "written again"
        );
    }
}
