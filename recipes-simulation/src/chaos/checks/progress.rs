//! Check (d), progress: elections, handovers and takeovers all happened.

use crate::chaos::model::ObservedChange;

/// (d) Leadership transitions, from the observer's leader changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transitions {
    /// New ballots (every acquisition).
    pub elections: u64,
    /// New ballots filled from a vacancy reserved by the predecessor (cooperative).
    pub handovers: u64,
    /// New ballots that replaced a leader whose lease lapsed.
    pub takeovers: u64,
}

/// (d) Classifies the observer's changes: each new ballot is an election; `handed_over` is a
/// handover; `replaced`, or `acquired` after `lease_lapsed` or `forced_vacant`, a takeover.
pub fn classify(changes: &[ObservedChange]) -> Transitions {
    let mut t = Transitions::default();
    let mut last_ballot = 0u64;
    let mut lapsed = false;
    for c in changes {
        match (c.ballot, c.leader.as_ref()) {
            (Some(b), Some(_)) if b > last_ballot => {
                last_ballot = b;
                t.elections = t.elections.saturating_add(1);
                match c.reason.as_str() {
                    "handed_over" => t.handovers = t.handovers.saturating_add(1),
                    "replaced" => t.takeovers = t.takeovers.saturating_add(1),
                    "acquired" if lapsed => t.takeovers = t.takeovers.saturating_add(1),
                    _ => {}
                }
                lapsed = false;
            }
            _ => match c.reason.as_str() {
                "lease_lapsed" | "forced_vacant" => lapsed = true,
                "stepped_down" => lapsed = false,
                _ => {}
            },
        }
    }
    t
}

/// (d) The progress check: what did not happen, in words (empty: all happened).
pub fn check_progress(t: &Transitions, accepted_writes: u64) -> Vec<String> {
    let mut missing = Vec::new();
    if t.elections == 0 {
        missing.push("no election".to_owned());
    }
    if t.handovers == 0 {
        missing.push("no handover".to_owned());
    }
    if t.takeovers == 0 {
        missing.push("no takeover".to_owned());
    }
    if accepted_writes == 0 {
        missing.push("no fenced write accepted".to_owned());
    }
    missing
}
