//! Table tests of a member's decisions (docs/design.md §12.1, §12.2, §10 per member): the records read
//! and the local state in, the writes and the belief out.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::budget::KeyLens;
use super::leave::{LeavePlan, decide_leave, leave_lookups};
use super::member::{MemberDecision, MemberInput, MemberLookups, MemberState, decide_member};
use super::member_cycle::MemberPlan;
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::tests::timed;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::Eligibility;
use crate::record::shard::{Inbox, MemberRecord, ShardOwner, ShardRecord};

/// Key lengths of a small election (a short subspace).
pub(super) const KEYS: KeyLens = KeyLens {
    shard: 20,
    member_base: 30,
};

pub(super) fn id(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap()
}

pub(super) fn at(ms: u64) -> LocalInstant {
    LocalInstant::from_origin(Duration::from_millis(ms))
}

pub(super) fn config(lease_ms: u64) -> ElectionConfig {
    timed(
        ElectionConfig::builder(),
        lease_ms,
        lease_ms / 3,
        lease_ms * 2,
        lease_ms / 10,
    )
    .build()
    .unwrap()
}

/// One member's world: its local state and the records as they stand.
pub(super) struct World {
    pub(super) st: MemberState,
    pub(super) config: ElectionConfig,
    pub(super) record: Option<MemberRecord>,
    pub(super) inbox: Inbox,
    pub(super) shards: BTreeMap<ShardId, ShardRecord>,
    pub(super) inboxes: BTreeMap<CandidateId, Inbox>,
    /// How many shards the layout has.
    pub(super) shard_count: u32,
    /// The election's key lengths.
    pub(super) keys: KeyLens,
    /// How many shard records the last attempt read.
    pub(super) reads: usize,
}

impl World {
    pub(super) fn new(name: &str, lease_ms: u64) -> World {
        World {
            st: MemberState::new(id(name)),
            config: config(lease_ms),
            record: None,
            inbox: Inbox::default(),
            shards: BTreeMap::new(),
            inboxes: BTreeMap::new(),
            shard_count: 8,
            keys: KEYS,
            reads: 0,
        }
    }

    /// One attempt at `ms`, with `ready` shards (its lookups served from the records).
    pub(super) fn decide(
        &mut self,
        ms: u64,
        ready: &[u32],
    ) -> Result<Box<MemberPlan>, ElectionError> {
        let ready: BTreeSet<ShardId> = ready.iter().map(|s| ShardId::new(*s)).collect();
        let mut lookups: Option<MemberLookups> = None;
        self.reads = 0;
        loop {
            let input = MemberInput {
                config: &self.config,
                record: self.record.as_ref(),
                inbox: &self.inbox,
                priority: Priority::new(0),
                weight: Weight::ONE,
                eligibility: &Eligibility::Eligible,
                ready: &ready,
                started_at: at(ms),
                read_version: None,
                lookups: lookups.as_ref(),
                keys: self.keys,
            };
            match decide_member(&mut self.st, &input)? {
                MemberDecision::Plan(plan) => return Ok(plan),
                MemberDecision::CorruptInbox(why) => panic!("corrupt inbox: {why}"),
                MemberDecision::Need { shards, inboxes } => {
                    assert!(lookups.is_none(), "asked twice");
                    self.reads = shards.len();
                    let mut found = MemberLookups {
                        shard_count: self.shard_count,
                        ..MemberLookups::default()
                    };
                    for s in shards {
                        let rec = self.shards.get(&s).cloned();
                        found
                            .shards
                            .insert(s, rec.unwrap_or_else(ShardRecord::initial));
                    }
                    for m in inboxes {
                        let i = self.inboxes.get(&m).cloned().unwrap_or_default();
                        found.inboxes.insert(m, i);
                    }
                    lookups = Some(found);
                }
            }
        }
    }

    /// Applies a plan's writes to the records (its commit landed).
    pub(super) fn land(&mut self, plan: &MemberPlan) {
        self.record = Some(plan.record.clone());
        for (s, rec) in &plan.shards {
            self.shards.insert(*s, rec.clone());
        }
        for (m, inbox) in &plan.inboxes {
            if *m == self.st.id {
                self.inbox = inbox.clone();
            } else {
                self.inboxes.insert(m.clone(), inbox.clone());
            }
        }
    }

    /// One attempt whose commit is confirmed: landed and adopted.
    pub(super) fn cycle(&mut self, ms: u64, ready: &[u32]) -> Box<MemberPlan> {
        let plan = self.decide(ms, ready).unwrap();
        self.land(&plan);
        self.st.adopt(&plan.adoption);
        plan
    }

    /// Reserves `shards` for this member, as the coordinator would.
    pub(super) fn reserve(&mut self, shards: &[u32]) {
        for s in shards {
            let shard = ShardId::new(*s);
            let ballot = self.shards.get(&shard).map_or(Ballot::ZERO, |r| r.ballot);
            self.shards.insert(
                shard,
                ShardRecord {
                    ballot,
                    owner: None,
                    move_to: None,
                    reserved_for: Some(self.st.id.clone()),
                    writer: None,
                },
            );
            self.inbox.reserved.push(shard);
        }
        self.inbox.seq += 1;
    }

    /// Asks this member to hand `shards` over to `to`, as the coordinator would.
    pub(super) fn ask(&mut self, shards: &[u32], to: &str) {
        for s in shards {
            let shard = ShardId::new(*s);
            if let Some(rec) = self.shards.get_mut(&shard) {
                rec.move_to = Some(id(to));
            }
            self.inbox.hand_over.push((shard, id(to)));
        }
        self.inbox.seq += 1;
    }

    /// The owner of `shard` as the records say.
    pub(super) fn owner(&self, shard: u32) -> Option<ShardOwner> {
        self.shards
            .get(&ShardId::new(shard))
            .and_then(|r| r.owner.clone())
    }

    /// The shards this member believes it owns at `ms`.
    /// The leave of `believed` (what `begin_leave` gave), once it read the shard records it
    /// looks up.
    pub(super) fn leave_reading(&mut self, believed: &BTreeSet<ShardId>) -> LeavePlan {
        let wanted = leave_lookups(believed, &self.inbox, KEYS);
        let read: BTreeMap<_, _> = wanted
            .iter()
            .map(|s| (*s, self.shards[s].clone()))
            .collect();
        decide_leave(&mut self.st, self.record.as_ref(), &read, KEYS)
            .unwrap()
            .unwrap()
    }

    pub(super) fn owned(&self, ms: u64) -> Vec<u32> {
        self.st.owned_at(at(ms)).keys().map(|s| s.get()).collect()
    }
}

/// A member that joined at 0 ms and owns shards 0-3 from 10 ms (10 s lease).
pub(super) fn owning() -> World {
    owning_of(10_000, &[0, 1, 2, 3])
}

/// Member `a` with a lease of `lease_ms`, having acquired `shards` at 10 ms.
fn owning_of(lease_ms: u64, shards: &[u32]) -> World {
    let mut w = World::new("a", lease_ms);
    w.cycle(0, &[]);
    w.reserve(shards);
    w.cycle(10, &[]);
    assert_eq!(w.owned(10), shards);
    w
}

#[test]
fn a_renewal_writing_a_shorter_lease_caps_the_belief_before_the_commit() {
    let mut w = owning();
    let long_end = w.st.lease.unwrap().valid_until;
    assert_eq!(
        long_end,
        at(10).saturating_add(w.config.local_validity(w.config.lease_duration()))
    );
    // An operator cuts the lease to 1 s; the next renewal writes it. Its commit is not
    // confirmed (dropped), yet the belief already ends as the 1 s lease says.
    w.config = config(1_000);
    let plan = w.decide(100, &[]).unwrap();
    assert_eq!(plan.record.lease, Duration::from_secs(1));
    let capped = at(100).saturating_add(w.config.local_validity(Duration::from_secs(1)));
    assert_eq!(w.st.lease.unwrap().valid_until, capped);
    assert_eq!(w.owned(1_079), vec![0, 1, 2, 3]);
    assert!(w.owned(1_081).is_empty(), "capped at {capped:?}");
    // A renewal with a longer lease never extends a belief before its commit.
    w.config = config(10_000);
    drop(w.decide(200, &[]).unwrap());
    assert_eq!(w.st.lease.unwrap().valid_until, capped);
}

#[test]
fn a_leave_ends_the_epoch_locally_so_no_cycle_decided_before_it_is_adopted() {
    let mut w = owning();
    // Another task's cycle renews; its commit is confirmed, its adoption not yet made.
    let renewal = w.decide(20, &[]).unwrap();
    w.land(&renewal);
    // The leave begins: nothing is owned from now on.
    let believed = w.st.begin_leave();
    assert_eq!(believed.len(), 4);
    assert!(w.owned(21).is_empty());
    let plan = decide_leave(&mut w.st, w.record.as_ref(), &w.shards.clone(), KEYS)
        .unwrap()
        .unwrap();
    assert!(plan.record.fenced);
    assert_eq!(plan.record.epoch, 2);
    assert_eq!(plan.shards.len(), 4, "the owned shards vacated");
    assert!(plan.shards.iter().all(|(_, r)| r.owner.is_none()));
    // The renewal's adoption after the leave revives nothing.
    w.st.adopt(&renewal.adoption);
    assert!(
        w.owned(22).is_empty(),
        "revived by a cycle decided before the leave"
    );
    assert_eq!(w.st.epoch, Some(2));
    // Nor does a cycle adopted between the leave's two steps.
    let mut w = owning();
    let renewal = w.decide(20, &[]).unwrap();
    w.land(&renewal);
    w.st.begin_leave();
    w.st.adopt(&renewal.adoption);
    assert!(w.owned(21).is_empty());
    drop(decide_leave(&mut w.st, w.record.as_ref(), &BTreeMap::new(), KEYS).unwrap());
    w.st.adopt(&renewal.adoption);
    assert!(w.owned(22).is_empty());
    // A member that left joins again at the next epoch, owning nothing.
    w.record = Some(MemberRecord {
        epoch: 2,
        fenced: true,
        writer: None,
        ..w.record.clone().unwrap()
    });
    let join = w.cycle(30, &[]);
    assert!(join.joined);
    assert_eq!(join.record.epoch, 3);
    assert!(w.owned(31).is_empty());
}

#[test]
fn a_handover_whose_commit_failed_is_written_again_while_the_record_names_the_member() {
    let mut w = owning();
    w.ask(&[2, 3], "b");
    // The handover cycle (work stopped): 2 and 3 leave the belief before the commit...
    let plan = w.decide(20, &[0, 1, 2, 3]).unwrap();
    assert_eq!(
        plan.adoption.released,
        vec![ShardId::new(2), ShardId::new(3)]
    );
    assert_eq!(w.owned(20), vec![0, 1]);
    // ... and the commit fails (not applied). The next cycle, offering nothing as ready,
    // writes the handover again: vacant and reserved for b, b told in its inbox.
    let again = w.cycle(30, &[]);
    assert_eq!(
        again.adoption.released,
        vec![ShardId::new(2), ShardId::new(3)]
    );
    for s in [2, 3] {
        assert_eq!(w.owner(s), None);
        assert_eq!(w.shards[&ShardId::new(s)].reserved_for, Some(id("b")));
    }
    assert_eq!(
        w.inboxes[&id("b")].reserved,
        vec![ShardId::new(2), ShardId::new(3)]
    );
    assert!(
        w.st.unreleased.is_empty(),
        "confirmed: nothing left to write"
    );
    let quiet = w.cycle(40, &[]);
    assert!(quiet.adoption.released.is_empty() && quiet.shards.is_empty());
}

#[test]
fn a_failed_handover_whose_request_was_withdrawn_is_vacated_not_kept_by_a_ghost() {
    let mut w = owning();
    w.ask(&[2, 3], "b");
    drop(w.decide(20, &[0, 1, 2, 3]).unwrap()); // its commit fails
    // The coordinator withdraws both requests (b left): the records name a again, a's inbox
    // no longer mentions them.
    w.inbox.hand_over.clear();
    for s in [2, 3] {
        w.shards.get_mut(&ShardId::new(s)).unwrap().move_to = None;
    }
    let plan = w.cycle(30, &[]);
    assert_eq!(
        plan.adoption.released,
        vec![ShardId::new(2), ShardId::new(3)]
    );
    for s in [2, 3] {
        let rec = &w.shards[&ShardId::new(s)];
        assert_eq!((&rec.owner, &rec.reserved_for), (&None, &None), "vacant");
        assert_eq!(
            rec.ballot,
            Ballot::new(1),
            "the ballot grows only at acquisition"
        );
    }
    // Placed again (here: reserved for a), a acquires them at ballot + 1.
    w.reserve(&[2, 3]);
    w.cycle(40, &[]);
    assert_eq!(w.owned(40), vec![0, 1, 2, 3]);
    assert_eq!(w.st.owned[&ShardId::new(2)], Ballot::new(2));
}

#[test]
fn a_release_that_landed_unconfirmed_is_forgotten_and_never_written_twice() {
    let mut w = owning();
    w.ask(&[2], "b");
    let plan = w.decide(20, &[2]).unwrap();
    w.land(&plan); // applied, the reply lost: not adopted
    // b acquires it meanwhile (ballot 2).
    let rec = w.shards.get_mut(&ShardId::new(2)).unwrap();
    *rec = ShardRecord {
        ballot: Ballot::new(2),
        owner: Some(ShardOwner {
            member: id("b"),
            epoch: 1,
        }),
        move_to: None,
        reserved_for: None,
        writer: None,
    };
    let next = w.cycle(30, &[]);
    assert!(
        next.adoption.released.is_empty() && next.shards.is_empty(),
        "{next:?}"
    );
    assert!(w.st.unreleased.is_empty());
    // A member that lost its lease forgets its unconfirmed releases with everything else.
    let mut w = owning();
    w.ask(&[3], "b");
    drop(w.decide(20, &[3]).unwrap());
    assert_eq!(w.st.unreleased.len(), 1);
    let join = w.cycle(20_000, &[]);
    assert!(join.joined && w.st.unreleased.is_empty() && join.shards.is_empty());
}

#[test]
fn a_retried_leave_still_vacates_what_the_first_try_would_have() {
    let mut w = owning();
    // Shard 6 is reserved; a cycle acquires it, and its commit lands unconfirmed.
    w.reserve(&[6]);
    let acquiring = w.decide(20, &[]).unwrap();
    assert_eq!(acquiring.adoption.acquired.len(), 1);
    w.land(&acquiring);
    // The leave's first try: its commit fails (nothing written).
    let first = w.st.begin_leave();
    assert_eq!(
        first.iter().map(|s| s.get()).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 6],
        "the owned shards and the one an unconfirmed cycle acquired"
    );
    let first_plan = decide_leave(&mut w.st, w.record.as_ref(), &w.shards.clone(), KEYS)
        .unwrap()
        .unwrap();
    assert_eq!(first_plan.shards.len(), 5);
    // The retry owns nothing locally, yet reads and vacates the same shards.
    let retry = w.st.begin_leave();
    assert_eq!(retry, first);
    let plan = w.leave_reading(&retry);
    let vacated: Vec<u32> = plan.shards.iter().map(|(s, _)| s.get()).collect();
    assert_eq!(vacated, vec![0, 1, 2, 3, 6]);
    assert!(plan.shards.iter().all(|(_, r)| r.owner.is_none()));
    // That one lands: a later leave finds the epoch ended and forgets the set.
    w.record = Some(plan.record.clone());
    for (s, r) in &plan.shards {
        w.shards.insert(*s, r.clone());
    }
    assert!(
        decide_leave(&mut w.st, w.record.as_ref(), &BTreeMap::new(), KEYS)
            .unwrap()
            .is_none()
    );
    assert!(w.st.begin_leave().is_empty());
    // A leave whose commit failed, then a join adopted: the set is forgotten (those shards'
    // epoch has ended), so a later leave reads only what the new epoch gave.
    let mut w = owning();
    assert_eq!(w.st.begin_leave().len(), 4);
    drop(decide_leave(&mut w.st, w.record.as_ref(), &w.shards.clone(), KEYS).unwrap());
    let join = w.cycle(30, &[]);
    assert!(join.joined);
    assert!(w.st.begin_leave().is_empty(), "{:?}", w.st.leaving);
}

// Found by the simulation's S5 (seed 262 of `sim --sharded`, once S5 checked the records a
// leave landed on): a member whose lease lapsed in a store outage dropped its shards locally;
// its next cycle (a join at a new epoch) timed out, then it left. The leave read its record,
// still at the old epoch, live, and ended that epoch, but gave back nothing: the records still
// named it as the owner of its shards (nobody's, as the epoch had ended, but waiting for the
// coordinator's next attempt rather than given back in the leave's one commit).
#[test]
fn a_leave_after_a_lapse_gives_back_the_shards_of_the_epoch_it_ends() {
    let mut w = owning_of(100, &[0, 1, 2, 3]);
    // The lease lapses (100 ms from the renewal at 10); the next cycle joins anew and its
    // commit does not land.
    let join = w.decide(200, &[]).unwrap();
    assert!(join.joined);
    assert!(w.owned(200).is_empty());
    let giving_back = w.st.begin_leave();
    assert_eq!(
        giving_back.iter().map(|s| s.get()).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    let plan = w.leave_reading(&giving_back);
    let vacated: Vec<u32> = plan.shards.iter().map(|(s, _)| s.get()).collect();
    assert_eq!(vacated, vec![0, 1, 2, 3]);
    // Had the join landed and been adopted, those shards' epoch would have ended with it:
    // nothing of it is left to give back.
    let mut w = owning_of(100, &[0, 1]);
    let join = w.cycle(200, &[]);
    assert!(join.joined);
    assert!(w.st.begin_leave().is_empty(), "{:?}", w.st.leaving);
}

#[test]
fn a_leave_withdraws_the_reservations_its_cleared_inbox_listed() {
    let mut w = World::new("a", 10_000);
    w.cycle(0, &[]);
    w.reserve(&[4, 5]);
    // Not yet acquired: the member leaves. Its inbox lists 4 and 5; the records reserve them.
    let believed = w.st.begin_leave();
    assert!(believed.is_empty());
    let wanted = leave_lookups(&believed, &w.inbox, KEYS);
    assert_eq!(wanted, vec![ShardId::new(4), ShardId::new(5)]);
    // Shard 5 was meanwhile reserved for someone else: left as it is.
    w.shards.get_mut(&ShardId::new(5)).unwrap().reserved_for = Some(id("b"));
    let plan = decide_leave(&mut w.st, w.record.as_ref(), &w.shards.clone(), KEYS)
        .unwrap()
        .unwrap();
    assert_eq!(plan.shards.len(), 1, "{:?}", plan.shards);
    let (shard, rec) = &plan.shards[0];
    assert_eq!(*shard, ShardId::new(4));
    assert_eq!((&rec.owner, &rec.reserved_for), (&None, &None));
    assert_eq!(rec.ballot, Ballot::ZERO);
}

#[test]
fn an_inbox_naming_a_shard_beyond_the_layout_is_refused_and_nothing_is_acquired() {
    let mut w = owning();
    // A record planted beyond the 8-shard layout, and the inbox reserving it.
    w.reserve(&[100]);
    let input_ready = BTreeSet::new();
    let lookups = MemberLookups {
        shard_count: 8,
        ..MemberLookups::default()
    };
    let input = MemberInput {
        config: &w.config,
        record: w.record.as_ref(),
        inbox: &w.inbox,
        priority: Priority::new(0),
        weight: Weight::ONE,
        eligibility: &Eligibility::Eligible,
        ready: &input_ready,
        started_at: at(20),
        read_version: None,
        lookups: Some(&lookups),
        keys: KEYS,
    };
    let decided = decide_member(&mut w.st, &input).unwrap();
    assert!(
        matches!(decided, MemberDecision::CorruptInbox(_)),
        "{decided:?}"
    );
    assert_eq!(
        w.owned(20),
        vec![0, 1, 2, 3],
        "nothing gained, nothing lost"
    );
    // Without the lookups, the member asks for them first (its record and the layout).
    let input = MemberInput {
        lookups: None,
        ..input
    };
    assert!(matches!(
        decide_member(&mut w.st, &input).unwrap(),
        MemberDecision::Need { .. }
    ));
}
#[test]
fn a_cycle_started_during_a_leave_does_not_keep_the_old_epochs_shards_owned() {
    let mut w = owning();
    let old_epoch = w.record.as_ref().unwrap().epoch;
    let believed = w.st.begin_leave();
    assert_eq!(believed.len(), 4);
    // The concurrent cycle, decided after begin_leave, lands first.
    let join = w.decide(20, &[]).unwrap();
    assert!(join.record.epoch > old_epoch, "it joined at a new epoch");
    w.land(&join);
    // The leave reads what it planned to, and decides.
    let plan = w.leave_reading(&believed);
    for (s, r) in &plan.shards {
        w.shards.insert(*s, r.clone());
    }
    w.record = Some(plan.record.clone());
    let still: Vec<u32> = w
        .shards
        .iter()
        .filter(|(_, r)| r.owner.as_ref().is_some_and(|o| o.member == w.st.id))
        .map(|(s, _)| s.get())
        .collect();
    assert!(
        still.is_empty(),
        "shards {still:?} are still owned by the member that left (at epoch {old_epoch}); \
         the record is fenced at {}",
        plan.record.epoch
    );
}

/// One rule for the end of a belief: the token of one shard (`token_at`, O(log M), copying
/// nothing) says what the copy of every owned shard (`owned_at`) says, at every instant: the
/// shard's ballot while the lease holds, nothing from its end on, nothing for a shard not
/// owned.
#[test]
fn the_token_of_one_shard_agrees_with_the_owned_shards_at_every_instant() {
    let w = owning();
    let end = w.st.lease.unwrap().valid_until;
    let end_ms = u64::try_from(end.since_origin().as_millis()).unwrap();
    for ms in [0, 10, 5_000, end_ms - 1, end_ms, end_ms + 1, 20_000] {
        let owned = w.st.owned_at(at(ms));
        for shard in 0..6 {
            let shard = ShardId::new(shard);
            assert_eq!(
                w.st.token_at(shard, at(ms)),
                owned.get(&shard).copied(),
                "shard {shard} at {ms} ms"
            );
        }
        assert_eq!(
            w.st.owned_ref_at(at(ms)).is_some(),
            at(ms) < end,
            "at {ms} ms"
        );
    }
    assert_eq!(w.st.token_at(ShardId::new(2), at(10)), Some(Ballot::new(1)));
    assert_eq!(w.st.token_at(ShardId::new(2), end), None);
}

#[test]
fn a_commit_that_acquires_or_hands_over_conflicts_on_the_configuration_and_no_other_does() {
    // Joining, renewing and giving back while elections are off decide nothing the
    // configuration forbids: no conflict on it, so an operator's write never fails them.
    let mut w = World::new("a", 10_000);
    let join = w.cycle(0, &[]);
    assert!(!join.config_conflict, "a join acquires nothing");
    w.reserve(&[0, 1]);
    let acquire = w.cycle(10, &[]);
    assert_eq!(acquire.adoption.acquired.len(), 2);
    assert!(
        acquire.config_conflict,
        "an acquisition is decided on elections enabled"
    );
    let renew = w.cycle(20, &[]);
    assert!(renew.shards.is_empty() && !renew.config_conflict);
    w.ask(&[1], "b");
    let hand_over = w.cycle(30, &[1]);
    assert_eq!(hand_over.adoption.released, vec![ShardId::new(1)]);
    assert!(
        hand_over.config_conflict,
        "a handover reserves for its target"
    );
    w.config.election_enabled = false;
    let give_back = w.cycle(40, &[0]);
    assert_eq!(give_back.adoption.released, vec![ShardId::new(0)]);
    assert!(
        !give_back.config_conflict,
        "giving back is allowed whatever the configuration"
    );
}
