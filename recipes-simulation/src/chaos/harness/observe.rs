//! Watching between faults: idling, the status line, the leader, settling, command-line calls.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::chaos::clock::ns;
use crate::chaos::proto::Report;

use super::{CLUSTER_SETTLE, Status, World, lock};

impl World<'_> {
    /// Waits `d`, reaping and reporting progress.
    pub(super) fn idle(&mut self, d: Duration) -> Result<(), String> {
        let until = self.now().saturating_add(ns(d));
        loop {
            if self.interrupted.load(Ordering::Relaxed) {
                return Err(
                    "interrupted (SIGTERM, SIGINT or SIGHUP): the supervisors and \
                            their children are stopped, nothing is checked"
                        .to_owned(),
                );
            }
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

    pub(super) fn status(&mut self) {
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

    /// The children that reported within the last 30 ms (alive now).
    fn live_children(&self) -> Vec<Report> {
        let now = self.now();
        lock(&self.inbox)
            .latest
            .values()
            .filter(|r| now.saturating_sub(r.sent_ns) < 30_000_000)
            .cloned()
            .collect()
    }

    /// The supervisor a fault aimed at "the leader" hits: under a single election, the one
    /// whose child reported the highest ballot within the last 30 ms; under a sharded one, the
    /// one with the most children alive (it owns the most shards).
    pub(super) fn leader(&self) -> Option<usize> {
        self.leader_children().map(|(i, _)| i)
    }

    /// [`leader`](Self::leader), and its live children's (process group, pid): the one child
    /// of the leadership, or every child of the member.
    pub(super) fn leader_children(&self) -> Option<(usize, Vec<(i32, i32)>)> {
        let live = self.live_children();
        let index = |slot: u32, incarnation: u32| {
            self.sups
                .iter()
                .position(|s| s.slot == slot && s.incarnation == incarnation)
        };
        if self.options.shards.is_none() {
            let best = live.iter().max_by_key(|r| r.ballot)?;
            return Some((
                index(best.slot, best.incarnation)?,
                vec![(best.pgid, best.pid)],
            ));
        }
        let mut by_sup: BTreeMap<usize, Vec<(i32, i32)>> = BTreeMap::new();
        for r in &live {
            if let Some(i) = index(r.slot, r.incarnation) {
                by_sup.entry(i).or_default().push((r.pgid, r.pid));
            }
        }
        by_sup
            .into_iter()
            .max_by_key(|(i, c)| (c.len(), std::cmp::Reverse(*i)))
    }

    /// Whether the run has what it needs between faults: under a single election, a leader
    /// whose supervisor runs; under a sharded one, a live child for every shard, each of a
    /// running supervisor.
    fn settled(&self) -> bool {
        let running = |slot: u32, incarnation: u32| {
            self.sups
                .iter()
                .any(|s| s.slot == slot && s.incarnation == incarnation && !s.paused && !s.ending)
        };
        match self.options.shards {
            None => self
                .leader()
                .and_then(|i| self.sups.get(i))
                .is_some_and(|s| !s.paused && !s.ending),
            Some(m) => {
                let live = self.live_children();
                (0..m).all(|shard| {
                    live.iter()
                        .any(|r| r.shard == Some(shard) && running(r.slot, r.incarnation))
                })
            }
        }
    }

    /// Whether a child of `slot`'s supervisor leads (under a sharded election: any live child).
    fn slot_leads(&self, slot: u32) -> bool {
        match self.options.shards {
            None => self
                .leader()
                .and_then(|i| self.sups.get(i))
                .is_some_and(|s| s.slot == slot),
            Some(_) => self.live_children().iter().any(|r| r.slot == slot),
        }
    }

    /// Waits until the run is [`settled`](Self::settled) (at most the recovery bound and 3 s;
    /// on FoundationDB, also until the probe commits again, at most 20 s more).
    pub(super) fn settle(&mut self) -> Result<(), String> {
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
            if self.settled() {
                let now = self.now();
                let probe_ok = self
                    .fdb
                    .as_ref()
                    .and_then(|f| f.probe.as_ref())
                    .is_none_or(|p| {
                        p.last_commit()
                            .is_some_and(|t| now.saturating_sub(t) < 500_000_000)
                    });
                if probe_ok {
                    return Ok(());
                }
            }
            self.idle(Duration::from_millis(10))?;
        }
        Ok(())
    }

    /// Runs `cmd` (an `fdbcli`) to its end, at most `patience`, reaping and reporting
    /// progress meanwhile; its standard output.
    pub(super) fn run_cli(
        &mut self,
        mut cmd: Command,
        patience: Duration,
    ) -> Result<String, String> {
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

    pub(super) fn wait_for_leader_slot(
        &mut self,
        slot: u32,
        patience: Duration,
    ) -> Result<(), String> {
        let deadline = self.now().saturating_add(ns(patience));
        while self.now() < deadline {
            if self.slot_leads(slot) {
                return Ok(());
            }
            self.idle(Duration::from_millis(10))?;
        }
        Ok(())
    }
}
