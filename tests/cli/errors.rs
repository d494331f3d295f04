//! `fdb-leader` on bad stores and bad arguments: a clear message on stderr, a documented
//! non-zero exit code, no panic, and the file left untouched.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use crate::cli_support::{World, assert_no_panic, bin, bytes, output_of, stderr};
use fdb_leader_election::SqliteDb;

/// `fdb-leader --sqlite PATH ARGS…`.
fn on(path: &Path, args: &[&str]) -> Output {
    crate::cli_support::on_sqlite(path, args)
}

/// `run --lease 2s` of a child that exits at once (the run exits 0), then `config get --json`
/// of what it left in the store at `path`.
fn config_after_a_run(path: &Path) -> Output {
    let run = [
        "run",
        "--lease",
        "2s",
        "--on-child-exit",
        "exit",
        "--",
        "true",
    ];
    let out = on(path, &run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    on(path, &["config", "get", "--json"])
}

/// Runs `sql` on a connection of its own to the store at `path`, as another program would.
fn sql(path: &Path, sql: &str) {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

/// Every command that opens the store, with a child that would show if it ever ran.
const COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["config", "get"],
    &["config", "set", "--preemption", "off"],
    &["resign", "--expected-ballot", "1"],
    &["force-vacate", "--expected-ballot", "1"],
    &["watch"],
    &["run", "--", "sh", "-c", "echo the child ran"],
];

fn assert_fails(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_no_panic(&err);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "{needle:?} not in stderr: {err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("the child ran"));
}

#[test]
fn a_corrupt_file_is_refused_clearly_and_left_untouched() {
    let world = World::new();
    let path = world.path("corrupt.db");
    // Random bytes (a fixed xorshift stream), larger than a SQLite header.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let junk: Vec<u8> = (0..16_384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    fs::write(&path, &junk).unwrap();
    for args in COMMANDS {
        let out = on(&path, args);
        assert_fails(&out, 3, "is not a SQLite database");
    }
    assert_eq!(bytes(&path), junk, "the file was modified");
}

#[test]
fn an_unwritable_path_is_refused_clearly() {
    let world = World::new();
    let file = world.path("a-file");
    fs::write(&file, b"not a directory").unwrap();
    // Root may write anywhere, so make the path impossible rather than forbidden: its parent
    // is a regular file, or does not exist.
    for path in [
        file.join("election.db"),
        world.path("missing/dir/election.db"),
    ] {
        for args in [
            &["run", "--", "true"][..],
            &["config", "set", "--preemption", "on"],
        ] {
            let out = on(&path, args);
            assert_fails(&out, 3, "cannot open or create the SQLite database");
        }
        // Commands that only read do not create a store.
        assert_fails(&on(&path, &["status"]), 1, "no election at");
    }
}

#[test]
fn foreign_and_newer_stores_are_refused() {
    let world = World::new();
    let foreign = world.path("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch(
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER);
             INSERT INTO accounts VALUES (1, 100), (2, 250);",
        )
        .unwrap();
    for args in COMMANDS {
        assert_fails(&on(&foreign, args), 3, "not an election store");
    }
    // The other application's data is intact. (The store's open switches the file to
    // write-ahead logging before it checks the schema, so the header's journal-mode bytes do
    // change.)
    let total: i64 = rusqlite::Connection::open(&foreign)
        .unwrap()
        .query_row("SELECT sum(balance) FROM accounts", [], |row| row.get(0))
        .unwrap();
    assert_eq!(total, 350);

    let newer = world.path("newer.db");
    drop(SqliteDb::open(&newer).unwrap());
    sql(&newer, "UPDATE meta SET value = 99 WHERE name = 'schema'");
    for args in COMMANDS {
        assert_fails(&on(&newer, args), 3, "schema version 99");
    }
}

#[test]
fn corrupt_election_records_are_a_store_error_not_a_panic() {
    let world = World::new();
    let out = world.cli(&["config", "set", "--min-tenure", "1s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    sql(&world.db(), "UPDATE kv SET value = x'ff00ff'");
    for args in COMMANDS {
        assert_fails(&world.cli(args), 3, "corrupt value at key");
    }
}

#[test]
fn usage_errors_exit_2_with_the_rule_named() {
    let world = World::new();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--lease", "3", "--", "true"], "has no unit"),
        (
            &[
                "run",
                "--lease",
                "600ms",
                "--heartbeat",
                "300ms",
                "--",
                "true",
            ],
            "at most a third",
        ),
        (
            &["run", "--on-child-exit", "sometimes", "--", "true"],
            "invalid value",
        ),
        (&["run"], "required"),
        (&["config", "set"], "nothing to set"),
        (
            &["config", "set", "--heartbeat", "5s"],
            "--heartbeat (5s) must be at most a third of --lease (10s)",
        ),
        (
            &["run", "--lease", "1ms", "--", "true"],
            "--lease 1ms is too short",
        ),
        (
            &["run", "--lease", "2s", "--heartbeat", "10ms", "--", "true"],
            "--heartbeat 10ms is too short",
        ),
        (
            &["config", "set", "--heartbeat", "1ms"],
            "--heartbeat 1ms is too short",
        ),
        (
            &["config", "set", "--transaction-timeout", "1ms"],
            "--transaction-timeout 1ms is too short",
        ),
        (
            &["config", "set", "--max-clock-rate-error-ppm", "600000"],
            "must be below 500000",
        ),
        (&["resign"], "--expected-ballot"),
        // A mistyped flag of run is a usage error, never the command (issue 32).
        (&["run", "--lease-time", "2s", "--", "true"], "--lease"),
        (&["resign", "--ballot", "4"], "--expected-ballot"),
        (
            &["run", "--metrics-listen", "nowhere", "--", "true"],
            "expected PORT",
        ),
    ];
    for (args, needle) in cases {
        let out = world.cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(needle),
            "{args:?}: {needle:?} not in {}",
            stderr(&out)
        );
        assert_no_panic(&stderr(&out));
    }
    // No store at all.
    let out = output_of({
        let mut c = Command::new(bin());
        c.arg("status");
        c
    });
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("choose a store"));
    // Two stores.
    let out = output_of({
        let mut c = Command::new(bin());
        c.args(["--memory", "--sqlite", "x.db", "status"]);
        c
    });
    assert_eq!(out.status.code(), Some(2));
    if !cfg!(feature = "fdb") {
        let out = output_of({
            let mut c = Command::new(bin());
            c.args(["--cluster-file", "/etc/foundationdb/fdb.cluster", "status"]);
            c
        });
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("built without FoundationDB support"));
    }
}

#[test]
fn help_documents_the_exit_codes() {
    let out = output_of({
        let mut c = Command::new(bin());
        c.arg("--help");
        c
    });
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Exit codes:",
        "usage error",
        "store error",
        "the child's exit code",
    ] {
        assert!(help.contains(needle), "{needle:?} not in --help");
    }
}

/// `fdb-leader ENV… ARGS…` (no store flag added).
fn with_env(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(bin());
    for var in [
        "FDB_LEADER_SQLITE",
        "FDB_LEADER_CLUSTER_FILE",
        "FDB_LEADER_MEMORY",
        "FDB_LEADER_TIMEOUT",
        "FDB_LEADER_TRY",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied()).args(args);
    output_of(command)
}

/// "A flag on the command line wins": over the setting of its group that comes from the
/// environment (as the README's systemd unit sets FDB_LEADER_SQLITE), for the store and for
/// `run --try` / `--timeout`. Two flags, or two variables with no flag, still conflict (exit 2,
/// naming them). Before, every one of these was refused as a conflict.
#[test]
fn a_flag_on_the_command_line_wins_over_the_environment() {
    let world = World::new();
    let db = world.db();
    let db_text = db.display().to_string();
    let sqlite = ("FDB_LEADER_SQLITE", db_text.as_str());

    // --memory over FDB_LEADER_SQLITE: the file is not even created.
    let out = with_env(
        &[sqlite],
        &["--memory", "config", "set", "--preemption", "on"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!db.exists(), "the store of the environment was used");
    // --sqlite over FDB_LEADER_CLUSTER_FILE and FDB_LEADER_MEMORY (a pair that alone would
    // conflict).
    let out = with_env(
        &[
            ("FDB_LEADER_CLUSTER_FILE", "/nonexistent/fdb.cluster"),
            ("FDB_LEADER_MEMORY", "true"),
        ],
        &["--sqlite", &db_text, "config", "set", "--preemption", "on"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(db.exists());
    // A flag variable set to false sets nothing.
    let out = with_env(
        &[sqlite, ("FDB_LEADER_MEMORY", "false")],
        &["config", "get"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // run --try over FDB_LEADER_TIMEOUT, and --timeout over FDB_LEADER_TRY.
    for (env, flag) in [
        (("FDB_LEADER_TIMEOUT", "30s"), &["--try"][..]),
        (("FDB_LEADER_TRY", "true"), &["--timeout", "30s"][..]),
    ] {
        let mut args = vec!["--memory", "run", "--on-child-exit", "exit"];
        args.extend_from_slice(flag);
        args.extend(["--", "sh", "-c", "exit 7"]);
        let out = with_env(&[env], &args);
        assert_no_panic(&stderr(&out));
        assert_eq!(
            out.status.code(),
            Some(7),
            "{env:?} {flag:?}: {}",
            stderr(&out)
        );
    }

    // Still conflicts: two flags, or two variables and no flag.
    let out = with_env(&[], &["--memory", "--sqlite", &db_text, "status"]);
    assert_fails(&out, 2, "--sqlite and --memory cannot be used together");
    let out = with_env(
        &[],
        &["--memory", "run", "--try", "--timeout", "1s", "--", "true"],
    );
    assert_fails(&out, 2, "--timeout and --try cannot be used together");
    let out = with_env(&[sqlite, ("FDB_LEADER_MEMORY", "true")], &["status"]);
    assert_fails(
        &out,
        2,
        "FDB_LEADER_SQLITE (--sqlite) and FDB_LEADER_MEMORY (--memory) are set in the environment",
    );
    assert!(stderr(&out).contains("a flag wins over the environment"));
}

/// "Without a ballot, and without creating a file": a run refused for its settings (an
/// empty --name, an oversized --payload, a --metrics-listen address in use) exits 2 before the
/// store is opened, so the corrected run creates the election with its own --lease. Before,
/// each had created the store and initialised the election with the refused run's --lease
/// ("the stored configuration wins" then kept it).
#[test]
fn a_run_refused_for_its_settings_creates_nothing() {
    let world = World::new();
    let (dir, db) = world.store_in("store");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let payload = "x".repeat(70_000);
    let cases: [(&[&str], &str); 3] = [
        (
            &["--name", ""],
            "--name '': invalid candidate id: the label is empty",
        ),
        (
            &["--payload", &payload],
            "--payload: leader payload is 70000 bytes",
        ),
        (&["--metrics-listen", &taken_addr], "cannot listen there"),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["run", "--lease", "9s"];
        args.extend_from_slice(flags);
        args.extend(["--", "sh", "-c", "echo the child ran"]);
        let out = on(&db, &args);
        assert_eq!(
            crate::cli_support::file_names(&dir),
            Vec::<String>::new(),
            "{needle}: {}",
            stderr(&out)
        );
        assert_fails(&out, 2, needle);
        assert!(
            stderr(&out).contains("nothing was created"),
            "{}",
            stderr(&out)
        );
    }
    drop(taken);
    // The corrected run creates the election with its own lease.
    let out = config_after_a_run(&db);
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["lease_ms"], 2000, "{config}");
}

/// `config set --lease 2s` on a new store derives the other timings as `run` does (issue 32:
/// it failed one rule at a time, "heartbeat 3s must be at most a third", and left an empty
/// store file); a refused `config set` creates nothing.
#[test]
fn config_set_on_a_new_store_derives_the_timings_as_run_does_and_a_refusal_creates_nothing() {
    let world = World::new();
    let (dir, db) = world.store_in("store");
    let out = on(
        &db,
        &["config", "set", "--lease", "2s", "--heartbeat", "1s"],
    );
    assert_fails(
        &out,
        2,
        "--heartbeat (1s) must be at most a third of --lease (2s)",
    );
    assert!(
        stderr(&out).contains("nothing was created"),
        "{}",
        stderr(&out)
    );
    assert_eq!(crate::cli_support::file_names(&dir), Vec::<String>::new());
    let out = on(&db, &["config", "set", "--lease", "2s"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = on(&db, &["config", "get", "--json"]);
    let set: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // What `run --lease 2s` creates: the same configuration, field by field.
    let other = world.path("run.db");
    let out = config_after_a_run(&other);
    let mut run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(set["lease_ms"], 2000, "{set}");
    // Every field, but the handover grace: `run` raises it to outlast its child's --grace.
    run["handover_grace_ms"] = set["handover_grace_ms"].clone();
    assert_eq!(set, run);
}

/// `--sqlite` naming something that is not a regular file (/dev/null, a FIFO, a directory):
/// exit 3 naming the flag and the fix, nothing created beside it. Before, /dev/null became an
/// empty store and SQLite created /dev/null-journal (or -wal) beside it.
#[test]
fn a_store_path_that_is_not_a_regular_file_is_refused() {
    let world = World::new();
    let before: Vec<bool> = ["-journal", "-wal", "-shm"]
        .iter()
        .map(|s| Path::new(&format!("/dev/null{s}")).exists())
        .collect();
    let out = on(
        Path::new("/dev/null"),
        &["run", "--", "sh", "-c", "echo the child ran"],
    );
    assert_fails(
        &out,
        3,
        "/dev/null is a character device, not a regular file",
    );
    assert!(stderr(&out).contains("--sqlite /dev/null: give --sqlite the path of a store file"));
    let after: Vec<bool> = ["-journal", "-wal", "-shm"]
        .iter()
        .map(|s| Path::new(&format!("/dev/null{s}")).exists())
        .collect();
    assert_eq!(before, after, "a file was created beside /dev/null");
    let out = on(Path::new("/dev/null"), &["status"]);
    assert_fails(&out, 3, "not a regular file");

    let dir = world.path("dir");
    fs::create_dir(&dir).unwrap();
    let out = on(&dir, &["config", "set", "--preemption", "on"]);
    assert_fails(&out, 3, "is a directory, not a regular file");
    let fifo = world.path("fifo");
    if Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let out = on(&fifo, &["run", "--", "true"]);
        assert_fails(&out, 3, "is a FIFO (named pipe), not a regular file");
    }
    assert!(!world.path("fifo-wal").exists() && !world.path("dir-wal").exists());
}

/// Issue 39: `FDB_LEADER_MEMORY=1` was refused (`invalid value '1' for '--memory'`): every
/// boolean variable takes 1 and 0 (and yes/no, on/off) as clap's boolish values do. And
/// `--memory status` said "a run or a config set command creates it", which no other
/// process can: the store is that command's own memory.
#[test]
fn boolean_variables_take_1_and_0_and_memory_status_says_no_other_process_shares_it() {
    let world = World::new();
    let cli = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::new(bin());
        c.envs(env.iter().copied()).args(args);
        output_of(c)
    };
    for memory in ["1", "yes", "on", "true"] {
        let out = cli(&[("FDB_LEADER_MEMORY", memory)], &["status"]);
        assert_fails(
            &out,
            1,
            "no election at the in-memory store (name default): --memory is this command's own \
             memory, which no other process shares",
        );
        assert!(
            !stderr(&out).contains("config set command creates it"),
            "{}",
            stderr(&out)
        );
    }
    // Nor does `watch --wait` wait for one (it waited forever).
    let out = cli(&[("FDB_LEADER_MEMORY", "1")], &["watch", "--wait"]);
    assert_fails(&out, 2, "--wait with --memory would wait forever");
    // 0 sets nothing: no conflict with --sqlite.
    let db = world.path("e.db");
    let db = db.to_str().unwrap();
    let out = cli(
        &[],
        &["--sqlite", db, "config", "set", "--preemption", "off"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for off in ["0", "no", "off"] {
        let out = cli(
            &[("FDB_LEADER_MEMORY", off), ("FDB_LEADER_JSON", "1")],
            &["--sqlite", db, "config", "get"],
        );
        assert_eq!(out.status.code(), Some(0), "MEMORY={off}: {}", stderr(&out));
        let config: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(config["preemption"], false, "FDB_LEADER_JSON=1 prints JSON");
    }
}
