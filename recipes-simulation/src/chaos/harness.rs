//! The harness: starts the candidates (`fdb-leader run`, whose child is this program in child
//! mode), injects the faults, and records everything in true time.
//!
//! Nothing here is faulted: the harness, its report socket, the observer (`fdb-leader watch`)
//! and the sink files are outside every fault.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::child::{FENCED_SINK, SHADOW_SINK};
use super::clock::{monotonic_ns, ns};
use super::cluster::{Cluster, ClusterStatus, TracedRecovery};
use super::fdb_log::FdbErrors;
use super::model::{ChildRun, Fault, FaultKind, ObservedChange, Window};
use super::probe::{PROBE_SPACING, Probe, ProbeCommit, STALL_MIN, stalls};
use super::proto::Report;
use super::sink::{SinkLog, log_path, read_log};
use super::store_lock::StoreLock;
use super::{ChaosOptions, ChaosPlant, ChaosStore, Settings};

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
    /// The judged sink's log.
    pub fenced_log: SinkLog,
    /// The unfenced shadow sink's log.
    pub shadow_log: SinkLog,
    /// The run's directory (store, sinks, logs of every process).
    pub dir: PathBuf,
    /// The fault kinds this run injects (by store).
    pub kinds: Vec<FaultKind>,
    /// On FoundationDB: the errors, the probe, the recoveries.
    pub fdb: Option<FdbRecord>,
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
    /// The latest report of each (slot, incarnation).
    latest: BTreeMap<(u32, u32), Report>,
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
    threads: Vec<JoinHandle<()>>,
    observer: Option<Child>,
    faults: Vec<Fault>,
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
    let kinds = FaultKind::for_store(
        fdb.is_some(),
        fdb.as_ref().is_some_and(|f| f.cluster.is_some()),
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
        threads: Vec::new(),
        observer: None,
        faults: Vec::new(),
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

    fn start_receiver(&mut self, socket: UnixDatagram) {
        let inbox = Arc::clone(&self.inbox);
        let stop = Arc::clone(&self.stop);
        self.threads.push(std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            while !stop.load(Ordering::Relaxed) {
                let Ok(n) = socket.recv(&mut buf) else {
                    continue;
                };
                let text = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
                if let Some(report) = Report::decode(&text) {
                    let mut inbox = lock(&inbox);
                    inbox
                        .latest
                        .insert((report.slot, report.incarnation), report.clone());
                    inbox.reports.push(report);
                }
            }
        }));
    }

    fn fdb_leader(&self) -> Command {
        let mut cmd = Command::new(&self.fdb_leader);
        match &self.fdb {
            Some(fdb) => cmd
                .arg("--cluster-file")
                .arg(&fdb.cluster_file)
                .arg("--election")
                .arg(&fdb.election),
            None => cmd.arg("--sqlite").arg(&self.db),
        };
        cmd.env_remove("LD_PRELOAD")
            .env_remove("FAKETIME")
            .env("RUST_LOG", "info");
        cmd
    }

    fn log_file(&self, name: &str) -> Result<(Stdio, Stdio), String> {
        let path = self.dir.join("logs").join(format!("{name}.log"));
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((Stdio::from(file), Stdio::from(err)))
    }

    /// Creates the election with the harness's timings.
    fn configure(&self) -> Result<(), String> {
        let s = &self.settings;
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let (out, err) = self.log_file("config")?;
        let status = self
            .fdb_leader()
            .args(["config", "set", "--lease"])
            .arg(ms(s.lease))
            .arg("--heartbeat")
            .arg(ms(s.heartbeat))
            .arg("--candidate-timeout")
            .arg(ms(s.candidate_timeout))
            .arg("--max-clock-rate-error-ppm")
            .arg(s.rho_ppm.to_string())
            .arg("--transaction-timeout")
            .arg(ms(s.transaction_timeout))
            .arg("--handover-grace")
            .arg(ms(s.handover_grace))
            .arg("--takeover-stagger")
            .arg(ms(s.takeover_stagger))
            .arg("--min-tenure")
            .arg("0ms")
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(|e| format!("{}: {e}", self.fdb_leader.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "fdb-leader config set failed ({status}); see {}",
                self.dir.join("logs/config.log").display()
            ))
        }
    }

    fn start_observer(&mut self) -> Result<(), String> {
        let (_, err) = self.log_file("observer")?;
        let mut child = self
            .fdb_leader()
            .args(["watch", "--json", "--wait"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("fdb-leader watch: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| "fdb-leader watch: no stdout".to_owned())?;
        let observed = Arc::clone(&self.observed);
        self.threads.push(std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(change) = ObservedChange::parse(monotonic_ns(), &line) {
                    lock(&observed).push(change);
                }
            }
        }));
        self.observer = Some(child);
        Ok(())
    }

    /// Starts a new incarnation in `slot`.
    fn spawn(&mut self, slot: u32, priority: i32, rate: Option<f64>) -> Result<(), String> {
        let index = usize::try_from(slot).unwrap_or(0);
        let incarnation = self.next_incarnation.get(index).copied().unwrap_or(0);
        if let Some(n) = self.next_incarnation.get_mut(index) {
            *n = n.saturating_add(1);
        }
        let name = format!("c{slot}i{incarnation}");
        let (out, err) = self.log_file(&name)?;
        let fencing = match self.options.plant {
            Some(ChaosPlant::UnfencedSink) => "unfenced",
            _ => "fenced",
        };
        let mut cmd = self.fdb_leader();
        cmd.args(["run", "--name", &name, "--priority"])
            .arg(priority.to_string())
            .arg("--grace")
            .arg(format!("{}ms", self.settings.child_grace.as_millis()))
            .args([
                "--",
                "env",
                "-u",
                "LD_PRELOAD",
                "-u",
                "FAKETIME",
                "-u",
                "FAKETIME_SHARED",
            ])
            .arg(&self.self_exe)
            .arg("child")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--sink-dir")
            .arg(self.dir.join("sink"))
            .args(["--slot", &slot.to_string()])
            .args(["--incarnation", &incarnation.to_string()])
            .args([
                "--interval-us",
                &self.settings.report_interval.as_micros().to_string(),
            ])
            .args(["--fencing", fencing])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if self.fdb.is_some() {
            // Every error of the supervisor's transactions, with its code (the adapter's
            // debug line), for the summary.
            cmd.env("RUST_LOG", "info,fdb_leader_election::fdb=debug");
        }
        for (name, value) in &self.options.supervisor_env {
            cmd.env(name, value);
        }
        if let Some(switch) = self.options.plant.and_then(ChaosPlant::switch) {
            cmd.env(switch, "1");
        }
        if let (Some(rate), Some(lib)) = (rate, &self.libfaketime) {
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME", format!("+0 x{rate:.4}"));
        }
        let process = cmd
            .spawn()
            .map_err(|e| format!("{}: {e}", self.fdb_leader.display()))?;
        let pid = Pid::from_raw(i32::try_from(process.id()).unwrap_or(0));
        self.records.push(Incarnation {
            slot,
            incarnation,
            priority,
            rate,
            states: vec![(self.now(), SupState::Running)],
            unexpected_exit: None,
        });
        self.sups.push(Sup {
            slot,
            incarnation,
            process,
            pid,
            priority,
            record: self.records.len().saturating_sub(1),
            paused: false,
            ending: false,
        });
        self.top_priority = self.top_priority.max(priority);
        Ok(())
    }

    fn set_state(&mut self, record: usize, state: SupState) {
        let now = self.now();
        if let Some(r) = self.records.get_mut(record) {
            r.states.push((now, state));
        }
    }

    /// Reaps exited supervisors; restarts slots whose supervisor exited unasked.
    fn reap(&mut self) -> Result<(), String> {
        let mut i = 0;
        let mut restart = Vec::new();
        while let Some(sup) = self.sups.get_mut(i) {
            match sup.process.try_wait() {
                Ok(Some(status)) => {
                    let (record, ending, slot, priority) =
                        (sup.record, sup.ending, sup.slot, sup.priority);
                    self.sups.remove(i);
                    self.set_state(record, SupState::Dead);
                    if !ending {
                        if let Some(r) = self.records.get_mut(record) {
                            r.unexpected_exit = Some(status.to_string());
                        }
                        restart.push((slot, priority));
                    }
                }
                _ => i = i.saturating_add(1),
            }
        }
        for (slot, priority) in restart {
            if !self.sups.iter().any(|s| s.slot == slot) {
                self.spawn(slot, priority, None)?;
            }
        }
        Ok(())
    }

    /// Waits `d`, reaping and reporting progress.
    fn idle(&mut self, d: Duration) -> Result<(), String> {
        let until = self.now().saturating_add(ns(d));
        loop {
            self.reap()?;
            self.status();
            let now = self.now();
            if now >= until {
                return Ok(());
            }
            std::thread::sleep(Duration::from_nanos(
                until.saturating_sub(now).min(10_000_000),
            ));
        }
    }

    fn status(&mut self) {
        let now = self.now();
        if now.saturating_sub(self.last_status) < 1_000_000_000 {
            return;
        }
        self.last_status = now;
        let ballot = lock(&self.inbox)
            .latest
            .values()
            .map(|r| r.ballot)
            .max()
            .unwrap_or(0);
        let status = Status {
            elapsed: now.saturating_sub(self.t0) / 1_000_000_000,
            total: self.options.seconds,
            faults: u64::try_from(self.faults.len()).unwrap_or(u64::MAX),
            ballot,
        };
        (self.progress)(status);
    }

    /// The supervisor whose child reported the highest ballot within the last 30 ms, with
    /// that child's process group.
    fn leader(&self) -> Option<(usize, i32)> {
        self.leader_child().map(|(i, pgid, _)| (i, pgid))
    }

    /// [`leader`](Self::leader), and the child's pid.
    fn leader_child(&self) -> Option<(usize, i32, i32)> {
        let now = self.now();
        let inbox = lock(&self.inbox);
        let best = inbox
            .latest
            .values()
            .filter(|r| now.saturating_sub(r.sent_ns) < 30_000_000)
            .max_by_key(|r| r.ballot)?;
        let index = self
            .sups
            .iter()
            .position(|s| s.slot == best.slot && s.incarnation == best.incarnation)?;
        Some((index, best.pgid, best.pid))
    }

    /// Waits until a running supervisor's child leads (at most the recovery bound and 3 s;
    /// on FoundationDB, also until the probe commits again, at most 20 s more).
    fn settle(&mut self) -> Result<(), String> {
        let extra = if self.fdb.is_some() {
            CLUSTER_SETTLE
        } else {
            Duration::ZERO
        };
        let deadline = self
            .now()
            .saturating_add(ns(self.settings.recovery_bound()))
            .saturating_add(3_000_000_000)
            .saturating_add(ns(extra));
        while self.now() < deadline {
            if let Some((i, _)) = self.leader() {
                let now = self.now();
                let probe_ok = self
                    .fdb
                    .as_ref()
                    .and_then(|f| f.probe.as_ref())
                    .is_none_or(|p| {
                        p.last_commit()
                            .is_some_and(|t| now.saturating_sub(t) < 500_000_000)
                    });
                if probe_ok && self.sups.get(i).is_some_and(|s| !s.paused && !s.ending) {
                    return Ok(());
                }
            }
            self.idle(Duration::from_millis(10))?;
        }
        Ok(())
    }

    /// Runs `cmd` (an `fdbcli`) to its end, at most `patience`, reaping and reporting
    /// progress meanwhile; its standard output.
    fn run_cli(&mut self, mut cmd: Command, patience: Duration) -> Result<String, String> {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("fdbcli: {e}"))?;
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let deadline = self.now().saturating_add(ns(patience));
        loop {
            if let Ok(out) = rx.try_recv() {
                return Ok(out
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default());
            }
            if self.now() >= deadline {
                let _ = kill(pid, Signal::SIGKILL);
            }
            self.idle(Duration::from_millis(10))?;
        }
    }

    /// The cluster's status, if it answers within 10 s.
    fn cluster_status(&mut self) -> Result<Option<ClusterStatus>, String> {
        let Some(cmd) = self
            .fdb
            .as_ref()
            .and_then(|f| f.cluster.as_ref())
            .map(|c| c.cli_command("status json", Duration::from_secs(10)))
        else {
            return Ok(None);
        };
        let out = self.run_cli(cmd, Duration::from_secs(15))?;
        Ok(ClusterStatus::parse(&out))
    }

    fn cluster(&mut self) -> Result<&mut Cluster, String> {
        self.fdb
            .as_mut()
            .and_then(|f| f.cluster.as_mut())
            .ok_or_else(|| "no cluster of the harness's own".to_owned())
    }

    /// Injects a fault of the cluster.
    fn inject_cluster(&mut self, kind: FaultKind) -> Result<(), String> {
        let ports: Vec<u16> = self.cluster()?.processes.iter().map(|p| p.port).collect();
        let coordinators = self.cluster()?.coordinators();
        let pick = |rng: &mut ChaCha8Rng, from: &[u16]| {
            from.get(rng.random_range(0..from.len().max(1))).copied()
        };
        match kind {
            FaultKind::FdbKill9 | FaultKind::FdbKill9Master | FaultKind::FdbCoordinators => {
                let (port, what) = match kind {
                    FaultKind::FdbKill9Master => {
                        let master = self.cluster_status()?.and_then(|s| s.holder_of("master"));
                        match master {
                            Some(p) => (Some(p), "master"),
                            None => (pick(&mut self.rng, &ports), "master unknown, random"),
                        }
                    }
                    FaultKind::FdbCoordinators => {
                        (pick(&mut self.rng, &coordinators), "coordinator 1 of 3")
                    }
                    _ => (pick(&mut self.rng, &ports), "random"),
                };
                let Some(port) = port else { return Ok(()) };
                let down = if kind == FaultKind::FdbCoordinators {
                    Duration::from_millis(self.rng.random_range(2000..5000))
                } else {
                    Duration::from_millis(self.rng.random_range(500..3000))
                };
                let start = self.now();
                self.cluster()?
                    .kill(port)
                    .map_err(|e| format!("kill fdbserver {port}: {e}"))?;
                self.idle(down)?;
                self.cluster()?
                    .restart(port)
                    .map_err(|e| format!("restart fdbserver {port}: {e}"))?;
                self.record_fault(
                    kind,
                    None,
                    start,
                    format!("port {port} ({what}) down {:.2}s", down.as_secs_f64()),
                );
            }
            FaultKind::FdbPause => {
                let Some(port) = pick(&mut self.rng, &ports) else {
                    return Ok(());
                };
                let d = Duration::from_millis(self.rng.random_range(500..3000));
                let start = self.now();
                self.cluster()?
                    .pause(port, true)
                    .map_err(|e| format!("SIGSTOP fdbserver {port}: {e}"))?;
                self.idle(d)?;
                self.cluster()?
                    .pause(port, false)
                    .map_err(|e| format!("SIGCONT fdbserver {port}: {e}"))?;
                self.record_fault(
                    kind,
                    None,
                    start,
                    format!("port {port} {:.2}s", d.as_secs_f64()),
                );
            }
            FaultKind::FdbRecovery => {
                let cluster = self.cluster()?;
                let command = cluster.next_recovery_command();
                let cmd = cluster.cli_command(&command, Duration::from_secs(20));
                let start = self.now();
                let out = self.run_cli(cmd, Duration::from_secs(30))?;
                let said = out
                    .lines()
                    .map(str::trim)
                    .rfind(|l| !l.is_empty())
                    .unwrap_or("no answer")
                    .to_owned();
                self.record_fault(kind, None, start, format!("{command}: {said}"));
            }
            _ => {}
        }
        Ok(())
    }

    /// A supervisor to hit: the leader's with probability `leader_p`, else any.
    fn target(&mut self, leader_p: f64) -> Option<usize> {
        if self.sups.is_empty() {
            return None;
        }
        if self.rng.random_bool(leader_p.clamp(0.0, 1.0)) {
            if let Some((i, _)) = self.leader() {
                return Some(i);
            }
        }
        Some(self.rng.random_range(0..self.sups.len()))
    }

    fn next_kind(&mut self) -> FaultKind {
        if self.round.is_empty() {
            let mut kinds = self.kinds.clone();
            kinds.shuffle(&mut self.rng);
            match self.options.plant {
                // The plant shows when a slow-clocked leader's renewals stop while it still
                // believes: start with it.
                Some(ChaosPlant::ClockBeyondRho) => {
                    kinds.retain(|k| *k != FaultKind::ClockRate);
                    kinds.insert(0, FaultKind::ClockRate);
                }
                // The plant shows a VM pause after which the child runs before its watchdog:
                // start with it.
                Some(ChaosPlant::UnfencedSink) => {
                    kinds.retain(|k| *k != FaultKind::VmPause);
                    kinds.insert(0, FaultKind::VmPause);
                }
                Some(ChaosPlant::UnknownAsCommitted) | None => {}
            }
            self.round.extend(kinds);
        }
        self.round.pop_front().unwrap_or(FaultKind::Kill9)
    }

    fn signal(&self, i: usize, signal: Signal) {
        if let Some(s) = self.sups.get(i) {
            let _ = kill(s.pid, signal);
        }
    }

    /// Signals supervisor `i` to end and waits (at most `patience`, then `SIGKILL`).
    fn end_sup(&mut self, i: usize, signal: Signal, patience: Duration) -> Result<(), String> {
        let Some(sup) = self.sups.get_mut(i) else {
            return Ok(());
        };
        sup.ending = true;
        let (pid, slot, incarnation) = (sup.pid, sup.slot, sup.incarnation);
        if sup.paused {
            let _ = kill(pid, Signal::SIGCONT);
            sup.paused = false;
        }
        let _ = kill(pid, signal);
        let deadline = self.now().saturating_add(ns(patience));
        loop {
            self.reap()?;
            if !self
                .sups
                .iter()
                .any(|s| s.slot == slot && s.incarnation == incarnation)
            {
                return Ok(());
            }
            if self.now() >= deadline {
                let _ = kill(pid, Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn record_fault(&mut self, kind: FaultKind, slot: Option<u32>, start: u64, detail: String) {
        let heal = self.now();
        self.faults.push(Fault {
            kind,
            slot,
            start,
            heal,
            detail,
        });
    }

    fn long_pause(&mut self) -> Duration {
        let lease = self.settings.lease.as_secs_f64();
        Duration::from_secs_f64(self.rng.random_range(1.2..2.0) * lease)
    }

    fn inject(&mut self, kind: FaultKind) -> Result<(), String> {
        if kind.is_cluster() {
            return self.inject_cluster(kind);
        }
        let start = self.now();
        match kind {
            FaultKind::Kill9 => {
                let Some(i) = self.target(0.7) else {
                    return Ok(());
                };
                let (slot, priority) = self.sups.get(i).map_or((0, 0), |s| (s.slot, s.priority));
                self.end_sup(i, Signal::SIGKILL, Duration::from_secs(2))?;
                self.record_fault(kind, Some(slot), start, String::new());
                let delay = Duration::from_millis(self.rng.random_range(200..800));
                self.idle(delay)?;
                self.spawn(slot, priority, None)?;
            }
            FaultKind::Pause => {
                let Some(i) = self.target(0.7) else {
                    return Ok(());
                };
                let d = self.long_pause();
                let (slot, incarnation, record) = self
                    .sups
                    .get(i)
                    .map_or((0, 0, 0), |s| (s.slot, s.incarnation, s.record));
                self.signal(i, Signal::SIGSTOP);
                self.set_pause(i, true, record);
                self.idle(d)?;
                self.signal(i, Signal::SIGCONT);
                self.set_pause(i, false, record);
                let heal = self.now();
                self.paused.push(Window {
                    slot,
                    incarnation,
                    from: start,
                    to: heal,
                });
                self.alone_paused.push(Window {
                    slot,
                    incarnation,
                    from: start,
                    to: heal.saturating_add(ns(self.settings.resume_allowance)),
                });
                self.record_fault(kind, Some(slot), start, format!("{:.2}s", d.as_secs_f64()));
            }
            FaultKind::VmPause => {
                let Some((i, pgid, child)) = self.leader_child() else {
                    return Ok(());
                };
                let d = self.long_pause();
                let (slot, incarnation, record) = self
                    .sups
                    .get(i)
                    .map_or((0, 0, 0), |s| (s.slot, s.incarnation, s.record));
                let group = Pid::from_raw(pgid);
                let _ = killpg(group, Signal::SIGSTOP);
                self.signal(i, Signal::SIGSTOP);
                self.set_pause(i, true, record);
                self.idle(d)?;
                if self.options.plant == Some(ChaosPlant::UnfencedSink) {
                    // The child first: its stale writes land before its watchdog can act.
                    let _ = kill(Pid::from_raw(child), Signal::SIGCONT);
                    self.idle(CHILD_FIRST)?;
                }
                self.signal(i, Signal::SIGCONT);
                let _ = killpg(group, Signal::SIGCONT);
                self.set_pause(i, false, record);
                let heal = self.now();
                let window = Window {
                    slot,
                    incarnation,
                    from: start,
                    to: heal,
                };
                self.paused.push(window);
                self.vm_paused.push(window);
                self.record_fault(kind, Some(slot), start, format!("{:.2}s", d.as_secs_f64()));
            }
            FaultKind::Restart => {
                let Some(i) = self.target(0.5) else {
                    return Ok(());
                };
                let (slot, priority) = self.sups.get(i).map_or((0, 0), |s| (s.slot, s.priority));
                self.end_sup(i, Signal::SIGTERM, Duration::from_secs(5))?;
                let delay = Duration::from_millis(self.rng.random_range(100..400));
                self.idle(delay)?;
                self.spawn(slot, priority, None)?;
                self.record_fault(kind, Some(slot), start, String::new());
            }
            FaultKind::Rolling => {
                let mut order: Vec<(i32, u32)> =
                    self.sups.iter().map(|s| (s.priority, s.slot)).collect();
                order.sort_unstable();
                order.dedup_by_key(|(_, slot)| *slot);
                for (_, slot) in order {
                    let priority = self.top_priority.saturating_add(1);
                    let old: Vec<u32> = self
                        .sups
                        .iter()
                        .filter(|s| s.slot == slot)
                        .map(|s| s.incarnation)
                        .collect();
                    self.spawn(slot, priority, None)?;
                    // Let it register and ask for the handover.
                    let wait = self
                        .settings
                        .heartbeat
                        .saturating_mul(2)
                        .saturating_add(Duration::from_millis(200));
                    self.idle(wait)?;
                    for incarnation in old {
                        if let Some(i) = self
                            .sups
                            .iter()
                            .position(|s| s.slot == slot && s.incarnation == incarnation)
                        {
                            self.end_sup(i, Signal::SIGTERM, Duration::from_secs(5))?;
                        }
                    }
                }
                self.record_fault(kind, None, start, String::new());
            }
            FaultKind::StoreOutage => {
                let d = self.long_pause();
                let held = StoreLock::acquire(&self.db, Duration::from_secs(2))
                    .map_err(|e| format!("store outage: cannot take SQLite's write lock: {e}"))?;
                let from = self.now();
                self.idle(d)?;
                drop(held);
                let to = self.now();
                self.outages.push((from, to));
                self.record_fault(kind, None, from, format!("{:.2}s", d.as_secs_f64()));
            }
            FaultKind::ClockRate => {
                let plant = self.options.plant == Some(ChaosPlant::ClockBeyondRho);
                let rho = f64::from(self.settings.rho_ppm) / 1e6;
                let rate = if plant {
                    // Far beyond ρ: a leader whose clock runs at a fifth of the true rate
                    // renews less often than followers wait (they take over from it while it
                    // believes for 4.5 s), and notices only at its next, slowed, poll.
                    PLANT_CLOCK_RATE
                } else {
                    let e = self.rng.random_range(0.25 * rho..=0.5 * rho);
                    if self.rng.random_bool(0.5) {
                        1.0 + e
                    } else {
                        1.0 - e
                    }
                };
                let Some(i) = self.target(0.5) else {
                    return Ok(());
                };
                let (slot, mut priority) =
                    self.sups.get(i).map_or((0, 0), |s| (s.slot, s.priority));
                if plant || self.rng.random_bool(0.5) {
                    priority = self.top_priority.saturating_add(1);
                }
                self.end_sup(i, Signal::SIGTERM, Duration::from_secs(5))?;
                self.spawn(slot, priority, Some(rate))?;
                self.record_fault(
                    kind,
                    Some(slot),
                    start,
                    format!("rate x{rate:.4} priority {priority}"),
                );
                if plant {
                    // Let the slow incarnation take the leadership over, and lead a while.
                    self.wait_for_leader_slot(slot, Duration::from_secs(4))?;
                    self.idle(Duration::from_secs(5))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn wait_for_leader_slot(&mut self, slot: u32, patience: Duration) -> Result<(), String> {
        let deadline = self.now().saturating_add(ns(patience));
        while self.now() < deadline {
            if let Some((i, _)) = self.leader() {
                if self.sups.get(i).is_some_and(|s| s.slot == slot) {
                    return Ok(());
                }
            }
            self.idle(Duration::from_millis(10))?;
        }
        Ok(())
    }

    fn set_pause(&mut self, i: usize, paused: bool, record: usize) {
        if let Some(s) = self.sups.get_mut(i) {
            s.paused = paused;
        }
        let state = if paused {
            SupState::Paused
        } else {
            SupState::Running
        };
        self.set_state(record, state);
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

    fn shutdown(&mut self) {
        for sup in &mut self.sups {
            if sup.paused {
                let _ = kill(sup.pid, Signal::SIGCONT);
                sup.paused = false;
            }
        }
        let pids: Vec<Pid> = self.sups.iter().map(|s| s.pid).collect();
        for sup in &mut self.sups {
            sup.ending = true;
        }
        for pid in &pids {
            let _ = kill(*pid, Signal::SIGTERM);
        }
        let deadline = self.now().saturating_add(5_000_000_000);
        while !self.sups.is_empty() && self.now() < deadline {
            let _ = self.reap();
            std::thread::sleep(Duration::from_millis(10));
        }
        for sup in &mut self.sups {
            let _ = sup.process.kill();
            let _ = sup.process.wait();
        }
        let records: Vec<usize> = self.sups.iter().map(|s| s.record).collect();
        for record in records {
            self.set_state(record, SupState::Dead);
        }
        self.sups.clear();
        if let Some(mut observer) = self.observer.take() {
            if let Ok(pid) = i32::try_from(observer.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
            let _ = observer.wait();
        }
        // Children still alive (none should be) have 200 ms to notice the socket is gone.
        std::thread::sleep(Duration::from_millis(200));
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(fdb) = self.fdb.as_mut() {
            if let Some(probe) = fdb.probe.take() {
                fdb.record.probe = probe.finish();
                fdb.record.stalls = stalls(&fdb.record.probe, PROBE_SPACING, STALL_MIN);
            }
            if let Some(mut cluster) = fdb.cluster.take() {
                // Kept: its trace files are read now, and go with the run's directory.
                cluster.stop(true);
                let t0 = fdb.realtime_t0;
                fdb.record.recoveries = cluster
                    .recoveries()
                    .into_iter()
                    .filter(|r| r.at >= t0)
                    .collect();
            }
        }
    }

    fn collect(&mut self, end: u64) -> Result<ChaosRun, String> {
        let reports = std::mem::take(&mut lock(&self.inbox).reports);
        let mut by_child: BTreeMap<(u32, u32, i32), ChildRun> = BTreeMap::new();
        let mut unclean = BTreeMap::new();
        for r in reports {
            if !r.clean_clock {
                unclean.insert(r.pid, ());
            }
            by_child
                .entry((r.slot, r.incarnation, r.pid))
                .or_insert_with(|| ChildRun {
                    slot: r.slot,
                    incarnation: r.incarnation,
                    pid: r.pid,
                    ballot: r.ballot,
                    times: Vec::new(),
                })
                .times
                .push(r.sent_ns);
        }
        let mut children: Vec<ChildRun> = by_child.into_values().collect();
        for c in &mut children {
            c.times.sort_unstable();
        }
        let sink_dir = self.dir.join("sink");
        let fenced_log = read_log(&log_path(&sink_dir, FENCED_SINK))
            .map_err(|e| format!("reading the sink: {e}"))?;
        let shadow_log = read_log(&log_path(&sink_dir, SHADOW_SINK))
            .map_err(|e| format!("reading the shadow sink: {e}"))?;
        let fdb = self.fdb.as_mut().map(|f| {
            let mut record = std::mem::take(&mut f.record);
            for inc in &self.records {
                let path = self
                    .dir
                    .join("logs")
                    .join(format!("c{}i{}.log", inc.slot, inc.incarnation));
                record
                    .errors
                    .add_log(&std::fs::read_to_string(path).unwrap_or_default());
            }
            record
        });
        Ok(ChaosRun {
            options: self.options.clone(),
            settings: self.settings,
            t0: self.t0,
            end,
            closed: self.now(),
            children,
            unclean_children: u64::try_from(unclean.len()).unwrap_or(u64::MAX),
            faults: std::mem::take(&mut self.faults),
            alone_paused: std::mem::take(&mut self.alone_paused),
            vm_paused: std::mem::take(&mut self.vm_paused),
            paused: std::mem::take(&mut self.paused),
            outages: std::mem::take(&mut self.outages),
            incarnations: std::mem::take(&mut self.records),
            observed: std::mem::take(&mut lock(&self.observed)),
            fenced_log,
            shadow_log,
            dir: self.dir.clone(),
            kinds: self.kinds.clone(),
            fdb,
        })
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
