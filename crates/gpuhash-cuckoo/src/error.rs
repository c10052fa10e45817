//! The errors of gpuhash-cuckoo.

use gpuhash_core::table::{ErrorKind, TableError};

/// What a cuckoo table operation can fail with.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CuckooError {
    /// An error of the device layer: no driver or device, out of device memory
    /// ([`gpuhash_core::Error::OutOfDeviceMemory`]: the table then holds what it held
    /// before the call), mismatched input lengths ([`gpuhash_core::Error::LengthMismatch`],
    /// nothing changed), an image that is not this table's
    /// ([`gpuhash_core::Error::InvalidInput`]), a driver failure.
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

impl TableError for CuckooError {
    fn kind(&self) -> ErrorKind {
        match self {
            CuckooError::Core(e) => e.kind(),
            CuckooError::InvalidOptions(_) => ErrorKind::InvalidInput,
            CuckooError::NotInserted { .. } => ErrorKind::NotInserted,
        }
    }
}

/// The result type of gpuhash-cuckoo.
pub type Result<T, E = CuckooError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keep_their_sources() {
        let memory = CuckooError::from(gpuhash_core::Error::OutOfDeviceMemory);
        assert_eq!(memory.kind(), ErrorKind::OutOfDeviceMemory);
        assert_eq!(
            CuckooError::InvalidOptions("d".into()).kind(),
            ErrorKind::InvalidInput
        );
        let missing = CuckooError::NotInserted { keys: vec![1, 2] };
        assert_eq!(missing.kind(), ErrorKind::NotInserted);
        let boxed: Box<dyn std::error::Error> = Box::new(memory);
        assert!(boxed.to_string().contains("out of device memory"));
    }
}
