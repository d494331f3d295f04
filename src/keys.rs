//! The key schema under the caller's subspace.
//!
//! ```text
//! S + ("config",)              -> ElectionConfig       (v1 + bincode)
//! S + ("leader",)              -> LeaderRecord         (v1 + bincode)   never deleted
//! S + ("fence",)               -> FenceRecord          tuple (3, ballot, vacant)   changes only with ownership
//! S + ("registrations",)       -> u64 registration counter (v1 + bincode)
//! S + ("candidates", <id>)     -> CandidateRecord      (v1 + bincode)
//! S + ("marks", <name>)        -> an operator's ineligibility mark (v2 + bincode: the reason)
//! S + ("resign_refusal",)      -> the last directed resign a leader refused (v2 + bincode)
//! ```

use foundationdb_tuple::{Subspace, TuplePack};

use crate::error::ElectionError;
use crate::ids::CandidateId;

/// FoundationDB's key size limit.
pub const MAX_KEY_BYTES: usize = 10_000;

/// The keys of one election.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    pub(crate) config: Vec<u8>,
    pub(crate) leader: Vec<u8>,
    pub(crate) fence: Vec<u8>,
    pub(crate) registrations: Vec<u8>,
    pub(crate) resign_refusal: Vec<u8>,
    candidates: Subspace,
    marks: Subspace,
}

impl Keys {
    pub(crate) fn new(subspace: &Subspace) -> Self {
        Keys {
            config: subspace.pack(&("config",)),
            leader: subspace.pack(&("leader",)),
            fence: Self::fence_of(subspace),
            registrations: subspace.pack(&("registrations",)),
            resign_refusal: subspace.pack(&("resign_refusal",)),
            candidates: subspace.subspace(&("candidates",)),
            marks: subspace.subspace(&("marks",)),
        }
    }

    /// The fence key of the election in `subspace`.
    pub(crate) fn fence_of(subspace: &Subspace) -> Vec<u8> {
        subspace.pack(&("fence",))
    }

    /// The registration key of `id`, checked against the key size limit.
    pub(crate) fn candidate(&self, id: &CandidateId) -> Result<Vec<u8>, ElectionError> {
        // Sized up front: the tuple encoding is the id plus its type code, terminator and
        // one escape byte per NUL.
        let nuls = id.as_str().bytes().filter(|&b| b == 0).count();
        let len = self
            .candidates
            .bytes()
            .len()
            .saturating_add(id.as_str().len())
            .saturating_add(nuls)
            .saturating_add(2);
        let mut key = Vec::with_capacity(len);
        key.extend_from_slice(self.candidates.bytes());
        (id.as_str(),).pack_into_vec(&mut key);
        if key.len() > MAX_KEY_BYTES {
            return Err(ElectionError::TooLarge {
                what: "candidate key",
                len: key.len(),
                max: MAX_KEY_BYTES,
            });
        }
        Ok(key)
    }

    /// The key of an operator's eligibility mark on the candidates named `name`
    /// ([`CandidateId::name`]), checked against the key size limit.
    pub(crate) fn mark(&self, name: &str) -> Result<Vec<u8>, ElectionError> {
        let key = self.marks.pack(&(name,));
        if key.len() > MAX_KEY_BYTES {
            return Err(ElectionError::TooLarge {
                what: "eligibility mark key",
                len: key.len(),
                max: MAX_KEY_BYTES,
            });
        }
        Ok(key)
    }

    /// `[begin, end)` of all eligibility marks.
    pub(crate) fn marks_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.marks.range()
    }

    /// The name in an eligibility mark's key.
    pub(crate) fn mark_name(&self, key: &[u8]) -> Result<String, ElectionError> {
        let (name,): (String,) = self.marks.unpack(key).map_err(|_| {
            ElectionError::corrupt(
                key,
                crate::error::DecodeError::Impossible("malformed eligibility mark key"),
            )
        })?;
        Ok(name)
    }

    /// `[begin, end)` of all registration keys.
    pub(crate) fn candidates_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.candidates.range()
    }

    /// The candidate id in a registration key.
    pub(crate) fn candidate_id(&self, key: &[u8]) -> Result<CandidateId, ElectionError> {
        let (id,): (String,) = self.candidates.unpack(key).map_err(|_| {
            ElectionError::corrupt(
                key,
                crate::error::DecodeError::Impossible("malformed candidate key"),
            )
        })?;
        CandidateId::parse(&id).map_err(|_| {
            ElectionError::corrupt(
                key,
                crate::error::DecodeError::Impossible("invalid candidate id in key"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_keys_round_trip_and_stay_in_range() {
        let keys = Keys::new(&Subspace::from_bytes(b"app".to_vec()));
        let id = CandidateId::parse("node-a").ok();
        let id = id.as_ref();
        let key = id.and_then(|id| keys.candidate(id).ok());
        let (begin, end) = keys.candidates_range();
        let key = key.unwrap_or_default();
        assert!(key.as_slice() > begin.as_slice() && key.as_slice() < end.as_slice());
        assert_eq!(keys.candidate_id(&key).ok().as_ref(), id);
        assert!(keys.candidate_id(b"app\x02junk").is_err());
        assert!(keys.leader != keys.config && keys.fence != keys.leader);
    }

    #[test]
    fn long_subspace_makes_keys_too_large() {
        let keys = Keys::new(&Subspace::from_bytes(vec![b'x'; MAX_KEY_BYTES]));
        let id = CandidateId::parse("a");
        assert!(matches!(
            id.and_then(|id| keys.candidate(&id)),
            Err(ElectionError::TooLarge { .. })
        ));
    }
}
