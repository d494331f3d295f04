//! Backend-agnostic conformance checks of the transaction semantics the election relies on.
//!
//! The same assertions run against [`MemDb`](fdb_leader_election::MemDb)
//! (tests/memdb_conformance.rs), the SQLite store (tests/sqlite_conformance.rs) and, when a
//! cluster is available, against FoundationDB (tests/fdb_integration.rs). Each check works
//! under a fresh key prefix from [`Backend::fresh_prefix`], so a real cluster can be shared and
//! need not be cleaned between checks.
//!
//! The checks from [`read_conflict_key_on_own_write_is_ignored`] on pin down where MemDb once
//! differed from FoundationDB (issue 13). A check that needs what a backend cannot do (inject
//! a fault into FoundationDB, say) says so on stdout and passes.

// Test code: failing loudly is the point. The items are `pub` for the test crates that include
// this file (`mod common;`), inside which they are necessarily crate-local.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    unreachable_pub
)]

use std::future::Future;
use std::time::Duration;

use fdb_leader_election::{ElectionTxn, KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};

/// How long a watch must stay quiet to count as "did not fire".
pub const QUIET: Duration = Duration::from_millis(200);
/// How long a watch may take to fire.
pub const FIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// FoundationDB's default limit on a database's outstanding watches.
pub const DEFAULT_MAX_WATCHES: usize = 10_000;

/// A fault a backend may inject into its next write commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The commit reports an unknown result at once and lands after the next transaction has
    /// taken its read version.
    UnknownAppliedLater,
}

/// A database under test.
pub trait Backend {
    /// Its transaction type.
    type Txn: ElectionTxn + Clone + Send + Sync + 'static;

    /// Starts a transaction.
    fn begin(&self) -> Self::Txn;

    /// Commits `txn` (every clone of it has been dropped or is no longer used).
    fn commit(&self, txn: Self::Txn) -> impl Future<Output = Result<(), TxnError>> + Send;

    /// A key prefix no other check uses (and below `\xff`).
    fn fresh_prefix(&self) -> Vec<u8>;

    /// Lets `by` pass for the transactions' age (5 s makes a read version too old): the
    /// store's clock, or real time.
    fn age(&self, by: Duration) -> impl Future<Output = ()> + Send;

    /// Sets the database's limit on outstanding watches; `false` if the backend cannot or
    /// refuses the limit.
    fn set_watch_limit(&self, limit: usize) -> bool {
        let _ = limit;
        false
    }

    /// Makes the next write commit fail with `fault`; `false` if the backend cannot.
    fn inject(&self, fault: Fault) -> bool {
        let _ = fault;
        false
    }

    /// How the store differs from FoundationDB where the difference is deliberate (the
    /// `memdb` module docs list each one): FoundationDB's own behaviour by default.
    fn deliberate(&self) -> Deliberate {
        Deliberate::FOUNDATIONDB
    }
}

/// The deliberate differences from FoundationDB a store may have (the table of deliberate
/// differences in the `memdb` and `sqlite` docs): each check below that pins one asserts the
/// store's declared behaviour, so a store that changes silently fails it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deliberate {
    /// `too-old-is-strict`: a transaction older than five seconds fails every read that
    /// reaches the database with 1007, also a read of a key it had already read (FoundationDB
    /// serves that from its cache at any age, and fails a read only once its storage servers
    /// have moved past the read version).
    pub too_old_is_strict: bool,
}

impl Deliberate {
    /// FoundationDB itself.
    pub const FOUNDATIONDB: Deliberate = Deliberate {
        too_old_is_strict: false,
    };
    /// MemDb and the SQLite store (they share one buffer implementation).
    pub const STRICT: Deliberate = Deliberate {
        too_old_is_strict: true,
    };
}

/// Says that a check was skipped on this backend, and why.
fn skipped(check: &str, why: &str) {
    println!("conformance: {check} skipped: {why}");
}

/// Calls macro `$then!` with the name of every check, in order: the one list the harnesses
/// (MemDb, SQLite, FoundationDB) and [`run_all`] take them from.
macro_rules! with_checks {
    ($then:ident) => {
        $then! {
            read_your_writes_point,
            read_your_writes_range,
            snapshot_isolation,
            writes_become_visible_together,
            serializable_read_conflicts,
            clear_conflicts_with_serializable_reader,
            snapshot_read_adds_no_conflict,
            explicit_read_conflict_key_conflicts,
            no_conflict_with_commits_before_read_version,
            reading_own_write_adds_no_conflict,
            blind_writes_never_conflict,
            read_only_commit_never_conflicts,
            range_read_conflict_detects_insert,
            range_read_ignores_writes_outside_range,
            watch_fires_on_change_not_on_identical_write,
            watch_fires_on_clear,
            range_read_order_and_bounds,
            read_conflict_key_on_own_write_is_ignored,
            read_only_commit_is_never_too_old,
            watch_fires_when_its_own_transaction_changes_the_key,
            oversized_key_reads_as_absent,
            transaction_size_counts_conflict_ranges,
            too_many_watches_fail_through_the_future,
            unknown_commit_may_land_after_the_next_transaction_starts,
            invalid_writes_fail_the_commit_and_apply_nothing,
            reads_are_too_old_after_five_seconds,
            a_watch_fails_with_the_error_of_its_transactions_commit,
            a_watch_of_a_transaction_dropped_before_committing_fails,
            oversized_conflict_and_watch_keys,
        }
    };
}
#[allow(
    unused_imports,
    reason = "not every test crate that includes this module runs the checks one by one"
)]
pub(crate) use with_checks;

/// Runs every check, in order, on one database.
pub async fn run_all<B: Backend>(b: &B) {
    macro_rules! each {
        ($($check:ident),* $(,)?) => {
            $( $check(b).await; )*
        };
    }
    with_checks!(each);
}

fn key(prefix: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(suffix);
    k
}

/// The end of the range of keys starting with `prefix` (prefixes never end in `\xff`).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    key(prefix, b"\xff")
}

async fn put<B: Backend>(b: &B, k: &[u8], v: &[u8]) {
    let t = b.begin();
    t.set(k, v);
    b.commit(t).await.unwrap();
}

async fn committed<B: Backend>(b: &B, k: &[u8]) -> Option<Vec<u8>> {
    let t = b.begin();
    let v = t.get(k, ReadMode::Snapshot).await.unwrap();
    drop(t);
    v
}

fn pairs(items: &[(&[u8], &[u8])]) -> Vec<KeyValue> {
    items
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

#[track_caller]
fn assert_conflict(result: Result<(), TxnError>) {
    let e = result.expect_err("the commit should have conflicted");
    assert_eq!(e.kind(), TxnErrorKind::Conflict, "{e}");
    assert_eq!(e.code(), Some(1020), "{e}");
    assert!(e.is_retryable());
    assert!(!e.is_maybe_committed());
}

/// Point reads see the transaction's own sets and clears, in both modes.
pub async fn read_your_writes_point<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (a, c, absent) = (key(&p, b"a"), key(&p, b"c"), key(&p, b"absent"));
    put(b, &c, b"committed").await;

    let t = b.begin();
    assert_eq!(t.get(&a, ReadMode::Serializable).await.unwrap(), None);
    t.set(&a, b"1");
    assert_eq!(
        t.get(&a, ReadMode::Serializable).await.unwrap(),
        Some(b"1".to_vec())
    );
    t.set(&a, b"2");
    assert_eq!(
        t.get(&a, ReadMode::Snapshot).await.unwrap(),
        Some(b"2".to_vec())
    );
    assert_eq!(
        t.get(&c, ReadMode::Serializable).await.unwrap(),
        Some(b"committed".to_vec())
    );
    t.clear(&c);
    assert_eq!(t.get(&c, ReadMode::Serializable).await.unwrap(), None);
    assert_eq!(t.get(&c, ReadMode::Snapshot).await.unwrap(), None);
    t.clear(&absent);
    assert_eq!(t.get(&absent, ReadMode::Serializable).await.unwrap(), None);
    b.commit(t).await.unwrap();

    assert_eq!(committed(b, &a).await, Some(b"2".to_vec()));
    assert_eq!(committed(b, &c).await, None);
}

/// Range reads merge the committed state with the transaction's own sets and clears.
pub async fn read_your_writes_range<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k1, k2, k3, k4) = (key(&p, b"1"), key(&p, b"2"), key(&p, b"3"), key(&p, b"4"));
    let t = b.begin();
    t.set(&k1, b"old1");
    t.set(&k2, b"old2");
    t.set(&k3, b"old3");
    b.commit(t).await.unwrap();

    let end = prefix_end(&p);
    for mode in [ReadMode::Serializable, ReadMode::Snapshot] {
        let t = b.begin();
        t.clear(&k2);
        t.set(&k3, b"new3");
        t.set(&k4, b"new4");
        let got = t.get_range(&p, &end, mode).await.unwrap();
        assert_eq!(
            got,
            pairs(&[(&k1, b"old1"), (&k3, b"new3"), (&k4, b"new4")]),
            "{mode:?}"
        );
        t.clear(&k4);
        t.set(&k2, b"back");
        let got = t.get_range(&p, &end, mode).await.unwrap();
        assert_eq!(
            got,
            pairs(&[(&k1, b"old1"), (&k2, b"back"), (&k3, b"new3")]),
            "{mode:?}"
        );
        drop(t);
    }
}

/// A transaction reads at one version: commits after its read version are invisible to it.
pub async fn snapshot_isolation<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, other, inserted) = (key(&p, b"k"), key(&p, b"other"), key(&p, b"m"));
    put(b, &k, b"before").await;

    let reader = b.begin();
    assert_eq!(
        reader.get(&k, ReadMode::Snapshot).await.unwrap(),
        Some(b"before".to_vec())
    );

    let writer = b.begin();
    writer.set(&k, b"after");
    writer.set(&inserted, b"new");
    writer.set(&other, b"new");
    b.commit(writer).await.unwrap();

    for mode in [ReadMode::Snapshot, ReadMode::Serializable] {
        assert_eq!(
            reader.get(&k, mode).await.unwrap(),
            Some(b"before".to_vec())
        );
        assert_eq!(reader.get(&other, mode).await.unwrap(), None);
        assert_eq!(
            reader.get_range(&p, &prefix_end(&p), mode).await.unwrap(),
            pairs(&[(&k, b"before")])
        );
    }
    drop(reader);

    let fresh = b.begin();
    assert_eq!(
        fresh.get(&k, ReadMode::Snapshot).await.unwrap(),
        Some(b"after".to_vec())
    );
}

/// All writes of a commit appear together.
pub async fn writes_become_visible_together<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k1, k2) = (key(&p, b"1"), key(&p, b"2"));
    put(b, &k2, b"doomed").await;
    let t = b.begin();
    t.set(&k1, b"a");
    t.clear(&k2);
    assert_eq!(committed(b, &k1).await, None);
    assert_eq!(committed(b, &k2).await, Some(b"doomed".to_vec()));
    b.commit(t).await.unwrap();
    let check = b.begin();
    assert_eq!(
        check
            .get_range(&p, &prefix_end(&p), ReadMode::Snapshot)
            .await
            .unwrap(),
        pairs(&[(&k1, b"a")])
    );
}

/// A serializable read of a key changed before the commit aborts the later committer with a
/// retryable conflict, and applies none of its writes.
pub async fn serializable_read_conflicts<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, out) = (key(&p, b"k"), key(&p, b"out"));
    put(b, &k, b"0").await;

    let t1 = b.begin();
    let t2 = b.begin();
    assert_eq!(
        t1.get(&k, ReadMode::Serializable).await.unwrap(),
        Some(b"0".to_vec())
    );
    assert_eq!(
        t2.get(&k, ReadMode::Serializable).await.unwrap(),
        Some(b"0".to_vec())
    );
    t2.set(&k, b"t2");
    b.commit(t2).await.unwrap();
    t1.set(&out, b"t1");
    assert_conflict(b.commit(t1).await);
    assert_eq!(committed(b, &out).await, None);
    assert_eq!(committed(b, &k).await, Some(b"t2".to_vec()));
}

/// A clear counts as a write for the conflict check.
pub async fn clear_conflicts_with_serializable_reader<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, out) = (key(&p, b"k"), key(&p, b"out"));
    put(b, &k, b"0").await;
    let t1 = b.begin();
    t1.get(&k, ReadMode::Serializable).await.unwrap();
    let t2 = b.begin();
    t2.clear(&k);
    b.commit(t2).await.unwrap();
    t1.set(&out, b"x");
    assert_conflict(b.commit(t1).await);
}

/// A snapshot read adds no conflict.
pub async fn snapshot_read_adds_no_conflict<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, out) = (key(&p, b"k"), key(&p, b"out"));
    put(b, &k, b"0").await;
    let t1 = b.begin();
    t1.get(&k, ReadMode::Snapshot).await.unwrap();
    t1.get_range(&p, &prefix_end(&p), ReadMode::Snapshot)
        .await
        .unwrap();
    put(b, &k, b"1").await;
    put(b, &key(&p, b"j"), b"inserted").await;
    t1.set(&out, b"t1");
    b.commit(t1).await.unwrap();
    assert_eq!(committed(b, &out).await, Some(b"t1".to_vec()));
}

/// `add_read_conflict_key` conflicts like a serializable read.
pub async fn explicit_read_conflict_key_conflicts<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, out, unrelated) = (key(&p, b"k"), key(&p, b"out"), key(&p, b"u"));
    let t1 = b.begin();
    // Take a read version first: a commit is checked against changes after it.
    t1.get(&unrelated, ReadMode::Snapshot).await.unwrap();
    t1.add_read_conflict_key(&k).unwrap();
    put(b, &k, b"changed").await;
    t1.set(&out, b"t1");
    assert_conflict(b.commit(t1).await);
    assert_eq!(committed(b, &out).await, None);
}

/// Changes committed before the read version do not conflict.
pub async fn no_conflict_with_commits_before_read_version<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let k = key(&p, b"k");
    put(b, &k, b"0").await;
    let t1 = b.begin();
    put(b, &k, b"1").await; // before t1's first read, so before its read version
    assert_eq!(
        t1.get(&k, ReadMode::Serializable).await.unwrap(),
        Some(b"1".to_vec())
    );
    t1.add_read_conflict_key(&k).unwrap();
    t1.set(&k, b"2");
    b.commit(t1).await.unwrap();
    assert_eq!(committed(b, &k).await, Some(b"2".to_vec()));
}

/// Reading a key the transaction itself wrote first does not depend on the database, so adds no
/// conflict (FoundationDB's read-your-writes semantics).
pub async fn reading_own_write_adds_no_conflict<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, unrelated) = (key(&p, b"k"), key(&p, b"u"));
    let t1 = b.begin();
    t1.get(&unrelated, ReadMode::Snapshot).await.unwrap();
    t1.set(&k, b"mine");
    assert_eq!(
        t1.get(&k, ReadMode::Serializable).await.unwrap(),
        Some(b"mine".to_vec())
    );
    put(b, &k, b"theirs").await;
    b.commit(t1).await.unwrap();
    assert_eq!(committed(b, &k).await, Some(b"mine".to_vec()));
}

/// Transactions that only write never conflict; the last commit wins.
pub async fn blind_writes_never_conflict<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, unrelated) = (key(&p, b"k"), key(&p, b"u"));
    let t1 = b.begin();
    let t2 = b.begin();
    t1.get(&unrelated, ReadMode::Snapshot).await.unwrap();
    t2.get(&unrelated, ReadMode::Snapshot).await.unwrap();
    t1.set(&k, b"t1");
    t2.set(&k, b"t2");
    b.commit(t2).await.unwrap();
    b.commit(t1).await.unwrap();
    assert_eq!(committed(b, &k).await, Some(b"t1".to_vec()));
}

/// A transaction that writes nothing commits even if everything it read changed.
pub async fn read_only_commit_never_conflicts<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let k = key(&p, b"k");
    put(b, &k, b"0").await;
    let t1 = b.begin();
    t1.get(&k, ReadMode::Serializable).await.unwrap();
    t1.get_range(&p, &prefix_end(&p), ReadMode::Serializable)
        .await
        .unwrap();
    t1.add_read_conflict_key(&k).unwrap();
    put(b, &k, b"1").await;
    b.commit(t1).await.unwrap();
}

/// A serializable range read conflicts with a key inserted inside the range.
pub async fn range_read_conflict_detects_insert<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (begin, end) = (key(&p, b"r/"), key(&p, b"r0"));
    put(b, &key(&p, b"r/a"), b"a").await;
    let t1 = b.begin();
    assert_eq!(
        t1.get_range(&begin, &end, ReadMode::Serializable)
            .await
            .unwrap()
            .len(),
        1
    );
    put(b, &key(&p, b"r/m"), b"inserted").await;
    t1.set(&key(&p, b"out"), b"t1");
    assert_conflict(b.commit(t1).await);
}

/// A serializable range read does not conflict with writes outside `[begin, end)`, including
/// at `end` itself.
pub async fn range_read_ignores_writes_outside_range<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (begin, end) = (key(&p, b"r/b"), key(&p, b"r/d"));
    let t1 = b.begin();
    t1.get_range(&begin, &end, ReadMode::Serializable)
        .await
        .unwrap();
    put(b, &key(&p, b"r/a"), b"before").await;
    put(b, &end, b"at the end").await;
    put(b, &key(&p, b"r/e"), b"after").await;
    t1.set(&key(&p, b"out"), b"t1");
    b.commit(t1).await.unwrap();
}

/// A watch fires when its key's value changes, and not when an identical value is written.
pub async fn watch_fires_on_change_not_on_identical_write<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let k = key(&p, b"w");
    put(b, &k, b"a").await;

    let t = b.begin();
    let mut watch = t.watch(&k).unwrap();
    b.commit(t).await.unwrap();

    assert!(
        tokio::time::timeout(QUIET, &mut watch).await.is_err(),
        "the watch fired without a write"
    );
    put(b, &k, b"a").await;
    assert!(
        tokio::time::timeout(QUIET, &mut watch).await.is_err(),
        "the watch fired on an identical write"
    );
    put(b, &k, b"b").await;
    tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .expect("the watch did not fire on a change")
        .unwrap();
}

/// Clearing an existing key fires its watch.
pub async fn watch_fires_on_clear<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let k = key(&p, b"w");
    put(b, &k, b"a").await;
    let t = b.begin();
    let watch = t.watch(&k).unwrap();
    b.commit(t).await.unwrap();
    let t = b.begin();
    t.clear(&k);
    b.commit(t).await.unwrap();
    tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .expect("the watch did not fire on a clear")
        .unwrap();
}

/// Range reads return `[begin, end)` in key order.
pub async fn range_read_order_and_bounds<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let t = b.begin();
    for suffix in [
        &b"c"[..],
        b"b\x00",
        b"a",
        b"ba",
        b"b",
        b"d",
        b"c\x00",
        b"\x00",
    ] {
        t.set(&key(&p, suffix), suffix);
    }
    b.commit(t).await.unwrap();

    let t = b.begin();
    let (kb, kc) = (key(&p, b"b"), key(&p, b"c"));
    let got = t.get_range(&kb, &kc, ReadMode::Serializable).await.unwrap();
    let expected: Vec<KeyValue> = [&b"b"[..], b"b\x00", b"ba"]
        .iter()
        .map(|s| (key(&p, s), s.to_vec()))
        .collect();
    assert_eq!(got, expected);

    assert!(
        t.get_range(&kc, &kc, ReadMode::Snapshot)
            .await
            .unwrap()
            .is_empty()
    );

    let all = t
        .get_range(&p, &prefix_end(&p), ReadMode::Snapshot)
        .await
        .unwrap();
    let keys: Vec<Vec<u8>> = all.into_iter().map(|(k, _)| k).collect();
    let expected: Vec<Vec<u8>> = [
        &b"\x00"[..],
        b"a",
        b"b",
        b"b\x00",
        b"ba",
        b"c",
        b"c\x00",
        b"d",
    ]
    .iter()
    .map(|s| key(&p, s))
    .collect();
    assert_eq!(keys, expected);
}

// ---------------------------------------------------------------------------------------------
// Where MemDb once differed from FoundationDB.

/// `add_read_conflict_key` on a key the transaction already set or cleared adds nothing:
/// FoundationDB adds conflict ranges only over keys whose value does not come from the
/// transaction's own writes. Added before the write, it conflicts.
pub async fn read_conflict_key_on_own_write_is_ignored<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, cleared, unrelated) = (key(&p, b"k"), key(&p, b"c"), key(&p, b"u"));
    let t1 = b.begin();
    t1.get(&unrelated, ReadMode::Snapshot).await.unwrap();
    t1.set(&k, b"mine");
    t1.clear(&cleared);
    t1.add_read_conflict_key(&k).unwrap();
    t1.add_read_conflict_key(&cleared).unwrap();
    put(b, &k, b"theirs").await;
    put(b, &cleared, b"theirs").await;
    b.commit(t1).await.unwrap();
    assert_eq!(committed(b, &k).await, Some(b"mine".to_vec()));
    assert_eq!(committed(b, &cleared).await, None);

    // The order the election uses: the conflict key first, then the write.
    let t2 = b.begin();
    t2.get(&unrelated, ReadMode::Snapshot).await.unwrap();
    t2.add_read_conflict_key(&k).unwrap();
    t2.set(&k, b"second");
    put(b, &k, b"concurrent").await;
    assert_conflict(b.commit(t2).await);
    assert_eq!(committed(b, &k).await, Some(b"concurrent".to_vec()));
}

/// A transaction that writes nothing is never sent to the cluster, so its commit succeeds
/// however old it is; a writing one fails with `transaction_too_old` (1007).
pub async fn read_only_commit_is_never_too_old<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, out) = (key(&p, b"k"), key(&p, b"out"));
    put(b, &k, b"v").await;
    let reader = b.begin();
    reader.get(&k, ReadMode::Serializable).await.unwrap();
    reader.add_read_conflict_key(&out).unwrap();
    let writer = b.begin();
    writer.get(&k, ReadMode::Serializable).await.unwrap();
    writer.set(&out, b"late");
    b.age(Duration::from_millis(5_500)).await;
    b.commit(reader).await.unwrap();
    let e = b.commit(writer).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.code()),
        (TxnErrorKind::TooOld, Some(1007)),
        "{e}"
    );
    assert!(e.is_retryable() && !e.is_maybe_committed());
    assert_eq!(committed(b, &out).await, None);
}

/// Resolves `watch` within [`FIRE_TIMEOUT`], or panics with `what`.
async fn fired(watch: Watch, what: &str) {
    tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .unwrap_or_else(|_| panic!("{what}: the watch did not fire"))
        .unwrap_or_else(|e| panic!("{what}: the watch failed: {e}"));
}

/// A watch fires at once when its own transaction then writes the key with another value
/// (before the commit, whatever the commit's fate); an identical write does not fire it.
pub async fn watch_fires_when_its_own_transaction_changes_the_key<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, gone) = (key(&p, b"w"), key(&p, b"gone"));
    put(b, &k, b"a").await;
    put(b, &gone, b"a").await;

    let t = b.begin();
    let mut same = t.watch(&k).unwrap();
    t.set(&k, b"a");
    assert!(
        tokio::time::timeout(QUIET, &mut same).await.is_err(),
        "an identical write by the watching transaction fired the watch"
    );
    let changed = t.watch(&k).unwrap();
    t.set(&k, b"b");
    fired(changed, "a write by the watching transaction").await;
    let cleared = t.watch(&gone).unwrap();
    t.clear(&gone);
    fired(cleared, "a clear by the watching transaction").await;
    // The first watch saw "a" too: the second write changed the key for it as well.
    fired(same, "a later write by the watching transaction").await;
    drop(t);

    // A watch created after the transaction's own write sees that write, and stays quiet
    // once the transaction commits it.
    let t = b.begin();
    t.set(&k, b"c");
    let mut own = t.watch(&k).unwrap();
    b.commit(t).await.unwrap();
    assert!(
        tokio::time::timeout(QUIET, &mut own).await.is_err(),
        "a watch on the transaction's own write fired when it committed"
    );
    put(b, &k, b"d").await;
    fired(own, "a later commit").await;
}

/// Reading a key longer than 10,000 bytes returns absent (no such key can exist), in either
/// mode, and adds no conflict.
pub async fn oversized_key_reads_as_absent<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let long = key(&p, &vec![b'k'; 10_001]);
    let out = key(&p, b"out");
    let t = b.begin();
    assert_eq!(t.get(&long, ReadMode::Serializable).await.unwrap(), None);
    assert_eq!(t.get(&long, ReadMode::Snapshot).await.unwrap(), None);
    t.set(&out, b"x");
    b.commit(t).await.unwrap();
    assert_eq!(committed(b, &out).await, Some(b"x".to_vec()));
}

/// `count` keys of about 9,000 bytes below `p` and `tag`, in order.
fn big_keys(p: &[u8], tag: &str, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let mut k = key(p, format!("{tag}/{i:05}/").as_bytes());
            k.resize(9_000, b'.');
            k
        })
        .collect()
}

/// `transaction_too_large` (2101) counts the conflict ranges as well as the written bytes:
/// about `3 × key + value` per set, plus `2 × key` per key read serializably. With 9,000-byte
/// keys and 1,000-byte values, 300 sets (3 MB written, about 8.4 MB counted) commit, 400 sets
/// (4 MB written, about 11.2 MB counted) do not, and 250 sets commit alone but not with 200
/// serializable reads of other such keys.
pub async fn transaction_size_counts_conflict_ranges<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let value = vec![b'v'; 1_000];
    let assert_too_large = |r: Result<(), TxnError>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(
            (e.kind(), e.code()),
            (TxnErrorKind::Fatal, Some(2101)),
            "{what}: {e}"
        );
    };

    let t = b.begin();
    for k in big_keys(&p, "too-many", 400) {
        t.set(&k, &value);
    }
    assert_too_large(b.commit(t).await, "400 sets");

    let t = b.begin();
    for k in big_keys(&p, "fits", 300) {
        t.set(&k, &value);
    }
    b.commit(t).await.unwrap();

    let reads = big_keys(&p, "read", 200);
    for with_reads in [false, true] {
        let t = b.begin();
        if with_reads {
            for k in &reads {
                assert_eq!(t.get(k, ReadMode::Serializable).await.unwrap(), None);
            }
        }
        for k in big_keys(&p, &format!("sets-{with_reads}"), 250) {
            t.set(&k, &value);
        }
        if with_reads {
            assert_too_large(b.commit(t).await, "250 sets and 200 reads");
        } else {
            b.commit(t).await.unwrap();
        }
    }
}

/// Beyond the database's limit on outstanding watches, a watch fails through its future with
/// `too_many_watches` (1032) while its transaction commits; a slot frees once a watch
/// resolves or is dropped.
pub async fn too_many_watches_fail_through_the_future<B: Backend>(b: &B) {
    const CHECK: &str = "too_many_watches_fail_through_the_future";
    if !b.set_watch_limit(2) {
        skipped(CHECK, "the backend cannot set its watch limit");
        return;
    }
    // Let the cancellations of earlier checks' watches settle.
    tokio::time::sleep(QUIET).await;
    let p = b.fresh_prefix();
    let (k1, k2, k3) = (key(&p, b"1"), key(&p, b"2"), key(&p, b"3"));
    // Two watches in one transaction: once it has committed, both are outstanding (a commit
    // waits for its watches' reads).
    let t = b.begin();
    let w1 = t.watch(&k1).unwrap();
    let mut w2 = t.watch(&k2).unwrap();
    b.commit(t).await.unwrap();
    // A third, in a transaction that writes: the watch fails, the commit does not.
    let t = b.begin();
    let w3 = t.watch(&k3).unwrap();
    t.set(&key(&p, b"out"), b"x");
    b.commit(t).await.unwrap();
    let e = tokio::time::timeout(FIRE_TIMEOUT, w3)
        .await
        .expect("the refused watch did not resolve")
        .expect_err("a third watch was accepted beyond the limit of 2");
    assert_eq!(e.code(), Some(1032), "{e}");
    assert!(!e.is_retryable(), "{e}");
    assert_eq!(committed(b, &key(&p, b"out")).await, Some(b"x".to_vec()));
    put(b, &k1, b"changed").await;
    fired(w1, "a watch under the limit").await;
    assert!(tokio::time::timeout(QUIET, &mut w2).await.is_err());

    // w1 resolved: its slot is free again.
    let t = b.begin();
    let mut w4 = t.watch(&k3).unwrap();
    b.commit(t).await.unwrap();
    assert!(
        tokio::time::timeout(QUIET, &mut w4).await.is_err(),
        "a watch within the limit failed or fired"
    );
    drop((w2, w4));
    assert!(b.set_watch_limit(DEFAULT_MAX_WATCHES));
}

/// A commit whose result was unknown may land after the client's next transaction has taken
/// its read version: that transaction does not see it, a later one does.
pub async fn unknown_commit_may_land_after_the_next_transaction_starts<B: Backend>(b: &B) {
    const CHECK: &str = "unknown_commit_may_land_after_the_next_transaction_starts";
    if !b.inject(Fault::UnknownAppliedLater) {
        skipped(CHECK, "the backend cannot inject faults");
        return;
    }
    let p = b.fresh_prefix();
    let k = key(&p, b"k");
    let t = b.begin();
    t.set(&k, b"landed");
    let e = b.commit(t).await.unwrap_err();
    assert!(e.is_maybe_committed(), "{e}");
    let next = b.begin();
    assert_eq!(next.get(&k, ReadMode::Serializable).await.unwrap(), None);
    assert_eq!(committed(b, &k).await, Some(b"landed".to_vec()));
    // `next` read before the commit landed: writing, it conflicts.
    next.set(&k, b"next");
    assert_conflict(b.commit(next).await);
}

/// A value over 100,000 bytes (2103) or a key over 10,000 bytes (2102) fails the commit, not
/// the `set`, and the commit applies nothing, not even the transaction's valid writes. Keys
/// in the system range (`\xff...`) cannot be read or written (2004).
pub async fn invalid_writes_fail_the_commit_and_apply_nothing<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let fine = key(&p, b"fine");
    // (what, key, value, the code the commit fails with)
    let cases = [
        ("value", key(&p, b"big-value"), vec![b'v'; 100_001], 2103),
        ("key", key(&p, &vec![b'k'; 10_001]), b"v".to_vec(), 2102),
    ];
    for (what, k, v, code) in cases {
        let t = b.begin();
        t.set(&fine, b"x");
        t.set(&k, &v);
        let e = b.commit(t).await.expect_err("an invalid write committed");
        assert_eq!(
            (e.kind(), e.code()),
            (TxnErrorKind::Fatal, Some(code)),
            "oversized {what}: {e}"
        );
        assert_eq!(
            committed(b, &fine).await,
            None,
            "a valid write of a failed commit landed"
        );
    }
    // The largest legal value and key commit.
    let t = b.begin();
    t.set(&key(&p, b"max-value"), &vec![b'v'; 100_000]);
    let mut max_key = key(&p, b"max-key/");
    max_key.resize(10_000, b'k');
    t.set(&max_key, b"v");
    b.commit(t).await.unwrap();
    assert_eq!(committed(b, &max_key).await, Some(b"v".to_vec()));

    let t = b.begin();
    let e = t
        .get(b"\xff/system", ReadMode::Snapshot)
        .await
        .expect_err("a system key was read");
    assert_eq!(e.code(), Some(2004), "{e}");
    let e = t
        .get_range(&p, b"\xff\x00", ReadMode::Snapshot)
        .await
        .expect_err("a range into the system keys was read");
    assert_eq!(e.code(), Some(2004), "{e}");
    t.get_range(&p, b"\xff", ReadMode::Snapshot).await.unwrap();
}

/// Five seconds after its read version, a transaction's reads of the cluster fail with
/// `transaction_too_old` (1007, retryable), and so does its commit if it writes (nothing
/// applies). A read-only transaction still commits (it is never sent to the cluster) unless one
/// of its reads failed, and a blind write, which takes no read version before its commit, is
/// never too old. A read of the transaction's own write is served at any age, and a watch's
/// failure comes through its future. Whether a key read before is served again from
/// FoundationDB's cache is a deliberate difference ([`Deliberate::too_old_is_strict`]).
pub async fn reads_are_too_old_after_five_seconds<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (k, unread) = (key(&p, b"k"), key(&p, b"unread"));
    let (mine, blind_key) = (key(&p, b"mine"), key(&p, b"blind"));
    put(b, &k, b"v").await;
    put(b, &unread, b"u").await;
    // Three transactions age together (on FoundationDB this takes real time).
    let writer = b.begin();
    writer.get(&k, ReadMode::Serializable).await.unwrap();
    writer.set(&mine, b"own write");
    let reader = b.begin();
    reader.get(&k, ReadMode::Snapshot).await.unwrap();
    let blind = b.begin();
    blind.set(&blind_key, b"blind");
    b.age(Duration::from_millis(6_000)).await;

    let strict = b.deliberate().too_old_is_strict;
    for t in [&writer, &reader] {
        let e = t.get(&unread, ReadMode::Snapshot).await.unwrap_err();
        assert_eq!(
            (e.kind(), e.code()),
            (TxnErrorKind::TooOld, Some(1007)),
            "{e}"
        );
        assert!(e.is_retryable() && !e.is_maybe_committed(), "{e}");
        let e = t
            .get_range(&key(&p, b"r/"), &key(&p, b"r0"), ReadMode::Snapshot)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Some(1007), "{e}");
        let again = t.get(&k, ReadMode::Snapshot).await;
        if strict {
            let e = again.expect_err("a strict store served a cached read when too old");
            assert_eq!(e.code(), Some(1007), "{e}");
        } else {
            assert_eq!(
                again.unwrap().as_deref(),
                Some(&b"v"[..]),
                "a key read before"
            );
        }
    }
    // The transaction's own write is served from its writes, at any age.
    let own = writer.get(&mine, ReadMode::Serializable).await.unwrap();
    assert_eq!(own.as_deref(), Some(&b"own write"[..]));
    let watch = writer.watch(&unread).expect("a watch call does not fail");
    let e = b.commit(writer).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.code()),
        (TxnErrorKind::TooOld, Some(1007)),
        "{e}"
    );
    assert_eq!(committed(b, &mine).await, None);
    let e = tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .expect("the watch of a too-old transaction did not resolve")
        .expect_err("the watch of a too-old transaction fired");
    // A strict store fails the watch's read with 1007; FoundationDB 7.3 may serve that read
    // and cancel the watch with its transaction (1025). Either way it fails, never fires.
    assert!(matches!(e.code(), Some(1007 | 1025)), "{e}");
    // Read-only, but one of its reads failed: FoundationDB fails the commit too.
    let e = b.commit(reader).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.code()),
        (TxnErrorKind::TooOld, Some(1007)),
        "{e}"
    );
    b.commit(blind).await.unwrap();
    assert_eq!(committed(b, &blind_key).await, Some(b"blind".to_vec()));
}

/// A watch set by a transaction whose commit fails fails with the commit's error: a conflict
/// (1020) here. The key it watched never changed.
pub async fn a_watch_fails_with_the_error_of_its_transactions_commit<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let (read, watched) = (key(&p, b"read"), key(&p, b"watched"));
    let t = b.begin();
    t.get(&read, ReadMode::Serializable).await.unwrap();
    let watch = t.watch(&watched).unwrap();
    put(b, &read, b"changed").await;
    t.set(&read, b"mine");
    assert_conflict(b.commit(t).await);
    let e = tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .expect("the watch of a failed commit did not resolve")
        .expect_err("the watch of a failed commit fired");
    assert_eq!(
        (e.kind(), e.code()),
        (TxnErrorKind::Conflict, Some(1020)),
        "{e}"
    );
}

/// A watch set by a transaction that is dropped (every clone of it) without committing fails
/// with `transaction_cancelled` (1025), a fatal error: it never fires, and it is not retried.
pub async fn a_watch_of_a_transaction_dropped_before_committing_fails<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let k = key(&p, b"k");
    let t = b.begin();
    let clone = t.clone();
    let watch = t.watch(&k).unwrap();
    drop(t);
    drop(clone);
    let e = tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .expect("the watch of a dropped transaction did not resolve")
        .expect_err("the watch of a dropped transaction fired");
    assert_eq!(
        (e.kind(), e.code()),
        (TxnErrorKind::Fatal, Some(1025)),
        "{e}"
    );
}

/// `add_read_conflict_key` and `watch` on a key over 10,000 bytes, as FoundationDB: the
/// conflict key is accepted (no such key can exist, so the commit goes through), the watch
/// fails through its future with `key_too_large` (2102) and leaves the transaction alone.
pub async fn oversized_conflict_and_watch_keys<B: Backend>(b: &B) {
    let p = b.fresh_prefix();
    let long = key(&p, &vec![b'k'; 10_001]);
    let out = key(&p, b"out");
    let t = b.begin();
    t.add_read_conflict_key(&long).unwrap();
    let watch = t.watch(&long).expect("a watch call does not fail");
    t.set(&out, b"x");
    let committed_now = b.commit(t).await;
    let e = tokio::time::timeout(FIRE_TIMEOUT, watch)
        .await
        .expect("the oversized watch did not resolve")
        .expect_err("the oversized watch fired");
    assert_eq!(e.code(), Some(2102), "{e}");
    committed_now.unwrap();
    assert_eq!(committed(b, &out).await, Some(b"x".to_vec()));
}
