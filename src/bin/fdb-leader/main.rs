//! `fdb-leader`: leader election from the shell. Runs a command on exactly one machine of a
//! group (like `consul lock` or `etcdctl elect`), and inspects or steers the election: status,
//! watch, operator overrides, configuration, and a sharded election's placement and overrides
//! (`shards`). See `fdb-leader --help` and `docs/cli.md`.

mod backoff;
mod checks;
mod child_env;
mod classify;
mod cli;
mod config_cmd;
mod durations;
mod exit;
mod fdb;
mod guarded;
mod identity;
mod limits;
mod operator;
mod output;
mod preflight;
mod process;
mod run;
mod serve;
mod shards;
mod signals;
mod status;
mod store;
mod watch;
mod watchdog;

use std::process::ExitCode;

use fdb_leader_election::MemDb;
use fdb_leader_election::runner::ElectionDatabase;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::{Cli, Command, ConfigCommand, ShardsCommand, StoreChoice};
use crate::exit::{Exit, Failure};
use crate::guarded::Guarded;
use crate::signals::{Fatal, Signals};
use crate::store::Ctx;

fn main() -> ExitCode {
    // The watchdog and exec shim of `run`'s children (see `watchdog`): not commands a user
    // types, so not in the command line's grammar.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = watchdog::hidden_mode(&argv) {
        return code;
    }
    let cli = match Cli::parse_args(argv) {
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
    if let (StoreChoice::Memory, Command::Watch(args)) = (&store, &cli.command) {
        if args.wait {
            // It would wait forever: nothing but this command can create an election there.
            return Err(Failure::usage(
                "--wait with --memory would wait forever: --memory is this command's own \
                 memory, which no other process shares; watch the store the election's \
                 processes share: --sqlite PATH or --cluster-file PATH",
            ));
        }
    }
    let ctx = Ctx::new(&cli.election, &store);
    let ctx = match &cli.command {
        Command::Shards(_) => ctx.for_shards(),
        Command::Run(args) if args.shards.is_some() => ctx.for_shards(),
        Command::Config(ConfigCommand::Get { sharded: true, .. }) => ctx.for_shards(),
        Command::Config(ConfigCommand::Set(args)) if args.sharded => ctx.for_shards(),
        _ => ctx,
    };
    let allow_network_fs = cli.allow_network_fs;
    let on_fdb = matches!(store, StoreChoice::ClusterFile(_));
    // The runtime is built and dropped inside the closure, so that with FoundationDB every
    // task and in-flight future holding the database (detached ones too) is gone before the
    // network is stopped: stopping it under live futures is known to hang or crash at exit.
    let body = move || in_own_runtime(open_and_execute(store, ctx, cli.command, allow_network_fs));
    if on_fdb {
        fdb::with_network(body)
    } else {
        body()
    }
}

/// Runs `fut` on a runtime of its own, built here and dropped (with every task still on it,
/// detached ones too) before this returns.
fn in_own_runtime<F>(fut: F) -> Result<ExitCode, Failure>
where
    F: std::future::Future<Output = Result<ExitCode, Failure>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::command(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(fut);
    drop(runtime);
    result
}

async fn open_and_execute(
    store: StoreChoice,
    ctx: Ctx,
    command: Command,
    allow_network_fs: bool,
) -> Result<ExitCode, Failure> {
    // `run` makes every check that can refuse it (its settings, its command, its metrics
    // listener) before anything is opened or created.
    let prepared = match &command {
        Command::Run(args) => Some(run::preflight(args)?),
        _ => None,
    };
    // So does `config set`: on a store it would create, with the configuration it would
    // create the election with.
    if let Command::Config(ConfigCommand::Set(args)) = &command {
        let new_store = match &store {
            StoreChoice::Sqlite(path) => !path.exists(),
            StoreChoice::Memory => true,
            StoreChoice::ClusterFile(_) => false,
        };
        config_cmd::settings::precheck(&ctx, args, new_store)?;
    }
    let fatal = Fatal::new();
    let mut signals = match command {
        Command::Run(_) | Command::Watch(_) => Some(listen(&fatal)?),
        _ => None,
    };
    match store {
        StoreChoice::Sqlite(path) => {
            if let (Command::Watch(args), Some(signals)) = (&command, signals.as_mut()) {
                if args.wait && (!path.exists() || store::holds_no_store_yet(&path)) {
                    if let Some(code) = wait_for_file(&path, signals).await {
                        return Ok(code);
                    }
                }
            }
            // Only `run` and `config set` create a store; the others (`shards` too) answer "no
            // election". The commands that only read open it read-only.
            let open = match &command {
                Command::Run(_) | Command::Config(ConfigCommand::Set(_)) => store::Open::Create,
                // `watch` outlives writers that come and go: read-only (which reads a store
                // no writer uses as it stands, and ends when one starts) only for a user who
                // may not write the store; otherwise as the writers' peer.
                Command::Watch(_) if store::may_write(&path) => store::Open::Existing,
                Command::Status(_)
                | Command::Watch(_)
                | Command::Config(ConfigCommand::Get { .. })
                | Command::Shards(ShardsCommand::Status(_)) => store::Open::ReadOnly,
                _ => store::Open::Existing,
            };
            let db = store::open_sqlite(&path, open, allow_network_fs, &ctx).await?;
            if matches!(command, Command::Run(_) | Command::Watch(_)) {
                tokio::spawn(identity::monitor(
                    db.clone(),
                    identity::PERIOD,
                    fatal.clone(),
                ));
            }
            let db = Guarded::new(db, Some(path), fatal);
            execute(db, &ctx, command, prepared, signals).await
        }
        StoreChoice::Memory => {
            let db = Guarded::new(MemDb::new(), None, fatal);
            execute(db, &ctx, command, prepared, signals).await
        }
        #[cfg(feature = "fdb")]
        StoreChoice::ClusterFile(path) => {
            let db = Guarded::new(fdb::open(&path)?, None, fatal);
            execute(db, &ctx, command, prepared, signals).await
        }
        #[cfg(not(feature = "fdb"))]
        StoreChoice::ClusterFile(path) => Err(fdb::unsupported(&path)),
    }
}

/// `watch --wait`: waits for the store file to appear (creating nothing). `Some(0)` if a
/// signal came first.
async fn wait_for_file(path: &std::path::Path, signals: &mut Signals) -> Option<ExitCode> {
    tracing::info!(store = %path.display(), "no store file yet: waiting for a run or config set to create it (--wait)");
    let mut ticks = tokio::time::interval(std::time::Duration::from_millis(100));
    // The file appears before the store in it: wait for both.
    while !path.exists() || store::holds_no_store_yet(path) {
        tokio::select! {
            _ = ticks.tick() => {}
            stop = signals.recv() => {
                tracing::info!(reason = stop.as_str(), "stopping");
                return Some(ExitCode::SUCCESS);
            }
        }
    }
    None
}

async fn execute<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    command: Command,
    prepared: Option<run::Prepared>,
    signals: Option<Signals>,
) -> Result<ExitCode, Failure> {
    let done = |r: Result<(), Failure>| r.map(|()| ExitCode::SUCCESS);
    let listening = |signals: Option<Signals>| {
        signals.ok_or_else(|| Failure::command("internal error: not listening for signals"))
    };
    match command {
        Command::Run(args) => {
            let mut signals = listening(signals)?;
            let Some(prepared) = prepared else {
                return Err(Failure::command("internal error: run was not prepared"));
            };
            run::run(db, ctx, &args, prepared, &mut signals).await
        }
        Command::Watch(args) => {
            let mut signals = listening(signals)?;
            watch::watch(db, ctx, &args, &mut signals).await
        }
        Command::Status(args) => done(status::status(&db, ctx, args.json).await),
        Command::Resign(args) => {
            done(operator::resign(&db, ctx, args.op.expected_ballot, args.to.as_deref()).await)
        }
        Command::Eligible(args) => done(operator::eligible(&db, ctx, &args).await),
        Command::ForceVacate(args) => {
            done(operator::force_vacate(&db, ctx, args.expected_ballot).await)
        }
        Command::Config(ConfigCommand::Get { json, .. }) => {
            done(config_cmd::get(&db, ctx, json).await)
        }
        Command::Config(ConfigCommand::Set(args)) => done(config_cmd::set(&db, ctx, &args).await),
        Command::Shards(command) => done(shards::execute(&db, ctx, command).await),
    }
}

fn listen(fatal: &Fatal) -> Result<Signals, Failure> {
    Signals::new(fatal.clone())
        .map_err(|e| Failure::command(format!("cannot listen for signals: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Records its drop.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn detached_tasks_are_gone_before_the_network_would_stop() {
        let held = Arc::new(AtomicBool::new(false));
        let task_state = Arc::clone(&held);
        let out = in_own_runtime(async move {
            // A detached task still holding something (the database, on FoundationDB) when the
            // command ends.
            let guard = Dropped(task_state);
            tokio::spawn(async move {
                let _keep = guard;
                std::future::pending::<()>().await;
            });
            tokio::task::yield_now().await;
            Ok(ExitCode::SUCCESS)
        });
        assert!(out.is_ok());
        // `with_network` stops the network after its closure returns: by then the task (and
        // what it held) is gone.
        assert!(held.load(Ordering::SeqCst));
    }
}
