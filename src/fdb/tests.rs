//! The adapter's error conversions and planted faults, without a cluster.

use foundationdb::{FdbBindingError, FdbError};

use super::errors::txn_error;
use super::plants::{
    PLANT_UNKNOWN_AS_COMMITTED, PLANT_UNKNOWN_AS_NOT_COMMITTED, planted,
    unknown_adopted_as_committed, unknown_reported_as_not_committed,
};
use crate::error::ElectionError;
use crate::store::fdb_codes::Phase;
use crate::store::txn::{TxnError, TxnErrorKind};

#[test]
fn the_planted_fault_reports_only_unknown_results_as_not_committed() {
    let unknown = txn_error(FdbError::from_code(1021), Phase::Commit);
    let planted_unknown = planted(unknown, true);
    assert_eq!(planted_unknown.kind(), TxnErrorKind::Conflict);
    assert_eq!(planted_unknown.code(), Some(1020));
    assert!(!planted_unknown.is_maybe_committed());
    // A timed-out commit too; a real conflict or a fatal error unchanged.
    let timed_out = planted(txn_error(FdbError::from_code(1031), Phase::Commit), true);
    assert_eq!(timed_out.code(), Some(1020));
    for code in [1020, 1007, 2000] {
        let e = planted(txn_error(FdbError::from_code(code), Phase::Commit), true);
        assert_eq!(e.code(), Some(code));
    }
    // Off: nothing changes.
    let unknown = txn_error(FdbError::from_code(1021), Phase::Commit);
    assert_eq!(planted(unknown, false).kind(), TxnErrorKind::CommitUnknown);
}

#[test]
fn only_the_feature_planted_faults_plants_the_fault() {
    // The test binary's environment does not set the variables, so a build with the feature
    // reads `false` too; without it the functions are constants.
    if !cfg!(feature = "planted-faults") {
        assert!(!unknown_reported_as_not_committed());
        assert!(!unknown_adopted_as_committed());
    }
    for (name, on) in [
        (
            PLANT_UNKNOWN_AS_NOT_COMMITTED,
            unknown_reported_as_not_committed(),
        ),
        (PLANT_UNKNOWN_AS_COMMITTED, unknown_adopted_as_committed()),
    ] {
        let asked = std::env::var_os(name).is_some_and(|v| v == "1");
        assert_eq!(on, asked && cfg!(feature = "planted-faults"), "{name}");
    }
}

fn binding_code(err: &FdbBindingError) -> Option<i32> {
    err.get_fdb_error().map(FdbError::code)
}

#[test]
fn database_errors_with_a_code_reach_on_error() {
    for (kind, code) in [
        (TxnErrorKind::Conflict, 1020),
        (TxnErrorKind::TooOld, 1007),
        (TxnErrorKind::CommitUnknown, 1021),
        (TxnErrorKind::Unavailable, 1031),
        (TxnErrorKind::Fatal, 2101),
    ] {
        let err = ElectionError::from(TxnError::new(kind).with_code(code));
        let binding = FdbBindingError::from(err);
        assert!(
            matches!(&binding, FdbBindingError::NonRetryableFdbError(e) if e.code() == code),
            "{kind:?}/{code} became {binding:?}"
        );
        // What `Database::run` looks at to decide whether to call `on_error`.
        assert_eq!(binding_code(&binding), Some(code));

        let binding = FdbBindingError::from(TxnError::new(kind).with_code(code));
        assert!(matches!(&binding, FdbBindingError::NonRetryableFdbError(e) if e.code() == code));
    }
}

#[test]
fn other_election_errors_become_custom_errors() {
    let binding = FdbBindingError::from(ElectionError::NotInitialized);
    assert_eq!(binding_code(&binding), None);
    assert!(matches!(
        &binding,
        FdbBindingError::CustomError(e)
            if matches!(e.downcast_ref::<ElectionError>(), Some(ElectionError::NotInitialized))
    ));
}

#[test]
fn database_errors_without_a_code_become_custom_errors() {
    let binding = FdbBindingError::from(ElectionError::from(TxnError::new(TxnErrorKind::Conflict)));
    assert_eq!(binding_code(&binding), None);
    assert!(matches!(
        &binding,
        FdbBindingError::CustomError(e)
            if matches!(e.downcast_ref::<ElectionError>(), Some(ElectionError::Database(t)) if t.kind() == TxnErrorKind::Conflict)
    ));

    let binding = FdbBindingError::from(TxnError::new(TxnErrorKind::Unavailable));
    assert!(matches!(
        &binding,
        FdbBindingError::CustomError(e)
            if e.downcast_ref::<TxnError>().is_some_and(|t| t.kind() == TxnErrorKind::Unavailable)
    ));
}

#[test]
fn named_fdb_codes_classify_without_asking_libfdb_c() {
    for (code, kind) in [
        (1020, TxnErrorKind::Conflict),
        (1007, TxnErrorKind::TooOld),
        (1021, TxnErrorKind::CommitUnknown),
        (1039, TxnErrorKind::CommitUnknown),
        (1004, TxnErrorKind::Unavailable),
        (1009, TxnErrorKind::Unavailable),
        (1031, TxnErrorKind::Unavailable),
        (1037, TxnErrorKind::Unavailable),
        (1038, TxnErrorKind::Unavailable),
        (1042, TxnErrorKind::Unavailable),
        (1051, TxnErrorKind::Unavailable),
        (1078, TxnErrorKind::Unavailable),
        (1213, TxnErrorKind::Unavailable),
        (1223, TxnErrorKind::Unavailable),
        (1235, TxnErrorKind::Unavailable),
    ] {
        let err = TxnError::from(FdbError::from_code(code));
        assert_eq!(err.kind(), kind, "code {code}");
        assert_eq!(err.code(), Some(code));
        assert_eq!(
            err.is_maybe_committed(),
            kind == TxnErrorKind::CommitUnknown
        );
        let source = std::error::Error::source(&err);
        assert!(
            source
                .and_then(|s| s.downcast_ref::<FdbError>())
                .is_some_and(|e| e.code() == code),
            "code {code}: the FdbError is not the source"
        );
    }
}

#[test]
fn a_round_trip_keeps_the_code() {
    let txn = TxnError::from(FdbError::from_code(1020));
    let binding = FdbBindingError::from(ElectionError::from(txn));
    assert_eq!(binding_code(&binding), Some(1020));
}

/// Codes FoundationDB 7.4 added, classified by the linked `libfdb_c`'s predicates (this crate
/// names no kind for them): `transaction_rejected_range_locked` (1242) is retryable and not
/// committed on a 7.4 client; a 7.3 client does not know it, and it is fatal there. The
/// FoundationDB tier runs this on a 7.3 and on a 7.4 client.
#[test]
fn codes_new_in_7_4_follow_the_linked_client() {
    let client = foundationdb::api::get_max_api_version();
    let err = TxnError::from(FdbError::from_code(1242));
    if client >= 740 {
        assert_eq!(err.kind(), TxnErrorKind::OtherRetryable, "client {client}");
        assert!(err.is_retryable() && !err.is_maybe_committed());
    } else {
        assert_eq!(err.kind(), TxnErrorKind::Fatal, "client {client}");
    }
    // 1235 is named (7.4's hot-shard throttling): the same kind on every client.
    assert_eq!(
        TxnError::from(FdbError::from_code(1235)).kind(),
        TxnErrorKind::Unavailable
    );
}
