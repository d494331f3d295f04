//! Fencing: inside FoundationDB, and for external resources.
//!
//! Inside FoundationDB, check the fence in the same transaction as the protected write:
//! [`LeaderElection::fence`](crate::LeaderElection::fence) with the election's handle, or
//! [`check_fence`] with only its subspace (code that is not part of the election, written in
//! Rust; any other FoundationDB binding applies the same rule, see "Fencing from
//! any language" in `docs/fencing.md`). An external resource that cannot join the transaction must remember the
//! highest ballot it has accepted and reject anything older ([`FenceGate`]).

use std::sync::atomic::{AtomicU64, Ordering};

use foundationdb_tuple::Subspace;

use crate::codec;
use crate::error::ElectionError;
use crate::ids::Ballot;
use crate::keys::Keys;
use crate::store::txn::{ElectionTxn, ReadMode};

/// The key of the fence of the election in `election` (the subspace given to
/// [`LeaderElection::new`](crate::LeaderElection::new)): `election.pack(("fence",))`.
pub fn fence_key(election: &Subspace) -> Vec<u8> {
    Keys::fence_of(election)
}

/// The fence check, the same rule every FoundationDB binding applies: inside `txn`, before
/// the protected write, read the fence key of the election in `election` serializably (the
/// commit then conflicts if ownership changes meanwhile), and admit the write only if the
/// value is present, decodes, is not vacant, and its ballot equals `token`.
///
/// ```
/// use fdb_leader_election::{Ballot, ElectionError, ElectionTxn, MemDb, check_fence, fence_key};
/// use fdb_leader_election::Subspace;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ElectionError> {
/// let db = MemDb::new();
/// let election = Subspace::from("scheduler");
/// let txn = db.create_transaction();
/// // The fence of ballot 7, as the election writes it: the tuple (3, 7, false).
/// txn.set(&fence_key(&election), &foundationdb_tuple::pack(&(3u16, 7u64, false)));
/// assert!(check_fence(&txn, &election, Ballot::new(7)).await.is_ok());
/// assert!(matches!(
///     check_fence(&txn, &election, Ballot::new(6)).await,
///     Err(ElectionError::StaleToken { .. })
/// ));
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`ElectionError::StaleToken`] if another ballot leads or the leader stepped down;
/// [`ElectionError::NotInitialized`] if there is no fence; [`ElectionError::Corrupt`] for a
/// value that does not decode (an unknown format version included); database errors.
pub async fn check_fence<T: ElectionTxn>(
    txn: &T,
    election: &Subspace,
    token: Ballot,
) -> Result<(), ElectionError> {
    check_fence_at(txn, &fence_key(election), token).await
}

/// [`check_fence`] on the fence key itself.
pub(crate) async fn check_fence_at<T: ElectionTxn>(
    txn: &T,
    key: &[u8],
    token: Ballot,
) -> Result<(), ElectionError> {
    let bytes = txn
        .get(key, ReadMode::Serializable)
        .await?
        .ok_or(ElectionError::NotInitialized)?;
    let fence = codec::decode_fence(key, &bytes)?;
    if fence.ballot != token || fence.vacant {
        return Err(ElectionError::StaleToken {
            token,
            current: fence.ballot,
            vacant: fence.vacant,
        });
    }
    Ok(())
}

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
