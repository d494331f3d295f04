//! The operator's configuration writes: every field drawn, long attempts followed by a lease
//! cut while a leader holds the lease, and the writes themselves.

use fdb_leader_election::ElectionConfig;
use rand::Rng;

use crate::events::{Chaos, Event, Shape};
use crate::history::{ConfigView, Entry, Op};
use crate::time::{Nanos, dur, nanos, secs};
use crate::world::{Actor, Kind, Pending, Status, World};

/// The lease factors (numerator, denominator) of the world's lease each shape draws from.
fn lease_factors(shape: Shape) -> &'static [(u64, u64)] {
    match shape {
        Shape::Any => &[
            (1, 4),
            (1, 3),
            (1, 2),
            (2, 3),
            (1, 1),
            (3, 2),
            (2, 1),
            (3, 1),
        ],
        Shape::Normal => &[(1, 2), (2, 3), (1, 1), (3, 2), (2, 1), (3, 1)],
        Shape::LongAttempts => &[(2, 1), (3, 1)],
        Shape::ShortLease => &[(1, 8), (1, 6)],
    }
}

/// How many times a lease cut waits for a leader renewing with the long attempts.
const CUT_WAITS: u8 = 6;

/// How many times the operator draws again when the library refuses a configuration.
const CONFIG_DRAWS: u32 = 8;

/// The shortest transaction timeout the operator draws when the heartbeat leaves room.
const MIN_ATTEMPT: Nanos = 20 * crate::time::MS;

/// The largest clock-rate bound the operator writes (the library accepts below 50%).
const MAX_RHO_PPM: u32 = 450_000;

impl World {
    /// A valid configuration with every field drawn (DESIGN §10.6: the library refuses one
    /// whose belief cannot be renewed without a loop, `ConfigError::BeliefTooShortToRenew`;
    /// the draw is repeated, a bounded number of times, when it does). Leases from an eighth
    /// of the world's to three times it, heartbeats of a third to a sixth of the lease,
    /// transaction timeouts up to 0.9 heartbeat, ρ from the world's (never below the clocks'
    /// bound: clocks are drawn within it) up to 45%.
    fn draw_config(&mut self, shape: Shape) -> Result<ElectionConfig, String> {
        let mut refused = String::new();
        for _ in 0..CONFIG_DRAWS {
            match self.draw_config_once(shape) {
                Ok(config) => return Ok(config),
                Err(e) => refused = e,
            }
        }
        Err(refused)
    }

    fn draw_config_once(&mut self, shape: Shape) -> Result<ElectionConfig, String> {
        let factors = lease_factors(shape);
        let (num, den) = factors
            .get(self.rng.random_range(0..factors.len()))
            .copied()
            .unwrap_or((1, 1));
        let lease = crate::time::scale(self.params.lease, num, den);
        let most = if shape == Shape::LongAttempts { 4 } else { 6 };
        let heartbeat = lease
            .checked_div(self.rng.random_range(3..=most))
            .unwrap_or(lease);
        let world_rho = self.params.rho_ppm;
        let rho = if shape == Shape::LongAttempts || self.rng.random_bool(0.5) {
            world_rho
        } else {
            self.rng
                .random_range(world_rho..=MAX_RHO_PPM.max(world_rho))
        };
        let pick = |rng: &mut rand_chacha::ChaCha8Rng, options: &[Nanos]| -> Nanos {
            options
                .get(rng.random_range(0..options.len()))
                .copied()
                .unwrap_or(0)
        };
        let min_tenure = pick(&mut self.rng, &[0, heartbeat, lease / 2]);
        let grace = pick(&mut self.rng, &[0, heartbeat, heartbeat.saturating_mul(2)]);
        let stagger = pick(&mut self.rng, &[0, lease / 30]);
        let (lo, hi) = match shape {
            Shape::LongAttempts => (6, 9),
            Shape::ShortLease => (1, 5),
            Shape::Any | Shape::Normal => (1, 9),
        };
        // Attempts of at least 20 ms where the heartbeat allows (most commits take 0.5–15
        // ms): shorter ones would time out nearly always.
        let top = crate::time::scale(heartbeat, hi, 10);
        let floor = crate::time::scale(heartbeat, lo, 10)
            .max(MIN_ATTEMPT)
            .min(top);
        let timeout = self.between(floor, top).max(crate::time::MS);
        let timeout_mult = self.rng.random_range(2..=3u64);
        let builder = ElectionConfig::builder()
            .lease_duration(dur(lease))
            .heartbeat_interval(dur(heartbeat))
            .candidate_timeout(dur(lease.saturating_mul(timeout_mult)))
            .election_enabled(self.rng.random_ratio(9, 10))
            .allow_preemption(self.rng.random_bool(0.7))
            .max_clock_rate_error_ppm(rho)
            .min_tenure(dur(min_tenure))
            .handover_grace(dur(grace))
            .takeover_stagger(dur(stagger))
            .transaction_timeout(dur(timeout));
        // The reservation timeout: its default (two heartbeats), or anywhere up to the lease.
        let builder = if self.rng.random_bool(0.5) {
            builder
        } else {
            builder.reservation_timeout(dur(self.between(heartbeat / 2, lease).max(1)))
        };
        // The version policy, any of them.
        let policy = fdb_leader_election::VersionPolicy::ALL
            .get(self.rng.random_range(0..4usize))
            .copied()
            .unwrap_or_default();
        builder
            .version_policy(policy)
            .build()
            .map_err(|e| e.to_string())
    }

    /// The operator writes a configuration drawn from `shape`. A configuration with long
    /// attempts is followed, a little over one of the previous configuration's heartbeats
    /// later and once a leader renews with it, by a lease of an eighth to a quarter of the
    /// world's: a leader whose renewal writes it caps its belief inside the transaction,
    /// while the reply may come as late as the old configuration's transaction timeout
    /// (DESIGN §10.3). A cut is `rounds` such pairs in a row. A lease shorter than half the
    /// world's is replaced a little over one of the previous configuration's heartbeats later
    /// (short heartbeats cost many events).
    pub(super) fn change_config(&mut self, shape: Shape, rounds: u8) {
        match self.draw_config(shape) {
            Ok(config) => {
                let lease = nanos(config.lease_duration());
                let heartbeat = nanos(config.heartbeat_interval());
                let previous = self.operator.heartbeat;
                let cut = matches!(shape, Shape::LongAttempts | Shape::ShortLease);
                let why = if cut { "a lease cut" } else { "every field" };
                if !self.write_config_with(config.clone(), why, cut) {
                    return;
                }
                self.operator.heartbeat = heartbeat;
                self.operator.written = Some(config);
                let (lo, hi) = (previous, previous.saturating_mul(3) / 2);
                let next = match shape {
                    Shape::LongAttempts => Some((
                        self.between(previous.saturating_mul(6) / 5, previous.saturating_mul(2)),
                        Shape::ShortLease,
                        rounds,
                    )),
                    Shape::ShortLease if rounds > 1 => Some((
                        self.between(lo, hi),
                        Shape::LongAttempts,
                        rounds.saturating_sub(1),
                    )),
                    _ if lease < self.params.lease / 2 => {
                        Some((self.between(lo, hi), Shape::Normal, 0))
                    }
                    _ => None,
                };
                if let Some((d, shape, rounds)) = next {
                    self.queue.push(
                        self.now.saturating_add(d),
                        Event::Chaos(Chaos::ConfigStep {
                            shape,
                            waits: CUT_WAITS,
                            rounds,
                        }),
                    );
                }
            }
            Err(e) => self.log(format!("operator drew no valid configuration: {e}")),
        }
    }

    /// Whether some running process leads (a live guard) with the configuration the
    /// operator wrote last.
    pub(super) fn leader_on_written_config(&self) -> bool {
        let Some(written) = self.operator.written.as_ref() else {
            return false;
        };
        self.procs.iter().any(|p| {
            p.status == Status::Running
                && p.paused_until <= self.now
                && p.guard.as_ref().is_some_and(|g| !g.revoked)
                && p.machine.config() == written
        })
    }

    /// Writes `config` as the operator; `false` if the transaction failed before its commit
    /// (retried by the caller, if at all).
    pub(in crate::world) fn write_config(&mut self, config: ElectionConfig, why: &str) -> bool {
        self.write_config_with(config, why, false)
    }

    /// Writes `config` as the operator; a `faultless` commit gets no injected fault (the
    /// steps of a lease cut: an operator retrying until the write commits).
    fn write_config_with(&mut self, config: ElectionConfig, why: &str, faultless: bool) -> bool {
        let restore = config == self.params.config && self.quiet;
        let txn = self.open(Actor::Operator);
        let election = self.election.clone();
        let res = self
            .rt
            .block_on(async { election.write_config(&txn, &config).await });
        match res {
            Ok(()) => {
                let mut entry = Entry::new("operator", None, 0, Op::Config);
                entry.config = Some(ConfigView::of(&config));
                // Records written with this lease may outlive the faults: the quiet phase
                // waits for them.
                let longest = nanos(config.lease_duration()).max(self.params.lease);
                self.note_fault_end(
                    self.now
                        .saturating_add(longest.saturating_mul(2))
                        .saturating_add(self.params.heartbeat.saturating_mul(2)),
                );
                self.stats.config_changes = self.stats.config_changes.saturating_add(1);
                self.log(format!(
                    "operator writes the configuration ({why}): lease={} s heartbeat={} s \
                     rho={}ppm elections={} preemption={}",
                    secs(nanos(config.lease_duration())),
                    secs(nanos(config.heartbeat_interval())),
                    config.max_clock_rate_error_ppm(),
                    config.election_enabled(),
                    config.allow_preemption()
                ));
                self.schedule_commit(Pending {
                    faultless,
                    ..Pending::new(
                        Actor::Operator,
                        txn,
                        Kind::Config {
                            allow: config.allow_preemption(),
                            restore,
                        },
                        entry,
                    )
                });
                true
            }
            Err(_) => {
                self.faults.close(txn.id());
                false
            }
        }
    }
}
