//! Raw keys and values the simulation touches directly.
//!
//! - The application's keys (protected register, fenced counter, unfenced shadow counter) and
//!   the history log, outside the election's subspace.
//! - For planted faults only: the election's leader and fence keys and raw records in the
//!   library's own encoding (its public `raw` module, meant for fault injection), so a rogue
//!   can write a record with a raw transaction. A unit test checks that the library decodes
//!   what this module writes.

use fdb_leader_election::raw;
use fdb_leader_election::{Ballot, CandidateId, Priority};
use foundationdb_tuple::Subspace;

/// The election's subspace in every simulated world.
pub const ELECTION_SUBSPACE: &str = "sim-election";
/// The protected register: (ballot, sequence) of the last accepted fenced write.
pub const REGISTER_KEY: &[u8] = b"app/register";
/// The fenced counter: one increment per committed fenced leader-work transaction.
pub const COUNTER_KEY: &[u8] = b"app/counter";
/// The unfenced shadow counter, written by the same leader work without the fence.
pub const SHADOW_KEY: &[u8] = b"app/shadow";
/// Prefix of the history log: one entry per committed transaction, keyed by commit version.
pub const HISTORY_PREFIX: &[u8] = b"hist/";

/// The history key of commit version `version` (big-endian, so keys sort in commit order).
pub fn history_key(version: u64) -> Vec<u8> {
    let mut k = HISTORY_PREFIX.to_vec();
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// The end of the history range (the first key after every key with the prefix).
pub fn history_end() -> Vec<u8> {
    b"hist0".to_vec()
}

/// Encodes a counter value.
pub fn encode_u64(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// Decodes a counter value (absent or malformed reads as `None`).
pub fn decode_u64(v: Option<&[u8]>) -> Option<u64> {
    v.and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_be_bytes)
}

/// Encodes the register: (ballot, sequence).
pub fn encode_register(ballot: u64, seq: u64) -> Vec<u8> {
    let mut v = ballot.to_be_bytes().to_vec();
    v.extend_from_slice(&seq.to_be_bytes());
    v
}

/// Decodes the register.
pub fn decode_register(v: Option<&[u8]>) -> Option<(u64, u64)> {
    let v = v?;
    let (b, s) = (v.get(..8)?, v.get(8..)?);
    Some((
        u64::from_be_bytes(b.try_into().ok()?),
        u64::from_be_bytes(s.try_into().ok()?),
    ))
}

fn election() -> fdb_leader_election::LeaderElection {
    fdb_leader_election::LeaderElection::new(Subspace::from(ELECTION_SUBSPACE))
}

/// The election's leader key.
pub fn leader_key() -> Vec<u8> {
    election().leader_key().to_vec()
}

/// The election's fence key.
pub fn fence_key() -> Vec<u8> {
    election().fence_key().to_vec()
}

/// The raw leader record of a takeover by `owner`: `ballot`, owned, `renewal`, no request,
/// no reservation, written by attempt `seq` of `owner` (the library's own encoding).
pub fn takeover_record(
    ballot: Ballot,
    owner: &CandidateId,
    priority: Priority,
    renewal: u64,
    lease_nanos: u64,
    seq: u64,
) -> Option<Vec<u8>> {
    raw::owned_record(
        ballot,
        owner,
        priority,
        renewal,
        std::time::Duration::from_nanos(lease_nanos),
        seq,
    )
    .and_then(|r| raw::encode_leader(&r))
    .ok()
}

/// The raw fence record of an owned ballot.
pub fn owned_fence(ballot: Ballot) -> Option<Vec<u8>> {
    raw::fence_record(ballot, false).ok()
}

/// The raw vacancy record a faulty operator override would write: `ballot`, reserved for a
/// *candidate* `holder` (which then fills it at once), written by `operator`.
pub fn vacancy_reserved_for(
    ballot: Ballot,
    renewal: u64,
    lease_nanos: u64,
    holder: &CandidateId,
    priority: Priority,
    operator: &CandidateId,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let record = raw::vacancy_record(
        ballot,
        renewal,
        std::time::Duration::from_nanos(lease_nanos),
        Some((holder, priority)),
        (operator, 0),
    )
    .ok()?;
    Some((
        raw::encode_leader(&record).ok()?,
        raw::fence_of(&record).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use fdb_leader_election::{
        Candidate, ElectionTxn, LeaderElection, ManualClock, MemDb, ReadMode,
    };
    use std::sync::Arc;

    #[test]
    fn the_library_decodes_the_raw_takeover_record() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let db = MemDb::with_clock(Arc::new(ManualClock::new()));
            let election = LeaderElection::new(Subspace::from(ELECTION_SUBSPACE));
            let txn = db.create_transaction();
            election.initialize(&txn).await.unwrap();
            txn.commit().await.unwrap();
            // The raw keys are the library's keys.
            let txn = db.create_transaction();
            assert!(
                txn.get(&leader_key(), ReadMode::Snapshot)
                    .await
                    .unwrap()
                    .is_some()
            );
            assert!(
                txn.get(&fence_key(), ReadMode::Snapshot)
                    .await
                    .unwrap()
                    .is_some()
            );

            let id = CandidateId::with_nonce("rogue", 7).unwrap();
            let rec = takeover_record(Ballot::new(4), &id, Priority::new(3), 9, 2_000_000_000, 77)
                .unwrap();
            let txn = db.create_transaction();
            txn.set(&leader_key(), &rec);
            txn.set(&fence_key(), &owned_fence(Ballot::new(4)).unwrap());
            txn.commit().await.unwrap();

            let txn = db.create_transaction();
            let read = election.leader_record(&txn).await.unwrap();
            assert_eq!(read.ballot(), Ballot::new(4));
            assert_eq!(read.owner().map(|o| o.id()), Some(&id));
            assert_eq!(read.owner().map(|o| o.priority()), Some(Priority::new(3)));
            assert_eq!(read.renewal(), 9);
            assert_eq!(read.writer().map(|w| w.seq()), Some(77));
            // The library accepts the raw fence: the new ballot fences, the old one is stale.
            election.fence(&txn, Ballot::new(4)).await.unwrap();
            assert!(election.fence(&txn, Ballot::new(3)).await.is_err());
            let _ = Candidate::new(id, Priority::new(3));
        });
    }

    #[test]
    fn app_values_round_trip() {
        assert_eq!(decode_u64(Some(&encode_u64(42))), Some(42));
        assert_eq!(decode_register(Some(&encode_register(3, 9))), Some((3, 9)));
        assert_eq!(decode_register(Some(b"short")), None);
        assert!(history_key(1) < history_key(2) && history_key(u64::MAX) < history_end());
    }
}
