//! The leader as one runner knows it, and how each record it sees changes that: the one place
//! leader changes are classified.

use super::types::{ChangeReason, LeaderChange, LeaderInfo};
use crate::ids::{Ballot, CandidateId};
use crate::record::{LeaderRecord, Named};

/// The last leader record a runner saw, and the leader it last published.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeaderView {
    me: Option<CandidateId>,
    record: Option<LeaderRecord>,
    leader: Option<LeaderInfo>,
}

impl LeaderView {
    /// The view of candidate `me` (`None` for an observer).
    pub(crate) fn new(me: Option<CandidateId>) -> Self {
        LeaderView {
            me,
            record: None,
            leader: None,
        }
    }

    /// The last leader record seen.
    pub(crate) fn record(&self) -> Option<&LeaderRecord> {
        self.record.as_ref()
    }

    /// Whether `record` differs from the last one seen in anything but a plain renewal: who
    /// owns it, at which ballot, who asked for it or holds the vacancy, or the payload.
    pub(crate) fn differs(&self, record: &LeaderRecord) -> bool {
        self.record.as_ref().is_none_or(|prev| {
            prev.ballot() != record.ballot()
                || prev.owner() != record.owner()
                || prev.handover != record.handover
                || prev.reservation != record.reservation
                || prev.payload() != record.payload()
        })
    }

    /// A leader record was read (or written). `leading` is the ballot this process leads, if
    /// any; `lapsed` says the record's owner is known to have lapsed. `fallback` is the reason
    /// reported when this process's own record no longer counts as leading; `first` the reason
    /// reported when no earlier record was seen (the writer of a record knows what it did).
    /// Returns the change to publish, if the leader changed.
    pub(crate) fn observe(
        &mut self,
        record: &LeaderRecord,
        leading: Option<Ballot>,
        lapsed: bool,
        fallback: ChangeReason,
        first: ChangeReason,
    ) -> Option<LeaderChange> {
        let own = record
            .owner()
            .is_some_and(|o| Some(o.id()) == self.me.as_ref());
        let new = if lapsed || (own && leading != Some(record.ballot())) {
            None
        } else {
            LeaderInfo::of(record)
        };
        let reason = match (&self.record, &new) {
            _ if new.is_none() && record.owner().is_none() => match record.operator_hold() {
                Some(operator) => ChangeReason::ForcedVacant {
                    operator: operator.clone(),
                },
                None => ChangeReason::SteppedDown {
                    reserved_for: record.reservation().map(|r| r.id().clone()),
                },
            },
            (_, None) if lapsed => ChangeReason::LeaseLapsed,
            (_, None) => fallback,
            (None, Some(_)) => first,
            (Some(prev), Some(n)) => {
                if n.ballot > prev.ballot() {
                    if prev.reservation().map(Named::id) == Some(&n.id) {
                        ChangeReason::HandedOver
                    } else if prev.owner().is_some() {
                        ChangeReason::Replaced
                    } else {
                        ChangeReason::Acquired
                    }
                } else if self.leader.as_ref().is_some_and(|l| l.id == n.id) {
                    ChangeReason::PayloadChanged
                } else {
                    ChangeReason::Discovered
                }
            }
        };
        self.record = Some(record.clone());
        self.set(new, reason)
    }

    /// Re-evaluates the last record (after this process's own leadership ended).
    pub(crate) fn refresh(
        &mut self,
        leading: Option<Ballot>,
        fallback: ChangeReason,
    ) -> Option<LeaderChange> {
        let record = self.record.clone()?;
        self.observe(&record, leading, false, fallback, ChangeReason::Discovered)
    }

    fn set(&mut self, new: Option<LeaderInfo>, reason: ChangeReason) -> Option<LeaderChange> {
        if new == self.leader {
            return None;
        }
        let old = std::mem::replace(&mut self.leader, new.clone());
        Some(LeaderChange { old, new, reason })
    }
}
