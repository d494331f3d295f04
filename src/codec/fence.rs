//! The fence is the one value other languages read (a fenced write from any FoundationDB
//! binding checks it in its own transaction), so since version 3 it is a FoundationDB tuple,
//! not bincode: `pack((3, ballot, vacant))`, an integer, an integer and a boolean, e.g.
//! `15 03 15 05 26` for ballot 5, not vacant. Its first byte (`0x15`, the tuple code of a
//! one-byte positive integer) is no version byte a version-1 or -2 reader knows, so an older
//! build refuses a version-3 fence as an unknown format (it never misreads it); this build
//! still reads the version-1 and -2 bincode fences older builds write. A tuple whose first
//! element is a version above 3 is an unknown version.

use serde::{Deserialize, Serialize};

use super::decode_body;
use crate::error::{DecodeError, ElectionError};
use crate::ids::Ballot;
use crate::record::FenceRecord;

#[derive(Serialize, Deserialize)]
pub(super) struct FenceWire {
    pub(super) ballot: Ballot,
    pub(super) vacant: bool,
}

/// The fence's format version: the first element of its tuple.
pub const FENCE_FORMAT_VERSION: u8 = 3;

/// The tuple code of a positive integer that fits in one byte (the fence's version).
const TUPLE_ONE_BYTE_INT: u8 = 0x15;

/// Encodes a fence record: the tuple `(3, ballot, vacant)`.
pub(crate) fn encode_fence(f: &FenceRecord) -> Result<Vec<u8>, ElectionError> {
    Ok(foundationdb_tuple::pack(&(
        u16::from(FENCE_FORMAT_VERSION),
        f.ballot.get(),
        f.vacant,
    )))
}

/// Decodes a fence record stored at `key`: the tuple format (version 3), or the bincode format
/// of versions 1 and 2.
pub(crate) fn decode_fence(key: &[u8], bytes: &[u8]) -> Result<FenceRecord, ElectionError> {
    let corrupt = |e| ElectionError::corrupt(key, e);
    let (ballot, vacant) = match bytes {
        [] => return Err(corrupt(DecodeError::Empty)),
        [TUPLE_ONE_BYTE_INT, version, ..] => {
            if *version != FENCE_FORMAT_VERSION {
                return Err(corrupt(DecodeError::UnknownVersion {
                    found: *version,
                    supported: FENCE_FORMAT_VERSION,
                }));
            }
            let (_, ballot, vacant): (u16, u64, bool) = foundationdb_tuple::unpack(bytes)
                .map_err(|e| corrupt(DecodeError::MalformedTuple(e)))?;
            (Ballot::new(ballot), vacant)
        }
        // Versions 1 and 2 (bincode), and anything else: refused by `split_version`.
        _ => {
            let w: FenceWire = decode_body(bytes).map_err(corrupt)?;
            (w.ballot, w.vacant)
        }
    };
    if !vacant && ballot == Ballot::ZERO {
        return Err(corrupt(DecodeError::Impossible("owned fence at ballot 0")));
    }
    Ok(FenceRecord { ballot, vacant })
}

/// The bincode fence of format versions 1 and 2, as older builds wrote it (for tests of
/// rolling upgrades).
#[cfg(test)]
pub(crate) fn encode_fence_v2(f: &FenceRecord) -> Result<Vec<u8>, ElectionError> {
    super::encode(
        "fence record",
        &FenceWire {
            ballot: f.ballot,
            vacant: f.vacant,
        },
    )
}
