//! The faults: the next kind and its target, injecting it, and the cluster's own faults.

use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::chaos::ChaosPlant;
use crate::chaos::clock::ns;
use crate::chaos::cluster::{Cluster, ClusterStatus};
use crate::chaos::model::{Fault, FaultKind, Window};
use crate::chaos::store_lock::StoreLock;

use super::{CHILD_FIRST, HealthRecovery, PLANT_CLOCK_RATE, World, lock};

impl World<'_> {
    /// The cluster's status, if it answers within 10 s.
    pub(super) fn cluster_status(&mut self) -> Result<Option<ClusterStatus>, String> {
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

    pub(super) fn cluster(&mut self) -> Result<&mut Cluster, String> {
        self.fdb
            .as_mut()
            .and_then(|f| f.cluster.as_mut())
            .ok_or_else(|| "no cluster of the harness's own".to_owned())
    }

    /// Injects a fault of the cluster.
    pub(super) fn inject_cluster(&mut self, kind: FaultKind) -> Result<(), String> {
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
    pub(super) fn target(&mut self, leader_p: f64) -> Option<usize> {
        if self.sups.is_empty() {
            return None;
        }
        if self.rng.random_bool(leader_p.clamp(0.0, 1.0)) {
            if let Some(i) = self.leader() {
                return Some(i);
            }
        }
        Some(self.rng.random_range(0..self.sups.len()))
    }

    pub(super) fn next_kind(&mut self) -> FaultKind {
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
                // The plant shows a leader whose check fails and who keeps leading: start
                // with it.
                Some(ChaosPlant::HealthUnchecked) => {
                    kinds.retain(|k| *k != FaultKind::Health);
                    kinds.insert(0, FaultKind::Health);
                }
                Some(ChaosPlant::UnknownAsCommitted) | None => {}
            }
            self.round.extend(kinds);
        }
        self.round.pop_front().unwrap_or(FaultKind::Kill9)
    }

    pub(super) fn record_fault(
        &mut self,
        kind: FaultKind,
        slot: Option<u32>,
        start: u64,
        detail: String,
    ) {
        let heal = self.now();
        self.faults.push(Fault {
            kind,
            slot,
            start,
            heal,
            detail,
        });
    }

    pub(super) fn long_pause(&mut self) -> Duration {
        let lease = self.settings.lease.as_secs_f64();
        Duration::from_secs_f64(self.rng.random_range(1.2..2.0) * lease)
    }

    pub(super) fn inject(&mut self, kind: FaultKind) -> Result<(), String> {
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
                // The leader and its children (one per owned shard under a sharded election),
                // each child's group with it: its watchdog.
                let Some((i, children)) = self.leader_children() else {
                    return Ok(());
                };
                let d = self.long_pause();
                let (slot, incarnation, record) = self
                    .sups
                    .get(i)
                    .map_or((0, 0, 0), |s| (s.slot, s.incarnation, s.record));
                for (pgid, _) in &children {
                    let _ = killpg(Pid::from_raw(*pgid), Signal::SIGSTOP);
                }
                self.signal(i, Signal::SIGSTOP);
                self.set_pause(i, true, record);
                if let Err(e) = self.idle(d) {
                    // Interrupted: the children's groups are resumed here (the shutdown
                    // resumes the supervisors only).
                    for (pgid, _) in &children {
                        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGCONT);
                    }
                    return Err(e);
                }
                if self.options.plant == Some(ChaosPlant::UnfencedSink) {
                    // The children first: their stale writes land before their watchdogs can
                    // act.
                    for (_, child) in &children {
                        let _ = kill(Pid::from_raw(*child), Signal::SIGCONT);
                    }
                    self.idle(CHILD_FIRST)?;
                }
                // The heal is the instant before the first SIGCONT of the pause: the child
                // may run at once, and its first report must not precede the heal (read after
                // the signals, it did by a millisecond under load, and check (b) took the
                // resumption for an overlap of another kind).
                let heal = self.now();
                self.signal(i, Signal::SIGCONT);
                for (pgid, _) in &children {
                    let _ = killpg(Pid::from_raw(*pgid), Signal::SIGCONT);
                }
                self.set_pause(i, false, record);
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
            FaultKind::Health => self.health_fault(start)?,
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
                if plant && self.options.shards.is_some() {
                    // Under a sharded election the slow member must own shards but not
                    // coordinate (a slow coordinator only waits longer before a takeover):
                    // the lowest priority keeps it out of the coordinator election's lead.
                    priority = self
                        .sups
                        .iter()
                        .map(|s| s.priority)
                        .min()
                        .unwrap_or(0)
                        .saturating_sub(1);
                } else if plant || self.rng.random_bool(0.5) {
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

    /// The health fault: the leader's health check fails from now on. The first failed check
    /// is seen by its `failed` file (polled every 5 ms); an eligible leader is a child of
    /// another slot reporting a newer ballot after it. Waits at most twice check (h)'s bound,
    /// then lets the check pass again.
    fn health_fault(&mut self, start: u64) -> Result<(), String> {
        let Some(i) = self.leader() else {
            return Ok(());
        };
        let Some((slot, ballot)) = self.sups.get(i).map(|s| s.slot).and_then(|slot| {
            lock(&self.inbox)
                .latest
                .iter()
                .filter(|(k, _)| k.0 == slot)
                .map(|(_, r)| r.ballot)
                .max()
                .map(|b| (slot, b))
        }) else {
            return Ok(());
        };
        let dir = self.dir.join("health");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let sick = dir.join(format!("sick-{slot}"));
        let failed = dir.join(format!("failed-{slot}"));
        let _ = std::fs::remove_file(&failed);
        std::fs::write(&sick, b"").map_err(|e| format!("{}: {e}", sick.display()))?;
        let deadline = start.saturating_add(ns(self.settings.health_bound().saturating_mul(2)));
        let mut seen = HealthRecovery {
            slot,
            start,
            first_failed: None,
            eligible_leader: None,
        };
        while self.now() < deadline {
            if seen.first_failed.is_none() && failed.exists() {
                seen.first_failed = Some(self.now());
            }
            if seen.first_failed.is_some() {
                let inbox = lock(&self.inbox);
                let newer = |r: &&crate::chaos::proto::Report| r.slot != slot && r.ballot > ballot;
                if inbox.latest.values().any(|r| newer(&r)) {
                    // Its child's first report.
                    let first = inbox.reports.iter().filter(newer).map(|r| r.sent_ns).min();
                    drop(inbox);
                    let floor = seen.first_failed.unwrap_or(0);
                    seen.eligible_leader = first.map(|at| at.max(floor));
                    break;
                }
            }
            self.idle(Duration::from_millis(5))?;
        }
        std::fs::remove_file(&sick).map_err(|e| format!("{}: {e}", sick.display()))?;
        let detail = match (seen.first_failed, seen.recovery()) {
            (None, _) => "the check never failed".to_owned(),
            (Some(_), None) => "no eligible leader".to_owned(),
            (Some(_), Some(r)) => format!(
                "first failed check to an eligible leader {:.3}s",
                Duration::from_nanos(r).as_secs_f64()
            ),
        };
        self.health.push(seen);
        self.record_fault(FaultKind::Health, Some(slot), start, detail);
        Ok(())
    }
}
