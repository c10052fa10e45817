//! What the slab hash adds to the errors below it.

use gpuhash_slab_alloc::SlabAllocError;

/// Errors of slab hash tables.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SlabHashError {
    /// The device failed, ran out of memory, or an input was malformed.
    #[error(transparent)]
    Device(#[from] gpuhash_core::Error),
    /// The slab allocator failed.
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
}

/// The result type of this crate.
pub type Result<T, E = SlabHashError> = std::result::Result<T, E>;
