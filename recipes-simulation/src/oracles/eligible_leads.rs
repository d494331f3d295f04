//! Oracle 24: once faults stop with an eligible candidate live, an eligible candidate leads
//! within lease + 2 heartbeats + the cool-down (DESIGN §13.9). Durations on the slowest clock
//! allowed, plus the quiet phase's commit latencies (the world computes the deadline).
//!
//! "Faults stop" here is the end of the last fault, health faults included (a flapping,
//! slow or failing check, a dependency down, an operator's temporary mark), each counted until
//! its checks' hysteresis has settled (`rise` answers after it healed); the cool-down of a
//! leader that stepped down for its health may still run, hence the bound. "Eligible" is the
//! world's truth: what a candidate's health checks make of it, and the operator's marks.

use super::{Belief, LiveProc, OracleId, Violation};
use crate::time::{Nanos, secs};

/// Oracle 24.
#[derive(Debug, Default)]
pub struct EligibleLeads {
    /// (faults over, an eligible leader due by).
    window: Option<(Nanos, Nanos)>,
}

impl EligibleLeads {
    /// Arms the oracle: faults ended at `faults_over`, so an eligible leader is due by `due`.
    pub fn arm(&mut self, faults_over: Nanos, due: Nanos) {
        self.window.get_or_insert((faults_over, due));
    }

    /// Disarms it (the quiet phase's reservation probe takes the leader away on purpose).
    pub fn disarm(&mut self) {
        self.window = None;
    }

    /// When an eligible leader is due, once armed.
    pub fn due(&self) -> Option<Nanos> {
        self.window.map(|(_, due)| due)
    }

    /// Checks the beliefs at `now` against the live processes.
    pub fn check(&self, now: Nanos, beliefs: &[Belief], live: &[LiveProc]) -> Option<Violation> {
        let (over, due) = self.window?;
        if now < due || !live.iter().any(|l| l.eligible) {
            return None;
        }
        if beliefs.iter().any(|b| b.eligible) {
            return None;
        }
        let eligible: Vec<&str> = live
            .iter()
            .filter(|l| l.eligible)
            .map(|l| l.label.as_str())
            .collect();
        Some(Violation::new(
            OracleId::EligibleLeads,
            format!(
                "at {} s {} while {} {} eligible and live; faults ended at {} s, so an eligible \
                 leader was due by {} s (lease + 2 heartbeats + the cool-down)",
                secs(now),
                match beliefs.first() {
                    Some(b) => format!("{} leads, not eligible", b.label),
                    None => "nobody leads".to_owned(),
                },
                eligible.join(", "),
                if eligible.len() == 1 { "is" } else { "are" },
                secs(over),
                secs(due)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracles::rank::Stand;

    fn live(label: &str, eligible: bool) -> LiveProc {
        LiveProc {
            label: label.into(),
            stand: Stand {
                version: None,
                priority: 0,
            },
            eligible,
        }
    }

    fn belief(eligible: bool) -> Belief {
        Belief {
            label: "a".into(),
            ballot: 1,
            priority: 0,
            remaining: 1,
            version: None,
            eligible,
        }
    }

    #[test]
    fn an_eligible_leader_is_due_once_one_is_live() {
        let mut o = EligibleLeads::default();
        let all = [live("a", false), live("b", true)];
        assert!(o.check(100, &[], &all).is_none(), "not armed");
        o.arm(10, 20);
        assert!(o.check(19, &[], &all).is_none());
        assert!(o.check(20, &[], &all).is_some());
        assert!(
            o.check(20, &[belief(false)], &all).is_some(),
            "an ineligible leader"
        );
        assert!(o.check(20, &[belief(true)], &all).is_none());
        assert!(
            o.check(20, &[], &[live("a", false)]).is_none(),
            "nobody eligible"
        );
    }
}
