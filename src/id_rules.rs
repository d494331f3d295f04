//! The ids' fallible constructors and the rules they check: ballots that cannot grow past
//! `u64::MAX`, candidate ids within their size limit. They report [`ElectionError`], which
//! names ballots and ids itself, so they live here rather than in `ids.rs`: `error` depends
//! on `ids`, this module on both, and nothing depends back.

use rand::RngCore;

use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, MAX_CANDIDATE_ID_BYTES};

impl Ballot {
    /// The next ballot.
    ///
    /// # Errors
    ///
    /// [`ElectionError::BallotExhausted`] at `u64::MAX`.
    pub fn next(self) -> Result<Ballot, ElectionError> {
        self.get()
            .checked_add(1)
            .map(Ballot::new)
            .ok_or(ElectionError::BallotExhausted)
    }
}

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
        Ok(CandidateId::from_checked(s))
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
