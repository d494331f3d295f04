//! [`Candidate`]: one process incarnation's local view of an election.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use crate::clock::{Clock, LocalInstant, SystemClock};
use crate::core::runner::{Belief, Ctx};
use crate::core::{LocalState, UnhealthyPolicy};
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::{Eligibility, LeaderState, MAX_METADATA_BYTES, MAX_PAYLOAD_BYTES};
use cycle::{Cycle, ElectionResult};

pub(crate) mod cycle;

/// One process incarnation taking part in an election: its id, priority, payload and
/// metadata, its injected clock, and its local election state (what it believes, what it is
/// timing, which of its writes are unconfirmed). Cheap to clone; clones share the state.
///
/// Local state is never persisted. A restarted process must build a new `Candidate` with a
/// new [`CandidateId`]. A candidate takes part in one election: the first
/// [`LeaderElection`](crate::LeaderElection) it is used with binds it, and any other one
/// refuses it with [`ElectionError::CandidateOfAnotherElection`] (build one `Candidate` per
/// election; they may share an id).
#[derive(Clone)]
pub struct Candidate {
    inner: Arc<Inner>,
}

struct Inner {
    id: CandidateId,
    clock: Arc<dyn Clock>,
    /// The election this candidate takes part in (its leader key), once it took part.
    election: OnceLock<Vec<u8>>,
    local: Mutex<Local>,
}

#[derive(Debug)]
pub(crate) struct Local {
    pub(crate) core: LocalState,
    pub(crate) priority: Priority,
    pub(crate) payload: Option<Vec<u8>>,
    pub(crate) metadata: Option<Vec<u8>>,
    /// Whether it may lead, as its health says (an operator's mark may exclude it too).
    pub(crate) eligibility: Eligibility,
    /// What it does when it leads, is not eligible, and nobody live is.
    pub(crate) unhealthy: UnhealthyPolicy,
    /// The version it registers (docs/design.md §14.1).
    pub(crate) version: Option<semver::Version>,
}

impl fmt::Debug for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let local = self.lock();
        f.debug_struct("Candidate")
            .field("id", &self.inner.id)
            .field("priority", &local.priority)
            .field("role", local.core.role())
            .finish_non_exhaustive()
    }
}

/// What this candidate believes about its own leadership.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leadership {
    /// The ballot: the fencing token to attach to leader-only work.
    pub ballot: Ballot,
    /// The local instant at which the belief ends unless renewed.
    pub valid_until: LocalInstant,
    /// How long the belief lasts from now.
    pub remaining: Duration,
}

impl Candidate {
    /// A candidate on the operating system's monotonic clock.
    pub fn new(id: CandidateId, priority: Priority) -> Self {
        Self::with_clock(id, priority, Arc::new(SystemClock))
    }

    /// A candidate on an injected clock.
    pub fn with_clock(id: CandidateId, priority: Priority, clock: Arc<dyn Clock>) -> Self {
        Candidate {
            inner: Arc::new(Inner {
                local: Mutex::new(Local {
                    core: LocalState::new(id.clone()),
                    priority,
                    payload: None,
                    metadata: None,
                    eligibility: Eligibility::Eligible,
                    unhealthy: UnhealthyPolicy::Hold,
                    version: None,
                }),
                id,
                clock,
                election: OnceLock::new(),
            }),
        }
    }

    /// The candidate's id.
    pub fn id(&self) -> &CandidateId {
        &self.inner.id
    }

    /// The candidate's clock reading now.
    pub fn now(&self) -> LocalInstant {
        self.inner.clock.now()
    }

    /// The candidate's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The priority written at the next heartbeat or cycle.
    pub fn priority(&self) -> Priority {
        self.lock().priority
    }

    /// Changes the priority; it takes effect at the next heartbeat or cycle.
    pub fn set_priority(&self, priority: Priority) {
        self.lock().priority = priority;
    }

    /// Sets the payload this candidate publishes in the leader record while it leads (for
    /// example, the address where it serves).
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] above [`MAX_PAYLOAD_BYTES`]; the old payload is kept.
    pub fn set_payload(&self, payload: Option<Vec<u8>>) -> Result<(), ElectionError> {
        check_size("leader payload", payload.as_deref(), MAX_PAYLOAD_BYTES)?;
        self.lock().payload = payload;
        Ok(())
    }

    /// Sets the metadata stored in this candidate's registration record.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] above [`MAX_METADATA_BYTES`]; the old metadata is kept.
    pub fn set_metadata(&self, metadata: Option<Vec<u8>>) -> Result<(), ElectionError> {
        check_size(
            "candidate metadata",
            metadata.as_deref(),
            MAX_METADATA_BYTES,
        )?;
        self.lock().metadata = metadata;
        Ok(())
    }

    /// Says whether this candidate may lead (docs/design.md §13): its health, as the application
    /// judges it. Written into its registration at its next heartbeat or cycle; an ineligible
    /// candidate never acquires, never requests a handover and is skipped by every
    /// reservation, and an ineligible leader hands over to the best live eligible candidate
    /// (or, with nobody eligible, keeps leading under the `hold` policy). The tokio runner
    /// sets it from its readiness and leader health checks; call it yourself in the manual
    /// flow. `reason` (at most [`MAX_REASON_BYTES`](crate::MAX_REASON_BYTES)) is shown by
    /// `status`; it is ignored when
    /// eligible.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`] for a reason longer than
    /// [`MAX_REASON_BYTES`](crate::MAX_REASON_BYTES); nothing changes.
    pub fn set_eligible(&self, eligible: bool, reason: &str) -> Result<(), ElectionError> {
        let e = if eligible {
            Eligibility::Eligible
        } else {
            Eligibility::ineligible(reason)?
        };
        self.lock().eligibility = e;
        Ok(())
    }

    /// Sets the version this candidate registers (docs/design.md §14.1), written at its next heartbeat
    /// or cycle: the election's [`VersionPolicy`](crate::VersionPolicy) ranks candidates by it
    /// before their priority. A candidate without one ranks as the oldest.
    pub fn set_version(&self, version: Option<semver::Version>) {
        self.lock().version = version;
    }

    /// The version this candidate registers.
    pub fn version(&self) -> Option<semver::Version> {
        self.lock().version.clone()
    }

    /// What this candidate does when it leads, is not eligible, and no live candidate is
    /// ([`UnhealthyPolicy::Hold`] unless set): keep leading, or write an unreserved vacancy.
    pub fn set_unhealthy_policy(&self, policy: UnhealthyPolicy) {
        self.lock().unhealthy = policy;
    }

    /// Whether this candidate may lead, as it last said ([`set_eligible`](Self::set_eligible)):
    /// an operator's mark, which its cycles read, is not included.
    pub fn eligibility(&self) -> Eligibility {
        self.lock().eligibility.clone()
    }

    /// Tells the election whether leader work is in flight. A leader asked to hand over waits
    /// (at most the configured grace) while this is set, then steps down.
    pub fn set_busy(&self, busy: bool) {
        self.lock().core.set_busy(busy);
    }

    /// Tells the election when the leader stopped taking new work for a handover (its guard
    /// closed, at `Some(at)` on this candidate's clock), or that it takes work again (`None`).
    /// The handover grace counts from then: work in flight is owed the whole grace from the
    /// moment it could see the request. The runner does this itself; without it, the grace
    /// counts from the start of the cycle whose confirmed renewal first kept the request.
    pub fn set_guard_closed_at(&self, at: Option<LocalInstant>) {
        self.lock().core.set_guard_closed_at(at);
    }

    /// Whether this candidate believes, now, that it leads: a local check, no database read.
    /// The belief ends on its own at the local deadline, even if the database is unreachable.
    ///
    /// Not to be confused with [`LeaderElection::is_leader`](crate::LeaderElection::is_leader),
    /// which also checks that the record read in a transaction names this candidate.
    pub fn believes_it_leads(&self) -> bool {
        self.leadership().is_some()
    }

    /// The old name of [`believes_it_leads`](Self::believes_it_leads).
    #[deprecated(
        since = "0.2.0",
        note = "renamed `believes_it_leads` (a local check), so it is not confused with \
                `LeaderElection::is_leader` (a database read)"
    )]
    pub fn is_leader(&self) -> bool {
        self.believes_it_leads()
    }

    /// The leadership this candidate believes in now, if any.
    pub fn leadership(&self) -> Option<Leadership> {
        let now = self.now();
        let local = self.lock();
        local.core.valid_tenure(now).map(|t| Leadership {
            ballot: t.ballot,
            valid_until: t.valid_until,
            remaining: t.valid_until.saturating_duration_since(now),
        })
    }

    /// The fencing token to attach to leader-only work, while this candidate leads.
    pub fn fencing_token(&self) -> Option<Ballot> {
        self.leadership().map(|l| l.ballot)
    }

    /// Stops believing in any leadership at once (for example, before abandoning the process).
    pub fn step_down_locally(&self) {
        self.lock().core.demote();
    }

    /// Adopts the outcome of a cycle whose transaction **committed**, and returns what this
    /// candidate now believes.
    ///
    /// Call it only with the value returned by a successful commit (for example, the `Ok` of
    /// `Database::run` or [`MemDb::run`](crate::MemDb::run)); the
    /// [`LeaderElection::run_cycle`](crate::LeaderElection::run_cycle) helper does exactly
    /// that. A cycle whose commit failed or was never attempted must be dropped; if its
    /// commit's result was unknown, the next cycle recognises it from the attempt id in the
    /// record.
    ///
    /// **Never adopt inside the transaction's closure, before the commit.** If the commit then
    /// fails because a rival acquired the same vacancy first, both believe they hold the same
    /// ballot, and the fence (which knows only the ballot) admits both: two leaders writing.
    ///
    /// A cycle of another candidate is not adopted (the result is what this candidate believes
    /// without it).
    pub fn adopt(&self, cycle: Cycle) -> ElectionResult {
        if let (Some(adoption), true) = (cycle.adoption.as_ref(), cycle.candidate == self.inner.id)
        {
            self.lock().core.adopt(adoption);
        }
        let ballot_led = self.fencing_token();
        match LeaderState::from_record(&cycle.record) {
            Some(state) if ballot_led == Some(state.ballot) && state.leader_id == self.inner.id => {
                ElectionResult::Leader(state)
            }
            other => ElectionResult::Follower(other),
        }
    }

    /// Starts a cycle: the returned guard settles it when the cycle's [`Cycle`] (or the error
    /// that replaced it) is dropped.
    /// Binds this candidate to the election whose leader key is `election` (on first use),
    /// or refuses another election.
    pub(crate) fn bind(&self, election: &[u8]) -> Result<(), ElectionError> {
        let bound = self.inner.election.get_or_init(|| election.to_vec());
        if bound.as_slice() == election {
            Ok(())
        } else {
            Err(ElectionError::CandidateOfAnotherElection {
                candidate: self.inner.id.clone(),
            })
        }
    }

    pub(crate) fn open_cycle(&self) -> Result<Settle, ElectionError> {
        self.lock().core.open_cycle()?;
        Ok(Settle {
            candidate: self.clone(),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Local> {
        // The state is left consistent at every await-free step, so a poisoned lock (a panic in
        // another thread while holding it) still holds a usable state.
        self.inner
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn check_size(what: &'static str, v: Option<&[u8]>, max: usize) -> Result<(), ElectionError> {
    match v {
        Some(v) if v.len() > max => Err(ElectionError::TooLarge {
            what,
            len: v.len(),
            max,
        }),
        _ => Ok(()),
    }
}

/// Settles a candidate's open cycle when dropped (shared by the clones of one [`Cycle`]).
pub(crate) struct Settle {
    candidate: Candidate,
}

impl Drop for Settle {
    fn drop(&mut self) {
        self.candidate.lock().core.close_cycle();
    }
}

impl fmt::Debug for Settle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settle")
            .field("candidate", self.candidate.id())
            .finish()
    }
}

/// What the runner machine needs of a candidate: its moment (constructors live here, beside
/// the candidate they read, so the pure core never depends on this module).
impl Ctx {
    /// Now, for `candidate` (its clock and its belief), or for an observer (`None`, on
    /// `clock`).
    pub fn of(candidate: Option<&Candidate>, clock: &dyn Clock, work_in_flight: bool) -> Self {
        Ctx {
            now: clock.now(),
            belief: candidate.and_then(|c| {
                c.leadership().map(|l| Belief {
                    ballot: l.ballot,
                    valid_until: l.valid_until,
                })
            }),
            work_in_flight,
        }
    }
}
