//! `SlabHashMultiMap`: every inserted pair is kept, duplicates included.

use std::marker::PhantomData;

use gpuhash_core::table::{DeviceRows, Key, MultiMap, check_pairs};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::contract::{pair_export, table_contract};
use crate::layouts::{GH_OP_COUNT, GH_OP_INSERT, GH_OP_REMOVE};
use crate::shape::{Kind, Shape};
use crate::table::{Batch, SlabTable};

/// A concurrent GPU multimap over slab lists, keys and values `u32` or `u64`: a key may
/// hold many values, and the same pair twice. It speaks the table contract ([`MultiMap`],
/// [`gpuhash_core::table::Table`], [`gpuhash_core::image::Image`]). Every key value is
/// valid; every call takes `&self`. An insert batch costs time linear in its pairs however
/// often its keys repeat: copies a list's first slabs have no room for are grouped by
/// bucket and appended with one walk of the list (the crate docs, "Many copies of a key").
#[derive(Debug)]
pub struct SlabHashMultiMap<K: Key = u32, V: Key = u32> {
    table: SlabTable,
    types: PhantomData<fn(K, V)>,
}

table_contract!([K: Key, V: Key] SlabHashMultiMap<K, V>, "pairs", Shape::of::<K, V>(Kind::MultiMap));

impl<K: Key, V: Key> SlabHashMultiMap<K, V> {
    /// Queues `op` (count or remove every pair) on `keys`, answering a count a key.
    fn counts_async(
        &self,
        stream: &Stream,
        op: u32,
        keys: &DeviceBuffer<K>,
        counts: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let batch = Batch::<K, u32>::uniform(op, keys, None);
        self.table.queue(stream, &batch, Some(counts), None)
    }
}

impl<K: Key, V: Key> MultiMap for SlabHashMultiMap<K, V> {
    type Value = V;

    /// Queues inserts on `stream` and returns without waiting; the batch finishes on its
    /// own (see the crate docs on the room it reserves first, and on the scratch of its
    /// grouped appends, allocated before anything is queued). A batch of more than
    /// `u32::MAX` pairs is [`gpuhash_core::table::ErrorKind::InvalidInput`].
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        let batch = Batch::uniform(GH_OP_INSERT, keys, Some(values));
        self.table.queue(stream, &batch, None, None)
    }

    fn count_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.counts_async(stream, GH_OP_COUNT, keys, counts)
    }

    fn remove_all_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.counts_async(stream, GH_OP_REMOVE, keys, counts)
    }

    /// Every value of each key: a count pass, a scan of the counts on the device (only
    /// the total reaches the host), and a pass that writes each key's values at its offset
    /// (again, with the counts it found, if a batch on another stream removed values in
    /// between).
    fn get_all_on(&self, stream: &Stream, keys: &DeviceBuffer<K>) -> Result<DeviceRows<V>> {
        let mut counts = DeviceBuffer::zeroed(stream, keys.len())?;
        self.count_async(stream, keys, &mut counts)?;
        self.table.gather(stream, keys, &counts)
    }

    pair_export!();

    /// Adds every pair; inserts that find no free slab run again once the table has made
    /// room, and if it cannot, [`crate::SlabHashError::NotInserted`] names them (every
    /// other pair went in). A batch whose buffers or scratch the device has no memory for
    /// is refused whole, the multimap as it was.
    fn insert(&self, keys: &[K], values: &[V]) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        self.table
            .run_host(None, GH_OP_INSERT, keys, Some(values), false)
            .map(drop)
    }
}
