//! The errors of gpuhash-cuckoo.

/// What a cuckoo table operation can fail with.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CuckooError {
    /// An error of the device layer: no driver or device, out of device memory
    /// ([`gpuhash_core::Error::OutOfDeviceMemory`]: the table then holds what it held
    /// before the call), mismatched input lengths ([`gpuhash_core::Error::LengthMismatch`],
    /// nothing changed), a driver failure.
    #[error(transparent)]
    Core(#[from] gpuhash_core::Error),
    /// Options that [`CuckooOptions::validate`](crate::CuckooOptions::validate) refuses.
    #[error("invalid cuckoo table options: {0}")]
    InvalidOptions(String),
    /// Pairs that found no place even after the table grew as far as the retry limit
    /// allowed; every other pair of the batch is in. The keys are widened to u64.
    #[error("{} pairs could not be placed, keys {:?}{}", .keys.len(), &.keys[..(.keys.len().min(8))], if .keys.len() > 8 { " ..." } else { "" })]
    NotInserted {
        /// The keys that are not in the table.
        keys: Vec<u64>,
    },
}

impl CuckooError {
    /// True for [`gpuhash_core::Error::OutOfDeviceMemory`].
    pub fn is_out_of_device_memory(&self) -> bool {
        matches!(
            self,
            CuckooError::Core(gpuhash_core::Error::OutOfDeviceMemory)
        )
    }
}

impl From<CuckooError> for gpuhash_core::Error {
    fn from(error: CuckooError) -> Self {
        match error {
            CuckooError::Core(e) => e,
            other => gpuhash_core::Error::InvalidInput(other.to_string()),
        }
    }
}

/// The result type of gpuhash-cuckoo.
pub type Result<T, E = CuckooError> = std::result::Result<T, E>;
