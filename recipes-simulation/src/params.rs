//! A world's parameters, drawn from its seed, and the options a run is given.

use std::time::Duration;

use fdb_leader_election::{ConfigError, ElectionConfig, VersionPolicy};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::oracles::OracleId;
use crate::plants::Plant;
use crate::time::{MS, Nanos, PPM, SEC, dur, scale};

/// How a seed is run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Simulated seconds per seed.
    pub sim_seconds: u64,
    /// The planted fault, if any.
    pub plant: Option<Plant>,
    /// Keep every trace line (for `--trace` and tests), not only the tail.
    pub keep_trace: bool,
    /// Stop only on this oracle's violations (the others are still evaluated, and logged).
    pub only_oracle: Option<OracleId>,
    /// Run the sharded world (`sim --sharded`) instead of the single election's.
    pub sharded: bool,
    /// The sharded world's planted fault, if any.
    pub shard_plant: Option<crate::shard_plants::ShardPlant>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sim_seconds: 120,
            plant: None,
            keep_trace: false,
            only_oracle: None,
            sharded: false,
            shard_plant: None,
        }
    }
}

/// The slowest a commit is in the quiet phase (its latency is drawn up to this).
pub const QUIET_LATENCY_MAX: Nanos = 5 * MS;
/// The slowest a commit is outside the quiet phase unless it is drawn slow (a fault).
pub const COMMIT_LATENCY_MAX: Nanos = 15 * MS;
/// The longest single fault, in leases (pauses, slow commits).
pub const MAX_FAULT_LEASES: u64 = 4;

/// The parameters of one world.
#[derive(Clone, Debug)]
pub struct Params {
    /// Nodes (each runs one incarnation at a time, two briefly during a deploy).
    pub nodes: usize,
    /// The election configuration stored at start.
    pub config: ElectionConfig,
    /// Lease, nanoseconds.
    pub lease: Nanos,
    /// Heartbeat, nanoseconds.
    pub heartbeat: Nanos,
    /// ρ, parts per million.
    pub rho_ppm: u32,
    /// The largest clock rate error drawn, parts per million.
    pub clock_spread_ppm: i64,
    /// The run's length.
    pub duration: Nanos,
    /// When the quiet phase begins.
    pub quiet_from: Nanos,
    /// Each node's base priority.
    pub node_bias: Vec<i32>,
    /// Each node's version at start: 1.MINOR.0 (mixed one time in four).
    pub node_minor: Vec<u64>,
}

impl Params {
    /// Draws a world's parameters.
    ///
    /// # Errors
    ///
    /// A configuration the library rejects (a bug in the draw).
    pub fn draw(rng: &mut ChaCha8Rng, opts: &Options) -> Result<Params, ConfigError> {
        let nodes = rng.random_range(5..=7);
        let lease = rng.random_range(1_000..=2_000u64).saturating_mul(MS);
        let heartbeat = lease / 4;
        let rho_ppm: u32 = match rng.random_range(0..4u8) {
            0 => 1_000,
            3 => 50_000,
            _ => 10_000,
        };
        let min_tenure = match rng.random_range(0..3u8) {
            0 => 0,
            1 => heartbeat,
            _ => lease / 2,
        };
        let mut builder = ElectionConfig::builder()
            .lease_duration(dur(lease))
            .heartbeat_interval(dur(heartbeat))
            .candidate_timeout(dur(lease.saturating_mul(2)))
            .transaction_timeout(dur(heartbeat / 3))
            .takeover_stagger(dur(lease / 30))
            .handover_grace(dur(heartbeat))
            .min_tenure(dur(min_tenure))
            .max_clock_rate_error_ppm(rho_ppm);
        // The reservation timeout: its default (two heartbeats), one heartbeat, or the lease.
        builder = match rng.random_range(0..3u8) {
            0 => builder,
            1 => builder.reservation_timeout(dur(heartbeat)),
            _ => builder.reservation_timeout(dur(lease)),
        };
        // The version policy (DESIGN §14.2), any of them.
        let policy = VersionPolicy::ALL
            .get(rng.random_range(0..VersionPolicy::ALL.len()))
            .copied()
            .unwrap_or_default();
        let config = builder.version_policy(policy).build()?;
        let clock_spread_ppm = match opts.plant {
            Some(Plant::ClockDriftBeyondRho) => 300_000,
            _ => i64::from(rho_ppm).saturating_sub(1),
        };
        let duration = opts.sim_seconds.saturating_mul(SEC);
        let node_bias = (0..nodes).map(|_| rng.random_range(0..=3)).collect();
        let mixed = rng.random_ratio(1, 4);
        let node_minor = (0..nodes)
            .map(|_| u64::from(mixed && rng.random_bool(0.5)))
            .collect();
        let mut p = Params {
            nodes,
            config,
            lease,
            heartbeat,
            rho_ppm,
            clock_spread_ppm,
            duration,
            quiet_from: 0,
            node_bias,
            node_minor,
        };
        // The quiet phase: every fault ends (four leases), health checks settle (their
        // hysteresis, two and a half leases; a cool-down, at most the longest lease the
        // operator writes, three), then the liveness bounds and the reservation probe.
        let quiet = lease
            .saturating_mul(MAX_FAULT_LEASES.saturating_add(2))
            .saturating_add(lease.saturating_mul(11) / 2)
            .saturating_add(p.leader_bound())
            .saturating_add(p.handover_bound())
            .saturating_add(p.probe_len());
        p.quiet_from = duration.saturating_sub(quiet);
        Ok(p)
    }

    /// `local` on the slowest clock allowed: the true time it can take.
    pub fn slow(&self, local: Nanos) -> Nanos {
        crate::time::slowest(local, self.rho_ppm)
    }

    /// `local` on the fastest clock allowed.
    pub fn fast(&self, local: Nanos) -> Nanos {
        let rho = u64::from(self.rho_ppm);
        let ppm = PPM.unsigned_abs();
        scale(local, ppm, ppm.saturating_add(rho))
    }

    fn nanos(d: Duration) -> Nanos {
        crate::time::nanos(d)
    }

    /// Oracle 5's first bound: after faults end, a leader within lease + 2 heartbeats (on the
    /// slowest clock), plus the commit latency of the two transactions on the path (the
    /// cycle that first sees the last record, the takeover) and a millisecond of scheduling.
    pub fn leader_bound(&self) -> Nanos {
        self.slow(self.lease.saturating_add(self.heartbeat.saturating_mul(2)))
            .saturating_add(QUIET_LATENCY_MAX.saturating_mul(2))
            .saturating_add(MS)
    }

    /// Oracle 21's bound: a vacancy its leader reserved with reservation timeout `timeout`
    /// is filled within it and a heartbeat (on the slowest clock), plus the commit latencies
    /// of the transactions on the way (the vacancy seen, the fill) and a millisecond.
    pub fn reservation_bound(&self, timeout: Nanos) -> Nanos {
        self.slow(timeout.saturating_add(self.heartbeat))
            .saturating_add(QUIET_LATENCY_MAX.saturating_mul(2))
            .saturating_add(MS)
    }

    /// Oracle 24's bound: an eligible leader within lease + 2 heartbeats + the cool-down
    /// `cool_down` (on the slowest clock), plus the quiet phase's latencies, as oracle 5's
    /// first bound.
    pub fn eligible_bound(&self, cool_down: Nanos) -> Nanos {
        self.leader_bound()
            .saturating_add(self.slow(cool_down))
            .saturating_add(QUIET_LATENCY_MAX.saturating_mul(2))
    }

    /// The reservation probe, from its start: the leader's resignation (a grace at most) and
    /// the reservation bound of the longest reservation timeout the world draws (a lease),
    /// with a heartbeat to spare.
    pub fn probe_len(&self) -> Nanos {
        let grace = Self::nanos(self.config.handover_grace());
        self.reservation_bound(self.lease)
            .saturating_add(self.slow(grace.saturating_add(self.heartbeat.saturating_mul(2))))
    }

    /// Oracle 5's second bound, "a further handover": one lapsed reservation (a crashed
    /// requester's request honoured: the leader's next cycle within a heartbeat plus minimum
    /// tenure and grace, then a lease of unchanged observation after the followers' next
    /// cycle, plus the rank stagger, capped at a heartbeat) and then one handover (the
    /// owner's priority refreshed by its next renewal, the request at the requester's next
    /// cycle, the leader's next cycle plus minimum tenure and grace, the fill at the
    /// requester's next cycle).
    pub fn handover_bound(&self) -> Nanos {
        let cfg = &self.config;
        let grace = Self::nanos(cfg.handover_grace());
        let tenure = Self::nanos(cfg.min_tenure());
        let hb = self.heartbeat;
        let lapsed = self
            .lease
            .saturating_add(hb.saturating_mul(3))
            .saturating_add(grace)
            .saturating_add(tenure);
        let handover = hb
            .saturating_mul(4)
            .saturating_add(grace)
            .saturating_add(tenure);
        self.slow(lapsed.saturating_add(handover))
            .saturating_add(QUIET_LATENCY_MAX.saturating_mul(10))
            .saturating_add(MS.saturating_mul(5))
    }
}
