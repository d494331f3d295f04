//! [`ElectionTxn`] for anything that dereferences to a FoundationDB `Transaction`.

use std::future::Future;
use std::ops::Deref;

use foundationdb::options::{ConflictRangeType, StreamingMode};
use foundationdb::{RangeOption, Transaction};

use crate::store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, Watch};

fn is_snapshot(mode: ReadMode) -> bool {
    match mode {
        ReadMode::Serializable => false,
        ReadMode::Snapshot => true,
    }
}

/// Runs every election operation on the FoundationDB transaction `self` dereferences to.
///
/// The methods call `Transaction`'s inherent methods by path (`Transaction::get(trx, ..)`),
/// never by method syntax, so they cannot resolve back to this trait.
impl<T> ElectionTxn for T
where
    T: Deref<Target = Transaction> + Send + Sync,
{
    fn get(
        &self,
        key: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send {
        // The read is issued now; the returned future borrows nothing.
        let read = Transaction::get(self, key, is_snapshot(mode));
        async move { Ok(read.await?.map(|value| value.to_vec())) }
    }

    fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Vec<KeyValue>, TxnError>> + Send {
        let trx: &Transaction = self;
        let snapshot = is_snapshot(mode);
        async move {
            let mut out = Vec::new();
            // An empty or inverted range goes to FoundationDB too: it checks the bounds (a
            // bound beyond `\xff` fails with 2004) before it returns nothing.
            let mut opt = RangeOption {
                // The caller wants the whole range: fetch it in as few round trips as possible.
                mode: StreamingMode::WantAll,
                ..RangeOption::from((begin, end))
            };
            loop {
                // `iteration` only matters in `StreamingMode::Iterator`.
                let batch = Transaction::get_range(trx, &opt, 1, snapshot).await?;
                out.extend(
                    batch
                        .iter()
                        .map(|kv| (kv.key().to_vec(), kv.value().to_vec())),
                );
                // `None` once FoundationDB reports no more rows; otherwise the same range
                // starting just after the last key returned.
                match opt.next_range(&batch) {
                    Some(next) => opt = next,
                    None => return Ok(out),
                }
            }
        }
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        Transaction::set(self, key, value);
    }

    fn clear(&self, key: &[u8]) {
        Transaction::clear(self, key);
    }

    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        // The single-key range [key, key + \x00).
        let mut end = Vec::with_capacity(key.len().saturating_add(1));
        end.extend_from_slice(key);
        end.push(0);
        Transaction::add_conflict_range(self, key, &end, ConflictRangeType::Read)?;
        Ok(())
    }

    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        // Cached by the transaction once its first read has taken it.
        let version = Transaction::get_read_version(self);
        async move { Ok(u64::try_from(version.await?).ok()) }
    }

    fn approximate_size(&self) -> impl Future<Output = Result<Option<usize>, TxnError>> + Send {
        let size = Transaction::get_approximate_size(self);
        async move { Ok(usize::try_from(size.await?).ok()) }
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        // FoundationDB reports watch errors (too many watches, the creating transaction
        // failed) through the future, never synchronously.
        let watch = Transaction::watch(self, key);
        Ok(Box::pin(async move { Ok(watch.await?) }))
    }
}
