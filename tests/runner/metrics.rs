//! The runner's metrics, recorded through the `metrics` facade into a thread-local debugging
//! recorder (the paused-time test runtime runs every task on this thread).

use crate::runner_support::*;
use fdb_leader_election::runner::metrics as names;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// One snapshot of the recorder (taking a snapshot consumes what it reports, so every
/// phase of the test reads one snapshot).
struct Snap(Vec<Entry>);

/// A metric's name, labels and value.
type Entry = (String, Vec<(String, String)>, DebugValue);

impl Snap {
    fn take(snapshotter: &Snapshotter) -> Self {
        Snap(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, v)| {
                    let k = key.key();
                    let labels = k
                        .labels()
                        .map(|l| (l.key().to_owned(), l.value().to_owned()))
                        .collect();
                    (k.name().to_owned(), labels, v)
                })
                .collect(),
        )
    }

    /// The value of `name` for election "test" with the given extra label, if recorded.
    fn value(&self, name: &str, label: Option<(&str, &str)>) -> Option<&DebugValue> {
        self.0.iter().find_map(|(n, labels, v)| {
            let has = |(k, val): (&str, &str)| labels.iter().any(|(lk, lv)| lk == k && lv == val);
            (n == name && has(("election", "test")) && label.is_none_or(has)).then_some(v)
        })
    }

    fn gauge(&self, name: &str) -> f64 {
        match self.value(name, None) {
            Some(DebugValue::Gauge(g)) => g.into_inner(),
            other => panic!("{name}: {other:?}"),
        }
    }

    fn counter(&self, name: &str, label: (&str, &str)) -> u64 {
        match self.value(name, Some(label)) {
            Some(DebugValue::Counter(c)) => *c,
            None => 0,
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn leadership_renewals_failures_and_candidates_are_measured() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let (db, faults) = faulty_db();
    let a = builder(db.clone(), "a", 1)
        .election_name("test")
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    // b reports under another label, so the "test" series are a's alone.
    let b = builder(db.clone(), "b", 1)
        .election_name("other")
        .start()
        .unwrap();
    tokio::time::sleep(HEARTBEAT * 5).await;

    assert!(guard.is_valid());
    let m = Snap::take(&snap);
    assert_eq!(m.gauge(names::IS_LEADER), 1.0);
    assert_eq!(m.gauge(names::BALLOT), 1.0);
    assert_eq!(m.counter(names::TRANSITIONS, ("reason", "elected")), 1);
    match m.value(names::RENEW_DURATION, None) {
        Some(DebugValue::Histogram(h)) => assert!(h.len() >= 5, "{} renewals", h.len()),
        other => panic!("{other:?}"),
    }
    let remaining = m.gauge(names::LEASE_REMAINING);
    assert!(
        remaining > 0.0 && remaining <= LEASE.as_secs_f64(),
        "{remaining}"
    );
    // Counted when the leader changed (b saw a as leader; a counted itself and b's
    // registration may or may not have been there then).
    assert!(m.gauge(names::CANDIDATES) >= 1.0);
    b.shutdown().await;

    // The database goes away: failed renewals by kind, then the loss.
    faults.set_unavailable(true);
    tokio::time::sleep(LEASE * 2).await;
    let m = Snap::take(&snap);
    assert!(m.counter(names::RENEW_FAILURES, ("kind", "unavailable")) >= 2);
    assert!(m.counter(names::CYCLE_FAILURES, ("kind", "unavailable")) >= 2);
    assert_eq!(
        m.counter(names::TRANSITIONS, ("reason", "lease_expired")),
        1
    );
    assert_eq!(m.gauge(names::IS_LEADER), 0.0);
    assert_eq!(m.gauge(names::LEASE_REMAINING), 0.0);
    assert!(m.counter(names::LEADER_CHANGES, ("reason", "lease_lapsed")) >= 1);
    faults.set_unavailable(false);
    a.shutdown().await;
}
