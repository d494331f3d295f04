//! Oracle 6: progress. A run in which nothing was elected, nothing renewed, or no fenced work
//! committed fails, so a broken workload cannot pass vacuously. An election call failing with
//! an error that no fault explains (a corrupt value, an exhausted counter, an unexpected
//! error kind) also fails here at once, and so does a live process whose runner machine goes
//! quiet: nothing in flight and no wake-up scheduled.

use super::{OracleId, Violation};

/// What a run achieved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Achieved {
    /// Acquisitions.
    pub elections: u64,
    /// Renewals.
    pub renewals: u64,
    /// Fenced work transactions that applied.
    pub fenced_work: u64,
}

/// Oracle 6.
#[derive(Debug, Default)]
pub struct Progress;

impl Progress {
    /// An election call failed with an error no injected fault explains.
    pub fn unexpected_error(who: &str, what: &str, error: &str) -> Violation {
        Violation::new(
            OracleId::Progress,
            format!("{who}: {what} failed with an unexpected error: {error}"),
        )
    }

    /// A live process's runner machine went quiet: no operation in flight, no drain, no
    /// wake-up scheduled (the tokio runner would stop without leaving the election).
    pub fn went_quiet(who: &str) -> Violation {
        Violation::new(
            OracleId::Progress,
            format!(
                "{who}: the runner machine went quiet (no operation in flight, no wake-up): \
                 the runner would stop participating"
            ),
        )
    }

    /// Checks a finished run.
    pub fn check_end(a: Achieved) -> Option<Violation> {
        let missing: Vec<&str> = [
            (a.elections == 0, "no election"),
            (a.renewals == 0, "no renewal"),
            (a.fenced_work == 0, "no fenced leader work"),
        ]
        .into_iter()
        .filter_map(|(missing, what)| missing.then_some(what))
        .collect();
        (!missing.is_empty()).then(|| {
            Violation::new(
                OracleId::Progress,
                format!("vacuous run: {}", missing.join(", ")),
            )
        })
    }
}
