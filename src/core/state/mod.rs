//! A candidate's local (never persisted) election state.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::{AttemptId, LeaderRecord};

use super::Adoption;

/// How many unconfirmed attempts are remembered. An attempt forgotten here that did commit is
/// found in the record without being recognised, and is then treated like anyone else's
/// record: safe, at the cost of one lease.
const MAX_PENDING: usize = 16;

/// A leadership this candidate believes in, dated on its own clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tenure {
    pub(crate) ballot: Ballot,
    pub(crate) renewal: u64,
    pub(crate) lease: Duration,
    /// The belief ends here: attempt start + lease × (1 − ρ) / (1 + ρ).
    pub(crate) valid_until: LocalInstant,
    /// Start of the attempt that acquired this ballot.
    pub(crate) acquired_at: LocalInstant,
    /// The drain under way: set only by the adoption of a renewal whose commit is confirmed
    /// and that closed the guard (docs/design.md §10.6), so the grace counts from a guard
    /// the runner really closed.
    pub(crate) drain: Option<Drain>,
}

/// A leader's drain: since when its guard accepts no new work, and the request it closed for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Drain {
    /// The start of the first cycle whose committed renewal closed the guard.
    pub(crate) since: LocalInstant,
    /// The request it closed for, with the name an operator's request directs the vacancy
    /// to (`None`: it steps down because it is not eligible). A different request read later
    /// is seen for the first time (a directed one is then checked for its target), though
    /// the grace still counts from `since`: the guard closed once.
    pub(crate) request: Option<(crate::record::Party, Option<String>)>,
}

/// This candidate's role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Follower,
    Leader(Tenure),
}

/// The observation identity this candidate is timing, and since when.
///
/// The identity is (ballot, renewal) and the attempt that wrote it. Committed records never
/// share a (ballot, renewal) with different writers; records that do are a write read back
/// inside its own, uncommitted transaction (read-your-writes), possibly by another candidate
/// in a composed transaction, and a later real write of the same numbers. Timing the first
/// must not count for the second (docs/design.md §10.1): the writer tells them apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    pub(crate) ballot: Ballot,
    pub(crate) renewal: u64,
    pub(crate) writer: Option<AttemptId>,
    /// A reading taken after the read that first saw this identity.
    pub(crate) first_seen: LocalInstant,
    /// The candidates the version policy ranks ahead of this one, as the registry showed
    /// them while a takeover of this observation was due or soon due, each with the heartbeat
    /// its registration showed and since when: while one of them still heartbeats, it is the
    /// one to take over (docs/design.md §4).
    pub(crate) heard: Vec<Heard>,
}

/// A candidate ranked ahead of this one, and the last heartbeat seen of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Heard {
    pub(crate) id: CandidateId,
    pub(crate) heartbeat: u64,
    /// A reading taken after the read that first showed this heartbeat.
    pub(crate) since: LocalInstant,
}

impl Observed {
    /// Notes that a read returned `rec`, `read_at` being a reading taken after the read: the
    /// timing restarts whenever the observation identity changed.
    pub(crate) fn note(slot: &mut Option<Observed>, rec: &LeaderRecord, read_at: LocalInstant) {
        let same = slot.as_ref().is_some_and(|o| o.is_of(rec));
        if !same {
            *slot = Some(Observed {
                ballot: rec.ballot,
                renewal: rec.renewal,
                writer: rec.writer.clone(),
                first_seen: read_at,
                heard: Vec::new(),
            });
        }
    }

    /// Whether `rec`, observed as this, has been unchanged for a full lease at `now`: the
    /// lapse rule ([`lapse_at`](super::lapse_at)) applied to this observation.
    pub(crate) fn lapsed(&self, rec: &LeaderRecord, now: LocalInstant) -> bool {
        self.is_of(rec) && now >= super::lapse_at(self.first_seen, rec.lease)
    }

    /// Whether `rec` has this observation identity.
    fn is_of(&self, rec: &LeaderRecord) -> bool {
        self.ballot == rec.ballot && self.renewal == rec.renewal && self.writer == rec.writer
    }
}

/// A write whose commit is not (yet) confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingAttempt {
    pub(crate) seq: u64,
    pub(crate) started_at: LocalInstant,
    /// Whether finding it committed makes this candidate leader.
    pub(crate) promotes: bool,
    /// The read version of the attempt's transaction, when the store reports one. A record
    /// showing this attempt, read at this same version, is the transaction's own uncommitted
    /// write (read-your-writes), never evidence that it committed.
    pub(crate) read_version: Option<u64>,
}

/// Everything one candidate incarnation knows locally.
#[derive(Clone, Debug)]
pub(crate) struct LocalState {
    id: CandidateId,
    role: Role,
    observed: Option<Observed>,
    pending: VecDeque<PendingAttempt>,
    next_seq: u64,
    busy: bool,
    /// When the leader's guard closed (it takes no new work: a drain began), as whoever
    /// carries the leadership out saw it (the runner), `None` while it takes work. The grace
    /// counts from here: the guard's real closing, after its commit was confirmed.
    guard_closed_at: Option<LocalInstant>,
    /// The ballot this candidate released (stepped down, handed over, resigned): until the
    /// record stops naming it at this ballot, the vacancy has not landed and is written again.
    released: Option<Ballot>,
    /// The last ballot this candidate believed it led (kept after a demotion): a
    /// resignation may hand over only a ballot this very candidate held.
    held: Option<Ballot>,
    /// A cycle of this candidate whose transaction has not ended (its `Cycle` is alive).
    cycle_open: bool,
}

impl LocalState {
    pub(crate) fn new(id: CandidateId) -> Self {
        LocalState {
            id,
            role: Role::Follower,
            observed: None,
            pending: VecDeque::new(),
            next_seq: 1,
            busy: false,
            guard_closed_at: None,
            released: None,
            held: None,
            cycle_open: false,
        }
    }

    /// Starts a cycle. At most one cycle of a candidate is unsettled at a time: a read inside
    /// the transaction of an unsettled cycle may return that cycle's own uncommitted write
    /// (docs/design.md §10.1).
    ///
    /// # Errors
    ///
    /// [`ElectionError::CycleInProgress`] while another cycle is unsettled.
    pub(crate) fn open_cycle(&mut self) -> Result<(), ElectionError> {
        if self.cycle_open {
            return Err(ElectionError::CycleInProgress {
                candidate: self.id.clone(),
            });
        }
        self.cycle_open = true;
        Ok(())
    }

    /// Settles the unsettled cycle: its transaction ended (it was adopted or dropped).
    pub(crate) fn close_cycle(&mut self) {
        self.cycle_open = false;
    }

    /// Whether this candidate believed, at some point, that it led `ballot`.
    pub(crate) fn held(&self, ballot: Ballot) -> bool {
        self.held == Some(ballot)
    }

    /// Remembers a release written at `ballot`, so that it is written again if it never lands.
    pub(crate) fn note_release(&mut self, ballot: Ballot) {
        self.released = Some(ballot);
    }

    /// Whether this candidate released `rec`'s ballot while the record still names it as
    /// owner: the vacancy never landed. Forgets the release once the record has moved on.
    pub(crate) fn unwritten_release(&mut self, rec: &LeaderRecord) -> bool {
        let unwritten = self
            .released
            .is_some_and(|b| rec.ballot == b && rec.is_owned_by(&self.id));
        if !unwritten {
            self.released = None;
        }
        unwritten
    }

    /// Caps the belief held now (if any) when this leader is about to write a lease shorter
    /// than the one the belief was computed from: it then ends no later than `valid_until`,
    /// the end the shorter lease gives, whatever becomes of the write.
    pub(crate) fn cap_belief(&mut self, lease: Duration, valid_until: LocalInstant) {
        if let Role::Leader(t) = &mut self.role {
            // (`<=` would be the same rule: an equal end leaves the belief as it is.)
            if lease < t.lease && valid_until < t.valid_until {
                t.valid_until = valid_until;
            }
        }
    }

    pub(crate) fn id(&self) -> &CandidateId {
        &self.id
    }

    pub(crate) fn role(&self) -> &Role {
        &self.role
    }

    pub(crate) fn tenure(&self) -> Option<&Tenure> {
        match &self.role {
            Role::Leader(t) => Some(t),
            Role::Follower => None,
        }
    }

    pub(crate) fn observed(&self) -> Option<&Observed> {
        self.observed.as_ref()
    }

    pub(crate) fn busy(&self) -> bool {
        self.busy
    }

    pub(crate) fn set_busy(&mut self, busy: bool) {
        self.busy = busy;
    }

    pub(crate) fn guard_closed_at(&self) -> Option<LocalInstant> {
        self.guard_closed_at
    }

    pub(crate) fn set_guard_closed_at(&mut self, at: Option<LocalInstant>) {
        self.guard_closed_at = at;
    }

    /// The valid tenure at `now`, if any.
    pub(crate) fn valid_tenure(&self, now: LocalInstant) -> Option<&Tenure> {
        self.tenure().filter(|t| now < t.valid_until)
    }

    pub(crate) fn next_seq(&mut self) -> Result<u64, ElectionError> {
        let seq = self.next_seq;
        self.next_seq = seq
            .checked_add(1)
            .ok_or(ElectionError::CounterExhausted { what: "attempt" })?;
        Ok(seq)
    }

    pub(crate) fn push_pending(&mut self, p: PendingAttempt) {
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back(p);
    }

    #[cfg(test)]
    pub(crate) fn pending(&self) -> &VecDeque<PendingAttempt> {
        &self.pending
    }

    /// Stops believing in any leadership, at once. Unconfirmed promotions are forgotten, so a
    /// late confirmation cannot revive the belief.
    pub(crate) fn demote(&mut self) {
        self.role = Role::Follower;
        self.pending.retain(|p| !p.promotes);
    }

    /// If the record was last written by one of this candidate's unconfirmed attempts, that
    /// attempt committed: adopt it, dated from the attempt's start.
    ///
    /// # Errors
    ///
    /// [`ElectionError::CycleInProgress`] if the record was read at the very read version
    /// of the attempt that wrote it: this is that transaction's own uncommitted write, read
    /// back (the caller started a second cycle before the first one's transaction ended).
    pub(crate) fn recognize_own_write(
        &mut self,
        rec: &LeaderRecord,
        cfg: &ElectionConfig,
        read_version: Option<u64>,
    ) -> Result<(), ElectionError> {
        let Some(w) = rec.writer.as_ref() else {
            return Ok(());
        };
        if w.candidate != self.id {
            return Ok(());
        }
        let Some(p) = self.pending.iter().find(|p| p.seq == w.seq).cloned() else {
            return Ok(());
        };
        if p.read_version.is_some() && p.read_version == read_version {
            return Err(ElectionError::CycleInProgress {
                candidate: self.id.clone(),
            });
        }
        self.pending.retain(|q| q.seq > w.seq);
        if !p.promotes || !rec.is_owned_by(&self.id) {
            return Ok(());
        }
        let same_term = self.tenure().filter(|t| t.ballot == rec.ballot).cloned();
        let tenure = Tenure {
            ballot: rec.ballot,
            renewal: rec.renewal,
            lease: rec.lease,
            valid_until: p.started_at.saturating_add(cfg.local_validity(rec.lease)),
            acquired_at: same_term.as_ref().map_or(p.started_at, |t| t.acquired_at),
            drain: same_term.and_then(|t| t.drain),
        };
        self.install(tenure);
        Ok(())
    }

    /// Demotes unless the record still is exactly what this leader last wrote and the belief
    /// is still valid at `t0`.
    pub(crate) fn check_tenure(&mut self, rec: &LeaderRecord, t0: LocalInstant) {
        let keep = self.tenure().is_some_and(|t| {
            t0 < t.valid_until
                && rec.is_owned_by(&self.id)
                && rec.ballot == t.ballot
                && rec.renewal == t.renewal
        });
        if !keep && self.tenure().is_some() {
            self.demote();
        }
    }

    /// Records that the read returned `rec`; `read_at` was taken after the read.
    pub(crate) fn observe(&mut self, rec: &LeaderRecord, read_at: LocalInstant) {
        Observed::note(&mut self.observed, rec, read_at);
    }

    /// **The deference rule**, the one place it is written: notes the heartbeats of the
    /// candidates ranked ahead of this one (`ahead`: id and heartbeat, as a registry read that
    /// ended before `read_at` shows them), and returns the instant from which every one of
    /// them will have shown the same heartbeat for `silence`: none of them still heartbeats,
    /// so none of them is there to take over. `None` when nobody ranks ahead. A candidate
    /// passed over this way is one whose heartbeat has not changed for `silence` on this
    /// candidate's clock; one that heartbeats keeps its turn, however long its own wait for
    /// the lapse still is.
    pub(crate) fn silent_ahead_from(
        &mut self,
        ahead: &[(&CandidateId, u64)],
        read_at: LocalInstant,
        silence: Duration,
    ) -> Option<LocalInstant> {
        let o = self.observed.as_mut()?;
        let mut heard = Vec::with_capacity(ahead.len());
        for &(id, heartbeat) in ahead {
            let since = o
                .heard
                .iter()
                .find(|h| &h.id == id && h.heartbeat == heartbeat)
                .map_or(read_at, |h| h.since);
            heard.push(Heard {
                id: id.clone(),
                heartbeat,
                since,
            });
        }
        o.heard = heard;
        o.heard
            .iter()
            .map(|h| h.since.saturating_add(silence))
            .max()
    }

    /// Adopts leadership prepared by an attempt whose commit is now confirmed. Ignored if the
    /// attempt was forgotten (a demotion since) or a newer tenure is already held.
    pub(crate) fn adopt(&mut self, adoption: &Adoption) -> bool {
        let known = self
            .pending
            .iter()
            .any(|p| p.seq == adoption.seq && p.promotes);
        if !known {
            return false;
        }
        self.pending.retain(|p| p.seq > adoption.seq);
        self.install(adoption.tenure.clone())
    }

    fn install(&mut self, tenure: Tenure) -> bool {
        let newer = self
            .tenure()
            .is_none_or(|t| (tenure.ballot, tenure.renewal) > (t.ballot, t.renewal));
        if newer {
            self.held = Some(tenure.ballot);
            self.role = Role::Leader(tenure);
            self.released = None;
        }
        newer
    }
}

#[cfg(test)]
mod tests;
