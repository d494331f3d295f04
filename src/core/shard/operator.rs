//! An operator's move of one shard to a member (docs/design.md §12.5), decided purely: under a frozen
//! placement only (the coordinator would otherwise move the shard back), to a live member
//! that is not drained, and by the same rules as the coordinator's own steps: a shard a live
//! member owns is **asked** of its owner (a cooperative handover: the owner stops the shard's
//! work first, then writes it vacant and reserved for the target); a shard nobody live holds
//! (vacant, reserved, or owned at an epoch that ended) is reserved for the target at once.
//! The ballot never changes here: only an acquisition grows it.

use std::collections::BTreeMap;

use super::budget::InboxFill;
use crate::codec;
use crate::error::ElectionError;
use crate::ids::{CandidateId, ShardId, Weight};
use crate::record::AttemptId;
use crate::record::shard::{Inbox, ShardRecord};

/// What an operator's move did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardMove {
    /// The target already owns the shard, or it is already reserved for it (a move request
    /// toward another member, if any, is withdrawn).
    AlreadyThere,
    /// The shard's live owner `from` is asked to hand it over to the target.
    Requested {
        /// The owner asked.
        from: CandidateId,
    },
    /// Nobody live held the shard: it is reserved for the target, which acquires it at its
    /// next heartbeat.
    Reserved,
}

/// What the records say, as the operator's transaction read them (serializably).
#[derive(Debug)]
pub(crate) struct MoveInput<'a> {
    pub(crate) shard: ShardId,
    /// Whether the stored configuration enables elections (off, no shard changes hands).
    pub(crate) elections: bool,
    pub(crate) frozen: bool,
    pub(crate) record: &'a ShardRecord,
    /// Whether the shard's owner (if any) is live at the epoch it owns the shard in.
    pub(crate) owner_live: bool,
    pub(crate) to: &'a CandidateId,
    /// Whether the target has joined and is not fenced out.
    pub(crate) to_live: bool,
    pub(crate) to_drained: bool,
    /// The target's own weight, as its record publishes it (0: it drained itself).
    pub(crate) to_weight: Weight,
    /// The inboxes of the owner, the current holder of a reservation and the target, as read
    /// (absent: empty).
    pub(crate) inboxes: &'a BTreeMap<CandidateId, Inbox>,
    pub(crate) writer: AttemptId,
}

/// The writes of an operator's move.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MovePlan {
    pub(crate) outcome: ShardMove,
    pub(crate) record: Option<ShardRecord>,
    pub(crate) inboxes: Vec<(CandidateId, Inbox)>,
}

/// Decides an operator's move of `input.shard` to `input.to`.
///
/// # Errors
///
/// [`ElectionError::OperatorRefused`] while elections are disabled, unless placement is
/// frozen, or if the target is drained;
/// [`ElectionError::NotRegistered`] if the target has not joined or is fenced out.
pub(crate) fn decide_move(input: &MoveInput<'_>) -> Result<MovePlan, ElectionError> {
    if !input.elections {
        return Err(ElectionError::OperatorRefused {
            reason: "elections are disabled: no member acquires or hands over a shard, and \
                     the coordinator withdraws every move; enable them first"
                .to_owned(),
        });
    }
    if !input.frozen {
        return Err(ElectionError::OperatorRefused {
            reason: "placement is not frozen: freeze it first (set_frozen(true)), or the \
                     coordinator would move the shard back to balance"
                .to_owned(),
        });
    }
    if !input.to_live {
        return Err(ElectionError::NotRegistered {
            candidate: input.to.clone(),
        });
    }
    if input.to_drained {
        return Err(ElectionError::OperatorRefused {
            reason: "the target member is drained by an operator: undrain it first".to_owned(),
        });
    }
    if input.to_weight == Weight::DRAINED {
        return Err(ElectionError::OperatorRefused {
            reason: "the target member has weight 0 (it drained itself): it takes no shard"
                .to_owned(),
        });
    }
    let rec = input.record;
    let shard = input.shard;
    let mut changed: BTreeMap<CandidateId, Inbox> = BTreeMap::new();
    let mut edit = |who: &CandidateId, f: &mut dyn FnMut(&mut Inbox)| {
        let inbox = changed
            .entry(who.clone())
            .or_insert_with(|| input.inboxes.get(who).cloned().unwrap_or_default());
        f(inbox);
    };
    let next = |f: &dyn Fn(&mut ShardRecord)| {
        let mut r = ShardRecord {
            writer: Some(input.writer.clone()),
            ..rec.clone()
        };
        f(&mut r);
        r
    };
    let (outcome, record) = match (&rec.owner, input.owner_live) {
        (Some(owner), true) => {
            let from = owner.member.clone();
            // Whatever the outcome, an earlier request for this shard leaves the owner's inbox.
            edit(&from, &mut |i| i.hand_over.retain(|(s, _)| *s != shard));
            if from == *input.to {
                let record = rec.move_to.is_some().then(|| next(&|r| r.move_to = None));
                (ShardMove::AlreadyThere, record)
            } else {
                let to = input.to.clone();
                edit(&from, &mut |i| i.hand_over.push((shard, to.clone())));
                let record = next(&|r| r.move_to = Some(input.to.clone()));
                (ShardMove::Requested { from }, Some(record))
            }
        }
        _ if rec.reserved_for.as_ref() == Some(input.to) => (ShardMove::AlreadyThere, None),
        _ => {
            // Nobody live holds it: a reservation for another member is replaced (the two
            // writes conflict with that member's acquisition: only one of them commits).
            if let Some(holder) = &rec.reserved_for {
                edit(holder, &mut |i| i.reserved.retain(|s| *s != shard));
            }
            edit(input.to, &mut |i| {
                if !i.reserved.contains(&shard) {
                    i.reserved.push(shard);
                }
            });
            let record = next(&|r| {
                r.owner = None;
                r.move_to = None;
                r.reserved_for = Some(input.to.clone());
            });
            (ShardMove::Reserved, Some(record))
        }
    };
    // Whatever the move adds to an inbox must fit in it (docs/design.md §12: no inbox past its
    // budget): one full now is refused rather than overfilled.
    let added = |who: &CandidateId, inbox: &Inbox| {
        let before = input.inboxes.get(who).cloned().unwrap_or_default();
        let entries = inbox
            .reserved
            .iter()
            .filter(|s| !before.reserved.contains(s))
            .map(|s| codec::reserved_entry_len(*s))
            .chain(
                inbox
                    .hand_over
                    .iter()
                    .filter(|e| !before.hand_over.contains(e))
                    .map(|(s, to)| codec::hand_over_entry_len(*s, to)),
            )
            .fold(0usize, usize::saturating_add);
        (before, entries)
    };
    for (who, inbox) in &changed {
        let (before, entries) = added(who, inbox);
        if !InboxFill::of(&before).fits(entries) {
            return Err(ElectionError::OperatorRefused {
                reason: "a member's inbox is full: retry once it has acquired what is \
                         reserved for it"
                    .to_owned(),
            });
        }
    }
    let inboxes = changed
        .into_iter()
        .filter_map(|(who, mut inbox)| {
            let before = input.inboxes.get(&who).cloned().unwrap_or_default();
            (inbox != before).then(|| {
                inbox.seq = before.seq.saturating_add(1);
                (who, inbox)
            })
        })
        .collect();
    Ok(MovePlan {
        outcome,
        record,
        inboxes,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::ids::Ballot;
    use crate::record::shard::ShardOwner;

    fn id(s: &str) -> CandidateId {
        CandidateId::parse(s).unwrap()
    }

    fn owned(by: &str, move_to: Option<&str>) -> ShardRecord {
        ShardRecord {
            ballot: Ballot::new(4),
            owner: Some(ShardOwner {
                member: id(by),
                epoch: 2,
            }),
            move_to: move_to.map(id),
            reserved_for: None,
            writer: None,
        }
    }

    fn vacant(reserved_for: Option<&str>) -> ShardRecord {
        ShardRecord {
            ballot: Ballot::new(4),
            owner: None,
            move_to: None,
            reserved_for: reserved_for.map(id),
            writer: None,
        }
    }

    struct Case {
        record: ShardRecord,
        owner_live: bool,
        elections: bool,
        inboxes: BTreeMap<CandidateId, Inbox>,
    }

    fn decide(case: &Case, to: &str, frozen: bool) -> Result<MovePlan, ElectionError> {
        decide_move(&MoveInput {
            shard: ShardId::new(7),
            elections: case.elections,
            frozen,
            record: &case.record,
            owner_live: case.owner_live,
            to: &id(to),
            to_live: to != "gone",
            to_drained: to == "drained",
            to_weight: Weight::new(u32::from(to != "weightless")),
            inboxes: &case.inboxes,
            writer: AttemptId {
                candidate: id("operator"),
                seq: 0,
            },
        })
    }

    fn case(record: ShardRecord, owner_live: bool) -> Case {
        Case {
            record,
            owner_live,
            elections: true,
            inboxes: BTreeMap::new(),
        }
    }

    #[test]
    fn no_move_is_written_while_elections_are_disabled() {
        // Whatever holds the shard: its owner would never hand it over, nobody would acquire
        // a reservation, and the coordinator withdraws every request.
        for (record, live) in [
            (owned("a", None), true),
            (vacant(None), false),
            (vacant(Some("c")), false),
            (owned("a", None), false),
        ] {
            let mut c = case(record, live);
            c.elections = false;
            assert!(matches!(
                decide(&c, "b", true),
                Err(ElectionError::OperatorRefused { reason }) if reason.contains("elections")
            ));
            c.elections = true;
            assert!(
                decide(&c, "b", true).is_ok(),
                "enabled, the same move is made"
            );
        }
    }

    #[test]
    fn a_live_owner_is_asked_and_the_ballot_does_not_change() {
        let c = case(owned("a", None), true);
        let p = decide(&c, "b", true).unwrap();
        assert_eq!(p.outcome, ShardMove::Requested { from: id("a") });
        let rec = p.record.unwrap();
        assert_eq!(rec.move_to, Some(id("b")));
        assert_eq!(rec.ballot, Ballot::new(4));
        assert_eq!(
            rec.owner, c.record.owner,
            "the owner keeps it until it hands it over"
        );
        assert_eq!(
            p.inboxes,
            vec![(
                id("a"),
                Inbox {
                    seq: 1,
                    reserved: vec![],
                    hand_over: vec![(ShardId::new(7), id("b"))],
                }
            )]
        );
    }

    #[test]
    fn an_earlier_request_for_the_shard_is_replaced_not_added_to() {
        let mut c = case(owned("a", Some("c")), true);
        c.inboxes.insert(
            id("a"),
            Inbox {
                seq: 5,
                reserved: vec![],
                hand_over: vec![(ShardId::new(3), id("c")), (ShardId::new(7), id("c"))],
            },
        );
        let p = decide(&c, "b", true).unwrap();
        let (_, inbox) = &p.inboxes[0];
        assert_eq!(
            inbox.hand_over,
            vec![(ShardId::new(3), id("c")), (ShardId::new(7), id("b"))]
        );
        assert_eq!(inbox.seq, 6);
    }

    #[test]
    fn moving_a_shard_to_its_owner_withdraws_a_pending_request() {
        let mut c = case(owned("a", Some("c")), true);
        c.inboxes.insert(
            id("a"),
            Inbox {
                seq: 2,
                reserved: vec![],
                hand_over: vec![(ShardId::new(7), id("c"))],
            },
        );
        let p = decide(&c, "a", true).unwrap();
        assert_eq!(p.outcome, ShardMove::AlreadyThere);
        assert_eq!(p.record.and_then(|r| r.move_to), None);
        assert_eq!(p.inboxes[0].1.hand_over, vec![]);
        // Without a pending request, nothing is written at all.
        let quiet = decide(&case(owned("a", None), true), "a", true).unwrap();
        assert_eq!(quiet.record, None);
        assert!(quiet.inboxes.is_empty());
    }

    #[test]
    fn a_shard_nobody_live_holds_is_reserved_at_once() {
        for (record, owner_live) in [
            (vacant(None), false),
            (vacant(Some("c")), false),
            // Owned at an epoch that ended: nobody's (docs/design.md §12.2).
            (owned("dead", Some("c")), false),
        ] {
            let mut c = case(record, owner_live);
            c.inboxes.insert(
                id("c"),
                Inbox {
                    seq: 1,
                    reserved: vec![ShardId::new(7)],
                    hand_over: vec![],
                },
            );
            let p = decide(&c, "b", true).unwrap();
            assert_eq!(p.outcome, ShardMove::Reserved);
            let rec = p.record.unwrap();
            assert_eq!(
                (rec.owner, rec.move_to, rec.reserved_for, rec.ballot),
                (None, None, Some(id("b")), Ballot::new(4))
            );
            let b = p.inboxes.iter().find(|(w, _)| *w == id("b"));
            assert_eq!(
                b.map(|(_, i)| i.reserved.clone()),
                Some(vec![ShardId::new(7)])
            );
            let c_inbox = p.inboxes.iter().find(|(w, _)| *w == id("c"));
            let had_reservation = c.record.reserved_for.is_some();
            assert_eq!(
                c_inbox.map(|(_, i)| i.reserved.is_empty()),
                had_reservation.then_some(true),
                "the previous holder's reservation leaves its inbox"
            );
        }
    }

    #[test]
    fn a_reservation_already_for_the_target_changes_nothing() {
        let p = decide(&case(vacant(Some("b")), false), "b", true).unwrap();
        assert_eq!(p.outcome, ShardMove::AlreadyThere);
        assert_eq!((p.record, p.inboxes.len()), (None, 0));
    }

    #[test]
    fn refusals_placement_not_frozen_a_target_gone_or_drained() {
        let c = case(owned("a", None), true);
        assert!(matches!(
            decide(&c, "b", false),
            Err(ElectionError::OperatorRefused { reason }) if reason.contains("set_frozen(true)")
        ));
        assert!(matches!(
            decide(&c, "gone", true),
            Err(ElectionError::NotRegistered { candidate }) if candidate == id("gone")
        ));
        assert!(matches!(
            decide(&c, "drained", true),
            Err(ElectionError::OperatorRefused { reason }) if reason.contains("undrain")
        ));
        // A member that drained itself (weight 0) would only see the move withdrawn.
        assert!(matches!(
            decide(&c, "weightless", true),
            Err(ElectionError::OperatorRefused { reason }) if reason.contains("weight 0")
        ));
    }

    #[test]
    fn a_move_into_a_full_inbox_is_refused_and_writes_nothing() {
        use crate::core::shard::budget::INBOX_BUDGET;
        let full = Inbox {
            seq: 1,
            reserved: (0..u32::try_from(INBOX_BUDGET).unwrap() / 3)
                .map(|s| ShardId::new(s + 1000))
                .collect(),
            hand_over: vec![],
        };
        // Reserved for the target: its inbox is full.
        let mut c = case(vacant(None), false);
        c.inboxes.insert(id("b"), full.clone());
        assert!(matches!(
            decide(&c, "b", true),
            Err(ElectionError::OperatorRefused { reason }) if reason.contains("inbox is full")
        ));
        // Asked of the owner: its inbox is full.
        let mut c = case(owned("a", None), true);
        c.inboxes.insert(id("a"), full);
        assert!(matches!(
            decide(&c, "b", true),
            Err(ElectionError::OperatorRefused { reason }) if reason.contains("inbox is full")
        ));
    }
}
