//! FoundationDB (`--cluster-file`), in builds with an `fdb-7_*` feature.

use std::path::Path;

use crate::exit::Failure;

/// Runs `f` with FoundationDB's network thread started, and stops it afterwards. `f` must
/// build and drop its own async runtime: nothing that holds the database may outlive it.
#[cfg(feature = "fdb")]
pub(crate) fn with_network<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: `boot` may be called once per process, and the guard it returns must be dropped
    // before the process exits. This is the only call, `main` calls this function at most
    // once, and `network` lives in this frame: it is dropped (the network stopped, its thread
    // joined) before this function returns, and `main` returns (and the process exits) only
    // after that.
    #[allow(
        unsafe_code,
        reason = "foundationdb::boot is unsafe only because its guard must be dropped before \
                  exit, which this frame guarantees"
    )]
    let network = unsafe { foundationdb::boot() };
    let out = f();
    drop(network);
    out
}

/// Without FoundationDB support there is no network to start.
#[cfg(not(feature = "fdb"))]
pub(crate) fn with_network<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// Opens the cluster named by the cluster file at `path`.
#[cfg(feature = "fdb")]
pub(crate) fn open(path: &Path) -> Result<std::sync::Arc<foundationdb::Database>, Failure> {
    let text = path
        .to_str()
        .ok_or_else(|| Failure::usage("the cluster file path is not valid UTF-8"))?;
    // The client reads the file only at the first transaction, and then blames "the current
    // directory or default location" for a file that is missing: check it here, by its name.
    std::fs::File::open(path).map_err(|e| {
        Failure::store(format!(
            "cannot open the FoundationDB cluster file {}: {e} (give the cluster's file, \
             /etc/foundationdb/fdb.cluster on a server with FoundationDB installed)",
            path.display()
        ))
    })?;
    foundationdb::Database::new(Some(text))
        .map(std::sync::Arc::new)
        .map_err(|e| {
            Failure::store(format!(
                "cannot open the FoundationDB cluster file {}: {e}",
                path.display()
            ))
        })
}

/// The command that installs an `fdb-leader` with FoundationDB support, suggested by builds
/// without it (a test checks it against the package's manifest: the binary's required
/// features plus an API version).
#[cfg(not(feature = "fdb"))]
pub(crate) const INSTALL_WITH_FDB: &str =
    "cargo install --path . --features cli,fdb-7_3,embedded-fdb-include";

/// This build has no FoundationDB support.
#[cfg(not(feature = "fdb"))]
pub(crate) fn unsupported(path: &Path) -> Failure {
    Failure::usage(format!(
        "--cluster-file {}: this fdb-leader was built without FoundationDB support; rebuild \
         it with an API version feature, in a checkout of fdb-leader-election: \
         `{INSTALL_WITH_FDB}` (needs FoundationDB's client, libfdb_c), or use --sqlite PATH",
        path.display()
    ))
}
