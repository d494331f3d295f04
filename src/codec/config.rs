//! The stored configuration: version 2's body, or version 3's when it sets what version 2
//! cannot say (a reservation timeout, a version policy).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{decode_wire, encode, encode_at, nanos, split_version};
use crate::config::{ElectionConfig, VersionPolicy};
use crate::error::{DecodeError, ElectionError, printable_key};

#[derive(Serialize, Deserialize)]
struct ConfigWire {
    lease_nanos: u64,
    heartbeat_nanos: u64,
    candidate_timeout_nanos: u64,
    election_enabled: bool,
    allow_preemption: bool,
    max_clock_rate_error_ppm: u32,
    min_tenure_nanos: u64,
    handover_grace_nanos: u64,
    takeover_stagger_nanos: u64,
    transaction_timeout_nanos: u64,
}

/// A configuration, format version 3: version 2's, the reservation timeout if set, and the
/// version policy.
#[derive(Serialize, Deserialize)]
struct ConfigWireV3 {
    base: ConfigWire,
    reservation_timeout_nanos: Option<u64>,
    version_policy: u8,
}

/// Encodes a configuration: version 2's body unless it sets what version 2 cannot say.
pub(crate) fn encode_config(c: &ElectionConfig) -> Result<Vec<u8>, ElectionError> {
    let base = ConfigWire {
        lease_nanos: nanos(c.lease_duration),
        heartbeat_nanos: nanos(c.heartbeat_interval),
        candidate_timeout_nanos: nanos(c.candidate_timeout),
        election_enabled: c.election_enabled,
        allow_preemption: c.allow_preemption,
        max_clock_rate_error_ppm: c.max_clock_rate_error_ppm,
        min_tenure_nanos: nanos(c.min_tenure),
        handover_grace_nanos: nanos(c.handover_grace),
        takeover_stagger_nanos: nanos(c.takeover_stagger),
        transaction_timeout_nanos: nanos(c.transaction_timeout),
    };
    let reservation = c.reservation_timeout_setting();
    if reservation.is_none() && c.version_policy == VersionPolicy::Ignore {
        return encode("configuration", &base);
    }
    encode_at(
        "configuration",
        3,
        &ConfigWireV3 {
            base,
            reservation_timeout_nanos: reservation.map(nanos),
            version_policy: c.version_policy.code(),
        },
    )
}

/// Decodes a configuration stored at `key`, validating it like a freshly built one.
pub(crate) fn decode_config(key: &[u8], bytes: &[u8]) -> Result<ElectionConfig, ElectionError> {
    let (w, reservation, policy) = split_version(bytes)
        .and_then(|(version, body)| match version {
            1 | 2 => decode_wire::<ConfigWire>(body).map(|w| (w, None, 0)),
            _ => decode_wire::<ConfigWireV3>(body)
                .map(|w| (w.base, w.reservation_timeout_nanos, w.version_policy)),
        })
        .map_err(|e| ElectionError::corrupt(key, e))?;
    let policy = VersionPolicy::of_code(policy).ok_or_else(|| {
        ElectionError::corrupt(key, DecodeError::Impossible("unknown version policy"))
    })?;
    let mut b = ElectionConfig::builder().version_policy(policy);
    if let Some(t) = reservation {
        b = b.reservation_timeout(Duration::from_nanos(t));
    }
    b.lease_duration(Duration::from_nanos(w.lease_nanos))
        .heartbeat_interval(Duration::from_nanos(w.heartbeat_nanos))
        .candidate_timeout(Duration::from_nanos(w.candidate_timeout_nanos))
        .election_enabled(w.election_enabled)
        .allow_preemption(w.allow_preemption)
        .max_clock_rate_error_ppm(w.max_clock_rate_error_ppm)
        .min_tenure(Duration::from_nanos(w.min_tenure_nanos))
        .handover_grace(Duration::from_nanos(w.handover_grace_nanos))
        .takeover_stagger(Duration::from_nanos(w.takeover_stagger_nanos))
        .transaction_timeout(Duration::from_nanos(w.transaction_timeout_nanos))
        .build()
        .map_err(|source| ElectionError::InvalidStoredConfig {
            key: printable_key(key),
            source,
        })
}
