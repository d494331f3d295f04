//! The sharded world's planted faults (`sim --sharded --plant`).
//!
//! The sharded world's planted faults (`sim --sharded --plant`): deliberate bugs of the simulation's executor, world or
//! operator (never of the library), each aimed at one sharded oracle.

use std::fmt;
use std::str::FromStr;

use crate::oracles::OracleId;

/// A planted fault of the sharded world, selected by name with `sim --sharded --plant`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShardPlant {
    /// The executor ignores the machine's revocations for an ended lease or epoch: a member
    /// whose renewal finds its epoch bumped keeps the guards of the shards it lost, and its
    /// next renewals (at the new epoch) keep them alive.
    RenewalIgnoresEpoch,
    /// The executor reports every shard's work idle at once (the release is written while the
    /// work still runs), and a task checks its guard only when it starts.
    ReleaseBeforeWorkStops,
    /// The coordinator's clock runs twice as fast: it fences a member out after half a lease
    /// of unchanged record (a takeover before a full lease).
    TakeoverBeforeFullLease,
    /// Shard work writes the register and counter without `fence_shard`.
    UnfencedShardWork,
    /// A graceful shutdown skips the leave: the executor tells the machine it left, so the
    /// member's shards wait for its lease to lapse.
    LeaveWithoutHandover,
    /// The executor loses about one in fifty of the wake-ups the machine asks for, and with it
    /// its event loop: the member stays up but runs its machine no more (it goes quiet).
    LostWakeup,
    /// The operator keeps moving shards by hand after the faults stop (one every heartbeat),
    /// beyond what balance needs.
    MoveStorm,
    /// The executor runs a failed member cycle again at once (once per failure), before the
    /// machine hears of the failure: a failing store is retried back to back.
    RetryWithoutBackOff,
    /// A graceful leave gives back every shard but one: the executor writes one shard record
    /// the member owns back into the leave's transaction, as it was before the leave.
    LeaveKeepsAShard,
    /// While the stored configuration disables elections, the executor adds a reservation
    /// write into a coordinator attempt's transaction: a reservation the oracles saw written
    /// earlier, written again on its shard, vacant at the same ballot.
    ElectionsOffStillPlaces,
    /// The coordinator candidates skip their attempts (fencing included) while the stored
    /// configuration disables elections: a member that dies meanwhile keeps its shards.
    NoFailoverWhenElectionsOff,
    /// Now and then the executor also clears a live member's record, epoch mark and inbox in
    /// a coordinator attempt's transaction (forgets a member that is not fenced).
    ForgetALiveMember,
}

impl ShardPlant {
    /// Every plant, in listing order.
    pub const ALL: [ShardPlant; 12] = [
        ShardPlant::RenewalIgnoresEpoch,
        ShardPlant::ReleaseBeforeWorkStops,
        ShardPlant::TakeoverBeforeFullLease,
        ShardPlant::UnfencedShardWork,
        ShardPlant::LeaveWithoutHandover,
        ShardPlant::LostWakeup,
        ShardPlant::MoveStorm,
        ShardPlant::RetryWithoutBackOff,
        ShardPlant::LeaveKeepsAShard,
        ShardPlant::ElectionsOffStillPlaces,
        ShardPlant::NoFailoverWhenElectionsOff,
        ShardPlant::ForgetALiveMember,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ShardPlant::RenewalIgnoresEpoch => "renewal-ignores-epoch",
            ShardPlant::ReleaseBeforeWorkStops => "release-before-work-stops",
            ShardPlant::TakeoverBeforeFullLease => "takeover-before-full-lease",
            ShardPlant::UnfencedShardWork => "unfenced-shard-work",
            ShardPlant::LeaveWithoutHandover => "leave-without-handover",
            ShardPlant::LostWakeup => "lost-wakeup",
            ShardPlant::MoveStorm => "move-storm",
            ShardPlant::RetryWithoutBackOff => "retry-without-back-off",
            ShardPlant::LeaveKeepsAShard => "leave-keeps-a-shard",
            ShardPlant::ElectionsOffStillPlaces => "elections-off-still-places",
            ShardPlant::NoFailoverWhenElectionsOff => "no-failover-when-elections-off",
            ShardPlant::ForgetALiveMember => "forget-a-live-member",
        }
    }

    /// The oracle this plant is aimed at.
    pub fn target(self) -> OracleId {
        match self {
            ShardPlant::RenewalIgnoresEpoch | ShardPlant::TakeoverBeforeFullLease => {
                OracleId::ShardBelief
            }
            ShardPlant::ReleaseBeforeWorkStops => OracleId::ShardGuard,
            ShardPlant::UnfencedShardWork => OracleId::ShardFencing,
            ShardPlant::LeaveWithoutHandover | ShardPlant::LeaveKeepsAShard => {
                OracleId::ShardDeploy
            }
            ShardPlant::LostWakeup => OracleId::ShardLiveness,
            ShardPlant::MoveStorm => OracleId::ShardMoves,
            ShardPlant::RetryWithoutBackOff => OracleId::ShardCadence,
            ShardPlant::ElectionsOffStillPlaces | ShardPlant::NoFailoverWhenElectionsOff => {
                OracleId::ShardElectionsOff
            }
            ShardPlant::ForgetALiveMember => OracleId::ShardForgotten,
        }
    }
}

impl fmt::Display for ShardPlant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ShardPlant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ShardPlant::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ShardPlant::ALL.iter().map(|p| p.name()).collect();
                format!("unknown sharded plant {s:?}; plants: {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in ShardPlant::ALL {
            assert_eq!(p.name().parse::<ShardPlant>(), Ok(p));
        }
        assert!("unfenced-leader-work".parse::<ShardPlant>().is_err());
    }
}
