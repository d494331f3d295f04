//! The crate's error type.
//!
//! "Someone else leads" and "resign rejected" are outcomes, not errors; see
//! [`ElectionResult`](crate::ElectionResult) and [`ResignOutcome`](crate::ResignOutcome).

use crate::config::ConfigError;
use crate::ids::{Ballot, CandidateId};
use crate::store::txn::TxnError;

/// Why a stored value could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The value is empty: not even a format version byte.
    #[error("empty value")]
    Empty,
    /// The value was written by a format version this build does not know.
    #[error("unknown format version {found} (this build reads versions 1 to {supported})")]
    UnknownVersion {
        /// The version byte found.
        found: u8,
        /// The newest version this build reads (and the one it writes).
        supported: u8,
    },
    /// The body does not decode.
    #[error("malformed body")]
    Malformed(#[source] bincode::error::DecodeError),
    /// The body decoded but bytes were left over.
    #[error("{extra} unexpected trailing bytes")]
    TrailingBytes {
        /// How many bytes were left.
        extra: usize,
    },
    /// The value is longer than any value the encoder writes ([`MAX_VALUE_BYTES`]).
    ///
    /// [`MAX_VALUE_BYTES`]: crate::MAX_VALUE_BYTES
    #[error("{len} bytes, more than the {max} any value may have")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body decoded to a state the protocol never writes.
    #[error("impossible state: {0}")]
    Impossible(&'static str),
    /// A value in FoundationDB's tuple encoding (the fence) does not unpack.
    #[error("malformed tuple")]
    MalformedTuple(#[source] foundationdb_tuple::PackError),
}

/// Everything that can go wrong in an election operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The database failed; [`ElectionError::is_retryable`] says whether to run the
    /// transaction again.
    #[error("database error")]
    Database(#[from] TxnError),
    /// The election's configuration key is absent: call
    /// [`LeaderElection::initialize`](crate::LeaderElection::initialize) first.
    #[error("the election is not initialized")]
    NotInitialized,
    /// A stored value could not be decoded. Nothing was overwritten; the caller stays a
    /// follower until an operator repairs the key.
    #[error("corrupt value at key {key}")]
    Corrupt {
        /// The key, printable.
        key: String,
        /// What is wrong with the value.
        #[source]
        reason: DecodeError,
    },
    /// The configuration breaks a rule.
    #[error("invalid configuration")]
    InvalidConfig(#[from] ConfigError),
    /// The candidate has no registration record, so it cannot claim or heartbeat.
    #[error("candidate {candidate} is not registered")]
    NotRegistered {
        /// The candidate.
        candidate: CandidateId,
    },
    /// A candidate id is malformed.
    #[error("invalid candidate id: {reason}")]
    InvalidId {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A sharded election's layout (shard count, move limit) is invalid, or a shard number is
    /// out of range.
    #[error("invalid shard layout: {reason}")]
    InvalidLayout {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An operator's override was refused (for example, moving a shard by hand while
    /// placement is not frozen); the reason says what to do instead.
    #[error("operator override refused: {reason}")]
    OperatorRefused {
        /// Why, and the fix.
        reason: String,
    },
    /// An id, payload, metadata or key exceeds its size limit.
    #[error("{what} is {len} bytes, more than the limit of {max}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// A value could not be encoded.
    #[error("could not encode {what}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The encoder's error.
        #[source]
        source: bincode::error::EncodeError,
    },
    /// A configuration stored in the database breaks a rule.
    #[error("stored configuration at key {key} is invalid")]
    InvalidStoredConfig {
        /// The key, printable.
        key: String,
        /// The rule it breaks.
        #[source]
        source: ConfigError,
    },
    /// The ballot reached `u64::MAX` and cannot grow.
    #[error("the ballot is exhausted")]
    BallotExhausted,
    /// A counter reached its maximum and cannot grow.
    #[error("the {what} counter is exhausted")]
    CounterExhausted {
        /// Which counter.
        what: &'static str,
    },
    /// A cycle of this candidate was started while another of its cycles was unsettled: its
    /// [`Cycle`](crate::Cycle) is still alive, or the record read back is that cycle's own
    /// uncommitted write (the same transaction). Inside one transaction a candidate runs at
    /// most one cycle; adopt or drop the `Cycle` after its transaction ends, then run the next
    /// one in a new transaction.
    #[error(
        "candidate {candidate} already has a cycle whose transaction has not ended (one cycle \
         per transaction; adopt or drop its Cycle after the commit before the next cycle)"
    )]
    CycleInProgress {
        /// The candidate.
        candidate: CandidateId,
    },
    /// A [`Candidate`](crate::Candidate) was used with an election other than the one it
    /// first took part in. A candidate's local state (its belief, the record it is timing, its
    /// unconfirmed writes) belongs to one election; reusing it in another would let what it
    /// timed there count here. Build one `Candidate` per election (the same id may be used in
    /// several).
    #[error(
        "candidate {candidate} already takes part in another election; build one Candidate          per election"
    )]
    CandidateOfAnotherElection {
        /// The candidate.
        candidate: CandidateId,
    },
    /// A fenced operation carried a token that no longer leads.
    #[error("stale fencing token {token}: the election is at ballot {current}{}", if *.vacant { " (vacant)" } else { "" })]
    StaleToken {
        /// The ballot the operation carried.
        token: Ballot,
        /// The ballot in the database.
        current: Ballot,
        /// Whether the current ballot's leader has stepped down.
        vacant: bool,
    },
}

impl ElectionError {
    /// Whether running the transaction again may succeed (database conflicts, timeouts,
    /// unknown commit results, unavailability).
    pub fn is_retryable(&self) -> bool {
        matches!(self, ElectionError::Database(e) if e.is_retryable())
    }

    /// Whether the failed commit may nevertheless have applied.
    pub fn is_maybe_committed(&self) -> bool {
        matches!(self, ElectionError::Database(e) if e.is_maybe_committed())
    }

    pub(crate) fn corrupt(key: &[u8], reason: DecodeError) -> Self {
        ElectionError::Corrupt {
            key: printable_key(key),
            reason,
        }
    }
}

/// FoundationDB-style printable bytes: ASCII graphic characters as-is, the rest as `\xNN`.
pub fn printable_key(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len());
    for &b in key {
        if b.is_ascii_graphic() && b != b'\\' {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::txn::TxnErrorKind;
    use std::error::Error;

    #[test]
    fn retryability_follows_the_database_error() {
        let conflict = ElectionError::from(TxnError::new(TxnErrorKind::Conflict).with_code(1020));
        assert!(conflict.is_retryable());
        assert!(!conflict.is_maybe_committed());
        assert!(conflict.source().is_some());
        let unknown = ElectionError::from(TxnError::new(TxnErrorKind::CommitUnknown));
        assert!(unknown.is_retryable() && unknown.is_maybe_committed());
        assert!(!ElectionError::from(TxnError::new(TxnErrorKind::Fatal)).is_retryable());
        assert!(!ElectionError::NotInitialized.is_retryable());
    }

    #[test]
    fn corrupt_errors_name_the_key_and_keep_the_reason() {
        let e = ElectionError::corrupt(b"\x01el\x00\\", DecodeError::Empty);
        assert_eq!(e.to_string(), "corrupt value at key \\x01el\\x00\\x5c");
        assert!(e.source().is_some());
    }
}
