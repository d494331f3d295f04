//! Adversarial review of the sharded runner (docs/design.md §7, §10.6, §12.5): a guard ends at its
//! deadline even while a cycle hangs, a handover whose commit failed is written again, the
//! stored configuration paces the member, and no closed guard is kept (nor a cycle loop) when
//! a move is withdrawn.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fdb_leader_election::memdb::{
    CommitContext, CommitDecision, FaultInjector, ReadContext, ReadDecision, ReadTarget,
};
use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{
    Clock, CommitFault, ElectionConfig, LocalInstant, MemDb, ReadMode, ScriptedFaults, ShardId,
    TokioClock,
};
use foundationdb_tuple::Subspace;

use crate::shard_support::*;

/// Delays the serializable point reads of one key (set once known) by `latency`: one member's
/// own record, so only that member's cycles hang (a slow storage server, a client cut off),
/// while the coordinator and the other members proceed.
#[derive(Debug)]
struct SlowKey {
    key: Mutex<Option<Vec<u8>>>,
    latency: Duration,
}

impl FaultInjector for SlowKey {
    fn on_read(&self, ctx: &ReadContext<'_>) -> ReadDecision {
        let key = self.key.lock().unwrap();
        match (key.as_deref(), ctx.target) {
            (Some(k), ReadTarget::Key(t)) if k == t && ctx.mode == ReadMode::Serializable => {
                ReadDecision::proceed().with_latency(self.latency)
            }
            _ => ReadDecision::proceed(),
        }
    }
}

/// Sets its flag to false when dropped (the guarded work ended, or was cancelled).
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

// Guarantee 1 for the runner; `ShardGuard`'s contract: "cancelled when the ownership ends: ...
// the member's lease ends locally without a renewal (even while the database is
// unreachable)"; docs/design.md §9: "no guarded work runs outside its guard's validity, against true
// time". (Found by the adversarial review; failed before the fix.)
//
// 1. b starts first and leads the coordinator election; a joins; each owns 4 of 8 shards.
//    (lease 300 ms, heartbeat 100 ms, transaction timeout 90 ms: a valid configuration.)
// 2. Work runs under a's guard of one shard (`ShardGuard::spawn`, cancelled with the guard).
// 3. From now on a's transactions hang (its own record's read takes a minute): each of a's
//    cycles ends only at the transaction timeout, and one of them is in flight when a's
//    deadline passes.
// 4. The guard is cancelled at its deadline all the same: while a cycle's transaction runs,
//    the member task also waits for the guards' deadline and feeds the machine a tick then,
//    which revokes every guard (as the single election's executor does in `run_op`). Before
//    the fix the task only awaited the transaction, and the guarded work ran on for up to a
//    transaction timeout after the deadline.
// 5. Meanwhile b (the coordinator) has seen a's record unchanged for a full lease, fenced a
//    out and acquired the shard: by then a's guarded work on it has stopped.
#[tokio::test(start_paused = true)]
async fn a_shard_guard_ends_at_its_deadline_while_a_member_cycle_hangs() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let slow = Arc::new(SlowKey {
        key: Mutex::new(None),
        latency: Duration::from_secs(60),
    });
    db.set_fault_injector(Arc::clone(&slow) as Arc<dyn FaultInjector>);
    let config = runner_config(90);
    let b = runner(&db, "b", 8, &config);
    until(&[&b], Duration::from_secs(2), || {
        b.is_coordinator() && b.owned().len() == 8
    })
    .await;
    let a = runner(&db, "a", 8, &config);
    until(&[&a, &b], Duration::from_secs(3), || {
        a.owned().len() == 4 && b.owned().len() == 4
    })
    .await;
    assert!(!a.is_coordinator() && b.is_coordinator());

    let (shard, guard) = a.owned().into_iter().next().unwrap();
    let running = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&running);
    let _work = guard.spawn(async move {
        flag.store(true, Ordering::SeqCst);
        let _running = Running(flag);
        loop {
            tokio::time::sleep(ms(1)).await;
        }
    });
    tokio::time::sleep(ms(5)).await;
    assert!(running.load(Ordering::SeqCst), "the guarded work runs");

    // a's transactions hang from now on.
    *slow.key.lock().unwrap() = Some(a.election().member_key(a.id()));
    let start = tokio::time::Instant::now();
    let mut overlap = None;
    while start.elapsed() < Duration::from_secs(2) {
        if b.guard(shard).is_some() && running.load(Ordering::SeqCst) {
            overlap = Some((
                start.elapsed(),
                guard.is_valid(),
                guard.is_cancelled(),
                a.member().now().saturating_duration_since(guard.deadline()),
            ));
            break;
        }
        if b.guard(shard).is_some() && !running.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(ms(1)).await;
    }
    a.abort();
    b.shutdown().await;
    assert!(
        b.election().layout(&db.create_transaction()).await.is_ok(),
        "the election is intact"
    );
    assert_eq!(
        overlap, None,
        "(elapsed, a's guard valid, a's guard cancelled, time past a's guard deadline): \
         b holds a valid guard of shard {shard} while a's guarded work on it still runs"
    );
}

/// Fails, once armed, the first commit that writes both `member_key` and a key under `prefix`:
/// one member's cycle that writes shard records (a handover or an acquisition).
#[derive(Debug)]
struct FailOnce {
    member_key: Mutex<Option<Vec<u8>>>,
    prefix: Vec<u8>,
    fault: CommitFault,
    fired: AtomicBool,
}

impl FaultInjector for FailOnce {
    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        let key = self.member_key.lock().unwrap();
        match key.as_deref() {
            Some(k)
                if ctx.written_keys.contains(k)
                    && ctx.written_keys.any_with_prefix(&self.prefix)
                    && !self.fired.swap(true, Ordering::SeqCst) =>
            {
                CommitDecision::fail(self.fault)
            }
            _ => CommitDecision::proceed(),
        }
    }
}

// Liveness and balance for the runner: issue 23 "a cooperative move takes at most 2 commits",
// "after a join, balance is restored in at most ⌈moves / max_concurrent_moves⌉ handover
// rounds"; docs/design.md §10.6 per shard: "A leader that stepped down and whose vacancy write failed
// writes it again while the record still names it". (Found by the adversarial review; failed
// before the fix.)
//
// 1. a owns all 8 shards; b joins; the coordinator asks a to hand 4 shards over to b.
// 2. a's guards close, their work goes idle, a runs the handover cycle: the shards leave a's
//    belief and their guards are revoked inside the transaction (lost early: right).
// 3. That one commit fails without applying (`UnknownNotApplied`: a 1021 that did not land;
//    a timeout or an outage does the same). The store's retry loop returns it to the runner.
// 4. a's next cycle writes the handover again (the member remembers releases not confirmed,
//    `MemberState::unreleased`, whatever the runner offers as ready), and b gets its 4 shards.
//    (Before the fix the records named a as the owner with the move requests standing, but a
//    never handed the shards over again: the runner offers only shards with a closed guard
//    as ready, and those guards were gone. Nobody worked on the 4 shards, b never got them,
//    and the 4 requests took the move limit for good.)
#[tokio::test(start_paused = true)]
async fn a_handover_whose_commit_failed_is_written_again_by_the_runner() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let fail = Arc::new(FailOnce {
        member_key: Mutex::new(None),
        prefix: Subspace::from("adversarial-runner")
            .subspace(&("shards",))
            .bytes()
            .to_vec(),
        fault: CommitFault::UnknownNotApplied,
        fired: AtomicBool::new(false),
    });
    db.set_fault_injector(Arc::clone(&fail) as Arc<dyn FaultInjector>);
    let config = runner_config(30);
    let a = runner(&db, "a", 8, &config);
    until(&[&a], Duration::from_secs(2), || a.owned().len() == 8).await;
    *fail.member_key.lock().unwrap() = Some(a.election().member_key(a.id()));
    let b = runner(&db, "b", 8, &config);
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        exclusive_guards(&[&a, &b]);
        tokio::time::sleep(ms(1)).await;
    }
    assert!(
        fail.fired.load(Ordering::SeqCst),
        "the handover's commit failed once"
    );
    let view = a
        .election()
        .assignments(&db.create_transaction())
        .await
        .unwrap();
    let (na, nb) = (a.owned().len(), b.owned().len());
    let ghosts: Vec<ShardId> = view
        .shards_of(a.id())
        .into_iter()
        .filter(|s| a.guard(*s).is_none())
        .collect();
    a.shutdown().await;
    b.shutdown().await;
    assert!(
        na + nb == 8 && nb == 4,
        "5 s (16 leases) after b joined, one failed commit later: a holds {na} guards, b {nb}; \
         shards the records give to a that a does not work on: {ghosts:?}"
    );
}

/// Counts the commits that write one key.
#[derive(Debug, Default)]
struct CountWrites {
    key: Mutex<Option<Vec<u8>>>,
    count: AtomicU64,
}

impl FaultInjector for CountWrites {
    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        if let Some(k) = self.key.lock().unwrap().as_deref() {
            if ctx.written_keys.contains(k) {
                self.count.fetch_add(1, Ordering::SeqCst);
            }
        }
        CommitDecision::proceed()
    }
}

// Cost and docs/design.md §10.6: "no accepted configuration renews in a loop or misses its own
// deadline"; `ShardedRunnerBuilder::config`: "used when this member creates the election; the
// stored one wins"; issue 23: "a member's steady-state heartbeat is one transaction". Real
// time (a loop would never sleep, so tokio's paused clock would never advance). (Found by the
// adversarial review; failed before the fix.)
//
// 1. a creates the election with a 300 ms lease (heartbeat 100 ms).
// 2. b starts with `ElectionConfig::default()` (10 s lease, 3 s heartbeat, 1 s transaction
//    timeout): a valid configuration, and the documentation says the stored one wins.
// 3. b's member cycles use the stored 300 ms lease (its deadline: start + 294 ms), and so does
//    its runner machine: `MemberCycle::config` (the configuration the cycle read) feeds
//    `CycleCommitted`, the transactions' timeout and the health check, for the member and its
//    coordinator loop alike. b renews about every 100 ms. (Before the fix the machine was fed
//    the builder's configuration: the renewal was due `renewal_margin` = 1 s + 750 ms before a
//    deadline only 294 ms away, i.e. at once after every commit: ~17,000 renewals a second.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_built_with_another_config_than_the_stored_one_keeps_the_stored_pace() {
    let db = MemDb::new();
    let counter = Arc::new(CountWrites::default());
    db.set_fault_injector(Arc::clone(&counter) as Arc<dyn FaultInjector>);
    let a = runner(&db, "a", 8, &runner_config(30)); // creates the election: lease 300 ms
    tokio::time::sleep(ms(300)).await;
    let b = ShardedRunner::builder(db.clone(), Subspace::from("adversarial-runner"))
        .shards(8)
        .label("b")
        .config(ElectionConfig::default())
        .start()
        .unwrap();
    *counter.key.lock().unwrap() = Some(b.election().member_key(b.id()));
    tokio::time::sleep(ms(500)).await;
    let n = counter.count.load(Ordering::SeqCst);
    a.abort();
    b.abort();
    assert!(
        n <= 20,
        "b renewed {n} times in 0.5 s (the stored heartbeat is 100 ms, b's own 3 s)"
    );
}

// docs/design.md §10.6 per shard (§12.5): "No path leaves a leader holding the leadership with a closed
// guard for longer than handover_grace plus one heartbeat"; docs/design.md §10.6: no accepted
// configuration renews in a loop. A move the coordinator requested is withdrawn while the
// owner's guard drains (here: its target shuts down before acquiring anything): once the
// guard's work is idle or the grace has passed, the member keeps the shard, and the closed
// guard is replaced by a fresh one of the same ballot that accepts work; the member cycles at
// its heartbeat meanwhile. (Before the fix the runner offered the closed guard as ready at
// every turn and ran member cycles back to back, for good: this test hung.) Real time (a
// cycle loop would never let tokio's paused clock advance).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_guard_whose_move_was_withdrawn_is_reopened_without_a_cycle_loop() {
    let db = MemDb::new();
    let counter = Arc::new(CountWrites::default());
    db.set_fault_injector(Arc::clone(&counter) as Arc<dyn FaultInjector>);
    let config = runner_config(30);
    let a = runner(&db, "a", 8, &config);
    let start = tokio::time::Instant::now();
    while a.owned().len() < 8 {
        assert!(start.elapsed() < Duration::from_secs(3), "a owns all 8");
        tokio::time::sleep(ms(5)).await;
    }
    // Busy work on every shard, for longer than the grace: only the grace ends the drain.
    let mut busy = Vec::new();
    for guard in a.owned().values() {
        busy.push(guard.spawn(tokio::time::sleep(Duration::from_secs(30))));
    }
    let b = runner(&db, "b", 8, &config);
    let closed = loop {
        let closed: Vec<ShardId> = a
            .owned()
            .into_iter()
            .filter(|(_, g)| g.is_handover_requested())
            .map(|(s, _)| s)
            .collect();
        if !closed.is_empty() {
            break closed;
        }
        assert!(start.elapsed() < Duration::from_secs(6), "moves requested");
        tokio::time::sleep(ms(1)).await;
    };
    // b shuts down at once: the coordinator withdraws the moves toward it.
    b.shutdown().await;
    *counter.key.lock().unwrap() = Some(a.election().member_key(a.id()));
    tokio::time::sleep(ms(800)).await;
    let renewals = counter.count.load(Ordering::SeqCst);
    let reopened: Vec<(ShardId, bool)> = closed
        .iter()
        .map(|s| (*s, a.guard(*s).is_some_and(|g| g.accepts_work())))
        .collect();
    let (na, nb) = (a.owned().len(), b.owned().len());
    a.abort();
    assert!(
        renewals <= 20,
        "a cycled {renewals} times in 0.8 s (heartbeat 100 ms)"
    );
    assert_eq!((na, nb), (8, 0));
    assert!(
        reopened.iter().all(|(_, open)| *open),
        "closed guards kept after their move was withdrawn: {reopened:?}"
    );
}

/// Tokio's clock, counting its readings once armed.
#[derive(Debug, Default)]
struct CountingClock {
    inner: TokioClock,
    armed: AtomicBool,
    reads: AtomicU64,
}

impl Clock for CountingClock {
    fn now(&self) -> LocalInstant {
        if self.armed.load(Ordering::SeqCst) {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.now()
    }
}

/// What the shutdown in an outage did: the clock's readings meanwhile, and how long it took on
/// tokio's paused clock.
#[derive(Debug)]
struct OutageShutdown {
    reads: u64,
    took: Duration,
    left: bool,
}

/// A member owning its 8 shards, the store then unavailable, and its shutdown.
async fn shutdown_in_an_outage(clock: Arc<CountingClock>) -> OutageShutdown {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    let a = ShardedRunner::builder(db.clone(), Subspace::from("adversarial-runner"))
        .shards(8)
        .label("a")
        .config(runner_config(30))
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .seed(1)
        .start()
        .unwrap();
    until(&[&a], Duration::from_secs(2), || a.owned().len() == 8).await;
    faults.set_unavailable(true);
    clock.armed.store(true, Ordering::SeqCst);
    let asked = tokio::time::Instant::now();
    a.shutdown().await;
    let took = asked.elapsed();
    let reads = clock.reads.load(Ordering::SeqCst);
    faults.set_unavailable(false);
    let record = a
        .election()
        .member_record(&db.create_transaction(), a.id())
        .await
        .unwrap();
    OutageShutdown {
        reads,
        took,
        left: record.is_some_and(|r| r.is_fenced()),
    }
}

// Issue 29 item 4: "a shutdown during a store outage waits between its leave attempts". The
// machine retries a failed leave after the back-off of a failed cycle; the runner carried that
// back-off out as a sleep that a shutdown ends, and the shutdown token stays cancelled: every
// sleep ended at once, for the whole back-off (262–632 ms of CPU per shutdown measured in real
// time), and on tokio's paused clock (which moves only while every task waits) the loop never
// let time move, so the shutdown never returned. Now the machine says so itself: a leave's
// back-off is a wait (`ShardCommand::WaitUntil`) that only time ends.
//
// The member's loop reads its clock at least once per turn, so the clock's readings count the
// turns. The scenario runs on a paused runtime of its own thread; this thread watches the
// count in real time, so that a loop that never yields fails the test instead of hanging it.
#[test]
fn a_shutdown_in_an_outage_waits_between_its_leave_attempts() {
    /// Far more turns than three leave attempts and their waits can take.
    const SPINNING: u64 = 100_000;
    let clock = Arc::new(CountingClock::default());
    let (done, outcome) = std::sync::mpsc::channel();
    let scenario_clock = Arc::clone(&clock);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let _ = done.send(runtime.block_on(shutdown_in_an_outage(scenario_clock)));
    });
    let started = std::time::Instant::now();
    let out = loop {
        match outcome.recv_timeout(ms(10)) {
            Ok(out) => break out,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let reads = clock.reads.load(Ordering::SeqCst);
                assert!(
                    reads < SPINNING,
                    "the member's loop turned {reads}+ times (clock readings) during its \
                     shutdown in an outage, and never let the paused clock move"
                );
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "the scenario did not end ({reads} readings)"
                );
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the scenario panicked")
            }
        }
    };
    // Three leave attempts, two back-offs between them (from a 32nd of the 100 ms heartbeat,
    // doubling, jittered down to half): at least 1.5 ms + 3.1 ms of waiting.
    let first = ms(100) / 32;
    assert!(
        out.took >= first / 2 + first,
        "the leave attempts were not spaced by their back-off: {out:?}"
    );
    assert!(
        !out.left,
        "the store was down: the leave cannot have landed"
    );
    // The member's turns (3 leaves, 2 waits, the drain) and its coordinator runner's
    // shutdown, a few readings each.
    assert!(
        out.reads <= 200,
        "{} clock readings during the shutdown: {out:?}",
        out.reads
    );
    eprintln!("figures: shutdown in an outage: {out:?}");
}
