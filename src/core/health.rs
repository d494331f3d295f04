//! Health checks decided (docs/design.md §13.4, §13.5): what their results make of a candidate's
//! eligibility. Pure: check results and leadership changes, each with a clock reading, in; the
//! eligibility out. The runner runs the checks beside the election (never inside its
//! transactions) and carries the eligibility into the candidate's next registration.
//!
//! - **Readiness** runs on every candidate and gates eligibility: can this host lead. It is
//!   unknown until its first answer (ineligible: "not checked yet"), then follows its answers
//!   with hysteresis: `fall` consecutive failures make it fail, `rise` consecutive passes make
//!   it pass again.
//! - **Leader health** runs only while leading, against the leader's work (a follower has no
//!   work to check: it is never judged by this check). It starts passing with each new
//!   leadership; `fall` consecutive failures make the leader ineligible, so it hands over. A
//!   leader that stepped down while either check failed stays ineligible for the cool-down, so leadership does not flap between two sick processes. A leader that keeps
//!   leading while failing (nobody else eligible: `hold`) becomes eligible again after `rise`
//!   passes.
//!
//! A check that does not answer within its timeout has failed (the runner reports it so).

use std::time::Duration;

use crate::clock::LocalInstant;
use crate::record::Eligibility;
use crate::record::MAX_REASON_BYTES;

/// How one health check runs: every `interval`, failing if it does not answer within
/// `timeout`; `fall` consecutive failures make it fail, `rise` consecutive passes make it pass.
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::runner::CheckSettings;
///
/// let s = CheckSettings::default();
/// assert_eq!((s.interval(), s.timeout(), s.fall(), s.rise()),
///            (Duration::from_secs(2), Duration::from_secs(1), 3, 2));
/// let fast = CheckSettings::new(Duration::from_millis(500), Duration::from_millis(200), 2, 1)?;
/// assert_eq!(fast.fall(), 2);
/// assert!(CheckSettings::new(Duration::ZERO, Duration::from_secs(1), 3, 2).is_err());
/// # Ok::<(), fdb_leader_election::runner::CheckSettingsError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CheckSettings {
    interval: Duration,
    timeout: Duration,
    fall: u32,
    rise: u32,
}

impl Default for CheckSettings {
    /// Every 2 s, 1 s to answer, 3 failures to fail, 2 passes to pass again (HAProxy's
    /// defaults, with a timeout shorter than the interval).
    fn default() -> Self {
        CheckSettings {
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            fall: 3,
            rise: 2,
        }
    }
}

/// A [`CheckSettings`] rule broken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckSettingsError {
    /// The interval and the timeout must be longer than zero.
    #[error("a health check's interval and timeout must be longer than zero")]
    ZeroDuration,
    /// `fall` and `rise` must be at least 1.
    #[error("a health check's fall and rise must be at least 1")]
    ZeroCount,
    /// The interval, or the timeout, is longer than any setting may be.
    #[error("a health check's interval and timeout must be at most {max:?}")]
    TooLong {
        /// The longest a duration may be.
        max: Duration,
    },
}

impl CheckSettings {
    /// Settings of a check every `interval`, failing past `timeout`, failing after `fall`
    /// consecutive failures and passing again after `rise` consecutive passes.
    ///
    /// # Errors
    ///
    /// [`CheckSettingsError`] for a zero duration or count, or a duration past a year.
    pub fn new(
        interval: Duration,
        timeout: Duration,
        fall: u32,
        rise: u32,
    ) -> Result<Self, CheckSettingsError> {
        if interval.is_zero() || timeout.is_zero() {
            return Err(CheckSettingsError::ZeroDuration);
        }
        if fall == 0 || rise == 0 {
            return Err(CheckSettingsError::ZeroCount);
        }
        let max = crate::config::MAX_DURATION;
        if interval > max || timeout > max {
            return Err(CheckSettingsError::TooLong { max });
        }
        Ok(CheckSettings {
            interval,
            timeout,
            fall,
            rise,
        })
    }

    /// How often the check runs.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How long it may take to answer; past it, it failed.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Consecutive failures that make it fail.
    pub fn fall(&self) -> u32 {
        self.fall
    }

    /// Consecutive passes that make it pass again.
    pub fn rise(&self) -> u32 {
        self.rise
    }
}

/// One check's hysteresis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hysteresis {
    settings: CheckSettings,
    /// `None`: no answer yet.
    passing: Option<bool>,
    /// Consecutive answers contrary to `passing`.
    streak: u32,
    /// The last failure's reason.
    last_failure: String,
}

impl Hysteresis {
    pub(crate) fn new(settings: CheckSettings, passing: Option<bool>) -> Self {
        Hysteresis {
            settings,
            passing,
            streak: 0,
            last_failure: String::new(),
        }
    }

    /// Takes one answer (`Err(reason)`: failed). The first answer decides at once; later
    /// ones change the state only after `fall` (or `rise`) in a row.
    pub(crate) fn record(&mut self, answer: Result<(), String>) {
        let passed = answer.is_ok();
        if let Err(reason) = answer {
            self.last_failure = truncated(reason);
        }
        match self.passing {
            None => {
                self.passing = Some(passed);
                self.streak = 0;
            }
            Some(state) if state == passed => self.streak = 0,
            Some(_) => {
                self.streak = self.streak.saturating_add(1);
                let needed = if passed {
                    self.settings.rise
                } else {
                    self.settings.fall
                };
                if self.streak >= needed {
                    self.passing = Some(passed);
                    self.streak = 0;
                }
            }
        }
    }

    /// Whether it passes (`None`: no answer yet).
    pub(crate) fn passing(&self) -> Option<bool> {
        self.passing
    }

    fn reason(&self) -> &str {
        &self.last_failure
    }
}

/// A reason cut to [`MAX_REASON_BYTES`] (at a character boundary).
fn truncated(mut reason: String) -> String {
    if reason.len() > MAX_REASON_BYTES {
        let mut end = MAX_REASON_BYTES;
        while !reason.is_char_boundary(end) {
            end = end.saturating_sub(1);
        }
        reason.truncate(end);
    }
    reason
}

/// What a candidate's health checks make of its eligibility: the pure decision the runner's
/// checks task executes (it runs the checks on their interval, cut at their timeout, and tells
/// this of each answer and of each leadership's beginning and end; it writes the eligibility
/// into the candidate). Exported in [`runner::machine`](crate::runner::machine) for other
/// executors (the crate's simulation runs it in simulated time).
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::LocalInstant;
/// use fdb_leader_election::runner::CheckSettings;
/// use fdb_leader_election::runner::machine::Health;
///
/// let at = |ms| LocalInstant::from_origin(Duration::from_millis(ms));
/// let s = CheckSettings::new(Duration::from_secs(1), Duration::from_secs(1), 2, 1)?;
/// let mut h = Health::new(Some(s), None, Duration::from_secs(10));
/// assert!(!h.eligibility(at(0)).is_eligible(), "readiness not checked yet");
/// h.readiness_answer(Ok(()));
/// assert!(h.eligibility(at(1)).is_eligible());
/// h.readiness_answer(Err("disk full".into()));
/// assert!(h.eligibility(at(2)).is_eligible(), "one failure of fall 2");
/// h.readiness_answer(Err("disk full".into()));
/// assert_eq!(h.eligibility(at(3)).reason(), Some("not ready: disk full"));
/// # Ok::<(), fdb_leader_election::runner::CheckSettingsError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// `None`: no readiness check (always ready).
    readiness: Option<Hysteresis>,
    /// `None`: no leader health check.
    leader: Option<Hysteresis>,
    cool_down: Duration,
    leading: bool,
    /// Ineligible until then: it stepped down while a check failed.
    cooling_until: Option<LocalInstant>,
}

impl Health {
    /// The health of a candidate with these checks (either may be absent) and cool-down.
    pub fn new(
        readiness: Option<CheckSettings>,
        leader: Option<CheckSettings>,
        cool_down: Duration,
    ) -> Self {
        Health {
            readiness: readiness.map(|s| Hysteresis::new(s, None)),
            leader: leader.map(|s| Hysteresis::new(s, Some(true))),
            cool_down,
            leading: false,
            cooling_until: None,
        }
    }

    /// The cool-down from now on (the runner's default follows the stored lease).
    pub fn set_cool_down(&mut self, cool_down: Duration) {
        self.cool_down = cool_down;
    }

    /// A readiness answer.
    pub fn readiness_answer(&mut self, answer: Result<(), String>) {
        if let Some(r) = &mut self.readiness {
            r.record(answer);
        }
    }

    /// A leader health answer (ignored unless leading: the check runs only then).
    pub fn leader_answer(&mut self, answer: Result<(), String>) {
        if !self.leading {
            return;
        }
        if let Some(l) = &mut self.leader {
            l.record(answer);
        }
    }

    /// Whether the leader health check runs now: while leading.
    pub fn checks_leader(&self) -> bool {
        self.leading && self.leader.is_some()
    }

    /// Leadership began (`true`) or ended (`false`) at `now`. A leadership that ends while
    /// a check fails (its leader health check or its readiness: it stepped down for health)
    /// starts the cool-down; a new one starts with the leader health check passing.
    pub fn leading(&mut self, leading: bool, now: LocalInstant) {
        if leading == self.leading {
            return;
        }
        self.leading = leading;
        let failing =
            |h: &Option<Hysteresis>| h.as_ref().is_some_and(|h| h.passing() == Some(false));
        if !leading && (failing(&self.leader) || failing(&self.readiness)) {
            self.cooling_until = Some(now.saturating_add(self.cool_down));
        }
        if let Some(l) = &mut self.leader {
            *l = Hysteresis::new(l.settings, Some(true));
        }
    }

    /// What the checks make of the eligibility at `now`: ineligible while readiness fails (or
    /// has not answered), while leading with a failed leader health check, and during a
    /// cool-down; eligible otherwise.
    pub fn eligibility(&self, now: LocalInstant) -> Eligibility {
        let why = match &self.readiness {
            Some(r) if r.passing().is_none() => Some("readiness: not checked yet".to_owned()),
            Some(r) if r.passing() == Some(false) => Some(format!("not ready: {}", r.reason())),
            _ => None,
        }
        .or_else(|| match &self.leader {
            Some(l) if self.leading && l.passing() == Some(false) => {
                Some(format!("leader health check failed: {}", l.reason()))
            }
            _ => None,
        })
        .or_else(|| {
            self.cooling_until
                .filter(|until| now < *until)
                .map(|_| "cooling down after stepping down for health".to_owned())
        });
        match why {
            None => Eligibility::Eligible,
            Some(reason) => Eligibility::Ineligible {
                reason: truncated(reason),
            },
        }
    }

    /// When the eligibility changes with nothing else happening (a cool-down's end).
    pub fn next_change_at(&self, now: LocalInstant) -> Option<LocalInstant> {
        self.cooling_until.filter(|until| now < *until)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn at(ms: u64) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_millis(ms))
    }

    fn settings(fall: u32, rise: u32) -> CheckSettings {
        CheckSettings::new(Duration::from_secs(1), Duration::from_secs(1), fall, rise).unwrap()
    }

    fn fail() -> Result<(), String> {
        Err("boom".to_owned())
    }

    #[test]
    fn hysteresis_table() {
        // (answers, passing after each), fall 3, rise 2, starting unknown.
        let rows: &[(&[bool], &[Option<bool>])] = &[
            (&[true], &[Some(true)]),
            (&[false], &[Some(false)]),
            (
                &[true, false, false, true, false, false, false],
                &[
                    Some(true),
                    Some(true),
                    Some(true),
                    Some(true),
                    Some(true),
                    Some(true),
                    Some(false),
                ],
            ),
            (
                &[false, true, false, true, true],
                &[
                    Some(false),
                    Some(false),
                    Some(false),
                    Some(false),
                    Some(true),
                ],
            ),
        ];
        for (answers, expected) in rows {
            let mut h = Hysteresis::new(settings(3, 2), None);
            for (i, (a, e)) in answers.iter().zip(expected.iter()).enumerate() {
                h.record(if *a { Ok(()) } else { fail() });
                assert_eq!(h.passing(), *e, "{answers:?} after answer {i}");
            }
        }
    }

    #[test]
    fn readiness_gates_eligibility_from_the_start() {
        let mut h = Health::new(Some(settings(2, 2)), None, Duration::from_secs(10));
        assert_eq!(
            h.eligibility(at(0)).reason(),
            Some("readiness: not checked yet")
        );
        h.readiness_answer(Ok(()));
        assert!(h.eligibility(at(0)).is_eligible());
        h.readiness_answer(Err("db unreachable".to_owned()));
        assert!(h.eligibility(at(0)).is_eligible(), "one failure of two");
        h.readiness_answer(Err("db unreachable".to_owned()));
        assert_eq!(
            h.eligibility(at(0)).reason(),
            Some("not ready: db unreachable")
        );
    }

    #[test]
    fn a_leader_health_check_never_judges_a_follower() {
        let mut h = Health::new(None, Some(settings(1, 1)), Duration::from_secs(10));
        for _ in 0..5 {
            h.leader_answer(fail());
        }
        assert!(h.eligibility(at(0)).is_eligible(), "not leading: ignored");
        assert!(!h.checks_leader());
        h.leading(true, at(0));
        assert!(h.checks_leader());
        h.leader_answer(fail());
        assert_eq!(
            h.eligibility(at(0)).reason(),
            Some("leader health check failed: boom")
        );
    }

    #[test]
    fn stepping_down_while_failing_cools_down_a_new_leadership_starts_passing() {
        let mut h = Health::new(None, Some(settings(2, 2)), Duration::from_secs(10));
        h.leading(true, at(0));
        h.leader_answer(fail());
        h.leader_answer(fail());
        assert!(!h.eligibility(at(100)).is_eligible());
        // It handed over at 1 s: ineligible for the cool-down, then eligible.
        h.leading(false, at(1_000));
        assert_eq!(
            h.eligibility(at(10_999)).reason(),
            Some("cooling down after stepping down for health")
        );
        assert_eq!(h.next_change_at(at(5_000)), Some(at(11_000)));
        assert!(h.eligibility(at(11_000)).is_eligible());
        assert_eq!(h.next_change_at(at(11_000)), None);
        // Leading again: the check starts passing, whatever it said before.
        h.leading(true, at(20_000));
        assert!(h.eligibility(at(20_000)).is_eligible());
        // Stepping down while passing: no cool-down.
        h.leading(false, at(21_000));
        assert!(h.eligibility(at(21_000)).is_eligible());
        // A cool-down set later (the stored lease read) applies to the next step-down.
        h.set_cool_down(Duration::from_secs(2));
        h.leading(true, at(30_000));
        h.leader_answer(fail());
        h.leader_answer(fail());
        h.leading(false, at(31_000));
        assert_eq!(h.next_change_at(at(31_000)), Some(at(33_000)));
    }

    #[test]
    fn a_leader_holding_while_failing_recovers_after_rise_passes() {
        let mut h = Health::new(None, Some(settings(1, 2)), Duration::from_secs(10));
        h.leading(true, at(0));
        h.leader_answer(fail());
        assert!(!h.eligibility(at(0)).is_eligible());
        h.leader_answer(Ok(()));
        assert!(!h.eligibility(at(0)).is_eligible());
        h.leader_answer(Ok(()));
        assert!(h.eligibility(at(0)).is_eligible());
    }

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        let mut h = Health::new(Some(settings(1, 1)), None, Duration::ZERO);
        h.readiness_answer(Err("é".repeat(300)));
        let e = h.eligibility(at(0));
        let r = e.reason().unwrap();
        assert!(r.len() <= MAX_REASON_BYTES && r.starts_with("not ready: é"));
    }
}
