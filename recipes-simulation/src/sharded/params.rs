//! A sharded world's parameters, drawn from its seed, and the bounds its oracles use.

use fdb_leader_election::{ConfigError, ElectionConfig};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::params::{COMMIT_LATENCY_MAX, MAX_FAULT_LEASES, QUIET_LATENCY_MAX};
use crate::time::{MS, Nanos, SEC, dur, slowest};

/// The parameters of one sharded world.
#[derive(Clone, Debug)]
pub(crate) struct ShardParams {
    /// Member nodes (each runs one member incarnation at a time, two during a deploy step).
    pub(crate) nodes: usize,
    /// Coordinator candidates (the leader of the coordinator election coordinates).
    pub(crate) coordinators: usize,
    /// M.
    pub(crate) shards: u32,
    /// The layout's `max_concurrent_moves`.
    pub(crate) max_moves: u32,
    /// The stored configuration.
    pub(crate) config: ElectionConfig,
    pub(crate) lease: Nanos,
    pub(crate) heartbeat: Nanos,
    pub(crate) grace: Nanos,
    pub(crate) txn_timeout: Nanos,
    /// The takeover stagger.
    pub(crate) stagger: Nanos,
    pub(crate) rho_ppm: u32,
    /// Each node's base priority.
    pub(crate) node_bias: Vec<i32>,
    /// When faults and workload stop.
    pub(crate) quiet_from: Nanos,
    /// When the failover probe begins (every fault over by then): elections off, then a
    /// member crashes (oracle S9).
    pub(crate) probe_at: Nanos,
    /// When the final rolling deploy begins (the probe over, elections on again).
    pub(crate) final_deploy_at: Nanos,
    /// The gap between two nodes of a deploy (the old incarnation leaves two heartbeats
    /// after its successor started).
    pub(crate) deploy_step: Nanos,
    /// The run's end.
    pub(crate) duration: Nanos,
}

impl ShardParams {
    /// Draws a world.
    pub(crate) fn draw(rng: &mut ChaCha8Rng, sim_seconds: u64) -> Result<Self, ConfigError> {
        let nodes = rng.random_range(3..=5);
        let shards = [4u32, 8, 12, 16, 24][rng.random_range(0..5usize)];
        let max_moves = rng.random_range(1..=4);
        let lease = rng.random_range(1_000..=2_000u64).saturating_mul(MS);
        let heartbeat = lease / 4;
        let txn_timeout = heartbeat / 3;
        let stagger = lease / 30;
        let rho_ppm: u32 = match rng.random_range(0..4u8) {
            0 => 1_000,
            3 => 50_000,
            _ => 10_000,
        };
        let config = ElectionConfig::builder()
            .lease_duration(dur(lease))
            .heartbeat_interval(dur(heartbeat))
            .candidate_timeout(dur(lease.saturating_mul(2)))
            .transaction_timeout(dur(txn_timeout))
            .takeover_stagger(dur(stagger))
            .handover_grace(dur(heartbeat))
            .max_clock_rate_error_ppm(rho_ppm)
            .build()?;
        let node_bias = (0..nodes).map(|_| rng.random_range(0..=3)).collect();
        let deploy_step = heartbeat.saturating_mul(3);
        let mut p = ShardParams {
            nodes,
            coordinators: 2,
            shards,
            max_moves,
            config,
            lease,
            heartbeat,
            grace: heartbeat,
            txn_timeout,
            stagger,
            rho_ppm,
            node_bias,
            quiet_from: 0,
            probe_at: 0,
            final_deploy_at: 0,
            deploy_step,
            duration: sim_seconds.saturating_mul(SEC),
        };
        // The quiet phase: every fault ends (pauses and slow commits of up to four leases,
        // restarts within three), then the failover probe, the final deploy, and the liveness
        // bounds.
        let settle = lease.saturating_mul(MAX_FAULT_LEASES.saturating_add(4));
        let probe = p.probe_crash_after().saturating_add(p.probe_len());
        let deploy = deploy_step
            .saturating_mul(u64::try_from(nodes).unwrap_or(0))
            .saturating_add(heartbeat.saturating_mul(3));
        let tail = p
            .owned_bound()
            .saturating_add(p.balance_bound())
            .saturating_add(lease);
        let quiet = settle
            .saturating_add(probe)
            .saturating_add(deploy)
            .saturating_add(tail);
        p.quiet_from = p.duration.saturating_sub(quiet);
        p.probe_at = p.quiet_from.saturating_add(settle);
        p.final_deploy_at = p.probe_at.saturating_add(probe);
        Ok(p)
    }

    /// `local` on the slowest clock allowed.
    pub(crate) fn slow(&self, local: Nanos) -> Nanos {
        slowest(local, self.rho_ppm)
    }

    /// Oracle S4's first bound: after the faults stop, every shard owned within
    /// lease + 2 heartbeats (slowest clock), plus the quiet-phase latency of the transactions
    /// on the path (the member's last renewal seen, the fencing, the acquisition).
    pub(crate) fn owned_bound(&self) -> Nanos {
        self.slow(self.lease.saturating_add(self.heartbeat.saturating_mul(2)))
            .saturating_add(QUIET_LATENCY_MAX.saturating_mul(6))
            .saturating_add(MS)
    }

    /// One handover round: the coordinator's next attempt (a heartbeat), the owner's drain
    /// (at most the grace) and its cycle, the target's cycle, on the slowest clock.
    pub(crate) fn round(&self) -> Nanos {
        self.slow(self.heartbeat.saturating_mul(2).saturating_add(self.grace))
            .saturating_add(QUIET_LATENCY_MAX.saturating_mul(6))
    }

    /// Oracle S4's second bound: balanced within ⌈M / max_concurrent_moves⌉ + 2 rounds of
    /// the shards being owned.
    pub(crate) fn balance_bound(&self) -> Nanos {
        let rounds = u64::from(self.shards.div_ceil(self.max_moves.max(1))).saturating_add(2);
        self.round().saturating_mul(rounds)
    }

    /// Oracle S9's failover bound: a member record that stays unchanged (and not fenced) is
    /// fenced out within this of its last write. The coordinator reads every heartbeat (on
    /// its clock): its first reading of the record comes within a heartbeat, the record lapses
    /// a lease (on its clock) after that reading, and the first reading after the lapse, a
    /// heartbeat later at most, fences it; all on the slowest clock, plus the latencies of the
    /// transactions on the way (the coordinator's election cycle and its attempt at each of
    /// the two readings, a few conflicts retried at once).
    pub(crate) fn failover_bound(&self) -> Nanos {
        self.slow(self.lease.saturating_add(self.heartbeat.saturating_mul(2)))
            .saturating_add(COMMIT_LATENCY_MAX.saturating_mul(10))
    }

    /// How long after a fault that stopped the coordinator (a crash, pause or partition of a
    /// coordinator candidate, an outage, a change of the coordinator election's believer) it
    /// may still delay a fencing: a successor takes over the coordinator election a lease
    /// (on its clock) and its stagger after its first reading of the lapsed record, a
    /// heartbeat after the fault at most, and times the members from its next reading; on the
    /// slowest clock, with a heartbeat to spare.
    pub(crate) fn disturbance_after(&self) -> Nanos {
        self.slow(
            self.lease
                .saturating_add(self.heartbeat.saturating_mul(3))
                .saturating_add(self.stagger),
        )
    }

    /// S9 (2)'s window: the failover bound; how long a coordinator's fault may delay a fencing
    /// after it ended; a heartbeat before the record's write, a failed or late coordinator
    /// operation still counts (the coordinator's next attempt after the write is its first
    /// reading of it).
    pub(crate) fn failover_window(&self) -> super::off::Window {
        super::off::Window {
            bound: self.failover_bound(),
            after: self.disturbance_after(),
            slack: self.slow(self.heartbeat),
        }
    }

    /// How much later than otherwise a coordinator's next attempt may come after one of its
    /// operations that took `took` failed or answered late: that, and two heartbeats (the
    /// next tick, and one renewal of its leadership missed), on the slowest clock.
    pub(crate) fn delay_after(&self, took: Nanos) -> Nanos {
        took.saturating_add(self.slow(self.heartbeat.saturating_mul(2)))
    }

    /// The failover probe: the member crashes this long after elections are turned off (the
    /// operator's write has landed; the member may not have given its shards back yet).
    pub(crate) fn probe_crash_after(&self) -> Nanos {
        self.heartbeat / 8
    }

    /// The failover probe, from the crash: the failover bound and a heartbeat, then the
    /// verdict, elections on again and the final deploy.
    pub(crate) fn probe_len(&self) -> Nanos {
        self.failover_bound().saturating_add(self.heartbeat)
    }

    /// Oracle S5: a gracefully leaving member's shards are owned again within half a lease
    /// (the coordinator's next attempt and the target's cycle; no lease's wait).
    pub(crate) fn leave_bound(&self) -> Nanos {
        self.lease / 2
    }
}
