//! The workload's own records in the database: a log of every acquisition, vacancy, heartbeat
//! and fenced write, each written **in the transaction that did it**, keyed by an incomplete
//! versionstamp (so the log is in commit order and holds exactly the transactions that
//! committed, whatever their callers were told); the fenced counter; and each tester's belief
//! intervals, written at the end of the run. The check phase replays them.

use fdb_leader_election::Subspace;
use foundationdb::options::{MutationType, StreamingMode};
use foundationdb::tuple::Versionstamp;
use foundationdb::{RangeOption, Transaction};
use serde::{Deserialize, Serialize};

/// The workload's keys, beside the election's subspace.
pub(crate) fn space() -> Subspace {
    Subspace::from("leader-election-workload")
}

/// The fenced counter: every fenced write reads it and writes it plus one.
pub(crate) fn counter_key() -> Vec<u8> {
    space().pack(&("counter",))
}

/// A shard's fenced counter.
pub(crate) fn shard_counter_key(shard: u32) -> Vec<u8> {
    space().pack(&("counter", u64::from(shard)))
}

/// The log's range.
pub(crate) fn log_range() -> (Vec<u8>, Vec<u8>) {
    space().subspace(&("log",)).range()
}

/// The belief intervals' range.
pub(crate) fn beliefs_range() -> (Vec<u8>, Vec<u8>) {
    space().subspace(&("belief",)).range()
}

/// The testers' counts' range.
pub(crate) fn stats_range() -> (Vec<u8>, Vec<u8>) {
    space().subspace(&("stats",)).range()
}

/// The key of tester `client`'s counts.
pub(crate) fn stats_key(client: u32) -> Vec<u8> {
    space().pack(&("stats", u64::from(client)))
}

/// The key of tester `client`'s `n`-th belief interval.
pub(crate) fn belief_key(client: u32, n: u64) -> Vec<u8> {
    space().pack(&("belief", u64::from(client), n))
}

/// A registration as a transaction read it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) version: Option<String>,
    pub(crate) eligible: bool,
    pub(crate) live: bool,
    pub(crate) heartbeat: u64,
}

/// The leader record an acquisition replaced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Prior {
    pub(crate) ballot: u64,
    pub(crate) owner: Option<String>,
    pub(crate) reservation: Option<String>,
    pub(crate) leader_version: Option<String>,
}

/// One logged transaction.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum Entry {
    /// A cycle (or the planted raw takeover) acquired `ballot`.
    Acquired {
        ballot: u64,
        candidate: String,
        version: Option<String>,
        prior: Prior,
        /// Simulated time at which the cycle decided (inside the transaction).
        decided_at: f64,
        policy: String,
        /// The configuration's reservation timeout and heartbeat (seconds) and clock bound,
        /// as read.
        reservation_timeout: f64,
        heartbeat: f64,
        rho_ppm: u32,
        /// The registry the transaction read.
        registry: Vec<Row>,
    },
    /// A leader wrote a vacancy over its own record.
    Vacancy {
        ballot: u64,
        by: String,
        reserved_for: Option<String>,
        why: String,
    },
    /// A cycle wrote this heartbeat; the attempt that committed started at `started_at`
    /// (simulated time), so it committed no earlier.
    Heartbeat {
        candidate: String,
        heartbeat: u64,
        started_at: f64,
    },
    /// A fenced write of `ballot` set the counter to `counter`.
    Work {
        ballot: u64,
        candidate: String,
        counter: u64,
    },
    /// A member cycle acquired `shard` at `ballot`.
    ShardAcquired {
        shard: u32,
        ballot: u64,
        member: String,
    },
    /// A fenced write of `shard` at `ballot` set the shard's counter to `counter`.
    ShardWork {
        shard: u32,
        ballot: u64,
        member: String,
        counter: u64,
    },
}

/// A span of simulated time during which `candidate` believed it led `ballot` of `scope`:
/// the election (`""`; in the sharded workload, its coordinator election), or a shard
/// (`"shard N"`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Interval {
    #[serde(default)]
    pub(crate) scope: String,
    pub(crate) candidate: String,
    pub(crate) ballot: u64,
    pub(crate) start: f64,
    pub(crate) end: f64,
}

/// Writes `entries` into the log, in `trx`: each under a key completed by the commit's
/// versionstamp (and its position in the transaction).
pub(crate) fn append(trx: &Transaction, entries: &[Entry]) {
    append_at(trx, 0, entries);
}

/// As [`append`], numbering the entries within the transaction from `first` (a second
/// append in one transaction must not reuse the first one's numbers).
pub(crate) fn append_at(trx: &Transaction, first: u16, entries: &[Entry]) {
    let log = space().subspace(&("log",));
    for (n, entry) in entries.iter().enumerate() {
        let n = u16::try_from(n).unwrap_or(u16::MAX).saturating_add(first);
        let key = log.pack_with_versionstamp(&Versionstamp::incomplete(n));
        // Serializing these plain structs cannot fail; an empty value would be reported
        // corrupt by the check phase.
        let value = serde_json::to_vec(entry).unwrap_or_default();
        trx.atomic_op(&key, &value, MutationType::SetVersionstampedKey);
    }
}

/// Reads the range `[begin, end)` in pages, each in a transaction of its own (a large log
/// does not fit one transaction's five seconds).
pub(crate) async fn read_all(
    db: &foundationdb::Database,
    begin: Vec<u8>,
    end: Vec<u8>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, foundationdb::FdbBindingError> {
    const PAGE: usize = 500;
    let mut out = Vec::new();
    let mut from = begin;
    loop {
        let (from_now, end_now) = (from.clone(), end.clone());
        let page = db
            .run(move |trx, _| {
                let (from, end) = (from_now.clone(), end_now.clone());
                async move {
                    let mut opt = RangeOption::from((from, end));
                    opt.limit = Some(PAGE);
                    opt.mode = StreamingMode::WantAll;
                    let values = trx.get_range(&opt, 1, true).await?;
                    let rows = values
                        .iter()
                        .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
                        .collect::<Vec<_>>();
                    Ok((rows, values.more()))
                }
            })
            .await?;
        let (page, more) = page;
        let full = more && !page.is_empty();
        if let Some((last, _)) = page.last() {
            let mut next = last.clone();
            next.push(0);
            from = next;
        }
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}
