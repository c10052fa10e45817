//! One error type for programs that use several tables: every crate's error converts into
//! it, so `?` works across them.

/// Any error of gpuhash.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device, a buffer, a launch, or an input checked by gpuhash-core.
    #[error(transparent)]
    Core(#[from] gpuhash_core::Error),
    /// The slab allocator.
    #[cfg(feature = "slab-alloc")]
    #[error(transparent)]
    SlabAlloc(#[from] gpuhash_slab_alloc::SlabAllocError),
    /// A slab hash table.
    #[cfg(feature = "slab-hash")]
    #[error(transparent)]
    SlabHash(#[from] gpuhash_slab_hash::SlabHashError),
    /// A DyHash table.
    #[cfg(feature = "cuckoo")]
    #[error(transparent)]
    Cuckoo(#[from] gpuhash_cuckoo::CuckooError),
}

/// The result type of the facade.
pub type Result<T, E = Error> = std::result::Result<T, E>;
