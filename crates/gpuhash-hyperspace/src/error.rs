//! What the hyperspace index adds to the errors below it.

use gpuhash_core::table::{ErrorKind, TableError};
use gpuhash_slab_alloc::SlabAllocError;

use crate::cost::PolicyError;
use crate::shape::Field;

/// Errors of [`crate::HyperspaceIndex`]. A batch that fails changes nothing the index
/// holds (a rolled-back insert may leave removed slots behind, which hold no tuple).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HyperspaceError {
    /// The device failed, ran out of memory, or an input was malformed.
    #[error(transparent)]
    Device(#[from] gpuhash_core::Error),
    /// The slab allocator failed: out of device memory, or its address space is full.
    #[error(transparent)]
    Alloc(#[from] SlabAllocError),
    /// Options the index cannot take: p outside 1..=8, a subspace naming an attribute past
    /// p, or too many coordinate bits.
    #[error("invalid options: {0}")]
    Options(String),
    /// Regrouping options the policy cannot take ([`crate::regroup::RegroupPolicy::new`],
    /// [`crate::history::QueryHistory::new`]).
    #[error("invalid regrouping options: {0}")]
    Policy(#[from] PolicyError),
    /// A batch's attributes are not p columns of one word a tuple.
    #[error("{words} attribute words for {tuples} tuples of {expected} attributes")]
    AttributeCount {
        /// Attributes a tuple of the index has (p).
        expected: usize,
        /// Tuples in the batch.
        tuples: usize,
        /// Attribute words given.
        words: usize,
    },
    /// Element `index` of a batch has a key the index reserves
    /// ([`crate::is_reserved_key`]).
    #[error("element {index} has the reserved key {key:#x}")]
    ReservedKey {
        /// The element's index in the batch.
        index: usize,
        /// The key.
        key: u32,
    },
    /// Two elements of one batch share a key: the batch is rejected whole.
    #[error("elements {first} and {second} of the batch share the key {key}")]
    DuplicateKey {
        /// The first element with the key.
        first: usize,
        /// The second.
        second: usize,
        /// The key.
        key: u32,
    },
    /// Query `index` names no field, names a field twice, or an attribute the index does
    /// not have.
    #[error("query {index} is not a conjunction of distinct fields of the index ({field:?})")]
    BadQuery {
        /// The query's index in the batch.
        index: usize,
        /// The field at fault, if one is.
        field: Option<Field>,
    },
}

impl TableError for HyperspaceError {
    fn kind(&self) -> ErrorKind {
        match self {
            HyperspaceError::Device(error) => error.kind(),
            HyperspaceError::Alloc(SlabAllocError::Device(error)) => error.kind(),
            HyperspaceError::Alloc(SlabAllocError::AddressSpaceFull { .. }) => {
                ErrorKind::OutOfDeviceMemory
            }
            HyperspaceError::Alloc(_) => ErrorKind::Device,
            HyperspaceError::Options(_)
            | HyperspaceError::Policy(_)
            | HyperspaceError::AttributeCount { .. }
            | HyperspaceError::ReservedKey { .. }
            | HyperspaceError::DuplicateKey { .. }
            | HyperspaceError::BadQuery { .. } => ErrorKind::InvalidInput,
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = HyperspaceError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_answers_its_kind() {
        let oom = gpuhash_core::Error::OutOfDeviceMemory;
        assert_eq!(
            HyperspaceError::from(oom.clone()).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        assert_eq!(
            HyperspaceError::from(SlabAllocError::Device(oom)).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        assert_eq!(
            HyperspaceError::from(SlabAllocError::AddressSpaceFull { slabs: 1 }).kind(),
            ErrorKind::OutOfDeviceMemory
        );
        let invalid = [
            HyperspaceError::Options("p = 9".into()),
            HyperspaceError::Policy(PolicyError::AttributeCount(9)),
            HyperspaceError::AttributeCount {
                expected: 2,
                tuples: 1,
                words: 1,
            },
            HyperspaceError::ReservedKey {
                index: 0,
                key: u32::MAX,
            },
            HyperspaceError::DuplicateKey {
                first: 0,
                second: 1,
                key: 3,
            },
            HyperspaceError::BadQuery {
                index: 0,
                field: None,
            },
        ];
        for error in invalid {
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        }
    }
}
