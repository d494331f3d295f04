//! A transaction's reads: through the store's [`Snapshot`] of its committed data, merged with
//! the transaction's own writes (read-your-writes), adding to its read-conflict set; and
//! watches, which read the key they watch.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::conflicts::{Writes, key_after};
use super::{Phase, ReadVersion, TxnBuffer};
use crate::store::errors;
use crate::store::limits::{self, READ_KEY_LIMIT};
use crate::store::size;
use crate::store::stats::{Counters, bump};
use crate::store::txn::{KeyValue, ReadMode, TxnError, Watch};
use crate::store::watch::{self, PendingWatch, WatchHandle, WatchLimit, WatchSlot};

/// What a store gives the buffer to read its committed data. The buffer asks for it only when a
/// read cannot be served from the transaction's own writes, and the first time it asks, the
/// read version is taken: as FoundationDB takes it at the first read that reaches the cluster
/// (or at an explicit read version, a watch that reads, or a writing commit), never at a read
/// served from the transaction's own writes or at an empty or inverted range.
pub(crate) trait Snapshot {
    /// The read version: `slot`'s, or one taken now into `slot`. Fails with
    /// `transaction_too_old` (1007) once the transaction is too old.
    fn read_version(&mut self, slot: &mut Option<ReadVersion>) -> Result<u64, TxnError>;

    /// `key`'s committed value at `version`.
    fn get(&mut self, version: u64, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError>;

    /// The committed pairs in `[begin, end)` (`begin < end`) at `version`, in key order.
    fn range(&mut self, version: u64, begin: &[u8], end: &[u8]) -> Result<Vec<KeyValue>, TxnError>;
}

impl<W: WatchHandle> TxnBuffer<W> {
    /// Whether a point read of `key` would reach the database (so a store may inject a fault
    /// into it): not when it fails its checks, reads a key that cannot exist, or reads the
    /// transaction's own write.
    pub(crate) fn get_reaches_database(&self, key: &[u8]) -> bool {
        self.phase == Phase::Open
            && self.deferred.is_none()
            && !limits::is_system(key)
            && key.len() <= READ_KEY_LIMIT
            && !self.writes.contains_key(key)
    }

    /// Whether a range read of `[begin, end)` would reach the database (see
    /// [`get_reaches_database`](Self::get_reaches_database)).
    pub(crate) fn range_reaches_database(&self, begin: &[u8], end: &[u8]) -> bool {
        self.phase == Phase::Open
            && self.deferred.is_none()
            && limits::check_range(begin, end).is_ok()
            && begin < end
            && !self.covered_by_writes(begin, end)
    }

    /// Whether the transaction wrote every key of `[begin, end)` (`begin < end`): a chain of
    /// adjacent keys from `begin` on.
    fn covered_by_writes(&self, begin: &[u8], end: &[u8]) -> bool {
        let mut next: Vec<u8> = begin.to_vec();
        for key in self
            .writes
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .map(|(k, _)| k)
        {
            if key.as_slice() != next.as_slice() {
                return false;
            }
            next = key_after(key);
        }
        next.as_slice() >= end
    }

    /// The length of the first key of `[begin, end)` after the chain of adjacent keys from
    /// `begin` on that the transaction set (not cleared): `begin`'s own length if it did not set
    /// `begin`. FoundationDB's estimate of a range read starts there.
    fn after_leading_sets(&self, begin: &[u8], end: &[u8]) -> usize {
        let mut next = begin.to_vec();
        for (key, value) in self
            .writes
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
        {
            if *key != next || value.is_none() {
                break;
            }
            next = key_after(key);
        }
        next.len()
    }

    /// Reads from the database through `snapshot`, taking the read version if needed; a
    /// failure is remembered for the commit ([`read_failed`](Self::read_failed)).
    fn read_database<S: Snapshot + ?Sized, T>(
        &mut self,
        snapshot: &mut S,
        read: impl FnOnce(&mut S, u64) -> Result<T, TxnError>,
    ) -> Result<T, TxnError> {
        let outcome = snapshot
            .read_version(&mut self.read_version)
            .and_then(|version| read(snapshot, version));
        outcome.map_err(|e| self.read_failed(e))
    }

    /// The read version, taken now through `snapshot` if no read has taken it yet, as
    /// FoundationDB's `get_read_version` takes it. A version already taken is returned at any
    /// age.
    pub(crate) fn read_version(&mut self, snapshot: &mut impl Snapshot) -> Result<u64, TxnError> {
        self.check_deferred()?;
        if let Some(rv) = self.read_version {
            return Ok(rv.version);
        }
        self.ensure_open()?;
        snapshot.read_version(&mut self.read_version)
    }

    /// A point read: the transaction's own write of `key` if there is one; otherwise the
    /// committed value through `snapshot`, adding `key` to the read-conflict set for a
    /// serializable read. A system key fails the read alone (2004); a key longer than any key
    /// can be reads as absent without reaching the database. Counted when served.
    pub(crate) fn point_read(
        &mut self,
        counters: &Counters,
        key: &[u8],
        mode: ReadMode,
        snapshot: &mut impl Snapshot,
    ) -> Result<Option<Vec<u8>>, TxnError> {
        self.check_deferred()?;
        self.ensure_open()?;
        limits::check_not_system(key)?;
        let value = match self.writes.get(key) {
            _ if key.len() > READ_KEY_LIMIT => None,
            Some(own) => own.clone(),
            None => {
                let value = self.read_database(snapshot, |s, version| s.get(version, key))?;
                if mode == ReadMode::Serializable {
                    self.add_conflict_key(key);
                }
                value
            }
        };
        self.stats.point_reads = self.stats.point_reads.saturating_add(1);
        bump(&counters.point_reads, 1);
        Ok(value)
    }

    /// A range read of `[begin, end)`: the committed pairs merged with the transaction's own
    /// writes in the range (read-your-writes, clears included). A bound beyond `\xff` fails the
    /// read alone (2004); an empty or inverted range, or one whose every key the transaction
    /// wrote, is served without the database. A serializable read adds the range to the
    /// read-conflict set, less the keys the transaction wrote itself. Counted when served.
    pub(crate) fn range_read(
        &mut self,
        counters: &Counters,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
        snapshot: &mut impl Snapshot,
    ) -> Result<Vec<KeyValue>, TxnError> {
        self.check_deferred()?;
        self.ensure_open()?;
        limits::check_range(begin, end)?;
        let result = if begin >= end {
            Vec::new()
        } else if self.covered_by_writes(begin, end) {
            overlay_range(Vec::new(), &self.writes, None, begin, end)
        } else {
            let committed =
                self.read_database(snapshot, |s, version| s.range(version, begin, end))?;
            let mut gaps = Vec::new();
            let result = overlay_range(committed, &self.writes, Some(&mut gaps), begin, end);
            if mode == ReadMode::Serializable {
                // FoundationDB's estimate counts the whole range once per gap, from after the
                // keys the transaction set at its very beginning.
                let from = self.after_leading_sets(begin, end);
                let estimate = size::read_range_estimate(from, end.len());
                for (b, e) in gaps {
                    self.conflicts.add_range(&b, &e);
                    self.estimate(estimate);
                }
            }
            result
        };
        let returned = u64::try_from(result.len()).unwrap_or(u64::MAX);
        self.stats.range_reads = self.stats.range_reads.saturating_add(1);
        self.stats.range_keys_read = self.stats.range_keys_read.saturating_add(returned);
        bump(&counters.range_reads, 1);
        bump(&counters.range_keys_read, returned);
        Ok(result)
    }

    /// Creates a watch on `key`, as FoundationDB does. Every error comes through the returned
    /// future, never at once, and leaves the transaction as it was: a deferred error, a commit
    /// already begun (2017), watches disabled (`enabled == false`, 1034), a system key (2004),
    /// a key over the limit (2102), a failed read, or the database's `limit` on outstanding
    /// watches (1032). Otherwise the key is read (its own write, or through `snapshot` with a
    /// read conflict) and the watch remembers the value seen; `make` builds the store's handle
    /// and the future from the key, that value and the watch's slot under the limit.
    pub(crate) fn watch(
        &mut self,
        counters: &Counters,
        limit: &WatchLimit,
        enabled: bool,
        key: &[u8],
        snapshot: &mut impl Snapshot,
        make: impl FnOnce(&[u8], Option<&[u8]>, WatchSlot) -> (W, Watch),
    ) -> Watch {
        let checked = self
            .check_deferred()
            .and_then(|()| self.ensure_open())
            .and_then(|()| {
                if enabled {
                    Ok(())
                } else {
                    Err(errors::watches_disabled())
                }
            })
            .and_then(|()| limits::check_watch(key));
        if let Err(e) = checked {
            return watch::failed(e);
        }
        let seen = match self.writes.get(key) {
            Some(own) => own.clone(),
            None => {
                // A failed read fails the watch, not the transaction.
                let read = snapshot
                    .read_version(&mut self.read_version)
                    .and_then(|version| snapshot.get(version, key));
                match read {
                    Ok(value) => {
                        self.add_conflict_key(key);
                        value
                    }
                    Err(e) => return watch::failed(e),
                }
            }
        };
        self.stats.watches_created = self.stats.watches_created.saturating_add(1);
        bump(&counters.watches_created, 1);
        let Some(slot) = limit.acquire() else {
            bump(&counters.watches_refused, 1);
            return limit.refused();
        };
        let (handle, watch) = make(key, seen.as_deref(), slot.clone());
        self.watches.push(PendingWatch {
            key: key.to_vec(),
            seen,
            handle,
        });
        slot.hold(watch)
    }
}

/// Merges a committed range read of `[begin, end)` with the transaction's own writes in that
/// range (clears included), and, if `gaps` is given, lists the parts of the range the
/// transaction did not write (its read conflict ranges, were the read serializable).
fn overlay_range(
    committed: Vec<KeyValue>,
    writes: &Writes,
    mut gaps: Option<&mut Vec<(Vec<u8>, Vec<u8>)>>,
    begin: &[u8],
    end: &[u8],
) -> Vec<KeyValue> {
    let bounds = (Bound::Included(begin), Bound::Excluded(end));
    let mut own = writes.range::<[u8], _>(bounds).peekable();
    if own.peek().is_none() {
        if let Some(gaps) = gaps {
            gaps.push((begin.to_vec(), end.to_vec()));
        }
        return committed;
    }
    let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = committed.into_iter().collect();
    let mut gap_start = begin.to_vec();
    for (key, value) in own {
        match value {
            Some(v) => merged.insert(key.clone(), v.clone()),
            None => merged.remove(key),
        };
        if let Some(gaps) = gaps.as_deref_mut() {
            if gap_start.as_slice() < key.as_slice() {
                gaps.push((gap_start.clone(), key.clone()));
            }
        }
        gap_start = key_after(key);
    }
    if let Some(gaps) = gaps {
        if gap_start.as_slice() < end {
            gaps.push((gap_start, end.to_vec()));
        }
    }
    merged.into_iter().collect()
}
