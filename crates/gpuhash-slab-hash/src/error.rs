//! What the slab hash adds to the errors below it.

use gpuhash_core::table::{ErrorKind, TableError};
use gpuhash_slab_alloc::SlabAllocError;

/// Errors of slab hash tables.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SlabHashError {
    /// The device failed, ran out of memory, or an input was malformed.
    #[error(transparent)]
    Device(#[from] gpuhash_core::Error),
    /// The slab allocator failed: out of device memory, or its address space is full.
    #[error(transparent)]
    Alloc(#[from] SlabAllocError),
    /// Some inserts found no free slab and the allocator could not grow: every other
    /// operation of the batch took effect, these did not.
    #[error("{} inserts did not go in (the allocator could not grow: {cause})", .not_inserted.len())]
    NotInserted {
        /// Indices, in the batch, of the inserts that did not go in.
        not_inserted: Vec<usize>,
        /// Why the allocator could not grow.
        cause: SlabAllocError,
    },
    /// Inserts queued without waiting (`insert_async`, `apply_async`) found no free slab
    /// and did not go in, although their batch had reserved room (see the crate docs on
    /// what async inserts guarantee). Reported once, by the next call on the table that
    /// waits for its stream.
    #[error("inserts queued without waiting found no free slab and did not go in")]
    LostInserts,
}

impl TableError for SlabHashError {
    fn kind(&self) -> ErrorKind {
        match self {
            SlabHashError::Device(error) => error.kind(),
            SlabHashError::Alloc(SlabAllocError::Device(error)) => error.kind(),
            SlabHashError::Alloc(SlabAllocError::AddressSpaceFull { .. }) => {
                ErrorKind::OutOfDeviceMemory
            }
            SlabHashError::Alloc(_) => ErrorKind::Device,
            SlabHashError::NotInserted { .. } | SlabHashError::LostInserts => {
                ErrorKind::NotInserted
            }
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = SlabHashError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_answers_its_kind() {
        let oom = gpuhash_core::Error::OutOfDeviceMemory;
        assert_eq!(
            SlabHashError::from(oom.clone()).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        assert_eq!(
            SlabHashError::from(SlabAllocError::Device(oom.clone())).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        assert_eq!(
            SlabHashError::from(SlabAllocError::AddressSpaceFull { slabs: 1 }).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        assert_eq!(
            SlabHashError::from(SlabAllocError::ForeignAddresses { count: 1 }).kind(),
            ErrorKind::Device
        );
        let not_inserted = SlabHashError::NotInserted {
            not_inserted: vec![3],
            cause: SlabAllocError::Device(oom),
        };
        assert_eq!(not_inserted.kind(), ErrorKind::NotInserted);
        assert_eq!(SlabHashError::LostInserts.kind(), ErrorKind::NotInserted);
        let mismatch = gpuhash_core::Error::LengthMismatch {
            what: "keys and values",
            left: 1,
            right: 2,
        };
        assert_eq!(
            SlabHashError::from(mismatch).kind(),
            ErrorKind::InvalidInput
        );
    }
}
