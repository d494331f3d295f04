//! Unit tests of MemDb internals and a model-based property test of its isolation.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;
use crate::store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};

fn manual_db() -> (MemDb, ManualClock) {
    let clock = ManualClock::new();
    (MemDb::with_clock(Arc::new(clock.clone())), clock)
}

/// A database on a manual clock and a transaction of it.
fn db_and_txn() -> (MemDb, MemTransaction) {
    let (db, _) = manual_db();
    let t = db.create_transaction();
    (db, t)
}

async fn put(db: &MemDb, key: &[u8], value: &[u8]) {
    let t = db.create_transaction();
    t.set(key, value);
    t.commit().await.unwrap();
}

#[tokio::test]
async fn reading_own_writes_adds_no_conflict() {
    let (db, t) = db_and_txn();
    t.set(b"a", b"1");
    t.clear(b"b");
    assert_eq!(
        t.get(b"a", ReadMode::Serializable).await.unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(t.get(b"b", ReadMode::Serializable).await.unwrap(), None);
    assert!(!t.has_read_conflicts());
    t.get(b"c", ReadMode::Snapshot).await.unwrap();
    t.get_range(b"a", b"z", ReadMode::Snapshot).await.unwrap();
    assert!(!t.has_read_conflicts());
    t.get(b"c", ReadMode::Serializable).await.unwrap();
    assert!(t.has_read_conflicts());

    // A concurrent write to a key this transaction wrote before reading it does not abort it.
    put(&db, b"a", b"2").await;
    t.commit().await.unwrap();
}

#[tokio::test]
async fn range_conflicts_leave_out_own_writes() {
    let (db, t) = db_and_txn();
    t.set(b"k2", b"mine");
    let got = t
        .get_range(b"k1", b"k3", ReadMode::Serializable)
        .await
        .unwrap();
    assert_eq!(got, vec![(b"k2".to_vec(), b"mine".to_vec())]);
    put(&db, b"k2", b"theirs").await;
    let t2 = t.clone();
    t.commit().await.unwrap();
    assert!(t2.read_version().is_some());

    let t = db.create_transaction();
    t.set(b"k2", b"mine");
    t.get_range(b"k1", b"k3", ReadMode::Serializable)
        .await
        .unwrap();
    put(&db, b"k2\x00", b"inside the range").await;
    let e = t.commit().await.unwrap_err();
    assert_eq!((e.kind(), e.code()), (TxnErrorKind::Conflict, Some(1020)));
}

#[tokio::test]
async fn invalid_keys_and_values_fail() {
    let (db, t) = db_and_txn();
    let long_key = vec![b'k'; 10_009];
    // No key that long can exist (FoundationDB reads keys of up to 10,008 bytes, a tenant
    // prefix included): its read returns absent, with no conflict.
    assert_eq!(
        t.get(&long_key, ReadMode::Serializable).await.unwrap(),
        None
    );
    assert!(!t.has_read_conflicts());
    let e = t.get(b"\xff/system", ReadMode::Snapshot).await.unwrap_err();
    assert_eq!(e.code(), Some(2004));
    let e = t
        .get_range(b"a", b"\xff\x00", ReadMode::Snapshot)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(2004));
    assert!(t.get_range(b"a", b"\xff", ReadMode::Snapshot).await.is_ok());
    // As FoundationDB: a conflict key that cannot exist is dropped; a watch's errors come
    // through its future.
    t.add_read_conflict_key(&long_key).unwrap();
    assert!(!t.has_read_conflicts());
    let e = t.watch(b"\xff").unwrap().await.unwrap_err();
    assert_eq!(e.code(), Some(2004));

    // Bad writes are reported by the commit, which then applies nothing.
    t.set(b"fine", b"v");
    t.set(b"big", &vec![0; 100_001]);
    let e = t.commit().await.unwrap_err();
    assert_eq!((e.kind(), e.code()), (TxnErrorKind::Fatal, Some(2103)));
    assert_eq!(db.committed_version(), 0);

    let t = db.create_transaction();
    let value = vec![0; 100_000];
    for i in 0..101_u32 {
        t.set(&i.to_be_bytes(), &value);
    }
    assert_eq!(t.commit().await.unwrap_err().code(), Some(2101));
}

#[tokio::test]
async fn a_transaction_cannot_be_used_after_its_commit() {
    let (db, t) = db_and_txn();
    let clone = t.clone();
    t.set(b"a", b"1");
    t.commit().await.unwrap();
    let e = clone.get(b"a", ReadMode::Snapshot).await.unwrap_err();
    assert_eq!((e.kind(), e.code()), (TxnErrorKind::Fatal, Some(2017)));
    // Ignored, as FoundationDB ignores a conflict range added during a commit.
    clone.add_read_conflict_key(b"a").unwrap();
    clone.set(b"b", b"discarded");
    assert_eq!(clone.clone().commit().await.unwrap_err().code(), Some(2017));
    let check = db.create_transaction();
    assert_eq!(check.get(b"b", ReadMode::Snapshot).await.unwrap(), None);
    assert_eq!(db.stats().commits_succeeded, 1);
    assert_eq!(db.stats().commits_attempted, 2);
}

/// A database whose key `w` holds `1`, and a transaction of it watching `w`.
async fn watching_w() -> (MemDb, MemTransaction, Watch) {
    let (db, _) = manual_db();
    put(&db, b"w", b"1").await;
    let t = db.create_transaction();
    let watch = t.watch(b"w").unwrap();
    (db, t, watch)
}

/// What `watch` ends with, which it must within a second.
async fn within_a_second(watch: Watch) -> Result<(), TxnError> {
    tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .unwrap()
}

#[tokio::test]
async fn read_only_watch_fires_at_once_if_the_value_moved_since_the_read_version() {
    let (db, t, watch) = watching_w().await;
    put(&db, b"w", b"2").await;
    t.commit().await.unwrap();
    within_a_second(watch).await.unwrap();
    assert_eq!(db.stats().watches_fired, 1);
}

#[tokio::test]
async fn watch_on_a_key_the_transaction_changes_fires_at_its_commit() {
    let (_db, t, watch) = watching_w().await; // the database lives on to the end
    t.set(b"w", b"2");
    t.commit().await.unwrap();
    within_a_second(watch).await.unwrap();
}

#[tokio::test]
async fn watching_adds_a_read_conflict() {
    let (db, t) = db_and_txn();
    let watch = t.watch(b"w").unwrap();
    t.set(b"other", b"x");
    put(&db, b"w", b"changed").await;
    let e = t.commit().await.unwrap_err();
    assert_eq!(e.kind(), TxnErrorKind::Conflict);
    let e = within_a_second(watch).await.unwrap_err();
    assert_eq!((e.kind(), e.code()), (TxnErrorKind::Conflict, Some(1020)));
}

#[tokio::test]
async fn armed_watches_fail_when_the_database_is_dropped() {
    let (db, t) = db_and_txn();
    let watch = t.watch(b"w").unwrap();
    t.commit().await.unwrap();
    drop(db);
    let e = watch.await.unwrap_err();
    assert_eq!(e.kind(), TxnErrorKind::Fatal);
    assert_eq!(e.code(), None);
}

#[tokio::test]
async fn cancelled_watches_are_swept() {
    let (db, _) = manual_db();
    for i in 0..1_000_u32 {
        let t = db.create_transaction();
        drop(t.watch(&i.to_be_bytes()).unwrap());
        t.commit().await.unwrap();
    }
    assert!(db.armed_watches() <= 64, "{}", db.armed_watches());
}

#[tokio::test]
async fn injector_sees_sequence_numbers_and_keys() {
    /// Transaction id, commit sequence number, read-only, written keys.
    type CommitSeen = (u64, u64, bool, Vec<Vec<u8>>);

    #[derive(Debug, Default)]
    struct Recorder {
        reads: std::sync::Mutex<Vec<(u64, u64, Vec<u8>)>>,
        commits: std::sync::Mutex<Vec<CommitSeen>>,
    }
    impl FaultInjector for Recorder {
        fn on_read(&self, ctx: &ReadContext<'_>) -> ReadDecision {
            let key = match ctx.target {
                ReadTarget::Key(k) => k.to_vec(),
                ReadTarget::Range { begin, .. } => begin.to_vec(),
            };
            self.reads
                .lock()
                .unwrap()
                .push((ctx.txn_id, ctx.read_seq, key));
            ReadDecision::proceed()
        }
        fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
            assert!(ctx.written_keys.any_with_prefix(b"") != ctx.read_only);
            self.commits.lock().unwrap().push((
                ctx.txn_id,
                ctx.commit_seq,
                ctx.read_only,
                ctx.written_keys.iter().map(<[u8]>::to_vec).collect(),
            ));
            CommitDecision::proceed()
        }
    }
    let (db, _) = manual_db();
    let rec = Arc::new(Recorder::default());
    db.set_fault_injector(rec.clone());
    let t1 = db.create_transaction();
    let t2 = db.create_transaction();
    t1.get(b"x", ReadMode::Snapshot).await.unwrap();
    t2.get_range(b"a", b"b", ReadMode::Snapshot).await.unwrap();
    t2.set(b"k2", b"v");
    t2.set(b"k1", b"v");
    t1.commit().await.unwrap();
    t2.commit().await.unwrap();
    assert_eq!(
        *rec.reads.lock().unwrap(),
        vec![(1, 1, b"x".to_vec()), (2, 2, b"a".to_vec())]
    );
    assert_eq!(
        *rec.commits.lock().unwrap(),
        vec![
            (1, 1, true, vec![]),
            (2, 2, false, vec![b"k1".to_vec(), b"k2".to_vec()])
        ]
    );
    db.clear_fault_injector();
    db.create_transaction().commit().await.unwrap();
    assert_eq!(rec.commits.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn unknown_applied_that_conflicts_does_not_apply() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Serializable).await.unwrap();
    t.set(b"k", b"mine");
    faults.clear_commit_faults();
    put(&db, b"k", b"theirs").await;
    faults.push_commit_fault(CommitFault::UnknownApplied);
    let e = t.commit().await.unwrap_err();
    assert_eq!(e.code(), Some(1021));
    let check = db.create_transaction();
    assert_eq!(
        check.get(b"k", ReadMode::Snapshot).await.unwrap(),
        Some(b"theirs".to_vec())
    );
    // The lost reply is counted as an unknown result, not as a conflict.
    assert_eq!(db.stats().conflicts, 0);
    assert_eq!(db.stats().unknown_results, 1);
}

#[tokio::test(start_paused = true)]
async fn run_backs_off_exponentially_on_unavailability() {
    let db = MemDb::with_clock(Arc::new(crate::clock::TokioClock::new()));
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.set_unavailable(true);
    let start = tokio::time::Instant::now();
    let e = db
        .run_with(
            RunOptions::default().with_max_attempts(9),
            |txn, _| async move {
                txn.get(b"k", ReadMode::Snapshot).await?;
                Ok::<_, TxnError>(())
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TxnErrorKind::Unavailable);
    // Eight back-offs: 10 + 20 + 40 + ... + 640 ms, then 1 s (capped).
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(10 + 20 + 40 + 80 + 160 + 320 + 640 + 1000)
    );
}

#[tokio::test]
async fn run_returns_non_retryable_errors_at_once() {
    let (db, _) = manual_db();
    let mut calls = 0;
    let e = db
        .run(|_txn, _| {
            calls += 1;
            async { Err::<(), _>(crate::ElectionError::NotInitialized) }
        })
        .await
        .unwrap_err();
    assert!(matches!(e, crate::ElectionError::NotInitialized));
    assert_eq!(calls, 1);
    let e = db
        .run(|_txn, _| async { Err::<(), _>(TxnError::new(TxnErrorKind::Fatal)) })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TxnErrorKind::Fatal);
}

#[test]
fn debug_output_is_informative() {
    let (db, _) = manual_db();
    let s = format!("{db:?}");
    assert!(s.contains("committed_version: 0"), "{s}");
    let t = db.create_transaction();
    assert!(format!("{t:?}").contains("MemTransaction"));
    let faults = ScriptedFaults::new();
    faults.set_read_latency(Duration::from_millis(3));
    db.set_fault_injector(Arc::new(faults));
    assert!(format!("{db:?}").contains("read_latency: 3ms"));
}

// ---------------------------------------------------------------------------------------------
// Model-based property test: random interleavings of random transactions.

#[derive(Clone, Debug)]
enum Op {
    Get(u8, ReadMode),
    Range(u8, u8, ReadMode),
    Set(u8, u8),
    Clear(u8),
    Conflict(u8),
}

#[derive(Clone, Debug, PartialEq)]
enum Observed {
    Value(Option<Vec<u8>>),
    Pairs(Vec<KeyValue>),
    None,
}

fn mode() -> impl Strategy<Value = ReadMode> {
    prop_oneof![Just(ReadMode::Serializable), Just(ReadMode::Snapshot)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..5, mode()).prop_map(|(k, m)| Op::Get(k, m)),
        (0u8..6, 0u8..6, mode()).prop_map(|(b, e, m)| Op::Range(b, e, m)),
        (0u8..5, 0u8..3).prop_map(|(k, v)| Op::Set(k, v)),
        (0u8..5).prop_map(Op::Clear),
        (0u8..5).prop_map(Op::Conflict),
    ]
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Evaluates a read against `base` overlaid with `own` writes.
fn model_read(base: &Model, own: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, op: &Op) -> Observed {
    let mut view = base.clone();
    for (k, v) in own {
        match v {
            Some(v) => view.insert(k.clone(), v.clone()),
            None => view.remove(k),
        };
    }
    match op {
        Op::Get(k, _) => Observed::Value(view.get(&vec![*k]).cloned()),
        Op::Range(b, e, _) => Observed::Pairs(
            view.into_iter()
                .filter(|(k, _)| k.as_slice() >= [*b].as_slice() && k.as_slice() < [*e].as_slice())
                .collect(),
        ),
        _ => Observed::None,
    }
}

fn record_write(own: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>, op: &Op) {
    match op {
        Op::Set(k, v) => {
            own.insert(vec![*k], Some(vec![*v]));
        }
        Op::Clear(k) => {
            own.insert(vec![*k], None);
        }
        _ => {}
    }
}

struct Run {
    /// Per transaction: each op and what it returned.
    log: Vec<Vec<(Op, Observed)>>,
    read_versions: Vec<Option<u64>>,
    /// Per transaction: its commit outcome, if it committed.
    outcomes: Vec<Option<Result<(), TxnErrorKind>>>,
    /// Write transactions that committed, in commit order.
    commit_order: Vec<usize>,
    final_state: Model,
    committed_version: u64,
}

async fn execute(programs: &[Vec<Op>], schedule: &[usize]) -> Run {
    let (db, _) = manual_db();
    let txns: Vec<MemTransaction> = programs.iter().map(|_| db.create_transaction()).collect();
    let n = programs.len();
    let mut cursor = vec![0; n];
    let mut run = Run {
        log: vec![Vec::new(); n],
        read_versions: vec![None; n],
        outcomes: vec![None; n],
        commit_order: Vec::new(),
        final_state: Model::new(),
        committed_version: 0,
    };
    let steps = schedule
        .iter()
        .map(|s| s % n)
        .chain((0..n).flat_map(|i| std::iter::repeat_n(i, programs[i].len() + 1)));
    for i in steps {
        if run.outcomes[i].is_some() {
            continue;
        }
        let t = &txns[i];
        if let Some(op) = programs[i].get(cursor[i]) {
            cursor[i] += 1;
            let observed = match op {
                Op::Get(k, m) => Observed::Value(t.get(&[*k], *m).await.unwrap()),
                Op::Range(b, e, m) => Observed::Pairs(t.get_range(&[*b], &[*e], *m).await.unwrap()),
                Op::Set(k, v) => {
                    t.set(&[*k], &[*v]);
                    Observed::None
                }
                Op::Clear(k) => {
                    t.clear(&[*k]);
                    Observed::None
                }
                Op::Conflict(k) => {
                    t.add_read_conflict_key(&[*k]).unwrap();
                    Observed::None
                }
            };
            run.log[i].push((op.clone(), observed));
        } else {
            let outcome = t.clone().commit().await.map_err(|e| e.kind());
            run.read_versions[i] = t.read_version();
            let writes = programs[i]
                .iter()
                .any(|o| matches!(o, Op::Set(..) | Op::Clear(..)));
            if outcome.is_ok() && writes {
                run.commit_order.push(i);
            }
            run.outcomes[i] = Some(outcome);
        }
    }
    let check = db.create_transaction();
    run.final_state = check
        .get_range(b"", b"\xff", ReadMode::Snapshot)
        .await
        .unwrap()
        .into_iter()
        .collect();
    run.committed_version = db.committed_version();
    run
}

fn apply_writes(model: &mut Model, ops: &[(Op, Observed)]) {
    let mut own = BTreeMap::new();
    for (op, _) in ops {
        record_write(&mut own, op);
    }
    for (k, v) in own {
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
}

fn check_run(run: &Run) -> Result<(), TestCaseError> {
    // Versions: one per write commit; snapshots[v] is the state at version v.
    let mut snapshots = vec![Model::new()];
    for &i in &run.commit_order {
        let mut next = snapshots.last().cloned().unwrap_or_default();
        apply_writes(&mut next, &run.log[i]);
        snapshots.push(next);
    }
    prop_assert_eq!(run.committed_version, run.commit_order.len() as u64);
    prop_assert_eq!(&run.final_state, snapshots.last().unwrap());

    // Snapshot isolation with read-your-writes: every read equals the state at the read
    // version overlaid with the transaction's own earlier writes.
    for (i, log) in run.log.iter().enumerate() {
        let Some(rv) = run.read_versions[i] else {
            continue;
        };
        let base = &snapshots[rv as usize];
        let mut own = BTreeMap::new();
        for (op, observed) in log {
            if !matches!(observed, Observed::None) {
                prop_assert_eq!(
                    observed,
                    &model_read(base, &own, op),
                    "txn {} op {:?}",
                    i,
                    op
                );
            }
            record_write(&mut own, op);
        }
    }

    // Serializability: replaying the committed write transactions one after another in commit
    // order reproduces every serializable read they made.
    let mut serial = Model::new();
    for &i in &run.commit_order {
        let mut own = BTreeMap::new();
        for (op, observed) in &run.log[i] {
            let serializable = matches!(
                op,
                Op::Get(_, ReadMode::Serializable) | Op::Range(_, _, ReadMode::Serializable)
            );
            if serializable {
                prop_assert_eq!(
                    observed,
                    &model_read(&serial, &own, op),
                    "txn {} op {:?}",
                    i,
                    op
                );
            }
            record_write(&mut own, op);
        }
        apply_writes(&mut serial, &run.log[i]);
    }

    // No spurious conflicts: a conflicted transaction read (or marked) a key that a
    // transaction committing after its read version wrote.
    for (i, outcome) in run.outcomes.iter().enumerate() {
        if *outcome != Some(Err(TxnErrorKind::Conflict)) {
            continue;
        }
        let rv = run.read_versions[i].unwrap() as usize;
        let later_writes: Vec<Vec<u8>> = run.commit_order[rv..]
            .iter()
            .flat_map(|&j| {
                let mut own = BTreeMap::new();
                for (op, _) in &run.log[j] {
                    record_write(&mut own, op);
                }
                own.into_keys()
            })
            .collect();
        // Keys this transaction had written before reading them are not in its conflict set.
        let mut own = BTreeMap::new();
        let mut touched = false;
        for (op, _) in &run.log[i] {
            let hit = |k: &Vec<u8>| later_writes.contains(k);
            touched |= match op {
                Op::Get(k, ReadMode::Serializable) => {
                    !own.contains_key(&vec![*k]) && hit(&vec![*k])
                }
                Op::Conflict(k) => hit(&vec![*k]),
                Op::Range(b, e, ReadMode::Serializable) => later_writes.iter().any(|k| {
                    k.as_slice() >= [*b].as_slice()
                        && k.as_slice() < [*e].as_slice()
                        && !own.contains_key(k)
                }),
                _ => false,
            };
            record_write(&mut own, op);
        }
        prop_assert!(touched, "txn {} conflicted without cause", i);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn interleaved_transactions_are_serializable(
        programs in prop::collection::vec(prop::collection::vec(op(), 1..7), 2..6),
        schedule in prop::collection::vec(0usize..6, 0..48),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let run = rt.block_on(execute(&programs, &schedule));
        check_run(&run)?;
    }
}
