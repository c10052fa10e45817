//! What slab lists add to the errors below them.

use gpuhash_core::table::{ErrorKind, TableError};
use gpuhash_slab_alloc::SlabAllocError;

/// Errors of [`crate::SlabLists`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SlabListError {
    /// The device failed, ran out of memory, or an input was malformed.
    #[error(transparent)]
    Device(#[from] gpuhash_core::Error),
    /// The slab allocator failed: out of device memory, or its address space is full.
    #[error(transparent)]
    Alloc(#[from] SlabAllocError),
    /// Element `index` of a batch names list `list`, but there are only `list_count`.
    #[error("element {index} names list {list}, but there are {list_count} lists")]
    NoSuchList {
        /// The element's index in the batch.
        index: usize,
        /// The list it named.
        list: u32,
        /// How many lists there are.
        list_count: u32,
    },
    /// Element `index` of a batch is a word the lists reserve (all ones, or all ones but
    /// the lowest bit), which no list can hold.
    #[error("element {index} is the reserved word {word:#x}")]
    ReservedWord {
        /// The element's index in the batch.
        index: usize,
        /// The word.
        word: u32,
    },
    /// The batch could need more slabs than the allocator may reserve
    /// ([`crate::SlabListsOptions::max_slabs`]); nothing was appended.
    #[error("the batch may need {needed} more slabs, beyond the limit of {max_slabs} reserved")]
    OutOfSlabs {
        /// Slabs the batch may link.
        needed: u64,
        /// The limit of slabs reserved.
        max_slabs: u64,
    },
    /// Some words found no free slab and the allocator could not grow: every other word
    /// of the batch went in, these did not.
    #[error("{} words were not appended (the allocator could not grow: {cause})", .not_appended.len())]
    NotAppended {
        /// Indices, in the batch, of the words that did not go in.
        not_appended: Vec<usize>,
        /// Why the allocator could not grow.
        cause: Box<SlabListError>,
    },
}

impl TableError for SlabListError {
    fn kind(&self) -> ErrorKind {
        match self {
            SlabListError::Device(error) => error.kind(),
            SlabListError::Alloc(SlabAllocError::Device(error)) => error.kind(),
            SlabListError::Alloc(SlabAllocError::AddressSpaceFull { .. })
            | SlabListError::OutOfSlabs { .. } => ErrorKind::OutOfDeviceMemory,
            SlabListError::Alloc(_) => ErrorKind::Device,
            SlabListError::NoSuchList { .. } | SlabListError::ReservedWord { .. } => {
                ErrorKind::InvalidInput
            }
            SlabListError::NotAppended { .. } => ErrorKind::NotInserted,
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = SlabListError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_answers_its_kind() {
        let oom = gpuhash_core::Error::OutOfDeviceMemory;
        assert_eq!(
            SlabListError::from(oom.clone()).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        assert_eq!(
            SlabListError::from(SlabAllocError::AddressSpaceFull { slabs: 1 }).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        let out = SlabListError::OutOfSlabs {
            needed: 9,
            max_slabs: 8,
        };
        assert_eq!(out.kind(), ErrorKind::OutOfDeviceMemory);
        let bad = SlabListError::NoSuchList {
            index: 0,
            list: 5,
            list_count: 5,
        };
        assert_eq!(bad.kind(), ErrorKind::InvalidInput);
        let reserved = SlabListError::ReservedWord {
            index: 1,
            word: u32::MAX,
        };
        assert_eq!(reserved.kind(), ErrorKind::InvalidInput);
        let not = SlabListError::NotAppended {
            not_appended: vec![2],
            cause: Box::new(out),
        };
        assert_eq!(not.kind(), ErrorKind::NotInserted);
        assert!(not.to_string().starts_with("1 words were not appended"));
    }
}
