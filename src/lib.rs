//! Leader election on FoundationDB (crate docs are written with the API; see README.md).
#![doc(test(attr(deny(warnings))))]

mod clock;
mod config;
mod error;
mod ids;
pub mod memdb;
mod txn;

#[cfg(feature = "fdb")]
pub mod fdb;

pub use clock::{Clock, LocalInstant, ManualClock, SystemClock, TokioClock};
pub use config::{
    ConfigError, DEFAULT_CANDIDATE_TIMEOUT, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LEASE_DURATION,
    DEFAULT_MAX_CLOCK_RATE_ERROR_PPM, ElectionConfig, ElectionConfigBuilder, MAX_DURATION,
};
pub use error::{DecodeError, ElectionError, printable_key};
pub use ids::{Ballot, CandidateId, MAX_CANDIDATE_ID_BYTES, Priority};
pub use memdb::MemDb;
pub use txn::{ElectionTxn, KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};
mod codec;
mod keys;
mod record;
pub use codec::FORMAT_VERSION;
pub use keys::MAX_KEY_BYTES;
pub use record::{
    AttemptId, CandidateInfo, CandidateRecord, LeaderRecord, LeaderState, MAX_METADATA_BYTES,
    MAX_PAYLOAD_BYTES, MAX_VALUE_BYTES, Named,
};
mod core;
mod candidate;
mod election;
mod fence;
pub use candidate::{Candidate, Cycle, ElectionResult, Leadership};
pub use core::{Action, ResignRejected};
pub use election::{LeaderElection, ResignOutcome};
pub use fence::{FenceGate, is_stale};
