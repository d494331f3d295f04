//! Newtypes for the election's scalars: ballots, priorities, candidate ids.
//!
//! Their fallible constructors (which report an [`ElectionError`](crate::ElectionError), an
//! error that itself names ballots and ids) live in `id_rules.rs`, so that this module and
//! `error.rs` do not import each other.

use std::fmt;

use serde::{Deserialize, Serialize};

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

/// One shard of a sharded election (docs/design.md §12): shards are numbered `0..M`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ShardId(u32);

impl ShardId {
    /// Shard `n`.
    pub const fn new(n: u32) -> Self {
        ShardId(n)
    }

    /// The shard's number.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A member's share of the shards, relative to the other members': a member of weight `w`
/// owns about `M × w / W` of `M` shards (`W`: the live members' total). Weight 0 is
/// *drained*: it owns none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Weight(u32);

impl Weight {
    /// A drained member's weight: it owns no shard.
    pub const DRAINED: Weight = Weight(0);
    /// The default weight.
    pub const ONE: Weight = Weight(1);

    /// A weight from its value.
    pub const fn new(w: u32) -> Self {
        Weight(w)
    }

    /// The weight's value.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight::ONE
    }
}

impl fmt::Display for Weight {
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
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An id that [`parse`](Self::parse) accepted.
    pub(crate) fn from_checked(s: &str) -> Self {
        CandidateId(s.to_owned())
    }

    /// The stable name of the process this id belongs to: the label before the 16 hexadecimal
    /// digits [`with_nonce`](Self::with_nonce) appends (`scheduler-eu1` for
    /// `scheduler-eu1-00c0ffee00c0ffee`), the same for every incarnation; the whole id for an
    /// id of another form. Operators' eligibility marks name it, so that they outlive restarts.
    ///
    /// ```
    /// use fdb_leader_election::CandidateId;
    ///
    /// let id = CandidateId::with_nonce("scheduler-eu1", 0xc0ffee)?;
    /// assert_eq!(id.name(), "scheduler-eu1");
    /// assert_eq!(CandidateId::parse("plain")?.name(), "plain");
    /// # Ok::<(), fdb_leader_election::ElectionError>(())
    /// ```
    pub fn name(&self) -> &str {
        match self.0.rsplit_once('-') {
            Some((label, nonce))
                if !label.is_empty()
                    && nonce.len() == 16
                    && nonce.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                label
            }
            _ => &self.0,
        }
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
