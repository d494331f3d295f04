//! The differential test (issue 30): the same scripted transactions, and seeded random
//! interleavings of a few clients, run on MemDb, the SQLite store and (in the FoundationDB tier)
//! a real cluster. Every operation's outcome becomes one line of a trace; the traces are
//! compared.
//!
//! - **Scripts** ([`scripts`]) pair each operation with the outcome FoundationDB gives, probed on
//!   a 7.3 cluster (`tests/fdb_integration.rs`, `differential::` tests, run by
//!   `scripts/fdb-tier`). MemDb and SQLite must give the same outcome, except where a line is
//!   marked with a [`Difference`]: then they must give the outcome the difference declares.
//!   Every `Difference` is one row of the table of deliberate differences in the `memdb` and
//!   `sqlite` module docs ([`DIFFERENCES_DOC`]), and every row is pinned by a script.
//! - **Random interleavings** ([`random_script`]) of three clients over four keys: reads in
//!   both modes, range reads, writes, clears, conflict keys, explicit read versions, watches,
//!   commits and drops, in an order drawn from a seed. The stores' traces must be equal.
//!
//! The keys of a run live below a fresh prefix of the backend; values and keys are shown
//! relative to it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    unreachable_pub
)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use fdb_leader_election::{ElectionTxn, ReadMode, TxnError, TxnErrorKind, Watch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::conformance::{Backend, DEFAULT_MAX_WATCHES};

/// The docs' table of deliberate differences (`src/store/differences.md`, shown by the `memdb`
/// and `sqlite` module docs).
pub const DIFFERENCES_DOC: &str = include_str!("../../src/store/differences.md");

/// How long every unresolved watch must stay quiet before [`Op::Settle`] calls them pending.
const SETTLE_QUIET: Duration = Duration::from_millis(400);

/// One of the clients of a script.
pub type Client = usize;

/// A key, relative to the run's prefix unless absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    /// The prefix followed by these bytes.
    Rel(&'static [u8]),
    /// Exactly these bytes (the system keys, `\xff...`).
    Abs(&'static [u8]),
    /// The prefix followed by a filler: `n` bytes in all.
    Sized(usize),
    /// The prefix followed by `tag`, then a filler: `n` bytes in all.
    SizedTag(&'static str, usize),
    /// The key right after `SizedTag(tag, n)`: it followed by a zero byte.
    SizedTagNext(&'static str, usize),
}

/// A value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// These bytes.
    Text(&'static [u8]),
    /// `n` bytes.
    Sized(usize),
}

/// One operation of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A new transaction for the client (its open one, if any, is dropped first).
    Begin(Client),
    /// A point read.
    Get(Client, Key, ReadMode),
    /// A range read of `[begin, end)`.
    Range(Client, Key, Key, ReadMode),
    /// A write.
    Set(Client, Key, Val),
    /// A clear of one key.
    Clear(Client, Key),
    /// Sets this many 9,000-byte keys to 100,000-byte values (about 127 kB each, as
    /// FoundationDB counts a transaction's size).
    Fill(Client, usize),
    /// `add_read_conflict_key`.
    Conflict(Client, Key),
    /// `read_version` (shown as `taken`, or the error).
    ReadVersion(Client),
    /// `approximate_size` (FoundationDB's running estimate of the transaction's size).
    ApproxSize(Client),
    /// A watch; watches are named `w0`, `w1`, ... in creation order.
    Watch(Client, Key),
    /// The client's commit.
    Commit(Client),
    /// Drops the client's transaction without committing.
    Drop(Client),
    /// A transaction of its own that writes one key and commits.
    Put(Key, Val),
    /// Sets the database's limit on outstanding watches.
    MaxWatches(usize),
    /// Waits until every unresolved watch has been quiet for a while; shows every watch.
    Settle,
    /// Waits this many milliseconds without polling the watches.
    Pause(u64),
    /// Shows every key below the prefix (a fresh snapshot read).
    Dump,
}

/// A declared deliberate difference between the embedded stores and FoundationDB: one row of
/// the table in [`DIFFERENCES_DOC`], named there as `` `name` ``, pinned by a test on both
/// sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Difference {
    /// Reads of a transaction past five seconds fail with 1007 at once, also those
    /// FoundationDB serves from its read cache (`reads_are_too_old_after_five_seconds`).
    TooOldIsStrict,
    /// `run`'s `MaybeCommitted` stays true after an unknown result for every later attempt.
    MaybeCommittedIsSticky,
    /// `run` retries a retryable kind without a code; FoundationDB's `Database::run` cannot.
    UncodedErrorsRetriedByKind,
    /// A watch's read completes at the call; FoundationDB's completes later, so its share of
    /// `approximate_size` may not be counted yet, its place under the watch limit is taken only
    /// then (at the limit, the watch whose read completes last fails), and its own
    /// transaction's write fires it only then (dropped before: 1025).
    WatchReadIsImmediate,
    /// A range read adds its range to `approximate_size` once; FoundationDB adds one per reply.
    RangeEstimateInOnePiece,
    /// A watch armed after its value changed and changed back stays quiet; FoundationDB's may
    /// fire (its storage server may not have applied the change back yet).
    AbaWatchStaysQuiet,
    /// A limit on outstanding watches above 1,000,000 is refused at once (2006); FoundationDB
    /// accepts the option and fails every later operation of the database handle with 2006.
    MaxWatchesRefusedAtOnce,
    /// `run` retries `transaction_throttled_hot_shard` (1235) and
    /// `transaction_rejected_range_locked` (1242) as FoundationDB 7.4's `on_error` does; a 7.3
    /// client's `on_error` does not know these codes and returns them.
    CodesNewIn74Retried,
}

impl Difference {
    /// Every declared difference.
    pub const ALL: [Difference; 8] = [
        Difference::TooOldIsStrict,
        Difference::WatchReadIsImmediate,
        Difference::AbaWatchStaysQuiet,
        Difference::RangeEstimateInOnePiece,
        Difference::MaxWatchesRefusedAtOnce,
        Difference::MaybeCommittedIsSticky,
        Difference::UncodedErrorsRetriedByKind,
        Difference::CodesNewIn74Retried,
    ];

    /// Its name in the docs' table.
    pub fn name(self) -> &'static str {
        match self {
            Difference::TooOldIsStrict => "too-old-is-strict",
            Difference::MaybeCommittedIsSticky => "maybe-committed-is-sticky",
            Difference::UncodedErrorsRetriedByKind => "uncoded-errors-retried-by-kind",
            Difference::WatchReadIsImmediate => "watch-read-is-immediate",
            Difference::AbaWatchStaysQuiet => "aba-watch-stays-quiet",
            Difference::RangeEstimateInOnePiece => "range-estimate-in-one-piece",
            Difference::MaxWatchesRefusedAtOnce => "max-watches-refused-at-once",
            Difference::CodesNewIn74Retried => "codes-new-in-7-4-retried",
        }
    }
}

/// What a line of a script expects.
#[derive(Clone, Debug)]
pub struct Expect {
    /// FoundationDB's outcome.
    pub fdb: &'static str,
    /// The embedded stores' outcome, where it deliberately differs.
    pub embedded: Option<(Difference, &'static str)>,
}

/// The same outcome on every store.
pub fn is(outcome: &'static str) -> Expect {
    Expect {
        fdb: outcome,
        embedded: None,
    }
}

/// An outcome that deliberately differs.
pub fn differs(difference: Difference, fdb: &'static str, embedded: &'static str) -> Expect {
    Expect {
        fdb,
        embedded: Some((difference, embedded)),
    }
}

/// A scripted case.
#[derive(Clone, Debug)]
pub struct Script {
    /// What it shows.
    pub name: &'static str,
    /// The operations, each with its expected outcome.
    pub lines: Vec<(Op, Expect)>,
}

impl Script {
    /// The operations alone.
    pub fn ops(&self) -> Vec<Op> {
        self.lines.iter().map(|(op, _)| op.clone()).collect()
    }

    /// The expected trace on FoundationDB (`embedded == false`) or on MemDb and SQLite.
    pub fn expected(&self, embedded: bool) -> Vec<String> {
        self.lines
            .iter()
            .map(|(op, e)| {
                let outcome = match (embedded, e.embedded) {
                    (true, Some((_, outcome))) => outcome,
                    _ => e.fdb,
                };
                line(op, outcome)
            })
            .collect()
    }

    /// The differences this script pins.
    pub fn differences(&self) -> Vec<Difference> {
        self.lines
            .iter()
            .filter_map(|(_, e)| e.embedded.map(|(d, _)| d))
            .collect()
    }
}

/// How a key is shown: relative to the prefix, long ones by length.
fn show_key(key: &Key) -> String {
    match key {
        Key::Rel(k) => escape(k),
        Key::Abs(k) => format!("/{}", escape(k)),
        Key::Sized(n) => format!("<key {n}>"),
        Key::SizedTag(tag, n) => format!("<key {tag} {n}>"),
        Key::SizedTagNext(tag, n) => format!("<key {tag} {n}>\\x00"),
    }
}

fn show_val(v: &Val) -> String {
    match v {
        Val::Text(t) => escape(t),
        Val::Sized(n) => format!("<{n} bytes>"),
    }
}

fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

fn mode(m: ReadMode) -> &'static str {
    match m {
        ReadMode::Serializable => "",
        ReadMode::Snapshot => " (snapshot)",
    }
}

/// The operation's part of a trace line.
fn show_op(op: &Op) -> String {
    match op {
        Op::Begin(c) => format!("t{c} begin"),
        Op::Get(c, k, m) => format!("t{c} get {}{}", show_key(k), mode(*m)),
        Op::Range(c, b, e, m) => format!("t{c} range {}..{}{}", show_key(b), show_key(e), mode(*m)),
        Op::Set(c, k, v) => format!("t{c} set {} = {}", show_key(k), show_val(v)),
        Op::Clear(c, k) => format!("t{c} clear {}", show_key(k)),
        Op::Fill(c, n) => format!("t{c} fill {n}"),
        Op::Conflict(c, k) => format!("t{c} conflict {}", show_key(k)),
        Op::ReadVersion(c) => format!("t{c} read version"),
        Op::ApproxSize(c) => format!("t{c} approximate size"),
        Op::Watch(c, k) => format!("t{c} watch {}", show_key(k)),
        Op::Commit(c) => format!("t{c} commit"),
        Op::Drop(c) => format!("t{c} drop"),
        Op::Put(k, v) => format!("put {} = {}", show_key(k), show_val(v)),
        Op::MaxWatches(n) => format!("max watches {n}"),
        Op::Settle => "settle".to_owned(),
        Op::Pause(ms) => format!("pause {ms} ms"),
        Op::Dump => "dump".to_owned(),
    }
}

fn line(op: &Op, outcome: &str) -> String {
    if outcome.is_empty() {
        show_op(op)
    } else {
        format!("{} -> {outcome}", show_op(op))
    }
}

fn err(e: &TxnError) -> String {
    match e.code() {
        Some(code) => format!("err {code}"),
        None => format!("err {:?}", e.kind()),
    }
}

fn show_value(prefix: &[u8], v: &[u8]) -> String {
    let _ = prefix;
    if v.len() > 24 {
        format!("<{} bytes>", v.len())
    } else {
        escape(v)
    }
}

fn show_stored_key(prefix: &[u8], k: &[u8]) -> String {
    match k.strip_prefix(prefix) {
        Some(rel) if rel.len() <= 24 => escape(rel),
        Some(_) => format!("<key {}>", k.len()),
        None => format!("/{}", escape(k)),
    }
}

/// One watch of a run.
struct WatchState {
    future: Option<Watch>,
    outcome: Option<String>,
}

/// Every run's prefix is padded to this length, so that sizes compare across stores.
const PREFIX_BYTES: usize = 64;

/// Runs `ops` on `b` under a fresh prefix; returns the trace.
pub async fn run<B: Backend>(b: &B, ops: &[Op]) -> Vec<String> {
    let prefix = padded_prefix(b);
    let resolve = |k: &Key| resolve(&prefix, k);
    let mut txns: BTreeMap<Client, B::Txn> = BTreeMap::new();
    let mut watches: Vec<WatchState> = Vec::new();
    let mut trace = Vec::with_capacity(ops.len());
    let mut limit_changed = false;
    for op in ops {
        let outcome: String = match op {
            Op::Begin(c) => {
                txns.insert(*c, b.begin());
                String::new()
            }
            Op::Get(c, k, m) => match txn(&txns, *c).get(&resolve(k), *m).await {
                Ok(Some(v)) => show_value(&prefix, &v),
                Ok(None) => "none".to_owned(),
                Err(e) => err(&e),
            },
            Op::Range(c, begin, end, m) => {
                match txn(&txns, *c)
                    .get_range(&resolve(begin), &resolve(end), *m)
                    .await
                {
                    Ok(kvs) => show_pairs(&prefix, &kvs),
                    Err(e) => err(&e),
                }
            }
            Op::Set(c, k, v) => {
                txn(&txns, *c).set(&resolve(k), &value(v));
                String::new()
            }
            Op::Clear(c, k) => {
                txn(&txns, *c).clear(&resolve(k));
                String::new()
            }
            Op::Fill(c, n) => {
                let t = txn(&txns, *c);
                for i in 0..*n {
                    let k = sized_key(&prefix, &format!("fill/{i:05}/"), 9_000);
                    t.set(&k, &vec![b'v'; 100_000]);
                }
                String::new()
            }
            Op::Conflict(c, k) => match txn(&txns, *c).add_read_conflict_key(&resolve(k)) {
                Ok(()) => "ok".to_owned(),
                Err(e) => err(&e),
            },
            Op::ReadVersion(c) => match txn(&txns, *c).read_version().await {
                Ok(Some(_)) => "taken".to_owned(),
                Ok(None) => "none".to_owned(),
                Err(e) => err(&e),
            },
            Op::ApproxSize(c) => match txn(&txns, *c).approximate_size().await {
                Ok(Some(n)) => n.to_string(),
                Ok(None) => "none".to_owned(),
                Err(e) => err(&e),
            },
            Op::Watch(c, k) => {
                let name = format!("w{}", watches.len());
                match txn(&txns, *c).watch(&resolve(k)) {
                    Ok(future) => {
                        watches.push(WatchState {
                            future: Some(future),
                            outcome: None,
                        });
                        name
                    }
                    Err(e) => {
                        watches.push(WatchState {
                            future: None,
                            outcome: Some(format!("refused {}", err(&e))),
                        });
                        format!("{name} {}", err(&e))
                    }
                }
            }
            Op::Commit(c) => {
                let t = txns
                    .remove(c)
                    .unwrap_or_else(|| panic!("t{c} commits without a transaction"));
                match b.commit(t).await {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => err(&e),
                }
            }
            Op::Drop(c) => {
                txns.remove(c);
                String::new()
            }
            Op::Put(k, v) => {
                let t = b.begin();
                t.set(&resolve(k), &value(v));
                match b.commit(t).await {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => err(&e),
                }
            }
            Op::MaxWatches(n) => {
                limit_changed = true;
                if b.set_watch_limit(*n) {
                    // Let the cancellations of earlier watches reach the count.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    "ok".to_owned()
                } else {
                    "refused".to_owned()
                }
            }
            Op::Settle => settle(&mut watches).await,
            Op::Pause(ms) => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                String::new()
            }
            Op::Dump => {
                let t = b.begin();
                let end = [prefix.as_slice(), b"\xff"].concat();
                match t.get_range(&prefix, &end, ReadMode::Snapshot).await {
                    Ok(kvs) => show_pairs(&prefix, &kvs),
                    Err(e) => err(&e),
                }
            }
        };
        trace.push(line(op, &outcome));
    }
    drop(txns);
    drop(watches);
    if limit_changed {
        assert!(b.set_watch_limit(DEFAULT_MAX_WATCHES));
    }
    trace
}

/// The bytes of `key` under `prefix`.
fn resolve(prefix: &[u8], key: &Key) -> Vec<u8> {
    match key {
        Key::Rel(k) => [prefix, k].concat(),
        Key::Abs(k) => k.to_vec(),
        Key::Sized(n) => sized_key(prefix, "s/", *n),
        Key::SizedTag(tag, n) => sized_key(prefix, tag, *n),
        Key::SizedTagNext(tag, n) => {
            let mut k = sized_key(prefix, tag, *n);
            k.push(0);
            k
        }
    }
}

fn value(v: &Val) -> Vec<u8> {
    match v {
        Val::Text(t) => t.to_vec(),
        Val::Sized(n) => vec![b'v'; *n],
    }
}

/// A fresh prefix of `b`, padded to [`PREFIX_BYTES`].
fn padded_prefix<B: Backend>(b: &B) -> Vec<u8> {
    let mut prefix = b.fresh_prefix();
    assert!(
        prefix.len() < PREFIX_BYTES,
        "the backend's prefix is too long"
    );
    prefix.resize(PREFIX_BYTES - 1, b'_');
    prefix.push(b'/');
    prefix
}

fn sized_key(prefix: &[u8], tag: &str, n: usize) -> Vec<u8> {
    let mut k = [prefix, tag.as_bytes()].concat();
    assert!(
        k.len() < n,
        "a sized key of {n} bytes is shorter than its prefix"
    );
    k.resize(n, b'.');
    k
}

fn txn<T>(txns: &BTreeMap<Client, T>, c: Client) -> &T {
    txns.get(&c)
        .unwrap_or_else(|| panic!("t{c} has no open transaction"))
}

fn show_pairs(prefix: &[u8], kvs: &[(Vec<u8>, Vec<u8>)]) -> String {
    if kvs.is_empty() {
        return "[]".to_owned();
    }
    let mut s = String::new();
    for (i, (k, v)) in kvs.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(
            s,
            "{}={}",
            show_stored_key(prefix, k),
            show_value(prefix, v)
        );
    }
    s
}

/// Waits until every unresolved watch has been quiet for [`SETTLE_QUIET`], then shows each
/// watch: `fired`, `pending`, `err CODE` or `refused err CODE`.
async fn settle(watches: &mut [WatchState]) -> String {
    loop {
        let mut pending: Vec<(usize, &mut Watch)> = watches
            .iter_mut()
            .enumerate()
            .filter(|(_, w)| w.outcome.is_none())
            .filter_map(|(i, w)| w.future.as_mut().map(|f| (i, f)))
            .collect();
        if pending.is_empty() {
            break;
        }
        let next = futures_util::future::select_all(
            pending
                .iter_mut()
                .map(|(i, f)| Box::pin(async move { (*i, f.await) })),
        );
        let Ok(((i, result), _, _)) = tokio::time::timeout(SETTLE_QUIET, next).await else {
            break;
        };
        drop(pending);
        watches[i].outcome = Some(match result {
            Ok(()) => "fired".to_owned(),
            Err(e) => err(&e),
        });
        watches[i].future = None;
    }
    let mut s = String::new();
    for (i, w) in watches.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "w{i} {}", w.outcome.as_deref().unwrap_or("pending"));
    }
    if s.is_empty() {
        s.push_str("no watches");
    }
    s
}

/// Compares `got` with `expected`: `Err` shows both traces and marks where they differ.
/// An expected line may allow several outcomes, `a|b`, where FoundationDB's timing decides.
pub fn compare(what: &str, expected: &[String], got: &[String]) -> Result<(), String> {
    let matches = |e: &String, g: &String| {
        e == g
            || e.split_once(" -> ").is_some_and(|(op, outcomes)| {
                outcomes.split('|').any(|o| *g == format!("{op} -> {o}"))
            })
    };
    if expected.len() == got.len() && expected.iter().zip(got).all(|(e, g)| matches(e, g)) {
        return Ok(());
    }
    let first = expected
        .iter()
        .zip(got)
        .position(|(e, g)| !matches(e, g))
        .unwrap_or(expected.len().min(got.len()));
    let mut report = format!("{what}: the traces differ at line {first}\n");
    for i in 0..expected.len().max(got.len()) {
        let e = expected.get(i).map_or("", String::as_str);
        let g = got.get(i).map_or("", String::as_str);
        if expected
            .get(i)
            .zip(got.get(i))
            .is_some_and(|(e, g)| matches(e, g))
        {
            let _ = writeln!(report, "   {i:3} {g}");
        } else {
            let _ = writeln!(report, "!! {i:3} expected: {e}\n!!     got:      {g}");
        }
    }
    Err(report)
}

/// [`compare`], panicking on a difference.
#[track_caller]
pub fn assert_same(what: &str, expected: &[String], got: &[String]) {
    if let Err(report) = compare(what, expected, got) {
        panic!("{report}");
    }
}

// ---------------------------------------------------------------------------------------------
// Shorthands for scripts.

use Key::{Abs, Rel, Sized};
use ReadMode::{Serializable, Snapshot};

fn get(c: Client, k: &'static [u8]) -> Op {
    Op::Get(c, Rel(k), Serializable)
}
fn snap(c: Client, k: &'static [u8]) -> Op {
    Op::Get(c, Rel(k), Snapshot)
}
fn range(c: Client, b: &'static [u8], e: &'static [u8]) -> Op {
    Op::Range(c, Rel(b), Rel(e), Serializable)
}
fn set(c: Client, k: &'static [u8], v: &'static [u8]) -> Op {
    Op::Set(c, Rel(k), Val::Text(v))
}
fn clear(c: Client, k: &'static [u8]) -> Op {
    Op::Clear(c, Rel(k))
}
fn conflict(c: Client, k: &'static [u8]) -> Op {
    Op::Conflict(c, Rel(k))
}
fn watch(c: Client, k: &'static [u8]) -> Op {
    Op::Watch(c, Rel(k))
}
fn put(k: &'static [u8], v: &'static [u8]) -> Op {
    Op::Put(Rel(k), Val::Text(v))
}

fn script(name: &'static str, lines: Vec<(Op, Expect)>) -> Script {
    Script { name, lines }
}

/// Every scripted case, each line with FoundationDB's outcome (probed on 7.3.79).
pub fn scripts() -> Vec<Script> {
    vec![
        // -- Item 1: when the read version is taken.
        script(
            "an explicit read version before any read fixes the snapshot",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (Op::ReadVersion(0), is("taken")),
                (put(b"a", b"2"), is("ok")),
                (get(0, b"a"), is("1")),
            ],
        ),
        script(
            "a read served from the transaction's own write takes no read version",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (set(0, b"b", b"x"), is("")),
                (get(0, b"b"), is("x")),
                (snap(0, b"b"), is("x")),
                (clear(0, b"c"), is("")),
                (get(0, b"c"), is("none")),
                (range(0, b"b", b"b\x00"), is("b=x")),
                (put(b"a", b"2"), is("ok")),
                (get(0, b"a"), is("2")),
                (put(b"a", b"3"), is("ok")),
                (get(0, b"a"), is("2")),
            ],
        ),
        script(
            "an empty or inverted range read takes no read version",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (range(0, b"c", b"a"), is("[]")),
                (range(0, b"b", b"b"), is("[]")),
                (put(b"a", b"2"), is("ok")),
                (get(0, b"a"), is("2")),
            ],
        ),
        script(
            "a range read that finds nothing takes the read version",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (range(0, b"x", b"y"), is("[]")),
                (put(b"a", b"2"), is("ok")),
                (get(0, b"a"), is("1")),
            ],
        ),
        script(
            "a read of one's own write then a commit elsewhere: no conflict",
            vec![
                (put(b"c", b"0"), is("ok")),
                (Op::Begin(0), is("")),
                (set(0, b"a", b"mine"), is("")),
                (get(0, b"a"), is("mine")),
                (put(b"c", b"1"), is("ok")),
                (get(0, b"c"), is("1")),
                (put(b"a", b"theirs"), is("ok")),
                (Op::Commit(0), is("ok")),
                (Op::Dump, is("a=mine c=1")),
            ],
        ),
        script(
            "a watch on one's own write takes no read version",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (set(0, b"b", b"x"), is("")),
                (watch(0, b"b"), is("w0")),
                (put(b"a", b"2"), is("ok")),
                (get(0, b"a"), is("2")),
                (Op::Drop(0), is("")),
                (Op::Settle, is("w0 err 1025")),
            ],
        ),
        script(
            "a blind write with a conflict key takes its read version at the commit",
            vec![
                (Op::Begin(0), is("")),
                (conflict(0, b"a"), is("ok")),
                (put(b"a", b"1"), is("ok")),
                (set(0, b"b", b"x"), is("")),
                (Op::Commit(0), is("ok")),
            ],
        ),
        script(
            "a watch's read completes later on FoundationDB: its size counts once it has",
            vec![
                (put(b"d", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (get(0, b"b"), is("none")),
                (watch(0, b"d"), is("w0")),
                (clear(0, b"d"), is("")),
                // On FoundationDB, 620 only if the watch's read came back before this call.
                (
                    Op::ApproxSize(0),
                    differs(Difference::WatchReadIsImmediate, "465|620", "620"),
                ),
                (get(0, b"c"), is("none")),
                (Op::ApproxSize(0), is("775")),
                (put(b"d", b"2"), is("ok")),
                (set(0, b"e", b"1"), is("")),
                (Op::Commit(0), is("err 1020")),
                (Op::Settle, is("w0 fired")),
            ],
        ),
        script(
            "the approximate size of a range read, around the transaction's own writes",
            vec![
                (Op::Begin(0), is("")),
                (range(0, b"a", b"z"), is("[]")),
                (Op::ApproxSize(0), is("154")),
                (Op::Begin(1), is("")),
                (set(1, b"m", b"1"), is("")),
                (Op::ApproxSize(1), is("265")),
                (range(1, b"a", b"z"), is("m=1")),
                (Op::ApproxSize(1), is("573")),
                (Op::Begin(2), is("")),
                (set(2, b"a", b"1"), is("")),
                (range(2, b"a", b"z"), is("a=1")),
                (Op::ApproxSize(2), is("420")),
                (Op::Begin(0), is("")),
                (clear(0, b"m"), is("")),
                (Op::ApproxSize(0), is("310")),
                (range(0, b"a", b"z"), is("[]")),
                (Op::ApproxSize(0), is("618")),
                (Op::Begin(1), is("")),
                (range(1, b"a", b"zzzz"), is("[]")),
                (Op::ApproxSize(1), is("157")),
                (Op::Begin(2), is("")),
                (clear(2, b"a"), is("")),
                (range(2, b"a", b"z"), is("[]")),
                (Op::ApproxSize(2), is("464")),
                (Op::Begin(0), is("")),
                (set(0, b"a", b"1"), is("")),
                (set(0, b"a\x00", b"1"), is("")),
                (Op::ApproxSize(0), is("533")),
                (range(0, b"a", b"z"), is("a=1 a\\x00=1")),
                (Op::ApproxSize(0), is("689")),
                (Op::Begin(1), is("")),
                (set(1, b"m", b"1"), is("")),
                (range(1, b"a", b"m\x00"), is("m=1")),
                (Op::ApproxSize(1), is("420")),
                (Op::Begin(2), is("")),
                (set(2, b"a", b"1"), is("")),
                (set(2, b"c", b"1"), is("")),
                (range(2, b"a", b"z"), is("a=1 c=1")),
                (Op::ApproxSize(2), is("840")),
            ],
        ),
        script(
            "the approximate size adds up what each operation costs, unmerged",
            vec![
                (Op::Begin(0), is("")),
                (Op::ApproxSize(0), is("0")),
                (set(0, b"a", b"1"), is("")),
                (Op::ApproxSize(0), is("265")),
                (clear(0, b"b"), is("")),
                (Op::ApproxSize(0), is("575")),
                (get(0, b"c"), is("none")),
                (get(0, b"c"), is("none")),
                (snap(0, b"d"), is("none")),
                (Op::ApproxSize(0), is("885")),
                (range(0, b"a", b"z"), is("a=1")),
                (Op::ApproxSize(0), is("1195")),
                (conflict(0, b"e"), is("ok")),
                (conflict(0, b"a"), is("ok")),
                (watch(0, b"f"), is("w0")),
                (Op::ApproxSize(0), is("1505")),
                (Op::Set(0, Sized(10_001), Val::Text(b"v")), is("")),
                (Op::ApproxSize(0), is("err 2102")),
            ],
        ),
        // -- Item 2: limits.
        script(
            "an oversized key fails later reads and the commit with 2102",
            vec![
                (Op::Begin(0), is("")),
                (set(0, b"a", b"1"), is("")),
                (Op::Set(0, Sized(10_001), Val::Text(b"v")), is("")),
                (get(0, b"a"), is("err 2102")),
                (Op::ReadVersion(0), is("err 2102")),
                (watch(0, b"a"), is("w0")),
                (Op::Commit(0), is("err 2102")),
                (Op::Settle, is("w0 err 2102")),
                (Op::Dump, is("[]")),
            ],
        ),
        script(
            "an oversized value fails later reads and the commit with 2103; the first error wins",
            vec![
                (Op::Begin(0), is("")),
                (Op::Set(0, Rel(b"a"), Val::Sized(100_001)), is("")),
                (Op::Set(0, Sized(10_001), Val::Text(b"v")), is("")),
                (snap(0, b"b"), is("err 2103")),
                (range(0, b"a", b"z"), is("err 2103")),
                (conflict(0, b"b"), is("ok")),
                (Op::Commit(0), is("err 2103")),
            ],
        ),
        script(
            "the largest key and value commit",
            vec![
                (Op::Begin(0), is("")),
                (Op::Set(0, Sized(10_000), Val::Sized(100_000)), is("")),
                (
                    Op::Get(0, Sized(10_000), Serializable),
                    is("<100000 bytes>"),
                ),
                (Op::Commit(0), is("ok")),
            ],
        ),
        script(
            "a clear of an oversized key is ignored",
            vec![
                (Op::Begin(0), is("")),
                (Op::Clear(0, Sized(10_001)), is("")),
                (get(0, b"a"), is("none")),
                (Op::Commit(0), is("ok")),
                (Op::Begin(1), is("")),
                (set(1, b"b", b"1"), is("")),
                (Op::Clear(1, Sized(20_000)), is("")),
                (Op::Commit(1), is("ok")),
                (Op::Dump, is("b=1")),
            ],
        ),
        script(
            "oversized keys read as absent; as conflict keys they are accepted",
            vec![
                (Op::Begin(0), is("")),
                (Op::Get(0, Sized(10_001), Serializable), is("none")),
                (Op::Get(0, Sized(10_001), Snapshot), is("none")),
                (Op::Conflict(0, Sized(10_001)), is("ok")),
                (Op::Conflict(0, Sized(20_000)), is("ok")),
                (set(0, b"a", b"1"), is("")),
                (Op::Commit(0), is("ok")),
            ],
        ),
        script(
            "a watch of an oversized key fails through its future; the transaction commits",
            vec![
                (Op::Begin(0), is("")),
                (Op::Watch(0, Sized(10_001)), is("w0")),
                (set(0, b"a", b"1"), is("")),
                (Op::Commit(0), is("ok")),
                (Op::Settle, is("w0 err 2102")),
                (Op::Dump, is("a=1")),
            ],
        ),
        // -- Item 3: system keys.
        script(
            "reading a system key fails that read only",
            vec![
                (Op::Begin(0), is("")),
                (Op::Get(0, Abs(b"\xff/x"), Serializable), is("err 2004")),
                (Op::Get(0, Abs(b"\xff"), Snapshot), is("err 2004")),
                (get(0, b"a"), is("none")),
                (
                    Op::Range(0, Abs(b"\xfe\xff"), Abs(b"\xff"), Snapshot),
                    is("[]"),
                ),
                (
                    Op::Range(0, Rel(b""), Abs(b"\xff\x00"), Snapshot),
                    is("err 2004"),
                ),
                (
                    Op::Range(0, Abs(b"\xff\x00"), Abs(b"\x01"), Snapshot),
                    is("err 2004"),
                ),
                (Op::Range(0, Abs(b"\xff"), Abs(b"\xff"), Snapshot), is("[]")),
                (set(0, b"a", b"1"), is("")),
                (Op::Commit(0), is("ok")),
            ],
        ),
        script(
            "writing a system key fails later reads and the commit with 2004",
            vec![
                (Op::Begin(0), is("")),
                (Op::Set(0, Abs(b"\xff/x"), Val::Text(b"1")), is("")),
                (get(0, b"a"), is("err 2004")),
                (Op::Commit(0), is("err 2004")),
                (Op::Begin(1), is("")),
                (Op::Clear(1, Abs(b"\xff/x")), is("")),
                (get(1, b"a"), is("err 2004")),
                (Op::Commit(1), is("err 2004")),
                (Op::Begin(2), is("")),
                (Op::Set(2, Abs(b"\xff/long"), Val::Sized(100_001)), is("")),
                (Op::Commit(2), is("err 2004")),
            ],
        ),
        script(
            "a system conflict key fails later reads and the commit with 2004",
            vec![
                (Op::Begin(0), is("")),
                (Op::Conflict(0, Abs(b"\xff/x")), is("ok")),
                (get(0, b"a"), is("err 2004")),
                (Op::Commit(0), is("err 2004")),
                (Op::Begin(1), is("")),
                (Op::Conflict(1, Abs(b"\xfe")), is("ok")),
                (get(1, b"a"), is("none")),
                (Op::Commit(1), is("ok")),
            ],
        ),
        script(
            "a watch of a system key fails through its future; the transaction commits",
            vec![
                (Op::Begin(0), is("")),
                (Op::Watch(0, Abs(b"\xff/x")), is("w0")),
                (set(0, b"a", b"1"), is("")),
                (Op::Commit(0), is("ok")),
                (Op::Settle, is("w0 err 2004")),
            ],
        ),
        // -- Item 4: watches.
        script(
            "a watch on a key its transaction wrote, transaction dropped",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (set(0, b"a", b"2"), is("")),
                (watch(0, b"a"), is("w0")),
                (Op::Drop(0), is("")),
                (Op::Settle, is("w0 err 1025")),
                (put(b"a", b"3"), is("ok")),
                (Op::Settle, is("w0 err 1025")),
            ],
        ),
        script(
            "a watch on a key its transaction wrote, commit conflicts",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (get(0, b"c"), is("none")),
                (set(0, b"a", b"2"), is("")),
                (watch(0, b"a"), is("w0")),
                (put(b"c", b"1"), is("ok")),
                (Op::Commit(0), is("err 1020")),
                (Op::Settle, is("w0 err 1020")),
            ],
        ),
        script(
            "a watch fires when its transaction then writes another value, committed or not",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (watch(0, b"a"), is("w0")),
                (set(0, b"a", b"1"), is("")),
                (Op::Settle, is("w0 pending")),
                (set(0, b"a", b"2"), is("")),
                (Op::Settle, is("w0 fired")),
                (Op::Drop(0), is("")),
                (Op::Begin(1), is("")),
                (set(1, b"b", b"2"), is("")),
                (watch(1, b"b"), is("w1")),
                (clear(1, b"b"), is("")),
                (Op::Settle, is("w0 fired w1 fired")),
                (Op::Drop(1), is("")),
                (Op::Dump, is("a=1")),
            ],
        ),
        script(
            "a value changed and changed back before a read-only watcher commits",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                // FoundationDB's watch takes the read version later: take it first.
                (Op::ReadVersion(0), is("taken")),
                (watch(0, b"a"), is("w0")),
                (put(b"a", b"2"), is("ok")),
                (put(b"a", b"1"), is("ok")),
                (Op::Commit(0), is("ok")),
                // FoundationDB fires it when its storage server has not applied the second put
                // yet when the watch reaches it.
                (
                    Op::Settle,
                    differs(
                        Difference::AbaWatchStaysQuiet,
                        "w0 pending|w0 fired",
                        "w0 pending",
                    ),
                ),
                (put(b"a", b"3"), is("ok")),
                (Op::Settle, is("w0 fired")),
            ],
        ),
        script(
            "a value changed and changed back before a writing watcher commits",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (Op::ReadVersion(0), is("taken")),
                (watch(0, b"a"), is("w0")),
                (set(0, b"b", b"x"), is("")),
                (put(b"a", b"2"), is("ok")),
                (put(b"a", b"1"), is("ok")),
                (Op::Commit(0), is("err 1020")),
                (Op::Settle, is("w0 err 1020")),
                (Op::Begin(1), is("")),
                (snap(1, b"z"), is("none")),
                (watch(1, b"z"), is("w1")),
                (put(b"z", b"2"), is("ok")),
                (Op::Begin(2), is("")),
                (clear(2, b"z"), is("")),
                (Op::Commit(2), is("ok")),
                (set(1, b"b", b"y"), is("")),
                (Op::Commit(1), is("err 1020")),
                (Op::Settle, is("w0 err 1020 w1 err 1020")),
            ],
        ),
        script(
            "a watch whose transaction fails at its commit",
            vec![
                (Op::Begin(0), is("")),
                (watch(0, b"a"), is("w0")),
                (Op::Set(0, Sized(10_001), Val::Text(b"v")), is("")),
                (Op::Commit(0), is("err 2102")),
                (Op::Settle, is("w0 err 1025")),
                (Op::Begin(1), is("")),
                (watch(1, b"b"), is("w1")),
                (Op::Set(1, Abs(b"\xff/x"), Val::Text(b"v")), is("")),
                (Op::Commit(1), is("err 2004")),
                (Op::Begin(2), is("")),
                (watch(2, b"c"), is("w2")),
                (Op::Fill(2, 80), is("")),
                (Op::Commit(2), is("err 2101")),
                (Op::Settle, is("w0 err 1025 w1 err 1025 w2 err 2101")),
            ],
        ),
        script(
            "a value changed before a read-only watcher commits: fires at once",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (Op::ReadVersion(0), is("taken")),
                (watch(0, b"a"), is("w0")),
                (put(b"a", b"2"), is("ok")),
                (Op::Commit(0), is("ok")),
                (Op::Settle, is("w0 fired")),
            ],
        ),
        script(
            "watches beyond the limit fail with 1032; a fired watch frees its place",
            vec![
                (Op::MaxWatches(1), is("ok")),
                (Op::Begin(0), is("")),
                (watch(0, b"a"), is("w0")),
                (Op::Commit(0), is("ok")),
                (Op::Begin(1), is("")),
                (watch(1, b"b"), is("w1")),
                (Op::Commit(1), is("ok")),
                (Op::Settle, is("w0 pending w1 err 1032")),
                (put(b"a", b"1"), is("ok")),
                // w0 fires; nobody polls it.
                (Op::Pause(300), is("")),
                (Op::Begin(2), is("")),
                (watch(2, b"c"), is("w2")),
                (Op::Commit(2), is("ok")),
                (Op::Settle, is("w0 fired w1 err 1032 w2 pending")),
            ],
        ),
        // -- Issue 38 item 5: what a watch's later read means on FoundationDB
        // (`watch-read-is-immediate`).
        script(
            "watch_own_write_not_committed: its own transaction's write fires a watch; the \
             transaction is dropped at once",
            vec![
                (put(b"a", b"1"), is("ok")),
                (Op::Begin(0), is("")),
                (watch(0, b"a"), is("w0")),
                (set(0, b"a", b"2"), is("")),
                (Op::Drop(0), is("")),
                // FoundationDB fires it once its read has completed, and the transaction was
                // dropped (1025) before that: unless its read won the race.
                (
                    Op::Settle,
                    differs(
                        Difference::WatchReadIsImmediate,
                        "w0 err 1025|w0 fired",
                        "w0 fired",
                    ),
                ),
                (put(b"a", b"3"), is("ok")),
                (
                    Op::Settle,
                    differs(
                        Difference::WatchReadIsImmediate,
                        "w0 err 1025|w0 fired",
                        "w0 fired",
                    ),
                ),
            ],
        ),
        script(
            "watch_limit: three transactions watch a key each, then commit in order, at a limit \
             of two",
            vec![
                (Op::MaxWatches(2), is("ok")),
                (Op::Begin(1), is("")),
                (watch(1, b"k1"), is("w0")),
                (Op::Begin(2), is("")),
                (watch(2, b"k2"), is("w1")),
                (Op::Begin(3), is("")),
                (watch(3, b"k3"), is("w2")),
                (Op::Commit(1), is("ok")),
                (Op::Commit(2), is("ok")),
                (Op::Commit(3), is("ok")),
                // FoundationDB counts a watch once its read has completed: the one whose read
                // completes last fails, usually (not always) the newest.
                (
                    Op::Settle,
                    differs(
                        Difference::WatchReadIsImmediate,
                        "w0 pending w1 pending w2 err 1032|w0 err 1032 w1 pending w2 pending\
                         |w0 pending w1 err 1032 w2 pending",
                        "w0 pending w1 pending w2 err 1032",
                    ),
                ),
            ],
        ),
        script(
            "watch_limit: the limit lowered to two right after three watches were created",
            vec![
                (Op::Begin(1), is("")),
                (watch(1, b"k1"), is("w0")),
                (Op::Begin(2), is("")),
                (watch(2, b"k2"), is("w1")),
                (Op::Begin(3), is("")),
                (watch(3, b"k3"), is("w2")),
                (Op::MaxWatches(2), is("ok")),
                (Op::Commit(1), is("ok")),
                (Op::Commit(2), is("ok")),
                (Op::Commit(3), is("ok")),
                // On FoundationDB the reads are still in flight when the limit is lowered: the
                // watch whose read completes last fails (all three wait if every read won).
                (
                    Op::Settle,
                    differs(
                        Difference::WatchReadIsImmediate,
                        "w0 pending w1 pending w2 err 1032|w0 err 1032 w1 pending w2 pending\
                         |w0 pending w1 err 1032 w2 pending|w0 pending w1 pending w2 pending",
                        "w0 pending w1 pending w2 pending",
                    ),
                ),
            ],
        ),
        script(
            "watch_limit: three transactions each watch a key and commit in turn, at a limit of \
             two",
            vec![
                (Op::MaxWatches(2), is("ok")),
                (Op::Begin(1), is("")),
                (watch(1, b"k1"), is("w0")),
                (Op::Commit(1), is("ok")),
                (Op::Begin(2), is("")),
                (watch(2, b"k2"), is("w1")),
                (Op::Commit(2), is("ok")),
                (Op::Begin(3), is("")),
                (watch(3, b"k3"), is("w2")),
                (Op::Commit(3), is("ok")),
                // A commit waits for its watches' reads: counted in order on every store.
                (Op::Settle, is("w0 pending w1 pending w2 err 1032")),
            ],
        ),
        script(
            "watch_limit: a watch of a transaction not yet committed holds its place",
            vec![
                (Op::MaxWatches(1), is("ok")),
                (Op::Begin(1), is("")),
                (watch(1, b"k1"), is("w0")),
                (get(1, b"k1"), is("none")),
                (Op::Begin(2), is("")),
                (watch(2, b"k2"), is("w1")),
                (Op::Commit(2), is("ok")),
                (Op::Settle, is("w0 pending w1 err 1032")),
                (Op::Drop(1), is("")),
                (Op::Settle, is("w0 err 1025 w1 err 1032")),
            ],
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Transaction sizes.

/// Transactions of one client (sets, clears, serializable reads, conflict keys) and the size
/// FoundationDB counts for each against its 10,000,000-byte limit, measured on a 7.3.79 cluster
/// by bisection (`differential::sizes` in tests/fdb_integration.rs checks the limit falls
/// exactly there).
pub fn size_cases() -> Vec<(&'static str, Vec<Op>, usize)> {
    use Key::{SizedTag as K, SizedTagNext as Next};
    let v50 = || Val::Sized(50);
    vec![
        (
            "a serializable read",
            vec![Op::Get(0, K("g/", 100), Serializable)],
            225,
        ),
        (
            "a snapshot read",
            vec![Op::Get(0, K("g/", 100), Snapshot)],
            0,
        ),
        ("a conflict key", vec![Op::Conflict(0, K("g/", 100))], 225),
        ("a set", vec![Op::Set(0, K("s/", 100), v50())], 419),
        ("a clear", vec![Op::Clear(0, K("s/", 100))], 470),
        (
            "a clear, then a set of the same key",
            vec![Op::Clear(0, K("s/", 100)), Op::Set(0, K("s/", 100), v50())],
            419,
        ),
        (
            "a set, then a clear of the same key",
            vec![Op::Set(0, K("s/", 100), v50()), Op::Clear(0, K("s/", 100))],
            470,
        ),
        (
            "sets of adjacent keys: one write conflict range",
            vec![
                Op::Set(0, K("s/", 100), v50()),
                Op::Set(0, Next("s/", 100), v50()),
            ],
            615,
        ),
        (
            "clears of adjacent keys: one clear range",
            vec![Op::Clear(0, K("s/", 100)), Op::Clear(0, Next("s/", 100))],
            472,
        ),
        (
            "a set and a clear of adjacent keys",
            vec![
                Op::Set(0, K("s/", 100), v50()),
                Op::Clear(0, Next("s/", 100)),
            ],
            667,
        ),
        (
            "a range read",
            vec![Op::Range(0, K("r/b", 100), K("r/e", 100), Serializable)],
            224,
        ),
        (
            "reads of adjacent keys: one read conflict range",
            vec![
                Op::Get(0, K("g/", 100), Serializable),
                Op::Get(0, Next("g/", 100), Serializable),
            ],
            226,
        ),
        (
            "a read inside a range read: one read conflict range",
            vec![
                Op::Range(0, K("r/a", 100), K("r/c", 100), Serializable),
                Op::Get(0, K("r/b", 100), Serializable),
            ],
            224,
        ),
        (
            "a read of the transaction's own write: no read conflict",
            vec![
                Op::Set(0, K("s/", 100), v50()),
                Op::Get(0, K("s/", 100), Serializable),
            ],
            419,
        ),
        (
            "a read, then a write of the same key: both",
            vec![
                Op::Get(0, K("s/", 100), Serializable),
                Op::Set(0, K("s/", 100), v50()),
            ],
            644,
        ),
        (
            "a range read around the transaction's own write",
            vec![
                Op::Set(0, K("r/b", 100), v50()),
                Op::Range(0, K("r/a", 100), K("r/c", 100), Serializable),
            ],
            868,
        ),
        (
            "a clear of a 10,005-byte key",
            vec![Op::Clear(0, K("s/", 10_005))],
            40_090,
        ),
        (
            "a clear of a 10,008-byte key",
            vec![Op::Clear(0, K("s/", 10_008))],
            40_102,
        ),
        (
            "a clear of a 10,009-byte key",
            vec![Op::Clear(0, K("s/", 10_009))],
            0,
        ),
        (
            "a conflict key of 10,008 bytes",
            vec![Op::Conflict(0, K("s/", 10_008))],
            20_041,
        ),
        (
            "a conflict key of 10,009 bytes",
            vec![Op::Conflict(0, K("s/", 10_009))],
            0,
        ),
        (
            "a read of a 10,005-byte key",
            vec![Op::Get(0, K("s/", 10_005), Serializable)],
            20_035,
        ),
        (
            "a read of a 10,009-byte key",
            vec![Op::Get(0, K("s/", 10_009), Serializable)],
            0,
        ),
    ]
}

/// Applies the one-client operations `ops` (sets, clears, reads, range reads, conflict keys)
/// to `txn` under `prefix`.
pub async fn apply<T: ElectionTxn>(txn: &T, prefix: &[u8], ops: &[Op]) {
    for op in ops {
        match op {
            Op::Set(_, k, v) => txn.set(&resolve(prefix, k), &value(v)),
            Op::Clear(_, k) => txn.clear(&resolve(prefix, k)),
            Op::Get(_, k, m) => {
                txn.get(&resolve(prefix, k), *m).await.unwrap();
            }
            Op::Range(_, b, e, m) => {
                txn.get_range(&resolve(prefix, b), &resolve(prefix, e), *m)
                    .await
                    .unwrap();
            }
            Op::Conflict(_, k) => txn.add_read_conflict_key(&resolve(prefix, k)).unwrap(),
            other => panic!("not a one-client operation: {other:?}"),
        }
    }
}

/// Whether a transaction of `ops`, plus a read of a key another transaction then changes, plus
/// sets that bring FoundationDB's count to `MAX_TRANSACTION_BYTES + over` (given that `ops`
/// count `counted` bytes), commits on `b`: `fits` if the commit fails with the conflict
/// (1020), having passed the size check; `too large` for 2101.
pub async fn size_boundary<B: Backend>(b: &B, ops: &[Op], counted: usize, over: usize) -> String {
    const FILLER_KEY: usize = 9_000;
    // A set of a 9,000-byte key to `v` bytes counts 44 + 24 + 3 × 9,000 + 1 + v.
    const FILLER_FIXED: usize = 44 + 24 + 3 * FILLER_KEY + 1;
    let prefix = padded_prefix(b);
    let read = [prefix.as_slice(), b"x"].concat();
    // The read conflict range of `read`.
    let base = 24 + 2 * read.len() + 1;
    let target = fdb_leader_election::MAX_TRANSACTION_BYTES + over - base - counted;
    let full = FILLER_FIXED + 90_000;
    let fillers = (target - FILLER_FIXED) / full + 1;
    let last = target - (fillers - 1) * full - FILLER_FIXED;
    assert!(last <= 100_000, "filler arithmetic: {last}");
    let t = b.begin();
    t.get(&read, Serializable).await.unwrap();
    apply(&t, &prefix, ops).await;
    for i in 0..fillers {
        let k = sized_key(&prefix, &format!("f/{i:04}/"), FILLER_KEY);
        let v = vec![b'v'; if i + 1 == fillers { last } else { 90_000 }];
        t.set(&k, &v);
    }
    let other = b.begin();
    other.set(&read, b"changed");
    b.commit(other).await.unwrap();
    match b.commit(t).await {
        Err(e) if e.code() == Some(1020) => "fits".to_owned(),
        Err(e) if e.code() == Some(2101) => "too large".to_owned(),
        Ok(()) => "committed".to_owned(),
        Err(e) => err(&e),
    }
}

/// `range-estimate-in-one-piece`: a serializable range read of 300 rows of 1,000 bytes, which
/// FoundationDB reads in several replies. Returns the transaction's `approximate_size` after the
/// read, and what one range of the same bounds adds to it.
pub async fn long_range_estimate<B: Backend>(b: &B) -> (usize, usize) {
    let prefix = padded_prefix(b);
    let (begin, end) = (
        [prefix.as_slice(), b"r/"].concat(),
        [prefix.as_slice(), b"r0"].concat(),
    );
    let t = b.begin();
    for i in 0..300 {
        t.set(
            &[begin.as_slice(), format!("{i:04}").as_bytes()].concat(),
            &[b'v'; 1_000],
        );
    }
    b.commit(t).await.unwrap();
    let t = b.begin();
    let rows = t.get_range(&begin, &end, Serializable).await.unwrap();
    assert_eq!(rows.len(), 300);
    let estimate = t.approximate_size().await.unwrap().unwrap();
    (estimate, 24 + begin.len() + end.len())
}

// ---------------------------------------------------------------------------------------------
// Retry loops.

/// The codes FoundationDB 7.3.79's `on_error` retries (`Transaction::onError`; the
/// multi-version client, which would also retry 1039, is bypassed without external clients):
/// written out here, independently of the crate's own list, so that the crate's list is checked
/// against it, and checked on a 7.3 cluster by the FoundationDB tier.
pub const ON_ERROR_RETRIES_7_3: [i32; 12] = [
    1007, 1009, 1020, 1021, 1037, 1038, 1042, 1051, 1078, 1079, 1213, 1223,
];

/// The codes FoundationDB 7.4.6's `on_error` retries, checked on a 7.4 cluster by the
/// FoundationDB tier: 7.3's, `transaction_throttled_hot_shard` (1235) and
/// `transaction_rejected_range_locked` (1242), which 7.4 adds (7.3 numbers a server's internal
/// error 1235, which no client receives, and has no 1242; the 7.4 cluster showed 1242 retried,
/// which this list first left out). The embedded stores retry as 7.4 does
/// ([`Difference::CodesNewIn74Retried`] on a 7.3 client).
pub const ON_ERROR_RETRIES_7_4: [i32; 14] = [
    1007, 1009, 1020, 1021, 1037, 1038, 1042, 1051, 1078, 1079, 1213, 1223, 1235, 1242,
];

/// A FoundationDB client (`libfdb_c`), by the newest API version it supports
/// (`foundationdb::api::get_max_api_version`, `fdb_get_max_api_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbClient(pub i32);

impl FdbClient {
    /// The client the embedded stores model: FoundationDB 7.4.
    pub const MODELLED: FdbClient = FdbClient(740);

    /// The codes its `on_error` retries.
    pub fn on_error_retries(self) -> &'static [i32] {
        if self.0 >= 740 {
            &ON_ERROR_RETRIES_7_4
        } else {
            &ON_ERROR_RETRIES_7_3
        }
    }
}

/// `db.transact` (bounded by `timeout`) of a body whose first attempt fails with the error
/// of `kind` and `code`: the outcome, and how many attempts ran.
pub async fn transact_failing_once<D: fdb_leader_election::runner::ElectionDatabase>(
    db: &D,
    timeout: Duration,
    kind: TxnErrorKind,
    code: Option<i32>,
) -> (Result<(), fdb_leader_election::ElectionError>, usize) {
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let outcome = db
        .transact(timeout, |_txn| {
            let error = fdb_leader_election::ElectionError::Database(error_of(kind, code));
            fail_first(&attempts, error)
        })
        .await;
    (outcome, attempts.into_inner())
}

/// A transaction body whose first attempt fails with `error` and whose later attempts
/// succeed, counted in `attempts`: what a retry loop does with the error of a kind and a code
/// (tests/differential.rs, tests/fdb_integration.rs).
pub fn fail_first<E>(
    attempts: &std::sync::atomic::AtomicUsize,
    error: E,
) -> impl std::future::Future<Output = Result<(), E>> + use<E> {
    let first = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
    async move { if first { Err(error) } else { Ok(()) } }
}

/// Every kind an error can have.
pub const KINDS: [TxnErrorKind; 6] = [
    TxnErrorKind::Conflict,
    TxnErrorKind::TooOld,
    TxnErrorKind::CommitUnknown,
    TxnErrorKind::Unavailable,
    TxnErrorKind::OtherRetryable,
    TxnErrorKind::Fatal,
];

/// The codes the retry tests give errors: none, every code the crate names, codes
/// FoundationDB's loop does not retry, and one nobody knows.
pub const CODES: [Option<i32>; 27] = [
    None,
    Some(1004),
    Some(1007),
    Some(1009),
    Some(1020),
    Some(1021),
    Some(1025),
    Some(1031),
    Some(1032),
    Some(1034),
    Some(1037),
    Some(1038),
    Some(1039),
    Some(1042),
    Some(1051),
    Some(1078),
    Some(1079),
    Some(1213),
    Some(1223),
    Some(1235),
    Some(1242),
    Some(2004),
    Some(2017),
    Some(2101),
    Some(2102),
    Some(2103),
    Some(4242),
];

/// An error of `kind` with `code`, as a closure would return it.
pub fn error_of(kind: TxnErrorKind, code: Option<i32>) -> TxnError {
    let e = TxnError::new(kind);
    match code {
        Some(c) => e.with_code(c),
        None => e,
    }
}

/// Whether FoundationDB's `Database::run`, on `client`, retries an error of `kind` and `code`
/// returned by its closure (through the adapter's conversion: a code goes to `on_error`, an
/// error without one ends the loop).
pub fn run_retries_on_foundationdb(
    client: FdbClient,
    _kind: TxnErrorKind,
    code: Option<i32>,
) -> bool {
    code.is_some_and(|c| client.on_error_retries().contains(&c))
}

/// The kind FoundationDB gives each code an error can carry, as the adapter classifies what
/// `Database::run` returns (`on_error` knows the error only by its code, so the kind a closure
/// wrote is lost): written out here, independently of the crate's table, and checked on a
/// cluster by the FoundationDB tier. Codes not listed (1025, 1034, 2004, 2017, 2101-2103, 4242
/// among [`CODES`], and 1242, which a 7.3 client does not know) are fatal; 1079 (which
/// `libfdb_c` calls retryable) is never returned, as every client retries it.
pub const KIND_OF_CODE: [(i32, TxnErrorKind); 15] = [
    (1004, TxnErrorKind::Unavailable),
    (1007, TxnErrorKind::TooOld),
    (1009, TxnErrorKind::Unavailable),
    (1020, TxnErrorKind::Conflict),
    (1021, TxnErrorKind::CommitUnknown),
    (1031, TxnErrorKind::Unavailable),
    (1037, TxnErrorKind::Unavailable),
    (1038, TxnErrorKind::Unavailable),
    (1039, TxnErrorKind::CommitUnknown),
    (1042, TxnErrorKind::Unavailable),
    (1051, TxnErrorKind::Unavailable),
    (1078, TxnErrorKind::Unavailable),
    (1213, TxnErrorKind::Unavailable),
    (1223, TxnErrorKind::Unavailable),
    (1235, TxnErrorKind::Unavailable),
];

/// What `run` returns when it stops on an error of `kind` and `code` from its closure, on every
/// store: `Kind:code`, the kind the code has ([`KIND_OF_CODE`]), or the closure's own kind for
/// an error without a code (`run_loop_errors`: before, MemDb and SQLite kept the closure's kind,
/// `Conflict:1031` where FoundationDB gave `Unavailable:1031`).
pub fn stopped_with(kind: TxnErrorKind, code: Option<i32>) -> String {
    let kind = match code {
        None => kind,
        Some(code) => KIND_OF_CODE
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(TxnErrorKind::Fatal, |(_, k)| *k),
    };
    match code {
        Some(code) => format!("{kind:?}:{code}"),
        None => format!("{kind:?}"),
    }
}

/// How a stopped `run`'s error shows in [`stopped_with`]'s form.
pub fn shown(error: &TxnError) -> String {
    match error.code() {
        Some(code) => format!("{:?}:{code}", error.kind()),
        None => format!("{:?}", error.kind()),
    }
}

/// Whether `MemDb::run` and `SqliteDb::run` retry it: as FoundationDB 7.4 does, except for an
/// error without a code ([`Difference::UncodedErrorsRetriedByKind`]).
pub fn run_retries_embedded(kind: TxnErrorKind, code: Option<i32>) -> bool {
    match code {
        None => kind.is_retryable(),
        Some(_) => run_retries_on_foundationdb(FdbClient::MODELLED, kind, code),
    }
}

/// Whether `ElectionDatabase::transact` retries it on MemDb and SQLite: a conflict or a
/// `transaction_too_old` whose code FoundationDB 7.4's `on_error` retries.
pub fn transact_retries(kind: TxnErrorKind, code: Option<i32>) -> bool {
    transact_retries_on_foundationdb(FdbClient::MODELLED, kind, code)
}

/// Whether the FoundationDB adapter's `transact`, on `client`, retries it: one the crate hands
/// to `on_error` (a conflict or a `transaction_too_old` with a code 7.4's `on_error` retries)
/// and that `client`'s `on_error` retries.
pub fn transact_retries_on_foundationdb(
    client: FdbClient,
    kind: TxnErrorKind,
    code: Option<i32>,
) -> bool {
    matches!(kind, TxnErrorKind::Conflict | TxnErrorKind::TooOld)
        && run_retries_on_foundationdb(FdbClient::MODELLED, kind, code)
        && run_retries_on_foundationdb(client, kind, code)
}

/// The `MaybeCommitted` flags FoundationDB's Rust binding (`Database::run`, foundationdb 0.11)
/// gives three attempts when the first fails with 1021 and the second with 1020: only the
/// attempt right after the unknown result is told (`maybe-committed-is-sticky`).
pub const MAYBE_COMMITTED_ON_FOUNDATIONDB: [bool; 3] = [false, true, false];

// ---------------------------------------------------------------------------------------------
// Random interleavings.

/// The traces a FoundationDB 7.3.79 cluster gave for the random interleavings of seeds
/// `0..`, recorded by the FoundationDB tier (`DIFFERENTIAL_RECORD=tests/data/...`).
pub const RECORDED: &str = include_str!("../data/differential-foundationdb.txt");

/// How the recorded random interleavings were made: seeds `0..RECORDED_SEEDS`, each
/// [`random_script`] of `RECORDED_STEPS` steps.
pub const RECORDED_SEEDS: u64 = 40;
/// See [`RECORDED_SEEDS`].
pub const RECORDED_STEPS: usize = 60;

/// [`RECORDED`], one trace per seed, in seed order.
pub fn recorded_traces() -> Vec<Vec<String>> {
    let mut traces: Vec<Vec<String>> = Vec::new();
    for line in RECORDED.lines() {
        if line.starts_with("== seed ") {
            traces.push(Vec::new());
        } else if let Some(trace) = traces.last_mut() {
            trace.push(line.to_owned());
        }
    }
    traces
}

/// `traces` (one per seed, in seed order) in [`RECORDED`]'s format.
pub fn format_recorded(traces: &[Vec<String>]) -> String {
    let mut s = format!(
        "# The differential test's random interleavings on FoundationDB 7.3.79: seeds 0..{RECORDED_SEEDS}, \
         {RECORDED_STEPS} steps each (tests/common/differential.rs). Recorded by the FoundationDB tier:\n\
         # DIFFERENTIAL_RECORD=tests/data/differential-foundationdb.txt cargo test --features ... \
         --test fdb_integration differential::random\n"
    );
    for (seed, trace) in traces.iter().enumerate() {
        let _ = writeln!(s, "== seed {seed}");
        for line in trace {
            let _ = writeln!(s, "{line}");
        }
    }
    s
}

const KEYS: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
const VALUES: [&[u8]; 3] = [b"1", b"2", b"3"];
const CLIENTS: Client = 3;

/// A random interleaving of three clients' transactions over four keys, from `seed`: about
/// `steps` operations, then every open transaction commits, the watches settle, and the data
/// is dumped.
pub fn random_script(seed: u64, steps: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut open = [false; CLIENTS];
    // Whether each open transaction has a watch: FoundationDB completes a watch's read later, so
    // the transaction does not ask its size afterwards (`watch-read-is-immediate`).
    let mut watched = [false; CLIENTS];
    let mut ops = Vec::with_capacity(steps + 8);
    let mut watches = 0;
    let key = |rng: &mut StdRng| KEYS[rng.random_range(0..KEYS.len())];
    let val = |rng: &mut StdRng| VALUES[rng.random_range(0..VALUES.len())];
    for _ in 0..steps {
        let c = rng.random_range(0..CLIENTS);
        if !open[c] {
            ops.push(Op::Begin(c));
            open[c] = true;
            watched[c] = false;
            continue;
        }
        let m = if rng.random_bool(0.3) {
            Snapshot
        } else {
            Serializable
        };
        let op = match rng.random_range(0..100) {
            0..20 => Op::Get(c, Rel(key(&mut rng)), m),
            20..28 => {
                let (x, y) = (key(&mut rng), key(&mut rng));
                // Inverted and empty ranges too.
                Op::Range(
                    c,
                    Rel(x),
                    Rel(if rng.random_bool(0.8) { y } else { b"e" }),
                    m,
                )
            }
            28..46 => Op::Set(c, Rel(key(&mut rng)), Val::Text(val(&mut rng))),
            46..54 => Op::Clear(c, Rel(key(&mut rng))),
            54..60 => Op::Conflict(c, Rel(key(&mut rng))),
            60..62 => Op::ReadVersion(c),
            62..64 if !watched[c] => Op::ApproxSize(c),
            64..68 if watches < 6 => {
                watches += 1;
                watched[c] = true;
                // FoundationDB's watch takes the read version later, if it is the first read:
                // take it first, so that a concurrent commit cannot slip in between.
                ops.push(Op::ReadVersion(c));
                // And the watching transaction writes, so that a change of the watched key
                // before it commits is a conflict: a read-only one would arm the watch at its
                // read version, where a change and a change back may fire FoundationDB's
                // (`aba-watch-stays-quiet`).
                ops.push(Op::Set(c, Rel(b"w"), Val::Text(b"x")));
                Op::Watch(c, Rel(key(&mut rng)))
            }
            68..72 => Op::Put(Rel(key(&mut rng)), Val::Text(val(&mut rng))),
            72..90 => {
                open[c] = false;
                Op::Commit(c)
            }
            90..95 => {
                open[c] = false;
                Op::Drop(c)
            }
            _ => Op::Get(c, Rel(key(&mut rng)), m),
        };
        ops.push(op);
    }
    for (c, is_open) in open.iter().enumerate() {
        if *is_open {
            ops.push(Op::Commit(c));
        }
    }
    ops.push(Op::Settle);
    ops.push(Op::Dump);
    ops
}
