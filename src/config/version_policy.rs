//! The version policy (docs/design.md §14.2): how an election ranks candidates by the version
//! they register.

use std::fmt;
use std::str::FromStr;

/// How an election ranks candidates by the version they register (docs/design.md §14.2), before their
/// priority. Every candidate computes the same ranking from the registry inside its own
/// transaction, and leadership moves by the ordinary cooperative handover. Candidates that
/// registered no version rank as the oldest under every policy.
///
/// ```
/// use fdb_leader_election::VersionPolicy;
///
/// let p: VersionPolicy = "prefer-oldest".parse()?;
/// assert_eq!(p, VersionPolicy::PreferOldest);
/// assert_eq!(p.to_string(), "prefer-oldest");
/// assert_eq!(VersionPolicy::default(), VersionPolicy::Ignore);
/// assert!("newest".parse::<VersionPolicy>().is_err());
/// # Ok::<(), fdb_leader_election::UnknownVersionPolicy>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VersionPolicy {
    /// Versions play no part: priority alone ranks (the behaviour of elections without
    /// versions). The default.
    #[default]
    Ignore,
    /// A strictly newer version ranks above any older one, then priority: a rolling deploy
    /// moves leadership to the new version without touching priorities.
    PreferNewest,
    /// The oldest live eligible version leads (Kubernetes' coordinated leader election,
    /// KEP-4355): a new version leads only once no older candidate is left, so state a new
    /// leader writes is never unreadable to a follower.
    PreferOldest,
    /// Leadership never passes to a version older than the current leader's while a
    /// candidate of that version or newer is live: a follower rolled back never takes the
    /// leadership back.
    NoDowngrade,
}

impl VersionPolicy {
    /// Every policy, in their configuration order.
    pub const ALL: [VersionPolicy; 4] = [
        VersionPolicy::Ignore,
        VersionPolicy::PreferNewest,
        VersionPolicy::PreferOldest,
        VersionPolicy::NoDowngrade,
    ];

    /// Its name: `ignore`, `prefer-newest`, `prefer-oldest`, `no-downgrade`.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionPolicy::Ignore => "ignore",
            VersionPolicy::PreferNewest => "prefer-newest",
            VersionPolicy::PreferOldest => "prefer-oldest",
            VersionPolicy::NoDowngrade => "no-downgrade",
        }
    }

    /// Its number in the stored configuration.
    pub(crate) fn code(self) -> u8 {
        match self {
            VersionPolicy::Ignore => 0,
            VersionPolicy::PreferNewest => 1,
            VersionPolicy::PreferOldest => 2,
            VersionPolicy::NoDowngrade => 3,
        }
    }

    /// The policy of a stored number.
    pub(crate) fn of_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.code() == code)
    }
}

impl fmt::Display for VersionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no [`VersionPolicy`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown version policy {0:?}: expected ignore, prefer-newest, prefer-oldest or no-downgrade"
)]
pub struct UnknownVersionPolicy(pub String);

impl FromStr for VersionPolicy {
    type Err = UnknownVersionPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownVersionPolicy(s.to_owned()))
    }
}
