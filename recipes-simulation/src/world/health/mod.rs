//! Health as a fault (DESIGN §13.9): each process's readiness and leader health checks, run
//! the way the tokio runner's checks task runs them — each check on its interval (start to
//! start), cut at its timeout; the leader check only while leading, from one interval after
//! the leadership began; every answer, and every leadership's beginning and end, told to the
//! library's own [`Health`], whose eligibility is written into the candidate and wakes its
//! machine (`EligibilityChanged`); the cool-down follows the stored lease unless set — with
//! faults: readiness failing, flapping, slow checks (past their timeout, or just under it), a
//! leader whose work fails, and a dependency of every candidate down.
//!
//! What the checks make of a process ([`Checks::own`]) is the world's truth the oracles
//! judge by, whatever the candidate was told (a plant may tell it something else).

use fdb_leader_election::Eligibility;
use fdb_leader_election::runner::CheckSettings;
use fdb_leader_election::runner::machine::Health;

use crate::time::{Nanos, local};

mod checks;
mod faults;

/// A process's health checks and what they make of it.
#[derive(Debug)]
pub(crate) struct Checks {
    health: Health,
    readiness: Option<CheckSettings>,
    leader: Option<CheckSettings>,
    /// The cool-down follows the stored lease (the runner's default); else it is its own.
    follows_lease: bool,
    /// The cool-down now (nanoseconds on the process's clock).
    pub(crate) cool_down: Nanos,
    /// What the checks make of it: the world's truth.
    pub(crate) own: Eligibility,
    /// What the candidate was last told.
    told: Eligibility,
    /// It keeps leading when not eligible and nobody live is (`hold`), else `release`.
    pub(crate) holds: bool,
    /// The leadership the leader check judges (its ballot), if leading.
    leading: Option<u64>,
    /// Epochs of the readiness loop, the leader loop (one per leadership) and the wake-up.
    ready_epoch: u64,
    leader_epoch: u64,
    wake_epoch: u64,
    /// When (on the process's clock) the check in flight of each loop started.
    ready_started: Nanos,
    leader_started: Nanos,
}

impl Checks {
    /// Whether it runs any check.
    pub(crate) fn any(&self) -> bool {
        self.readiness.is_some() || self.leader.is_some()
    }

    /// The settings of its readiness check, or with `leader` of its leader check.
    fn settings(&self, leader: bool) -> Option<CheckSettings> {
        if leader { self.leader } else { self.readiness }
    }

    /// Whether `epoch` is the current run of the readiness loop, or with `leader` of the loop
    /// of the leadership it judges.
    fn current(&self, epoch: u64, leader: bool) -> bool {
        match leader {
            true => self.leading.is_some() && self.leader_epoch == epoch,
            false => self.ready_epoch == epoch,
        }
    }

    /// Its cool-down may still change its eligibility (it is cooling down).
    pub(crate) fn cooling(&self, local_now: Nanos) -> bool {
        self.health.next_change_at(local(local_now)).is_some()
    }
}

/// The health faults on a node (true-time ends).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NodeHealth {
    /// Readiness fails until then.
    down_until: Nanos,
    /// Readiness answers at random until then.
    flap_until: Nanos,
    /// Checks answer slowly (past their timeout half the time) until then.
    slow_until: Nanos,
    /// The leader's work fails (its leader check) until then.
    work_until: Nanos,
}
