//! A transaction's size as FoundationDB counts it against [`MAX_TRANSACTION_BYTES`] (the
//! count MemDb and SQLite enforce at commit, and [`TransactionSize`], the budget for it), and
//! FoundationDB's running estimate of it (`get_approximate_size`).

use crate::store::limits::{MAX_TRANSACTION_BYTES, READ_KEY_LIMIT};

/// What FoundationDB counts per mutation besides its keys and value: `sizeof(MutationRef)` in
/// its 7.3 client on x86-64 (measured on a cluster).
pub(crate) const MUTATION_OVERHEAD: usize = 44;

/// What FoundationDB counts per conflict range besides the range's two keys:
/// `sizeof(KeyRangeRef)` in its 7.3 client on x86-64 (measured on a cluster).
pub(crate) const RANGE_OVERHEAD: usize = 24;

/// A budget of a transaction's size as FoundationDB counts it against
/// [`MAX_TRANSACTION_BYTES`]: the sum of what each operation costs. Exact when no two keys or
/// ranges of the transaction touch; otherwise an upper bound. Lengths are in bytes.
///
/// At commit, FoundationDB's client (`Transaction::getSize`, 7.3) adds up the transaction's
/// **mutations**, **read conflict ranges** and **write conflict ranges**, each counted as its
/// keys and values plus 44 bytes per mutation and 24 per range (the sizes of its C++ structs),
/// after its read-your-writes layer merged what touches:
///
/// - a set of key `k` to `v` is a mutation (`k`, `v`) and a write conflict range `[k, k\x00)`:
///   `44 + k + v + 24 + 2k + 1` bytes;
/// - a clear of `k` is a clear-range mutation `[k, k\x00)` and the same write conflict range:
///   `44 + 2k + 1 + 24 + 2k + 1`; clears of adjacent keys (`k`, `k\x00`, ...) become one clear
///   range, and the write conflict ranges of adjacent written keys one range;
/// - a serializable read of `k` (a `get`, a watch, `add_read_conflict_key`) is a read conflict
///   range `[k, k\x00)`: `24 + 2k + 1`; a serializable range read of `[b, e)` the range
///   `24 + b + e`; either less the keys the transaction had written before the read;
///   overlapping and adjacent read ranges merge; snapshot reads cost nothing;
/// - a later write of a key replaces the earlier one (a clear then a set is one set).
///
/// MemDb and the SQLite store count exactly that
/// ([`MemTransaction::size`](crate::MemTransaction::size)); the differential test checks, on a
/// cluster, that FoundationDB's limit falls exactly where they count it.
///
/// ```
/// use fdb_leader_election::{MAX_TRANSACTION_BYTES, TransactionSize};
///
/// // How many 200-byte shard records under 60-byte keys fit in one transaction that also
/// // reads the 60-byte member key it depends on?
/// let mut size = TransactionSize::new();
/// size.read_key(60);
/// let one = TransactionSize::new().set(60, 200).bytes();
/// assert_eq!(one, 44 + 24 + 3 * 60 + 200 + 1);
/// let fit = (MAX_TRANSACTION_BYTES - size.bytes()) / one;
/// for _ in 0..fit {
///     size.set(60, 200);
/// }
/// assert!(size.fits());
/// let mut one_more = size;
/// assert!(!one_more.set(60, 200).fits());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TransactionSize {
    bytes: usize,
}

impl TransactionSize {
    /// An empty transaction: 0 bytes.
    pub const fn new() -> Self {
        TransactionSize { bytes: 0 }
    }

    fn add(&mut self, bytes: usize) -> &mut Self {
        self.bytes = self.bytes.saturating_add(bytes);
        self
    }

    /// A set of a `key`-byte key to a `value`-byte value: the mutation and its write conflict
    /// range.
    pub fn set(&mut self, key: usize, value: usize) -> &mut Self {
        self.add(set_bytes(key, value))
    }

    /// A clear of a `key`-byte key: the clear-range mutation and its write conflict range.
    pub fn clear(&mut self, key: usize) -> &mut Self {
        self.add(clear_bytes(key))
    }

    /// A serializable read of a `key`-byte key (a `get`, a watch, or
    /// `add_read_conflict_key`): its read conflict range. Snapshot reads cost nothing.
    pub fn read_key(&mut self, key: usize) -> &mut Self {
        self.add(range_bytes(key, key.saturating_add(1)))
    }

    /// A serializable range read from a `begin`-byte key to an `end`-byte key: its read
    /// conflict range.
    pub fn read_range(&mut self, begin: usize, end: usize) -> &mut Self {
        self.add(range_bytes(begin, end))
    }

    /// The bytes counted so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a transaction of this size commits ([`MAX_TRANSACTION_BYTES`] or less).
    pub fn fits(&self) -> bool {
        self.bytes <= MAX_TRANSACTION_BYTES
    }
}

/// A set: the mutation (`k`, `v`) and the write conflict range `[k, k\x00)`.
fn set_bytes(key: usize, value: usize) -> usize {
    MUTATION_OVERHEAD
        .saturating_add(key)
        .saturating_add(value)
        .saturating_add(range_bytes(key, key.saturating_add(1)))
}

/// A clear: the mutation `[k, k\x00)` and the same write conflict range.
fn clear_bytes(key: usize) -> usize {
    let range = key.saturating_mul(2).saturating_add(1);
    MUTATION_OVERHEAD
        .saturating_add(range)
        .saturating_add(RANGE_OVERHEAD)
        .saturating_add(range)
}

/// A conflict range of keys of these lengths.
fn range_bytes(begin: usize, end: usize) -> usize {
    RANGE_OVERHEAD.saturating_add(begin).saturating_add(end)
}

/// What a set adds to FoundationDB's running estimate (`ReadYourWritesTransaction::set`): the
/// same as it adds to the size.
pub(crate) fn set_estimate(key: usize, value: usize) -> usize {
    set_bytes(key, value)
}

/// What a clear of one key adds to FoundationDB's running estimate
/// (`ReadYourWritesTransaction::clear`): its range twice, and a range's overhead twice.
pub(crate) fn clear_estimate(key: usize) -> usize {
    let range = key.saturating_mul(2).saturating_add(1);
    range
        .saturating_mul(2)
        .saturating_add(RANGE_OVERHEAD.saturating_mul(2))
}

/// What a serializable read of a key (a `get`, a watch, a conflict key) adds to the running
/// estimate: its conflict range, every time (the estimate does not merge).
pub(crate) fn read_key_estimate(key: usize) -> usize {
    range_bytes(key, key.saturating_add(1))
}

/// What each gap of a serializable range read (each part not written by the transaction)
/// adds to the running estimate: the whole range's keys, and a range's overhead.
pub(crate) fn read_range_estimate(begin: usize, end: usize) -> usize {
    range_bytes(begin, end)
}

/// A conflict range's key as FoundationDB's client sends it: a key longer than
/// [`READ_KEY_LIMIT`] cannot exist, so it is cut to one
/// byte more than that (`Transaction::addReadConflictRange`), which keeps the order.
pub(crate) fn clip(key: &[u8]) -> &[u8] {
    if key.len() > READ_KEY_LIMIT {
        key.get(..=READ_KEY_LIMIT).unwrap_or(key)
    } else {
        key
    }
}

/// Merges ranges `[begin, end)` that overlap or touch, after sorting them: FoundationDB's
/// coalesced conflict maps.
pub(crate) fn coalesce<'a>(mut ranges: Vec<(&'a [u8], &'a [u8])>) -> Vec<(&'a [u8], &'a [u8])> {
    ranges.retain(|(b, e)| b < e);
    ranges.sort_unstable();
    let mut merged: Vec<(&'a [u8], &'a [u8])> = Vec::with_capacity(ranges.len());
    for (b, e) in ranges {
        match merged.last_mut() {
            Some(last) if b <= last.1 => {
                if e > last.1 {
                    last.1 = e;
                }
            }
            _ => merged.push((b, e)),
        }
    }
    merged
}

/// The size of conflict ranges as sent at commit: each range clipped ([`clip`]), an empty one
/// dropped.
pub(crate) fn ranges_bytes<'a>(ranges: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> usize {
    ranges
        .into_iter()
        .map(|(b, e)| (clip(b), clip(e)))
        .filter(|(b, e)| b < e)
        .map(|(b, e)| range_bytes(b.len(), e.len()))
        .fold(0, usize::saturating_add)
}

/// Whether `next` is the key right after `key` (`key\x00`).
pub(crate) fn is_next(key: &[u8], next: &[u8]) -> bool {
    next.len() == key.len().saturating_add(1) && next.starts_with(key) && next.last() == Some(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_operation_costs_are_foundationdbs() {
        // Measured on FoundationDB 7.3.79 (tests/fdb_integration.rs, differential::sizes).
        assert_eq!(TransactionSize::new().set(100, 50).bytes(), 419);
        assert_eq!(TransactionSize::new().clear(100).bytes(), 470);
        assert_eq!(TransactionSize::new().read_key(100).bytes(), 225);
        assert_eq!(TransactionSize::new().read_range(100, 100).bytes(), 224);
        assert!(TransactionSize::new().add(MAX_TRANSACTION_BYTES).fits());
        assert!(!TransactionSize::new().add(MAX_TRANSACTION_BYTES + 1).fits());
    }

    #[test]
    fn coalescing_merges_overlapping_and_touching_ranges() {
        let r: Vec<(&[u8], &[u8])> = vec![(b"c", b"d"), (b"a", b"b"), (b"b", b"c"), (b"x", b"x")];
        assert_eq!(coalesce(r), vec![(&b"a"[..], &b"d"[..])]);
        let r: Vec<(&[u8], &[u8])> = vec![(b"a", b"c"), (b"b", b"b\x00"), (b"d", b"e")];
        assert_eq!(
            coalesce(r),
            vec![(&b"a"[..], &b"c"[..]), (&b"d"[..], &b"e"[..])]
        );
        assert!(is_next(b"a", b"a\x00"));
        assert!(!is_next(b"a", b"a\x01"));
        assert!(!is_next(b"a", b"b\x00"));
    }
}
