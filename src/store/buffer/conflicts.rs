//! The sets a commit checks and applies: a transaction's writes and its read-conflict set, and
//! their size as FoundationDB's client counts it at commit.

use std::collections::{BTreeMap, BTreeSet};

use crate::store::size;

/// A transaction's writes: sets (`Some`) and clears (`None`), by key.
pub(crate) type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A transaction's read-conflict set.
#[derive(Debug, Default)]
pub(crate) struct ReadConflicts {
    points: BTreeSet<Vec<u8>>,
    /// Half-open ranges `[begin, end)`, each non-empty.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

impl ReadConflicts {
    pub(crate) fn add_key(&mut self, key: &[u8]) {
        if !self.points.contains(key) {
            self.points.insert(key.to_vec());
        }
    }

    /// Adds `[begin, end)` (ignored when empty).
    pub(crate) fn add_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin < end {
            self.ranges.push((begin.to_vec(), end.to_vec()));
        }
    }

    /// Whether any of `keys` (sorted) falls inside the set.
    pub(crate) fn intersects(&self, keys: &[Vec<u8>]) -> bool {
        if keys.iter().any(|k| self.points.contains(k)) {
            return true;
        }
        self.ranges.iter().any(|(begin, end)| {
            let first = keys.partition_point(|k| k < begin);
            keys.get(first).is_some_and(|k| k < end)
        })
    }

    #[cfg(any(test, feature = "sqlite"))]
    pub(crate) fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// The single keys in the set, in key order.
    #[cfg(feature = "sqlite")]
    pub(crate) fn points(&self) -> impl Iterator<Item = &[u8]> {
        self.points.iter().map(Vec::as_slice)
    }

    /// The ranges `[begin, end)` in the set, in the order they were added.
    #[cfg(feature = "sqlite")]
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.ranges
            .iter()
            .map(|(b, e)| (b.as_slice(), e.as_slice()))
    }
}

/// The key immediately after `key` in key order.
pub(crate) fn key_after(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len().saturating_add(1));
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// A transaction's size as FoundationDB's client counts it at commit (`Transaction::getSize`,
/// see [`size`](crate::store::size)): its mutations (each set; each run of adjacent cleared
/// keys as one clear range), its write conflict ranges (each run of adjacent written keys as
/// one range) and its read conflict ranges (merged where they overlap or touch, keys clipped
/// as FoundationDB clips them).
pub(crate) fn commit_size(writes: &Writes, conflicts: &ReadConflicts) -> usize {
    /// A run of adjacent keys `first`, `first\x00`, ... `last`: the range `[first, last\x00)`.
    fn run_bytes(first: &[u8], last: &[u8]) -> usize {
        first.len().saturating_add(last.len()).saturating_add(1)
    }
    let mut total: usize = 0;
    let mut clears: Option<(&[u8], &[u8])> = None;
    let mut written: Option<(&[u8], &[u8])> = None;
    fn close(run: Option<(&[u8], &[u8])>, overhead: usize, total: &mut usize) {
        if let Some((first, last)) = run {
            *total = total
                .saturating_add(overhead)
                .saturating_add(run_bytes(first, last));
        }
    }
    for (key, value) in writes {
        let key = key.as_slice();
        written = match written {
            Some((first, last)) if size::is_next(last, key) => Some((first, key)),
            run => {
                close(run, size::RANGE_OVERHEAD, &mut total);
                Some((key, key))
            }
        };
        match value {
            Some(v) => {
                close(clears.take(), size::MUTATION_OVERHEAD, &mut total);
                total = total
                    .saturating_add(size::MUTATION_OVERHEAD)
                    .saturating_add(key.len())
                    .saturating_add(v.len());
            }
            None => {
                clears = match clears {
                    Some((first, last)) if size::is_next(last, key) => Some((first, key)),
                    run => {
                        close(run, size::MUTATION_OVERHEAD, &mut total);
                        Some((key, key))
                    }
                };
            }
        }
    }
    close(clears, size::MUTATION_OVERHEAD, &mut total);
    close(written, size::RANGE_OVERHEAD, &mut total);
    let points: Vec<Vec<u8>> = conflicts.points.iter().map(|k| key_after(k)).collect();
    let reads = conflicts
        .points
        .iter()
        .zip(&points)
        .map(|(k, end)| (k.as_slice(), end.as_slice()))
        .chain(
            conflicts
                .ranges
                .iter()
                .map(|(b, e)| (b.as_slice(), e.as_slice())),
        )
        .collect();
    total.saturating_add(size::ranges_bytes(size::coalesce(reads)))
}
