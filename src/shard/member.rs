//! [`Member`] and [`Coordinator`]: the local state of one member incarnation and of one
//! coordinator, shared by clones; and the [`MemberCycle`] a member adopts after its commit.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::clock::{Clock, LocalInstant, SystemClock};
use crate::config::ElectionConfig;
use crate::core::shard::coordinator::CoordinatorState;
use crate::core::shard::member::{MemberAdoption, MemberState};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::Eligibility;

/// One member of a sharded election: one process incarnation (its id is fresh per start, as a
/// [`Candidate`](crate::Candidate)'s). A cheap `Clone` handle: clones share the local state.
///
/// A member believes it owns a shard from the confirmed commit that acquired it until its
/// lease (renewed once per heartbeat, for all its shards) ends, it hands the shard over, or a
/// takeover ends its epoch; [`shard_token`](Self::shard_token) is the check to make before
/// every write of a shard's work, with the token passed to
/// [`ShardedElection::fence_shard`](super::ShardedElection::fence_shard).
#[derive(Clone)]
pub struct Member {
    pub(crate) inner: Arc<MemberInner>,
}

pub(crate) struct MemberInner {
    pub(crate) id: CandidateId,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) local: Mutex<MemberLocal>,
}

pub(crate) struct MemberLocal {
    pub(crate) core: MemberState,
    pub(crate) priority: Priority,
    pub(crate) weight: Weight,
    pub(crate) eligibility: Eligibility,
}

impl Member {
    /// A member with `priority` and `weight`, on the system clock.
    pub fn new(id: CandidateId, priority: Priority, weight: Weight) -> Self {
        Self::with_clock(id, priority, weight, Arc::new(SystemClock))
    }

    /// A member on an injected clock.
    pub fn with_clock(
        id: CandidateId,
        priority: Priority,
        weight: Weight,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Member {
            inner: Arc::new(MemberInner {
                local: Mutex::new(MemberLocal {
                    core: MemberState::new(id.clone()),
                    priority,
                    weight,
                    eligibility: Eligibility::Eligible,
                }),
                id,
                clock,
            }),
        }
    }

    /// The member's id.
    pub fn id(&self) -> &CandidateId {
        &self.inner.id
    }

    /// The member's clock, now.
    pub fn now(&self) -> LocalInstant {
        self.inner.clock.now()
    }

    /// Its priority, as its next renewal publishes it.
    pub fn priority(&self) -> Priority {
        self.lock().priority
    }

    /// Changes its priority (published at its next renewal).
    pub fn set_priority(&self, priority: Priority) {
        self.lock().priority = priority;
    }

    /// Its weight, as its next renewal publishes it.
    pub fn weight(&self) -> Weight {
        self.lock().weight
    }

    /// Changes its weight (published at its next renewal; weight 0 drains the member).
    pub fn set_weight(&self, weight: Weight) {
        self.lock().weight = weight;
    }

    /// Says whether this member may own shards (docs/design.md §13.8), published at its next renewal:
    /// an ineligible member is placed as if its weight were 0, so the coordinator moves its
    /// shards away cooperatively, at the move limit, and it keeps each until the move lands
    /// (no gap); with no eligible member to take them, it keeps them (`hold`). `reason` (at
    /// most [`MAX_REASON_BYTES`](crate::MAX_REASON_BYTES)) is shown by `shards status`.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] for a longer reason; nothing changes.
    pub fn set_eligible(&self, eligible: bool, reason: &str) -> Result<(), ElectionError> {
        let e = if eligible {
            Eligibility::Eligible
        } else {
            Eligibility::ineligible(reason)?
        };
        self.lock().eligibility = e;
        Ok(())
    }

    /// Whether this member may own shards, as its next renewal publishes it.
    pub fn eligibility(&self) -> Eligibility {
        self.lock().eligibility.clone()
    }

    /// The shards this member owns now, with their fencing tokens (none once its lease ended).
    pub fn owned_shards(&self) -> BTreeMap<ShardId, Ballot> {
        let now = self.now();
        self.lock().core.owned_at(now)
    }

    /// The fencing token of `shard` if this member owns it now. O(log M): it copies nothing.
    pub fn shard_token(&self, shard: ShardId) -> Option<Ballot> {
        let now = self.now();
        self.lock().core.token_at(shard, now)
    }

    /// Calls `f` with the clock reading `now` and the shards this member owns at `now` (`None`
    /// once its lease ended), without copying them: one lock, one clock reading, for checks
    /// of many shards at once (O(M) for all of them, where a [`shard_token`](Self::shard_token)
    /// each would cost O(M log M)).
    pub(crate) fn with_owned<R>(
        &self,
        f: impl FnOnce(LocalInstant, Option<&BTreeMap<ShardId, Ballot>>) -> R,
    ) -> R {
        let now = self.now();
        let local = self.lock();
        f(now, local.core.owned_ref_at(now))
    }

    /// When this member's lease ends unless renewed (on its own clock), while it holds one.
    pub fn lease_deadline(&self) -> Option<LocalInstant> {
        self.lock().core.lease.map(|l| l.valid_until)
    }

    /// The epoch this member last joined at.
    pub fn epoch(&self) -> Option<u64> {
        self.lock().core.epoch
    }

    /// Adopts a cycle whose commit was confirmed; returns the shards owned now.
    pub fn adopt(&self, cycle: MemberCycle) -> BTreeMap<ShardId, Ballot> {
        if cycle.member == self.inner.id {
            let mut local = self.lock();
            local.core.adopt(&cycle.adoption);
            local.core.cycle_open = false;
        }
        drop(cycle);
        self.owned_shards()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, MemberLocal> {
        // Nothing panics while holding the lock; the state is consistent between calls.
        self.inner
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a cycle: one at a time per member.
    pub(crate) fn open_cycle(&self) -> Result<SettleMember, ElectionError> {
        let mut local = self.lock();
        if local.core.cycle_open {
            return Err(ElectionError::CycleInProgress {
                candidate: self.inner.id.clone(),
            });
        }
        local.core.cycle_open = true;
        Ok(SettleMember {
            member: self.clone(),
        })
    }
}

impl fmt::Debug for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let local = self.lock();
        f.debug_struct("Member")
            .field("id", &self.inner.id)
            .field("epoch", &local.core.epoch)
            .field("owned", &local.core.owned.len())
            .finish()
    }
}

/// Closes the member's cycle when the cycle is adopted or dropped.
pub(crate) struct SettleMember {
    member: Member,
}

impl Drop for SettleMember {
    fn drop(&mut self) {
        self.member.lock().core.cycle_open = false;
    }
}

impl fmt::Debug for SettleMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettleMember")
            .field("member", self.member.id())
            .finish()
    }
}

/// A member cycle that ran in a transaction: adopt it with [`Member::adopt`] **after** the
/// transaction committed, or drop it.
#[derive(Debug)]
pub struct MemberCycle {
    pub(crate) member: CandidateId,
    pub(crate) _settle: SettleMember,
    pub(crate) adoption: MemberAdoption,
    pub(crate) joined: bool,
    pub(crate) stop: Vec<ShardId>,
    pub(crate) more: bool,
    /// Boxed: a cycle stays small to move around (it is held across the commit).
    pub(crate) config: Box<ElectionConfig>,
}

impl MemberCycle {
    /// The shards this cycle acquires (owned once adopted), with their new ballots.
    pub fn acquired(&self) -> Vec<(ShardId, Ballot)> {
        self.adoption.acquired.clone()
    }

    /// The shards this cycle handed over (no longer owned, already). A handover whose commit
    /// is not confirmed is written again by the member's next cycles while the shard's record
    /// still names it (those releases are listed here too), whatever `ready` says: its work
    /// stopped when the member's belief in the shard did.
    pub fn released(&self) -> &[ShardId] {
        &self.adoption.released
    }

    /// The configuration the cycle read: the stored one, which paces the member (its
    /// heartbeat, its renewal margin, its transactions' timeout) whatever it was built with.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Whether this cycle joins the election (at a new epoch).
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// The epoch this cycle renews (or joins at).
    pub fn epoch(&self) -> u64 {
        self.adoption.lease.epoch
    }

    /// The shards whose work this member is to stop, after this cycle: those the coordinator
    /// (or an operator) still asks it to hand over, or, while the stored configuration
    /// disables elections, every shard it owns (a later cycle gives each back, vacant, once
    /// it is passed in `ready`).
    pub fn hand_over_requested(&self) -> Vec<ShardId> {
        self.stop.clone()
    }

    /// Whether another cycle has work to do at once: shards reserved for this member are
    /// still to be acquired (and this cycle made headway), or this cycle's transaction was
    /// full and left writes to the next.
    pub fn more_to_acquire(&self) -> bool {
        self.more
    }
}

/// The coordinator's local state: when it first saw each member's current record. One per
/// process leading the coordinator election; a cheap `Clone` handle.
#[derive(Clone)]
pub struct Coordinator {
    pub(crate) id: CandidateId,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) state: Arc<Mutex<CoordinatorState>>,
}

impl Coordinator {
    /// A coordinator writing as `id` (the candidate id it leads the coordinator election
    /// with), on the system clock.
    pub fn new(id: CandidateId) -> Self {
        Self::with_clock(id, Arc::new(SystemClock))
    }

    /// A coordinator on an injected clock.
    pub fn with_clock(id: CandidateId, clock: Arc<dyn Clock>) -> Self {
        Coordinator {
            id,
            clock,
            state: Arc::new(Mutex::new(CoordinatorState::default())),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CoordinatorState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long from now until the next timing of the members is due: `period`, or sooner
    /// when a member timed unchanged lapses before then (the core's rule).
    pub(crate) fn next_reading_in(&self, period: Duration) -> Duration {
        self.lock().next_reading_in(self.clock.now(), period)
    }
}

impl fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coordinator").field("id", &self.id).finish()
    }
}
