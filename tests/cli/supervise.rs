//! `fdb-leader run` as an operator uses it: a child that exits at once does not spin, a
//! command that cannot run is refused before campaigning, --timeout/--try give up with exit 5,
//! --error-timeout re-campaigns, every flag reads an environment variable, /metrics and
//! /healthz answer on one listener, suggested commands work as printed, output is for people,
//! and the JSON of status and watch keeps its documented fields.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::cli_support::{
    PATIENCE, World, assert_no_panic, bin, output_of, poll, run_suggested, shell_words, signal,
    status_json, stderr, suggested, wait_exit,
};
use nix::sys::signal::Signal;
use serde_json::Value;

/// `fdb-leader --sqlite DB run ARGS…` in the background, stderr to `NAME.err`.
fn run(world: &mut World, name: &str, args: &[&str]) -> std::process::Child {
    let mut command = Command::new(bin());
    command
        .arg("--sqlite")
        .arg(world.db())
        .arg("run")
        .args(args);
    world.start(command, name)
}

#[test]
fn a_child_that_exits_at_once_costs_a_few_ballots_not_thousands() {
    let mut world = World::new();
    let mut a = run(&mut world, "a", &["--lease", "2s", "--", "true"]);
    thread::sleep(Duration::from_secs(10));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    let ballot = status_json(&world).unwrap()["ballot"].as_u64().unwrap();
    let err = world.stderr_of("a");
    let lines = err.lines().count();
    eprintln!("`run --lease 2s -- true` for 10 s: {ballot} ballots, {lines} log lines");
    // Back-off 1 s, 2 s, 4 s: campaigns at about 0, 1, 3 and 7 s. Slack for a slow host.
    assert!((3..=6).contains(&ballot), "{ballot} ballots:\n{err}");
    assert!(lines < 200, "{lines} log lines");
    assert!(err.contains("campaigning again in 4s"), "{err}");
}

#[test]
fn a_command_that_is_not_a_shell_gets_sigterm_and_stops_within_the_grace() {
    // `sleep` (not a shell, which would reset its signal mask itself) must start with SIGTERM
    // unblocked: stopping the supervisor stops it at once, not by SIGKILL when the grace ends.
    let mut world = World::new();
    let mut a = run(&mut world, "a", &["--grace", "4s", "--", "sleep", "1000"]);
    let leading = poll(PATIENCE, || {
        status_json(&world).and_then(|v| v["leader"].as_str().map(str::to_owned))
    });
    assert!(leading.is_some(), "{}", world.stderr_of("a"));
    thread::sleep(Duration::from_millis(300));
    let stopped_at = Instant::now();
    signal(&a, Signal::SIGTERM);
    let status = wait_exit(&mut a, PATIENCE);
    let took = stopped_at.elapsed();
    let err = world.stderr_of("a");
    assert!(status.is_some(), "{err}");
    assert!(
        !err.contains("SIGKILL"),
        "the command ignored SIGTERM:\n{err}"
    );
    assert!(
        took < Duration::from_secs(3),
        "stopping took {took:?}:\n{err}"
    );
}

#[test]
fn exits_and_signals_are_warnings_and_restarts_back_off() {
    let mut world = World::new();
    let log = world.log();
    let script = format!("echo run >> {}; exit 3", log.display());
    let mut a = run(
        &mut world,
        "a",
        &[
            "--lease",
            "600ms",
            "--on-child-exit",
            "restart",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    thread::sleep(Duration::from_millis(3500));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    let runs = world.log_lines().len();
    // At 0, 1 and 3 s: three runs in 3.5 s (the old fixed 1 s delay gave four).
    assert!((2..=3).contains(&runs), "{runs} runs");
    let err = world.stderr_of("a");
    assert!(
        err.lines()
            .any(|l| l.contains("WARN") && l.contains("the child exited (exit code 3)")),
        "{err}"
    );
    assert!(
        err.contains("restarting the child in 2s (back-off)"),
        "{err}"
    );
    // Only one ballot: restarts keep the leadership.
    assert_eq!(status_json(&world).unwrap()["ballot"], 1);
}

#[test]
fn a_command_that_cannot_run_is_refused_before_campaigning() {
    let world = World::new();
    let data = world.path("data.txt");
    std::fs::write(&data, "not a program").unwrap();
    let data = data.to_str().unwrap();
    for (args, needle) in [
        (
            &["run", "--", "nosuchcmd-xyz"][..],
            "nosuchcmd-xyz: command not found in PATH",
        ),
        (
            &["run", "--shell", "--", "nosuchcmd-xyz", "--flag"],
            "its first command \"nosuchcmd-xyz\" is not found",
        ),
        (&["run", "--", data], "not executable by this user"),
        (
            &["run", "--begin-command", "if then", "--", "true"],
            "--begin-command does not parse",
        ),
    ] {
        let out = world.cli(args);
        let err = stderr(&out);
        assert_no_panic(&err);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        // No ballot used: not even a store file.
        assert!(!world.db().exists(), "{args:?} created the store");
    }
}

#[test]
fn timeout_and_try_give_up_with_exit_5() {
    let mut world = World::new();
    let mut a = world.start_run("a", &[]);
    world.wait_led("a");

    let start = Instant::now();
    let out = world.cli(&["run", "--timeout", "1s", "--", "true"]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not elected within 1s (--timeout)"),
        "{}",
        stderr(&out)
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "{took:?}"
    );

    let start = Instant::now();
    let out = world.cli(&["run", "--try", "--", "true"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not elected (--try)"),
        "{}",
        stderr(&out)
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    // Neither is left registered.
    let status = status_json(&world).unwrap();
    assert_eq!(status["candidates"].as_array().map(Vec::len), Some(1));

    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    // A free election: --try is elected and runs the child.
    let out = world.cli(&[
        "run",
        "--try",
        "--on-child-exit",
        "exit",
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
}

#[test]
fn error_timeout_campaigns_again_after_a_failed_begin_command() {
    let mut world = World::new();
    let log = world.log();
    let begin = format!("echo begin >> {}; exit 1", log.display());
    // Without it: exit 4.
    let out = world.cli(&["run", "--begin-command", &begin, "--", "true"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("the begin-command failed (exit code 1)"));
    // With it: the begin-command runs again, and the process stays.
    let mut a = run(
        &mut world,
        "a",
        &[
            "--error-timeout",
            "300ms",
            "--begin-command",
            &begin,
            "--",
            "true",
        ],
    );
    let runs = poll(PATIENCE, || {
        let n = world.log_lines().len();
        (n >= 3).then_some(n)
    });
    assert!(runs.is_some(), "{}", world.stderr_of("a"));
    assert!(a.try_wait().unwrap().is_none());
    assert!(
        world
            .stderr_of("a")
            .contains("campaigning again in 300ms (--error-timeout)")
    );
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
}

#[test]
fn every_flag_reads_an_environment_variable_shown_in_help() {
    let help = |args: &[&str]| {
        let mut c = Command::new(bin());
        c.args(args);
        String::from_utf8_lossy(&output_of(c).stdout).into_owned()
    };
    for (args, vars) in [
        (
            &["--help"][..],
            &[
                "FDB_LEADER_SQLITE",
                "FDB_LEADER_CLUSTER_FILE",
                "FDB_LEADER_MEMORY",
                "FDB_LEADER_ELECTION",
            ][..],
        ),
        (
            &["run", "--help"],
            &[
                "FDB_LEADER_NAME",
                "FDB_LEADER_PRIORITY",
                "FDB_LEADER_LEASE",
                "FDB_LEADER_HEARTBEAT",
                "FDB_LEADER_PAYLOAD",
                "FDB_LEADER_BEGIN_COMMAND",
                "FDB_LEADER_END_COMMAND",
                "FDB_LEADER_SHELL",
                "FDB_LEADER_GRACE",
                "FDB_LEADER_ON_CHILD_EXIT",
                "FDB_LEADER_TIMEOUT",
                "FDB_LEADER_TRY",
                "FDB_LEADER_ERROR_TIMEOUT",
                "FDB_LEADER_METRICS_LISTEN",
                "FDB_LEADER_ALLOW_NETWORK_FS",
            ],
        ),
        (&["status", "--help"], &["FDB_LEADER_JSON"]),
        (
            &["watch", "--help"],
            &["FDB_LEADER_JSON", "FDB_LEADER_WAIT"],
        ),
        (&["resign", "--help"], &["FDB_LEADER_EXPECTED_BALLOT"]),
        (
            &["config", "set", "--help"],
            &[
                "FDB_LEADER_CONFIG_LEASE",
                "FDB_LEADER_CONFIG_TRANSACTION_TIMEOUT",
            ],
        ),
    ] {
        let text = help(args);
        for var in vars {
            assert!(
                text.contains(&format!("[env: {var}=")),
                "{args:?} lacks {var}:\n{text}"
            );
        }
        // Every option of the help names its variable (--help and --version aside).
        let options = text.lines().filter(|l| l.starts_with("      --")).count();
        let with_env = text.matches("[env: ").count();
        assert!(
            options > 0 && with_env >= options,
            "{args:?}: {with_env} of {options}:\n{text}"
        );
    }
    // And they work: the store, the lease and the policy from the environment.
    let world = World::new();
    let mut c = Command::new(bin());
    c.env("FDB_LEADER_SQLITE", world.db())
        .env("FDB_LEADER_LEASE", "900ms")
        .env("FDB_LEADER_ON_CHILD_EXIT", "exit")
        .args(["run", "--", "sh", "-c", "exit 9"]);
    let out = output_of(c);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert_eq!(status_json(&world).unwrap()["config"]["lease_ms"], 900);
}

/// `GET path` over loopback: the status code and the body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    crate::cli_support::http_get(port, path, Duration::from_secs(5))
}

#[test]
fn metrics_and_health_are_served_on_one_loopback_listener() {
    let mut world = World::new();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut a = world.start_run("a", &["--metrics-listen", &addr]);
    world
        .wait_event(PATIENCE, |e| e.kind == "start")
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let metrics = poll(PATIENCE, || {
        let (status, body) = get(port, "/metrics")?;
        (status == 200 && body.contains("fdb_leader_is_leader{election=\"default\"} 1"))
            .then_some(body)
    })
    .unwrap_or_else(|| panic!("no leader metric:\n{}", world.stderr_of("a")));
    assert!(
        metrics.contains("fdb_leader_ballot{election=\"default\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE fdb_leader_is_leader gauge"),
        "{metrics}"
    );
    assert_eq!(
        get(port, "/healthz"),
        Some((200, "ok: leader\n".to_owned()))
    );
    assert_eq!(get(port, "/nope").map(|(s, _)| s), Some(404));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
}

/// `/healthz` is served from a thread of its own: while the runner's runtime is blocked (as
/// a blocking call or a bug would block it; debug builds do so on request), it still answers
/// at once, and reports the leader wedged once the lease has passed without a renewal. Before,
/// it was served on the runner's runtime and did not answer at all while it was blocked.
#[test]
fn healthz_answers_and_reports_a_wedged_leader_while_the_runtime_is_blocked() {
    let mut world = World::new();
    let port = crate::cli_support::free_port();
    let addr = format!("127.0.0.1:{port}");
    let (mut a, blocked_at) = world.start_blocked(&addr);
    // Within the block (5 s; the lease is 600 ms): every request answered within a second,
    // and a 503 naming the wedged leader soon after the lease.
    let mut answers = Vec::new();
    let wedged = loop {
        let asked = Instant::now();
        let answer = crate::cli_support::http_get(port, "/healthz", Duration::from_secs(1));
        let took = asked.elapsed();
        assert!(
            answer.is_some(),
            "/healthz did not answer within 1 s while the runtime was blocked ({:?} into the \
             block; answers so far: {answers:?})",
            asked.duration_since(blocked_at)
        );
        answers.push((answer.clone(), took));
        if let Some((503, body)) = &answer {
            break body.clone();
        }
        assert!(
            blocked_at.elapsed() < Duration::from_secs(4),
            "never reported wedged: {answers:?}"
        );
        thread::sleep(Duration::from_millis(100));
    };
    eprintln!(
        "wedged reported {:?} into the block: {wedged:?} (answers: {answers:?})",
        blocked_at.elapsed()
    );
    assert!(
        wedged.contains("wedged: leading, but the last renewal"),
        "{wedged}"
    );
    assert!(blocked_at.elapsed() < Duration::from_secs(5));
    signal(&a, Signal::SIGTERM);
    assert!(
        wait_exit(&mut a, PATIENCE).is_some(),
        "{}",
        world.stderr_of("a")
    );
}

#[test]
fn suggested_commands_work_as_printed() {
    let mut world = World::new();
    // A path that needs quoting.
    let dir = world.path("my store");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("e.db");
    let cli = |args: &[&str]| {
        let mut c = Command::new(bin());
        c.arg("--sqlite")
            .arg(&db)
            .args(["--election", "jobs"])
            .args(args);
        output_of(c)
    };
    assert!(
        cli(&["config", "set", "--preemption", "off"])
            .status
            .success()
    );
    let mut command = Command::new(bin());
    command.arg("--sqlite").arg(&db).args([
        "--election",
        "jobs",
        "run",
        "--lease",
        "2s",
        "--grace",
        "6s",
        "--",
        "sleep",
        "100",
    ]);
    let mut a = world.start(command, "a");
    let status = poll(PATIENCE, || {
        let out = cli(&["status", "--json"]);
        let status: Value = serde_json::from_slice(&out.stdout).ok()?;
        status["leader"].is_string().then_some(status)
    })
    .expect("a leads");
    let ballot = status["ballot"].as_u64().unwrap().to_string();

    let _ = ballot;
    // A stale ballot suggests status.
    let stale = cli(&["force-vacate", "--expected-ballot", "99"]);
    let status_cmd = suggested(&stderr(&stale));
    assert_eq!(status_cmd.len(), 1, "{}", stderr(&stale));
    // The run warned that --grace 6s is not below the 5s handover grace, and that the stored
    // configuration (lease 10s) wins over --lease 2s: both suggest a config set.
    let warnings = suggested(&world.stderr_of("a"));
    assert_eq!(warnings.len(), 2, "{}", world.stderr_of("a"));

    for line in status_cmd.iter().chain(&warnings) {
        let out = run_suggested(line);
        assert!(out.status.success(), "`{line}` failed: {}", stderr(&out));
    }
    let after: Value = serde_json::from_slice(&cli(&["config", "get", "--json"]).stdout).unwrap();
    assert_eq!(after["handover_grace_ms"], 8000);
    assert_eq!(after["lease_ms"], 2000);
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some());
}

/// Issue 39: `config set --lease 3s` on an existing election was refused for its stored
/// heartbeat, then for the next timing. It derives them as `run` does, keeping the other
/// settings; a refusal names a whole command that works as printed.
#[test]
fn config_set_lease_derives_the_timings_and_a_refusal_names_a_command_that_works() {
    let world = World::new();
    let get = || -> Value {
        serde_json::from_slice(&world.cli(&["config", "get", "--json"]).stdout).unwrap()
    };
    let out = world.cli(&["config", "set", "--preemption", "off"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = world.cli(&["config", "set", "--lease", "3s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("--lease 3s: derived from it, as `run` derives them: heartbeat 1s (was 3s)"),
        "{}",
        stderr(&out)
    );
    let config = get();
    assert_eq!(
        [
            &config["lease_ms"],
            &config["heartbeat_ms"],
            &config["candidate_timeout_ms"]
        ],
        [3000, 1000, 4500]
    );
    assert_eq!(config["preemption"], false, "the other settings are kept");
    let refused = world.cli(&["config", "set", "--heartbeat", "5s"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let fix = suggested(&stderr(&refused));
    assert_eq!(fix.len(), 1, "{}", stderr(&refused));
    assert!(
        fix[0].ends_with("config set --lease 15s --heartbeat 5s"),
        "{}",
        fix[0]
    );
    let out = run_suggested(&fix[0]);
    assert!(
        out.status.success(),
        "`{}` failed: {}",
        fix[0],
        stderr(&out)
    );
    let config = get();
    assert_eq!(
        [&config["lease_ms"], &config["heartbeat_ms"]],
        [15000, 5000]
    );
}

#[test]
fn the_suggested_cargo_install_selects_existing_features_the_binary_needs() {
    // The message of a build without FoundationDB support.
    let mut c = Command::new(bin());
    c.args(["--cluster-file", "/nonexistent/fdb.cluster", "status"]);
    let out = output_of(c);
    let text = stderr(&out);
    let install = if cfg!(feature = "fdb") {
        "cargo install --path . --features cli,fdb-7_3,embedded-fdb-include".to_owned()
    } else {
        assert_eq!(out.status.code(), Some(2), "{text}");
        suggested(&text)
            .into_iter()
            .find(|s| s.starts_with("cargo install"))
            .unwrap_or_else(|| panic!("no cargo install in: {text}"))
    };
    let words = shell_words(&install);
    // From a checkout (the crate is not on crates.io yet): this package's manifest.
    assert_eq!(&words[..4], ["cargo", "install", "--path", "."]);
    assert_eq!(words[4], "--features");
    let features: BTreeSet<&str> = words[5].split(',').collect();
    // What cargo would check: the package exists with these features, and the binary's
    // required features are among them.
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let package = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "fdb-leader-election")
        .expect("the package named in the suggestion");
    for feature in &features {
        assert!(
            package["features"].get(*feature).is_some(),
            "no feature {feature}"
        );
    }
    let bin = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fdb-leader")
        .unwrap();
    for required in bin["required-features"].as_array().unwrap() {
        let required = required.as_str().unwrap();
        assert!(features.contains(required), "{install} lacks {required}");
    }
    assert!(
        features.iter().any(|f| f.starts_with("fdb-7_")),
        "{install} selects no FoundationDB API version"
    );
}

#[test]
fn output_is_for_people_and_a_clean_run_logs_no_error() {
    let mut world = World::new();
    let mut a = run(&mut world, "a", &["--lease", "2s", "--", "sleep", "100"]);
    poll(PATIENCE, || {
        world.stderr_of("a").contains("child started").then_some(())
    })
    .unwrap_or_else(|| panic!("{}", world.stderr_of("a")));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    let err = world.stderr_of("a");
    assert!(err.contains("heartbeat=667ms"), "{err}");
    for leak in ["Some(", "None", "666us", "ns ", "{ "] {
        assert!(!err.contains(leak), "{leak:?} in:\n{err}");
    }
    assert!(!err.contains("ERROR"), "{err}");
    let out = world.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("Some(") && !text.contains("{ "), "{text}");
}

/// The documented fields (README, `status --help`), pinned: renaming or dropping one breaks
/// scripts.
const STATUS_FIELDS: &[&str] = &[
    "ballot",
    "candidates",
    "config",
    "election",
    "eligibility_marks",
    "handover_requested_by",
    "leader",
    "leader_priority",
    "leader_version",
    "lease_ms",
    "lease_state",
    "operator_hold",
    "operator_request",
    "payload",
    "payload_hex",
    "renewal",
    "renewals_before_dead",
    "reserved_for",
    "resign_refusal",
    "store",
];
const CANDIDATE_FIELDS: &[&str] = &[
    "eligibility_reason",
    "eligible",
    "heartbeat",
    "heartbeat_age_ms",
    "id",
    "leader",
    "live",
    "policy_allows",
    "priority",
    "registration",
    "renewal_lag",
    "seen_renewal",
    "version",
];
const CONFIG_FIELDS: &[&str] = &[
    "candidate_timeout_ms",
    "elections",
    "handover_grace_ms",
    "heartbeat_ms",
    "lease_ms",
    "max_clock_rate_error_ppm",
    "min_tenure_ms",
    "preemption",
    "reservation_timeout_ms",
    "takeover_stagger_ms",
    "transaction_timeout_ms",
    "version_policy",
];
const WATCH_FIELDS: &[&str] = &[
    "ballot",
    "leader",
    "operator",
    "payload",
    "previous_ballot",
    "previous_leader",
    "previous_version",
    "priority",
    "reason",
    "reserved_for",
    "time",
    "version",
];

/// A `watch --json` line about a candidate's eligibility.
const WATCH_ELIGIBILITY_FIELDS: &[&str] = &[
    "candidate",
    "eligibility_reason",
    "eligible",
    "reason",
    "time",
];
const MARK_FIELDS: &[&str] = &["name", "reason"];

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn status_and_watch_json_keep_their_documented_fields() {
    let mut world = World::new();
    let (mut watch, lines) = world.watch_json(&["--wait"], Stdio::null());
    let mut a = world.start_run("a", &["--payload", "host-a"]);
    let line = lines.recv_timeout(PATIENCE).expect("a watch line");
    let change: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(keys(&change), WATCH_FIELDS, "{line}");
    assert_eq!(change["payload"], "host-a");
    assert!(change["ballot"].is_u64() && change["time"].is_string());

    let status = status_json(&world).unwrap();
    assert_eq!(keys(&status), STATUS_FIELDS);
    assert_eq!(keys(&status["config"]), CONFIG_FIELDS);
    let candidate = &status["candidates"][0];
    assert_eq!(keys(candidate), CANDIDATE_FIELDS);
    assert!(status["ballot"].is_u64() && status["lease_ms"].is_u64());
    assert!(candidate["live"].is_boolean() && candidate["renewal_lag"].is_u64());
    assert!(candidate["eligible"].is_boolean() && candidate["eligibility_reason"].is_null());

    // An operator excludes a: status lists the mark, watch prints the change of eligibility.
    assert!(
        world
            .cli(&["eligible", "a", "false", "--reason", "maintenance"])
            .status
            .success()
    );
    let status = status_json(&world).unwrap();
    assert_eq!(keys(&status["eligibility_marks"][0]), MARK_FIELDS);
    let line = poll(PATIENCE, || {
        let line = lines.recv_timeout(PATIENCE).ok()?;
        let v: Value = serde_json::from_str(&line).ok()?;
        (v["reason"] == "eligibility").then_some(v)
    })
    .expect("an eligibility line");
    assert_eq!(keys(&line), WATCH_ELIGIBILITY_FIELDS, "{line}");
    assert_eq!(line["eligible"], false);
    assert_eq!(line["eligibility_reason"], "maintenance");

    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some());
    signal(&watch, Signal::SIGTERM);
    assert!(wait_exit(&mut watch, PATIENCE).is_some());
}

// Issue 29 item 7: the variables `run` gives its child are not a flag's. An `fdb-leader` the
// child starts reads its own flags alone: before, the child's FDB_LEADER_ELECTION (the
// variable of --election) made a nested `run` without --election join the parent's election
// name.
#[test]
fn a_nested_fdb_leader_in_the_child_is_not_configured_by_its_environment() {
    let mut world = World::new();
    std::fs::write(world.path("nested.sh"), crate::cli_support::NESTED).unwrap();
    let other = world.path("nested.db");
    let mut command = world.command();
    command
        .args([
            "--election",
            "jobs",
            "run",
            "--name",
            "a",
            "--lease",
            "600ms",
        ])
        .args(["--heartbeat", "200ms", "--"])
        .arg("sh")
        .arg(world.path("nested.sh"))
        .arg(world.log())
        .arg(bin())
        .arg(&other);
    let mut a = world.start(command, "a");
    let (lines, errors) = poll(PATIENCE, || {
        let (lines, errors) = crate::cli_support::nested_lines(&world.log(), &other);
        (!lines.is_empty()).then_some((lines, errors))
    })
    .unwrap_or_else(|| panic!("the child never logged:\n{}", world.stderr_of("a")));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    assert_eq!(lines, vec!["nested - 0 0 0".to_owned()], "{errors}");
}
