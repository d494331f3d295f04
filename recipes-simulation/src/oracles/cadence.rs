//! Oracle 9: a leader renews at a sane cadence (DESIGN §10.6: a valid configuration is one
//! the runner can keep; the rule that schedules renewals and the rule that validates a
//! configuration are one, `ElectionConfig::renewal_margin`).
//!
//! Everything is measured on the leader's own clock, the one its runner machine schedules by,
//! so no allowance for clock rate errors is needed. Per process and per ballot:
//!
//! 1. **Not in a loop.** At most [`MAX_RENEWALS_PER_HEARTBEAT`] confirmed renewals (cycles
//!    whose commit the machine confirmed as this leadership's renewal or acquisition,
//!    `Command::Renewed`) start within any window of one heartbeat of the configuration in
//!    force (the window is restarted when the heartbeat changes). The bound: with no failure,
//!    the machine's next cycle is due at the earlier of the jittered heartbeat (at least 80%
//!    of it) and the belief's end less the renewal margin, and validation keeps that at
//!    least half a heartbeat after the renewal's start (`min_renewal_interval`), so at most
//!    two scheduled renewals start within a heartbeat. One more may start for another reason
//!    the schedule knows of (the end of a minimum tenure or of a grace, a renewal whose
//!    attempt outlasted half a heartbeat). Not counted: the retry of a failed cycle (the
//!    machine retries after a short back-off, not on the heartbeat's schedule, and failures
//!    come from outside: a conflict with another's write, an application that abandoned its
//!    transaction, an outage); renewals whose cycle the machine ran
//!    because the leader record changed (a write by someone else, seen through the watch: a
//!    handover request, an operator's request, or a request the leader dropped and its
//!    requester wrote again, as one that is registered but not live does until it is
//!    evicted), and renewals that start while the guard is closed (a handover or resignation
//!    waiting for work, a cycle on every idle moment): oracle 10 bounds that phase.
//! 2. **Room for one attempt.** After a confirmed renewal whose belief ends at `D`, the
//!    leader's next cycle attempt starts by `D − transaction_timeout` (the machine schedules
//!    it at the latest `D − renewal_margin`, a quarter heartbeat earlier), or at once when
//!    the machine learns of the commit only after that (a slow reply), unless the
//!    leadership ends first (a revoked guard, a resignation, leaving) or the process is
//!    paused (stop-the-world: nothing can run).

use std::collections::VecDeque;

use super::{OracleId, Violation};
use crate::time::{Nanos, secs};

/// The most confirmed renewals of one leadership that may start within one heartbeat:
/// two scheduled ones and one for another reason.
pub const MAX_RENEWALS_PER_HEARTBEAT: usize = 3;

/// Oracle 9's record of one process.
#[derive(Clone, Debug, Default)]
pub struct Cadence {
    /// The ballot and heartbeat the window belongs to.
    window_of: Option<(u64, Nanos)>,
    /// Local starts of the counted renewals within the last heartbeat.
    starts: VecDeque<Nanos>,
    /// The next cycle attempt must start by this local instant (and the belief's end).
    renew_by: Option<(Nanos, Nanos)>,
}

/// What a confirmed renewal looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// The ballot renewed (or acquired).
    pub ballot: u64,
    /// When its cycle started, on the leader's clock.
    pub started: Nanos,
    /// Whether it counts: its cycle started on the machine's schedule (not because the
    /// leader record changed) with the guard open.
    pub counted: bool,
    /// The heartbeat of the configuration in force after the commit.
    pub heartbeat: Nanos,
    /// Its transaction timeout.
    pub timeout: Nanos,
    /// When the belief it confirmed ends, on the leader's clock.
    pub belief_end: Nanos,
    /// When the machine learned of the commit, on the leader's clock (a slow reply, or one
    /// that reached a paused process, arrives late: the next attempt cannot start earlier).
    pub confirmed: Nanos,
}

impl Cadence {
    /// A confirmed renewal: counts it, and expects the next attempt in time.
    pub fn renewed(&mut self, label: &str, r: Renewal) -> Option<Violation> {
        let by = r.belief_end.saturating_sub(r.timeout).max(r.confirmed);
        self.renew_by = Some((by, r.belief_end));
        if !r.counted {
            return None;
        }
        if self.window_of != Some((r.ballot, r.heartbeat)) {
            self.window_of = Some((r.ballot, r.heartbeat));
            self.starts.clear();
        }
        let from = r.started.saturating_sub(r.heartbeat);
        while self.starts.front().is_some_and(|&s| s <= from) {
            self.starts.pop_front();
        }
        self.starts.push_back(r.started);
        (self.starts.len() > MAX_RENEWALS_PER_HEARTBEAT).then(|| {
            let first = self.starts.front().copied().unwrap_or(r.started);
            Violation::new(
                OracleId::Cadence,
                format!(
                    "{label} started {} renewals of ballot {} within one heartbeat ({} s), the \
                     first at local {} s and the last at {} s: it renews in a loop",
                    self.starts.len(),
                    r.ballot,
                    secs(r.heartbeat),
                    secs(first),
                    secs(r.started)
                ),
            )
        })
    }

    /// A cycle attempt starts at `local_now`.
    pub fn cycle_started(&mut self, label: &str, local_now: Nanos) -> Option<Violation> {
        let v = self.late(label, local_now, "started its next renewal");
        self.renew_by = None;
        v
    }

    /// Nothing more is expected of this leadership now (it ended, a resignation or leave
    /// started, or the process was paused).
    pub fn excuse(&mut self) {
        self.renew_by = None;
    }

    /// Checks, at `local_now`, that the next attempt is not overdue.
    pub fn check(&self, label: &str, local_now: Nanos) -> Option<Violation> {
        self.late(label, local_now, "has not started its next renewal")
    }

    fn late(&self, label: &str, local_now: Nanos, what: &str) -> Option<Violation> {
        let (by, end) = self.renew_by?;
        (local_now > by).then(|| {
            Violation::new(
                OracleId::Cadence,
                format!(
                    "{label} {what} at local {} s, later than a transaction timeout before its \
                     belief ends at {} s (by {} s)",
                    secs(local_now),
                    secs(end),
                    secs(by)
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

    use super::*;
    use crate::time::MS;

    fn renewal(started: Nanos) -> Renewal {
        Renewal {
            ballot: 3,
            started,
            counted: true,
            heartbeat: 100 * MS,
            timeout: 30 * MS,
            belief_end: started + 390 * MS,
            confirmed: started,
        }
    }

    #[test]
    fn renewals_half_a_heartbeat_apart_pass_and_a_loop_fails() {
        let mut c = Cadence::default();
        for i in 0..20 {
            assert_eq!(c.renewed("a", renewal(i * 50 * MS)), None, "renewal {i}");
        }
        // One more for another reason fits...
        assert_eq!(c.renewed("a", renewal(19 * 50 * MS + 10 * MS)), None);
        // ...a loop does not.
        let v = c.renewed("a", renewal(19 * 50 * MS + 20 * MS)).unwrap();
        assert_eq!(v.oracle, OracleId::Cadence);
    }

    #[test]
    fn a_new_ballot_heartbeat_or_closed_guard_starts_afresh() {
        let mut c = Cadence::default();
        for i in 0..3 {
            assert_eq!(c.renewed("a", renewal(i * MS)), None);
        }
        let closed = Renewal {
            counted: false,
            ..renewal(4 * MS)
        };
        assert_eq!(c.renewed("a", closed), None);
        let other = Renewal {
            ballot: 4,
            ..renewal(5 * MS)
        };
        assert_eq!(c.renewed("a", other), None);
        let faster = Renewal {
            heartbeat: 20 * MS,
            ..renewal(6 * MS)
        };
        assert_eq!(c.renewed("a", faster), None);
    }

    #[test]
    fn the_next_attempt_must_leave_room_for_one_transaction() {
        let mut c = Cadence::default();
        assert_eq!(c.renewed("a", renewal(0)), None);
        // Due by 390 - 30 = 360 ms.
        assert_eq!(c.check("a", 360 * MS), None);
        assert!(c.check("a", 361 * MS).is_some());
        assert!(c.cycle_started("a", 361 * MS).is_some());
        assert_eq!(
            c.check("a", 400 * MS),
            None,
            "nothing expected after the attempt"
        );
        assert_eq!(c.renewed("a", renewal(400 * MS)), None);
        assert_eq!(c.cycle_started("a", 700 * MS), None);
        assert_eq!(c.renewed("a", renewal(800 * MS)), None);
        c.excuse();
        assert_eq!(c.check("a", 2_000 * MS), None);
    }

    #[test]
    fn a_late_reply_moves_the_deadline_to_its_arrival_and_no_further() {
        let mut c = Cadence::default();
        // The reply reaches the leader 500 ms after its cycle started, past 360 ms.
        let late = Renewal {
            confirmed: 500 * MS,
            ..renewal(0)
        };
        assert_eq!(c.renewed("a", late), None);
        assert_eq!(c.check("a", 500 * MS), None);
        assert!(c.cycle_started("a", 501 * MS).is_some());
    }
}
