//! The fence rule as a table (`examples/polyglot/fence_cases.json`), run against the Rust
//! helper `check_fence`: the same table the Python check runs on a real cluster in the
//! FoundationDB tier, so both languages are tested against one specification.

use fdb_leader_election::{Ballot, ElectionTxn, MemDb, check_fence, fence_key};
use foundationdb_tuple::Subspace;
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[tokio::test]
async fn the_rust_helper_admits_exactly_what_the_shared_table_says() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/polyglot/fence_cases.json"
    ))
    .unwrap();
    let table: Value = serde_json::from_str(&text).unwrap();
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let db = MemDb::new();
    let election = Subspace::from(("fdb-leader", "fence-cases"));
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let token = Ballot::new(case["token"].as_u64().unwrap());
        let txn = db.create_transaction();
        if let Some(value) = case["fence"].as_str() {
            txn.set(&fence_key(&election), &hex(value));
        }
        let admitted = check_fence(&txn, &election, token).await.is_ok();
        assert_eq!(
            admitted,
            case["admitted"].as_bool().unwrap(),
            "case {name:?}: {:?}",
            check_fence(&txn, &election, token).await
        );
    }
}

#[test]
fn the_fence_key_is_the_election_subspace_and_fence() {
    let election = Subspace::from(("fdb-leader", "scheduler"));
    assert_eq!(
        fence_key(&election),
        foundationdb_tuple::pack(&("fdb-leader", "scheduler", "fence"))
    );
}
