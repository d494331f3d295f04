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

pub mod checks;
pub mod child;
pub mod clock;
pub mod cluster;
pub mod harness;
pub mod model;
pub mod proto;
pub mod sink;
pub mod store_lock;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use checks::{
    OverlapVerdict, Recovery, ReportInterval, SinkVerdict, Transitions, check_overlaps,
    check_progress, check_recovery, check_sink, classify, percentile, report_interval,
};
use clock::{millis, ns, secs};
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
}

impl ChaosPlant {
    /// Every plant.
    pub const ALL: [ChaosPlant; 2] = [ChaosPlant::ClockBeyondRho, ChaosPlant::UnfencedSink];

    /// The plant's name.
    pub fn name(self) -> &'static str {
        match self {
            ChaosPlant::ClockBeyondRho => "clock-beyond-rho",
            ChaosPlant::UnfencedSink => "unfenced-sink",
        }
    }

    /// The check it must make fail.
    pub fn target(self) -> char {
        match self {
            ChaosPlant::ClockBeyondRho => 'b',
            ChaosPlant::UnfencedSink => 'a',
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
    let recoveries = check_recovery(
        &run.faults,
        &run.children,
        &run.paused,
        tolerance,
        ns(s.recovery_bound()),
        split,
        run.end,
    );
    let transitions = classify(&run.observed);
    let fenced = check_sink(&run.fenced_log);
    let shadow = check_sink(&run.shadow_log);
    let progress_missing = check_progress(&transitions, fenced.accepted);
    let mut faults_by_kind: BTreeMap<FaultKind, u64> =
        FaultKind::ALL.iter().map(|k| (*k, 0)).collect();
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
        format!(
            "checks: a={} b={} c={} d={}",
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
                "VIOLATION (c) recovery: after {what}: {took} (bound {:.3}s)",
                self.recovery_bound.as_secs_f64()
            ));
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
        format!(
            "runs={} faults={total} ({}) overlaps={} vm_resume_overlaps={} sink_violations={} \
             sink_rejected_stale={} sink_cut_writes={} recovery_p50_over_lease={:.2} recovery_p99_over_lease={:.2} elections={} \
             handovers={} takeovers={} unfenced_out_of_order={} unfenced_lost={}",
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
