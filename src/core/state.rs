//! A candidate's local (never persisted) election state.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::LeaderRecord;

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
    /// When this leader first saw the pending handover request.
    pub(crate) handover_seen_at: Option<LocalInstant>,
}

/// This candidate's role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Follower,
    Leader(Tenure),
}

/// The observation identity this candidate is timing, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    pub(crate) ballot: Ballot,
    pub(crate) renewal: u64,
    /// A reading taken after the read that first saw this identity.
    pub(crate) first_seen: LocalInstant,
    /// This candidate's takeover rank for this observation, once looked up.
    pub(crate) rank: Option<u32>,
}

impl Observed {
    /// Notes that a read returned `rec`, `read_at` being a reading taken after the read: the
    /// timing restarts whenever the observation identity changed.
    pub(crate) fn note(slot: &mut Option<Observed>, rec: &LeaderRecord, read_at: LocalInstant) {
        let same = slot
            .as_ref()
            .is_some_and(|o| o.ballot == rec.ballot && o.renewal == rec.renewal);
        if !same {
            *slot = Some(Observed {
                ballot: rec.ballot,
                renewal: rec.renewal,
                first_seen: read_at,
                rank: None,
            });
        }
    }

    /// Whether `rec`, observed as this, has been unchanged for a full lease at `now`: the
    /// lapse rule ([`lapse_at`](super::lapse_at)) applied to this observation.
    pub(crate) fn lapsed(&self, rec: &LeaderRecord, now: LocalInstant) -> bool {
        (self.ballot, self.renewal) == (rec.ballot, rec.renewal)
            && now >= super::lapse_at(self.first_seen, rec.lease)
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
            released: None,
            held: None,
            cycle_open: false,
        }
    }

    /// Starts a cycle. At most one cycle of a candidate is unsettled at a time: a read inside
    /// the transaction of an unsettled cycle may return that cycle's own uncommitted write
    /// (DESIGN §10.1).
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
            handover_seen_at: same_term.and_then(|t| t.handover_seen_at),
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

    /// Stores the takeover rank for the current observation.
    pub(crate) fn set_rank(&mut self, rank: u32) {
        if let Some(o) = self.observed.as_mut() {
            o.rank = Some(rank);
        }
    }

    /// When this leader first saw the current handover request (noting `t0` if now).
    pub(crate) fn note_handover_request(&mut self, t0: LocalInstant) -> LocalInstant {
        match &mut self.role {
            Role::Leader(t) => *t.handover_seen_at.get_or_insert(t0),
            Role::Follower => t0,
        }
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
mod tests {
    //! The local state's bookkeeping, at its boundaries: what the table tests of the core
    //! reach only through whole decisions.

    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

    use super::*;
    use crate::ids::Priority;
    use crate::record::{AttemptId, Named};

    fn id(s: &str) -> CandidateId {
        CandidateId::parse(s).unwrap()
    }

    fn at(ms: u64) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_millis(ms))
    }

    fn tenure(ballot: u64, renewal: u64, until_ms: u64) -> Tenure {
        Tenure {
            ballot: Ballot::new(ballot),
            renewal,
            lease: Duration::from_secs(10),
            valid_until: at(until_ms),
            acquired_at: at(0),
            handover_seen_at: None,
        }
    }

    fn pending(seq: u64, promotes: bool) -> PendingAttempt {
        PendingAttempt {
            seq,
            started_at: at(seq * 1_000),
            promotes,
            read_version: None,
        }
    }

    fn record_by(me: &str, ballot: u64, renewal: u64, seq: u64, owned: bool) -> LeaderRecord {
        LeaderRecord {
            ballot: Ballot::new(ballot),
            owner: owned.then(|| Named::new(id(me), Priority::new(1))),
            renewal,
            lease: Duration::from_secs(10),
            handover: None,
            reservation: None,
            payload: None,
            writer: Some(AttemptId {
                candidate: id(me),
                seq,
            }),
        }
    }

    fn seqs(st: &LocalState) -> Vec<u64> {
        st.pending().iter().map(|p| p.seq).collect()
    }

    #[test]
    fn one_open_cycle_at_a_time_until_it_is_settled() {
        let mut st = LocalState::new(id("me"));
        assert!(st.open_cycle().is_ok());
        assert!(matches!(
            st.open_cycle(),
            Err(ElectionError::CycleInProgress { .. })
        ));
        st.close_cycle();
        assert!(st.open_cycle().is_ok());
    }

    #[test]
    fn attempt_numbers_start_at_one_and_never_repeat() {
        let mut st = LocalState::new(id("me"));
        assert_eq!(st.next_seq().unwrap(), 1);
        assert_eq!(st.next_seq().unwrap(), 2);
        st.next_seq = u64::MAX;
        assert!(matches!(
            st.next_seq(),
            Err(ElectionError::CounterExhausted { .. })
        ));
    }

    #[test]
    fn the_pending_list_keeps_the_newest_sixteen() {
        let mut st = LocalState::new(id("me"));
        for seq in 1..=20 {
            st.push_pending(pending(seq, true));
        }
        assert_eq!(seqs(&st), (5..=20).collect::<Vec<_>>());
    }

    #[test]
    fn a_belief_is_valid_strictly_before_its_end() {
        let mut st = LocalState::new(id("me"));
        st.role = Role::Leader(tenure(3, 1, 500));
        assert!(st.valid_tenure(at(499)).is_some());
        assert!(st.valid_tenure(at(500)).is_none());
        // A belief that ended is gone at once in the cycle that sees it.
        let rec = record_by("me", 3, 1, 1, true);
        st.check_tenure(&rec, at(500));
        assert!(st.tenure().is_none());
    }

    #[test]
    fn only_a_strictly_shorter_lease_caps_and_only_downwards() {
        let mut st = LocalState::new(id("me"));
        st.role = Role::Leader(tenure(3, 1, 9_000));
        // The same lease never moves the end, even to an earlier instant.
        st.cap_belief(Duration::from_secs(10), at(4_000));
        assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(9_000)));
        // A shorter lease whose end comes later changes nothing either.
        st.cap_belief(Duration::from_secs(1), at(9_500));
        assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(9_000)));
        st.cap_belief(Duration::from_secs(1), at(2_000));
        assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(2_000)));
        // (Capping to exactly the current end would change nothing: `<` and `<=` agree there.)
    }

    #[test]
    fn recognising_an_attempt_forgets_it_and_every_older_one_but_keeps_newer_ones() {
        let cfg = ElectionConfig::default();
        let mut st = LocalState::new(id("me"));
        for seq in 1..=3 {
            st.push_pending(pending(seq, true));
        }
        st.recognize_own_write(&record_by("me", 4, 7, 2, true), &cfg, None)
            .unwrap();
        assert_eq!(seqs(&st), vec![3]);
        let t = st.tenure().unwrap();
        assert_eq!(
            (t.ballot, t.renewal, t.acquired_at),
            (Ballot::new(4), 7, at(2_000))
        );
    }

    #[test]
    fn a_recognised_attempt_that_does_not_promote_never_makes_a_leader() {
        let cfg = ElectionConfig::default();
        let mut st = LocalState::new(id("me"));
        st.push_pending(pending(5, false));
        // Even if the record names this candidate (it owned it before releasing).
        st.recognize_own_write(&record_by("me", 4, 7, 5, true), &cfg, None)
            .unwrap();
        assert!(st.tenure().is_none());
        assert!(st.pending().is_empty());
    }

    #[test]
    fn a_recognised_renewal_keeps_the_term_it_renews() {
        let cfg = ElectionConfig::default();
        let mut st = LocalState::new(id("me"));
        let mut t = tenure(4, 6, 9_000);
        t.acquired_at = at(100);
        t.handover_seen_at = Some(at(200));
        st.role = Role::Leader(t);
        st.push_pending(pending(3, true));
        st.recognize_own_write(&record_by("me", 4, 7, 3, true), &cfg, None)
            .unwrap();
        let t = st.tenure().unwrap();
        assert_eq!(t.renewal, 7);
        assert_eq!(
            t.acquired_at,
            at(100),
            "the term started at its acquisition"
        );
        assert_eq!(t.handover_seen_at, Some(at(200)));
        assert_eq!(
            t.valid_until,
            at(3_000).saturating_add(cfg.local_validity(Duration::from_secs(10)))
        );
    }

    #[test]
    fn adopting_needs_the_very_attempt_and_forgets_it_and_older_ones() {
        let mut st = LocalState::new(id("me"));
        for seq in 1..=3 {
            st.push_pending(pending(seq, seq != 1));
        }
        // An attempt that is not pending (forgotten, or never made) is not adopted, whatever
        // else is pending.
        let stranger = Adoption {
            seq: 7,
            tenure: tenure(4, 8, 9_000),
        };
        assert!(!st.adopt(&stranger));
        // A pending attempt that does not promote is not adopted either.
        assert!(!st.adopt(&Adoption {
            seq: 1,
            tenure: tenure(4, 8, 9_000),
        }));
        assert!(st.adopt(&Adoption {
            seq: 2,
            tenure: tenure(4, 8, 9_000),
        }));
        assert_eq!(seqs(&st), vec![3]);
    }

    #[test]
    fn only_a_newer_identity_replaces_a_belief() {
        let mut st = LocalState::new(id("me"));
        assert!(st.install(tenure(4, 8, 9_000)));
        assert!(
            !st.install(tenure(4, 8, 9_500)),
            "the same identity is not newer"
        );
        assert_eq!(st.tenure().map(|t| t.valid_until), Some(at(9_000)));
        assert!(!st.install(tenure(4, 7, 9_500)));
        assert!(st.install(tenure(4, 9, 9_500)));
        assert!(st.held(Ballot::new(4)));
    }
}
