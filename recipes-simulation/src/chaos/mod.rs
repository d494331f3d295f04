//! A Jepsen-style chaos test of `fdb-leader run`: real processes, real clocks, real signals.
//!
//! K candidates run `fdb-leader run` on one SQLite file; their child is the `chaos` binary
//! itself in child mode ([`child`]), which does fenced work on a sink shared through a locked
//! file ([`sink`]) and reports "alive, ballot B" every few milliseconds over a Unix socket
//! ([`proto`]). The harness ([`harness`]) injects seeded faults — `kill -9`, `SIGSTOP` of a
//! supervisor alone or with its child (a VM pause), restarts, rolling restarts with higher
//! priorities, store outages (SQLite's write lock held, [`store_lock`]), clock-rate errors
//! with `libfaketime` — and timestamps everything in true time ([`clock`]). The checks
//! ([`checks`]) then judge the record ([`model`]) into a report ([`report`]): (a) fencing, (b) no overlap, (c) recovery,
//! (d) progress.
//!
//! # On FoundationDB (DESIGN §11.4)
//!
//! With [`ChaosStore::Fdb`] the harness starts its own cluster ([`cluster`]: five `fdbserver`
//! processes, `double` redundancy, three coordinators, each process its own zone and
//! machine) and the K supervisors run `fdb-leader --cluster-file F run` on it; with
//! [`ChaosStore::ClusterFile`] they run on a cluster given to it, which it does not hurt. The
//! cluster's own faults are injected beside the supervisor faults (which stay, except the
//! SQLite lock): `kill -9` of a random `fdbserver` and of the one holding `master`, each
//! restarted after a seeded delay, `SIGSTOP` of one for 0.5–3 s, a forced recovery, a
//! coordinator (a minority) killed and restarted. A probe ([`probe`]) commits through
//! `fdbcli` all along and measures the cluster's stalls; check (c) allows each fault the
//! stall time it met on top of lease + 2 heartbeats + grace. The supervisors log every error
//! their transactions meet (the adapter's debug line), which [`fdb_log`] counts: the summary
//! shows 1021, 1031 (and how many of them arose in a commit), 1007, 1020 and the others, and
//! the commits whose result was unknown; the recoveries and their durations come from the
//! cluster's trace files.
//!
//! The fenced sink stays the harness's own file ([`sink`]), as on SQLite, not a key in the
//! cluster: it is the judge, and must stand outside every fault. A sink in FoundationDB
//! would stall, and answer unknown results, with the very cluster under test, so that a write
//! the checks count might or might not have happened; and a fenced FoundationDB key would be
//! the election's own fencing (`LeaderElection::fence` in the writer's transaction), which the
//! integration tests cover, rather than the command-line supervisor's promise that its child
//! runs only while it leads, which is what the harness tests.

pub mod checks;
pub mod child;
pub mod clock;
pub mod cluster;
pub mod fdb_log;
pub mod harness;
pub mod model;
pub mod probe;
pub mod proto;
pub mod report;
pub mod sink;
pub mod store_lock;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// A planted fault: proves a check can fail. No plant changes the `fdb-leader` binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChaosPlant {
    /// Clock-rate faults run a supervisor's clock far beyond ρ (at a fifth of the true rate),
    /// with the top priority so it takes the leadership over: it renews less often than its
    /// followers wait, they take over while it still believes, and its child runs on until it
    /// notices. Check (b) must fire.
    ClockBeyondRho,
    /// The sink ignores ballots, and each round starts with a VM pause of the leader whose
    /// child is continued [`harness::CHILD_FIRST`] before its supervisor and watchdog (a
    /// machine pause after which the child runs first: its watchdog, paused too, cannot kill
    /// it yet). The child's stale writes land after its successor's: check (a) must fire.
    UnfencedSink,
    /// FoundationDB only, with an `fdb-leader` built with the feature `planted-faults`: the
    /// supervisors run with `FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED=1`, so the adapter reports a
    /// commit whose result is unknown as committed and the election adopts an acquisition or a
    /// renewal the store may not hold. An acquisition that never landed leaves its ballot to
    /// the next candidate too: two children of one ballot, which the sink accepts from both,
    /// and check (a) fires; a renewal that never landed keeps a leader believing after its
    /// followers took over, and check (b) fires. Either must.
    UnknownAsCommitted,
    /// The supervisors run without their leader health check (no `--health-command`), as a
    /// supervisor that ignores it would: a leader whose check fails keeps leading, and check
    /// (h) must fire. Single elections only (the health fault is not injected under
    /// `--shards`).
    HealthUnchecked,
}

impl ChaosPlant {
    /// Every plant.
    pub const ALL: [ChaosPlant; 4] = [
        ChaosPlant::ClockBeyondRho,
        ChaosPlant::UnfencedSink,
        ChaosPlant::UnknownAsCommitted,
        ChaosPlant::HealthUnchecked,
    ];

    /// The plant's name.
    pub fn name(self) -> &'static str {
        match self {
            ChaosPlant::ClockBeyondRho => "clock-beyond-rho",
            ChaosPlant::UnfencedSink => "unfenced-sink",
            ChaosPlant::UnknownAsCommitted => "unknown-as-committed",
            ChaosPlant::HealthUnchecked => "health-unchecked",
        }
    }

    /// The checks it must make fail (at least one of them).
    pub fn target(self) -> &'static str {
        match self {
            ChaosPlant::ClockBeyondRho => "b",
            ChaosPlant::UnfencedSink => "a",
            ChaosPlant::UnknownAsCommitted => "ab",
            ChaosPlant::HealthUnchecked => "h",
        }
    }

    /// The store it needs: `any`, `fdb`, or `single` (any store, a single election only).
    pub fn store(self) -> &'static str {
        match self {
            ChaosPlant::UnknownAsCommitted => "fdb",
            ChaosPlant::HealthUnchecked => "single",
            _ => "any",
        }
    }

    /// The environment variable it sets on every supervisor, if any (it needs an `fdb-leader`
    /// built with the feature `planted-faults`).
    pub fn switch(self) -> Option<&'static str> {
        match self {
            ChaosPlant::UnknownAsCommitted => Some("FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED"),
            _ => None,
        }
    }
}

impl fmt::Display for ChaosPlant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ChaosPlant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChaosPlant::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ChaosPlant::ALL.iter().map(|p| p.name()).collect();
                format!("unknown plant {s:?} (one of: {})", names.join(", "))
            })
    }
}

/// The store the supervisors share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChaosStore {
    /// A SQLite file in the run's directory.
    Sqlite,
    /// A FoundationDB cluster the harness starts (and hurts) from the install `install`
    /// (`bin/fdbserver`, `bin/fdbcli`), with `fdb_local` (the project's `scripts/fdb-local`).
    Fdb {
        /// The FoundationDB install.
        install: PathBuf,
        /// `scripts/fdb-local`.
        fdb_local: PathBuf,
    },
    /// A FoundationDB cluster given by its cluster file: supervisor faults only (the harness
    /// does not hurt a cluster it did not start); `fdbcli` for the probe.
    ClusterFile {
        /// The cluster file.
        file: PathBuf,
        /// `fdbcli`.
        fdbcli: PathBuf,
    },
}

impl ChaosStore {
    /// Whether it is FoundationDB.
    pub fn is_fdb(&self) -> bool {
        !matches!(self, ChaosStore::Sqlite)
    }
}

/// How to run the harness.
#[derive(Clone, Debug)]
pub struct ChaosOptions {
    /// A built `fdb-leader`.
    pub fdb_leader: PathBuf,
    /// How long the faults go on.
    pub seconds: u64,
    /// The seed of every choice the harness makes.
    pub seed: u64,
    /// How many candidate slots.
    pub candidates: u32,
    /// A planted fault.
    pub plant: Option<ChaosPlant>,
    /// The libfaketime to preload (default: the installed one).
    pub libfaketime: Option<PathBuf>,
    /// The run's directory (default: a new one under the temporary directory).
    pub dir: Option<PathBuf>,
    /// The store.
    pub store: ChaosStore,
    /// Environment variables set on every supervisor (`NAME`, `VALUE`), for example a
    /// planted fault's switch, to show a build without the feature `planted-faults` ignores it.
    pub supervisor_env: Vec<(String, String)>,
    /// Sharded mode: the supervisors run `fdb-leader run --shards M` (one child per owned
    /// shard, each with its own sinks), and every check is made per shard.
    pub shards: Option<u32>,
}

/// The timings of the election and of the harness.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// The election's lease.
    pub lease: Duration,
    /// The election's heartbeat.
    pub heartbeat: Duration,
    /// The election's candidate timeout.
    pub candidate_timeout: Duration,
    /// The election's ρ, the largest clock rate error assumed, in parts per million.
    pub rho_ppm: u32,
    /// The election's bound on one transaction attempt.
    pub transaction_timeout: Duration,
    /// The election's handover grace.
    pub handover_grace: Duration,
    /// The election's takeover stagger per priority rank.
    pub takeover_stagger: Duration,
    /// `fdb-leader run --grace`: SIGTERM to SIGKILL of the child.
    pub child_grace: Duration,
    /// The children's nominal report interval (one report and one write per tick).
    pub report_interval: Duration,
    /// A gap between reports longer than this ends an alive span (the child was stopped).
    pub split_gap: Duration,
    /// How far past its `SIGCONT` the report's window of a supervisor paused alone reaches
    /// (the time it takes to notice its lost leadership; overlaps inside are violations too).
    pub resume_allowance: Duration,
    /// The grace in the recovery bound (lease + 2 heartbeats + grace): takeover stagger,
    /// starting the child, its first report.
    pub recovery_grace: Duration,
    /// The supervisors' leader health check (`--health-command`): its interval.
    pub health_interval: Duration,
    /// Its timeout.
    pub health_timeout: Duration,
    /// Its `--health-fall` (and `--health-rise` 1).
    pub health_fall: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            lease: Duration::from_secs(1),
            heartbeat: Duration::from_millis(250),
            candidate_timeout: Duration::from_secs(2),
            rho_ppm: 50_000,
            transaction_timeout: Duration::from_millis(100),
            handover_grace: Duration::from_secs(1),
            takeover_stagger: Duration::from_millis(50),
            child_grace: Duration::from_millis(300),
            report_interval: Duration::from_millis(5),
            split_gap: Duration::from_millis(50),
            resume_allowance: Duration::from_millis(250),
            recovery_grace: Duration::from_millis(500),
            health_interval: Duration::from_millis(100),
            health_timeout: Duration::from_secs(1),
            health_fall: 2,
        }
    }
}

impl Settings {
    /// Lease + 2 heartbeats + grace.
    pub fn recovery_bound(&self) -> Duration {
        self.lease
            .saturating_add(self.heartbeat.saturating_mul(2))
            .saturating_add(self.recovery_grace)
    }

    /// Check (h): from the first failed health check to an eligible leader's child, at most
    /// the fall's further checks ((fall − 1) intervals, the last one up to its timeout), then
    /// the recovery bound (the leader hands over at its next cycle, without a lease wait: this
    /// bound is loose, the figure is reported).
    pub fn health_bound(&self) -> Duration {
        self.health_interval
            .saturating_mul(self.health_fall.saturating_sub(1))
            .saturating_add(self.health_timeout)
            .saturating_add(self.recovery_bound())
    }

    /// Under a sharded election: 2 leases + 2 heartbeats + grace. A dead member's shards are
    /// taken over once someone who may coordinate has seen its record unchanged for a full
    /// lease (standbys time the members once a heartbeat); when the member that died also
    /// coordinated, the coordinator election's own takeover (a lease and its stagger) comes
    /// first, then the placement, the new owners' cycles and their children's start; a
    /// `kill -9` is often followed by the slot's new incarnation joining meanwhile, which
    /// placement also serves. The runs measured up to 2.03 s (lease 1 s) after a `kill -9` of
    /// the coordinating member; the single election's bound (lease + 2 heartbeats + grace)
    /// does not cover that path. The takeover target itself (1.1 × lease, median) is
    /// `perf_report`'s to measure, not this bound's.
    pub fn sharded_recovery_bound(&self) -> Duration {
        self.recovery_bound().saturating_add(self.lease)
    }
}
