//! Criterion benches: what a sharded runner's lookups cost when the member owns every one of
//! M shards (M = 16, 1,024, 16,384): `ShardGuard::is_valid`, `ShardedRunner::guard(shard)`
//! and `ShardedRunner::owned()` (every guard). See benches/README.md.
//!
//! `cargo bench --bench shard_lookups`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{ElectionConfig, MemDb, ShardId, TokioClock};
use foundationdb_tuple::Subspace;
use tokio::runtime::Runtime;

const SIZES: [u32; 3] = [16, 1_024, 16_384];

/// A lone member owning every one of `shards` shards. The lease is long (10 minutes) and the
/// runtime runs only inside `block_on`: nothing renews, moves or expires while a bench
/// measures.
fn owning(rt: &Runtime, shards: u32) -> ShardedRunner {
    rt.block_on(async {
        let config = ElectionConfig::builder()
            .lease_duration(Duration::from_secs(600))
            .heartbeat_interval(Duration::from_secs(10))
            .candidate_timeout(Duration::from_secs(1_200))
            .transaction_timeout(Duration::from_secs(5))
            .build()
            .expect("a valid configuration");
        let db = MemDb::with_clock(Arc::new(TokioClock::new()));
        let runner = ShardedRunner::builder(db, Subspace::from(("bench", shards)))
            .shards(shards)
            .label("bench")
            .config(config)
            .seed(1)
            .start()
            .expect("started");
        while runner.member().owned_shards().len() < shards as usize {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The guards follow the adoption of the last acquiring cycle.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(runner.owned().len(), shards as usize);
        runner
    })
}

fn benches(cr: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let mut group = cr.benchmark_group("shard_lookups");
    group.sample_size(20);
    for shards in SIZES {
        let runner = owning(&rt, shards);
        let shard = ShardId::new(shards / 2);
        let guard = runner.guard(shard).expect("owned");
        group.bench_with_input(BenchmarkId::new("is_valid", shards), &guard, |b, g| {
            b.iter(|| black_box(g.is_valid()));
        });
        group.bench_with_input(BenchmarkId::new("guard", shards), &shard, |b, s| {
            b.iter(|| black_box(runner.guard(*s)));
        });
        group.bench_with_input(BenchmarkId::new("owned", shards), &shards, |b, _| {
            b.iter(|| black_box(runner.owned()));
        });
        rt.block_on(runner.shutdown());
    }
    group.finish();
}

criterion_group!(shard_lookups, benches);
criterion_main!(shard_lookups);
