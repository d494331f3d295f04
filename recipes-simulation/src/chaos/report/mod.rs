//! The checks' verdicts on one run and its figures: [`analyze`] judges a run into a report.

mod lines;

use std::collections::BTreeMap;
use std::time::Duration;

use super::ChaosPlant;
use super::checks::fencing::{SinkVerdict, check_sink};
use super::checks::overlap::{OverlapVerdict, check_overlaps};
use super::checks::progress::{Transitions, check_progress, classify, classify_shards};
use super::checks::recovery::{Recovery, RecoveryLimits, check_recovery};
use super::checks::spans::{ReportInterval, percentile, report_interval};
use super::clock::{ns, secs};
use super::fdb_log::FdbErrors;
use super::harness::{ChaosRun, FdbRecord, HealthRecovery};
use super::model::{ChildRun, FaultKind};

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
    /// Sharded mode: the shard count (every check was made per shard).
    pub shards: Option<u32>,
    /// True time at the start (for describing violations).
    pub t0: u64,
    /// Fault descriptions, for violation reports.
    pub fault_notes: Vec<String>,
    /// Each fault's (start, heal), true time.
    pub fault_spans: Vec<(u64, u64)>,
    /// On FoundationDB: errors, stalls, recoveries.
    pub fdb: Option<FdbSummary>,
    /// (h): each health fault, as the harness saw it.
    pub health: Vec<HealthRecovery>,
    /// (h)'s bound: from the first failed check to an eligible leader.
    pub health_bound: Duration,
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
    fn new(record: &FdbRecord, recoveries: &[Recovery], plant: Option<ChaosPlant>) -> Self {
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
    let no_stalls = Vec::new();
    let stalls = run.fdb.as_ref().map_or(&no_stalls, |f| &f.stalls);
    let recovery_bound = match run.options.shards {
        None => s.recovery_bound(),
        Some(_) => s.sharded_recovery_bound(),
    };
    let limits = RecoveryLimits {
        tolerance,
        bound: ns(recovery_bound),
        split_gap: split,
        until: run.end,
        stalls,
    };
    // Every check per lane: the single election, or each shard with its own children, sinks
    // and ballots.
    let mut overlaps = OverlapVerdict::default();
    let mut recoveries = Vec::new();
    let mut fenced = SinkVerdict::default();
    let mut shadow = SinkVerdict::default();
    let mut idle_lanes = Vec::new();
    for lane in &run.sinks {
        let children: Vec<ChildRun> = run
            .children
            .iter()
            .filter(|c| c.shard == lane.shard)
            .cloned()
            .collect();
        overlaps.absorb(check_overlaps(
            &children,
            &run.alone_paused,
            &run.vm_paused,
            tolerance,
            vm_tolerance,
            split,
            run.end,
        ));
        let mut lane_recoveries = check_recovery(&run.faults, &children, &run.paused, &limits);
        for r in &mut lane_recoveries {
            r.shard = lane.shard;
        }
        recoveries.extend(lane_recoveries);
        let lane_fenced = check_sink(&lane.fenced);
        if let (Some(shard), 0) = (lane.shard, lane_fenced.accepted) {
            idle_lanes.push(format!("no fenced write accepted on shard {shard}"));
        }
        fenced.absorb(lane_fenced, lane.shard);
        shadow.absorb(check_sink(&lane.shadow), lane.shard);
    }
    let transitions = match run.options.shards {
        None => classify(&run.observed),
        Some(_) => classify_shards(&run.children, &run.faults, &run.paused),
    };
    let mut progress_missing = check_progress(&transitions, fenced.accepted);
    progress_missing.extend(idle_lanes);
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
        recovery_bound,
        plant: run.options.plant,
        shards: run.options.shards,
        t0: run.t0,
        fault_notes,
        fault_spans: run.faults.iter().map(|f| (f.start, f.heal)).collect(),
        fdb,
        health: run.health.clone(),
        health_bound: s.health_bound(),
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
        if self.health_failures() > 0 {
            failed.push("h");
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

    /// (h): health faults after which no eligible leader's child came within the bound from
    /// the first failed check (or whose check never ran).
    pub fn health_failures(&self) -> usize {
        let bound = ns(self.health_bound);
        self.health
            .iter()
            .filter(|h| h.recovery().is_none_or(|r| r > bound))
            .count()
    }

    /// (h): from the first failed check to an eligible leader, sorted (ns).
    pub fn health_recoveries(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .health
            .iter()
            .filter_map(HealthRecovery::recovery)
            .collect();
        v.sort_unstable();
        v
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
}
