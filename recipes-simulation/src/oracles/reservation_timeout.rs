//! Oracle 21: a handover never waits on a dead candidate (DESIGN §4, issue 31 item 0). A
//! vacancy its leader wrote reserved for a candidate (a handover, a resignation, a step-down
//! for health) has no believer; if its holder does not fill it within the reservation timeout
//! it opens to the next eligible candidate. So once faults stop, no such vacancy stays
//! unfilled longer than the reservation timeout and a heartbeat (on the slowest clock allowed,
//! plus the quiet phase's commit latencies) while an eligible candidate is live.
//!
//! Faults excuse it as they excuse oracle 5: it is armed once every fault is over (the quiet
//! phase, [`arm`](ReservationTimeout::arm)); a vacancy written before counts from then. The
//! quiet phase's reservation probe makes the case every seed: the best follower crashes and
//! the leader resigns at once, reserving for it (the registry still shows it live).

use super::{CommitFacts, OracleId, Violation};
use crate::time::{Nanos, secs};

/// A leader-reserved vacancy not filled yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Open {
    identity: (u64, u64),
    holder: String,
    written_at: Nanos,
    /// The reservation timeout of the configuration stored when it was written.
    timeout: Nanos,
}

/// Oracle 21.
#[derive(Debug, Default)]
pub struct ReservationTimeout {
    /// Armed from then on.
    armed_at: Option<Nanos>,
    open: Option<Open>,
    /// The reservation timeout stored (nanoseconds).
    timeout: Nanos,
    /// Vacancies of their leader's it saw filled (or replaced) after arming.
    pub checked: u64,
}

impl ReservationTimeout {
    /// Arms the oracle at `now` (every fault over).
    pub fn arm(&mut self, now: Nanos) {
        self.armed_at.get_or_insert(now);
    }

    /// Follows a committed transaction.
    pub fn on_commit(&mut self, c: &CommitFacts<'_>) {
        if !c.applied {
            return;
        }
        if let Some(cfg) = &c.entry.config {
            self.timeout = cfg.reservation_timeout;
        }
        let Some(new) = &c.entry.leader else {
            return;
        };
        if self
            .open
            .as_ref()
            .is_some_and(|o| o.identity == new.identity())
        {
            return;
        }
        if self.open.take().is_some() && self.armed_at.is_some() {
            self.checked = self.checked.saturating_add(1);
        }
        // A vacancy its leader reserved for a candidate (an operator's hold waits a lease).
        if let (None, Some((holder, _)), None) = (&new.owner, &new.reservation, &new.operator_hold)
        {
            self.open = Some(Open {
                identity: new.identity(),
                holder: holder.clone(),
                written_at: c.at,
                timeout: self.timeout,
            });
        }
    }

    /// Checks at `now`; `bound(timeout)` is how long a vacancy with that reservation timeout
    /// may stay open (true time), `eligible_live` whether an eligible candidate is live.
    pub fn check(
        &self,
        now: Nanos,
        bound: impl Fn(Nanos) -> Nanos,
        eligible_live: bool,
    ) -> Option<Violation> {
        let armed = self.armed_at?;
        let open = self.open.as_ref()?;
        let since = open.written_at.max(armed);
        let due = since.saturating_add(bound(open.timeout));
        if now < due || !eligible_live {
            return None;
        }
        Some(Violation::new(
            OracleId::ReservationTimeout,
            format!(
                "the vacancy (ballot {}, renewal {}) its leader reserved for {} at {} s is still \
                 unfilled at {} s with an eligible candidate live: due by {} s (reservation \
                 timeout {} s + a heartbeat)",
                open.identity.0,
                open.identity.1,
                open.holder,
                secs(open.written_at),
                secs(now),
                secs(due),
                secs(open.timeout)
            ),
        ))
    }

    /// The true time by which the open vacancy is due, if one is open and the oracle armed.
    pub fn due(&self, bound: impl Fn(Nanos) -> Nanos) -> Option<Nanos> {
        let armed = self.armed_at?;
        let open = self.open.as_ref()?;
        Some(
            open.written_at
                .max(armed)
                .saturating_add(bound(open.timeout)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{ConfigView, Entry, Op, RecordView};

    fn commit(o: &mut ReservationTimeout, at: Nanos, e: &Entry) {
        o.on_commit(&CommitFacts::applied(at, e, None));
    }

    #[test]
    fn a_reserved_vacancy_must_be_filled_within_its_bound_once_armed() {
        let mut o = ReservationTimeout::default();
        let mut cfg = Entry::new("op", None, 0, Op::Config);
        cfg.config = Some(ConfigView {
            reservation_timeout: 10,
            ..ConfigView::default()
        });
        commit(&mut o, 0, &cfg);
        let mut vacancy = Entry::new("a", None, 0, Op::Resign);
        vacancy.leader = Some(RecordView {
            ballot: 3,
            renewal: 8,
            reservation: Some(("b".into(), 1)),
            ..RecordView::default()
        });
        commit(&mut o, 100, &vacancy);
        let bound = |t: Nanos| t + 5;
        assert!(o.check(1_000, bound, true).is_none(), "not armed");
        o.arm(200);
        assert!(o.check(214, bound, true).is_none());
        assert!(o.check(215, bound, true).is_some());
        assert!(o.check(215, bound, false).is_none(), "nobody eligible live");
        let mut filled = Entry::new(
            "c",
            None,
            0,
            Op::Cycle(crate::history::CycleAction::Acquired),
        );
        filled.leader = Some(RecordView {
            ballot: 4,
            renewal: 9,
            owner: Some(("c".into(), 1)),
            ..RecordView::default()
        });
        commit(&mut o, 214, &filled);
        assert!(o.check(10_000, bound, true).is_none());
        assert_eq!(o.checked, 1);
    }
}
