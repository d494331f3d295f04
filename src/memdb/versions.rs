//! The committed, multi-versioned state: values by key and version, the log of recent commits
//! used for conflict detection, and the armed watches.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use super::watch::{MemWatch, WatchRegistry};
use crate::clock::LocalInstant;
use crate::store::buffer::MAX_TRANSACTION_AGE;
use crate::store::buffer::conflicts::{ReadConflicts, Writes};
use crate::store::errors;
use crate::store::txn::{KeyValue, TxnError};
use crate::store::watch::PendingWatch;

/// One version of one key's value (`None`: cleared).
#[derive(Debug)]
struct Entry {
    version: u64,
    value: Option<Vec<u8>>,
}

/// One write commit, kept while a live transaction may still conflict with it.
#[derive(Debug)]
struct CommitRecord {
    version: u64,
    /// When the commit happened (the database clock).
    at: LocalInstant,
    /// The keys it wrote, sorted.
    keys: Vec<Vec<u8>>,
}

/// The committed state.
#[derive(Debug, Default)]
pub(super) struct Versions {
    /// The latest committed version (0: nothing committed yet).
    version: u64,
    /// Each key's versions, oldest first. A key whose only retained version is a clear is
    /// removed.
    data: BTreeMap<Vec<u8>, Vec<Entry>>,
    /// Write commits newer than the oldest version a live transaction may read at.
    log: VecDeque<CommitRecord>,
    /// Armed watches.
    watches: WatchRegistry,
    /// Commits whose reply was lost and that have not landed yet
    /// ([`CommitFault::UnknownAppliedLater`](super::CommitFault::UnknownAppliedLater)).
    deferred: Vec<Deferred>,
}

/// A commit in flight: what it writes, and what it read.
#[derive(Debug)]
pub(super) struct Deferred {
    pub(super) read_version: u64,
    pub(super) taken_at: LocalInstant,
    pub(super) writes: Writes,
    pub(super) conflicts: ReadConflicts,
}

impl Versions {
    /// The latest committed version: the read version a transaction starting now gets.
    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// Keeps a commit in flight, to land later ([`land_deferred`](Self::land_deferred)).
    pub(super) fn defer(&mut self, commit: Deferred) {
        self.deferred.push(commit);
    }

    /// Lands the commits in flight, in order: each applies unless it conflicts or is too old
    /// (as its commit would have). Returns how many watches fired.
    pub(super) fn land_deferred(&mut self, now: LocalInstant) -> u64 {
        let mut fired: u64 = 0;
        for d in std::mem::take(&mut self.deferred) {
            let too_old = now.saturating_duration_since(d.taken_at) >= MAX_TRANSACTION_AGE;
            if too_old || self.conflicts(d.read_version, &d.conflicts) {
                continue;
            }
            // A commit that cannot get a version is dropped, like any failed commit.
            if let Ok(n) = self.apply(&d.writes, now) {
                fired = fired.saturating_add(n);
            }
        }
        fired
    }

    /// `key`'s value at `version`.
    pub(super) fn get_at(&self, key: &[u8], version: u64) -> Option<&[u8]> {
        let history = self.data.get(key)?;
        value_at(history, version)
    }

    /// The pairs in `[begin, end)` at `version`, in key order (`begin < end` required).
    pub(super) fn range_at(&self, begin: &[u8], end: &[u8], version: u64) -> Vec<KeyValue> {
        if begin >= end {
            return Vec::new();
        }
        self.data
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .filter_map(|(k, h)| value_at(h, version).map(|v| (k.clone(), v.to_vec())))
            .collect()
    }

    /// Whether a write committed after `read_version` touched `conflicts`.
    pub(super) fn conflicts(&self, read_version: u64, conflicts: &ReadConflicts) -> bool {
        let first_newer = self.log.partition_point(|r| r.version <= read_version);
        self.log
            .range(first_newer..)
            .any(|r| conflicts.intersects(&r.keys))
    }

    /// Applies `writes` at a new version committed at `now`, fires the watches on the keys
    /// whose value changed (returning how many fired) and forgets what no live transaction
    /// can need any more.
    pub(super) fn apply(&mut self, writes: &Writes, now: LocalInstant) -> Result<u64, TxnError> {
        let version = self
            .version
            .checked_add(1)
            .ok_or_else(errors::versions_exhausted)?;
        self.version = version;
        let mut fired: u64 = 0;
        for (key, value) in writes {
            // One lookup per key: compare with the latest value while appending the new one.
            let changed = match self.data.get_mut(key.as_slice()) {
                Some(history) => {
                    let changed =
                        history.last().and_then(|e| e.value.as_deref()) != value.as_deref();
                    history.push(Entry {
                        version,
                        value: value.clone(),
                    });
                    changed
                }
                // Clearing an absent key leaves nothing to remember.
                None if value.is_none() => false,
                None => {
                    self.data.insert(
                        key.clone(),
                        vec![Entry {
                            version,
                            value: value.clone(),
                        }],
                    );
                    true
                }
            };
            if changed {
                fired = fired.saturating_add(self.watches.changed(key, value.as_deref()));
            }
        }
        self.log.push_back(CommitRecord {
            version,
            at: now,
            keys: writes.keys().cloned().collect(),
        });
        self.prune(now);
        Ok(fired)
    }

    /// Forgets the versions and commit records that no live transaction can need.
    ///
    /// A transaction that took read version `v` at time `t` did so before the commit of the
    /// version after `v`; it is dead (too old) once `now - t >= MAX_TRANSACTION_AGE`. So every
    /// live transaction reads at or after the horizon: the newest version committed at or
    /// before `now - MAX_TRANSACTION_AGE`. Commit records at or before the horizon can no
    /// longer cause a conflict, and each key needs only its newest version at or before the
    /// horizon plus the newer ones.
    fn prune(&mut self, now: LocalInstant) {
        let Some(cutoff) = now.since_origin().checked_sub(MAX_TRANSACTION_AGE) else {
            return;
        };
        let cutoff = LocalInstant::from_origin(cutoff);
        let mut horizon = None;
        let mut touched: Vec<Vec<u8>> = Vec::new();
        while let Some(front) = self.log.front() {
            if front.at > cutoff {
                break;
            }
            if let Some(record) = self.log.pop_front() {
                horizon = Some(record.version);
                touched.extend(record.keys);
            }
        }
        let Some(horizon) = horizon else {
            return;
        };
        for key in touched {
            let Some(history) = self.data.get_mut(key.as_slice()) else {
                continue;
            };
            compact(history, horizon);
            if history.is_empty() {
                self.data.remove(key.as_slice());
            }
        }
    }

    /// Arms `watch` against the key's latest committed value (firing it at once if that
    /// differs from the value the watching transaction saw). Returns whether it fired.
    pub(super) fn arm_watch(&mut self, watch: PendingWatch<MemWatch>) -> bool {
        let current = self
            .data
            .get(watch.key.as_slice())
            .and_then(|h| h.last())
            .and_then(|e| e.value.as_deref());
        self.watches.arm(watch, current)
    }

    /// How many armed watches are held.
    pub(super) fn armed_watches(&self) -> usize {
        self.watches.len()
    }

    /// How many write commits are retained for conflict detection.
    pub(super) fn retained_commits(&self) -> usize {
        self.log.len()
    }

    /// How many value versions (clears included) are retained over all keys.
    pub(super) fn retained_values(&self) -> usize {
        self.data.values().map(Vec::len).sum()
    }

    /// How many keys currently have a value.
    pub(super) fn live_keys(&self) -> usize {
        self.data
            .values()
            .filter(|h| h.last().is_some_and(|e| e.value.is_some()))
            .count()
    }
}

fn value_at(history: &[Entry], version: u64) -> Option<&[u8]> {
    let visible = history.partition_point(|e| e.version <= version);
    visible
        .checked_sub(1)
        .and_then(|i| history.get(i))
        .and_then(|e| e.value.as_deref())
}

/// Keeps the newest version at or before `horizon` (dropped too if it is a clear) and every
/// newer one.
fn compact(history: &mut Vec<Entry>, horizon: u64) {
    let visible = history.partition_point(|e| e.version <= horizon);
    let Some(base) = visible.checked_sub(1) else {
        return;
    };
    let base_is_clear = history.get(base).is_some_and(|e| e.value.is_none());
    let drop_to = if base_is_clear { visible } else { base };
    history.drain(..drop_to);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::store::buffer::conflicts::key_after;
    use std::time::Duration;

    fn at(secs: u64) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_secs(secs))
    }

    fn writes(pairs: &[(&[u8], Option<&[u8]>)]) -> Writes {
        pairs
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect()
    }

    #[test]
    fn versions_are_visible_by_read_version() {
        let mut s = Versions::default();
        s.apply(&writes(&[(b"a", Some(b"1"))]), at(0)).unwrap();
        s.apply(&writes(&[(b"a", Some(b"2")), (b"b", Some(b"x"))]), at(0))
            .unwrap();
        s.apply(&writes(&[(b"a", None)]), at(0)).unwrap();
        assert_eq!(s.get_at(b"a", 0), None);
        assert_eq!(s.get_at(b"a", 1), Some(&b"1"[..]));
        assert_eq!(s.get_at(b"a", 2), Some(&b"2"[..]));
        assert_eq!(s.get_at(b"a", 3), None);
        assert_eq!(s.range_at(b"a", b"c", 2).len(), 2);
        assert_eq!(
            s.range_at(b"a", b"c", 3),
            vec![(b"b".to_vec(), b"x".to_vec())]
        );
        assert!(s.range_at(b"c", b"a", 3).is_empty());
    }

    #[test]
    fn conflicts_only_with_later_commits_inside_the_set() {
        let mut s = Versions::default();
        s.apply(&writes(&[(b"k", Some(b"1"))]), at(0)).unwrap();
        let mut rc = ReadConflicts::default();
        rc.add_key(b"k");
        assert!(!s.conflicts(1, &rc));
        assert!(s.conflicts(0, &rc));
        let mut range = ReadConflicts::default();
        range.add_range(b"a", b"k");
        assert!(!s.conflicts(0, &range));
        range.add_range(b"k", &key_after(b"k"));
        assert!(s.conflicts(0, &range));
    }

    #[test]
    fn pruning_keeps_what_live_readers_need() {
        let mut s = Versions::default();
        s.apply(&writes(&[(b"a", Some(b"1"))]), at(0)).unwrap(); // v1
        s.apply(&writes(&[(b"a", Some(b"2"))]), at(1)).unwrap(); // v2
        s.apply(&writes(&[(b"b", Some(b"x"))]), at(2)).unwrap(); // v3
        s.apply(&writes(&[(b"b", None)]), at(3)).unwrap(); // v4
        // At t=6.5 the horizon is v2 (committed at 1 <= 1.5): readers at v2.. are live.
        s.prune(LocalInstant::from_origin(Duration::from_millis(6_500)));
        assert_eq!(s.retained_commits(), 2);
        assert_eq!(s.get_at(b"a", 2), Some(&b"2"[..]));
        assert_eq!(s.get_at(b"b", 3), Some(&b"x"[..]));
        // Much later everything collapses to the latest values; the cleared key vanishes.
        s.prune(at(100));
        assert_eq!(s.retained_commits(), 0);
        assert_eq!(s.retained_values(), 1);
        assert_eq!(s.get_at(b"a", u64::MAX), Some(&b"2"[..]));
        assert_eq!(s.get_at(b"b", u64::MAX), None);
    }
}
