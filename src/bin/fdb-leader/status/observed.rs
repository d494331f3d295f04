//! What one observation of the leader record and the registry tells, shared by `status`'s
//! JSON and text.

use fdb_leader_election::{CandidateInfo, ElectionConfig, LeaderRecord, Named, ResignRefusal};
use serde_json::{Value, json};

use crate::durations::show;

/// The lease state one observation shows.
pub(super) fn lease_state(record: &LeaderRecord) -> &'static str {
    match (record.owner(), record.reservation(), record.operator_hold()) {
        (Some(_), _, _) => "owned",
        (None, Some(_), _) => "reserved",
        (None, None, Some(_)) => "held",
        (None, None, None) => "vacant",
    }
}

/// Leader renewals since the candidate's last heartbeat: its heartbeat age, measured without
/// comparing clocks.
pub(super) fn renewal_lag(record: &LeaderRecord, c: &CandidateInfo) -> u64 {
    record.renewal().saturating_sub(c.record.seen_renewal())
}

/// How long ago the candidate last heartbeated, as one observation can tell without comparing
/// clocks: its renewal lag times the heartbeat (the leader renews about once a heartbeat). It
/// stops growing while no leader renews.
pub(super) fn heartbeat_age(config: &ElectionConfig, lag: u64) -> std::time::Duration {
    config
        .heartbeat_interval()
        .saturating_mul(u32::try_from(lag).unwrap_or(u32::MAX))
}

/// [`heartbeat_age`] in words: `<3s` (within the last heartbeat) or `~9s`.
pub(super) fn age_text(config: &ElectionConfig, lag: u64) -> String {
    match lag {
        0 => format!("<{}", show(config.heartbeat_interval())),
        _ => format!("~{}", show(heartbeat_age(config, lag))),
    }
}

pub(super) fn payload_text(record: &LeaderRecord) -> Option<&str> {
    record.payload().and_then(|p| std::str::from_utf8(p).ok())
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn named_json(n: Option<&Named>) -> Value {
    n.map_or(
        Value::Null,
        |n| json!({ "id": n.id().as_str(), "priority": n.priority().get() }),
    )
}

pub(super) fn named_text(n: Option<&Named>) -> String {
    n.map_or_else(
        || "none".to_owned(),
        |n| format!("{} (priority {})", n.id(), n.priority()),
    )
}

/// The version of the leader, while one owns the record.
pub(super) fn leader_version(record: &LeaderRecord) -> Option<String> {
    record
        .owner()
        .and(record.leader_version())
        .map(ToString::to_string)
}

/// The directed resign (`resign --to NAME`) the current leader refused, if any (docs/design.md §13.6):
/// a refusal of an earlier leadership is history, not shown.
pub(super) fn pending_refusal<'a>(
    record: &LeaderRecord,
    refusal: Option<&'a ResignRefusal>,
) -> Option<&'a ResignRefusal> {
    refusal.filter(|r| record.owner().is_some() && r.ballot() == record.ballot())
}
