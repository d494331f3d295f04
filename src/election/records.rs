//! The stored records: the configuration (and its cache), the leader record and the fence.

use crate::codec;
use crate::config::ElectionConfig;
use crate::error::{DecodeError, ElectionError};
use crate::record::{FenceRecord, LeaderRecord, Party};
use crate::store::txn::{ElectionTxn, ReadMode};
use std::sync::PoisonError;

use super::LeaderElection;

impl LeaderElection {
    /// Creates the election with the default configuration if it does not exist. Idempotent;
    /// never changes an existing configuration and never resets the ballot.
    ///
    /// # Errors
    ///
    /// Database errors; [`ElectionError::Corrupt`] if an existing value does not decode.
    pub async fn initialize<T: ElectionTxn>(&self, txn: &T) -> Result<(), ElectionError> {
        self.initialize_with_config(txn, &ElectionConfig::default())
            .await
    }

    /// Creates the election with `config` if it does not exist. Idempotent; never changes an
    /// existing configuration and never resets the ballot.
    ///
    /// # Errors
    ///
    /// As [`initialize`](Self::initialize).
    pub async fn initialize_with_config<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        match self.config_opt(txn).await? {
            Some(_) => {}
            None => txn.set(&self.keys.config, &codec::encode_config(config)?),
        }
        self.ensure_records(txn, config).await
    }

    /// Reads the configuration.
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`] if absent; [`ElectionError::Corrupt`] or
    /// [`ElectionError::InvalidStoredConfig`] if it does not decode or validate.
    pub async fn read_config<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<ElectionConfig, ElectionError> {
        self.config_opt(txn)
            .await?
            .ok_or(ElectionError::NotInitialized)
    }

    /// Replaces the configuration (creating the election if needed). Leaders pick up a new
    /// lease at their next renewal; followers keep timing the lease stored with the record
    /// they observe. The ballot is untouched.
    ///
    /// # Errors
    ///
    /// Database errors; [`ElectionError::Corrupt`] if the leader record does not decode.
    pub async fn write_config<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        txn.set(&self.keys.config, &codec::encode_config(config)?);
        self.ensure_records(txn, config).await
    }

    pub(super) async fn ensure_records<T: ElectionTxn>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<(), ElectionError> {
        let (leader, fence) = tokio::join!(
            txn.get(&self.keys.leader, ReadMode::Serializable),
            txn.get(&self.keys.fence, ReadMode::Serializable)
        );
        let fence = fence?;
        let leader = match leader? {
            Some(bytes) => codec::decode_leader(&self.keys.leader, &bytes)?,
            // The fence remembers a ballot: recreating the record would restart ballots.
            None if fence.is_some() => {
                return Err(ElectionError::corrupt(
                    &self.keys.leader,
                    DecodeError::Impossible("leader record missing while the fence exists"),
                ));
            }
            None => {
                let rec = LeaderRecord::initial(config.lease_duration());
                txn.set(&self.keys.leader, &codec::encode_leader(&rec)?);
                rec
            }
        };
        match fence {
            Some(bytes) => {
                let fence = codec::decode_fence(&self.keys.fence, &bytes)?;
                if fence != FenceRecord::of(&leader) {
                    return Err(ElectionError::corrupt(
                        &self.keys.fence,
                        DecodeError::Impossible("fence disagrees with the leader record"),
                    ));
                }
            }
            None => txn.set(
                &self.keys.fence,
                &codec::encode_fence(&FenceRecord::of(&leader))?,
            ),
        }
        Ok(())
    }

    /// The configuration this handle last decoded, if any.
    pub(super) fn cached_config(&self) -> Option<ElectionConfig> {
        self.config_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(_, config)| config.clone())
    }

    pub(super) async fn config_opt<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<Option<ElectionConfig>, ElectionError> {
        let Some(bytes) = txn.get(&self.keys.config, ReadMode::Serializable).await? else {
            return Ok(None);
        };
        let mut cache = self
            .config_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((cached, config)) = cache.as_ref() {
            if *cached == bytes {
                return Ok(Some(config.clone()));
            }
        }
        let config = codec::decode_config(&self.keys.config, &bytes)?;
        *cache = Some((bytes, config.clone()));
        Ok(Some(config))
    }

    /// Replaces the fence record, after checking that the stored one agrees with the leader
    /// record this transaction read: a corrupt or inconsistent fence is reported, never
    /// overwritten.
    pub(super) async fn replace_fence<T: ElectionTxn>(
        &self,
        txn: &T,
        read: &LeaderRecord,
        fence: &FenceRecord,
    ) -> Result<(), ElectionError> {
        let stored = match txn.get(&self.keys.fence, ReadMode::Serializable).await? {
            Some(bytes) => codec::decode_fence(&self.keys.fence, &bytes)?,
            None => {
                return Err(ElectionError::corrupt(
                    &self.keys.fence,
                    DecodeError::Impossible("fence record missing"),
                ));
            }
        };
        if stored != FenceRecord::of(read) {
            return Err(ElectionError::corrupt(
                &self.keys.fence,
                DecodeError::Impossible("fence disagrees with the leader record"),
            ));
        }
        txn.set(&self.keys.fence, &codec::encode_fence(fence)?);
        Ok(())
    }

    pub(super) fn decode_leader_opt(
        &self,
        bytes: Option<Vec<u8>>,
    ) -> Result<LeaderRecord, ElectionError> {
        match bytes {
            Some(bytes) => codec::decode_leader(&self.keys.leader, &bytes),
            None => Err(ElectionError::NotInitialized),
        }
    }

    pub(super) async fn leader_with<T: ElectionTxn>(
        &self,
        txn: &T,
        mode: ReadMode,
    ) -> Result<LeaderRecord, ElectionError> {
        self.decode_leader_opt(txn.get(&self.keys.leader, mode).await?)
    }

    /// Reads the whole leader record (no conflict range).
    ///
    /// # Errors
    ///
    /// [`ElectionError::NotInitialized`] if absent; [`ElectionError::Corrupt`] if it does not
    /// decode.
    pub async fn leader_record<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<LeaderRecord, ElectionError> {
        self.leader_with(txn, ReadMode::Snapshot).await
    }

    /// Writes the leader record, conflict-checked: on the leader key, and on the registration
    /// of a candidate the record reserves the vacancy for and the operators' mark on its
    /// name, so that a reservation never lands for a candidate that unregistered concurrently
    /// (docs/design.md §10.5) or that an operator marked meanwhile (§13.6).
    pub(super) fn write_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        write: &LeaderRecord,
    ) -> Result<(), ElectionError> {
        txn.add_read_conflict_key(&self.keys.leader)?;
        if let Some(holder) = write.reservation.as_ref().and_then(Party::candidate) {
            // The holder's registration and the operators' mark on its name, as the decision
            // read them: a heartbeat that makes it ineligible, or a mark written meanwhile,
            // makes this commit conflict, and the retry chooses again.
            txn.add_read_conflict_key(&self.keys.candidate(&holder.id)?)?;
            txn.add_read_conflict_key(&self.keys.mark(holder.id.name())?)?;
        }
        txn.set(&self.keys.leader, &codec::encode_leader(write)?);
        Ok(())
    }
}
