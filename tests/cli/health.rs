//! `fdb-leader run`'s health checks and what follows from them (docs/design.md §13), with the real
//! binary and real processes: a failing `--health-command` hands the leadership over and
//! never judges followers; check commands are killed at their timeout with everything they
//! started, also when the supervisor is killed; `--ready-url` gates eligibility; `eligible`
//! excludes a candidate by name; `status` and `watch --json` show eligibility; `/leader` and
//! `/follower` answer load balancers, `/leader` turning 503 at the belief's deadline while the
//! runtime is blocked.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::cli_support::*;
use nix::sys::signal::Signal;

fn candidates(world: &World) -> Vec<serde_json::Value> {
    status_json(world)
        .and_then(|s| s["candidates"].as_array().cloned())
        .unwrap_or_default()
}

/// The candidate whose id starts with `name-`, as `status --json` shows it.
fn candidate(world: &World, name: &str) -> Option<serde_json::Value> {
    candidates(world)
        .into_iter()
        .find(|c| c["id"].as_str().is_some_and(|id| is_label(id, name)))
}

/// The leader's label in `status --json`.
fn leader_label(world: &World) -> Option<String> {
    let status = status_json(world)?;
    let id = status["leader"].as_str()?.to_owned();
    id.rsplit_once('-').map(|(label, _)| label.to_owned())
}

#[test]
fn a_failing_health_command_hands_over_and_never_judges_followers() {
    let mut world = World::new();
    let dir = world.path("");
    let dir = dir.to_str().unwrap();
    // The "child's port": a file per candidate; the check logs who ran it, and with which
    // ballot (empty: not leading).
    let check = |name: &str| {
        format!(
            "echo \"check {name} ${{FDB_LEADER_BALLOT:-none}}\" >> {dir}/checks.log; test ! -e {dir}/broken.{name}"
        )
    };
    let flags = |name: &str| {
        vec![
            "--health-command".to_owned(),
            check(name),
            "--health-interval".to_owned(),
            "100ms".to_owned(),
            "--health-fall".to_owned(),
            "2".to_owned(),
            "--health-rise".to_owned(),
            "1".to_owned(),
        ]
    };
    let fa = flags("a");
    let mut a = world.start_run("a", &fa.iter().map(String::as_str).collect::<Vec<_>>());
    let (first, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start")
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let fb = flags("b");
    let mut b = world.start_run("b", &fb.iter().map(String::as_str).collect::<Vec<_>>());
    wait_live_candidates(&world, 2);
    thread::sleep(Duration::from_secs(1));
    assert_eq!(leader_label(&world).as_deref(), Some("a"));
    let before = std::fs::read_to_string(world.path("checks.log")).unwrap_or_default();
    assert!(before.lines().count() >= 5, "{before}");

    // a's child stops answering: a hands over to b, whose child starts.
    std::fs::write(world.path("broken.a"), "").unwrap();
    let broke = Instant::now();
    let (next, seen) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && e.ballot > first.ballot)
        .unwrap_or_else(|| panic!("no handover:\n{}", world.stderr_of("a")));
    let took = seen.duration_since(broke);
    assert!(is_label(&next.id, "b"), "{next:?}");
    // Two failed checks (200 ms), the child's stop, a cycle, b's: no lease (600 ms) waited.
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(
        world.stderr_of("a").contains("leader health check failed"),
        "{}",
        world.stderr_of("a")
    );
    let a_status = candidate(&world, "a").unwrap();
    assert_eq!(a_status["eligible"], serde_json::json!(false), "{a_status}");
    // Every check ran while leading (with a ballot); never on a follower.
    thread::sleep(Duration::from_millis(500));
    let log = std::fs::read_to_string(world.path("checks.log")).unwrap();
    assert!(
        log.lines().all(|l| !l.ends_with(" none")),
        "a check ran on a follower:\n{log}"
    );
    assert!(log.lines().any(|l| l.starts_with("check b ")), "{log}");
    // b stays eligible and leads.
    let b_status = candidate(&world, "b").unwrap();
    assert_eq!(b_status["eligible"], serde_json::json!(true), "{b_status}");
    for p in [&a, &b] {
        signal(p, Signal::SIGTERM);
    }
    assert!(wait_exit(&mut a, PATIENCE).is_some() && wait_exit(&mut b, PATIENCE).is_some());
}

/// The pids a check command recorded (`pids` file), still running.
fn still_running(world: &World) -> Vec<i32> {
    std::fs::read_to_string(world.path("pids"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| running(*p))
        .collect()
}

#[test]
fn check_commands_are_killed_at_their_timeout_with_what_they_started_and_never_left_behind() {
    let mut world = World::new();
    let pids = world.path("pids");
    // Each run starts a grandchild and hangs: both must go at the timeout.
    let hang = format!(
        "sleep 1000 & echo $! >> {p}; echo $$ >> {p}; sleep 1000",
        p = pids.display()
    );
    let mut a = world.start_run(
        "a",
        &[
            "--ready-command",
            &hang,
            "--health-interval",
            "300ms",
            "--health-timeout",
            "200ms",
        ],
    );
    // Never ready: it does not lead, and says why.
    let why = poll(PATIENCE, || {
        candidate(&world, "a")
            .and_then(|c| c["eligibility_reason"].as_str().map(str::to_owned))
            .filter(|r| r.contains("no answer"))
    })
    .unwrap_or_else(|| panic!("{}", world.stderr_of("a")));
    assert_eq!(why, "not ready: no answer within 200 ms");
    assert!(world.events().is_empty(), "an ineligible candidate led");
    // Several runs, each killed at its timeout: at most the one running now is left.
    poll(PATIENCE, || {
        (std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .count()
            >= 8)
            .then_some(())
    })
    .unwrap();
    let left = still_running(&world);
    assert!(left.len() <= 2, "runs left behind: {left:?}");
    // The supervisor is killed outright during a run: the run's watchdog kills its group.
    signal(&a, Signal::SIGKILL);
    let _ = wait_exit(&mut a, PATIENCE);
    let gone = poll(Duration::from_secs(5), || {
        still_running(&world).is_empty().then_some(())
    });
    assert!(gone.is_some(), "left behind: {:?}", still_running(&world));
}

/// A tiny HTTP server answering every GET with the status in `status`.
fn serve(status: Arc<AtomicU16>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let code = status.load(Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

#[test]
fn ready_url_gates_eligibility_and_status_and_watch_show_it() {
    let mut world = World::new();
    let status = Arc::new(AtomicU16::new(503));
    let port = serve(Arc::clone(&status));
    let url = format!("http://127.0.0.1:{port}/ready");
    let watch_cmd = {
        let mut c = world.command();
        c.args(["watch", "--json", "--wait"]);
        c
    };
    let mut watcher = world.start(watch_cmd, "watch");
    let mut a = world.start_run(
        "a",
        &[
            "--ready-url",
            &url,
            "--health-interval",
            "100ms",
            "--health-rise",
            "1",
        ],
    );
    let why = poll(PATIENCE, || {
        candidate(&world, "a").and_then(|c| c["eligibility_reason"].as_str().map(str::to_owned))
    })
    .unwrap_or_else(|| panic!("{}", world.stderr_of("a")));
    assert!(
        why.starts_with("not ready: GET ") && why.ends_with("503 Service Unavailable")
            || why == "readiness: not checked yet",
        "{why}"
    );
    thread::sleep(Duration::from_secs(1));
    assert!(world.events().is_empty(), "led while not ready");
    status.store(200, Ordering::SeqCst);
    world
        .wait_event(PATIENCE, |e| e.kind == "start")
        .unwrap_or_else(|| panic!("never led once ready:\n{}", world.stderr_of("a")));
    let a_status = candidate(&world, "a").unwrap();
    assert_eq!(a_status["eligible"], serde_json::json!(true));
    assert_eq!(a_status["eligibility_reason"], serde_json::Value::Null);
    // watch --json printed the candidate not eligible, then eligible.
    let lines = poll(PATIENCE, || {
        let lines: Vec<serde_json::Value> = world
            .stdout_lines("watch")
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|l: &serde_json::Value| l["reason"] == "eligibility")
            .collect();
        (lines.len() >= 2).then_some(lines)
    })
    .unwrap_or_else(|| panic!("{:?}", world.stdout_lines("watch")));
    assert_eq!(lines[0]["eligible"], serde_json::json!(false), "{lines:?}");
    assert!(
        lines[0]["eligibility_reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("not ready") || r.starts_with("readiness"))
    );
    assert!(
        lines[0]["candidate"]
            .as_str()
            .is_some_and(|c| is_label(c, "a"))
    );
    assert_eq!(lines[1]["eligible"], serde_json::json!(true), "{lines:?}");
    assert_eq!(lines[1]["eligibility_reason"], serde_json::Value::Null);
    for p in [&a, &watcher] {
        signal(p, Signal::SIGTERM);
    }
    assert!(wait_exit(&mut a, PATIENCE).is_some() && wait_exit(&mut watcher, PATIENCE).is_some());
}

#[test]
fn eligible_excludes_by_name_across_restarts_and_refuses_what_it_cannot_mean() {
    let mut world = World::new();
    let mut a = world.start_run("a", &[]);
    let (first, _) = world.wait_event(PATIENCE, |e| e.kind == "start").unwrap();
    let mut b = world.start_run("b", &[]);
    wait_live_candidates(&world, 2);
    // Refusals change nothing, and say how to do it right.
    let id = candidate(&world, "a").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = world.cli(&["eligible", &id, "false"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("marks are by its name, a,"), "{err}");
    let out = world.cli(&["eligible", "a", "true", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--reason is for `false`"));
    assert_eq!(leader_label(&world).as_deref(), Some("a"));
    // Excluded: the leader hands over to b at once.
    let out = world.cli(&["eligible", "a", "false", "--reason", "disk replacement"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("a is excluded from leading (disk replacement)"),
        "{said}"
    );
    let (next, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && e.ballot > first.ballot)
        .unwrap();
    assert!(is_label(&next.id, "b"));
    let status = status_json(&world).unwrap();
    assert_eq!(
        status["eligibility_marks"],
        serde_json::json!([{ "name": "a", "reason": "disk replacement" }])
    );
    let text = String::from_utf8_lossy(&world.cli(&["status"]).stdout).into_owned();
    assert!(text.contains("no (disk replacement)"), "{text}");
    // Across a restart (a new candidate id, the same name): still excluded.
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some());
    a = world.start_run("a", &[]);
    let again = poll(PATIENCE, || {
        let c = candidate(&world, "a")?;
        (c["id"].as_str() != Some(id.as_str())).then_some(c)
    })
    .unwrap();
    assert_eq!(again["eligible"], serde_json::json!(false), "{again}");
    assert_eq!(
        again["eligibility_reason"],
        serde_json::json!("disk replacement")
    );
    // The suggested command works as printed (after the store flags).
    let lift = said.split('`').nth(1).unwrap().to_owned();
    let words: Vec<&str> = lift.split_whitespace().collect();
    let pos = words.iter().position(|w| *w == "eligible").unwrap();
    let out = world.cli(&words[pos..]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("a may lead again"));
    // a's next heartbeat writes it eligible again.
    poll(PATIENCE, || {
        (candidate(&world, "a")?["eligible"] == serde_json::json!(true)).then_some(())
    })
    .unwrap();
    for p in [&a, &b] {
        signal(p, Signal::SIGTERM);
    }
    assert!(wait_exit(&mut a, PATIENCE).is_some() && wait_exit(&mut b, PATIENCE).is_some());
}

#[test]
fn leader_and_follower_answer_and_leader_turns_503_at_the_deadline_while_blocked() {
    let mut world = World::new();
    let (pa, pb) = (free_port(), free_port());
    let (la, lb) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
    let (mut a, blocked_at) = world.start_blocked(&la);
    let mut b = world.start_run("b", &["--metrics-listen", &lb]);
    let get = |port, path| http_get(port, path, Duration::from_secs(1));
    // a's lease is 600 ms: 200 at first (the block began just after its election), then 503
    // from its deadline on, while its runtime is still blocked.
    let first = get(pa, "/leader");
    assert!(
        matches!(&first, Some((200, body)) if body.starts_with("leader, ballot ")),
        "{first:?}"
    );
    let turned = loop {
        match get(pa, "/leader") {
            Some((503, body)) => break (blocked_at.elapsed(), body),
            Some((200, _)) => {}
            other => panic!("/leader: {other:?}"),
        }
        assert!(blocked_at.elapsed() < Duration::from_secs(3), "still 200");
        thread::sleep(Duration::from_millis(20));
    };
    assert!(turned.0 < Duration::from_secs(1), "{turned:?}");
    assert!(
        blocked_at.elapsed() < Duration::from_secs(5),
        "the block had ended"
    );
    // b takes over (a's lease lapsed): /leader 200 on b, /follower 503 on b.
    poll(PATIENCE, || {
        matches!(get(pb, "/leader"), Some((200, _))).then_some(())
    })
    .unwrap_or_else(|| panic!("b never led:\n{}", world.stderr_of("b")));
    assert!(matches!(get(pb, "/follower"), Some((503, _))));
    // Once a's runtime runs again, it is an eligible follower.
    poll(PATIENCE, || {
        matches!(get(pa, "/follower"), Some((200, ref body)) if body == "follower, eligible\n")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("{:?}", get(pa, "/follower")));
    assert!(matches!(get(pa, "/leader"), Some((503, _))));
    assert!(matches!(get(pa, "/shards"), Some((404, _))));
    for p in [&a, &b] {
        signal(p, Signal::SIGTERM);
    }
    assert!(wait_exit(&mut a, PATIENCE).is_some() && wait_exit(&mut b, PATIENCE).is_some());
}

/// The child of `name` that started last, while it has not logged its stop: its pid.
fn draining_child(world: &World, name: &str) -> Option<i32> {
    world
        .active()
        .into_iter()
        .rfind(|e| is_label(&e.id, name))
        .map(|e| e.pid)
}

/// Polls `port`'s `/leader` until the child `pid` has stopped (logged its stop): the first
/// answer other than 200 seen while the child still ran, and how long after `since`.
fn leader_while_draining(
    world: &World,
    port: u16,
    pid: i32,
    since: Instant,
) -> Option<(u16, String, Duration)> {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        let answer = http_get(port, "/leader", Duration::from_secs(1));
        let still_running = world.active().iter().any(|e| e.pid == pid);
        if !still_running {
            return None;
        }
        if let Some((status, body)) = answer {
            if status != 200 {
                return Some((status, body, since.elapsed()));
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Issue 38 item 3: while a leader drains its child for a successor (its guard closed: a
/// handover asked by `resign`, or a stop by SIGTERM), `/leader` answers 503, so that a load
/// balancer sends no new request to the stopping child. Each child here takes 1.5 s to stop
/// after SIGTERM. Before, `/leader` answered 200 until the leadership ended, after the child
/// had stopped.
#[test]
fn leader_answers_503_while_the_leader_drains_its_child() {
    let mut world = World::new();
    let (pa, pb) = (free_port(), free_port());
    let (la, lb) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
    let mut a = world.start_run_stopping_in("a", &["--metrics-listen", &la], "1.5");
    let get = |port, path| http_get(port, path, Duration::from_secs(1));
    let ballot = poll(PATIENCE, || match get(pa, "/leader") {
        Some((200, body)) => body
            .trim()
            .strip_prefix("leader, ballot ")
            .map(str::to_owned),
        _ => None,
    })
    .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let mut b = world.start_run_stopping_in("b", &["--metrics-listen", &lb], "1.5");
    poll(PATIENCE, || {
        matches!(get(pb, "/follower"), Some((200, _))).then_some(())
    })
    .unwrap_or_else(|| panic!("b never followed:\n{}", world.stderr_of("b")));
    let child_a = poll(PATIENCE, || draining_child(&world, "a")).unwrap();

    // A handover: the operator asks a to resign; a closes its guard, stops its child (1.5 s),
    // then hands over to b.
    let asked = Instant::now();
    let out = world.cli(&["resign", "--expected-ballot", &ballot]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = leader_while_draining(&world, pa, child_a, asked);
    let (status, body, after) = seen.unwrap_or_else(|| {
        panic!(
            "a's /leader answered 200 all through its child's drain:\n{}",
            world.stderr_of("a")
        )
    });
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("draining"), "{body}");
    assert!(
        !matches!(get(pb, "/leader"), Some((200, _))),
        "b led already: not a drain"
    );
    eprintln!("handover: a's /leader 503 {after:?} after the resign, its child still draining");

    // A stop: b leads, and is stopped with SIGTERM; its guard closes before its child gets
    // SIGTERM.
    poll(PATIENCE, || {
        matches!(get(pb, "/leader"), Some((200, _))).then_some(())
    })
    .unwrap_or_else(|| panic!("b never led:\n{}", world.stderr_of("b")));
    let child_b = poll(PATIENCE, || draining_child(&world, "b")).unwrap();
    let stopped = Instant::now();
    signal(&b, Signal::SIGTERM);
    let seen = leader_while_draining(&world, pb, child_b, stopped);
    let (status, body, after) = seen.unwrap_or_else(|| {
        panic!(
            "b's /leader answered 200 all through its child's drain after SIGTERM:\n{}",
            world.stderr_of("b")
        )
    });
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("draining"), "{body}");
    eprintln!("stop: b's /leader 503 {after:?} after SIGTERM, its child still draining");
    // b left cleanly, handing over to a.
    assert_eq!(wait_exit(&mut b, PATIENCE).and_then(|s| s.code()), Some(0));
    poll(PATIENCE, || {
        matches!(get(pa, "/leader"), Some((200, _))).then_some(())
    })
    .unwrap_or_else(|| panic!("a never led again:\n{}", world.stderr_of("a")));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some());
}

/// The same rule per shard (issue 38 item 3): while a member drains a shard's child for a
/// move (b joins and takes one of a's two shards), a's `/shard/N` answers 503 for it, while
/// the child still runs (it takes 1.5 s to stop). Before, it answered 200 until the shard was
/// handed over.
#[test]
fn shard_answers_503_while_the_member_drains_its_child_for_a_move() {
    let mut world = World::new();
    let (pa, pb) = (free_port(), free_port());
    let (la, lb) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
    let get = |port, path: &str| http_get(port, path, Duration::from_secs(1));
    let mut a =
        world.start_run_stopping_in("a", &["--shards", "2", "--metrics-listen", &la], "1.5");
    poll(PATIENCE, || {
        (matches!(get(pa, "/shard/0"), Some((200, _)))
            && matches!(get(pa, "/shard/1"), Some((200, _))))
        .then_some(())
    })
    .unwrap_or_else(|| panic!("a never owned both shards:\n{}", world.stderr_of("a")));
    let mut b = world.start_run_stopping_in("b", &["--shards", "2", "--metrics-listen", &lb], "0");
    // One of a's shards moves to b: while its child drains, its /shard/N is 503, and a still
    // runs both children.
    let deadline = Instant::now() + PATIENCE;
    let mut seen = None;
    while Instant::now() < deadline && seen.is_none() {
        for shard in [0, 1] {
            if let Some((503, body)) = get(pa, &format!("/shard/{shard}")) {
                let running = world
                    .active()
                    .iter()
                    .filter(|e| is_label(&e.id, "a"))
                    .count();
                seen = Some((shard, body, running));
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    let (shard, body, running) =
        seen.unwrap_or_else(|| panic!("no shard of a drained:\n{}", world.stderr_of("a")));
    assert!(
        body.contains("draining") && running == 2,
        "shard {shard}: {body} with {running} children of a running"
    );
    // Then b owns it.
    poll(PATIENCE, || {
        matches!(get(pb, &format!("/shard/{shard}")), Some((200, _))).then_some(())
    })
    .unwrap_or_else(|| panic!("b never owned shard {shard}:\n{}", world.stderr_of("b")));
    for p in [&a, &b] {
        signal(p, Signal::SIGTERM);
    }
    assert!(wait_exit(&mut a, PATIENCE).is_some() && wait_exit(&mut b, PATIENCE).is_some());
}

#[test]
fn check_flags_are_refused_naming_the_flag_before_anything_is_created() {
    let world = World::new();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--health-url", "https://x/"],
            "only http:// is supported, not https://",
        ),
        (
            &["--ready-url", "127.0.0.1:80"],
            "--ready-url 127.0.0.1:80: no scheme",
        ),
        (
            &["--health-fall", "0", "--health-command", "true"],
            "--health-fall 0",
        ),
        (
            &["--ready-command", "true", "--ready-url", "http://x/"],
            "cannot be used with",
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let out = world.cli(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(expected), "{flags:?}: {err}");
        assert!(!world.db().exists(), "{flags:?} created the store");
    }
}

/// Issue 38 item 4: settings `run` would ignore are refused (exit 2, before anything is
/// created), naming the flag or its variable and the fix. Before, `--shards 2 --unhealthy
/// release` ran a member that then held its shards (the opposite of release), the check timings
/// without any check were accepted and ignored, and `--health-fall -1` (two arguments) was
/// refused as an unknown argument `-1`, without naming --health-fall. Each run would exit 0
/// at once (`-- true`, `--on-child-exit exit`) if it were accepted.
#[test]
fn settings_run_would_ignore_are_refused_naming_the_flag_and_the_fix() {
    let world = World::new();
    /// The flags, the environment, and what stderr says.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &["--shards", "2", "--unhealthy", "release"],
            &[],
            &[
                "--unhealthy release cannot be used with --shards",
                "drop --unhealthy",
            ],
        ),
        (
            &["--shards", "2"],
            &[("FDB_LEADER_UNHEALTHY", "release")],
            &[
                "FDB_LEADER_UNHEALTHY (--unhealthy) release cannot be used with --shards",
                "unset FDB_LEADER_UNHEALTHY",
            ],
        ),
        (
            &["--shards", "2", "--health-url", "http://127.0.0.1:1/"],
            &[],
            &["--health-url cannot be used with --shards", "--ready-url"],
        ),
        (
            &["--health-fall", "5"],
            &[],
            &[
                "--health-fall says how the health checks run, and this run has none",
                "--ready-command CMD",
                "or drop --health-fall",
            ],
        ),
        (
            &["--health-rise", "1"],
            &[],
            &["--health-rise says how", "or drop --health-rise"],
        ),
        (
            &["--health-interval", "500ms"],
            &[],
            &["--health-interval says how", "or drop --health-interval"],
        ),
        (
            &["--health-timeout", "2s"],
            &[],
            &["--health-timeout says how", "or drop --health-timeout"],
        ),
        (
            &[],
            &[("FDB_LEADER_HEALTH_INTERVAL", "500ms")],
            &[
                "FDB_LEADER_HEALTH_INTERVAL (--health-interval) says how",
                "or unset FDB_LEADER_HEALTH_INTERVAL",
            ],
        ),
        (
            &["--shards", "2", "--health-fall", "2"],
            &[],
            &[
                "--health-fall says how",
                "--ready-command CMD or --ready-url URL: with --shards",
            ],
        ),
        (
            &["--ready-command", "true", "--health-fall", "-1"],
            &[],
            &["invalid value '-1' for '--health-fall <N>'", "at least 1"],
        ),
        (
            &["--ready-command", "true", "--health-rise", "-1"],
            &[],
            &["invalid value '-1' for '--health-rise <N>'", "at least 1"],
        ),
    ];
    for (flags, env, expected) in cases {
        let mut command = world.command();
        command
            .envs(env.iter().copied())
            .args(["run", "--on-child-exit", "exit"])
            .args(*flags)
            .args(["--", "true"]);
        let out = output_of(command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_no_panic(&err);
        assert_eq!(out.status.code(), Some(2), "{flags:?} {env:?}: {err}");
        for needle in *expected {
            assert!(
                err.contains(needle),
                "{flags:?} {env:?}: {needle:?} not in {err}"
            );
        }
        assert!(!world.db().exists(), "{flags:?} {env:?} created the store");
    }
}

#[test]
fn a_member_that_is_not_ready_hands_its_shards_to_a_ready_one() {
    let mut world = World::new();
    let dir = world.path("");
    let ready = |name: &str| format!("test ! -e {}/broken.{name}", dir.display());
    let flags = |name: &str| {
        vec![
            "--shards".to_owned(),
            "4".to_owned(),
            "--ready-command".to_owned(),
            ready(name),
            "--health-interval".to_owned(),
            "100ms".to_owned(),
            "--health-fall".to_owned(),
            "1".to_owned(),
            "--health-rise".to_owned(),
            "1".to_owned(),
        ]
    };
    let (fa, fb) = (flags("a"), flags("b"));
    let mut a = world.start_run("a", &fa.iter().map(String::as_str).collect::<Vec<_>>());
    let mut b = world.start_run("b", &fb.iter().map(String::as_str).collect::<Vec<_>>());
    let both = poll(PATIENCE, || {
        let active = world.active();
        (active.iter().any(|e| is_label(&e.id, "a"))
            && active.iter().any(|e| is_label(&e.id, "b"))
            && active.len() == 4)
            .then_some(active)
    });
    assert!(
        both.is_some(),
        "{:?}\n{}",
        world.active(),
        world.stderr_of("a")
    );
    // a is not ready any more: its shards move to b, which then runs all four.
    std::fs::write(world.path("broken.a"), "").unwrap();
    let moved = poll(PATIENCE, || {
        let active = world.active();
        (active.len() == 4 && active.iter().all(|e| is_label(&e.id, "b"))).then_some(())
    });
    assert!(
        moved.is_some(),
        "{:?}\n{}",
        world.active(),
        world.stderr_of("a")
    );
    // --health-command has no meaning for a member: refused before anything is created.
    let out = world.cli(&[
        "run",
        "--shards",
        "2",
        "--health-command",
        "true",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "--health-command cannot be used with --shards: it checks the one leader's child"
    ));
    for p in [&a, &b] {
        signal(p, Signal::SIGTERM);
    }
    assert!(wait_exit(&mut a, PATIENCE).is_some() && wait_exit(&mut b, PATIENCE).is_some());
}
