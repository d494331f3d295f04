//! [`LeaderElection`]: the handle and its keys; its operations by concern in the submodules.

mod cycle;
mod fence;
mod operator;
mod query;
mod records;
mod registry;

use std::sync::{Arc, Mutex};

use foundationdb_tuple::Subspace;

use crate::candidate::Candidate;
use crate::config::ElectionConfig;
use crate::core::resign::ResignRejected;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::keys::Keys;
use crate::record::Named;

/// A decoded configuration and the bytes it was decoded from.
type CachedConfig = (Vec<u8>, ElectionConfig);

/// An election under one subspace: a cheap `Clone` handle.
///
/// Every operation takes the caller's transaction and neither commits nor retries; run it
/// inside `Database::run` (FoundationDB) or [`MemDb::run`](crate::MemDb::run), so leader-only
/// writes can be fenced in the same commit. [`run_cycle`](Self::run_cycle) is the exception:
/// it runs a cycle in a transaction of its own and adopts it after the commit.
///
/// Election state lives in the database and in each [`Candidate`]; the handle holds only the
/// election's keys and a cache of the last configuration it decoded, with its bytes (shared by
/// its clones), so that a cycle reading unchanged configuration bytes does not decode and
/// validate them again. The cache never changes what an operation decides: every operation
/// reads the configuration key, and a different value is decoded afresh.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    subspace: Arc<Subspace>,
    keys: Arc<Keys>,
    /// The last configuration decoded, with its bytes: the configuration rarely changes, so a
    /// cycle that reads the same bytes skips decoding and validating them again.
    config_cache: Arc<Mutex<Option<CachedConfig>>>,
}

/// The outcome of an operator override ([`LeaderElection::force_vacate`],
/// [`LeaderElection::request_resign`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperatorOutcome {
    /// Written (effective once the transaction commits).
    Done {
        /// The ballot in the record after the write.
        ballot: Ballot,
    },
    /// Nothing was written.
    Rejected(ResignRejected),
}

/// The outcome of a resignation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResignOutcome {
    /// The vacancy was written (effective once the transaction commits). The candidate stopped
    /// believing it leads before the write.
    Resigned {
        /// The ballot that ended; the next leader gets a higher one.
        ballot: Ballot,
        /// The candidate the vacancy is reserved for, if a live one was registered.
        reserved_for: Option<Named>,
    },
    /// Nothing was written.
    Rejected(ResignRejected),
}

impl LeaderElection {
    /// Binds `candidate` to this election on its first use, or refuses it if it already takes
    /// part in another one (its local state belongs to that election).
    pub(crate) fn bind(&self, candidate: &Candidate) -> Result<(), ElectionError> {
        candidate.bind(&self.keys.leader)
    }

    /// An election whose keys live under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        LeaderElection {
            keys: Arc::new(Keys::new(&subspace)),
            config_cache: Arc::new(Mutex::new(None)),
            subspace: Arc::new(subspace),
        }
    }

    /// The election's subspace.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    /// The key of the leader record (for tools, and for fault injection with [`raw`]
    /// records).
    ///
    /// [`raw`]: crate::raw
    pub fn leader_key(&self) -> &[u8] {
        &self.keys.leader
    }

    /// The key of the fence record.
    pub fn fence_key(&self) -> &[u8] {
        &self.keys.fence
    }

    /// The key of the configuration.
    pub fn config_key(&self) -> &[u8] {
        &self.keys.config
    }

    /// The key of `id`'s registration.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] beyond FoundationDB's key size limit.
    pub fn candidate_key(&self, id: &CandidateId) -> Result<Vec<u8>, ElectionError> {
        self.keys.candidate(id)
    }
}
