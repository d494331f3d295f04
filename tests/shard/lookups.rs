//! What a sharded runner's lookups cost, counted in allocations on the calling thread (a
//! bound in operations, not a timed test): `ShardGuard::is_valid`, `Member::shard_token` and
//! `ShardedRunner::guard` copy nothing, and `ShardedRunner::owned` allocates less than once
//! per shard (the map it returns). Before issue 29 item 5, `is_valid` copied the member's
//! whole map of owned shards, and `owned()` and `guard()` called it for every guard: one
//! `guard(shard)` at 4,096 shards took 135 ms in release, on the thread that renews the
//! member's lease.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use crate::shard_support::timings;
use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{MemDb, ShardId, TokioClock};
use foundationdb_tuple::Subspace;

/// The system allocator, counting the allocations made on a thread while it counts.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are thread-local cells
// with constant initialisers (no allocation, no reentrancy).
#[expect(
    unsafe_code,
    reason = "a global allocator implements an unsafe trait; each call is forwarded to System"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count() {
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The allocations `f` makes on this thread, and its result.
fn allocations<R>(f: impl FnOnce() -> R) -> (u64, R) {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    let out = f();
    COUNTING.with(|on| on.set(false));
    (ALLOCATIONS.with(Cell::get), out)
}

const SHARDS: u32 = 1_024;

/// A lone member owning every one of `SHARDS` shards.
async fn owning_every_shard() -> ShardedRunner {
    let config = timings(300, 100, 600, 30);
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let runner = ShardedRunner::builder(db, Subspace::from("lookups"))
        .shards(SHARDS)
        .label("a")
        .config(config)
        .seed(1)
        .start()
        .unwrap();
    let start = tokio::time::Instant::now();
    // Polled through the member's map (one copy a poll), not the lookups under test.
    while runner.member().owned_shards().len() < SHARDS as usize {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "owns every shard"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Every guard issued too (the machine issues them at the commit's adoption).
    tokio::time::sleep(Duration::from_millis(1)).await;
    runner
}

// Issue 29 item 5: lookups cost O(1) or O(log M). Before the fix, at 1,024 shards, one
// `is_valid()` made about a hundred allocations (a copy of the member's map), one `guard()`
// about a hundred thousand (a copy per guard), and `owned()` as many.
#[tokio::test(start_paused = true)]
async fn lookups_copy_nothing_per_shard_and_owned_is_linear() {
    let runner = owning_every_shard().await;
    let shard = ShardId::new(SHARDS / 2);
    let guard = runner.guard(shard).expect("owns the shard");

    let (n, valid) = allocations(|| guard.is_valid());
    assert!(valid);
    assert_eq!(n, 0, "ShardGuard::is_valid allocated {n} times");

    let (n, token) = allocations(|| runner.member().shard_token(shard));
    assert_eq!(token, Some(guard.fencing_token()));
    assert_eq!(n, 0, "Member::shard_token allocated {n} times");

    let (n, found) = allocations(|| runner.guard(shard).is_some());
    assert!(found);
    assert_eq!(n, 0, "ShardedRunner::guard allocated {n} times");

    let (n, owned) = allocations(|| runner.owned().len());
    assert_eq!(owned, SHARDS as usize);
    assert!(
        n < u64::from(SHARDS),
        "ShardedRunner::owned allocated {n} times for {SHARDS} shards (the map it returns \
         needs less than one a shard)"
    );
    eprintln!("figures: owned() at {SHARDS} shards: {n} allocations");
    runner.shutdown().await;
}
