//! The runner's health checks (docs/design.md §13.4, §13.5), in tokio's paused time: a leader health
//! check judges only the leader, whose failure hands the leadership to an eligible follower
//! within about a cycle and keeps the old leader ineligible for the cool-down; readiness gates
//! every candidate; a slow or hanging check delays no renewal; the eligibility (an operator's
//! mark included) is reported by the handle, the callbacks and the gauge.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::runner::{
    CheckSettings, ElectionCallbacks, ElectionDatabase, Runner, StopReason,
};
use fdb_leader_election::{Eligibility, MemDb, UnhealthyPolicy};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A candidate's "child": its port is open while the candidate leads (a task of the test
/// opens it at each election and closes it when the guard is cancelled), unless broken.
#[derive(Clone, Default)]
struct Child {
    open: Arc<AtomicBool>,
    broken: Arc<AtomicBool>,
    checks: Arc<AtomicU32>,
}

impl Child {
    /// The check of the child's port: what `--health-url http://127.0.0.1:PORT/` does.
    fn check(&self) -> impl Fn() -> std::future::Ready<Result<(), String>> + Send + Sync + 'static {
        let child = self.clone();
        move || {
            child.checks.fetch_add(1, Ordering::SeqCst);
            let up = child.open.load(Ordering::SeqCst) && !child.broken.load(Ordering::SeqCst);
            std::future::ready(if up {
                Ok(())
            } else {
                Err("connection refused".to_owned())
            })
        }
    }

    /// Runs the child while `runner` leads, for the rest of the test.
    fn supervise(&self, runner: &Runner) {
        let (child, runner) = (self.clone(), runner.clone());
        tokio::spawn(async move {
            while let Some(guard) = runner.elected().await {
                child.open.store(true, Ordering::SeqCst);
                guard.cancelled().await;
                child.open.store(false, Ordering::SeqCst);
            }
        });
    }
}

/// Every eligibility `runner` published, from now on.
fn record_eligibility(runner: &Runner) -> Arc<Mutex<Vec<Eligibility>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut updates = runner.eligibility_updates();
    let out = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            out.lock()
                .unwrap()
                .push(updates.borrow_and_update().clone());
            if updates.changed().await.is_err() {
                return;
            }
        }
    });
    seen
}

fn fast_checks() -> CheckSettings {
    CheckSettings::new(ms(50), ms(20), 2, 1).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_leader_health_check_never_judges_followers_and_an_eligible_follower_takes_over() {
    let db = db();
    let start = |name: &str, child: &Child| {
        let r = builder(db.clone(), name, 1)
            .leader_health_check(fast_checks(), child.check())
            .start()
            .unwrap();
        child.supervise(&r);
        r
    };
    let (ca, cb, cc) = (Child::default(), Child::default(), Child::default());
    let a = start("a", &ca);
    let guard_a = a.elected().await.unwrap();
    let b = start("b", &cb);
    let c = start("c", &cc);
    let (seen_b, seen_c) = (record_eligibility(&b), record_eligibility(&c));

    // Healthy: a keeps leading; the followers' children are not running, and they are not
    // checked (a check on every candidate would make them all ineligible).
    tokio::time::sleep(LEASE * 10).await;
    assert!(a.is_leader() && guard_a.is_valid());
    assert!(ca.checks.load(Ordering::SeqCst) >= 50);
    assert_eq!(cb.checks.load(Ordering::SeqCst), 0);
    assert_eq!(cc.checks.load(Ordering::SeqCst), 0);

    // a's child stops answering: after `fall` failed checks a hands over to b or c.
    ca.broken.store(true, Ordering::SeqCst);
    let broke = Instant::now();
    wait_until("a steps down", LEASE, || guard_a.is_cancelled()).await;
    assert!(
        matches!(
            guard_a.stop_reason(),
            Some(StopReason::Ineligible { to: Some(_) })
        ),
        "{:?}",
        guard_a.stop_reason()
    );
    let took = wait_until("b or c leads", LEASE, || b.is_leader() || c.is_leader()).await
        + broke.elapsed();
    // Two failed checks (100 ms), then a cycle and the successor's: no lease waited for.
    assert!(took < ms(200), "{took:?}");
    let (new, new_child) = if b.is_leader() { (&b, &cb) } else { (&c, &cc) };
    assert_eq!(
        a.eligibility().reason(),
        Some("cooling down after stepping down for health")
    );
    // The new leader's check runs, and passes: it keeps leading.
    tokio::time::sleep(LEASE * 3).await;
    assert!(new.is_leader() && new_child.checks.load(Ordering::SeqCst) >= 10);

    // a stays ineligible for the cool-down (one lease by default), then is eligible again
    // (and, a follower now, is not checked).
    let since = broke.elapsed();
    assert!(since < LEASE * 4);
    wait_until("a eligible again", LEASE * 2, || {
        a.eligibility().is_eligible()
    })
    .await;
    // Followers were eligible the whole time.
    for seen in [&seen_b, &seen_c] {
        let seen = seen.lock().unwrap();
        assert!(
            !seen.is_empty() && seen.iter().all(Eligibility::is_eligible),
            "{seen:?}"
        );
    }
    for r in [&a, &b, &c] {
        r.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_cool_down_keeps_the_old_leader_ineligible_for_one_lease_by_default() {
    let db = db();
    let (ca, cb) = (Child::default(), Child::default());
    let a = builder(db.clone(), "a", 1)
        .leader_health_check(fast_checks(), ca.check())
        .start()
        .unwrap();
    ca.supervise(&a);
    let guard_a = a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 1)
        .leader_health_check(fast_checks(), cb.check())
        .start()
        .unwrap();
    cb.supervise(&b);
    tokio::time::sleep(LEASE).await;
    ca.broken.store(true, Ordering::SeqCst);
    wait_until("a steps down", LEASE, || guard_a.is_cancelled()).await;
    let stepped_down = Instant::now();
    wait_until("a eligible again", LEASE * 3, || {
        a.eligibility().is_eligible()
    })
    .await;
    let cooled = stepped_down.elapsed();
    assert!(
        cooled >= LEASE - ms(5) && cooled <= LEASE + ms(20),
        "cool-down {cooled:?}, lease {LEASE:?}"
    );
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn readiness_gates_every_candidate_from_its_first_registration() {
    let db = db();
    let ready_a = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ready_a);
    let a = builder(db.clone(), "a", 5)
        .readiness_check(fast_checks(), move || {
            let ready = flag.load(Ordering::SeqCst);
            async move {
                if ready {
                    Ok(())
                } else {
                    Err("database unreachable".to_owned())
                }
            }
        })
        .start()
        .unwrap();
    // Not eligible before its first answer: its first registration says so.
    assert_eq!(a.eligibility().reason(), Some("readiness: not checked yet"));
    let b = builder(db.clone(), "b", 1).start().unwrap();
    let guard_b = b.elected().await.unwrap();
    tokio::time::sleep(LEASE * 5).await;
    assert!(!a.is_leader() && guard_b.is_valid());
    assert_eq!(
        a.eligibility().reason(),
        Some("not ready: database unreachable")
    );
    let listed = list(&db).await;
    assert!(
        listed
            .iter()
            .any(|(name, e)| name.starts_with("a-") && !e.is_eligible()),
        "{listed:?}"
    );
    // Ready: a is eligible (rise 1), outranks b, and takes over by handover.
    ready_a.store(true, Ordering::SeqCst);
    wait_until("a leads", LEASE * 3, || a.is_leader()).await;
    // A leader whose readiness fails hands over to the best live eligible candidate.
    ready_a.store(false, Ordering::SeqCst);
    wait_until("b leads", LEASE * 3, || b.is_leader()).await;
    assert!(!a.is_leader());
    b.shutdown().await;
    a.shutdown().await;
}

/// The registry's eligibility, by candidate id.
async fn list(db: &MemDb) -> Vec<(String, Eligibility)> {
    let election = fdb_leader_election::LeaderElection::new(subspace());
    db.transact(ms(100), move |txn| {
        let election = election.clone();
        async move { election.list_candidates(&txn).await }
    })
    .await
    .unwrap()
    .into_iter()
    .map(|c| (c.id.to_string(), c.record.eligibility().clone()))
    .collect()
}

#[tokio::test(start_paused = true)]
async fn a_check_that_sleeps_past_several_leases_delays_no_renewal() {
    let db = db();
    let writes = LeaderWrites::install(&db);
    let slow = CheckSettings::new(ms(50), LEASE * 10, 1, 1).unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    // Each run takes five leases (and passes): slower than any renewal may be late.
    let sleepy = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async {
            tokio::time::sleep(LEASE * 5).await;
            Ok(())
        }
    };
    let a = builder(db.clone(), "a", 1)
        .leader_health_check(slow, sleepy.clone())
        .readiness_check(
            CheckSettings::new(ms(50), LEASE * 10, 1, 1).unwrap(),
            // The first answer at once (readiness gates eligibility), then slow ones.
            {
                let first = Arc::new(AtomicBool::new(true));
                move || {
                    let quick = first.swap(false, Ordering::SeqCst);
                    async move {
                        if !quick {
                            tokio::time::sleep(LEASE * 5).await;
                        }
                        Ok(())
                    }
                }
            },
        )
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    let before = writes.get();
    tokio::time::sleep(LEASE * 20).await;
    // Renewed every heartbeat (80-100% of it, jittered) all along: ~60 to 75 writes.
    let renewals = writes.get() - before;
    assert!(renewals >= 55, "{renewals} renewals in 20 leases");
    assert!(guard.is_valid() && a.health().is_ok() && a.eligibility().is_eligible());
    assert!(calls.load(Ordering::SeqCst) >= 3, "the slow check ran");
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_check_that_never_answers_fails_at_its_timeout_and_a_lone_leader_holds() {
    let db = db();
    let writes = LeaderWrites::install(&db);
    let a = builder(db.clone(), "a", 1)
        .leader_health_check(CheckSettings::new(ms(50), ms(20), 1, 1).unwrap(), || {
            std::future::pending::<Result<(), String>>()
        })
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    wait_until("ineligible", LEASE, || !a.eligibility().is_eligible()).await;
    assert_eq!(
        a.eligibility().reason(),
        Some("leader health check failed: no answer within 20 ms")
    );
    // Nobody else is eligible: it holds (the default policy), renewing on time.
    let before = writes.get();
    tokio::time::sleep(LEASE * 10).await;
    assert!(guard.is_valid() && a.health().is_ok());
    assert!(writes.get() - before >= 25);
    // An eligible candidate appears: the leader hands over to it.
    let b = builder(db.clone(), "b", 1).start().unwrap();
    let guard_b = b.elected().await.unwrap();
    assert!(guard.is_cancelled() && guard_b.ballot() > guard.ballot());
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn under_release_a_lone_unhealthy_leader_lets_go() {
    let db = db();
    let a = builder(db.clone(), "a", 1)
        .leader_health_check(CheckSettings::new(ms(50), ms(20), 1, 1).unwrap(), || {
            std::future::ready(Err::<(), _>("down".to_owned()))
        })
        .unhealthy_policy(UnhealthyPolicy::Release)
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    wait_until("a lets go", LEASE, || guard.is_cancelled()).await;
    assert_eq!(
        guard.stop_reason(),
        Some(StopReason::Ineligible { to: None })
    );
    a.shutdown().await;
}

/// A leader's step-down for health is a cycle away, not a heartbeat: with a 1 s heartbeat,
/// the successor leads well under it after the check's `fall`-th failure.
#[tokio::test(start_paused = true)]
async fn an_unhealthy_leader_steps_down_within_a_cycle_not_a_heartbeat() {
    let db = db();
    let slow_heartbeat = fdb_leader_election::ElectionConfig::builder()
        .lease_duration(ms(3_000))
        .heartbeat_interval(ms(1_000))
        .transaction_timeout(ms(30))
        .build()
        .unwrap();
    let (ca, cb) = (Child::default(), Child::default());
    let every_10ms = CheckSettings::new(ms(10), ms(5), 1, 1).unwrap();
    let start = |name: &str, child: &Child| {
        let r = builder(db.clone(), name, 1)
            .config(slow_heartbeat.clone())
            .leader_health_check(every_10ms, child.check())
            .start()
            .unwrap();
        child.supervise(&r);
        r
    };
    let a = start("a", &ca);
    let guard_a = a.elected().await.unwrap();
    let b = start("b", &cb);
    tokio::time::sleep(ms(2_500)).await;
    assert!(guard_a.is_valid());
    for late in [0, 330, 670] {
        // Wherever in its heartbeat the leader is.
        tokio::time::sleep(ms(late)).await;
        let (leader, child, other) = if a.is_leader() {
            (&a, &ca, &b)
        } else {
            (&b, &cb, &a)
        };
        let guard = leader.leadership().unwrap();
        child.broken.store(true, Ordering::SeqCst);
        let broke = Instant::now();
        let took = wait_until("the other leads", ms(3_000), || other.is_leader()).await;
        assert!(guard.is_cancelled());
        // One check (10 ms), the leader's cycle, the successor's: far below a heartbeat.
        assert!(
            took < ms(100),
            "{took:?} after the check started failing (late {late})"
        );
        let _ = broke;
        child.broken.store(false, Ordering::SeqCst);
        // Past the cool-down (3 s), both are eligible again.
        tokio::time::sleep(ms(3_100)).await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Eligibility>>>);

impl ElectionCallbacks for Recorder {
    fn on_eligibility_changed(&self, eligibility: &Eligibility) {
        self.0.lock().unwrap().push(eligibility.clone());
    }
}

#[tokio::test(start_paused = true)]
async fn an_operators_mark_is_reported_like_the_checks_and_lifting_it_restores_eligibility() {
    let db = db();
    let recorder = Recorder::default();
    let a = builder(db.clone(), "a", 1)
        .callbacks(recorder.clone())
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    assert!(a.eligibility().is_eligible());
    let mark = |eligible: bool| {
        let election = a.election().clone();
        let db = db.clone();
        async move {
            db.transact(ms(100), move |txn| {
                let election = election.clone();
                async move {
                    election
                        .set_eligible(&txn, "a", eligible, "disk replacement")
                        .await
                }
            })
            .await
            .unwrap();
        }
    };
    mark(false).await;
    wait_until("marked", LEASE, || !a.eligibility().is_eligible()).await;
    assert_eq!(a.eligibility().reason(), Some("disk replacement"));
    // Alone: it holds.
    tokio::time::sleep(LEASE).await;
    assert!(guard.is_valid());
    mark(true).await;
    wait_until("unmarked", LEASE, || a.eligibility().is_eligible()).await;
    tokio::time::sleep(HEARTBEAT).await;
    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            Eligibility::ineligible("disk replacement").unwrap(),
            Eligibility::Eligible
        ]
    );
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn observers_take_no_checks() {
    let observer = Runner::observer(db(), subspace())
        .readiness_check(fast_checks(), || std::future::ready(Ok(())))
        .start();
    assert!(observer.is_err_and(|e| e.to_string().contains("readiness_check")));
    let long = builder(db(), "a", 1)
        .health_cool_down(Duration::from_secs(400 * 86_400))
        .start();
    assert!(long.is_err_and(|e| e.to_string().contains("health_cool_down")));
}
