//! `fdb-leader`: leader election from the shell. Runs a command on exactly one machine of a
//! group (like `consul lock` or `etcdctl elect`), and inspects or steers the election: status,
//! watch, operator overrides, configuration. See `fdb-leader --help` and the README section
//! "Run a command on one machine only".

mod cli;
mod config_cmd;
mod durations;
mod exit;
mod fdb;
mod operator;
mod output;
mod process;
mod run;
mod signals;
mod status;
mod store;
mod watch;

use std::process::ExitCode;

use clap::Parser;
use fdb_leader_election::MemDb;
use fdb_leader_election::runner::ElectionDatabase;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::{Cli, Command, ConfigCommand, StoreChoice};
use crate::exit::{Exit, Failure};
use crate::signals::Signals;
use crate::store::Ctx;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout (exit 0); usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(Exit::Usage as u8));
        }
    };
    init_logging(&cli.command);
    let result = start(cli);
    match result {
        Ok(code) => code,
        Err(failure) => {
            if let Some(message) = &failure.message {
                eprintln!("fdb-leader: {message}");
            }
            failure.code.into()
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (`info` by default; the library's own events are
/// shown from `warn` except under `run`).
fn init_logging(command: &Command) {
    let default = match command {
        Command::Run(_) => Targets::new().with_default(LevelFilter::INFO),
        _ => Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("fdb_leader_election", LevelFilter::WARN),
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => match spec.parse::<Targets>() {
            Ok(targets) => targets,
            Err(e) => {
                eprintln!("fdb-leader: ignoring RUST_LOG={spec:?} ({e})");
                default
            }
        },
        _ => default,
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .with_target(false),
        )
        .with(filter)
        .try_init();
}

/// Picks the store, starts the runtime (and FoundationDB's network if needed), and runs the
/// command.
fn start(cli: Cli) -> Result<ExitCode, Failure> {
    let Some(store) = cli.store.choice() else {
        return Err(Failure::usage(
            "choose a store: --sqlite PATH (a file shared by the processes of this host), \
             --cluster-file PATH (FoundationDB) or --memory (this process only)",
        ));
    };
    #[cfg(not(feature = "fdb"))]
    if let StoreChoice::ClusterFile(path) = &store {
        return Err(fdb::unsupported(path));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::command(format!("cannot start the async runtime: {e}")))?;
    let ctx = Ctx::new(&cli.election, &store);
    let body = || runtime.block_on(open_and_execute(store, ctx, cli.command));
    let result = if matches!(cli.store.choice(), Some(StoreChoice::ClusterFile(_))) {
        fdb::with_network(body)
    } else {
        body()
    };
    // Stop the runtime (and anything still running on it) before FoundationDB's network.
    drop(runtime);
    result
}

async fn open_and_execute(
    store: StoreChoice,
    ctx: Ctx,
    command: Command,
) -> Result<ExitCode, Failure> {
    match store {
        StoreChoice::Sqlite(path) => {
            // Commands that only read or act on an existing election do not create a file.
            let create = matches!(
                command,
                Command::Run(_) | Command::Watch(_) | Command::Config(ConfigCommand::Set(_))
            );
            let db = store::open_sqlite(&path, create).await?;
            execute(db, &ctx, command).await
        }
        StoreChoice::Memory => execute(MemDb::new(), &ctx, command).await,
        #[cfg(feature = "fdb")]
        StoreChoice::ClusterFile(path) => execute(fdb::open(&path)?, &ctx, command).await,
        #[cfg(not(feature = "fdb"))]
        StoreChoice::ClusterFile(path) => Err(fdb::unsupported(&path)),
    }
}

async fn execute<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    command: Command,
) -> Result<ExitCode, Failure> {
    let done = |r: Result<(), Failure>| r.map(|()| ExitCode::SUCCESS);
    match command {
        Command::Run(args) => {
            let mut signals = listen()?;
            run::run(db, ctx, &args, &mut signals).await
        }
        Command::Watch(args) => {
            let mut signals = listen()?;
            watch::watch(db, ctx, args.json, &mut signals).await
        }
        Command::Status(args) => done(status::status(&db, ctx, args.json).await),
        Command::Resign(args) => done(operator::resign(&db, ctx, args.expected_ballot).await),
        Command::ForceVacate(args) => {
            done(operator::force_vacate(&db, ctx, args.expected_ballot).await)
        }
        Command::Config(ConfigCommand::Get { json }) => done(config_cmd::get(&db, ctx, json).await),
        Command::Config(ConfigCommand::Set(args)) => done(config_cmd::set(&db, ctx, &args).await),
    }
}

fn listen() -> Result<Signals, Failure> {
    Signals::new().map_err(|e| Failure::command(format!("cannot listen for signals: {e}")))
}
