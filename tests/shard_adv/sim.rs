//! Adversarial review of sharded leadership (docs/design.md §9, §12): a seeded simulation of the manual
//! flow with every commit fault MemDb injects, crashes, pauses, clock rates within ρ, leaves and
//! operators; oracles per shard after every commit, balance after quiescence.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::shard::placement::MemberShare;
use fdb_leader_election::shard::{Coordinator, Member};
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, CommitFault, ElectionError, ManualClock, Priority, ShardId,
    Weight,
};

use crate::shard_support::*;

struct SimMember {
    member: Member,
    clock: ManualClock,
    ppm: i64,
    /// Crashed (or paused) until then, on true time.
    down_until: Duration,
}

/// True time advances by `dt`; each member's clock by `dt` at its own rate.
fn advance_members(w: &World, members: &[SimMember], dt: Duration) {
    w.advance(dt);
    for m in members {
        m.clock.advance(scaled(dt, m.ppm));
    }
}

struct SimCoordinator {
    candidate: Candidate,
    coordinator: Coordinator,
    clock: ManualClock,
    ppm: i64,
    down_until: Duration,
}

#[derive(Default)]
struct History {
    /// Each shard's last observed (ballot, owner).
    last: BTreeMap<ShardId, (Ballot, Option<(CandidateId, u64)>)>,
    /// The owner of every (shard, ballot) ever observed in the records.
    owner_of: BTreeMap<(ShardId, Ballot), (CandidateId, u64)>,
    /// The member that believed each (shard, ballot).
    believer_of: BTreeMap<(ShardId, Ballot), CandidateId>,
    checks: u64,
    /// Handovers whose commit was not confirmed (the member writes them again).
    failed_releases: u64,
    acquisitions: u64,
    takeovers: u64,
    faults: u64,
}

fn pick_fault(rng: &mut Rng) -> Option<CommitFault> {
    match rng.below(14) {
        0 => Some(CommitFault::Conflict),
        1 => Some(CommitFault::UnknownApplied),
        2 => Some(CommitFault::UnknownNotApplied),
        3 | 4 => Some(CommitFault::UnknownAppliedLater),
        5 => Some(CommitFault::ErrorAfterApplying(1031)),
        6 => Some(CommitFault::Error(1031)),
        _ => None,
    }
}

/// The checks after every step: one believer per shard at this true instant; every believer's
/// token admitted by the fence and matching the records; ballots never decrease, grow by
/// exactly one per new owner, and each (shard, ballot) has one owner and one believer.
async fn sim_check(w: &World, members: &[SimMember], h: &mut History, ctx: &str) {
    h.checks += 1;
    let all: Vec<&Member> = members.iter().map(|m| &m.member).collect();
    let o = overlaps(&all);
    assert!(o.is_empty(), "{ctx}: two believers: {o:?}");
    let txn = w.db.create_transaction();
    for s in (0..w.shards).map(ShardId::new) {
        let rec = w.election.shard_record(&txn, s).await.unwrap();
        let owner = rec.owner().map(|o| (o.member().clone(), o.epoch()));
        let ballot = rec.ballot();
        if let Some((b0, o0)) = h.last.get(&s) {
            assert!(
                ballot >= *b0,
                "{ctx}: shard {s}'s ballot went from {b0} to {ballot}"
            );
            match (o0, &owner) {
                (Some(x), Some(y)) if x == y => {
                    assert_eq!(ballot, *b0, "{ctx}: shard {s} same owner, new ballot");
                }
                (_, Some(_)) => {
                    assert_eq!(
                        ballot.get(),
                        b0.get() + 1,
                        "{ctx}: shard {s} new owner {owner:?}"
                    )
                }
                (_, None) => assert_eq!(ballot, *b0, "{ctx}: shard {s} vacated with a new ballot"),
            }
        }
        if let Some(o) = &owner {
            if let Some(prev) = h.owner_of.insert((s, ballot), o.clone()) {
                assert_eq!(
                    &prev, o,
                    "{ctx}: two owners of shard {s} at ballot {ballot}"
                );
            }
        }
        h.last.insert(s, (ballot, owner));
    }
    drop(txn);
    for m in members {
        for (s, t) in m.member.owned_shards() {
            if let Some(prev) = h.believer_of.insert((s, t), m.member.id().clone()) {
                assert_eq!(&prev, m.member.id(), "{ctx}: two believers of {s} at {t}");
            }
            let admitted = w.fence(s, t).await;
            assert!(
                admitted.is_ok(),
                "{ctx}: {} believes it owns {s} at {t}, the fence says {admitted:?}",
                m.member.id()
            );
        }
    }
}

async fn simulate(seed: u64, steps: u32) -> History {
    let mut rng = Rng::new(seed);
    let w = World::new(8, 1 + rng.below(3) as u32).await;
    let rho = i64::from(w.config.max_clock_rate_error_ppm());
    let mut members: Vec<SimMember> = (0..4)
        .map(|i| {
            let clock = ManualClock::new();
            let ppm = rng.below(2 * rho as u64 + 1) as i64 - rho;
            let member = Member::with_clock(
                CandidateId::random(&format!("m{i}")).unwrap(),
                Priority::new(rng.below(2) as i32),
                Weight::new(1 + rng.below(2) as u32),
                Arc::new(clock.clone()),
            );
            SimMember {
                member,
                clock,
                ppm,
                down_until: Duration::ZERO,
            }
        })
        .collect();
    let mut coordinators = Vec::new();
    for i in 0..2 {
        let clock = ManualClock::new();
        let ppm = rng.below(2 * rho as u64 + 1) as i64 - rho;
        let (candidate, coordinator) = w
            .coordinator_on(&format!("c{i}"), Arc::new(clock.clone()))
            .await;
        coordinators.push(SimCoordinator {
            candidate,
            coordinator,
            clock,
            ppm,
            down_until: Duration::ZERO,
        });
    }
    let op = CandidateId::parse("ops").unwrap();
    let mut h = History::default();
    let mut now = Duration::ZERO;
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step} t={now:?}");
        let dt = ms(rng.below(400));
        now += dt;
        advance_members(&w, &members, dt);
        for c in &coordinators {
            c.clock.advance(scaled(dt, c.ppm));
        }
        // Up to two actors decide in overlapping transactions, then commit in either order.
        enum Pending {
            Member(
                usize,
                fdb_leader_election::memdb::MemTransaction,
                Box<fdb_leader_election::shard::MemberCycle>,
            ),
            Coordinator(fdb_leader_election::memdb::MemTransaction),
        }
        let mut pending: Vec<Pending> = Vec::new();
        let actors = 1 + rng.below(3);
        let mut used = BTreeSet::new();
        for _ in 0..actors {
            let who = rng.below(5) as usize;
            if !used.insert(who) {
                continue;
            }
            if who < members.len() {
                let m = &members[who];
                if now < m.down_until {
                    continue;
                }
                let owned: Vec<ShardId> = m.member.owned_shards().keys().copied().collect();
                // Shards whose work stopped. A handover whose commit failed needs no offer
                // again: the member writes it again by itself.
                let ready: BTreeSet<ShardId> =
                    owned.into_iter().filter(|_| rng.chance(70)).collect();
                let txn = w.db.create_transaction();
                match w.election.member_cycle(&txn, &m.member, &ready).await {
                    Ok(cycle) => pending.push(Pending::Member(who, txn, Box::new(cycle))),
                    Err(e) => assert!(e.is_retryable(), "{ctx}: member cycle: {e:?}"),
                }
            } else {
                // The coordinators: each renews or bids; the leader coordinates.
                for c in &coordinators {
                    if now >= c.down_until {
                        let _ = w
                            .election
                            .coordinator_election()
                            .run_cycle(&w.db, &c.candidate)
                            .await;
                    }
                }
                let leader = coordinators
                    .iter()
                    .find(|c| now >= c.down_until && c.candidate.fencing_token().is_some());
                if let Some(c) = leader {
                    let txn = w.db.create_transaction();
                    let token = c.candidate.fencing_token().unwrap();
                    match w.election.coordinate(&txn, &c.coordinator, token).await {
                        Ok(done) => {
                            h.takeovers += done.fenced.len() as u64;
                            pending.push(Pending::Coordinator(txn));
                        }
                        Err(ElectionError::StaleToken { .. }) => {}
                        Err(e) => assert!(e.is_retryable(), "{ctx}: coordinate: {e:?}"),
                    }
                }
            }
        }
        if rng.chance(50) {
            pending.reverse();
        }
        for p in pending {
            let fault = pick_fault(&mut rng);
            if let Some(f) = fault {
                h.faults += 1;
                w.faults.push_commit_fault(f);
            }
            match p {
                Pending::Member(i, txn, cycle) => {
                    let acquired = cycle.acquired().len() as u64;
                    let gone = cycle.released().len() as u64;
                    if txn.commit().await.is_ok() {
                        h.acquisitions += acquired;
                        members[i].member.adopt(*cycle);
                    } else {
                        h.failed_releases += gone;
                    }
                }
                Pending::Coordinator(txn) => {
                    let _ = txn.commit().await;
                }
            }
            w.faults.clear_commit_faults();
            sim_check(&w, &members, &mut h, &ctx).await;
        }
        // Crashes and pauses (same process afterwards: it rejoins at a new epoch).
        if rng.chance(3) {
            let i = rng.below(members.len() as u64) as usize;
            members[i].down_until = now + ms(rng.below(8_000));
        }
        if rng.chance(2) {
            let i = rng.below(coordinators.len() as u64) as usize;
            coordinators[i].down_until = now + ms(rng.below(8_000));
        }
        // A graceful leave. The member rejoins, with the same handle, at its next cycle (before
        // the coordinator has looked, or after).
        if rng.chance(2) {
            let i = rng.below(members.len() as u64) as usize;
            if now >= members[i].down_until {
                let (e, m) = (w.election.clone(), members[i].member.clone());
                in_txn!(w.db, [e, m], |txn| e.leave(&txn, &m).await).unwrap();
            }
        }
        // Operators.
        if rng.chance(3) {
            let id = members[rng.below(members.len() as u64) as usize]
                .member
                .id()
                .clone();
            let drained = rng.chance(50);
            w.set_drained(&id, drained).await;
        }
        if rng.chance(2) {
            let frozen = rng.chance(50);
            w.operate(|e, txn| async move { e.set_frozen(&txn, frozen).await })
                .await
                .unwrap();
        }
        if rng.chance(4) {
            let s = ShardId::new(rng.below(u64::from(w.shards)) as u32);
            let to = members[rng.below(members.len() as u64) as usize]
                .member
                .id()
                .clone();
            let op = op.clone();
            let r = w
                .operate(|e, txn| {
                    let (to, op) = (to.clone(), op.clone());
                    async move { e.move_shard(&txn, s, &to, &op).await }
                })
                .await;
            assert!(
                matches!(
                    r,
                    Ok(_)
                        | Err(ElectionError::OperatorRefused { .. }
                            | ElectionError::NotRegistered { .. })
                ),
                "{ctx}: move_shard: {r:?}"
            );
        }
        sim_check(&w, &members, &mut h, &ctx).await;
    }

    // Quiescence: no faults, nobody down, placement unfrozen and nobody drained. Every shard
    // is owned again and the placement is balanced within a bounded number of rounds.
    w.operate(|e, txn| async move { e.set_frozen(&txn, false).await })
        .await
        .unwrap();
    for m in &members {
        let id = m.member.id().clone();
        w.set_drained(&id, false).await;
    }
    let all: Vec<&Member> = members.iter().map(|m| &m.member).collect();
    let mut settled = false;
    for _ in 0..80 {
        let dt = ms(250);
        now += dt;
        advance_members(&w, &members, dt);
        for c in &coordinators {
            c.clock.advance(scaled(dt, c.ppm));
            let _ = w
                .election
                .coordinator_election()
                .run_cycle(&w.db, &c.candidate)
                .await;
        }
        if let Some(c) = coordinators
            .iter()
            .find(|c| c.candidate.fencing_token().is_some())
        {
            let _ = w
                .coordinate_with(&c.coordinator, c.candidate.fencing_token().unwrap())
                .await;
        }
        for m in &all {
            w.cycle_ready(m).await;
        }
        sim_check(&w, &members, &mut h, &format!("seed {seed} quiescence")).await;
        let owned: u32 = all.iter().map(|m| m.owned_shards().len() as u32).sum();
        let shares: Vec<MemberShare> = members
            .iter()
            .map(|m| MemberShare {
                id: m.member.id().clone(),
                priority: m.member.priority(),
                weight: m.member.weight(),
            })
            .collect();
        let b = bounds(&shares, w.shards);
        let balanced = members.iter().all(|m| {
            let n = m.member.owned_shards().len() as u32;
            let (lo, hi) = b[m.member.id()];
            lo <= n && n <= hi
        });
        if owned == w.shards && balanced {
            settled = true;
            break;
        }
    }
    let counts: Vec<usize> = all.iter().map(|m| m.owned_shards().len()).collect();
    if !settled && std::env::var("SIM_DEBUG").is_ok() {
        let txn = w.db.create_transaction();
        for s in (0..w.shards).map(ShardId::new) {
            eprintln!("shard {s}: {:?}", w.election.shard_record(&txn, s).await);
        }
        for m in &members {
            eprintln!(
                "member {}: {:?} believes {:?} epoch {:?} lease {:?} now {:?}; inbox {:?}",
                m.member.id(),
                w.election.member_record(&txn, m.member.id()).await,
                m.member.owned_shards(),
                m.member.epoch(),
                m.member.lease_deadline(),
                m.member.now(),
                w.raw_get(&w.election.inbox_key(m.member.id()))
                    .await
                    .map(|v| v.len()),
            );
        }
        eprintln!("placement: {:?}", w.election.placement(&txn).await);
        for c in &coordinators {
            eprintln!(
                "coordinator {:?} token {:?}",
                c.candidate.id(),
                c.candidate.fencing_token()
            );
        }
    }
    assert!(
        settled,
        "seed {seed}: not owned and balanced after quiescence: {counts:?}"
    );
    h
}

// Guarantees 1-3 and 5 together, over seeded runs of the manual flow: four members and two
// coordinator candidates on clocks with rate errors within ρ; overlapping transactions
// committed in either order; every fault MemDb can inject on commits (conflicts, timeouts,
// unknown results that did or did not apply, late-landing commits); crashes and pauses of
// members and coordinators (a paused member resumes with the same handle and rejoins);
// graceful leaves; operators draining, freezing and moving shards by hand. After every commit:
// one believer per shard, every believer's token admitted, ballots per shard never decreasing
// and +1 per new owner, one owner and one believer per ballot. After the faults stop: every
// shard owned and the placement balanced, every run (a handover whose commit failed is written
// again by its member; the simulation once excused runs stalled by that, now fixed).
#[tokio::test]
async fn held_a_seeded_simulation_of_the_manual_flow_with_faults() {
    let mut total = History::default();
    // SIM_SEEDS=N runs more seeds (a longer campaign); the default keeps the suite quick.
    let seeds: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    for seed in 1..=seeds {
        let h = simulate(seed, 300).await;
        total.checks += h.checks;
        total.acquisitions += h.acquisitions;
        total.takeovers += h.takeovers;
        total.faults += h.faults;
        total.failed_releases += h.failed_releases;
    }
    eprintln!(
        "simulation: {} checks, {} acquisitions, {} takeovers, {} injected commit faults, \
         {} handovers written again after a failed commit",
        total.checks, total.acquisitions, total.takeovers, total.faults, total.failed_releases
    );
    assert!(total.acquisitions > 100 && total.takeovers > 5 && total.faults > 100);
    assert!(
        total.failed_releases > 0,
        "no failed handover was exercised"
    );
}
