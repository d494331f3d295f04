//! Newtypes for the election's scalars: ballots, priorities, candidate ids.

use std::fmt;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::error::ElectionError;

/// A leadership term, and the fencing token of the leader that holds it.
///
/// It grows by one every time ownership changes hands or a vacancy is filled, and never
/// otherwise changes: not on renewal, resign, re-initialisation or configuration change.
/// Ballot 0 is the ballot of an election that has never had a leader.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Ballot(u64);

impl Ballot {
    /// The ballot of an election that has never had a leader.
    pub const ZERO: Ballot = Ballot(0);

    /// A ballot from its number (for example, a token that came back from an external sink).
    pub const fn new(n: u64) -> Self {
        Ballot(n)
    }

    /// The ballot's number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next ballot.
    ///
    /// # Errors
    ///
    /// [`ElectionError::BallotExhausted`] at `u64::MAX`.
    pub fn next(self) -> Result<Ballot, ElectionError> {
        self.0
            .checked_add(1)
            .map(Ballot)
            .ok_or(ElectionError::BallotExhausted)
    }
}

impl fmt::Display for Ballot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A candidate's priority. Higher wins; equal priorities never preempt each other.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Priority(i32);

impl Priority {
    /// A priority from its value.
    pub const fn new(p: i32) -> Self {
        Priority(p)
    }

    /// The priority's value.
    pub const fn get(self) -> i32 {
        self.0
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The longest candidate id, in bytes. Ids appear in keys (10,000-byte limit) and several times
/// in the leader record, so they are kept well below FoundationDB's limits.
pub const MAX_CANDIDATE_ID_BYTES: usize = 1024;

/// The identity of one process incarnation competing in an election: a human-readable label
/// plus random bits drawn at start-up, so a restarted process is a new candidate.
///
/// ```
/// use fdb_leader_election::CandidateId;
///
/// let a = CandidateId::random("scheduler-eu1")?;
/// let b = CandidateId::random("scheduler-eu1")?;
/// assert_ne!(a, b);
/// assert!(a.as_str().starts_with("scheduler-eu1-"));
/// # Ok::<(), fdb_leader_election::ElectionError>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CandidateId(String);

impl CandidateId {
    /// `label` followed by `nonce` in hexadecimal. The caller supplies the randomness; each
    /// process incarnation must use fresh random bits.
    ///
    /// # Errors
    ///
    /// [`ElectionError::InvalidId`] if the label is empty or the id would exceed
    /// [`MAX_CANDIDATE_ID_BYTES`].
    pub fn with_nonce(label: &str, nonce: u64) -> Result<Self, ElectionError> {
        if label.is_empty() {
            return Err(ElectionError::InvalidId {
                reason: "the label is empty",
            });
        }
        Self::parse(&format!("{label}-{nonce:016x}"))
    }

    /// `label` followed by 64 bits drawn from `rng`.
    ///
    /// # Errors
    ///
    /// As [`with_nonce`](Self::with_nonce).
    pub fn generate(label: &str, rng: &mut impl RngCore) -> Result<Self, ElectionError> {
        Self::with_nonce(label, rng.next_u64())
    }

    /// `label` followed by 64 bits from the operating system's random source.
    ///
    /// # Errors
    ///
    /// As [`with_nonce`](Self::with_nonce).
    pub fn random(label: &str) -> Result<Self, ElectionError> {
        use rand::TryRngCore;
        let nonce = rand::rngs::OsRng
            .try_next_u64()
            .map_err(|_| ElectionError::InvalidId {
                reason: "the operating system's random source failed",
            })?;
        Self::with_nonce(label, nonce)
    }

    /// An id exactly as given (for ids read back from the database or typed by an operator).
    ///
    /// # Errors
    ///
    /// [`ElectionError::InvalidId`] if `s` is empty or longer than [`MAX_CANDIDATE_ID_BYTES`].
    pub fn parse(s: &str) -> Result<Self, ElectionError> {
        if s.is_empty() {
            return Err(ElectionError::InvalidId {
                reason: "the id is empty",
            });
        }
        if s.len() > MAX_CANDIDATE_ID_BYTES {
            return Err(ElectionError::TooLarge {
                what: "candidate id",
                len: s.len(),
                max: MAX_CANDIDATE_ID_BYTES,
            });
        }
        Ok(CandidateId(s.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this id is within the size limits (ids decoded from storage are checked again).
    pub(crate) fn is_valid(&self) -> bool {
        !self.0.is_empty() && self.0.len() <= MAX_CANDIDATE_ID_BYTES
    }
}

impl fmt::Debug for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ballot_next_is_checked() {
        assert_eq!(Ballot::ZERO.next().ok(), Some(Ballot::new(1)));
        assert!(matches!(
            Ballot::new(u64::MAX).next(),
            Err(ElectionError::BallotExhausted)
        ));
    }

    #[test]
    fn ids_are_validated() {
        assert!(CandidateId::parse("").is_err());
        assert!(CandidateId::with_nonce("", 1).is_err());
        let long = "x".repeat(MAX_CANDIDATE_ID_BYTES + 1);
        assert!(matches!(
            CandidateId::parse(&long),
            Err(ElectionError::TooLarge { .. })
        ));
        let exact = "x".repeat(MAX_CANDIDATE_ID_BYTES);
        assert!(CandidateId::parse(&exact).is_ok());
        assert!(CandidateId::with_nonce(&"x".repeat(MAX_CANDIDATE_ID_BYTES - 17), 7).is_ok());
        assert!(CandidateId::with_nonce(&"x".repeat(MAX_CANDIDATE_ID_BYTES - 16), 7).is_err());
        assert_eq!(
            CandidateId::with_nonce("a", 255)
                .map(|i| i.to_string())
                .ok(),
            Some("a-00000000000000ff".to_owned())
        );
    }
}
