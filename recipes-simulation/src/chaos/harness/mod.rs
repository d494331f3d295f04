//! The harness: starts the candidates (`fdb-leader run`, whose child is this program in child
//! mode), injects the faults, and records everything in true time.
//!
//! Nothing here is faulted: the harness, its report socket, the observer (`fdb-leader watch`)
//! and the sink files are outside every fault.

mod collect;
mod faults;
mod observe;
mod supervisors;

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::clock::monotonic_ns;
use super::cluster::{Cluster, TracedRecovery};
use super::fdb_log::FdbErrors;
use super::model::{ChildRun, Fault, FaultKind, ObservedChange, Window};
use super::probe::{Probe, ProbeCommit};
use super::proto::Report;
use super::sink::SinkLog;
use super::{ChaosOptions, ChaosStore, Settings};

/// A supervisor's state, for the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SupState {
    /// Running.
    Running,
    /// Stopped by `SIGSTOP`.
    Paused,
    /// Exited or killed.
    Dead,
}

/// One supervisor incarnation, as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Incarnation {
    /// Its slot (lane).
    pub slot: u32,
    /// Its number within the slot.
    pub incarnation: u32,
    /// Its priority.
    pub priority: i32,
    /// Its fake clock rate, if it ran under `libfaketime`.
    pub rate: Option<f64>,
    /// Its state changes, in time order (the first is its start).
    pub states: Vec<(u64, SupState)>,
    /// Exited without the harness asking (with its exit status in words).
    pub unexpected_exit: Option<String>,
}

/// Everything one chaos run recorded.
#[derive(Clone, Debug)]
pub struct ChaosRun {
    /// The options it ran with.
    pub options: ChaosOptions,
    /// The timings it ran with.
    pub settings: Settings,
    /// True time at the start.
    pub t0: u64,
    /// True time when the faults stopped (the checks judge up to here).
    pub end: u64,
    /// True time after the shutdown.
    pub closed: u64,
    /// Every child and its reports.
    pub children: Vec<ChildRun>,
    /// Children that reported a fake clock inherited (must be none).
    pub unclean_children: u64,
    /// Every fault.
    pub faults: Vec<Fault>,
    /// Each health fault's recovery (check (h)).
    pub health: Vec<HealthRecovery>,
    /// Windows in which a supervisor alone was paused, extended by the resume allowance.
    pub alone_paused: Vec<Window>,
    /// The windows where a supervisor and its child's group were paused together (a VM
    /// pause), to its heal.
    pub vm_paused: Vec<Window>,
    /// Every window in which a supervisor was paused (alone or with its child).
    pub paused: Vec<Window>,
    /// Store outages: (from, to).
    pub outages: Vec<(u64, u64)>,
    /// Every supervisor incarnation.
    pub incarnations: Vec<Incarnation>,
    /// The observer's leader changes.
    pub observed: Vec<ObservedChange>,
    /// The sinks' logs: one lane under a single election, one per shard under a sharded one.
    pub sinks: Vec<LaneSinks>,
    /// The run's directory (store, sinks, logs of every process).
    pub dir: PathBuf,
    /// The fault kinds this run injects (by store).
    pub kinds: Vec<FaultKind>,
    /// On FoundationDB: the errors, the probe, the recoveries.
    pub fdb: Option<FdbRecord>,
}

/// A health fault (the leader's `--health-command` starts failing): what the harness saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthRecovery {
    /// The supervisor slot whose check failed.
    pub slot: u32,
    /// True time the failing began (the harness made the check fail).
    pub start: u64,
    /// True time of the first failed check (its command ran), if it ran.
    pub first_failed: Option<u64>,
    /// True time of the first report of a child of another slot's supervisor, leading with a
    /// newer ballot after the first failed check (an eligible leader), if one came.
    pub eligible_leader: Option<u64>,
}

impl HealthRecovery {
    /// From the first failed check to an eligible leader (nanoseconds), if both came.
    pub fn recovery(&self) -> Option<u64> {
        self.first_failed
            .zip(self.eligible_leader)
            .map(|(f, l)| l.saturating_sub(f))
    }
}

/// The sinks of one lane (the single election, or one shard): the judged one and its
/// unfenced shadow.
#[derive(Clone, Debug)]
pub struct LaneSinks {
    /// The shard (`None`: the single election).
    pub shard: Option<u32>,
    /// The judged sink's log.
    pub fenced: SinkLog,
    /// The unfenced shadow sink's log, over the same writes.
    pub shadow: SinkLog,
}

/// What a run on FoundationDB recorded besides the election.
#[derive(Clone, Debug, Default)]
pub struct FdbRecord {
    /// The supervisors' transaction errors, from their logs.
    pub errors: FdbErrors,
    /// The probe's commits.
    pub probe: Vec<ProbeCommit>,
    /// The stalls the probe saw (true time).
    pub stalls: Vec<(u64, u64)>,
    /// The recoveries the cluster's trace files logged during the run (only on a cluster the
    /// harness started).
    pub recoveries: Vec<TracedRecovery>,
    /// Whether the harness started (and hurt) the cluster.
    pub own_cluster: bool,
}

/// The FoundationDB side of a run in progress.
struct FdbWorld {
    cluster_file: PathBuf,
    fdbcli: PathBuf,
    election: String,
    cluster: Option<Cluster>,
    probe: Option<Probe>,
    /// `CLOCK_REALTIME` at the start, in seconds (trace files are stamped with it).
    realtime_t0: f64,
    record: FdbRecord,
}

/// What the progress display is told, about once a second.
#[derive(Clone, Copy, Debug)]
pub struct Status {
    /// Seconds since the start.
    pub elapsed: u64,
    /// Seconds the faults run for.
    pub total: u64,
    /// Faults so far.
    pub faults: u64,
    /// The highest ballot reported so far.
    pub ballot: u64,
}

#[derive(Debug, Default)]
struct Inbox {
    reports: Vec<Report>,
    /// The latest report of each child, by (slot, incarnation, pid).
    latest: BTreeMap<(u32, u32, i32), Report>,
}

/// A live supervisor process.
#[derive(Debug)]
struct Sup {
    slot: u32,
    incarnation: u32,
    process: Child,
    pid: Pid,
    priority: i32,
    /// Index into the records.
    record: usize,
    paused: bool,
    /// The harness asked it to end (signal sent).
    ending: bool,
}

struct World<'a> {
    options: ChaosOptions,
    fdb: Option<FdbWorld>,
    kinds: Vec<FaultKind>,
    settings: Settings,
    fdb_leader: PathBuf,
    libfaketime: Option<PathBuf>,
    self_exe: PathBuf,
    dir: PathBuf,
    db: PathBuf,
    socket: PathBuf,
    rng: ChaCha8Rng,
    t0: u64,
    sups: Vec<Sup>,
    records: Vec<Incarnation>,
    next_incarnation: Vec<u32>,
    top_priority: i32,
    inbox: Arc<Mutex<Inbox>>,
    observed: Arc<Mutex<Vec<ObservedChange>>>,
    stop: Arc<AtomicBool>,
    /// Set by SIGTERM, SIGINT or SIGHUP: the run stops at its next wait, and the supervisors
    /// and their children are stopped as at the end of a run (a harness killed outright would
    /// leave a paused supervisor stopped for ever).
    interrupted: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    observer: Option<Child>,
    faults: Vec<Fault>,
    /// See [`ChaosRun::health`].
    health: Vec<HealthRecovery>,
    alone_paused: Vec<Window>,
    /// See [`ChaosRun::vm_paused`].
    vm_paused: Vec<Window>,
    paused: Vec<Window>,
    outages: Vec<(u64, u64)>,
    round: VecDeque<FaultKind>,
    progress: &'a mut dyn FnMut(Status),
    last_status: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The clock rate of the plant `clock-beyond-rho`: 0.2, an error of 80% (ρ is 5%).
pub const PLANT_CLOCK_RATE: f64 = 0.2;

/// Under the plant `unfenced-sink`, how long a VM-paused leader's child runs before its
/// supervisor and watchdog are continued (about six ticks of the child).
pub const CHILD_FIRST: Duration = Duration::from_millis(30);

/// How many `fdbserver` processes the harness's own cluster runs.
pub const CLUSTER_PROCESSES: u32 = 5;

/// How long a supervisor waits for a leader after a fault on FoundationDB, beyond the
/// recovery bound: the cluster's own recovery (5 s and more after its master dies).
const CLUSTER_SETTLE: Duration = Duration::from_secs(20);

/// The election's name on FoundationDB: one per run, so that runs on one cluster never meet.
fn election_name(seed: u64) -> String {
    format!("chaos-{}-{seed}", std::process::id())
}

/// `CLOCK_REALTIME` in seconds (FoundationDB's trace files are stamped with it).
fn realtime() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Where Debian (and others) install the multi-threaded libfaketime.
const LIBFAKETIME_PATHS: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
];

/// The libfaketime to preload: the one given, or the first installed one.
pub fn find_libfaketime(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return if path.exists() {
            Ok(path.to_owned())
        } else {
            Err(format!("--libfaketime {}: no such file", path.display()))
        };
    }
    LIBFAKETIME_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| {
            "libfaketime not found: install it (Debian: apt-get install faketime libfaketime) \
             or pass --libfaketime PATH"
                .to_owned()
        })
}

/// Runs the harness: faults for `options.seconds`, then a clean shutdown; returns the record.
pub fn run_chaos(
    options: &ChaosOptions,
    progress: &mut dyn FnMut(Status),
) -> Result<ChaosRun, String> {
    let settings = Settings::default();
    let libfaketime = Some(find_libfaketime(options.libfaketime.as_deref())?);
    let fdb_leader = options.fdb_leader.clone();
    if !fdb_leader.is_file() {
        return Err(format!(
            "--fdb-leader {}: not a file (build it with `cargo build --release --features cli \
             --bin fdb-leader`)",
            fdb_leader.display()
        ));
    }
    let self_exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir = options.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("chaos-{}-{}", std::process::id(), options.seed))
    });
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("logs"))
        .and_then(|()| std::fs::create_dir_all(dir.join("sink")))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let socket = dir.join("reports.sock");
    let receiver = UnixDatagram::bind(&socket).map_err(|e| format!("report socket: {e}"))?;
    receiver
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| format!("report socket: {e}"))?;
    let slots = usize::try_from(options.candidates).unwrap_or(1);
    if options.plant.is_some_and(|p| p.store() == "fdb") && !options.store.is_fdb() {
        return Err(format!(
            "--plant {}: a FoundationDB plant (pass --fdb-dir D or --cluster-file F)",
            options.plant.map(|p| p.name()).unwrap_or_default()
        ));
    }
    let fdb = match &options.store {
        ChaosStore::Sqlite => None,
        ChaosStore::Fdb { install, fdb_local } => {
            let folder = dir.join("fdb");
            let cluster = Cluster::start(fdb_local, install, &folder, CLUSTER_PROCESSES, "double")
                .map_err(|e| format!("starting the FoundationDB cluster: {e}"))?;
            Some(FdbWorld {
                cluster_file: cluster.cluster_file.clone(),
                fdbcli: cluster.fdbcli().to_owned(),
                election: election_name(options.seed),
                cluster: Some(cluster),
                probe: None,
                realtime_t0: realtime(),
                record: FdbRecord {
                    own_cluster: true,
                    ..FdbRecord::default()
                },
            })
        }
        ChaosStore::ClusterFile { file, fdbcli } => Some(FdbWorld {
            cluster_file: file.clone(),
            fdbcli: fdbcli.clone(),
            election: election_name(options.seed),
            cluster: None,
            probe: None,
            realtime_t0: realtime(),
            record: FdbRecord::default(),
        }),
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .map_err(|e| format!("registering signal {signal}: {e}"))?;
    }
    let kinds = FaultKind::for_store(
        fdb.is_some(),
        fdb.as_ref().is_some_and(|f| f.cluster.is_some()),
        options.shards.is_some(),
    );
    let mut world = World {
        options: options.clone(),
        fdb,
        kinds,
        settings,
        fdb_leader,
        libfaketime,
        self_exe,
        db: dir.join("election.db"),
        dir,
        socket,
        rng: ChaCha8Rng::seed_from_u64(options.seed),
        t0: monotonic_ns(),
        sups: Vec::new(),
        records: Vec::new(),
        next_incarnation: vec![0; slots],
        top_priority: 0,
        inbox: Arc::default(),
        observed: Arc::default(),
        stop: Arc::default(),
        interrupted,
        threads: Vec::new(),
        observer: None,
        faults: Vec::new(),
        health: Vec::new(),
        alone_paused: Vec::new(),
        vm_paused: Vec::new(),
        paused: Vec::new(),
        outages: Vec::new(),
        round: VecDeque::new(),
        progress,
        last_status: 0,
    };
    world.start_receiver(receiver);
    let result = world.run();
    world.shutdown();
    let end = result?;
    world.collect(end)
}

impl World<'_> {
    fn now(&self) -> u64 {
        monotonic_ns()
    }

    fn run(&mut self) -> Result<u64, String> {
        if let Some(fdb) = self.fdb.as_mut() {
            fdb.probe = Some(Probe::start(&fdb.fdbcli, &fdb.cluster_file));
        }
        self.configure()?;
        self.start_observer()?;
        for slot in 0..self.options.candidates {
            self.spawn(slot, i32::try_from(slot).unwrap_or(0), None)?;
        }
        let end = self
            .t0
            .saturating_add(self.options.seconds.saturating_mul(1_000_000_000));
        self.settle()?;
        while self.now() < end {
            let kind = self.next_kind();
            self.inject(kind)?;
            self.settle()?;
            let rest = Duration::from_millis(self.rng.random_range(300..1000));
            self.idle(rest)?;
        }
        Ok(self.now())
    }
}

impl Drop for World<'_> {
    fn drop(&mut self) {
        for sup in &mut self.sups {
            let _ = kill(sup.pid, Signal::SIGCONT);
            let _ = sup.process.kill();
            let _ = sup.process.wait();
        }
        if let Some(mut observer) = self.observer.take() {
            let _ = observer.kill();
            let _ = observer.wait();
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}
