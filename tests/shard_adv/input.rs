//! Adversarial review of sharded leadership (docs/design.md §6, §12): bad input at every key the
//! sharded election reads gives typed errors naming the key, never a panic, and the library
//! never writes what it cannot read back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fdb_leader_election::shard::{Coordinator, Layout, Member, ShardedRunner};
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, ElectionError, MemDb, Priority, ShardId, Weight,
};
use foundationdb_tuple::Subspace;

use crate::shard_support::*;

/// Whether `r` is a typed error naming `key` as corrupt (or a stored config that does not
/// validate).
fn corrupt_at<T: std::fmt::Debug>(r: &Result<T, ElectionError>, key: &[u8]) -> bool {
    let printable = fdb_leader_election::printable_key(key);
    match r {
        Err(ElectionError::Corrupt { key: k, .. }) => *k == printable,
        Err(ElectionError::InvalidStoredConfig { .. }) => true,
        _ => false,
    }
}

/// Every operation of the API against the world as it stands, each in a transaction of its own;
/// returns their results, formatted (none may panic).
async fn every_operation(
    w: &World,
    leader: &Candidate,
    coord: &Coordinator,
    a: &Member,
) -> BTreeMap<&'static str, Result<String, ElectionError>> {
    let mut out = BTreeMap::new();
    let fmt = |r: Result<String, ElectionError>| r;
    out.insert(
        "member_cycle",
        fmt(w.try_cycle(a, &none()).await.map(|o| format!("{o:?}"))),
    );
    let token = leader.fencing_token().unwrap_or(Ballot::ZERO);
    out.insert(
        "coordinate",
        fmt(w
            .coordinate_with(coord, token)
            .await
            .map(|f| format!("{f:?}"))),
    );
    out.insert(
        "fence_shard",
        fmt(w
            .fence(ShardId::new(0), Ballot::new(1))
            .await
            .map(|()| "admitted".to_owned())),
    );
    out.insert(
        "shard_record",
        fmt(w.shard(ShardId::new(0)).await.map(|r| format!("{r:?}"))),
    );
    out.insert(
        "placement",
        fmt(w
            .operate(|e, txn| async move { e.placement(&txn).await })
            .await
            .map(|p| format!("{:?}", p.quotas))),
    );
    out.insert(
        "assignments",
        fmt(w
            .operate(|e, txn| async move { e.assignments(&txn).await })
            .await
            .map(|v| format!("{:?}", v.counts()))),
    );
    out.insert(
        "layout",
        fmt(w
            .operate(|e, txn| async move { e.layout(&txn).await })
            .await
            .map(|l| format!("{l:?}"))),
    );
    let id = a.id().clone();
    out.insert(
        "member_record",
        fmt(w
            .operate(|e, txn| {
                let id = id.clone();
                async move { e.member_record(&txn, &id).await }
            })
            .await
            .map(|r| format!("{r:?}"))),
    );
    out.insert(
        "drained_members",
        fmt(w
            .operate(|e, txn| async move { e.drained_members(&txn).await })
            .await
            .map(|d| format!("{d:?}"))),
    );
    out.insert(
        "set_frozen",
        fmt(w
            .operate(|e, txn| async move { e.set_frozen(&txn, false).await })
            .await
            .map(|()| "done".to_owned())),
    );
    let (id, op) = (a.id().clone(), CandidateId::parse("ops").unwrap());
    out.insert(
        "move_shard",
        fmt(w
            .operate(|e, txn| {
                let (id, op) = (id.clone(), op.clone());
                async move { e.move_shard(&txn, ShardId::new(0), &id, &op).await }
            })
            .await
            .map(|m| format!("{m:?}"))),
    );
    out
}

// Guarantee 6: garbage at every key the sharded election reads gives a typed `Corrupt` error
// naming the key, to every operation that reads it; no operation panics, and none overwrites
// the garbage (the election stays closed until an operator repairs the key).
#[tokio::test]
async fn held_corrupt_values_give_typed_errors_naming_the_key_and_are_never_overwritten() {
    let garbage: [&[u8]; 6] = [
        b"",
        &[fdb_leader_election::FORMAT_VERSION],
        &[fdb_leader_election::FORMAT_VERSION, 0xff, 0xff, 0xff, 0xff],
        &[0x09, 1, 2, 3],
        &[0xff; 64],
        b"\x02\x01\x01\x80\xff",
    ];
    // Which operations must refuse each key's garbage.
    let cases: [(&str, &[&str]); 6] = [
        (
            "member",
            &[
                "member_cycle",
                "coordinate",
                "fence_shard",
                "placement",
                "assignments",
                "member_record",
            ],
        ),
        (
            "shard",
            &[
                "coordinate",
                "fence_shard",
                "shard_record",
                "placement",
                "assignments",
            ],
        ),
        (
            "inbox",
            &["member_cycle", "coordinate", "placement", "assignments"],
        ),
        (
            "epoch",
            &["coordinate", "fence_shard", "placement", "assignments"],
        ),
        (
            "layout",
            &[
                "coordinate",
                "fence_shard",
                "placement",
                "assignments",
                "layout",
                "set_frozen",
                "move_shard",
            ],
        ),
        ("config", &["member_cycle"]),
    ];
    for (what, must_refuse) in cases {
        for bytes in garbage {
            let (w, leader, coord, a) = World::with_owner(4, 4).await;
            let key = match what {
                "member" => w.election.member_key(a.id()),
                "shard" => w.election.shard_key(ShardId::new(0)),
                "inbox" => w.election.inbox_key(a.id()),
                "epoch" => w.election.epoch_key(a.id()),
                "layout" => w.election.subspace().pack(&("layout",)),
                _ => w.election.subspace().pack(&("config",)),
            };
            w.raw_set(&key, bytes).await;
            let results = every_operation(&w, &leader, &coord, &a).await;
            for op in must_refuse {
                assert!(
                    corrupt_at(&results[op], &key),
                    "{what} = {bytes:?}: {op} gave {:?}",
                    results[op]
                );
            }
            for (op, r) in &results {
                assert!(
                    r.is_ok()
                        || corrupt_at(r, &key)
                        || matches!(
                            r,
                            Err(ElectionError::OperatorRefused { .. }
                                | ElectionError::StaleToken { .. })
                        ),
                    "{what} = {bytes:?}: {op} gave an unexpected {r:?}"
                );
            }
            assert_eq!(
                w.raw_get(&key).await.as_deref(),
                Some(bytes),
                "{what}: the garbage was overwritten"
            );
        }
    }
}

// Guarantee 6: keys under the members' and shards' subspaces that the election never writes
// (another tuple shape, a number, a suffix it does not know, raw bytes) make the operations
// that scan those subspaces fail closed with `Corrupt` naming the key; a member's own
// three-key heartbeat is not disturbed.
#[tokio::test]
async fn held_unknown_keys_under_the_members_and_shards_fail_the_scans_closed() {
    let members = w_subspace().subspace(&("members",));
    let shards = w_subspace().subspace(&("shards",));
    // Raw bytes inside the members' range (which ends at the prefix + 0xff): not a tuple.
    let mut raw_member = members.bytes().to_vec();
    raw_member.extend_from_slice(b"\xfe\x01");
    let mut raw_member2 = members.bytes().to_vec();
    raw_member2.extend_from_slice(b"\x01abc");
    let strange: Vec<(Vec<u8>, &'static [&'static str])> = vec![
        (
            members.pack(&(42,)),
            &["coordinate", "placement", "assignments", "drained_members"],
        ),
        (
            members.pack(&("x", "weird")),
            &["coordinate", "placement", "assignments"],
        ),
        (
            members.pack(&("x", "inbox", "more")),
            &["coordinate", "placement"],
        ),
        (
            members.pack(&("",)),
            &["coordinate", "placement", "assignments"],
        ),
        (raw_member, &["coordinate", "placement", "assignments"]),
        (raw_member2, &["coordinate", "placement", "assignments"]),
        (
            shards.pack(&("x",)),
            &["coordinate", "placement", "assignments"],
        ),
        (
            shards.pack(&(-1,)),
            &["coordinate", "placement", "assignments"],
        ),
        (
            shards.pack(&(1u64 << 40,)),
            &["coordinate", "placement", "assignments"],
        ),
    ];
    for (key, must_refuse) in strange {
        let (w, leader, coord, a) = World::with_owner(4, 4).await;
        w.raw_set(&key, b"\x02\x01").await;
        let results = every_operation(&w, &leader, &coord, &a).await;
        for op in must_refuse {
            assert!(
                matches!(&results[op], Err(ElectionError::Corrupt { .. })),
                "{}: {op} gave {:?}",
                fdb_leader_election::printable_key(&key),
                results[op]
            );
        }
        assert!(
            results["member_cycle"].is_ok(),
            "{:?}",
            results["member_cycle"]
        );
    }
}

fn w_subspace() -> Subspace {
    Subspace::from("adversarial")
}

// Guarantee 6: oversized and empty ids, out-of-range shards and layouts, and absurd tokens are
// typed errors; an id at the size limit works end to end.
#[tokio::test]
async fn held_oversized_ids_out_of_range_shards_and_absurd_tokens_are_typed_errors() {
    let max = fdb_leader_election::MAX_CANDIDATE_ID_BYTES;
    assert!(matches!(
        CandidateId::parse(&"x".repeat(max + 1)),
        Err(ElectionError::TooLarge { .. })
    ));
    assert!(matches!(
        CandidateId::parse(""),
        Err(ElectionError::InvalidId { .. })
    ));
    assert!(CandidateId::random(&"x".repeat(max)).is_err());
    for (shards, moves) in [
        (0, 1),
        (fdb_leader_election::shard::MAX_SHARDS + 1, 1),
        (4, 0),
    ] {
        assert!(matches!(
            Layout::new(shards, moves),
            Err(ElectionError::InvalidLayout { .. })
        ));
    }
    let w = World::new(4, 4).await;
    let (leader, coord) = w.coordinator().await;
    // A member whose id is exactly at the limit joins, acquires and fences.
    let big = Member::with_clock(
        CandidateId::parse(&"m".repeat(max)).unwrap(),
        Priority::new(1),
        Weight::ONE,
        Arc::new(w.clock.clone()),
    );
    w.cycle(&big).await;
    w.coordinate(&leader, &coord).await;
    let owned = w.cycle(&big).await;
    assert_eq!(owned.len(), 4);
    w.fence(ShardId::new(0), Ballot::new(1)).await.unwrap();
    for s in [4, 5, u32::MAX] {
        assert!(matches!(
            w.fence(ShardId::new(s), Ballot::new(1)).await,
            Err(ElectionError::InvalidLayout { .. })
        ));
        let (id, op) = (big.id().clone(), CandidateId::parse("ops").unwrap());
        let moved = w
            .operate(|e, txn| {
                let (id, op) = (id.clone(), op.clone());
                async move { e.move_shard(&txn, ShardId::new(s), &id, &op).await }
            })
            .await;
        assert!(
            matches!(moved, Err(ElectionError::InvalidLayout { .. })),
            "{moved:?}"
        );
    }
    for token in [Ballot::ZERO, Ballot::new(2), Ballot::new(u64::MAX)] {
        assert!(matches!(
            w.fence(ShardId::new(0), token).await,
            Err(ElectionError::StaleToken { .. })
        ));
        assert!(matches!(
            w.coordinate_with(&coord, token).await,
            Err(ElectionError::StaleToken { .. })
        ));
    }
    // A runner refuses an impossible layout at start.
    let rt_db = MemDb::new();
    let refused = ShardedRunner::builder(rt_db, Subspace::from("x"))
        .shards(0)
        .start();
    assert!(refused.is_err());
}

// Guarantee 6; docs/design.md §6: "Every decode is strict: ... impossible state -> a typed error
// naming the key; the election stays a follower ('fail closed'); ... nothing is overwritten
// blindly". (Found by the adversarial review; failed before the fix.)
//
// 1. a owns shard 0. Its inbox key is overwritten with a well-framed inbox asking it to hand
//    shard 0 over to the member "" (an empty id: impossible, `CandidateId::parse` refuses it;
//    likewise an id longer than MAX_CANDIDATE_ID_BYTES).
// 2. The inbox fails to decode, as garbage does, with `Corrupt` naming the inbox key: a's
//    cycle fails closed and writes nothing; shard 0 stays a's, readable; nothing is written
//    at the impossible member's inbox; the planted value stays for an operator to repair.
//    Placement, which reads every inbox, fails closed naming that same inbox key (as for any
//    corrupt inbox), never a shard record.
//    (Before the fix `decode_inbox` checked no id: a's cycle accepted the request and wrote
//    shard 0 "vacant, reserved for ''" and an inbox at `members/("", "inbox")`, records the
//    library itself cannot read back: `shard_record(0)`, `fence_shard`, `coordinate`,
//    `assignments` and `placement` failed with `Corrupt` naming the shard, for good.)
//
// The review's version of this test also required `placement` to succeed with the planted
// inbox in place; that contradicts the rule (and the corrupt-values test): an inbox that does
// not decode fails every operation that reads it, closed. What must hold is that the
// corruption stays where it was planted and that the library writes nothing it cannot read.
#[tokio::test]
async fn a_corrupt_inbox_fails_the_member_cycle_closed_and_nothing_unreadable_is_written() {
    for bad_id in [String::new(), "x".repeat(2_000)] {
        let (w, _leader, _coord, a) = World::with_owner(4, 4).await;
        assert_eq!(a.owned_shards().len(), 4);
        check_mirror(&w, &a).await;
        let planted = wire(&InboxWire {
            seq: 100,
            reserved: vec![],
            hand_over: vec![(0, bad_id.clone())],
        });
        let inbox_key = w.election.inbox_key(a.id());
        w.raw_set(&inbox_key, &planted).await;
        let ctx = format!("id of {} bytes", bad_id.len());
        let outcome = w.try_cycle(&a, &BTreeSet::from([ShardId::new(0)])).await;
        assert!(corrupt_at(&outcome, &inbox_key), "{ctx}: {outcome:?}");
        let shard = w.shard(ShardId::new(0)).await.unwrap();
        assert_eq!(shard.owner().map(|o| o.member()), Some(a.id()), "{ctx}");
        let bad_inbox = w_subspace()
            .subspace(&("members",))
            .pack(&(bad_id.as_str(), "inbox"));
        assert_eq!(w.raw_get(&bad_inbox).await, None, "{ctx}");
        assert_eq!(w.raw_get(&inbox_key).await, Some(planted), "{ctx}");
        let placement = w
            .operate(|e, txn| async move { e.placement(&txn).await })
            .await;
        assert!(corrupt_at(&placement, &inbox_key), "{ctx}: {placement:?}");
    }
}

// Guarantee 6: "shard out of range ... must give typed errors" (docs/design.md §6). (Found by the
// adversarial review; failed before the fix.)
//
// 1. A 4-shard election. A well-framed shard record is planted at `shards/(100)` (vacant,
//    reserved for a) and a's inbox lists shard 100 as reserved for it.
// 2. a's next cycle reads the layout with the records its inbox names (only when the inbox
//    asks something: a steady heartbeat still reads three keys) and refuses the inbox: `Corrupt`
//    naming the inbox key, nothing written, nothing acquired. `fence_shard` refuses the shard
//    with `InvalidLayout`. (Before the fix the cycle acquired shard 100 with no error: the
//    member believed it owned a shard the layout does not have, with a token, and the runner
//    would have issued a guard for it, while the coordinator ignored that record and the fence
//    refused the token: work on a shard nobody else sees.)
#[tokio::test]
async fn a_member_refuses_an_inbox_naming_a_shard_outside_the_layout() {
    let (w, _leader, _coord, a) = World::with_owner(4, 4).await;
    check_mirror(&w, &a).await;
    let out_of_range = ShardId::new(100);
    w.raw_set(
        &w.election.shard_key(out_of_range),
        &wire(&ShardWire {
            ballot: 0,
            owner: None,
            move_to: None,
            reserved_for: Some(a.id().as_str().to_owned()),
            writer: None,
        }),
    )
    .await;
    w.raw_set(
        &w.election.inbox_key(a.id()),
        &wire(&InboxWire {
            seq: 100,
            reserved: vec![100],
            hand_over: vec![],
        }),
    )
    .await;
    let outcome = w.try_cycle(&a, &none()).await;
    assert!(matches!(
        w.fence(out_of_range, Ballot::new(1)).await,
        Err(ElectionError::InvalidLayout { .. })
    ));
    let owned = a.owned_shards();
    assert!(
        owned.keys().all(|s| s.get() < 4),
        "a 4-shard election's member believes it owns {owned:?} (cycle: {:?})",
        outcome.as_ref().map(BTreeMap::len)
    );
    assert!(
        corrupt_at(&outcome, &w.election.inbox_key(a.id())),
        "the cycle fails closed naming the inbox: {outcome:?}"
    );
    assert_eq!(
        owned.len(),
        4,
        "a keeps its own shards until its lease runs out"
    );
}
