//! Criterion benches: the pure decision core, the leader-record codec, one election cycle on
//! MemDb (follower and leader, with 1, 100 and 10,000 registered candidates), and a bare
//! MemDb read-modify-write transaction as the baseline. See benches/README.md.
//!
//! `cargo bench --bench election`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, ElectionTxn, LeaderElection, ManualClock, MemDb,
    Priority, ReadMode,
};
use foundationdb_tuple::Subspace;
use tokio::runtime::Runtime;

struct Setup {
    db: MemDb,
    election: LeaderElection,
    leader: Candidate,
    follower: Candidate,
}

fn setup(rt: &Runtime, candidates: usize) -> Setup {
    rt.block_on(async {
        let db = MemDb::new();
        let election = LeaderElection::new(Subspace::from("bench"));
        let clock = Arc::new(ManualClock::new());
        let mk = |i: usize| {
            let id = CandidateId::with_nonce("node", i as u64).unwrap();
            Candidate::with_clock(id, Priority::new(1), clock.clone())
        };
        let all: Vec<Candidate> = (0..candidates.max(2)).map(mk).collect();
        db.run(|txn, _| {
            let (e, all) = (election.clone(), all.clone());
            async move {
                e.initialize(&txn).await?;
                for c in &all {
                    e.register_candidate(&txn, c).await?;
                }
                Ok::<(), ElectionError>(())
            }
        })
        .await
        .unwrap();
        let s = Setup {
            db,
            election,
            leader: all[0].clone(),
            follower: all[1].clone(),
        };
        cycle(&s, &s.leader).await;
        assert!(s.leader.believes_it_leads());
        s
    })
}

async fn cycle(s: &Setup, c: &Candidate) {
    let cycle =
        s.db.run(|txn, _| {
            let (e, c) = (s.election.clone(), c.clone());
            async move { e.run_election_cycle(&txn, &c).await }
        })
        .await
        .unwrap();
    black_box(c.adopt(cycle));
}

fn benches(cr: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // The runner machine's decision at a wake-up with nothing due (every sleep of every
    // runner ends in one).
    {
        use fdb_leader_election::runner::machine::{Ctx, Event, Machine, Settings};
        use fdb_leader_election::{CandidateId, ElectionConfig, LocalInstant};
        let id = CandidateId::parse("bench-0000000000000001").unwrap();
        let mut m = Machine::new(
            Settings::new(Some(id), ElectionConfig::default(), 1),
            LocalInstant::ZERO,
        );
        let ctx = Ctx::new(LocalInstant::ZERO, None, false);
        let _ = m.handle(Event::Start, ctx);
        cr.bench_function("core/machine/tick", |b| {
            b.iter(|| black_box(m.handle(Event::Tick, ctx)))
        });
    }

    let record = {
        let s = setup(&rt, 2);
        rt.block_on(s.db.run(|txn, _| {
            let e = s.election.clone();
            async move { e.leader_record(&txn).await }
        }))
        .unwrap()
    };
    let bytes = fdb_leader_election::raw::encode_leader(&record).unwrap();
    cr.bench_function("codec/leader/encode", |b| {
        b.iter(|| black_box(fdb_leader_election::raw::encode_leader(black_box(&record)).unwrap()))
    });
    cr.bench_function("codec/leader/decode", |b| {
        b.iter(|| black_box(fdb_leader_election::raw::decode_leader(black_box(&bytes)).unwrap()))
    });

    for n in [1usize, 100, 10_000] {
        let s = setup(&rt, n);
        cr.bench_function(&format!("cycle/follower/{n}_candidates"), |b| {
            b.iter(|| rt.block_on(cycle(&s, &s.follower)))
        });
        cr.bench_function(&format!("cycle/leader/{n}_candidates"), |b| {
            b.iter(|| rt.block_on(cycle(&s, &s.leader)))
        });
    }
    let db = MemDb::new();
    cr.bench_function("memdb/bare_read_modify_write", |b| {
        b.iter(|| {
            rt.block_on(db.run(|txn, _| async move {
                let v = txn.get(b"counter", ReadMode::Serializable).await?;
                let n = v.map_or(0u8, |v| v.first().copied().unwrap_or(0));
                txn.set(b"counter", &[n.wrapping_add(1)]);
                Ok::<(), ElectionError>(())
            }))
            .unwrap()
        })
    });
}

criterion_group!(election, benches);
criterion_main!(election);
