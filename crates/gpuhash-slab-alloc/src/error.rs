//! What SlabAlloc adds to gpuhash-core's errors.

/// Errors of SlabAlloc.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SlabAllocError {
    /// The device failed or ran out of memory.
    #[error(transparent)]
    Device(#[from] gpuhash_core::Error),
    /// The 32-bit address space is used up: 255 super blocks (regular) or
    /// 2^32 - 1024 slabs (light) are reserved already.
    #[error("the allocator's 32-bit address space is full ({slabs} slabs reserved)")]
    AddressSpaceFull {
        /// Slabs reserved when growth was refused.
        slabs: u64,
    },
    /// Addresses handed back that this allocator did not hand out, or that were free.
    #[error("{count} addresses were not slabs in use of this allocator; they were left alone")]
    ForeignAddresses {
        /// How many such addresses the batch held.
        count: u64,
    },
}

/// The result type of this crate.
pub type Result<T, E = SlabAllocError> = std::result::Result<T, E>;
