//! Tuples on the host and on the device, and the checks every batch passes before it
//! reaches a kernel.
//!
//! A batch is structure of arrays: `keys[i]`, `values[i]`, and the attributes in one
//! column-major slice, attribute `a` of tuple `i` at `attributes[a * n + i]` (p columns of
//! n), the layout the kernels read.

use std::collections::HashMap;

use gpuhash_core::{DeviceBuffer, Stream};
use gpuhash_slab_list::layouts::{GH_SLAB_EMPTY_WORD, GH_SLAB_REMOVED_WORD};

use crate::layouts::GH_HS_BUSY_KEY;
use crate::{HyperspaceError, Result};

/// Whether a key is one of the three words the index reserves (the slab lists' empty and
/// removed words, and the busy mark of an insert in flight), which no tuple may use.
pub fn is_reserved_key(key: u32) -> bool {
    key == GH_SLAB_EMPTY_WORD || key == GH_SLAB_REMOVED_WORD || key == GH_HS_BUSY_KEY
}

/// A batch of tuples on the host, as structure of arrays (see the module docs): attribute
/// `a` of tuple `i` is `attributes[a * keys.len() + i]`.
#[derive(Debug, Clone, Copy)]
pub struct TupleBatch<'a> {
    /// The keys, unique within the batch and never reserved ([`is_reserved_key`]).
    pub keys: &'a [u32],
    /// The attributes, column-major: p columns of `keys.len()`.
    pub attributes: &'a [u32],
    /// One value a key.
    pub values: &'a [u32],
}

impl TupleBatch<'_> {
    /// Tuples in the batch.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the batch holds no tuple.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// One tuple `(key, A1..Ap, value)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    /// The key.
    pub key: u32,
    /// The p attributes, in order.
    pub attributes: Vec<u32>,
    /// The value.
    pub value: u32,
}

/// Tuples on the host, as structure of arrays (the layout of [`TupleBatch`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tuples {
    /// Attributes a tuple.
    pub attribute_count: usize,
    /// The keys.
    pub keys: Vec<u32>,
    /// The attributes, column-major: attribute `a` of tuple `i` at `a * keys.len() + i`.
    pub attributes: Vec<u32>,
    /// The values.
    pub values: Vec<u32>,
}

impl Tuples {
    /// How many tuples.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Tuple `i` (panics past the end, as indexing does).
    pub fn tuple(&self, i: usize) -> Tuple {
        let n = self.len();
        Tuple {
            key: self.keys[i],
            attributes: (0..self.attribute_count)
                .map(|a| self.attributes[a * n + i])
                .collect(),
            value: self.values[i],
        }
    }

    /// Every tuple, in order.
    pub fn iter(&self) -> impl Iterator<Item = Tuple> + '_ {
        (0..self.len()).map(|i| self.tuple(i))
    }

    /// The tuples as a batch.
    pub fn as_batch(&self) -> TupleBatch<'_> {
        TupleBatch {
            keys: &self.keys,
            attributes: &self.attributes,
            values: &self.values,
        }
    }
}

/// Tuples on the device, in the layout of [`TupleBatch`].
#[derive(Debug)]
pub struct DeviceTuples {
    /// The keys.
    pub keys: DeviceBuffer<u32>,
    /// The attributes, column-major: p columns of `keys.len()`.
    pub attributes: DeviceBuffer<u32>,
    /// The values.
    pub values: DeviceBuffer<u32>,
}

impl DeviceTuples {
    /// `n` tuples of `p` attributes, for a kernel to write.
    pub fn unfilled(stream: &Stream, p: usize, n: usize) -> Result<Self> {
        let attribute_words = p
            .checked_mul(n)
            .ok_or_else(|| gpuhash_core::Error::InvalidInput(format!("{n} tuples of {p}")))?;
        Ok(Self {
            keys: DeviceBuffer::unfilled(stream, n)?,
            attributes: DeviceBuffer::unfilled(stream, attribute_words)?,
            values: DeviceBuffer::unfilled(stream, n)?,
        })
    }

    /// A copy of a host batch, as it is (its shape and keys are not checked).
    pub fn from_batch(stream: &Stream, batch: TupleBatch<'_>) -> Result<Self> {
        Ok(Self {
            keys: DeviceBuffer::from_host(stream, batch.keys)?,
            attributes: DeviceBuffer::from_host(stream, batch.attributes)?,
            values: DeviceBuffer::from_host(stream, batch.values)?,
        })
    }

    /// How many tuples.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The tuples, of `p` attributes, copied to the host; waits for the stream.
    pub fn to_host(&self, stream: &Stream, p: usize) -> Result<Tuples> {
        Ok(Tuples {
            attribute_count: p,
            keys: self.keys.to_host(stream)?,
            attributes: self.attributes.to_host(stream)?,
            values: self.values.to_host(stream)?,
        })
    }
}

/// Checks the shape of a batch of `p` attributes a tuple: as many values as keys, p
/// columns of attributes.
pub(crate) fn check_shape(p: usize, batch: TupleBatch<'_>) -> Result<()> {
    let n = batch.len();
    if batch.values.len() != n {
        return Err(gpuhash_core::Error::LengthMismatch {
            what: "keys and values",
            left: n,
            right: batch.values.len(),
        }
        .into());
    }
    if Some(batch.attributes.len()) != p.checked_mul(n) {
        return Err(HyperspaceError::AttributeCount {
            expected: p,
            tuples: n,
            words: batch.attributes.len(),
        });
    }
    Ok(())
}

/// Checks a batch of keys: none reserved, none twice.
pub(crate) fn check_keys(keys: &[u32]) -> Result<()> {
    let mut seen = HashMap::with_capacity(keys.len());
    for (index, &key) in keys.iter().enumerate() {
        if is_reserved_key(key) {
            return Err(HyperspaceError::ReservedKey { index, key });
        }
        if let Some(first) = seen.insert(key, index) {
            return Err(HyperspaceError::DuplicateKey {
                first,
                second: index,
                key,
            });
        }
    }
    Ok(())
}

/// Checks a whole batch: its shape, then its keys.
pub(crate) fn check_batch(p: usize, batch: TupleBatch<'_>) -> Result<()> {
    check_shape(p, batch)?;
    check_keys(batch.keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_reserved_keys_are_the_highest() {
        assert!(is_reserved_key(u32::MAX));
        assert!(is_reserved_key(u32::MAX - 1));
        assert!(is_reserved_key(u32::MAX - 2));
        assert!(!is_reserved_key(u32::MAX - 3));
        assert!(!is_reserved_key(0));
    }

    #[test]
    fn batches_are_checked_for_shape_reserved_and_repeated_keys() {
        let ok = TupleBatch {
            keys: &[1, 2],
            attributes: &[10, 20, 11, 21],
            values: &[5, 6],
        };
        assert!(check_batch(2, ok).is_ok());
        assert!(matches!(
            check_batch(3, ok),
            Err(HyperspaceError::AttributeCount { expected: 3, .. })
        ));
        let short_values = TupleBatch { values: &[5], ..ok };
        assert!(matches!(
            check_batch(2, short_values),
            Err(HyperspaceError::Device(
                gpuhash_core::Error::LengthMismatch { .. }
            ))
        ));
        let reserved = TupleBatch {
            keys: &[1, u32::MAX - 2],
            ..ok
        };
        assert!(matches!(
            check_batch(2, reserved),
            Err(HyperspaceError::ReservedKey { index: 1, .. })
        ));
        let repeated = TupleBatch {
            keys: &[7, 7],
            ..ok
        };
        assert!(matches!(
            check_batch(2, repeated),
            Err(HyperspaceError::DuplicateKey {
                first: 0,
                second: 1,
                key: 7
            })
        ));
    }

    #[test]
    fn host_tuples_read_column_major_attributes() {
        let tuples = Tuples {
            attribute_count: 2,
            keys: vec![1, 2],
            attributes: vec![10, 20, 11, 21],
            values: vec![5, 6],
        };
        assert_eq!(
            tuples.tuple(1),
            Tuple {
                key: 2,
                attributes: vec![20, 21],
                value: 6
            }
        );
        assert_eq!(tuples.iter().count(), 2);
    }
}
