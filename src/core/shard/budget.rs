//! What one transaction of a sharded election may hold (docs/design.md §12, FoundationDB's limits).
//!
//! FoundationDB refuses a value over 100,000 bytes and a transaction over 10,000,000 bytes of
//! mutations and conflict ranges. A sharded election with many shards, long ids or a long
//! subspace would pass both if a member cycle, a leave or a coordinator attempt wrote
//! everything it could at once (one coordinator attempt reserving every shard of a lone
//! member, one inbox naming all of them). So each of them charges what it reads with a
//! conflict range and what it writes to a [`Budget`], counted as FoundationDB counts a
//! transaction's size, and leaves what does not fit to a later transaction; and nothing adds
//! to a member's inbox past [`INBOX_BUDGET`] ([`InboxFill`]). The lengths charged are exact
//! (the codec's, and the election's key lengths, [`KeyLens`]), so the bounds hold for every
//! number of shards the layout accepts, every id and every subspace.

use crate::codec;
use crate::ids::CandidateId;
use crate::record::shard::Inbox;
use crate::store::limits::MAX_TRANSACTION_BYTES;
use crate::store::size::TransactionSize;

/// The bytes one transaction of a sharded election may count toward FoundationDB's limit on a
/// transaction's size ([`MAX_TRANSACTION_BYTES`] of mutations and conflict ranges): a tenth of
/// it, FoundationDB's own advice for transactions that commit quickly.
pub(crate) const TXN_BUDGET: usize = MAX_TRANSACTION_BYTES / 10;

/// The most bytes a member's inbox may take, encoded: nothing is added to an inbox past it
/// (the coordinator reserves more once the member has acquired what its inbox holds). Well
/// below FoundationDB's value limit, so that a member's read of its inbox at every heartbeat
/// stays small.
pub(crate) const INBOX_BUDGET: usize = 64 * 1024;

/// How many single-key conflict ranges (reads made with a conflict) a transaction may add: as
/// many as a quarter of its budget holds, so that what it writes fits behind them.
pub(crate) fn reads_within_budget(keys: KeyLens) -> usize {
    (TXN_BUDGET / 4)
        .checked_div(Budget::conflict_cost(keys.shard))
        .unwrap_or(0)
        .max(1)
}

/// The lengths of one sharded election's keys: they depend on its subspace, and a member's on
/// its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyLens {
    /// The longest shard key the election may have (that of the largest shard number its
    /// layout may hold).
    pub(crate) shard: usize,
    /// A member key's length beyond the id's own bytes: the members' subspace, the tuple's
    /// framing and the longest suffix.
    pub(crate) member_base: usize,
}

impl KeyLens {
    /// The length of the longest of `member`'s keys: an id's byte takes at most two bytes in a
    /// tuple (a zero byte is escaped).
    pub(crate) fn member(&self, member: &CandidateId) -> usize {
        self.member_base
            .saturating_add(member.as_str().len().saturating_mul(2))
    }

    /// A bound on the length of the election's fixed keys (its configuration, layout, and
    /// the coordinator election's keys): they sit beside the shards' subspace, and the
    /// longest, the coordinator election's fence (`("coordinator", "fence")` under the
    /// subspace), takes 21 bytes of tuple beside it, against a shard key's 8 and more.
    pub(crate) fn fixed(&self) -> usize {
        self.shard.saturating_add(FIXED_KEY_EXTRA)
    }
}

/// How much longer than a shard key [`KeyLens::fixed`] allows.
const FIXED_KEY_EXTRA: usize = 32;

/// A transaction's running size, as FoundationDB counts it at commit ([`TransactionSize`]'s
/// costs, the one place that count is written: every mutation's key and value, every conflict
/// range's two keys, and the client's overhead for each), as an upper bound (nothing merged).
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    left: usize,
}

impl Budget {
    /// A transaction's whole budget ([`TXN_BUDGET`]).
    pub(crate) fn new() -> Self {
        Budget { left: TXN_BUDGET }
    }

    /// What setting a key of `key` bytes to a value of `value` bytes counts: the mutation and
    /// its write conflict range.
    pub(crate) fn set_cost(key: usize, value: usize) -> usize {
        TransactionSize::new().set(key, value).bytes()
    }

    /// What clearing one key counts: the clear and its write conflict range.
    pub(crate) fn clear_cost(key: usize) -> usize {
        TransactionSize::new().clear(key).bytes()
    }

    /// What a conflict range on one key counts (a serializable read, or an added conflict).
    pub(crate) fn conflict_cost(key: usize) -> usize {
        TransactionSize::new().read_key(key).bytes()
    }

    /// Takes `bytes` if they fit, else nothing: `false` leaves the write to a later
    /// transaction.
    pub(crate) fn take(&mut self, bytes: usize) -> bool {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }

    /// Takes `bytes` whether they fit or not: the writes a transaction cannot do without
    /// (a member's own record and inbox), charged first, so everything optional fits behind
    /// them. (They are small: a record and an inbox of at most [`INBOX_BUDGET`].)
    pub(crate) fn force(&mut self, bytes: usize) {
        self.left = self.left.saturating_sub(bytes);
    }

    /// What is left.
    #[cfg(test)]
    pub(crate) fn left(&self) -> usize {
        self.left
    }
}

/// How full an inbox is as a transaction adds to it: its encoded length as read, plus every
/// entry added, plus the most its two length prefixes can grow by. Entries removed are not
/// subtracted (the bound stays safe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InboxFill {
    len: usize,
}

impl InboxFill {
    /// The fill of `inbox` as read.
    pub(crate) fn of(inbox: &Inbox) -> Self {
        InboxFill {
            len: codec::inbox_len(inbox).saturating_add(codec::INBOX_PREFIX_GROWTH),
        }
    }

    /// The bound on the inbox's encoded length so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether an entry of `entry` bytes still fits within [`INBOX_BUDGET`].
    pub(crate) fn fits(&self, entry: usize) -> bool {
        self.len.saturating_add(entry) <= INBOX_BUDGET
    }

    /// Counts an entry of `entry` bytes added.
    pub(crate) fn add(&mut self, entry: usize) {
        self.len = self.len.saturating_add(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ShardId;

    #[test]
    fn take_refuses_what_does_not_fit_and_takes_nothing() {
        let keys = KeyLens {
            shard: 20,
            member_base: 30,
        };
        let mut b = Budget::new();
        assert!(b.take(TXN_BUDGET - 10));
        assert!(!b.take(11));
        assert_eq!(b.left(), 10);
        assert!(b.take(10));
        assert_eq!(b.left(), 0);
        b.force(5);
        assert_eq!(b.left(), 0);
        assert_eq!(Budget::set_cost(10, 100), 44 + 24 + 3 * 10 + 100 + 1);
        assert_eq!(Budget::clear_cost(10), 44 + 24 + 4 * 10 + 2);
        assert_eq!(Budget::conflict_cost(10), 24 + 2 * 10 + 1);
        let id = CandidateId::parse("abc").unwrap_or_else(|_| unreachable!());
        assert_eq!(keys.member(&id), 36);
    }

    #[test]
    fn an_inbox_fill_stops_at_the_inbox_budget() {
        let inbox = Inbox::default();
        let mut fill = InboxFill::of(&inbox);
        assert_eq!(
            fill.len(),
            codec::inbox_len(&inbox) + codec::INBOX_PREFIX_GROWTH
        );
        let entry = codec::reserved_entry_len(ShardId::new(60_000));
        let mut added = 0;
        while fill.fits(entry) {
            fill.add(entry);
            added += 1;
        }
        assert!(fill.len() <= INBOX_BUDGET);
        assert!(fill.len() + entry > INBOX_BUDGET);
        assert!(added > 20_000, "{added}");
    }
}
