//! Per-seed counters and their sum over a campaign.

use crate::faults::FaultCounts;

/// What one seed did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedStats {
    /// Events processed.
    pub events: u64,
    /// Simulated nanoseconds.
    pub sim_ns: u64,
    /// Acquisitions (new ballots).
    pub elections: u64,
    /// Acquisitions of a vacancy reserved for the acquirer (handover or resign).
    pub handovers: u64,
    /// Acquisitions of a lapsed lease (owned, or reserved for someone else).
    pub takeovers: u64,
    /// Acquisitions of an unreserved vacancy.
    pub vacancy_fills: u64,
    /// Renewals.
    pub renewals: u64,
    /// Handover requests written.
    pub handover_requests: u64,
    /// Resignations written.
    pub resigns: u64,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Fenced leader-work transactions that applied.
    pub fenced_committed: u64,
    /// Fenced increments lost (applied, yet missing from the final counter).
    pub fenced_lost: u64,
    /// Fenced leader work rejected by the fence (stale token).
    pub fenced_stale: u64,
    /// Unfenced shadow increments that applied.
    pub shadow_committed: u64,
    /// Shadow increments lost (applied, yet missing from the final counter).
    pub shadow_lost: u64,
    /// Conflicts reported to processes (real and injected).
    pub conflicts_seen: u64,
    /// `transaction_too_old` reported.
    pub too_old_seen: u64,
    /// Unknown commit results reported.
    pub unknown_seen: u64,
    /// Unavailability reported (partitions, outages, injected).
    pub unavailable_seen: u64,
    /// Candidates that found themselves evicted and registered again.
    pub reregistrations: u64,
    /// Priority changes.
    pub priority_changes: u64,
    /// Preemption toggles written by the operator.
    pub preemption_toggles: u64,
    /// Operations the executor timed out (maybe committed).
    pub timeouts: u64,
    /// Configuration writes by the operator (every field).
    pub config_changes: u64,
    /// Operator `force_vacate`s that committed.
    pub force_vacates: u64,
    /// Operator `request_resign`s that committed.
    pub operator_resigns: u64,
    /// Registrations the operator removed.
    pub operator_unregisters: u64,
    /// Queries made on a read version older than the leader's last renewal.
    pub stale_queries: u64,
    /// Cycles composed with other operations in their transaction.
    pub composed_cycles: u64,
    /// Composed transactions with another candidate's cycle, then abandoned.
    pub abandoned_compositions: u64,
    /// Cycles run as `try_claim_leadership` (with or without `heartbeat_candidate`).
    pub claims: u64,
    /// Cycles run as `refresh_lease`.
    pub refreshes: u64,
    /// Guarded tasks started under a leadership guard.
    pub guarded_tasks: u64,
    /// Guarded tasks whose synchronous section was long (a quarter heartbeat to two).
    pub long_sections: u64,
    /// Renewals that cut the lease below their transaction timeout (the belief
    /// capped inside the transaction) and whose reply came late.
    pub capped_late_replies: u64,
    /// Leaders whose closing handover request was withdrawn during the drain (the requester
    /// left, or was removed), which then stepped down anyway.
    pub withdrawn_in_drain: u64,
    /// `SteppingDownAnyway`: a leader with a closed guard and nothing left to end it resigned
    /// anyway (a withdrawn request, or a failed resignation).
    pub stepped_down_anyway: u64,
    /// The sharded world's own counters (`sim --sharded`; zero otherwise).
    pub sharded: ShardStats,
    /// Health, eligibility and versions (both worlds).
    pub health: HealthStats,
}

/// Health as a fault, operator marks, directed resigns, versions (DESIGN §13.9, §14.5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthStats {
    /// Health check answers the checks' hysteresis took.
    pub checks: u64,
    /// Of those, failures (a timeout included).
    pub check_failures: u64,
    /// Of those, checks that did not answer within their timeout.
    pub check_timeouts: u64,
    /// Changes of a process's own eligibility (what its checks make of it).
    pub eligibility_changes: u64,
    /// Health faults: readiness failing, flapping, slow checks, a leader's work failing, a
    /// dependency of every candidate down.
    pub ready_down: u64,
    /// Readiness flapping.
    pub flaps: u64,
    /// Slow checks.
    pub slow_checks: u64,
    /// A leader's work failing (its leader health check fails).
    pub work_failures: u64,
    /// Every candidate's readiness failing at once.
    pub dependency_outages: u64,
    /// Operator marks committed (a name excluded, or every name).
    pub marks: u64,
    /// Directed resigns (`request_resign_to`) committed.
    pub directed: u64,
    /// Directed resigns refused when asked (no live eligible candidate of the name).
    pub directed_refused: u64,
    /// Directed resigns the leader refused and cleared (its target not live and eligible).
    pub directed_refused_by_leader: u64,
    /// Step-downs for ineligibility committed.
    pub stepped_down_ineligible: u64,
    /// Of those, unreserved (`release` with nobody eligible).
    pub released: u64,
    /// Leaders that began holding while not eligible (nobody eligible, `hold`).
    pub holding: u64,
    /// Version policy changes the operator committed.
    pub policy_changes: u64,
    /// Rolling upgrades (every node to a newer version) begun.
    pub upgrades: u64,
    /// Rolling rollbacks (every node to an older version) begun.
    pub rollbacks: u64,
    /// Old incarnations of a deploy that left by crash.
    pub deploy_crashes: u64,
    /// Quiet-phase probes run (the reservation probe; the sharded world's health probe).
    pub probes: u64,
    /// Vacancies of their leader's that oracle 21 saw filled once armed.
    pub reservations_checked: u64,
}

impl HealthStats {
    fn add(&mut self, o: &HealthStats) {
        let pairs: [(&mut u64, u64); 22] = [
            (&mut self.checks, o.checks),
            (&mut self.check_failures, o.check_failures),
            (&mut self.check_timeouts, o.check_timeouts),
            (&mut self.eligibility_changes, o.eligibility_changes),
            (&mut self.ready_down, o.ready_down),
            (&mut self.flaps, o.flaps),
            (&mut self.slow_checks, o.slow_checks),
            (&mut self.work_failures, o.work_failures),
            (&mut self.dependency_outages, o.dependency_outages),
            (&mut self.marks, o.marks),
            (&mut self.directed, o.directed),
            (&mut self.directed_refused, o.directed_refused),
            (
                &mut self.directed_refused_by_leader,
                o.directed_refused_by_leader,
            ),
            (&mut self.stepped_down_ineligible, o.stepped_down_ineligible),
            (&mut self.released, o.released),
            (&mut self.holding, o.holding),
            (&mut self.policy_changes, o.policy_changes),
            (&mut self.upgrades, o.upgrades),
            (&mut self.rollbacks, o.rollbacks),
            (&mut self.deploy_crashes, o.deploy_crashes),
            (&mut self.probes, o.probes),
            (&mut self.reservations_checked, o.reservations_checked),
        ];
        for (mine, theirs) in pairs {
            *mine = mine.saturating_add(theirs);
        }
    }

    /// The `health:` line of a report.
    pub fn line(&self) -> String {
        format!(
            "health: checks={} check_failures={} check_timeouts={} eligibility_changes={} \
             ready_down={} flaps={} slow_checks={} work_failures={} dependency_outages={} \
             marks={} directed={} directed_refused={} directed_refused_by_leader={} \
             stepped_down_ineligible={} released={} holding={} policy_changes={} upgrades={} \
             rollbacks={} deploy_crashes={} probes={} reservations_checked={}",
            self.checks,
            self.check_failures,
            self.check_timeouts,
            self.eligibility_changes,
            self.ready_down,
            self.flaps,
            self.slow_checks,
            self.work_failures,
            self.dependency_outages,
            self.marks,
            self.directed,
            self.directed_refused,
            self.directed_refused_by_leader,
            self.stepped_down_ineligible,
            self.released,
            self.holding,
            self.policy_changes,
            self.upgrades,
            self.rollbacks,
            self.deploy_crashes,
            self.probes,
            self.reservations_checked,
        )
    }
}

/// What a sharded seed did besides the shared counters (faults, effects, fenced work).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Member cycles that committed.
    pub cycles: u64,
    /// Shards acquired (a new ballot each).
    pub acquisitions: u64,
    /// Shards handed over by their owner (cooperative moves).
    pub handovers: u64,
    /// Members fenced out by the coordinator (epoch bumped: a takeover of their shards).
    pub takeovers: u64,
    /// Coordinator attempts that committed.
    pub coordinations: u64,
    /// Graceful leaves that committed.
    pub leaves: u64,
    /// Member incarnations started after the first ones (joins, restarts, deploys).
    pub joins: u64,
    /// Rolling deploys begun.
    pub deploys: u64,
    /// Operator moves, drains and freezes that committed.
    pub operator_actions: u64,
    /// Second member cycles in one transaction, refused as they must be.
    pub refused_second_cycles: u64,
    /// Operator writes that turned elections off (committed).
    pub elections_off: u64,
    /// Member records removed (forgotten members), as the oracles saw the commits.
    pub forgotten: u64,
    /// Fencings S9 timed against its failover bound (windows no coordinator fault excused).
    pub failover_checked: u64,
    /// Of those, fencings while the stored configuration disabled elections.
    pub failover_checked_off: u64,
}

impl ShardStats {
    fn add(&mut self, o: &ShardStats) {
        let pairs: [(&mut u64, u64); 14] = [
            (&mut self.cycles, o.cycles),
            (&mut self.acquisitions, o.acquisitions),
            (&mut self.handovers, o.handovers),
            (&mut self.takeovers, o.takeovers),
            (&mut self.coordinations, o.coordinations),
            (&mut self.leaves, o.leaves),
            (&mut self.joins, o.joins),
            (&mut self.deploys, o.deploys),
            (&mut self.operator_actions, o.operator_actions),
            (&mut self.refused_second_cycles, o.refused_second_cycles),
            (&mut self.elections_off, o.elections_off),
            (&mut self.forgotten, o.forgotten),
            (&mut self.failover_checked, o.failover_checked),
            (&mut self.failover_checked_off, o.failover_checked_off),
        ];
        for (mine, theirs) in pairs {
            *mine = mine.saturating_add(theirs);
        }
    }
}

impl SeedStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &SeedStats) {
        let pairs: [(&mut u64, u64); 36] = [
            (&mut self.events, o.events),
            (&mut self.sim_ns, o.sim_ns),
            (&mut self.elections, o.elections),
            (&mut self.handovers, o.handovers),
            (&mut self.takeovers, o.takeovers),
            (&mut self.vacancy_fills, o.vacancy_fills),
            (&mut self.renewals, o.renewals),
            (&mut self.handover_requests, o.handover_requests),
            (&mut self.resigns, o.resigns),
            (&mut self.fenced_committed, o.fenced_committed),
            (&mut self.fenced_lost, o.fenced_lost),
            (&mut self.fenced_stale, o.fenced_stale),
            (&mut self.shadow_committed, o.shadow_committed),
            (&mut self.shadow_lost, o.shadow_lost),
            (&mut self.conflicts_seen, o.conflicts_seen),
            (&mut self.too_old_seen, o.too_old_seen),
            (&mut self.unknown_seen, o.unknown_seen),
            (&mut self.unavailable_seen, o.unavailable_seen),
            (&mut self.reregistrations, o.reregistrations),
            (&mut self.priority_changes, o.priority_changes),
            (&mut self.preemption_toggles, o.preemption_toggles),
            (&mut self.timeouts, o.timeouts),
            (&mut self.config_changes, o.config_changes),
            (&mut self.force_vacates, o.force_vacates),
            (&mut self.operator_resigns, o.operator_resigns),
            (&mut self.operator_unregisters, o.operator_unregisters),
            (&mut self.stale_queries, o.stale_queries),
            (&mut self.composed_cycles, o.composed_cycles),
            (&mut self.abandoned_compositions, o.abandoned_compositions),
            (&mut self.claims, o.claims),
            (&mut self.refreshes, o.refreshes),
            (&mut self.guarded_tasks, o.guarded_tasks),
            (&mut self.long_sections, o.long_sections),
            (&mut self.capped_late_replies, o.capped_late_replies),
            (&mut self.withdrawn_in_drain, o.withdrawn_in_drain),
            (&mut self.stepped_down_anyway, o.stepped_down_anyway),
        ];
        for (mine, theirs) in pairs {
            *mine = mine.saturating_add(theirs);
        }
        self.faults.add(&o.faults);
        self.sharded.add(&o.sharded);
        self.health.add(&o.health);
    }
}
