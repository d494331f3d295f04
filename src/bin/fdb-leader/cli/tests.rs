//! The command line's unit tests: parsing, the exclusive groups, the store flags.

use std::time::Duration;

use super::*;
use clap::CommandFactory;

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn run_takes_the_command_after_the_options() -> Result<(), clap::Error> {
    let cli = Cli::parse_args([
        "fdb-leader",
        "--sqlite",
        "/tmp/x.db",
        "run",
        "--name",
        "a",
        "--lease",
        "600ms",
        "--",
        "sh",
        "-c",
        "echo hi",
    ])?;
    assert_eq!(
        cli.store.choice(),
        Some(StoreChoice::Sqlite("/tmp/x.db".into()))
    );
    let Command::Run(run) = cli.command else {
        return Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand));
    };
    assert_eq!(run.lease, Some(Duration::from_millis(600)));
    assert_eq!(run.command, ["sh", "-c", "echo hi"].map(OsString::from));
    assert_eq!(run.policy(), OnChildExit::Resign);
    assert_eq!((run.shards, run.weight), (None, None));
    assert_eq!(run.grace, Duration::from_secs(3));
    Ok(())
}

#[test]
fn a_flag_wins_over_the_environment_and_two_of_either_conflict() {
    use Origin::{Env, Flag};
    assert_eq!(decide(&[]), Ok(None));
    assert_eq!(decide(&[Env]), Ok(Some(0)));
    assert_eq!(decide(&[Flag]), Ok(Some(0)));
    assert_eq!(decide(&[Env, Flag]), Ok(Some(1)));
    assert_eq!(decide(&[Flag, Env, Env]), Ok(Some(0)));
    assert_eq!(decide(&[Env, Env]), Err(Conflict::Env));
    assert_eq!(decide(&[Flag, Flag]), Err(Conflict::Flags));
    assert_eq!(decide(&[Flag, Env, Flag]), Err(Conflict::Flags));
}

#[test]
fn every_exclusive_setting_can_be_unset() -> Result<(), clap::Error> {
    let mut cli = Cli::parse_args([
        "fdb-leader",
        "--sqlite",
        "a",
        "run",
        "--timeout",
        "1s",
        "--",
        "x",
    ])?;
    for (_, ids) in EXCLUSIVE {
        for id in *ids {
            cli.unset(id);
        }
    }
    assert_eq!(cli.store.choice(), None);
    let Command::Run(run) = &cli.command else {
        return Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand));
    };
    assert_eq!((run.timeout, run.try_once), (None, false));
    // Each id names an argument of its (sub)command.
    let command = Cli::command();
    for (path, ids) in EXCLUSIVE {
        let sub = path
            .iter()
            .try_fold(&command, |c, name| c.find_subcommand(name));
        assert!(sub.is_some(), "no subcommand {path:?}");
        for id in *ids {
            assert!(
                sub.is_some_and(|sub| sub.get_arguments().any(|a| a.get_id() == *id)),
                "{path:?} has no argument {id}"
            );
        }
    }
    Ok(())
}

#[test]
fn store_flags_go_before_or_after_the_subcommand_but_only_one() {
    let after = Cli::parse_args(["fdb-leader", "status", "--memory", "--election", "x"]);
    assert!(
        after.is_ok_and(|c| c.store.choice() == Some(StoreChoice::Memory) && c.election == "x")
    );
    let both = Cli::parse_args(["fdb-leader", "--memory", "--sqlite", "a", "status"]);
    assert!(both.is_err_and(|e| {
        e.kind() == clap::error::ErrorKind::ArgumentConflict
            && e.to_string()
                .contains("--sqlite and --memory cannot be used together")
    }));
    let both = Cli::parse_args([
        "fdb-leader",
        "--memory",
        "run",
        "--try",
        "--timeout",
        "1s",
        "--",
        "x",
    ]);
    assert!(both.is_err_and(|e| e.kind() == clap::error::ErrorKind::ArgumentConflict));
    let bad = Cli::parse_args(["fdb-leader", "--memory", "run", "--lease", "3", "--", "x"]);
    assert!(bad.is_err_and(|e| e.to_string().contains("3ms")));
    let none = Cli::parse_args(["fdb-leader", "--memory", "run"]);
    assert!(none.is_err());
}

/// `run` with `args`, parsed; the error's text if refused.
fn run_args(args: &[&str]) -> Result<RunArgs, String> {
    let argv = ["fdb-leader", "--memory", "run"]
        .iter()
        .chain(args)
        .copied();
    match Cli::parse_args(argv) {
        Ok(Cli {
            command: Command::Run(run),
            ..
        }) => Ok(run),
        Ok(_) => Err("not run".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn shards_take_a_count_a_weight_and_restart_by_default() {
    let run = run_args(&["--shards", "4", "--weight", "3", "--", "x"]);
    assert!(
        run.as_ref().is_ok_and(|r| r.shards == Some(4)
            && r.weight == Some(3)
            && r.policy() == OnChildExit::Restart),
        "{run:?}"
    );
    let exit = run_args(&["--shards", "4", "--on-child-exit", "exit", "--", "x"]);
    assert!(exit.is_ok_and(|r| r.policy() == OnChildExit::Exit));
    let most = run_args(&["--shards", "256", "--", "x"]);
    assert!(most.is_ok_and(|r| r.shards == Some(256)));
}

#[test]
fn shard_counts_out_of_range_name_the_flag() {
    for (count, says) in [
        ("0", "at least 1 shard"),
        ("257", "at most 256"),
        ("-1", "not a number of shards"),
        ("four", "not a number of shards"),
    ] {
        let e = run_args(&["--shards", count, "--", "x"])
            .err()
            .unwrap_or_default();
        assert!(
            e.contains(&format!("invalid value '{count}' for '--shards <M>'")) && e.contains(says),
            "{count}: {e}"
        );
    }
}

#[test]
fn settings_of_the_single_election_are_refused_with_shards() {
    for (flags, names) in [
        (&["--try"][..], "--try cannot be used with --shards"),
        (
            &["--timeout", "3s"],
            "--timeout cannot be used with --shards",
        ),
        (
            &["--payload", "p"],
            "--payload cannot be used with --shards",
        ),
        (
            &["--begin-command", "true"],
            "--begin-command cannot be used with --shards",
        ),
        (
            &["--end-command", "true"],
            "--end-command cannot be used with --shards",
        ),
        (
            &["--error-timeout", "1s"],
            "--error-timeout cannot be used with --shards",
        ),
        (
            &["--on-child-exit", "resign"],
            "--on-child-exit resign cannot be used with --shards",
        ),
        (
            &["--health-command", "true"],
            "--health-command cannot be used with --shards",
        ),
        (
            &["--health-url", "http://127.0.0.1:1/"],
            "--health-url cannot be used with --shards",
        ),
        (
            &["--unhealthy", "release"],
            "--unhealthy release cannot be used with --shards",
        ),
    ] {
        let mut args = vec!["--shards", "4"];
        args.extend(flags);
        args.extend(["--", "x"]);
        let e = run_args(&args).err().unwrap_or_default();
        assert!(e.contains(names) && e.contains("drop --"), "{flags:?}: {e}");
        // Without --shards, each of them is a setting of the single election's run.
        let mut single: Vec<&str> = flags.to_vec();
        single.extend(["--", "x"]);
        assert!(run_args(&single).is_ok(), "{flags:?}");
    }
    let e = run_args(&["--weight", "2", "--", "x"])
        .err()
        .unwrap_or_default();
    assert!(e.contains("--weight needs --shards M"), "{e}");
    // What a member does when it is not eligible: accepted.
    let hold = run_args(&["--shards", "4", "--unhealthy", "hold", "--", "x"]);
    assert!(hold.is_ok(), "{hold:?}");
}

#[test]
fn check_timings_without_a_check_are_refused_naming_each_and_the_fix() {
    for (flag, value) in [
        ("--health-interval", "1s"),
        ("--health-timeout", "2s"),
        ("--health-fall", "5"),
        ("--health-rise", "1"),
    ] {
        let e = run_args(&[flag, value, "--", "x"])
            .err()
            .unwrap_or_default();
        assert!(
            e.contains(&format!(
                "{flag} says how the health checks run, and this run has none"
            )) && e.contains("--ready-command CMD")
                && e.contains("--health-command CMD")
                && e.contains(&format!("or drop {flag}")),
            "{flag}: {e}"
        );
        // With --shards, only the readiness check is offered.
        let e = run_args(&["--shards", "2", flag, value, "--", "x"])
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("--ready-url URL: with --shards") && !e.contains("--health-command CMD"),
            "{flag}: {e}"
        );
        // With any check, they are its settings.
        for check in [
            ["--ready-command", "true"],
            ["--ready-url", "http://127.0.0.1:1/"],
            ["--health-command", "true"],
            ["--health-url", "http://127.0.0.1:1/"],
        ] {
            let ok = run_args(&[check[0], check[1], flag, value, "--", "x"]);
            assert!(ok.is_ok(), "{check:?} {flag}: {ok:?}");
        }
    }
    let e = run_args(&["--health-fall", "5", "--health-rise", "1", "--", "x"])
        .err()
        .unwrap_or_default();
    assert!(
        e.contains("--health-fall, --health-rise say how")
            && e.contains("so they would be ignored")
            && e.contains("or drop --health-fall and drop --health-rise"),
        "{e}"
    );
    // --unhealthy is not a check's timing: an operator's exclusion or the version policy make
    // a leader ineligible without any check.
    assert!(run_args(&["--unhealthy", "release", "--", "x"]).is_ok());
}

#[test]
fn negative_check_counts_name_the_flag_as_one_argument_or_two() {
    for flag in ["--health-fall", "--health-rise"] {
        let joined = format!("{flag}=-1");
        for args in [vec![flag, "-1"], vec![joined.as_str()]] {
            let mut argv = args.clone();
            argv.extend(["--ready-command", "true", "--", "x"]);
            let e = run_args(&argv).err().unwrap_or_default();
            assert!(
                e.contains(&format!("invalid value '-1' for '{flag} <N>'"))
                    && e.contains("a whole number of consecutive checks"),
                "{args:?}: {e}"
            );
        }
    }
}

/// Every argument of `cmd` and of its subcommands, at any depth, with the path to it.
fn every_arg(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
    for arg in cmd.get_arguments() {
        if let Some(env) = arg.get_env() {
            out.push((
                format!("{path} --{}", arg.get_id()),
                env.to_string_lossy().into_owned(),
            ));
        }
    }
    for sub in cmd.get_subcommands() {
        every_arg(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

// Issue 29 item 7: the variables `run` gives its children are never a flag's variable, or an
// `fdb-leader` started by a child would read its supervisor's facts as configuration (`run
// --shards` gave each child FDB_LEADER_SHARDS, the variable of `run --shards`: a nested
// `fdb-leader --election solo run --try -- true` exited 2).
#[test]
fn no_flag_reads_a_variable_that_run_gives_its_children() {
    let mut args = Vec::new();
    every_arg(&Cli::command(), "fdb-leader", &mut args);
    assert!(
        args.iter().any(|(_, env)| env == "FDB_LEADER_SHARDS"),
        "the walk sees run's --shards: {args:?}"
    );
    let clashes: Vec<&(String, String)> = args
        .iter()
        .filter(|(_, env)| crate::child_env::ALL.contains(&env.as_str()))
        .collect();
    assert!(
        clashes.is_empty(),
        "flags reading a variable run sets for its children: {clashes:?}"
    );
}

/// `run --help` names every variable the children get.
#[test]
fn run_help_names_every_variable_of_the_children() {
    for name in crate::child_env::ALL {
        assert!(
            super::help::RUN_AFTER_HELP.contains(name),
            "run --help does not name {name}"
        );
    }
}

#[test]
fn an_unknown_flag_before_the_command_is_a_usage_error_not_the_command() {
    for args in [
        &["--lease-time", "2s", "--", "true"][..],
        &["--lease-time=2s", "--", "true"],
    ] {
        let argv = ["fdb-leader", "--memory", "run"]
            .iter()
            .chain(args)
            .copied();
        let parsed = Cli::parse_args(argv);
        assert!(parsed.is_err(), "{args:?} was accepted");
        let Err(error) = parsed else { continue };
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::UnknownArgument,
            "{args:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("--lease-time") && text.contains("--lease"),
            "{text}"
        );
    }
    // What follows the command is the command's, flags included, with or without `--`.
    assert_eq!(
        run_args(&["sh", "-c", "echo --lease-time"]).map(|r| r.command),
        Ok(["sh", "-c", "echo --lease-time"]
            .map(OsString::from)
            .to_vec())
    );
    assert_eq!(
        run_args(&["--", "ls", "--all"]).map(|r| r.command),
        Ok(["ls", "--all"].map(OsString::from).to_vec())
    );
}

#[test]
fn an_unknown_flag_is_answered_with_the_subcommands_flag_that_ends_with_it() {
    let parsed = Cli::parse_args(["fdb-leader", "--memory", "resign", "--ballot", "4"]);
    let text = parsed.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("--expected-ballot"), "{text}");
    assert!(!text.contains("--allow-network-fs"), "{text}");
    let parsed = Cli::parse_args(["fdb-leader", "--memory", "force-vacate", "--ballot=4"]);
    let text = parsed.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("--expected-ballot"), "{text}");
}

#[test]
fn metrics_listen_takes_a_port_a_host_name_or_an_address() {
    use std::net::SocketAddr;
    let parsed = |text: &str| run_args::listen_addr(text);
    let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(parsed("9464"), Ok(loopback(9464)));
    assert_eq!(parsed("127.0.0.1:9464"), Ok(loopback(9464)));
    assert_eq!(
        parsed("[::1]:9464"),
        Ok("[::1]:9464".parse().unwrap_or(loopback(0)))
    );
    let local = parsed("localhost:9464");
    assert!(
        local
            .as_ref()
            .is_ok_and(|a| a.ip().is_loopback() && a.port() == 9464),
        "{local:?}"
    );
    // Issue 39: `:9464` (every interface, as Go's listeners read it) was a DNS error.
    assert_eq!(parsed(":9464"), Ok(SocketAddr::from(([0, 0, 0, 0], 9464))));
    for bad in ["", "70000", "localhost", "127.0.0.1", ":", ":70000", ":x"] {
        let error = parsed(bad).err().unwrap_or_default();
        assert!(error.contains("expected PORT"), "{bad:?}: {error}");
    }
    let run = run_args(&["--metrics-listen", "9464", "--", "true"]);
    assert_eq!(run.map(|r| r.metrics_listen), Ok(Some(loopback(9464))));
}

/// Issue 39: every boolean flag that reads a variable takes clap's boolish values from it (1
/// and 0, yes and no, on and off, true and false), as `FDB_LEADER_MEMORY=1` is meant; a flag
/// added without it fails here.
#[test]
fn every_boolean_variable_takes_1_and_0() {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
            if !flag || arg.get_env().is_none() {
                continue;
            }
            for text in ["1", "0", "yes", "no", "on", "off", "true", "false"] {
                let takes = arg
                    .get_value_parser()
                    .possible_values()
                    .is_some_and(|mut values| values.any(|v| v.matches(text, false)));
                if !takes {
                    out.push(format!("{path} --{} {text}", arg.get_id()));
                }
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut refused = Vec::new();
    walk(&Cli::command(), "fdb-leader", &mut refused);
    assert!(refused.is_empty(), "refused: {refused:?}");
    let mut flags = 0;
    fn count(cmd: &clap::Command, n: &mut usize) {
        *n += cmd
            .get_arguments()
            .filter(|a| matches!(a.get_action(), clap::ArgAction::SetTrue) && a.get_env().is_some())
            .count();
        cmd.get_subcommands().for_each(|s| count(s, n));
    }
    count(&Cli::command(), &mut flags);
    assert!(flags >= 9, "the walk sees the boolean flags: {flags}");
}
