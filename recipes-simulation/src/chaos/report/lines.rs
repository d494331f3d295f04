//! The report in words: the checks line, what failed, the details, the summary line.

use super::ChaosReport;
use crate::chaos::checks::overlap::Overlap;
use crate::chaos::checks::spans::percentile;
use crate::chaos::clock::{millis, ns, secs};

impl ChaosReport {
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
        let health = if self.shards.is_none() {
            format!(" h={}", verdict(self.health_failures()))
        } else {
            String::new()
        };
        format!(
            "checks: a={} b={} c={} d={}{health}{unknown}",
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
        let bound = ns(self.health_bound);
        for h in &self.health {
            let why = match (h.first_failed, h.recovery()) {
                (None, _) => "its check never failed (did the supervisor run it?)".to_owned(),
                (Some(_), None) => "no eligible leader came".to_owned(),
                (Some(_), Some(r)) if r > bound => format!(
                    "an eligible leader came {:.3}s after the first failed check",
                    secs(r)
                ),
                _ => continue,
            };
            lines.push(format!(
                "VIOLATION (h) health: the leader c{}'s health check failed from {:.3}s: {why} \
                 (bound {:.3}s)",
                h.slot,
                secs(h.start.saturating_sub(self.t0)),
                self.health_bound.as_secs_f64()
            ));
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
                     build of fdb-leader with the cluster's API version: cargo build \
                     --features cli,fdb-7_4,embedded-fdb-include --bin fdb-leader for 7.4, \
                     fdb-7_3 for 7.3)"
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
                        .map(Overlap::len)
                        .max()
                        .unwrap_or(0)
                ),
                self.overlaps.after_vm_pause,
                millis(self.overlaps.after_vm_pause_longest)
            ),
            match self.shards {
                None => format!(
                    "recovery: {judged} faults judged, {} left no current child at their heal; \
                     max {:.3}s, bound lease+2 heartbeats+grace = {:.3}s",
                    disrupted.len(),
                    secs(disrupted.last().copied().unwrap_or(0)),
                    self.recovery_bound.as_secs_f64()
                ),
                Some(m) => format!(
                    "recovery, per shard: {judged} recoveries judged ({} faults x {m} shards), \
                     {} left their shard with no current child at the heal; max {:.3}s, bound \
                     2 leases+2 heartbeats+grace = {:.3}s (a member that also coordinated waits \
                     for the coordinator election's takeover first)",
                    self.fault_notes.len(),
                    disrupted.len(),
                    secs(disrupted.last().copied().unwrap_or(0)),
                    self.recovery_bound.as_secs_f64()
                ),
            },
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
        lines.extend(self.health_line());
        // The slowest recoveries, with their fault: what the bound is made of.
        let mut slow: Vec<&crate::chaos::checks::recovery::Recovery> = self
            .recoveries
            .iter()
            .filter(|r| r.took.is_some_and(|t| t > 0))
            .collect();
        slow.sort_by_key(|r| std::cmp::Reverse(r.took));
        let slowest: Vec<String> = slow
            .iter()
            .take(3)
            .map(|r| {
                format!(
                    "{:.3}s{} after {}",
                    secs(r.took.unwrap_or(0)),
                    r.shard.map(|s| format!(" (shard {s})")).unwrap_or_default(),
                    self.fault_notes.get(r.fault).map_or("?", String::as_str)
                )
            })
            .collect();
        if !slowest.is_empty() {
            lines.push(format!("slowest recoveries: {}", slowest.join("; ")));
        }
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

    /// (h) in words: the health faults and the time from the first failed check to an
    /// eligible leader's child (single elections only).
    fn health_line(&self) -> Option<String> {
        if self.shards.is_some() {
            return None;
        }
        let r = self.health_recoveries();
        Some(format!(
            "health: {} faults (the leader's check fails), {} with an eligible leader; first \
             failed check to an eligible leader's child p50={:.0}ms max={:.0}ms, bound {:.3}s",
            self.health.len(),
            r.len(),
            millis(percentile(&r, 50)),
            millis(r.last().copied().unwrap_or(0)),
            self.health_bound.as_secs_f64()
        ))
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
        let shards = self
            .shards
            .map(|m| format!(" shards={m}"))
            .unwrap_or_default();
        let health = if self.shards.is_none() {
            let r = self.health_recoveries();
            format!(
                " health_recovery_p50_ms={:.0} health_recovery_max_ms={:.0}",
                millis(percentile(&r, 50)),
                millis(r.last().copied().unwrap_or(0))
            )
        } else {
            String::new()
        };
        format!(
            "runs={} faults={total} ({}) overlaps={} vm_resume_overlaps={} sink_violations={} \
             sink_rejected_stale={} sink_cut_writes={} recovery_p50_over_lease={:.2} recovery_p99_over_lease={:.2} elections={} \
             handovers={} takeovers={} unfenced_out_of_order={} unfenced_lost={}{health}{shards}{fdb}",
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
