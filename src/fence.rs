//! Fencing for external resources.
//!
//! Inside FoundationDB, use [`LeaderElection::fence`](crate::LeaderElection::fence) in the
//! same transaction as the protected write. An external resource that cannot join the
//! transaction must remember the highest ballot it has accepted and reject anything older.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ElectionError;
use crate::ids::Ballot;

/// Whether `token` is stale against the highest ballot a sink has seen.
pub fn is_stale(token: Ballot, highest_seen: Ballot) -> bool {
    token < highest_seen
}

/// The highest ballot an external sink has accepted. Admitting a token raises it; an older
/// token is rejected.
///
/// ```
/// use fdb_leader_election::{Ballot, FenceGate};
///
/// let gate = FenceGate::new();
/// assert!(gate.admit(Ballot::new(4)).is_ok());
/// assert!(gate.admit(Ballot::new(5)).is_ok());
/// assert!(gate.admit(Ballot::new(4)).is_err()); // the old leader is fenced out
/// assert!(gate.admit(Ballot::new(5)).is_ok()); // the current leader keeps writing
/// ```
#[derive(Debug, Default)]
pub struct FenceGate {
    highest: AtomicU64,
}

impl FenceGate {
    /// A gate that has seen no ballot.
    pub fn new() -> Self {
        Self::default()
    }

    /// A gate that has already seen `highest` (for example, restored from the sink's storage).
    pub fn starting_at(highest: Ballot) -> Self {
        FenceGate {
            highest: AtomicU64::new(highest.get()),
        }
    }

    /// The highest ballot admitted so far.
    pub fn highest(&self) -> Ballot {
        Ballot::new(self.highest.load(Ordering::SeqCst))
    }

    /// Admits `token` if it is at least the highest seen, raising the highest to it.
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] if a newer ballot was admitted before.
    pub fn admit(&self, token: Ballot) -> Result<(), ElectionError> {
        let prev = self.highest.fetch_max(token.get(), Ordering::SeqCst);
        if token.get() < prev {
            return Err(ElectionError::StaleToken {
                token,
                current: Ballot::new(prev),
                vacant: false,
            });
        }
        Ok(())
    }
}
