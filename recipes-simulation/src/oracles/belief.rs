//! Oracle 1: no two processes believe they lead at the same true instant.
//!
//! After every step, every live process's belief is evaluated at the current true time on
//! that process's own clock (`Candidate::leadership()`, which ends on the local deadline even
//! if the process is paused or cut off). A new belief can only begin at a step (an adoption
//! after a commit), and one that overlaps an older belief overlaps it at that step, so
//! checking after every step finds every overlap.

use super::{Belief, OracleId, Violation};
use crate::time::{Nanos, secs};

/// Oracle 1.
#[derive(Debug, Default)]
pub struct BeliefOverlap {
    /// Most believers seen at one instant (for reports).
    pub max_believers: usize,
}

impl BeliefOverlap {
    /// Checks the beliefs held at true time `now`.
    pub fn check(&mut self, now: Nanos, beliefs: &[Belief]) -> Option<Violation> {
        self.max_believers = self.max_believers.max(beliefs.len());
        if beliefs.len() < 2 {
            return None;
        }
        let who: Vec<String> = beliefs
            .iter()
            .map(|b| {
                format!(
                    "{} (ballot {}, {} s left on its clock)",
                    b.label,
                    b.ballot,
                    secs(b.remaining)
                )
            })
            .collect();
        Some(Violation::new(
            OracleId::BeliefOverlap,
            format!(
                "{} processes believe they lead at true time {}: {}",
                beliefs.len(),
                secs(now),
                who.join(", ")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(label: &str, ballot: u64) -> Belief {
        Belief {
            label: label.into(),
            ballot,
            priority: 0,
            remaining: 1,
            version: None,
            eligible: true,
        }
    }

    #[test]
    fn one_believer_passes_two_fail() {
        let mut o = BeliefOverlap::default();
        assert!(o.check(5, &[]).is_none());
        assert!(o.check(5, &[b("a", 1)]).is_none());
        let v = o.check(5, &[b("a", 1), b("b", 2)]);
        assert_eq!(v.map(|v| v.oracle), Some(OracleId::BeliefOverlap));
        assert_eq!(o.max_believers, 2);
    }
}
