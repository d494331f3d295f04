//! Oracle 22: no vacancy is reserved for a candidate that the registry its transaction read
//! shows ineligible (DESIGN §13.2: "No leader, handover or operator reserves a vacancy for a
//! candidate that the registry read by that transaction shows ineligible").
//!
//! Judged on every applied commit of a process that writes a vacancy reserved for a
//! candidate, against the registrations the transaction read (read back through it, [`TxnRead`]).
//! A candidate the read does not show at all is not shown eligible either.

use super::{CommitFacts, OracleId, TxnRead, Violation};

/// Oracle 22.
#[derive(Debug, Default)]
pub struct EligibleReservation;

impl EligibleReservation {
    /// Checks a committed transaction.
    pub fn on_commit(c: &CommitFacts<'_>) -> Option<Violation> {
        if !c.applied {
            return None;
        }
        let read: &TxnRead = c.read?;
        let new = c.entry.leader.as_ref()?;
        if new.owner.is_some() {
            return None;
        }
        let (to, _) = new.reservation.as_ref()?;
        let shown = read.registry.iter().find(|r| &r.id == to);
        if shown.is_some_and(|r| r.cand.eligible) {
            return None;
        }
        Some(Violation::new(
            OracleId::EligibleReservation,
            format!(
                "{} wrote a vacancy (ballot {}, renewal {}) reserved for {to}, which the registry \
                 its transaction read shows {} (version {})",
                c.entry.actor,
                new.ballot,
                new.renewal,
                if shown.is_some() {
                    "ineligible"
                } else {
                    "not registered"
                },
                c.entry.version
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{CandView, CycleAction, Entry, Op, RecordView};
    use crate::oracles::rank::RegView;

    fn reg(id: &str, eligible: bool) -> RegView {
        RegView {
            id: id.into(),
            name: id.into(),
            cand: CandView {
                priority: 1,
                registration: 0,
                heartbeat: 0,
                seen_renewal: 0,
                eligible,
                version: None,
            },
        }
    }

    #[test]
    fn a_reservation_for_an_ineligible_candidate_fails() {
        let mut e = Entry::new(
            "n1v1",
            Some("a".into()),
            1,
            Op::Cycle(CycleAction::Resigned),
        );
        e.leader = Some(RecordView {
            ballot: 3,
            renewal: 9,
            reservation: Some(("b".into(), 2)),
            ..RecordView::default()
        });
        let mut read = TxnRead {
            registry: vec![reg("a", true), reg("b", true)],
            ..TxnRead::default()
        };
        assert!(
            EligibleReservation::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_none()
        );
        read.registry = vec![reg("a", true), reg("b", false)];
        assert!(
            EligibleReservation::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_some()
        );
        read.registry = vec![reg("a", true)];
        assert!(
            EligibleReservation::on_commit(&CommitFacts::applied(0, &e, Some(&read))).is_some()
        );
    }
}
