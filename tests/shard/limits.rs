//! A sharded election at the largest layout it accepts, on MemDb, which enforces
//! FoundationDB's size limits (the same scenario runs on a cluster in
//! `tests/fdb_integration.rs`): see `tests/common/shard_limits.rs`.

use fdb_leader_election::MemDb;
use foundationdb_tuple::Subspace;

#[tokio::test(flavor = "current_thread")]
async fn the_largest_layout_places_moves_and_leaves_within_foundationdbs_limits() {
    let figures =
        crate::common::shard_limits::largest_layout(MemDb::new(), Subspace::from("largest"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{figures:?}");
    assert!(figures.attempts_to_place > 1, "chunked over attempts");
}
