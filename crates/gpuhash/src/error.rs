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
    /// Slab lists.
    #[cfg(feature = "slab-list")]
    #[error(transparent)]
    SlabList(#[from] gpuhash_slab_list::SlabListError),
    /// A slab hash table.
    #[cfg(feature = "slab-hash")]
    #[error(transparent)]
    SlabHash(#[from] gpuhash_slab_hash::SlabHashError),
    /// A DyHash table.
    #[cfg(feature = "cuckoo")]
    #[error(transparent)]
    Cuckoo(#[from] gpuhash_cuckoo::CuckooError),
    /// The hyperspace index.
    #[cfg(feature = "hyperspace")]
    #[error(transparent)]
    Hyperspace(#[from] gpuhash_hyperspace::HyperspaceError),
}

/// The result type of the facade.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// What kind of failure this is, in the same words whichever crate raised it: match
    /// `ErrorKind::OutOfDeviceMemory` in one place for every table.
    pub fn kind(&self) -> gpuhash_core::table::ErrorKind {
        use gpuhash_core::table::TableError;
        match self {
            Error::Core(error) => error.kind(),
            #[cfg(feature = "slab-alloc")]
            Error::SlabAlloc(error) => match error {
                gpuhash_slab_alloc::SlabAllocError::Device(error) => error.kind(),
                gpuhash_slab_alloc::SlabAllocError::AddressSpaceFull { .. } => {
                    gpuhash_core::table::ErrorKind::OutOfDeviceMemory
                }
                _ => gpuhash_core::table::ErrorKind::Device,
            },
            #[cfg(feature = "slab-list")]
            Error::SlabList(error) => error.kind(),
            #[cfg(feature = "slab-hash")]
            Error::SlabHash(error) => error.kind(),
            #[cfg(feature = "cuckoo")]
            Error::Cuckoo(error) => error.kind(),
            #[cfg(feature = "hyperspace")]
            Error::Hyperspace(error) => error.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuhash_core::table::ErrorKind;

    #[test]
    fn every_crate_error_answers_the_same_kinds() {
        let oom = gpuhash_core::Error::OutOfDeviceMemory;
        assert_eq!(
            Error::from(oom.clone()).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        #[cfg(feature = "slab-hash")]
        assert_eq!(
            Error::from(gpuhash_slab_hash::SlabHashError::from(oom.clone())).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        #[cfg(feature = "slab-list")]
        assert_eq!(
            Error::from(gpuhash_slab_list::SlabListError::from(oom.clone())).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        #[cfg(feature = "hyperspace")]
        assert_eq!(
            Error::from(gpuhash_hyperspace::HyperspaceError::from(oom.clone())).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        #[cfg(feature = "cuckoo")]
        assert_eq!(
            Error::from(gpuhash_cuckoo::CuckooError::from(oom)).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        let bad = gpuhash_core::Error::InvalidInput("x".into());
        assert_eq!(Error::from(bad).kind(), ErrorKind::InvalidInput);
    }
}
