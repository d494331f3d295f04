//! The checks of each process: drawn, run on their intervals, answered into the library's own
//! [`Health`], and what they make of the process told to its candidate.

use fdb_leader_election::runner::CheckSettings;
use fdb_leader_election::runner::machine::{Event as In, Health};
use fdb_leader_election::{Eligibility, UnhealthyPolicy};
use rand::Rng;

use super::Checks;
use crate::events::{Answer, Event};
use crate::plants::Plant;
use crate::time::{MS, Nanos, dur, local, nanos};
use crate::world::World;
use crate::world::process::Status;

impl World {
    /// A new incarnation's checks: readiness two times in three, a leader health check two
    /// times in three, each every heartbeat to half a lease, a timeout of a quarter interval
    /// to an interval, fall and rise 1–3; the cool-down follows the stored lease three times
    /// in four, else half a lease to two; `hold` three times in four.
    pub(in crate::world) fn draw_checks(&mut self) -> Checks {
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
    pub(in crate::world) fn start_checks(&mut self, pid: usize, delay: Nanos) {
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
            p.checks.own = p.checks.health.eligibility(local(now));
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
        let current = p.checks.current(epoch, leader);
        let settings = p.checks.settings(leader);
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
        let current = p.checks.current(epoch, leader);
        if !current {
            return;
        }
        let started = if leader {
            p.checks.leader_started
        } else {
            p.checks.ready_started
        };
        let Some(settings) = p.checks.settings(leader) else {
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
    pub(in crate::world) fn leadership_began(&mut self, pid: usize, ballot: u64) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.checks.leading == Some(ballot) {
            return;
        }
        let now = p.clock.local_now();
        if p.checks.leading.is_some() {
            p.checks.health.leading(false, local(now));
        }
        p.checks.health.leading(true, local(now));
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
    pub(in crate::world) fn leadership_ended(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.checks.leading.take().is_none() {
            return;
        }
        let now = p.clock.local_now();
        p.checks.health.leading(false, local(now));
        p.checks.leader_epoch = p.checks.leader_epoch.saturating_add(1);
        self.recompute(pid);
    }

    /// The cool-down follows the stored lease (the machine's configuration changed).
    pub(in crate::world) fn checks_config(&mut self, pid: usize, lease: Nanos) {
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
        let now = local(p.clock.local_now());
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
}
