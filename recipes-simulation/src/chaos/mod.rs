//! A Jepsen-style chaos test of `fdb-leader run`: real processes, real clocks, real signals.
//!
//! K candidates run `fdb-leader run` on one SQLite file; their child is the `chaos` binary
//! itself in child mode ([`child`]), which does fenced work on a sink shared through a locked
//! file ([`sink`]) and reports "alive, ballot B" every few milliseconds over a Unix socket
//! ([`proto`]). The harness ([`harness`]) injects seeded faults — `kill -9`, `SIGSTOP` of a
//! supervisor alone or with its child (a VM pause), restarts, rolling restarts with higher
//! priorities, store outages (SQLite's write lock held, [`store_lock`]), clock-rate errors
//! with `libfaketime` — and timestamps everything in true time ([`clock`]). The checks
//! ([`checks`]) then judge the record ([`model`]): (a) fencing, (b) no overlap, (c) recovery,
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
pub mod sink;
pub mod store_lock;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use checks::{
    OverlapVerdict, Recovery, RecoveryLimits, ReportInterval, SinkVerdict, Transitions,
    check_overlaps, check_progress, check_recovery, check_sink, classify, percentile,
    report_interval,
};
use clock::{millis, ns, secs};
use fdb_log::FdbErrors;
use harness::ChaosRun;
use model::FaultKind;

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
    /// FoundationDB only, with a debug build of `fdb-leader`: the supervisors run with
    /// `FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED=1`, so the adapter reports a commit whose result
    /// is unknown as committed and the election adopts an acquisition or a renewal the store
    /// may not hold. An acquisition that never landed leaves its ballot to the next
    /// candidate too: two children of one ballot, which the sink accepts from both, and check
    /// (a) fires; a renewal that never landed keeps a leader believing after its followers
    /// took over, and check (b) fires. Either must.
    UnknownAsCommitted,
}

impl ChaosPlant {
    /// Every plant.
    pub const ALL: [ChaosPlant; 3] = [
        ChaosPlant::ClockBeyondRho,
        ChaosPlant::UnfencedSink,
        ChaosPlant::UnknownAsCommitted,
    ];

    /// The plant's name.
    pub fn name(self) -> &'static str {
        match self {
            ChaosPlant::ClockBeyondRho => "clock-beyond-rho",
            ChaosPlant::UnfencedSink => "unfenced-sink",
            ChaosPlant::UnknownAsCommitted => "unknown-as-committed",
        }
    }

    /// The checks it must make fail (at least one of them).
    pub fn target(self) -> &'static str {
        match self {
            ChaosPlant::ClockBeyondRho => "b",
            ChaosPlant::UnfencedSink => "a",
            ChaosPlant::UnknownAsCommitted => "ab",
        }
    }

    /// The store it needs: `any` or `fdb`.
    pub fn store(self) -> &'static str {
        match self {
            ChaosPlant::UnknownAsCommitted => "fdb",
            _ => "any",
        }
    }

    /// The environment variable it sets on every supervisor, if any (it needs a debug build).
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
    /// planted fault's switch, to show a release build ignores it.
    pub supervisor_env: Vec<(String, String)>,
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
}

/// The checks' verdicts on one run, and its figures.
#[derive(Clone, Debug)]
pub struct ChaosReport {
    /// Faults injected, by kind.
    pub faults_by_kind: BTreeMap<FaultKind, u64>,
    /// Children started (leaderships that ran the command).
    pub runs: u64,
    /// Supervisor incarnations started.
    pub incarnations: u64,
    /// The measured report interval.
    pub interval: ReportInterval,
    /// The overlap tolerance (the p99 report interval, at least the nominal one).
    pub tolerance: u64,
    /// (a) on the judged sink.
    pub fenced: SinkVerdict,
    /// The unfenced shadow sink, over the same writes.
    pub shadow: SinkVerdict,
    /// (b).
    pub overlaps: OverlapVerdict,
    /// (c), per fault.
    pub recoveries: Vec<Recovery>,
    /// (d).
    pub transitions: Transitions,
    /// (d): what did not happen.
    pub progress_missing: Vec<String>,
    /// Children that inherited the fake clock.
    pub unclean_children: u64,
    /// Supervisors that exited without being asked: `c{slot}i{incarnation}: status`.
    pub unexpected_exits: Vec<String>,
    /// The lease, for ratios.
    pub lease: Duration,
    /// The recovery bound.
    pub recovery_bound: Duration,
    /// The plant, if any.
    pub plant: Option<ChaosPlant>,
    /// True time at the start (for describing violations).
    pub t0: u64,
    /// Fault descriptions, for violation reports.
    pub fault_notes: Vec<String>,
    /// Each fault's (start, heal), true time.
    pub fault_spans: Vec<(u64, u64)>,
    /// On FoundationDB: errors, stalls, recoveries.
    pub fdb: Option<FdbSummary>,
}

/// What a run on FoundationDB adds to the report.
#[derive(Clone, Debug, Default)]
pub struct FdbSummary {
    /// The supervisors' transaction errors.
    pub errors: FdbErrors,
    /// The probe's successful commits.
    pub probe_commits: u64,
    /// The stalls' durations (ns), sorted.
    pub stalls: Vec<u64>,
    /// The recoveries' durations (ns, FoundationDB's own measure), sorted.
    pub recoveries: Vec<u64>,
    /// Whether the harness started the cluster and injected its faults.
    pub own_cluster: bool,
    /// The largest stall time allowed to one recovery.
    pub max_allowance: u64,
    /// The plant's switch, if the plant has one (then some supervisor must have warned).
    pub switch: Option<&'static str>,
}

impl FdbSummary {
    fn new(
        record: &harness::FdbRecord,
        recoveries: &[Recovery],
        plant: Option<ChaosPlant>,
    ) -> Self {
        let mut stalls: Vec<u64> = record
            .stalls
            .iter()
            .map(|(a, b)| b.saturating_sub(*a))
            .collect();
        stalls.sort_unstable();
        let mut traced: Vec<u64> = record
            .recoveries
            .iter()
            .map(|r| ns(Duration::from_secs_f64(r.duration.max(0.0))))
            .collect();
        traced.sort_unstable();
        FdbSummary {
            errors: record.errors.clone(),
            probe_commits: u64::try_from(record.probe.iter().filter(|c| c.ok).count())
                .unwrap_or(u64::MAX),
            stalls,
            recoveries: traced,
            own_cluster: record.own_cluster,
            max_allowance: recoveries.iter().map(|r| r.allowance).max().unwrap_or(0),
            switch: plant.and_then(ChaosPlant::switch),
        }
    }

    /// The plant's switch was asked for and no supervisor said it is on (a release build).
    fn switch_ignored(&self) -> bool {
        self.switch.is_some() && self.errors.plant_warnings == 0
    }

    /// The summary's FoundationDB part.
    fn summary(&self) -> String {
        format!(
            "{} planted={} cluster_recoveries={} cluster_recovery_p50_s={:.2} \
             cluster_recovery_max_s={:.2} stalls={} stall_p50_s={:.2} stall_max_s={:.2}",
            self.errors.summary(),
            self.errors.planted,
            self.recoveries.len(),
            secs(percentile(&self.recoveries, 50)),
            secs(self.recoveries.last().copied().unwrap_or(0)),
            self.stalls.len(),
            secs(percentile(&self.stalls, 50)),
            secs(self.stalls.last().copied().unwrap_or(0)),
        )
    }
}

/// Judges a run.
pub fn analyze(run: &ChaosRun) -> ChaosReport {
    let s = &run.settings;
    let split = ns(s.split_gap);
    let interval = report_interval(&run.children, split);
    let tolerance = interval.tolerance(ns(s.report_interval));
    // After a VM pause the child may run until its watchdog is scheduled: at most the
    // largest gap between two reports of a child seen in this run.
    let vm_tolerance = interval.max.max(tolerance);
    let overlaps = check_overlaps(
        &run.children,
        &run.alone_paused,
        &run.vm_paused,
        tolerance,
        vm_tolerance,
        split,
        run.end,
    );
    let no_stalls = Vec::new();
    let stalls = run.fdb.as_ref().map_or(&no_stalls, |f| &f.stalls);
    let recoveries = check_recovery(
        &run.faults,
        &run.children,
        &run.paused,
        &RecoveryLimits {
            tolerance,
            bound: ns(s.recovery_bound()),
            split_gap: split,
            until: run.end,
            stalls,
        },
    );
    let transitions = classify(&run.observed);
    let fenced = check_sink(&run.fenced_log);
    let shadow = check_sink(&run.shadow_log);
    let progress_missing = check_progress(&transitions, fenced.accepted);
    let mut faults_by_kind: BTreeMap<FaultKind, u64> = run.kinds.iter().map(|k| (*k, 0)).collect();
    for f in &run.faults {
        if let Some(n) = faults_by_kind.get_mut(&f.kind) {
            *n = n.saturating_add(1);
        }
    }
    let unexpected_exits = run
        .incarnations
        .iter()
        .filter_map(|i| {
            i.unexpected_exit
                .as_ref()
                .map(|e| format!("c{}i{}: {e}", i.slot, i.incarnation))
        })
        .collect();
    let fault_notes = run
        .faults
        .iter()
        .map(|f| {
            format!(
                "{} {}{} at {:.3}s healed {:.3}s",
                f.kind,
                f.slot.map(|s| format!("c{s} ")).unwrap_or_default(),
                f.detail,
                secs(f.start.saturating_sub(run.t0)),
                secs(f.heal.saturating_sub(run.t0))
            )
        })
        .collect();
    let fdb = run
        .fdb
        .as_ref()
        .map(|f| FdbSummary::new(f, &recoveries, run.options.plant));
    ChaosReport {
        faults_by_kind,
        runs: u64::try_from(run.children.len()).unwrap_or(u64::MAX),
        incarnations: u64::try_from(run.incarnations.len()).unwrap_or(u64::MAX),
        interval,
        tolerance,
        fenced,
        shadow,
        overlaps,
        recoveries,
        transitions,
        progress_missing,
        unclean_children: run.unclean_children,
        unexpected_exits,
        lease: s.lease,
        recovery_bound: s.recovery_bound(),
        plant: run.options.plant,
        t0: run.t0,
        fault_notes,
        fault_spans: run.faults.iter().map(|f| (f.start, f.heal)).collect(),
        fdb,
    }
}

impl ChaosReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.failed_checks().is_empty()
    }

    /// The checks that failed: `a`, `b`, `c`, `d`, and `clock` (a child on the fake clock).
    pub fn failed_checks(&self) -> Vec<&'static str> {
        let mut failed = Vec::new();
        if !self.fenced.violations.is_empty() {
            failed.push("a");
        }
        if !self.overlaps.violations.is_empty() {
            failed.push("b");
        }
        if self.recoveries.iter().any(|r| r.violated) {
            failed.push("c");
        }
        if !self.progress_missing.is_empty() {
            failed.push("d");
        }
        if self.unclean_children > 0 {
            failed.push("clock");
        }
        if let Some(fdb) = &self.fdb {
            if fdb.own_cluster && fdb.errors.unknown_commits() == 0 {
                failed.push("u");
            }
            if fdb.switch_ignored() {
                failed.push("setup");
            }
        }
        failed
    }

    /// Recoveries after faults that left no current child at their heal: how long each took.
    fn disrupted(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .recoveries
            .iter()
            .filter_map(|r| r.took)
            .filter(|t| *t > 0)
            .collect();
        v.sort_unstable();
        v
    }

    fn over_lease(&self, ns: u64) -> f64 {
        secs(ns) / self.lease.as_secs_f64()
    }

    /// `checks: a=ok b=FAIL(2) c=ok d=ok`.
    pub fn checks_line(&self) -> String {
        let verdict = |n: usize| {
            if n == 0 {
                "ok".to_owned()
            } else {
                format!("FAIL({n})")
            }
        };
        let recovery_failures = self.recoveries.iter().filter(|r| r.violated).count();
        let unknown = match &self.fdb {
            Some(fdb) if fdb.own_cluster => {
                if fdb.errors.unknown_commits() > 0 {
                    " u=ok".to_owned()
                } else {
                    " u=FAIL(no unknown commit)".to_owned()
                }
            }
            _ => String::new(),
        };
        format!(
            "checks: a={} b={} c={} d={}{unknown}",
            verdict(usize::try_from(self.fenced.violation_count).unwrap_or(usize::MAX)),
            verdict(self.overlaps.violations.len()),
            verdict(recovery_failures),
            verdict(self.progress_missing.len()),
        )
    }

    /// What each failed check found, in words.
    pub fn failure_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for v in &self.fenced.violations {
            lines.push(format!("VIOLATION (a) fencing: {v}"));
        }
        for o in self.overlaps.violations.iter().take(10) {
            let near: Vec<&str> = self
                .fault_spans
                .iter()
                .zip(&self.fault_notes)
                .filter(|((start, heal), _)| {
                    *start <= o.to && heal.saturating_add(ns(self.recovery_bound)) >= o.from
                })
                .map(|(_, note)| note.as_str())
                .collect();
            lines.push(format!(
                "VIOLATION (b) overlap: {}; faults around it: {}",
                o.describe(self.t0),
                if near.is_empty() {
                    "none".to_owned()
                } else {
                    near.join("; ")
                }
            ));
        }
        for r in self.recoveries.iter().filter(|r| r.violated).take(10) {
            let what = self.fault_notes.get(r.fault).cloned().unwrap_or_default();
            let took = r.took.map_or_else(
                || "no current child".to_owned(),
                |t| format!("{:.3}s", secs(t)),
            );
            lines.push(format!(
                "VIOLATION (c) recovery: after {what}: {took} (bound {:.3}s + the cluster's \
                 stall time {:.3}s)",
                self.recovery_bound.as_secs_f64(),
                secs(r.allowance)
            ));
        }
        if let Some(fdb) = &self.fdb {
            if fdb.own_cluster && fdb.errors.unknown_commits() == 0 {
                lines.push(
                    "VIOLATION (u) no commit with an unknown result: the cluster's faults \
                     never reached a supervisor's commit"
                        .to_owned(),
                );
            }
            if let Some(switch) = fdb.switch.filter(|_| fdb.switch_ignored()) {
                lines.push(format!(
                    "VIOLATION setup: no supervisor honoured {switch}=1 (it needs a debug \
                     build of fdb-leader: cargo build --features cli,fdb-7_3,\
                     embedded-fdb-include --bin fdb-leader)"
                ));
            }
        }
        for m in &self.progress_missing {
            lines.push(format!("VIOLATION (d) progress: {m}"));
        }
        if self.unclean_children > 0 {
            lines.push(format!(
                "VIOLATION setup: {} children inherited the fake clock",
                self.unclean_children
            ));
        }
        lines
    }

    /// The lines before the summary.
    pub fn detail_lines(&self) -> Vec<String> {
        let disrupted = self.disrupted();
        let judged = self.recoveries.iter().filter(|r| r.judged).count();
        let mut lines = vec![
            format!(
                "report_interval: p50={:.2}ms p99={:.2}ms max={:.2}ms samples={} -> overlap \
                 tolerance {:.2}ms",
                millis(self.interval.p50),
                millis(self.interval.p99),
                millis(self.interval.max),
                self.interval.samples,
                millis(self.tolerance)
            ),
            format!(
                "overlaps: {} ({} while a supervisor alone was paused: none excused, its \
                 watchdog holds the lease), longest {:.1}ms; counted apart: {} at the \
                 resumption of a VM pause (the child ran until its watchdog, continued with it, \
                 was scheduled), longest {:.1}ms",
                self.overlaps.violations.len(),
                self.overlaps.in_alone_pause,
                millis(
                    self.overlaps
                        .violations
                        .iter()
                        .map(checks::Overlap::len)
                        .max()
                        .unwrap_or(0)
                ),
                self.overlaps.after_vm_pause,
                millis(self.overlaps.after_vm_pause_longest)
            ),
            format!(
                "recovery: {judged} faults judged, {} left no current child at their heal; \
                 max {:.3}s, bound lease+2 heartbeats+grace = {:.3}s",
                disrupted.len(),
                secs(disrupted.last().copied().unwrap_or(0)),
                self.recovery_bound.as_secs_f64()
            ),
            format!(
                "fenced: writes={} rejected_stale={} out_of_order={} lost={} cut_writes={} | \
                 unfenced counterpart: writes={} out_of_order={} lost={}",
                self.fenced.accepted,
                self.fenced.rejected_stale,
                self.fenced.out_of_order,
                self.fenced.lost,
                self.fenced.cut_writes,
                self.shadow.accepted,
                self.shadow.out_of_order,
                self.shadow.lost
            ),
            format!("incarnations={} children={}", self.incarnations, self.runs),
        ];
        if let Some(fdb) = &self.fdb {
            let codes: Vec<String> = fdb
                .errors
                .by_code
                .iter()
                .map(|(code, n)| {
                    let in_commit = fdb.errors.in_commit.get(code).copied().unwrap_or(0);
                    format!("{code}: {n} ({in_commit} in a commit)")
                })
                .collect();
            lines.push(format!(
                "fdb errors the supervisors met: {}; commits with an unknown result: {}",
                if codes.is_empty() {
                    "none".to_owned()
                } else {
                    codes.join(", ")
                },
                fdb.errors.unknown_commits()
            ));
            lines.push(format!(
                "fdb cluster: {} recoveries in its trace files (p50 {:.3}s, max {:.3}s, from \
                 their start to accepting commits); probe: {} commits, {} stalls (p50 {:.3}s, \
                 max {:.3}s); largest stall time allowed to one recovery {:.3}s",
                fdb.recoveries.len(),
                secs(percentile(&fdb.recoveries, 50)),
                secs(fdb.recoveries.last().copied().unwrap_or(0)),
                fdb.probe_commits,
                fdb.stalls.len(),
                secs(percentile(&fdb.stalls, 50)),
                secs(fdb.stalls.last().copied().unwrap_or(0)),
                secs(fdb.max_allowance)
            ));
            lines.push(format!(
                "planted-fault switches: {} supervisor(s) warned one is on, {} use(s) logged",
                fdb.errors.plant_warnings, fdb.errors.planted
            ));
        }
        if !self.unexpected_exits.is_empty() {
            lines.push(format!(
                "unexpected supervisor exits: {}",
                self.unexpected_exits.join(", ")
            ));
        }
        lines.push(self.checks_line());
        lines
    }

    /// The summary line (printed last).
    pub fn summary(&self) -> String {
        let disrupted = self.disrupted();
        let total: u64 = self
            .faults_by_kind
            .values()
            .copied()
            .fold(0, u64::saturating_add);
        let kinds: Vec<String> = self
            .faults_by_kind
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let fdb = self
            .fdb
            .as_ref()
            .map(|f| format!(" {}", f.summary()))
            .unwrap_or_default();
        format!(
            "runs={} faults={total} ({}) overlaps={} vm_resume_overlaps={} sink_violations={} \
             sink_rejected_stale={} sink_cut_writes={} recovery_p50_over_lease={:.2} recovery_p99_over_lease={:.2} elections={} \
             handovers={} takeovers={} unfenced_out_of_order={} unfenced_lost={}{fdb}",
            self.runs,
            kinds.join(" "),
            self.overlaps.violations.len(),
            self.overlaps.after_vm_pause,
            self.fenced.violation_count,
            self.fenced.rejected_stale,
            self.fenced
                .cut_writes
                .saturating_add(self.shadow.cut_writes),
            self.over_lease(percentile(&disrupted, 50)),
            self.over_lease(percentile(&disrupted, 99)),
            self.transitions.elections,
            self.transitions.handovers,
            self.transitions.takeovers,
            self.shadow.out_of_order,
            self.shadow.lost,
        )
    }
}
