//! How long `run` waits after its child exited by itself before campaigning (or restarting
//! the child) again: a pure schedule, so a child that fails at once cannot spin.

use std::time::Duration;

/// The first wait: 1s.
pub(crate) const INITIAL: Duration = Duration::from_secs(1);
/// The longest wait: 1m.
pub(crate) const MAX: Duration = Duration::from_secs(60);
/// A child that ran at least this long (1m) was healthy: the schedule starts over.
pub(crate) const RESET_AFTER: Duration = Duration::from_secs(60);

/// Exponential back-off: [`INITIAL`], doubling up to [`MAX`], back to [`INITIAL`] after a child
/// that ran for [`RESET_AFTER`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChildBackoff {
    next: Duration,
}

impl Default for ChildBackoff {
    fn default() -> Self {
        ChildBackoff { next: INITIAL }
    }
}

impl ChildBackoff {
    /// The wait after a child that ran for `ran`.
    pub(crate) fn after_exit(&mut self, ran: Duration) -> Duration {
        if ran >= RESET_AFTER {
            self.next = INITIAL;
        }
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(MAX);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let mut b = ChildBackoff::default();
        let quick = Duration::from_millis(5);
        let waits: Vec<u64> = (0..9).map(|_| b.after_exit(quick).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn a_child_that_ran_a_while_resets_it() {
        let mut b = ChildBackoff::default();
        for _ in 0..5 {
            b.after_exit(Duration::ZERO);
        }
        assert_eq!(
            b.after_exit(Duration::from_secs(59)),
            Duration::from_secs(32)
        );
        assert_eq!(b.after_exit(RESET_AFTER), INITIAL);
        assert_eq!(b.after_exit(Duration::ZERO), Duration::from_secs(2));
    }

    #[test]
    fn an_exiting_child_costs_a_handful_of_ballots_not_thousands() {
        // Campaigns in the first 10 s when each child exits at once: at 0, 1, 3 and 7 s.
        let mut b = ChildBackoff::default();
        let (mut t, mut campaigns) = (Duration::ZERO, 0);
        while t < Duration::from_secs(10) {
            campaigns += 1;
            t += b.after_exit(Duration::ZERO);
        }
        assert_eq!(campaigns, 4);
    }
}
