//! Whether a candidate may lead (docs/design.md §13.1): published in its registration, never guessed.

use std::fmt;

use crate::error::ElectionError;

/// The longest reason a candidate gives for being ineligible, in bytes.
pub const MAX_REASON_BYTES: usize = 256;

/// Whether a candidate may lead, and, when not, why (a short reason for operators: `status`
/// shows it).
///
/// An ineligible candidate keeps registering, but never acquires a vacancy, never requests a
/// handover, never takes over a lapsed lease and counts in no rank; no leader or operator
/// reserves a vacancy for it; an ineligible leader hands over to the best live eligible
/// candidate (docs/design.md §13.2, §13.3).
///
/// ```
/// use fdb_leader_election::Eligibility;
///
/// let sick = Eligibility::ineligible("database unreachable")?;
/// assert!(!sick.is_eligible());
/// assert_eq!(sick.reason(), Some("database unreachable"));
/// assert!(Eligibility::Eligible.is_eligible());
/// // A reason is short: at most MAX_REASON_BYTES.
/// assert!(Eligibility::ineligible(&"x".repeat(300)).is_err());
/// # Ok::<(), fdb_leader_election::ElectionError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Eligibility {
    /// It may lead.
    #[default]
    Eligible,
    /// It may not lead, for this reason.
    Ineligible {
        /// Why (at most [`MAX_REASON_BYTES`]; may be empty).
        reason: String,
    },
}

impl Eligibility {
    /// Ineligible for `reason`.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] for a reason longer than [`MAX_REASON_BYTES`].
    pub fn ineligible(reason: &str) -> Result<Self, ElectionError> {
        if reason.len() > MAX_REASON_BYTES {
            return Err(ElectionError::TooLarge {
                what: "ineligibility reason",
                len: reason.len(),
                max: MAX_REASON_BYTES,
            });
        }
        Ok(Eligibility::Ineligible {
            reason: reason.to_owned(),
        })
    }

    /// Whether it may lead.
    pub fn is_eligible(&self) -> bool {
        matches!(self, Eligibility::Eligible)
    }

    /// Why not, when it may not.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Eligibility::Eligible => None,
            Eligibility::Ineligible { reason } => Some(reason),
        }
    }

    /// Both conditions: ineligible if either is, with the first ineligible one's reason.
    pub(crate) fn and(self, other: Eligibility) -> Eligibility {
        match self {
            Eligibility::Eligible => other,
            ineligible => ineligible,
        }
    }

    pub(crate) fn check(&self) -> Result<(), &'static str> {
        match self.reason() {
            Some(r) if r.len() > MAX_REASON_BYTES => Err("ineligibility reason too long"),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Eligibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Eligibility::Eligible => f.write_str("eligible"),
            Eligibility::Ineligible { reason } if reason.is_empty() => f.write_str("ineligible"),
            Eligibility::Ineligible { reason } => write!(f, "ineligible: {reason}"),
        }
    }
}
