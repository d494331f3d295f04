//! The command line's unit tests: parsing, the exclusive groups, the store flags.

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
    assert_eq!(run.on_child_exit, OnChildExit::Resign);
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
