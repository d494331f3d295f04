//! Health as a fault (DESIGN §13.9): each process's readiness and leader health checks, run
//! the way the tokio runner's checks task runs them — each check on its interval (start to
//! start), cut at its timeout; the leader check only while leading, from one interval after
//! the leadership began; every answer, and every leadership's beginning and end, told to the
//! library's own [`Health`], whose eligibility is written into the candidate and wakes its
//! machine (`EligibilityChanged`); the cool-down follows the stored lease unless set — with
//! faults: readiness failing, flapping, slow checks (past their timeout, or just under it), a
//! leader whose work fails, and a dependency of every candidate down.
//!
//! What the checks make of a process ([`Checks::own`]) is the world's truth the oracles
//! judge by, whatever the candidate was told (a plant may tell it something else).

use fdb_leader_election::runner::CheckSettings;
use fdb_leader_election::runner::machine::{Event as In, Health};
use fdb_leader_election::{Eligibility, UnhealthyPolicy};
use rand::Rng;

use super::World;
use super::process::Status;
use crate::events::{Answer, Event};
use crate::plants::Plant;
use crate::time::{MS, Nanos, dur, nanos, secs};

/// A process's health checks and what they make of it.
#[derive(Debug)]
pub(crate) struct Checks {
    health: Health,
    readiness: Option<CheckSettings>,
    leader: Option<CheckSettings>,
    /// The cool-down follows the stored lease (the runner's default); else it is its own.
    follows_lease: bool,
    /// The cool-down now (nanoseconds on the process's clock).
    pub(crate) cool_down: Nanos,
    /// What the checks make of it: the world's truth.
    pub(crate) own: Eligibility,
    /// What the candidate was last told.
    told: Eligibility,
    /// It keeps leading when not eligible and nobody live is (`hold`), else `release`.
    pub(crate) holds: bool,
    /// The leadership the leader check judges (its ballot), if leading.
    leading: Option<u64>,
    /// Epochs of the readiness loop, the leader loop (one per leadership) and the wake-up.
    ready_epoch: u64,
    leader_epoch: u64,
    wake_epoch: u64,
    /// When (on the process's clock) the check in flight of each loop started.
    ready_started: Nanos,
    leader_started: Nanos,
}

impl Checks {
    /// Whether it runs any check.
    pub(crate) fn any(&self) -> bool {
        self.readiness.is_some() || self.leader.is_some()
    }

    /// Its cool-down may still change its eligibility (it is cooling down).
    pub(crate) fn cooling(&self, local_now: Nanos) -> bool {
        self.health
            .next_change_at(super::process::local(local_now))
            .is_some()
    }
}

/// The health faults on a node (true-time ends).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NodeHealth {
    /// Readiness fails until then.
    down_until: Nanos,
    /// Readiness answers at random until then.
    flap_until: Nanos,
    /// Checks answer slowly (past their timeout half the time) until then.
    slow_until: Nanos,
    /// The leader's work fails (its leader check) until then.
    work_until: Nanos,
}

/// How long a check's hysteresis may take to settle after a fault heals: `rise` (at most 3)
/// answers an interval (at most half a lease) apart, the first within a timeout (at most an
/// interval), and one more interval for the check in flight.
fn settle(lease: Nanos) -> Nanos {
    lease.saturating_mul(5) / 2
}

impl World {
    /// A new incarnation's checks: readiness two times in three, a leader health check two
    /// times in three, each every heartbeat to half a lease, a timeout of a quarter interval
    /// to an interval, fall and rise 1–3; the cool-down follows the stored lease three times
    /// in four, else half a lease to two; `hold` three times in four.
    pub(super) fn draw_checks(&mut self) -> Checks {
        let lease = self.params.lease;
        let hb = self.params.heartbeat;
        let draw = |w: &mut World| {
            let interval = w.between(hb, lease / 2);
            let timeout = w.between(interval / 4, interval);
            let fall = w.rng.random_range(1..=3u32);
            let rise = w.rng.random_range(1..=3u32);
            CheckSettings::new(dur(interval), dur(timeout), fall, rise).ok()
        };
        let readiness = if self.rng.random_ratio(2, 3) {
            draw(self)
        } else {
            None
        };
        let leader = if self.rng.random_ratio(2, 3) {
            draw(self)
        } else {
            None
        };
        let follows_lease = self.rng.random_ratio(3, 4);
        let cool_down = if follows_lease {
            lease
        } else {
            self.between(lease / 2, lease.saturating_mul(2))
        };
        let holds = self.rng.random_ratio(3, 4);
        let health = Health::new(readiness, leader, dur(cool_down));
        Checks {
            health,
            readiness,
            leader,
            follows_lease,
            cool_down,
            own: Eligibility::Eligible,
            told: Eligibility::Eligible,
            holds,
            leading: None,
            ready_epoch: 0,
            leader_epoch: 0,
            wake_epoch: 0,
            ready_started: 0,
            leader_started: 0,
        }
    }

    /// A new process's checks begin: its first registration carries what they make of it
    /// (not eligible until its readiness first answers), its policy is set, and its readiness
    /// loop starts with the process.
    pub(super) fn start_checks(&mut self, pid: usize, delay: Nanos) {
        let plant = self.plant;
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let release = !p.checks.holds || plant == Some(Plant::ReleaseUnderHold);
        p.candidate.set_unhealthy_policy(if release {
            UnhealthyPolicy::Release
        } else {
            UnhealthyPolicy::Hold
        });
        let now = p.clock.local_now();
        if p.checks.any() {
            p.checks.own = p.checks.health.eligibility(super::process::local(now));
        }
        self.tell(pid);
        if self
            .procs
            .get(pid)
            .is_some_and(|p| p.checks.readiness.is_some())
        {
            self.queue.push(
                self.now.saturating_add(delay),
                Event::Check {
                    pid,
                    epoch: 0,
                    leader: false,
                },
            );
        }
    }

    /// One run of a check starts: its answer comes after its latency, or fails at its timeout.
    pub(in crate::world) fn run_check(&mut self, pid: usize, epoch: u64, leader: bool) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        let current = if leader {
            p.checks.leading.is_some() && p.checks.leader_epoch == epoch
        } else {
            p.checks.ready_epoch == epoch
        };
        let settings = if leader {
            p.checks.leader
        } else {
            p.checks.readiness
        };
        let (Some(settings), true, false) = (settings, current, p.status == Status::Dead) else {
            return;
        };
        let node = self.nodes.get(p.node).map(|n| n.health).unwrap_or_default();
        let local_now = p.clock.local_now();
        let now = self.now;
        let failing = if leader {
            now < node.work_until
        } else {
            now < self.dependency_until
                || now < node.down_until
                || (now < node.flap_until && self.rng.random_bool(0.5))
        };
        let timeout = nanos(settings.timeout());
        let latency = if now < node.slow_until {
            self.between(timeout / 2, timeout.saturating_mul(2))
        } else {
            self.between(MS / 2, MS.saturating_mul(5)).min(timeout / 2)
        };
        let (after, answer) = if latency >= timeout {
            (timeout, Answer::TimedOut)
        } else if failing {
            (latency, Answer::Fail)
        } else {
            (latency, Answer::Pass)
        };
        if let Some(p) = self.procs.get_mut(pid) {
            if leader {
                p.checks.leader_started = local_now;
            } else {
                p.checks.ready_started = local_now;
            }
        }
        let d = self.local_delay(pid, after.max(1));
        self.queue.push(
            self.now.saturating_add(d),
            Event::Answer {
                pid,
                epoch,
                leader,
                answer,
            },
        );
    }

    /// A check's answer: the hysteresis takes it (a leader check only for the leadership it
    /// ran for), and the loop's next run starts an interval after this one started.
    pub(in crate::world) fn answer(&mut self, pid: usize, epoch: u64, leader: bool, a: Answer) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.status == Status::Dead {
            return;
        }
        let current = if leader {
            p.checks.leading.is_some() && p.checks.leader_epoch == epoch
        } else {
            p.checks.ready_epoch == epoch
        };
        if !current {
            return;
        }
        let (settings, started) = if leader {
            (p.checks.leader, p.checks.leader_started)
        } else {
            (p.checks.readiness, p.checks.ready_started)
        };
        let Some(settings) = settings else {
            return;
        };
        let result = match a {
            Answer::Pass => Ok(()),
            Answer::Fail => Err(if leader {
                "the work failed".to_owned()
            } else {
                "dependency down".to_owned()
            }),
            Answer::TimedOut => Err(format!(
                "no answer within {} ms",
                settings.timeout().as_millis().max(1)
            )),
        };
        if leader {
            p.checks.health.leader_answer(result);
        } else {
            p.checks.health.readiness_answer(result);
        }
        let h = &mut self.stats.health;
        h.checks = h.checks.saturating_add(1);
        if a != Answer::Pass {
            h.check_failures = h.check_failures.saturating_add(1);
        }
        if a == Answer::TimedOut {
            h.check_timeouts = h.check_timeouts.saturating_add(1);
        }
        let next = started
            .saturating_add(nanos(settings.interval()))
            .saturating_sub(p.clock.local_now());
        let d = self.local_delay(pid, next.max(1));
        self.queue.push(
            self.now.saturating_add(d),
            Event::Check { pid, epoch, leader },
        );
        self.recompute(pid);
    }

    /// A leadership began (the machine issued its guard): the leader check judges it, from
    /// one interval on.
    pub(super) fn leadership_began(&mut self, pid: usize, ballot: u64) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.checks.leading == Some(ballot) {
            return;
        }
        let now = p.clock.local_now();
        if p.checks.leading.is_some() {
            p.checks.health.leading(false, super::process::local(now));
        }
        p.checks.health.leading(true, super::process::local(now));
        p.checks.leading = Some(ballot);
        p.checks.leader_epoch = p.checks.leader_epoch.saturating_add(1);
        let epoch = p.checks.leader_epoch;
        if let Some(s) = p.checks.leader {
            let d = self.local_delay(pid, nanos(s.interval()));
            self.queue.push(
                self.now.saturating_add(d),
                Event::Check {
                    pid,
                    epoch,
                    leader: true,
                },
            );
        }
        self.recompute(pid);
        // A plant that hides a follower's readiness from its candidate tells the truth once it
        // leads.
        self.tell(pid);
    }

    /// The leadership ended (the machine ended it): a failing leader check starts the
    /// cool-down.
    pub(super) fn leadership_ended(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.checks.leading.take().is_none() {
            return;
        }
        let now = p.clock.local_now();
        p.checks.health.leading(false, super::process::local(now));
        p.checks.leader_epoch = p.checks.leader_epoch.saturating_add(1);
        self.recompute(pid);
    }

    /// The cool-down follows the stored lease (the machine's configuration changed).
    pub(super) fn checks_config(&mut self, pid: usize, lease: Nanos) {
        if let Some(p) = self.procs.get_mut(pid) {
            if p.checks.follows_lease {
                p.checks.cool_down = lease;
                p.checks.health.set_cool_down(dur(lease));
            }
        }
    }

    /// The eligibility may change with nothing else happening (a cool-down's end).
    pub(in crate::world) fn health_wake(&mut self, pid: usize, epoch: u64) {
        if self
            .procs
            .get(pid)
            .is_some_and(|p| p.checks.wake_epoch == epoch && p.status != Status::Dead)
        {
            self.recompute(pid);
        }
    }

    /// What the checks make of the process now; a change is told to the candidate, and the
    /// next change with nothing else happening (a cool-down's end) is woken for.
    fn recompute(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let now = super::process::local(p.clock.local_now());
        let e = p.checks.health.eligibility(now);
        p.checks.wake_epoch = p.checks.wake_epoch.saturating_add(1);
        let wake = p.checks.health.next_change_at(now).map(|at| {
            (
                nanos(at.since_origin()).saturating_sub(p.clock.local_now()),
                p.checks.wake_epoch,
            )
        });
        if e != p.checks.own {
            p.checks.own = e;
            self.stats.health.eligibility_changes =
                self.stats.health.eligibility_changes.saturating_add(1);
            self.tell(pid);
        }
        if let Some((local, epoch)) = wake {
            let d = self.local_delay(pid, local.max(1));
            self.queue
                .push(self.now.saturating_add(d), Event::HealthWake { pid, epoch });
        }
    }

    /// Tells the candidate what its checks make of it (the runner's checks task writes it
    /// into the candidate and wakes the runner), unless a plant tells it otherwise.
    fn tell(&mut self, pid: usize) {
        let plant = self.plant;
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let mut told = p.checks.own.clone();
        match plant {
            // The planted defect: a follower's failed readiness is not told (only a leader's).
            Some(Plant::FollowerIgnoresReadiness) if p.checks.leading.is_none() => {
                told = Eligibility::Eligible;
            }
            // The planted defect: once not eligible, a candidate is never told it is again.
            Some(Plant::RiseNeverTold) if !p.checks.told.is_eligible() => {
                told = p.checks.told.clone();
            }
            _ => {}
        }
        if told == p.checks.told {
            return;
        }
        if p.candidate
            .set_eligible(told.is_eligible(), told.reason().unwrap_or_default())
            .is_err()
        {
            return;
        }
        p.checks.told = told;
        let label = p.label.clone();
        let running = p.started && p.status != Status::Dead;
        let what = match p.checks.told.reason() {
            None => "eligible".to_owned(),
            Some(r) => format!("not eligible ({r})"),
        };
        self.log(format!("{label} {what}"));
        if running {
            self.feed(pid, In::EligibilityChanged);
        }
    }

    /// Whether `pid` may lead as the world knows it: its checks, and the operator's marks.
    pub(in crate::world) fn eligible_truth(&self, pid: usize) -> bool {
        self.procs.get(pid).is_some_and(|p| {
            p.checks.own.is_eligible() && !self.marks.contains(p.candidate.id().name())
        })
    }

    /// A health fault: readiness failing (3 in 10), flapping (2 in 10) or slow (3 in 20) on a
    /// node, the leader's work failing (a quarter), or a dependency of every candidate down
    /// (1 in 10), for one to four leases (a dependency one to three).
    pub(super) fn health_fault(&mut self) {
        let live = self.live_nodes();
        let lease = self.params.lease;
        let kind = self.rng.random_range(0..20u32);
        let leader_node = self.leader_node();
        let node = match (kind, leader_node) {
            (13..18, Some(n)) => Some(n),
            _ => self.pick(&live),
        };
        let Some(node) = node else {
            return;
        };
        let d = if kind >= 18 {
            self.leases(1_000, 3_000)
        } else {
            self.leases(1_000, 4_000)
        };
        let until = self.now.saturating_add(d);
        let h = &mut self.stats.health;
        let what = match kind {
            0..6 => {
                h.ready_down = h.ready_down.saturating_add(1);
                "readiness fails"
            }
            6..10 => {
                h.flaps = h.flaps.saturating_add(1);
                "readiness flaps"
            }
            10..13 => {
                h.slow_checks = h.slow_checks.saturating_add(1);
                "checks are slow"
            }
            13..18 => {
                h.work_failures = h.work_failures.saturating_add(1);
                "the work fails"
            }
            _ => {
                h.dependency_outages = h.dependency_outages.saturating_add(1);
                "a dependency of every candidate is down"
            }
        };
        if kind >= 18 {
            self.dependency_until = self.dependency_until.max(until);
        } else if let Some(n) = self.nodes.get_mut(node) {
            let slot = match kind {
                0..6 => &mut n.health.down_until,
                6..10 => &mut n.health.flap_until,
                10..13 => &mut n.health.slow_until,
                _ => &mut n.health.work_until,
            };
            *slot = (*slot).max(until);
        }
        // Until the checks' hysteresis has settled (the fault's effect on eligibility, bar a
        // cool-down: the liveness oracles' business).
        self.note_fault_end(until.saturating_add(settle(lease)));
        let on = if kind >= 18 {
            String::new()
        } else {
            format!(" on node {node}")
        };
        self.log(format!("FAULT health: {what}{on} until {}", secs(until)));
    }

    /// The nodes with a live process.
    fn live_nodes(&self) -> Vec<usize> {
        let mut nodes: Vec<usize> = self
            .procs
            .iter()
            .filter(|p| p.status != Status::Dead && !p.shutdown)
            .map(|p| p.node)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The node of the process that believes it leads, if any.
    pub(super) fn leader_node(&self) -> Option<usize> {
        (0..self.procs.len())
            .find(|&pid| self.acting_belief(pid).is_some())
            .and_then(|pid| self.procs.get(pid).map(|p| p.node))
    }
}
