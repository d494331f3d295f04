//! Running a runner demo on FoundationDB (included by the `fdb_*` examples only).

/// Runs a demo against the FoundationDB cluster named by `FDB_CLUSTER_FILE` (or the default
/// cluster file), under a fresh subspace that is cleared afterwards, with leases for a real
/// cluster ([`cluster_config`](crate::runner_demos::cluster_config)).
pub(crate) fn on_foundationdb<F, Fut>(name: &str, demo: F) -> crate::runner_demos::DemoResult
where
    F: FnOnce(
        std::sync::Arc<foundationdb::Database>,
        foundationdb_tuple::Subspace,
        fdb_leader_election::ElectionConfig,
    ) -> Fut,
    Fut: std::future::Future<Output = crate::runner_demos::DemoResult>,
{
    use std::sync::Arc;

    crate::runner_demos::init_logging();
    let config = crate::runner_demos::cluster_config()?;
    let cluster_file = std::env::var("FDB_CLUSTER_FILE").ok();
    // SAFETY: `boot` may run once per process, and the guard it returns must be dropped before
    // the process exits. This is the only call in this example, and `network` lives in this
    // frame: it is dropped (network stopped, thread joined) when this function returns.
    #[allow(
        unsafe_code,
        reason = "foundationdb::boot is unsafe only because its guard must be dropped before \
                  exit, which this frame guarantees"
    )]
    let network = unsafe { foundationdb::boot() };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let db = Arc::new(foundationdb::Database::new(cluster_file.as_deref())?);
        let nonce: u64 = rand::random();
        let root = foundationdb_tuple::Subspace::from(("fdb-leader-election-example", name, nonce));
        let result = demo(Arc::clone(&db), root.clone(), config).await;
        let (begin, end) = root.range();
        db.run(|trx, _| {
            let (begin, end) = (begin.clone(), end.clone());
            async move {
                trx.clear_range(&begin, &end);
                Ok(())
            }
        })
        .await?;
        result
    });
    drop(runtime);
    drop(network);
    result
}
