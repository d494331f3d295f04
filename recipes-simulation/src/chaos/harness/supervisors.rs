//! The supervisors and the observer: starting them, signalling, reaping and stopping them.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::chaos::ChaosPlant;
use crate::chaos::clock::{monotonic_ns, ns};
use crate::chaos::model::ObservedChange;
use crate::chaos::probe::{PROBE_SPACING, STALL_MIN, stalls};
use crate::chaos::proto::Report;

use super::{Incarnation, Sup, SupState, World, lock};

impl World<'_> {
    pub(super) fn start_receiver(&mut self, socket: UnixDatagram) {
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
                    inbox.latest.insert(
                        (report.slot, report.incarnation, report.pid),
                        report.clone(),
                    );
                    inbox.reports.push(report);
                }
            }
        }));
    }

    pub(super) fn fdb_leader(&self) -> Command {
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

    pub(super) fn log_file(&self, name: &str) -> Result<(Stdio, Stdio), String> {
        let path = self.dir.join("logs").join(format!("{name}.log"));
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((Stdio::from(file), Stdio::from(err)))
    }

    /// Creates the election with the harness's timings.
    pub(super) fn configure(&self) -> Result<(), String> {
        let s = &self.settings;
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let (out, err) = self.log_file("config")?;
        let mut cmd = self.fdb_leader();
        cmd.args(["config", "set"]);
        if let Some(m) = self.options.shards {
            // The sharded election, created with M shards and these settings before its
            // first member starts.
            cmd.args(["--sharded", "--shards", &m.to_string()]);
        }
        let status = cmd
            .arg("--lease")
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

    /// Starts `fdb-leader watch` on the single election (none in sharded mode: check (d) reads
    /// the shards' changes from the children's reports).
    pub(super) fn start_observer(&mut self) -> Result<(), String> {
        if self.options.shards.is_some() {
            return Ok(());
        }
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
    pub(super) fn spawn(
        &mut self,
        slot: u32,
        priority: i32,
        rate: Option<f64>,
    ) -> Result<(), String> {
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
            .arg(priority.to_string());
        if let Some(m) = self.options.shards {
            cmd.args(["--shards", &m.to_string()]);
        }
        if self.options.shards.is_none() && self.options.plant != Some(ChaosPlant::HealthUnchecked)
        {
            // The leader health check the health fault makes fail (check (h)): it fails while
            // the slot's `sick` file exists, and notes each failure in its `failed` file.
            let dir = self.dir.join("health");
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let sick = dir.join(format!("sick-{slot}"));
            let failed = dir.join(format!("failed-{slot}"));
            cmd.arg("--health-command")
                .arg(format!(
                    "test ! -e '{}' || {{ touch '{}'; exit 1; }}",
                    sick.display(),
                    failed.display()
                ))
                .arg("--health-interval")
                .arg(format!("{}ms", self.settings.health_interval.as_millis()))
                .arg("--health-timeout")
                .arg(format!("{}ms", self.settings.health_timeout.as_millis()))
                .arg("--health-fall")
                .arg(self.settings.health_fall.to_string())
                .args(["--health-rise", "1"]);
        }
        cmd.arg("--grace")
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

    pub(super) fn set_state(&mut self, record: usize, state: SupState) {
        let now = self.now();
        if let Some(r) = self.records.get_mut(record) {
            r.states.push((now, state));
        }
    }

    /// Reaps exited supervisors; restarts slots whose supervisor exited unasked.
    pub(super) fn reap(&mut self) -> Result<(), String> {
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

    pub(super) fn signal(&self, i: usize, signal: Signal) {
        if let Some(s) = self.sups.get(i) {
            let _ = kill(s.pid, signal);
        }
    }

    /// Signals supervisor `i` to end and waits (at most `patience`, then `SIGKILL`).
    pub(super) fn end_sup(
        &mut self,
        i: usize,
        signal: Signal,
        patience: Duration,
    ) -> Result<(), String> {
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

    pub(super) fn set_pause(&mut self, i: usize, paused: bool, record: usize) {
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

    pub(super) fn shutdown(&mut self) {
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
}
