//! The workload's options (the spec's custom keys: fdbserver fails a run whose spec has a key
//! the workload did not read) and its planted faults.

use std::fmt;
use std::str::FromStr;

use foundationdb_simulation::WorkloadContext;

/// A planted fault: a defect put in on purpose, which one oracle of the check phase must
/// catch (`scripts/fdb-sim --plant P`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plant {
    /// Clocks run up to 45% fast or slow, while the configuration says 1%: a leader's belief
    /// outlives its lease and overlaps its successor's. Caught by the belief oracle.
    ClockBeyondRho,
    /// Leader work writes the counter with the last token it held, without the fence and
    /// without asking whether the guard is still valid. Caught by the fenced-writes oracle.
    UnfencedWork,
    /// A leader's resignation writes its vacancy at ballot 0 (the v0.11 recipe's defect:
    /// resign deletes the key and ballots restart). Caught by the ballots oracle.
    BallotReset,
    /// Every follower takes over a lease it has seen unchanged for a full lease, by a raw
    /// takeover record, whatever its rank under the version policy. Caught by the version
    /// oracle.
    TakeoverIgnoresRank,
    /// Candidates register and never campaign. Caught by the progress oracle.
    Idle,
    /// Sharded: a member's shard work skips the shard fence and the guard. Caught by the
    /// sharded fenced-writes oracle.
    UnfencedShardWork,
}

impl Plant {
    /// Every plant of the single election, in listing order.
    pub(crate) const SINGLE: [Plant; 5] = [
        Plant::ClockBeyondRho,
        Plant::UnfencedWork,
        Plant::BallotReset,
        Plant::TakeoverIgnoresRank,
        Plant::Idle,
    ];

    /// Every plant of the sharded election.
    pub(crate) const SHARDED: [Plant; 3] =
        [Plant::ClockBeyondRho, Plant::UnfencedShardWork, Plant::Idle];

    /// Its name in specs and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Plant::ClockBeyondRho => "clock-beyond-rho",
            Plant::UnfencedWork => "unfenced-work",
            Plant::BallotReset => "ballot-reset",
            Plant::TakeoverIgnoresRank => "takeover-ignores-rank",
            Plant::Idle => "idle",
            Plant::UnfencedShardWork => "unfenced-shard-work",
        }
    }
}

impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Plant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Plant::SINGLE
            .into_iter()
            .chain(Plant::SHARDED)
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown plant {s:?}"))
    }
}

/// What the spec asked for.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Candidate slots per tester (each runs one incarnation at a time).
    pub(crate) candidates: u32,
    /// Simulated seconds of the start phase.
    pub(crate) duration: f64,
    /// The election's lease, seconds (heartbeat a quarter of it; the operator changes it to
    /// 0.6 and 1.5 times this too).
    pub(crate) lease: f64,
    /// The planted fault, if any.
    pub(crate) plant: Option<Plant>,
    /// Sharded: how many shards.
    pub(crate) shards: u32,
    /// Why the options are unusable, if they are (reported as an error at setup).
    pub(crate) invalid: Option<String>,
}

impl Options {
    /// Reads every option the workloads know (`shards` only for the sharded one).
    pub(crate) fn read(ctx: &WorkloadContext, sharded: bool) -> Self {
        let mut invalid = None;
        let candidates = ctx.get_option::<u32>("candidates").unwrap_or(3);
        let duration = ctx.get_option::<f64>("testDuration").unwrap_or(60.0);
        let lease = ctx.get_option::<f64>("lease").unwrap_or(10.0);
        let plant = match ctx.get_option::<String>("plant").as_deref() {
            None | Some("none") | Some("") => None,
            Some(name) => match name.parse::<Plant>() {
                Ok(p) => Some(p),
                Err(e) => {
                    invalid = Some(e);
                    None
                }
            },
        };
        let shards = if sharded {
            ctx.get_option::<u32>("shards").unwrap_or(8)
        } else {
            0
        };
        if !(1..=16).contains(&candidates) {
            invalid = Some(format!("candidates = {candidates}: expected 1 to 16"));
        }
        if !(lease.is_finite() && (1.0..=600.0).contains(&lease)) {
            invalid = Some(format!("lease = {lease}: expected 1 to 600 seconds"));
        }
        if !(duration.is_finite() && duration > 0.0) {
            invalid = Some(format!("testDuration = {duration}: expected seconds > 0"));
        }
        if sharded && !(1..=64).contains(&shards) {
            invalid = Some(format!("shards = {shards}: expected 1 to 64"));
        }
        Options {
            candidates,
            duration,
            lease,
            plant,
            shards,
            invalid,
        }
    }
}
