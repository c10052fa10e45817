//! Maps that combine: an upsert folds each value into the one its key holds, so counting
//! or summing per key is one batch; `insert_or_find` gives each key the value it holds
//! already, or stores a candidate (dictionary encoding).

use super::{Map, check_pairs, with_stream};
use crate::staging::{downloaded, upload};
use crate::{DeviceBuffer, Error, Stream};

/// How an upsert combines a value with the one its key holds. Values are read as unsigned
/// integers of their width (`u32` or `u64`); [`Combine::Add`] wraps around.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Combine {
    /// The sum (counting: add 1 per key).
    Add,
    /// The smaller.
    Min,
    /// The larger.
    Max,
}

impl Combine {
    /// `held` combined with `value`, on the host: what a table's upsert computes.
    pub fn apply(self, held: u64, value: u64, bits: u32) -> u64 {
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        };
        match self {
            Combine::Add => held.wrapping_add(value) & mask,
            Combine::Min => held.min(value),
            Combine::Max => held.max(value),
        }
    }
}

/// A [`Map`] that combines values in place.
///
/// Exactness: every value of a batch is combined into its key's value exactly once, by an
/// atomic operation on the device, whatever the batch holds (a key repeated many times) and
/// whatever runs at once (batches of other host threads on other streams): a key new to
/// the map is stored by exactly one of its copies, and every other copy combines into that
/// value. Each table says how (see its crate docs) and which value widths it combines.
pub trait CombiningMap: Map {
    /// Queues upserts: where `keys[i]` is there, its value becomes `held combine
    /// values[i]`; where it is not, it is stored with `values[i]`. Returns without waiting.
    fn upsert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        values: &DeviceBuffer<Self::Value>,
        combine: Combine,
    ) -> Result<(), Self::Error>;

    /// Queues inserts that keep what is there: a key the map holds keeps its value, a new
    /// key is stored with `candidates[i]` (of equal new keys in a batch, exactly one
    /// candidate is stored); `values_out[i]` becomes the value `keys[i]` holds after the
    /// batch. Returns without waiting.
    fn insert_or_find_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<Self::Key>,
        candidates: &DeviceBuffer<Self::Value>,
        values_out: &mut DeviceBuffer<Self::Value>,
    ) -> Result<(), Self::Error>;

    /// Upserts each pair: `map[key] = map[key] combine value`, or `value` for a new key; in
    /// chunks of [`Table::host_insert_chunk`](super::Table::host_insert_chunk) pairs, the
    /// batch taking effect, or failing and leaving the map as it was, as one
    /// ([`upsert_in_chunks`](super::upsert_in_chunks)).
    fn upsert(
        &self,
        keys: &[Self::Key],
        values: &[Self::Value],
        combine: Combine,
    ) -> Result<(), Self::Error> {
        super::upsert_in_chunks(self, keys, values, combine)
    }

    /// The value each key holds, storing `candidates[i]` for a key that was new: with
    /// candidates `0..n` (the batch positions), an id below n for each key, equal keys
    /// sharing one, keys already there keeping theirs.
    fn insert_or_find(
        &self,
        keys: &[Self::Key],
        candidates: &[Self::Value],
    ) -> Result<Vec<Self::Value>, Self::Error> {
        check_pairs(keys.len(), candidates.len())?;
        with_stream(self.device(), |s| {
            let mut values_out = DeviceBuffer::unfilled(s, keys.len())?;
            let (k, c) = (upload(s, keys)?, upload(s, candidates)?);
            self.insert_or_find_async(s, &k, &c, &mut values_out)?;
            Ok(downloaded(s, &values_out)?)
        })
    }
}

/// [`Error::LengthMismatch`] unless `values_out` has one element a key.
pub fn check_values_out(keys: usize, values_out: usize) -> Result<(), Error> {
    if keys == values_out {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            what: "keys and values_out",
            left: keys,
            right: values_out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_applies_at_the_width() {
        assert_eq!(Combine::Add.apply(u32::MAX.into(), 2, 32), 1);
        assert_eq!(Combine::Add.apply(u64::MAX, 2, 64), 1);
        assert_eq!(Combine::Min.apply(7, 3, 32), 3);
        assert_eq!(Combine::Max.apply(7, 3, 64), 7);
    }
}
