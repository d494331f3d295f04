//! Versions on the command line (docs/design.md §14, issue 33): `run --app-version` and
//! `FDB_LEADER_APP_VERSION` (an invalid version a usage error naming the flag), `config set
//! --version-policy` (single and sharded), `status` and `watch --json` showing the candidates'
//! and the leader's versions, and `status` showing a directed resign the leader refused.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::cli_support::{
    PATIENCE, World, assert_no_panic, bin, in_txn, is_label, poll, signal, status_json, text,
    wait_exit, wait_live_candidates,
};
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, ElectionConfig, LeaderElection, Priority, SqliteDb,
};
use foundationdb_tuple::Subspace;
use nix::sys::signal::Signal;
use serde_json::Value;

#[test]
fn an_invalid_app_version_is_a_usage_error_naming_the_flag_and_the_form() {
    let world = World::new();
    for (args, env) in [
        (vec!["--app-version", "1.5"], None),
        (vec!["--app-version=v1.5.0"], None),
        (vec![], Some("latest")),
    ] {
        let mut command = world.command();
        command.arg("run").args(&args).args(["--", "true"]);
        if let Some(value) = env {
            command.env("FDB_LEADER_APP_VERSION", value);
        }
        let out = command.output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {err}");
        assert!(err.contains("--app-version <VERSION>"), "{err}");
        assert!(
            err.contains("expected a semantic version MAJOR.MINOR.PATCH, e.g. 1.5.0"),
            "{err}"
        );
        assert_no_panic(&err);
        // Refused before the store was opened: nothing created.
        assert!(!world.db().exists(), "{args:?} {env:?}");
    }
    // --version is fdb-leader's own, not the application's.
    let out = Command::new(bin()).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(
        text(&out.stdout).starts_with("fdb-leader "),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn config_sets_and_shows_the_version_policy_single_and_sharded() {
    let world = World::new();
    let out = world.cli(&["config", "set", "--version-policy", "prefer-oldest"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("version-policy            prefer-oldest"),
        "{}",
        text(&out.stdout)
    );
    let out = world.cli(&["config", "get", "--json"]);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["version_policy"], "prefer-oldest");
    let out = world.cli(&["config", "get"]);
    assert!(text(&out.stdout).contains("version-policy            prefer-oldest"));
    // From the environment (config set's own variable).
    let out = world
        .command()
        .args(["config", "set"])
        .env("FDB_LEADER_CONFIG_VERSION_POLICY", "no-downgrade")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = world.cli(&["config", "get", "--json"]);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["version_policy"], "no-downgrade");
    // The status line of the configuration shows it.
    let out = world.cli(&["status"]);
    assert!(
        text(&out.stdout).contains(", version policy no-downgrade"),
        "{}",
        text(&out.stdout)
    );

    // Not a policy: a usage error listing the policies; nothing changed.
    let out = world.cli(&["config", "set", "--version-policy", "newest"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--version-policy <POLICY>"), "{err}");
    assert!(
        err.contains("[possible values: ignore, prefer-newest, prefer-oldest, no-downgrade]"),
        "{err}"
    );
    let out = world.cli(&["config", "get", "--json"]);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["version_policy"], "no-downgrade");

    // The sharded election of the name: created with it, and changed.
    let out = world.config_sharded("4", &["--version-policy", "prefer-newest"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = world.cli(&["config", "get", "--sharded", "--json"]);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["version_policy"], "prefer-newest");
    let out = world.cli(&["config", "set", "--sharded", "--version-policy", "ignore"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = world.cli(&["config", "get", "--sharded"]);
    assert!(text(&out.stdout).contains("version-policy            ignore"));
    // The single election's is its own.
    let out = world.cli(&["config", "get", "--json"]);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["version_policy"], "no-downgrade");
}

/// `watch --json` on the world's store, and its lines as they come.
fn watch_json(world: &World) -> (Child, Receiver<String>) {
    world.watch_json(&[], Stdio::null())
}

/// Stops the supervisors (each exits 0) and the watch.
fn stop(supervisors: &mut [Child], mut watch: Child) {
    for p in supervisors {
        signal(p, Signal::SIGTERM);
        assert!(wait_exit(p, PATIENCE).is_some_and(|s| s.success()));
    }
    signal(&watch, Signal::SIGTERM);
    assert!(wait_exit(&mut watch, PATIENCE).is_some());
}

/// A candidate's entry in `status --json`, by label.
fn candidate<'a>(status: &'a Value, label: &str) -> Option<&'a Value> {
    status["candidates"]
        .as_array()?
        .iter()
        .find(|c| c["id"].as_str().is_some_and(|id| is_label(id, label)))
}

#[test]
fn under_prefer_newest_a_new_version_takes_over_and_status_and_watch_show_the_versions() {
    let mut world = World::new();
    let a = world.start_run("a", &["--app-version", "1.4.0"]);
    let (started_a, _) = world.wait_led("a");
    let out = world.cli(&["config", "set", "--version-policy", "prefer-newest"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (watch, lines) = watch_json(&world);
    // The version from the environment.
    let b = world.start_run_with("b", &[], "0", &[("FDB_LEADER_APP_VERSION", "1.5.0")]);
    let (started_b, _) = world.wait_led("b");
    assert!(started_b.ballot > started_a.ballot);
    // a's child stopped before b's started (the cooperative handover).
    assert!(world.logged_stop(&started_a), "{:?}", world.log_lines());

    let status = poll(PATIENCE, || {
        let s = status_json(&world)?;
        (s["leader_version"] == "1.5.0" && s["candidates"].as_array()?.len() == 2).then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "status never showed 1.5.0 leading: {:?}",
            status_json(&world)
        )
    });
    assert!(is_label(status["leader"].as_str().unwrap(), "b"));
    assert_eq!(candidate(&status, "a").unwrap()["version"], "1.4.0");
    assert_eq!(candidate(&status, "b").unwrap()["version"], "1.5.0");
    assert_eq!(status["config"]["version_policy"], "prefer-newest");
    assert_eq!(status["resign_refusal"], Value::Null);
    let shown = text(&world.cli(&["status"]).stdout);
    assert!(shown.contains("VERSION"), "{shown}");
    assert!(
        shown.contains(&format!(
            "leader     {} (priority 0, version 1.5.0)",
            status["leader"].as_str().unwrap()
        )),
        "{shown}"
    );

    // watch --json: each candidate's version, and the leader's in the change to b.
    let mut versions = Vec::new();
    let change = poll(PATIENCE, || {
        let line = lines.recv_timeout(PATIENCE).ok()?;
        let v: Value = serde_json::from_str(&line).ok()?;
        if v["reason"] == "version" {
            versions.push((v["candidate"].as_str()?.to_owned(), v["version"].clone()));
            return None;
        }
        (v["version"] == "1.5.0").then_some(v)
    })
    .expect("a watch line with b leading");
    assert!(
        is_label(change["leader"].as_str().unwrap(), "b"),
        "{change}"
    );
    if change["previous_leader"].is_string() {
        assert_eq!(change["previous_version"], "1.4.0", "{change}");
    }
    // Each registered version was printed once (b's may come after its leadership's line).
    let more = poll(Duration::from_secs(5), || {
        if versions.len() >= 2 {
            return Some(());
        }
        let line = lines.recv_timeout(PATIENCE).ok()?;
        let v: Value = serde_json::from_str(&line).ok()?;
        if v["reason"] == "version" {
            versions.push((v["candidate"].as_str()?.to_owned(), v["version"].clone()));
        }
        None
    });
    assert!(more.is_some(), "{versions:?}");
    versions.sort_by(|x, y| x.0.cmp(&y.0));
    assert!(
        is_label(&versions[0].0, "a") && versions[0].1 == "1.4.0",
        "{versions:?}"
    );
    assert!(
        is_label(&versions[1].0, "b") && versions[1].1 == "1.5.0",
        "{versions:?}"
    );

    stop(&mut [a, b], watch);
}

/// A directed resign the leader refused (its target left before it read the request) shows in
/// `status`: docs/design.md §13.6. The election is driven by hand through the library on the world's
/// SQLite file, so that the target leaves between the request and the leader's next cycle.
#[test]
fn status_shows_a_directed_resign_the_leader_refused() {
    let world = World::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = SqliteDb::open(world.db()).unwrap();
    // The subspace the command line documents for `--election NAME`.
    let election = LeaderElection::new(Subspace::from(("fdb-leader", "default")));
    let config = ElectionConfig::with_lease_duration(Duration::from_secs(60)).unwrap();
    let leader = Candidate::new(CandidateId::random("leader").unwrap(), Priority::new(1));
    let heir = Candidate::new(CandidateId::random("heir").unwrap(), Priority::new(1));
    rt.block_on(async {
        in_txn!(
            db,
            [e = election, c = config, l = leader, h = heir],
            |txn| {
                e.initialize_with_config(&txn, &c).await?;
                e.register_candidate(&txn, &l).await?;
                e.register_candidate(&txn, &h).await
            }
        )
        .unwrap();
        assert!(election.run_cycle(&db, &leader).await.unwrap().is_leader());
    });
    // The operator's request, as printed.
    let out = world.cli(&["resign", "--to", "heir", "--expected-ballot", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The heir leaves; the leader's next cycle refuses the request and keeps leading.
    rt.block_on(async {
        in_txn!(db, [e = election, h = heir], |txn| e
            .unregister_candidate(&txn, &h)
            .await)
        .unwrap();
        assert!(election.run_cycle(&db, &leader).await.unwrap().is_leader());
    });
    let status = status_json(&world).unwrap();
    let refusal = &status["resign_refusal"];
    assert_eq!(refusal["ballot"], 1, "{status}");
    assert_eq!(refusal["to"], "heir");
    let reason = refusal["reason"].as_str().unwrap().to_owned();
    assert!(!reason.is_empty());
    assert!(refusal["operator"].is_string());
    let shown = text(&world.cli(&["status"]).stdout);
    assert!(
        shown.contains("refused    resign --to heir (operator ") && shown.contains(&reason),
        "{shown}"
    );
    // A later leadership does not show it.
    rt.block_on(async {
        in_txn!(db, [e = election, l = leader], |txn| e
            .resign_leadership(&txn, &l, Some(Ballot::new(1)))
            .await)
        .unwrap();
        assert!(election.run_cycle(&db, &leader).await.unwrap().is_leader());
    });
    let status = status_json(&world).unwrap();
    assert_eq!(status["ballot"], 2);
    assert_eq!(status["resign_refusal"], Value::Null);
    assert!(!text(&world.cli(&["status"]).stdout).contains("refused"));
}

/// The `watch --json` lines of a leader change (not the candidates' version or eligibility
/// lines), as they arrive.
fn next_change(lines: &Receiver<String>, bound: Duration) -> Option<Value> {
    poll(bound, || {
        let line = lines.recv_timeout(bound).ok()?;
        let v: Value = serde_json::from_str(&line).ok()?;
        v.get("previous_leader").is_some().then_some(v)
    })
}

/// `status --json` once `label` is registered and live with `version`, and five heartbeats
/// more have passed (time for a preemption the policy would ask for).
fn settled_with(world: &World, label: &str, version: &str) -> Value {
    poll(PATIENCE, || {
        let s = status_json(world)?;
        let c = candidate(&s, label)?;
        (c["version"] == version && c["live"] == true).then_some(())
    })
    .unwrap_or_else(|| panic!("{label} never registered as {version}"));
    std::thread::sleep(crate::cli_support::HEARTBEAT_DUR * 5);
    status_json(world).expect("status --json")
}

/// A rolling upgrade of two supervisors through the real binary, under prefer-oldest: the
/// follower restarts as 1.5.0 first and the 1.4.0 leader keeps leading (status shows both
/// versions); then the leader restarts, handing over to the 1.5.0 instance in one step (no
/// lease waited for), which keeps leading when the last instance comes back as 1.5.0.
#[test]
fn a_rolling_upgrade_under_prefer_oldest_moves_the_leadership_once_to_the_new_version() {
    let mut world = World::new();
    let out = world.cli(&["config", "set", "--version-policy", "prefer-oldest"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut a = world.start_run("a", &["--app-version", "1.4.0"]);
    let (started_a, _) = world.wait_led("a");
    let mut b = world.start_run("b", &["--app-version", "1.4.0"]);
    wait_live_candidates(&world, 2);
    let (watch, lines) = watch_json(&world);
    // watch's first line: the leader it found, a at 1.4.0.
    let first = next_change(&lines, PATIENCE).expect("watch's first line");
    assert!(is_label(first["leader"].as_str().unwrap(), "a"), "{first}");
    assert_eq!(first["version"], "1.4.0", "{first}");

    // b first: stopped gracefully, back as 1.5.0. a (1.4.0) keeps leading.
    signal(&b, Signal::SIGTERM);
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));
    let b = world.start_run("b", &["--app-version", "1.5.0"]);
    let status = settled_with(&world, "b", "1.5.0");
    assert!(
        is_label(status["leader"].as_str().unwrap(), "a"),
        "{status}"
    );
    assert_eq!(status["leader_version"], "1.4.0", "{status}");
    assert_eq!(status["ballot"], started_a.ballot, "{status}");
    assert_eq!(candidate(&status, "a").unwrap()["version"], "1.4.0");
    let shown = text(&world.cli(&["status"]).stdout);
    assert!(
        shown.contains("(priority 0, version 1.4.0)")
            && shown.contains(", version policy prefer-oldest"),
        "{shown}"
    );
    assert_eq!(world.active().len(), 1, "{:?}", world.log_lines());

    // Then a, the leader: it hands over to b, the only live candidate, at once.
    let stopped = std::time::Instant::now();
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    let (started_b, seen) = world.wait_led("b");
    assert!(
        seen.duration_since(stopped) < crate::cli_support::LEASE_DUR,
        "a lease was waited for: {:?}",
        seen.duration_since(stopped)
    );
    assert_eq!(started_b.ballot, started_a.ballot + 1);
    let a = world.start_run("a", &["--app-version", "1.5.0"]);
    let status = settled_with(&world, "a", "1.5.0");
    assert!(
        is_label(status["leader"].as_str().unwrap(), "b"),
        "{status}"
    );
    assert_eq!(status["leader_version"], "1.5.0", "{status}");
    assert_eq!(
        status["ballot"], started_b.ballot,
        "one change in the whole upgrade"
    );

    // watch --json: the change from a 1.4.0 to b 1.5.0, by a handover (a step down with the
    // vacancy reserved for b, then b's acquisition, unless watch missed the vacancy), and
    // nothing after it.
    let mut changes = Vec::new();
    while let Some(c) = next_change(&lines, Duration::from_secs(2)) {
        changes.push(c);
    }
    let to_b = changes
        .iter()
        .find(|c| c["leader"].is_string())
        .unwrap_or_else(|| panic!("{changes:?}"));
    assert!(
        is_label(to_b["leader"].as_str().unwrap(), "b"),
        "{changes:?}"
    );
    assert_eq!(to_b["version"], "1.5.0", "{changes:?}");
    // handed_over, or replaced when watch's poll missed the vacancy between the two records
    // (a loaded host): that no lease was waited for is checked above.
    assert!(
        to_b["reason"] == "handed_over" || to_b["reason"] == "replaced",
        "{changes:?}"
    );
    assert_eq!(
        changes.iter().filter(|c| c["leader"].is_string()).count(),
        1,
        "{changes:?}"
    );
    assert!(
        changes.iter().any(|c| c["previous_version"] == "1.4.0"
            && is_label(c["previous_leader"].as_str().unwrap_or(""), "a")),
        "{changes:?}"
    );

    stop(&mut [a, b], watch);
}

/// docs/rolling-upgrades.md's shell snippets are regions of examples/rolling_upgrade.sh
/// (tests/readme_snippets.rs keeps them equal): the script runs here with this fdb-leader on
/// the PATH, and does what the page says: the 1.4.0 leader keeps leading while b restarts as
/// 1.5.0, then hands over to it, the only change, and no 1.4.0 instance leads after.
#[test]
fn the_documented_rolling_upgrade_script_runs_as_the_page_says() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rolling_upgrade.sh");
    let bin_dir = std::path::Path::new(bin()).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out_file = dir.path().join("out");
    let mut child = Command::new("sh")
        .arg(script)
        .current_dir(dir.path())
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(std::fs::File::create(dir.path().join("err")).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(60));
    if status.is_none() {
        // The script's trap stops the supervisors it started.
        signal(&child, Signal::SIGTERM);
        let _ = wait_exit(&mut child, PATIENCE);
    }
    let out = std::fs::read_to_string(&out_file).unwrap();
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    assert!(status.is_some_and(|s| s.success()), "{out}\n{err}");
    assert_no_panic(&err);
    let at = |what: &str| {
        out.find(what)
            .unwrap_or_else(|| panic!("{what:?} not printed:\n{out}"))
    };
    let first_status = at("(priority 0, version 1.4.0)");
    assert!(at("version-policy            prefer-oldest") < at("a 1.4.0 leads"));
    assert!(at("a 1.4.0 leads") < first_status, "{out}");
    assert!(first_status < at("b 1.5.0 leads"), "{out}");
    assert!(
        at("b 1.5.0 leads") < at("(priority 0, version 1.5.0)"),
        "{out}"
    );
    assert!(out.contains("ballot     2\n"), "one change: {out}");
    assert!(
        !out.contains("b 1.4.0 leads") && !out.contains("a 1.5.0 leads"),
        "{out}"
    );
    assert!(out.ends_with("upgraded\n"), "{out}");
}

/// `run --shards M --app-version V`: the member registers V in the sharded election's
/// coordinator election (read here through the library, on the world's SQLite file).
#[test]
fn a_sharded_member_registers_its_version_for_the_coordinator_election() {
    let mut world = World::new();
    let mut command = world.command();
    command
        .args([
            "run",
            "--shards",
            "2",
            "--name",
            "m",
            "--app-version",
            "2.0.0-rc.1",
        ])
        .args([
            "--lease",
            crate::cli_support::LEASE,
            "--heartbeat",
            crate::cli_support::HEARTBEAT,
        ])
        .args(["--", "sh", "-c", "exec sleep 1000"]);
    let mut member = world.start(command, "m");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sharded = fdb_leader_election::shard::ShardedElection::new(Subspace::from((
        "fdb-leader",
        "default",
        "shards",
    )));
    let versions = poll(PATIENCE, || {
        let db = SqliteDb::open(world.db()).ok()?;
        let e = sharded.coordinator_election().clone();
        let listed = rt
            .block_on(db.run(|txn, _| {
                let e = e.clone();
                async move { e.list_candidates(&txn).await }
            }))
            .ok()?;
        let versions: Vec<String> = listed
            .iter()
            .filter_map(|c| c.record.version().map(ToString::to_string))
            .collect();
        (!versions.is_empty()).then_some(versions)
    })
    .unwrap_or_else(|| panic!("no version registered:\n{}", world.stderr_of("m")));
    assert_eq!(versions, ["2.0.0-rc.1"]);
    signal(&member, Signal::SIGTERM);
    assert!(wait_exit(&mut member, PATIENCE).is_some_and(|s| s.success()));
}

/// Issue 38 items 1 and 2 with real processes: under no-downgrade, a 2.0.0 leader `a`, a
/// 1.0.0 follower `b` of the highest priority and a 2.0.0 follower `c`. `status` says the
/// policy does not let `b` lead, `resign --to b` is refused (naming the policy and the
/// versions, nothing written), and after `kill -9` of `a`'s supervisor `c` takes the lapsed
/// lease, never `b`.
#[test]
fn the_version_policy_picks_a_killed_leaders_successor_and_refuses_a_directed_downgrade() {
    let mut world = World::new();
    let out = world.cli(&["config", "set", "--version-policy", "no-downgrade"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut a = world.start_run("a", &["--app-version", "2.0.0"]);
    let (started_a, _) = world.wait_led("a");
    let (watch, lines) = watch_json(&world);
    let b = world.start_run("b", &["--app-version", "1.0.0", "--priority", "9"]);
    let c = world.start_run("c", &["--app-version", "2.0.0"]);
    let status = wait_live_candidates(&world, 3);
    // watch --json says it too, once b is registered.
    let policy = poll(PATIENCE, || {
        let v: Value = serde_json::from_str(&lines.recv_timeout(PATIENCE).ok()?).ok()?;
        (v["reason"] == "policy").then_some(v)
    })
    .expect("a policy line");
    assert!(
        is_label(policy["candidate"].as_str().unwrap(), "b"),
        "{policy}"
    );
    assert_eq!(policy["policy_allows"], false, "{policy}");
    assert_eq!(candidate(&status, "a").unwrap()["policy_allows"], true);
    assert_eq!(candidate(&status, "b").unwrap()["policy_allows"], false);
    assert_eq!(candidate(&status, "c").unwrap()["policy_allows"], true);
    let shown = text(&world.cli(&["status"]).stdout);
    assert!(
        shown.contains("POLICY") && shown.contains("version policy (no-downgrade)"),
        "{shown}"
    );

    let out = world.cli(&[
        "resign",
        "--to",
        "b",
        "--expected-ballot",
        &started_a.ballot.to_string(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for needle in [
        "--to b: refused, nothing was written",
        "no-downgrade",
        "\"b\" (1.0.0)",
        "(2.0.0)",
        "config set --version-policy ignore",
    ] {
        assert!(err.contains(needle), "{needle:?} in {err}");
    }
    assert_no_panic(&err);
    let status = status_json(&world).unwrap();
    assert_eq!(status["operator_request"], Value::Null);
    assert!(is_label(status["leader"].as_str().unwrap(), "a"));

    // A crash: the supervisor killed, no resignation.
    signal(&a, Signal::SIGKILL);
    let _ = wait_exit(&mut a, PATIENCE);
    let (started_c, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && !is_label(&e.id, "a"))
        .unwrap_or_else(|| panic!("nobody took over:\n{}", world.stderr_of("b")));
    assert!(
        is_label(&started_c.id, "c"),
        "{} took the lapsed lease",
        started_c.id
    );
    assert_eq!(started_c.ballot, started_a.ballot + 1);
    std::thread::sleep(crate::cli_support::HEARTBEAT_DUR * 5);
    assert!(
        !world
            .events()
            .iter()
            .any(|e| e.kind == "start" && is_label(&e.id, "b")),
        "{:?}",
        world.log_lines()
    );
    stop(&mut [b, c], watch);
}
