//! The leader-change stream and the callbacks, in tokio's paused time: no duplicate or
//! missing events across preemption, handover, resign, crash and shutdown, for candidates and
//! observers alike; the observer always knows the leader's address.

use std::collections::BTreeMap;

use crate::runner_support::*;
use fdb_leader_election::runner::{ChangeReason, LeaderChange, Runner, StopReason};
use fdb_leader_election::{Ballot, Priority};
use tokio::sync::broadcast::error::TryRecvError;

/// Everything a subscription received so far.
fn drain(rx: &mut tokio::sync::broadcast::Receiver<LeaderChange>) -> Vec<LeaderChange> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(c) => out.push(c),
            Err(TryRecvError::Empty | TryRecvError::Closed) => return out,
            Err(TryRecvError::Lagged(n)) => panic!("lagged by {n}"),
        }
    }
}

/// The stream's invariants: it chains (each `old` is the previous `new`), never repeats a
/// state, and names each ballot as the new leader at most once, in increasing order.
fn check_stream(who: &str, changes: &[LeaderChange]) {
    let mut prev: Option<&LeaderChange> = None;
    let mut ballots = Vec::new();
    for c in changes {
        assert_ne!(c.old, c.new, "{who}: an event that changes nothing: {c:?}");
        if let Some(p) = prev {
            assert_eq!(p.new, c.old, "{who}: a gap between {p:?} and {c:?}");
        }
        if let Some(n) = &c.new {
            if c.reason != ChangeReason::PayloadChanged && c.reason != ChangeReason::Discovered {
                assert!(
                    ballots.last().is_none_or(|b| *b < n.ballot),
                    "{who}: ballot {} reported twice or out of order in {changes:#?}",
                    n.ballot
                );
                ballots.push(n.ballot);
            }
        }
        prev = Some(c);
    }
}

#[tokio::test(start_paused = true)]
async fn every_runner_sees_every_leader_once_and_callbacks_pair_up() {
    let db = db();
    let observer = Runner::observer(db.clone(), subspace())
        .config(config())
        .start()
        .unwrap();
    let mut obs_rx = observer.subscribe();

    let recs: Vec<Recorder> = (0..3).map(|_| Recorder::default()).collect();
    let a = builder(db.clone(), "a", 1)
        .callbacks(recs[0].clone())
        .start()
        .unwrap();
    let mut a_rx = a.subscribe();
    a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 1)
        .callbacks(recs[1].clone())
        .start()
        .unwrap();
    let mut b_rx = b.subscribe();
    tokio::time::sleep(HEARTBEAT * 3).await;

    // 1. c (priority 2) preempts a.
    let c = builder(db.clone(), "c", 2)
        .callbacks(recs[2].clone())
        .start()
        .unwrap();
    let mut c_rx = c.subscribe();
    let gc = c.elected().await.unwrap();
    tokio::time::sleep(HEARTBEAT * 3).await;
    // 2. c resigns: the vacancy goes to a (registered before b).
    c.candidate().unwrap().set_priority(Priority::new(1));
    tokio::time::sleep(HEARTBEAT * 2).await;
    c.resign().await.unwrap();
    tokio::time::sleep(HEARTBEAT * 3).await;
    let ga = a.leadership().expect("a took the reservation");
    assert!(ga.ballot() > gc.ballot());
    // 3. a crashes: b or c take over after a lease.
    a.abort();
    // Long enough for a's registration to lag more than candidate_timeout behind the renewals:
    // then it counts as dead, and the shutdown below reserves for a live candidate.
    tokio::time::sleep(LEASE * 4).await;
    let successor = [&b, &c]
        .into_iter()
        .find(|r| r.is_leader())
        .expect("a successor")
        .clone();
    // 4. the successor shuts down: the other one takes over at once.
    successor.shutdown().await;
    tokio::time::sleep(HEARTBEAT * 3).await;
    let last = [&b, &c]
        .into_iter()
        .find(|r| r.is_leader())
        .expect("a last leader")
        .clone();
    let last_ballot = last.leadership().unwrap().ballot();
    assert_eq!(
        last_ballot,
        Ballot::new(5),
        "one ballot per change of ownership"
    );

    // Streams.
    for (who, rx) in [
        ("observer", &mut obs_rx),
        ("a", &mut a_rx),
        ("b", &mut b_rx),
        ("c", &mut c_rx),
    ] {
        let changes = drain(rx);
        check_stream(who, &changes);
        assert!(!changes.is_empty(), "{who} saw nothing");
    }
    // Everyone still running agrees on the current leader.
    for r in [&observer, &last] {
        assert_eq!(r.leader().map(|l| l.ballot), Some(last_ballot));
    }

    // Callbacks: exactly one elected and one stopped per ballot, elected first; ballots
    // across all candidates are 1..=5 with no gaps and no duplicates.
    let mut elected: BTreeMap<Ballot, usize> = BTreeMap::new();
    for (i, rec) in recs.iter().enumerate() {
        let all = rec.all();
        for b in rec.elected() {
            *elected.entry(b).or_default() += 1;
            let e_at = all
                .iter()
                .position(|(_, s)| matches!(s, Seen::Elected(x, _) if *x == b));
            let s_at: Vec<_> = all
                .iter()
                .enumerate()
                .filter(|(_, (_, s))| matches!(s, Seen::Stopped(x, _) if *x == b))
                .map(|(k, _)| k)
                .collect();
            if b != last_ballot {
                assert_eq!(
                    s_at.len(),
                    1,
                    "candidate {i}: ballot {b} stopped {} times",
                    s_at.len()
                );
                assert!(e_at.unwrap() < s_at[0]);
            } else {
                assert!(s_at.is_empty());
            }
        }
        let stops = rec.stopped();
        let mut seen = stops.iter().map(|(b, _)| *b).collect::<Vec<_>>();
        seen.dedup();
        assert_eq!(
            seen.len(),
            stops.len(),
            "candidate {i}: a duplicate stop in {stops:?}"
        );
        check_stream(&format!("callbacks {i}"), &rec.changes());
    }
    assert_eq!(
        elected.keys().copied().collect::<Vec<_>>(),
        (1..=5).map(Ballot::new).collect::<Vec<_>>()
    );
    assert!(elected.values().all(|n| *n == 1), "{elected:?}");
    // The reasons: a handed over (1), c resigned (3), a stopped with its task (4).
    let a_stops = recs[0].stopped();
    assert_eq!(
        a_stops[0].1,
        StopReason::HandedOver {
            to: c.id().cloned()
        }
    );
    assert_eq!(a_stops[1].1, StopReason::RunnerStopped);
    assert_eq!(recs[2].stopped()[0], (gc.ballot(), StopReason::Resigned));

    observer.shutdown().await;
    b.shutdown().await;
    c.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_observer_always_knows_the_leaders_address_and_sees_lapses() {
    for watches in [true, false] {
        let db = db();
        db.set_watches_enabled(watches);
        let observer = Runner::observer(db.clone(), subspace())
            .config(config())
            .start()
            .unwrap();
        let mut rx = observer.subscribe();
        assert!(observer.candidate().is_none());
        assert!(
            observer.elected().await.is_none(),
            "observers are never elected"
        );
        let a = builder(db.clone(), "a", 1).start().unwrap();
        a.elected().await.unwrap();
        let known = wait_until("the observer sees a", HEARTBEAT * 2, || {
            observer.leader().is_some()
        })
        .await;
        assert!(
            known <= HEARTBEAT + HEARTBEAT / 10,
            "watches={watches}: {known:?}"
        );
        assert_eq!(observer.leader().unwrap().payload_str(), Some("a:7000"));

        // The leader moves its service: the observer follows the payload.
        a.candidate()
            .unwrap()
            .set_payload(Some(b"a:7001".to_vec()))
            .unwrap();
        wait_until("the new address", HEARTBEAT * 3, || {
            observer
                .leader()
                .and_then(|l| l.payload_str().map(String::from))
                .as_deref()
                == Some("a:7001")
        })
        .await;

        // The leader crashes with nobody to take over: the observer reports the lapse after
        // a lease of unchanged record (not before), then the candidate that takes over.
        a.abort();
        let lapsed = wait_until("the lapse", LEASE * 2, || observer.leader().is_none()).await;
        assert!(
            lapsed >= LEASE - HEARTBEAT,
            "watches={watches}: lapse after {lapsed:?}"
        );
        let b = builder(db.clone(), "b", 1).start().unwrap();
        b.elected().await.unwrap();
        wait_until("b", HEARTBEAT * 2, || {
            observer.leader().map(|l| l.ballot) == Some(Ballot::new(2))
        })
        .await;
        assert_eq!(observer.leader().unwrap().payload_str(), Some("b:7000"));

        let changes = drain(&mut rx);
        check_stream("observer", &changes);
        let reasons: Vec<_> = changes.iter().map(|c| c.reason.clone()).collect();
        // The observer may or may not have seen the vacancy before a filled it.
        assert!(
            matches!(
                reasons.first(),
                Some(ChangeReason::Acquired | ChangeReason::Discovered)
            ),
            "{reasons:?}"
        );
        assert!(
            reasons.contains(&ChangeReason::PayloadChanged),
            "{reasons:?}"
        );
        assert!(reasons.contains(&ChangeReason::LeaseLapsed), "{reasons:?}");
        assert!(observer.health().is_ok());
        observer.shutdown().await;
        b.shutdown().await;
    }
}

/// The leader a guard's holder reads is never behind the guard: right after `elected()`
/// returns, `leader()` names this runner at the guard's ballot, on a runtime whose threads run
/// the waiter while the runner is still applying the cycle's commands (real time, many
/// rounds: before the fix, `leader()` was `None` after a handover in most of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_names_the_new_leader_as_soon_as_elected_returns() {
    for round in 0..10 {
        let db = db();
        let a = builder(db.clone(), "a", 1).start().unwrap();
        let first = a.elected().await.unwrap();
        let leader = a.leader().unwrap();
        assert_eq!(
            (Some(&leader.id), leader.ballot),
            (a.id(), first.fencing_token()),
            "round {round}: the first leader"
        );
        let b = builder(db.clone(), "b", 1).start().unwrap();
        // b registers; then a hands over to it on shutdown (a reservation: ballot 2 at once).
        tokio::time::sleep(HEARTBEAT * 2).await;
        a.shutdown().await;
        let guard = b.elected().await.unwrap();
        let leader = b
            .leader()
            .unwrap_or_else(|| panic!("round {round}: no leader"));
        assert_eq!(
            (Some(&leader.id), leader.ballot),
            (b.id(), guard.fencing_token()),
            "round {round}: the leader after the handover"
        );
        b.shutdown().await;
    }
}
