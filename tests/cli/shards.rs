//! `fdb-leader shards …` on a sharded election in a SQLite file: the election is populated
//! through the library (members joining and acquiring, a coordinator placing), at the
//! subspace the command line documents, `("fdb-leader", NAME, "shards")`; the commands are
//! real processes. `status` text and JSON, `freeze` / `unfreeze`, `drain` / `undrain` (in the
//! status and in placement's quotas), `move` refused until placement is frozen (by the command
//! its message prints, run as printed) and then carried out by the members, a shard number out
//! of range, unknown, drained and fenced members, and no store or election created by any of
//! them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::cli_support::{World, in_txn, ok, run_suggested, stderr, suggested};
use fdb_leader_election::shard::{Coordinator, Layout, Member, ShardedElection};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, Priority, ShardId, SqliteDb, Weight,
};
use foundationdb_tuple::Subspace;
use serde_json::Value;

const SHARDS: u32 = 8;
const MOVES: u32 = 2;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A sharded election in the world's SQLite file, driven by hand through the library: its
/// members cycle and its coordinator places only when a test says so, so nothing changes
/// under the command line between two steps. The lease is long: nobody is fenced out by time.
struct Sharded {
    rt: tokio::runtime::Runtime,
    db: SqliteDb,
    election: ShardedElection,
    leader: Candidate,
    coordinator: Coordinator,
}

impl Sharded {
    /// Creates the sharded election `name` (8 shards, 2 moves in flight) in `path`.
    fn create(path: &Path, name: &str) -> Sharded {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let db = SqliteDb::open(path).unwrap();
        // The subspace the command line documents for `--election NAME`.
        let election = ShardedElection::new(Subspace::from(("fdb-leader", name, "shards")));
        let config = ElectionConfig::builder()
            .lease_duration(Duration::from_secs(60))
            .heartbeat_interval(Duration::from_secs(20))
            .candidate_timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let layout = Layout::new(SHARDS, MOVES).unwrap();
        let id = CandidateId::random("coordinator").unwrap();
        let leader = Candidate::new(id.clone(), Priority::new(1));
        rt.block_on(async {
            let (e, c, l) = (election.clone(), config.clone(), leader.clone());
            in_txn!(db, [e, c, l], |txn| {
                e.initialize(&txn, &c, &layout).await?;
                e.coordinator_election().register_candidate(&txn, &l).await
            })
            .unwrap();
            let won = election
                .coordinator_election()
                .run_cycle(&db, &leader)
                .await
                .unwrap();
            assert!(won.is_leader());
        });
        Sharded {
            rt,
            db,
            election,
            leader,
            coordinator: Coordinator::new(id),
        }
    }

    /// A member that has joined (one cycle).
    fn join(&self, label: &str) -> Member {
        let m = Member::new(
            CandidateId::random(label).unwrap(),
            Priority::new(0),
            Weight::ONE,
        );
        self.cycle(&m);
        m
    }

    /// One member cycle, every shard it was asked to hand over ready (its work stopped).
    fn cycle(&self, m: &Member) {
        let ready: BTreeSet<ShardId> = (0..SHARDS).map(ShardId::new).collect();
        let e = self.election.clone();
        self.rt.block_on(async {
            let cycle = in_txn!(self.db, [e, m, ready], |txn| e
                .member_cycle(&txn, &m, &ready)
                .await)
            .unwrap();
            m.adopt(cycle);
        });
    }

    /// The coordinator renews its leadership, then places once.
    fn coordinate(&self) {
        let e = self.election.clone();
        self.rt.block_on(async {
            let renewed = e
                .coordinator_election()
                .run_cycle(&self.db, &self.leader)
                .await
                .unwrap();
            assert!(renewed.is_leader());
            let token = self.leader.fencing_token().unwrap();
            let c = self.coordinator.clone();
            in_txn!(self.db, [e, c], |txn| e.coordinate(&txn, &c, token).await).unwrap();
        });
    }

    /// `m` leaves gracefully: its shards are vacant and its epoch ends (fenced).
    fn leave(&self, m: &Member) {
        let e = self.election.clone();
        self.rt.block_on(async {
            in_txn!(self.db, [e, m], |txn| e.leave(&txn, &m).await).unwrap();
        });
    }

    /// Rounds of coordinate and member cycles until nobody's shards change.
    fn settle(&self, members: &[&Member]) {
        for _ in 0..20 {
            let before: Vec<_> = members.iter().map(|m| m.owned_shards()).collect();
            self.coordinate();
            for m in members {
                self.cycle(m);
            }
            for m in members {
                self.cycle(m);
            }
            if before == members.iter().map(|m| m.owned_shards()).collect::<Vec<_>>() {
                return;
            }
        }
        panic!("placement did not settle");
    }
}

/// A world with a sharded election `default`: members `a` and `b` own 4 shards each, and `c`
/// joined and left (fenced out at epoch 2; the coordinator forgets it at its next attempt).
fn populated() -> (World, Sharded, Member, Member, Member) {
    let world = World::new();
    let sharded = Sharded::create(&world.db(), "default");
    let (a, b) = (sharded.join("a"), sharded.join("b"));
    sharded.settle(&[&a, &b]);
    let c = sharded.join("c");
    sharded.leave(&c);
    assert_eq!(a.owned_shards().len(), 4);
    assert_eq!(b.owned_shards().len(), 4);
    (world, sharded, a, b, c)
}

fn status(world: &World) -> Value {
    let out = world.cli(&["shards", "status", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// The member object of `id` in a status.
fn member<'a>(status: &'a Value, id: &CandidateId) -> &'a Value {
    status["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not in {status}"))
}

#[test]
fn status_shows_the_layout_the_members_and_every_shards_owner_and_ballot() {
    let (world, _sharded, a, b, c) = populated();
    let s = status(&world);
    assert_eq!(s["election"], "default");
    assert_eq!(
        s["subspace"],
        serde_json::json!(["fdb-leader", "default", "shards"])
    );
    assert_eq!(s["layout"]["shards"], SHARDS);
    assert_eq!(s["layout"]["max_concurrent_moves"], MOVES);
    assert_eq!(s["layout"]["frozen"], false);
    assert_eq!(s["owned"], 8);
    assert_eq!(s["vacant"], 0);
    assert_eq!(s["moves_in_flight"], 0);
    assert_eq!(s["reservations"], 0);
    assert_eq!(s["placement"]["misplaced"], 0);
    assert_eq!(s["placement"]["next_moves"], 0);
    assert_eq!(s["placement"]["deferred_moves"], 0);
    assert_eq!(s["drained"], serde_json::json!([]));
    assert_eq!(s["members"].as_array().unwrap().len(), 3);
    for m in [&a, &b] {
        let j = member(&s, m.id());
        assert_eq!(j["epoch"], 1);
        assert_eq!(j["fenced"], false);
        assert_eq!(j["drained"], false);
        assert_eq!(j["weight"], 1);
        assert_eq!(j["priority"], 0);
        assert_eq!(j["owned"], 4);
        assert_eq!(j["quota"], 4);
        assert_eq!(j["lease_ms"], 60_000);
        assert!(j["renewal"].as_u64().is_some());
    }
    let gone = member(&s, c.id());
    assert_eq!(gone["fenced"], true);
    assert_eq!(gone["epoch"], 2);
    assert_eq!(gone["owned"], 0);
    assert_eq!(gone["quota"], Value::Null);
    // Every shard, in order, with the owner the members believe in and its ballot.
    let shards = s["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 8);
    for (n, j) in shards.iter().enumerate() {
        let shard = ShardId::new(u32::try_from(n).unwrap());
        let (owner, token) = [&a, &b]
            .iter()
            .find_map(|m| m.shard_token(shard).map(|t| (m.id(), t)))
            .expect("owned");
        assert_eq!(j["shard"], n);
        assert_eq!(j["owner"], owner.as_str());
        assert_eq!(j["ballot"], token.get());
        assert_eq!(j["moving_to"], Value::Null);
        assert_eq!(j["reserved_for"], Value::Null);
    }

    let out = world.cli(&["shards", "status"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "sharded election  default (sqlite {}), subspace (\"fdb-leader\", \"default\", \
             \"shards\")",
            world.db().display()
        )),
        "{text}"
    );
    for line in [
        "layout     8 shards, at most 2 moves in flight, placement not frozen",
        "shards     8 owned, 0 vacant, 0 moving, 0 reserved",
        "placement  balanced",
        "members (3)",
        "shards (8)",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
    // A member row: id, epoch, priority, weight, state, owned, quota.
    let row = |id: &CandidateId| {
        text.lines()
            .find(|l| l.trim_start().starts_with(id.as_str()))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(row(a.id()), "1 0 1 live 4 4", "{text}");
    assert_eq!(row(c.id()), "2 0 1 fenced 0 -", "{text}");
    // Shard rows: consecutive shards of one owner at one ballot on one line, covering 0-7.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("shards (8)"))
        .skip(2)
        .collect();
    assert!(!rows.is_empty() && rows.len() <= 8, "{text}");
    let mut covered = 0;
    for r in &rows {
        let span = r.split_whitespace().next().unwrap();
        let (first, last) = span.split_once('-').unwrap_or((span, span));
        let (first, last): (u32, u32) = (first.parse().unwrap(), last.parse().unwrap());
        assert_eq!(first, covered, "{text}");
        covered = last + 1;
    }
    assert_eq!(covered, 8, "{text}");
}

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// The documented fields of `shards status --json` (README), pinned: renaming or dropping one
/// breaks scripts (adding one is compatible: add it here and in the README).
#[test]
fn status_json_keeps_its_documented_fields() {
    let (world, ..) = populated();
    let s = status(&world);
    assert_eq!(
        keys(&s),
        [
            "drained",
            "election",
            "elections",
            "layout",
            "members",
            "moves_in_flight",
            "owned",
            "placement",
            "reservations",
            "shards",
            "store",
            "subspace",
            "vacant",
        ]
    );
    assert_eq!(
        keys(&s["layout"]),
        ["frozen", "max_concurrent_moves", "shards"]
    );
    assert_eq!(
        keys(&s["placement"]),
        [
            "deferred_moves",
            "misplaced",
            "next_moves",
            "next_reservations",
            "withdrawals",
        ]
    );
    for m in s["members"].as_array().unwrap() {
        assert_eq!(
            keys(m),
            [
                "drained", "epoch", "fenced", "id", "lease_ms", "owned", "priority", "quota",
                "renewal", "weight",
            ]
        );
    }
    for j in s["shards"].as_array().unwrap() {
        assert_eq!(
            keys(j),
            ["ballot", "moving_to", "owner", "reserved_for", "shard"]
        );
    }
}

#[test]
fn freeze_and_unfreeze_show_in_the_status_and_say_when_nothing_changed() {
    let (world, ..) = populated();
    let out = world.cli(&["shards", "freeze"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("placement frozen"),
        "{}",
        stdout(&out)
    );
    assert_eq!(status(&world)["layout"]["frozen"], true);
    let text = stdout(&world.cli(&["shards", "status"]));
    assert!(text.contains("placement frozen"), "{text}");
    let again = world.cli(&["shards", "freeze"]);
    assert!(again.status.success());
    assert!(
        stdout(&again).contains("already frozen"),
        "{}",
        stdout(&again)
    );

    let out = world.cli(&["shards", "unfreeze"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("placement unfrozen"),
        "{}",
        stdout(&out)
    );
    assert_eq!(status(&world)["layout"]["frozen"], false);
    let again = world.cli(&["shards", "unfreeze"]);
    assert!(again.status.success());
    assert!(
        stdout(&again).contains("was not frozen"),
        "{}",
        stdout(&again)
    );
}

#[test]
fn drain_and_undrain_show_in_the_status_and_in_placements_quotas() {
    let (world, sharded, a, b, c) = populated();
    let out = world.cli(&["shards", "drain", "--member", a.id().as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("drained {}", a.id())),
        "{}",
        stdout(&out)
    );
    let s = status(&world);
    assert_eq!(s["drained"], serde_json::json!([a.id().as_str()]));
    assert_eq!(member(&s, a.id())["drained"], true);
    assert_eq!(member(&s, a.id())["quota"], 0);
    assert_eq!(member(&s, b.id())["quota"], 8);
    // a's 4 shards are off target: 2 moves now (the limit), 2 deferred.
    assert_eq!(s["placement"]["misplaced"], 4);
    assert_eq!(s["placement"]["next_moves"], 2);
    assert_eq!(s["placement"]["deferred_moves"], 2);
    let text = stdout(&world.cli(&["shards", "status"]));
    assert!(
        text.contains("placement  off target 4; next: moves 2, reservations 0"),
        "{text}"
    );
    let a_row = text
        .lines()
        .find(|l| l.trim_start().starts_with(a.id().as_str()))
        .unwrap();
    assert!(
        a_row.contains("drained") && a_row.ends_with(" 0"),
        "{a_row}"
    );

    // The members and the coordinator act on it: everything moves to b.
    sharded.settle(&[&a, &b]);
    assert!(a.owned_shards().is_empty());
    let s = status(&world);
    assert_eq!(member(&s, a.id())["owned"], 0);
    assert_eq!(member(&s, b.id())["owned"], 8);
    assert_eq!(s["placement"]["misplaced"], 0);

    let out = world.cli(&["shards", "undrain", "--member", a.id().as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!("undrained {}", a.id())));
    let s = status(&world);
    assert_eq!(s["drained"], serde_json::json!([]));
    assert_eq!(member(&s, a.id())["quota"], 4);
    assert_eq!(s["placement"]["misplaced"], 4);
    sharded.settle(&[&a, &b]);
    assert_eq!(a.owned_shards().len(), 4);

    // A drain twice changes nothing.
    for args in [
        ["shards", "drain", "--member", b.id().as_str()],
        ["shards", "drain", "--member", b.id().as_str()],
        ["shards", "undrain", "--member", b.id().as_str()],
    ] {
        let out = world.cli(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    // The coordinator has forgotten c (it left, no shard names it): it can no longer be
    // drained (its id will never join again), and nothing of it is listed.
    let out = world.cli(&["shards", "drain", "--member", c.id().as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no member of that id"),
        "{}",
        stderr(&out)
    );
    assert_eq!(status(&world)["members"].as_array().unwrap().len(), 2);
}

#[test]
fn a_drain_mark_outlives_the_member_it_names_until_undrained() {
    let (world, sharded, a, b, c) = populated();
    // c left (fenced, not yet forgotten): it may be drained still.
    let out = world.cli(&["shards", "drain", "--member", c.id().as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    sharded.settle(&[&a, &b]);
    let s = status(&world);
    assert_eq!(
        s["members"].as_array().unwrap().len(),
        2,
        "c forgotten: {s}"
    );
    assert_eq!(s["drained"], serde_json::json!([c.id().as_str()]));
    let text = stdout(&world.cli(&["shards", "status"]));
    assert!(
        text.contains(&format!("drained, not joined: {}", c.id())),
        "{text}"
    );
    let out = world.cli(&["shards", "undrain", "--member", c.id().as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(status(&world)["drained"], serde_json::json!([]));
}

#[test]
fn draining_the_last_member_that_takes_shards_says_it_keeps_them() {
    let (world, _sharded, a, b, _c) = populated();
    let out = world.cli(&["shards", "drain", "--member", a.id().as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("moves its 4 shards to the 1 other live member,"),
        "{}",
        stdout(&out)
    );
    let out = world.cli(&["shards", "drain", "--member", b.id().as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("no other live member takes shards")
            && text.contains("it keeps its 4 shards")
            && !text.contains("to the others"),
        "{text}"
    );
}

#[test]
fn a_move_to_a_member_of_weight_0_is_refused_naming_why() {
    let (world, sharded, a, _b, _c) = populated();
    let idle = Member::new(
        CandidateId::random("idle").unwrap(),
        Priority::new(0),
        Weight::DRAINED,
    );
    sharded.cycle(&idle);
    assert!(world.cli(&["shards", "freeze"]).status.success());
    let (&shard, _) = a.owned_shards().iter().next().unwrap();
    let n = shard.get().to_string();
    let out = world.cli(&["shards", "move", "--shard", &n, "--to", idle.id().as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("weight 0"), "{err}");
    let lines = suggested(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(run_suggested(&lines[0]).status.success());
    // Nothing was asked of anyone.
    assert_eq!(status(&world)["moves_in_flight"], 0);
}

#[test]
fn elections_off_shows_in_the_status_and_every_member_gives_its_shards_back() {
    let (world, sharded, a, b, _c) = populated();
    let out = world.cli(&["config", "set", "--sharded", "--elections", "off"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("elections off: every member gives its shards back")
            && err.contains("still fences out members that stop renewing"),
        "{err}"
    );
    let s = status(&world);
    assert_eq!(s["elections"], false);
    let text = stdout(&world.cli(&["shards", "status"]));
    let line = text
        .lines()
        .find(|l| l.starts_with("elections  off"))
        .unwrap_or_else(|| panic!("{text}"));
    let lines = suggested(line);
    assert_eq!(lines.len(), 1, "{line}");
    // The members' next cycles (their work stopped) give every shard back.
    sharded.cycle(&a);
    sharded.cycle(&b);
    assert!(a.owned_shards().is_empty() && b.owned_shards().is_empty());
    sharded.coordinate();
    let s = status(&world);
    assert_eq!(s["vacant"], 8);
    assert_eq!(s["reservations"], 0);
    // A move by hand is refused while elections are off (nobody would acquire it), even
    // frozen, and nothing is written; the refusal names the commands that make it work.
    assert!(world.cli(&["shards", "freeze"]).status.success());
    let b_id = b.id().as_str().to_owned();
    let out = world.cli(&["shards", "move", "--shard", "0", "--to", &b_id]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("elections are off"), "{err}");
    let fixes = suggested(&err);
    assert_eq!(fixes.len(), 2, "{err}");
    assert_eq!(status(&world)["reservations"], 0);
    assert_eq!(status(&world)["moves_in_flight"], 0);
    // The command the status names turns them on again, as printed, and so does the
    // refusal's first; its second, the move again, is then made.
    assert_eq!(fixes[0], lines[0]);
    assert!(run_suggested(&lines[0]).status.success());
    let moved = run_suggested(&fixes[1]);
    assert!(moved.status.success(), "{}", stderr(&moved));
    assert_eq!(status(&world)["reservations"], 1);
    assert!(world.cli(&["shards", "unfreeze"]).status.success());
    assert_eq!(status(&world)["elections"], true);
    sharded.settle(&[&a, &b]);
    assert_eq!(a.owned_shards().len() + b.owned_shards().len(), 8);
}

#[test]
fn unknown_and_malformed_members_are_refused_naming_the_flag() {
    let (world, ..) = populated();
    for verb in ["drain", "undrain"] {
        let out = world.cli(&["shards", verb, "--member", "nobody-0123456789abcdef"]);
        assert_eq!(out.status.code(), Some(1), "{verb}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("--member nobody-0123456789abcdef: no member of that id"),
            "{err}"
        );
        // It points at the command that lists the ids, and that command works as printed.
        let lines = suggested(&err);
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].ends_with("shards status"), "{err}");
        assert!(run_suggested(&lines[0]).status.success());
        let out = world.cli(&["shards", verb, "--member", ""]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("--member"), "{}", stderr(&out));
    }
    // Nothing was drained.
    assert_eq!(status(&world)["drained"], serde_json::json!([]));
}

#[test]
fn move_is_refused_until_placement_is_frozen_then_the_members_carry_it_out() {
    let (world, sharded, a, b, _c) = populated();
    // The last of a's shards: before the move, the end of a run of a's in the text.
    let (&shard, &ballot) = a.owned_shards().iter().next_back().unwrap();
    let n = shard.get().to_string();
    let to = b.id().as_str();

    let out = world.cli(&["shards", "move", "--shard", &n, "--to", to]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("placement is not frozen"), "{err}");
    // freeze, the same move, unfreeze: each runs as printed.
    let lines = suggested(&err);
    let db = world.db().display().to_string();
    assert_eq!(
        lines,
        [
            format!("fdb-leader --sqlite {db} shards freeze"),
            format!("fdb-leader --sqlite {db} shards move --shard {n} --to {to}"),
            format!("fdb-leader --sqlite {db} shards unfreeze"),
        ],
        "{err}"
    );
    assert_eq!(
        status(&world)["shards"][shard.get() as usize]["moving_to"],
        Value::Null
    );
    let frozen = run_suggested(&lines[0]);
    assert!(frozen.status.success(), "{}", stderr(&frozen));
    let moved = run_suggested(&lines[1]);
    assert!(moved.status.success(), "{}", stderr(&moved));
    assert!(
        stdout(&moved).starts_with(&format!(
            "move requested: {}, which owns shard {n} at ballot {ballot}",
            a.id()
        )),
        "{}",
        stdout(&moved)
    );
    let s = status(&world);
    let j = &s["shards"][shard.get() as usize];
    assert_eq!(j["owner"], a.id().as_str());
    assert_eq!(j["moving_to"], to);
    assert_eq!(s["moves_in_flight"], 1);
    let text = stdout(&world.cli(&["shards", "status"]));
    // The shard in flight has a row of its own.
    let row = text.lines().find(|l| l.contains("moving to")).unwrap();
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        words,
        [
            n.as_str(),
            &ballot.get().to_string(),
            a.id().as_str(),
            "moving",
            "to",
            to
        ],
        "{text}"
    );

    // The owner hands it over, the target acquires it at ballot + 1; frozen, it stays.
    sharded.cycle(&a);
    sharded.cycle(&b);
    sharded.settle(&[&a, &b]);
    assert_eq!(
        b.shard_token(shard).map(|t| t.get()),
        Some(ballot.get() + 1)
    );
    let s = status(&world);
    let j = &s["shards"][shard.get() as usize];
    assert_eq!(
        (j["owner"].as_str(), j["ballot"].as_u64()),
        (Some(to), Some(ballot.get() + 1))
    );
    assert_eq!(member(&s, b.id())["owned"], 5);
    // Done already: nothing changes.
    let again = run_suggested(&lines[1]);
    assert!(again.status.success());
    assert!(
        stdout(&again).starts_with(&format!("shard {n} already belongs to {to}")),
        "{}",
        stdout(&again)
    );

    // A shard number out of range: a usage error naming the flag and the range.
    let out = world.cli(&["shards", "move", "--shard", "8", "--to", to]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("--shard 8: the sharded election default has 8 shards, numbered 0 to 7"),
        "{}",
        stderr(&out)
    );
    let out = world.cli(&["shards", "move", "--shard", "-1", "--to", to]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--shard"), "{}", stderr(&out));
    // An unknown target.
    let out = world.cli(&[
        "shards",
        "move",
        "--shard",
        &n,
        "--to",
        "nobody-0123456789abcdef",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--to nobody-0123456789abcdef: no member of that id"),
        "{}",
        stderr(&out)
    );
    // A fenced-out target (one that left since the coordinator's last attempt).
    let d = sharded.join("d");
    sharded.leave(&d);
    let out = world.cli(&["shards", "move", "--shard", &n, "--to", d.id().as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("fenced out"), "{}", stderr(&out));
    // A drained target: undrain it first, by the command printed.
    assert!(
        world
            .cli(&["shards", "drain", "--member", a.id().as_str()])
            .status
            .success()
    );
    let out = world.cli(&["shards", "move", "--shard", &n, "--to", a.id().as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("that member is drained"), "{err}");
    let lines = suggested(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(run_suggested(&lines[0]).status.success());
    let back = world.cli(&["shards", "move", "--shard", &n, "--to", a.id().as_str()]);
    assert!(back.status.success(), "{}", stderr(&back));
    assert!(
        stdout(&back).starts_with("move requested"),
        "{}",
        stdout(&back)
    );
}

#[test]
fn no_command_creates_a_store_or_a_sharded_election() {
    let world = World::new();
    let commands: [&[&str]; 7] = [
        &["shards", "status"],
        &["shards", "status", "--json"],
        &["shards", "freeze"],
        &["shards", "unfreeze"],
        &["shards", "drain", "--member", "a-1"],
        &["shards", "undrain", "--member", "a-1"],
        &["shards", "move", "--shard", "0", "--to", "a-1"],
    ];
    let expected = format!(
        "no sharded election at {} (name default, subspace (\"fdb-leader\", \"default\", \
         \"shards\"))",
        world.db().display()
    );
    for args in commands {
        let out = world.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&expected),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(!world.db().exists(), "{args:?} created the store");
    }
    // A store with the single election of that name, but no sharded one: the same answer.
    assert!(
        world
            .cli(&["config", "set", "--preemption", "on"])
            .status
            .success()
    );
    for args in commands {
        let out = world.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // And the single election's status is untouched by a sharded election of its name.
    let _sharded = Sharded::create(&world.db(), "default");
    let single = world.cli(&["status", "--json"]);
    assert!(single.status.success(), "{}", stderr(&single));
    let single: Value = serde_json::from_slice(&single.stdout).unwrap();
    assert_eq!(single["config"]["lease_ms"], 10_000);
    assert_eq!(single["candidates"], serde_json::json!([]));
    // Another name: its own sharded election (none).
    let out = world.cli(&["--election", "other", "shards", "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("(name other,"), "{}", stderr(&out));
}

#[test]
fn config_sharded_reads_and_writes_the_sharded_elections_configuration() {
    let world = World::new();
    // No sharded election: `get` answers so, naming the command that creates one; `set`
    // without a shard count creates nothing.
    let out = world.cli(&["config", "get", "--sharded"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`fdb-leader config set --sharded --shards M`"),
        "{}",
        stderr(&out)
    );
    let out = world.cli(&["config", "set", "--sharded", "--preemption", "off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no sharded election"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        world.cli(&["shards", "status"]).status.code(),
        Some(1),
        "created by a refused set"
    );
    // `--shards` only with `--sharded`, named.
    let out = world.cli(&["config", "set", "--shards", "4", "--preemption", "off"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--sharded"), "{}", stderr(&out));
    // Created with 4 shards and these settings; the single election of the name is not.
    let out = world.config_sharded(
        "4",
        &[
            "--lease",
            "2s",
            "--heartbeat",
            "500ms",
            "--transaction-timeout",
            "100ms",
            "--max-clock-rate-error-ppm",
            "50000",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("lease                     2s"),
        "{}",
        stdout(&out)
    );
    assert_eq!(status(&world)["layout"]["shards"], 4);
    let got = sharded_config(&world);
    assert_eq!(got["lease_ms"], 2_000);
    assert_eq!(got["max_clock_rate_error_ppm"], 50_000);
    assert_eq!(world.cli(&["config", "get"]).status.code(), Some(1));
    // An existing sharded election keeps its count (a warning says so); the settings change.
    let out = world.config_sharded("9", &["--handover-grace", "700ms"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("already exists with 4 shards").count(),
        1,
        "the warning, once (after the transaction, however many attempts it took): {}",
        stderr(&out)
    );
    assert_eq!(status(&world)["layout"]["shards"], 4);
    // What the members read: the library sees the settings written.
    let (_, config) = configs_read(&world.db());
    assert_eq!(config.lease_duration(), Duration::from_secs(2));
    assert_eq!(config.handover_grace(), Duration::from_millis(700));
    // An invalid combination is refused, nothing changed.
    let out = world.cli(&["config", "set", "--sharded", "--heartbeat", "1s"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(sharded_config(&world)["heartbeat_ms"], 500);
}

/// `config get --sharded --json`, parsed.
fn sharded_config(world: &World) -> Value {
    serde_json::from_str(&ok(world, &["config", "get", "--sharded", "--json"])).unwrap()
}

/// The configuration a member's cycle of the sharded election `default` in `path` reads, and
/// the coordinator election's.
fn configs_read(path: &Path) -> (ElectionConfig, ElectionConfig) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = SqliteDb::open(path).unwrap();
    let e = ShardedElection::new(Subspace::from(("fdb-leader", "default", "shards")));
    let m = Member::new(
        CandidateId::random("m").unwrap(),
        Priority::new(0),
        Weight::ONE,
    );
    rt.block_on(async {
        let cycle = in_txn!(db, [e, m], |txn| e
            .member_cycle(&txn, &m, &BTreeSet::new())
            .await)
        .unwrap();
        let member = cycle.config().clone();
        drop(cycle);
        let coordinator = in_txn!(db, [e], |txn| e
            .coordinator_election()
            .read_config(&txn)
            .await)
        .unwrap();
        (member, coordinator)
    })
}

#[test]
fn config_set_sharded_reaches_the_members_and_the_coordinator_election() {
    let world = World::new();
    let _sharded = Sharded::create(&world.db(), "default");
    let (member, coordinator) = configs_read(&world.db());
    assert_eq!(member.lease_duration(), Duration::from_secs(60));
    assert_eq!(coordinator, member);
    let out = world.cli(&[
        "config",
        "set",
        "--sharded",
        "--lease",
        "10s",
        "--heartbeat",
        "2s",
        "--transaction-timeout",
        "500ms",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("members and coordinators use it from their next cycle"),
        "{}",
        stderr(&out)
    );
    // A member's next cycle reads it, and the coordinator election holds the same.
    let (member, coordinator) = configs_read(&world.db());
    assert_eq!(member.lease_duration(), Duration::from_secs(10));
    assert_eq!(member.heartbeat_interval(), Duration::from_secs(2));
    assert_eq!(coordinator, member);
    assert_eq!(sharded_config(&world)["lease_ms"], 10_000);
}

#[test]
fn the_suggested_create_command_works_as_printed() {
    let world = World::new();
    // The command the no-sharded-election message names, with nothing but the count:
    // created with the default settings, and said so.
    let out = world.cli(&["config", "set", "--sharded", "--shards", "4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("sharded election created"),
        "{}",
        stderr(&out)
    );
    assert_eq!(status(&world)["layout"]["shards"], 4);
    // Counts beyond `run --shards`' limit are for ShardedRunners: accepted here.
    let other = world.cli(&[
        "--election",
        "big",
        "config",
        "set",
        "--sharded",
        "--shards",
        "1024",
    ]);
    assert!(other.status.success(), "{}", stderr(&other));
    let zero = world.cli(&["config", "set", "--sharded", "--shards", "0"]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(stderr(&zero).contains("--shards"), "{}", stderr(&zero));
}
