//! One subtable's device arrays: slot words (keys, or packed pairs), values apart from
//! them (split buckets only), bucket locks and dirty bits, and the layout the kernels read
//! them by.

use gpuhash_core::table::Key;
use gpuhash_core::{DeviceAddress, DeviceBuffer, Error, Stream};

use crate::key::KeyLayout as _;
use crate::layouts::GhCuckooSubtable;
use crate::{Result, launch};

/// One subtable's device arrays.
pub(super) struct Subtable<K> {
    /// The slot words, as `K` entries: `buckets * K::PER_BUCKET` of them (128 bytes a
    /// bucket); packed buckets hold their 8-byte pairs in the same bytes.
    pub(super) keys: DeviceBuffer<K>,
    /// Split buckets' values; empty for packed ones.
    pub(super) values: DeviceBuffer<u32>,
    pub(super) locks: DeviceBuffer<u32>,
    /// One dirty bit a bucket (GhCuckooSubtable.dirty).
    pub(super) dirty: DeviceBuffer<u32>,
    pub(super) buckets: u64,
    pub(super) hash_a: u64,
    pub(super) hash_b: u64,
}

impl<K: Key> Subtable<K> {
    /// Empty arrays of `buckets` buckets with `value_words` value words a bucket: slot
    /// words all ones (empty), locks free, buckets clean.
    pub(super) fn allocate(
        stream: &Stream,
        buckets: u64,
        value_words: u64,
        hash: (u64, u64),
    ) -> Result<Self> {
        let too_large = |_| Error::InvalidInput("subtable too large".into());
        let entries = usize::try_from(buckets * K::PER_BUCKET).map_err(too_large)?;
        let words = buckets
            .checked_mul(value_words)
            .ok_or(Error::InvalidInput("subtable too large".into()))?;
        let words = usize::try_from(words).map_err(too_large)?;
        let mut keys = DeviceBuffer::<K>::zeroed(stream, entries)?;
        let values = DeviceBuffer::<u32>::zeroed(stream, words)?;
        let locks = DeviceBuffer::<u32>::zeroed(stream, buckets as usize)?;
        let dirty = DeviceBuffer::<u32>::zeroed(stream, dirty_words(buckets))?;
        launch::fill(stream, &mut keys, u32::MAX)?;
        Ok(Self {
            keys,
            values,
            locks,
            dirty,
            buckets,
            hash_a: hash.0,
            hash_b: hash.1,
        })
    }

    pub(super) fn layout<'a>(
        &'a self,
        stream: &'a Stream,
        guards: &mut Vec<DeviceAddress<'a>>,
    ) -> GhCuckooSubtable {
        let keys = self.keys.address(stream);
        let values = self.values.address(stream);
        let locks = self.locks.address(stream);
        let dirty = self.dirty.address(stream);
        let layout = GhCuckooSubtable {
            keys: keys.address as *mut _,
            values: values.address as *mut u32,
            locks: locks.address as *mut u32,
            dirty: dirty.address as *mut u32,
            buckets: self.buckets,
            fastmod: (u64::MAX / self.buckets).wrapping_add(1),
            hash_a: self.hash_a,
            hash_b: self.hash_b,
        };
        guards.extend([keys, values, locks, dirty]);
        layout
    }

    /// Bytes of its device arrays.
    pub(super) fn bytes(&self) -> usize {
        self.keys.size_bytes()
            + self.values.size_bytes()
            + self.locks.size_bytes()
            + self.dirty.size_bytes()
    }
}

/// Words of the dirty bits of `buckets` buckets.
pub(super) fn dirty_words(buckets: u64) -> usize {
    buckets.div_ceil(32) as usize
}
