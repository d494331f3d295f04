//! Campaigns: many seeds, spread over worker threads, stopping at the first violation; and
//! the report the `sim` binary prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::params::Options;
use crate::stats::SeedStats;
use crate::time::SEC;
use crate::world::{SeedOutcome, run_seed};

/// A range of seeds to run.
#[derive(Clone, Debug)]
pub struct Campaign {
    /// The first seed.
    pub first_seed: u64,
    /// How many consecutive seeds.
    pub seeds: u64,
    /// Worker threads (each seed runs on one thread; seeds are independent).
    pub jobs: usize,
    /// How each seed runs.
    pub options: Options,
    /// Run every seed even after a violation (to measure how often a plant is caught).
    pub keep_going: bool,
}

/// What a campaign found.
#[derive(Debug)]
pub struct CampaignReport {
    /// Seeds run to completion or to a violation.
    pub seeds_run: u64,
    /// The failing seeds, lowest first (the campaign stops at the first one found; seeds
    /// already running on other threads finish).
    pub failures: Vec<SeedOutcome>,
    /// Sum of every seed's counters.
    pub totals: SeedStats,
    /// Wall-clock time.
    pub wall: Duration,
    /// The options the seeds ran with.
    pub options: Options,
}

/// Runs a campaign.
pub fn run_campaign(c: &Campaign) -> CampaignReport {
    run_campaign_with_progress(c, &|_| {})
}

/// Runs a campaign, calling `done` with the number of seeds finished after each seed.
pub fn run_campaign_with_progress(c: &Campaign, done: &(dyn Fn(u64) + Sync)) -> CampaignReport {
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let first_failure = AtomicU64::new(u64::MAX);
    let totals = Mutex::new((0u64, SeedStats::default()));
    let failures: Mutex<BTreeMap<u64, SeedOutcome>> = Mutex::new(BTreeMap::new());
    let jobs = c.jobs.max(1);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= c.seeds || (!c.keep_going && i > first_failure.load(Ordering::SeqCst)) {
                        break;
                    }
                    let seed = c.first_seed.wrapping_add(i);
                    let outcome = if c.options.sharded {
                        crate::sharded::run_seed(seed, &c.options)
                    } else {
                        run_seed(seed, &c.options)
                    };
                    {
                        let mut t = totals.lock().unwrap_or_else(PoisonError::into_inner);
                        t.0 = t.0.saturating_add(1);
                        t.1.add(&outcome.stats);
                        done(t.0);
                    }
                    if !outcome.passed() {
                        first_failure.fetch_min(i, Ordering::SeqCst);
                        let mut outcome = outcome;
                        if c.keep_going && i > first_failure.load(Ordering::SeqCst) {
                            outcome.tail.clear();
                            outcome.trace = None;
                        }
                        failures
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(i, outcome);
                    }
                }
            });
        }
    });
    let (seeds_run, totals) = totals.into_inner().unwrap_or_else(PoisonError::into_inner);
    CampaignReport {
        seeds_run,
        failures: failures
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .into_values()
            .collect(),
        totals,
        wall: started.elapsed(),
        options: c.options.clone(),
    }
}

impl CampaignReport {
    /// Whether every seed passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The command that reruns `seed` with these options.
    pub fn reproduce(&self, seed: u64) -> String {
        let mut cmd = format!(
            "cargo run --release -p fdb-leader-election-simulation --bin sim -- --seed {seed}"
        );
        if self.options.sharded {
            cmd.push_str(" --sharded");
        }
        if let Some(p) = self.options.shard_plant {
            let _ = write!(cmd, " --plant {p}");
        }
        if let Some(p) = self.options.plant {
            let _ = write!(cmd, " --plant {p}");
        }
        if let Some(o) = self.options.only_oracle {
            let _ = write!(cmd, " --oracle {}", o.name());
        }
        if self.options.sim_seconds != Options::default().sim_seconds {
            let _ = write!(cmd, " --sim-seconds {}", self.options.sim_seconds);
        }
        cmd
    }

    /// The failure report of the first failing seed: oracle, seed, trace tail, reproduction.
    pub fn failure_text(&self) -> Option<String> {
        let f = self.failures.first()?;
        let mut s = String::new();
        for v in &f.violations {
            let _ = writeln!(s, "VIOLATION seed={} {v}", f.seed);
        }
        let _ = writeln!(
            s,
            "--- trace tail of seed {} (last {} of {} lines, failing step at true time {}) ---",
            f.seed,
            f.tail.len(),
            f.trace_lines,
            crate::time::secs(f.at)
        );
        for line in &f.tail {
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(s, "--- end of trace tail ---");
        let _ = writeln!(s, "reproduce: {}", self.reproduce(f.seed));
        if self.failures.len() > 1 {
            // With --keep-going: every failing seed and the oracles that failed it.
            let all: Vec<String> = self
                .failures
                .iter()
                .map(|o| {
                    let ids: Vec<String> = o
                        .violations
                        .iter()
                        .map(|v| v.oracle.number().to_string())
                        .collect();
                    format!("{}:{}", o.seed, ids.join("+"))
                })
                .collect();
            let _ = writeln!(s, "failing seeds (seed:oracles): {}", all.join(" "));
        }
        Some(s)
    }

    /// The lines before the summary: faults by kind, fencing versus no fencing, effects.
    pub fn detail_lines(&self) -> Vec<String> {
        if self.options.sharded {
            return self.sharded_detail_lines();
        }
        let t = &self.totals;
        let faults: Vec<String> = t
            .faults
            .named()
            .iter()
            .map(|(name, n)| format!("{name}={n}"))
            .collect();
        vec![
            format!("faults_by_kind: {}", faults.join(" ")),
            format!(
                "effects: conflicts={} too_old={} unknown_results={} unavailable={} \
                 reregistrations={} resigns={} handover_requests={} vacancy_fills={} \
                 renewals={} priority_changes={} preemption_toggles={}",
                t.conflicts_seen,
                t.too_old_seen,
                t.unknown_seen,
                t.unavailable_seen,
                t.reregistrations,
                t.resigns,
                t.handover_requests,
                t.vacancy_fills,
                t.renewals,
                t.priority_changes,
                t.preemption_toggles
            ),
            format!(
                "workload: timeouts={} config_changes={} force_vacates={} operator_resigns={} \
                 operator_unregisters={} stale_queries={} composed_cycles={} \
                 abandoned_compositions={} claims={} refreshes={} guarded_tasks={} \
                 long_sections={} capped_late_replies={} withdrawn_in_drain={} \
                 stepped_down_anyway={}",
                t.timeouts,
                t.config_changes,
                t.force_vacates,
                t.operator_resigns,
                t.operator_unregisters,
                t.stale_queries,
                t.composed_cycles,
                t.abandoned_compositions,
                t.claims,
                t.refreshes,
                t.guarded_tasks,
                t.long_sections,
                t.capped_late_replies,
                t.withdrawn_in_drain,
                t.stepped_down_anyway
            ),
            t.health.line(),
            format!(
                "fenced_vs_unfenced: fenced_increments={} fenced_lost={} fenced_rejected_stale={} \
                 | unfenced_increments={} unfenced_lost={}",
                t.fenced_committed,
                t.fenced_lost,
                t.fenced_stale,
                t.shadow_committed,
                t.shadow_lost
            ),
        ]
    }

    /// The last line: `seeds=… violations=… elections=… handovers=… takeovers=… faults=…
    /// sim_seconds=… wall_s=…`.
    pub fn summary(&self) -> String {
        if self.options.sharded {
            return self.sharded_summary();
        }
        let t = &self.totals;
        let wall = self.wall.as_secs_f64();
        format!(
            "seeds={} violations={} elections={} handovers={} takeovers={} faults={} \
             sim_seconds={} wall_s={wall:.2}",
            self.seeds_run,
            self.failures.len(),
            t.elections,
            t.handovers,
            t.takeovers,
            t.faults.total(),
            t.sim_ns / SEC,
        )
    }

    fn faults_line(&self) -> String {
        let faults: Vec<String> = self
            .totals
            .faults
            .named()
            .iter()
            .map(|(name, n)| format!("{name}={n}"))
            .collect();
        format!("faults_by_kind: {}", faults.join(" "))
    }

    /// The sharded world's lines before the summary: the oracles checked, faults by kind,
    /// effects, workload, fenced work.
    fn sharded_detail_lines(&self) -> Vec<String> {
        let t = &self.totals;
        let s = &t.sharded;
        let oracles: Vec<String> = crate::oracles::OracleId::SHARDED
            .iter()
            .map(|o| format!("S{}={}", o.number().saturating_sub(10), o.name()))
            .collect();
        vec![
            format!("oracles: {}", oracles.join(" ")),
            self.faults_line(),
            format!(
                "effects: conflicts={} too_old={} unknown_results={} unavailable={} timeouts={}",
                t.conflicts_seen, t.too_old_seen, t.unknown_seen, t.unavailable_seen, t.timeouts
            ),
            format!(
                "workload: cycles={} coordinations={} leaves={} joins={} deploys={} \
                 operator_actions={} priority_changes={} composed_cycles={} \
                 refused_second_cycles={} guarded_tasks={} elections_off={} forgotten={} \
                 failover_checked={} failover_checked_off={}",
                s.cycles,
                s.coordinations,
                s.leaves,
                s.joins,
                s.deploys,
                s.operator_actions,
                t.priority_changes,
                t.composed_cycles,
                s.refused_second_cycles,
                t.guarded_tasks,
                s.elections_off,
                s.forgotten,
                s.failover_checked,
                s.failover_checked_off
            ),
            format!(
                "fenced_shard_work: fenced_writes={} fenced_lost={} fenced_rejected_stale={}",
                t.fenced_committed, t.fenced_lost, t.fenced_stale
            ),
        ]
    }

    /// The sharded world's last line: `sharded seeds=… violations=… acquisitions=…
    /// handovers=… takeovers=… faults=… sim_seconds=… wall_s=…`.
    fn sharded_summary(&self) -> String {
        let t = &self.totals;
        format!(
            "sharded seeds={} violations={} acquisitions={} handovers={} takeovers={} \
             forgotten={} fenced_writes={} faults={} sim_seconds={} wall_s={:.2}",
            self.seeds_run,
            self.failures.len(),
            t.sharded.acquisitions,
            t.sharded.handovers,
            t.sharded.takeovers,
            t.sharded.forgotten,
            t.fenced_committed,
            t.faults.total(),
            t.sim_ns / SEC,
            self.wall.as_secs_f64(),
        )
    }
}
