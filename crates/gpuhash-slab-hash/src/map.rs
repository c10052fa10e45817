//! `SlabHashMap`: unique keys, an insert replaces the value.

use std::marker::PhantomData;

use gpuhash_core::table::{
    Combine, CombiningMap, Key, Map, Table, check_pairs, check_values_out, insert_in_chunks,
    upsert_in_chunks,
};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::contract::{pair_export, table_contract};
use crate::layouts::{
    GH_OP_GET, GH_OP_INSERT, GH_OP_INSERT_OR_FIND, GH_OP_REMOVE, GH_OP_UPSERT_ADD,
    GH_OP_UPSERT_MAX, GH_OP_UPSERT_MIN,
};
use crate::shape::{Kind, Shape};
use crate::table::{Batch, SlabTable};
use crate::view::{DeviceView, GhSlabView};
use crate::{Op, OpCode, Outcome, Result};

/// A concurrent GPU hash map over slab lists, keys and values `u32` or `u64`; it speaks
/// the table contract ([`Map`], [`gpuhash_core::table::Table`],
/// [`gpuhash_core::image::Image`]).
///
/// Every call takes `&self`: several host threads may use one map at once, each blocking
/// call on a stream lent by the device. Every key value is valid, the all-ones key
/// included. Within one insert batch, of pairs with the same key exactly one whole value
/// stays: the last copy's with [`crate::DuplicateKeys::LastCopy`], an unspecified one by
/// default (see the crate docs).
#[derive(Debug)]
pub struct SlabHashMap<K: Key = u32, V: Key = u32> {
    table: SlabTable,
    types: PhantomData<fn(K, V)>,
}

table_contract!([K: Key, V: Key] SlabHashMap<K, V>, "pairs", Shape::of::<K, V>(Kind::Map));

impl<K: Key, V: Key> SlabHashMap<K, V> {
    /// Lends the map to the caller's own kernels on `stream` (a kernel of theirs that
    /// probes it with `gh_slab_find_u32` / `_u64`, fused with their other work); see
    /// [`DeviceView`] for how long the view is valid and [`crate::view`] for the headers
    /// and the NVRTC compile.
    pub fn device_view<'a>(&'a self, stream: &Stream) -> Result<DeviceView<'a>> {
        let table = &self.table;
        if stream.device().properties().ordinal != table.device.properties().ordinal {
            return Err(gpuhash_core::Error::InvalidInput(
                "device_view: the stream is of another device than the map".into(),
            )
            .into());
        }
        let slabs = table.slabs.read();
        let raw = table.with_table(&slabs, stream, None, Ok)?;
        let view = GhSlabView {
            table: raw,
            key_words: K::WORDS,
            value_words: V::WORDS,
        };
        Ok(DeviceView::new(view, stream, slabs))
    }
    /// Runs a batch of mixed operations in one launch, as concurrent work: operations on
    /// different keys do not wait for each other, and of operations on the same key any
    /// order may win. Inserts that find no free slab run again once the table has made
    /// room, as [`Map::insert`]'s do.
    pub fn apply(&self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        let codes: Vec<OpCode> = ops.iter().map(Op::code).collect();
        let keys: Vec<K> = ops.iter().map(Op::key).collect();
        let values: Vec<V> = ops.iter().map(Op::value).collect();
        let (status, found) =
            self.table
                .run_host(Some(&codes), GH_OP_INSERT, &keys, Some(&values), true)?;
        Ok(ops
            .iter()
            .zip(status.iter().zip(found))
            .map(|(op, (&done, value))| op.outcome(done, value))
            .collect())
    }

    /// Queues a mixed batch of device-resident operations (`ops[i]` on `keys[i]`, with
    /// `values[i]` for an insert) in one launch on `stream` and returns without waiting:
    /// `done[i]` becomes 1 where the operation took effect (a pair stored, a key found or
    /// removed) and 0 where its key was missing; a found value lands in `results[i]`, other
    /// elements of `results` keep what they held. Inserts finish on their own, as
    /// [`Map::insert_async`]'s do.
    pub fn apply_async(
        &self,
        stream: &Stream,
        ops: &DeviceBuffer<OpCode>,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        results: &mut DeviceBuffer<V>,
        done: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let batch = Batch::mixed(ops, keys, values, keys.len());
        self.table.queue(stream, &batch, Some(results), Some(done))
    }
}

/// A slab hash's buckets are chains of slab addresses, which mean nothing read from host
/// memory: its image is never probed in place, and a table that pages maps (gpuhash-swap)
/// pages it in for every lookup.
impl<K: Key, V: Key> gpuhash_core::image::ProbeInPlace for SlabHashMap<K, V> {}

impl<K: Key, V: Key> Map for SlabHashMap<K, V> {
    type Value = V;

    /// Queues inserts on `stream` and returns without waiting; the batch finishes on its
    /// own (see the crate docs on the room it reserves first, and what that may wait for).
    fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
    ) -> Result<()> {
        let batch = Batch::uniform(GH_OP_INSERT, keys, Some(values));
        self.table.queue(stream, &batch, None, None)
    }

    fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        let batch = Batch::<K, V>::uniform(GH_OP_GET, keys, None);
        self.table.queue(stream, &batch, Some(values), Some(found))
    }

    fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        found: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let batch = Batch::<K, V>::uniform(GH_OP_GET, keys, None);
        self.table.queue(stream, &batch, None, Some(found))
    }

    fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        removed: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        let batch = Batch::<K, V>::uniform(GH_OP_REMOVE, keys, None);
        self.table.queue(stream, &batch, None, Some(removed))
    }

    pair_export!();

    /// Inserts each pair. A batch of at most one chunk
    /// ([`Table::host_insert_chunk`](gpuhash_core::table::Table::host_insert_chunk)) runs
    /// whole: inserts that find no free slab run again once the table has made room, and if
    /// it cannot, [`crate::SlabHashError::NotInserted`] names them (every other pair went
    /// in). A larger batch runs in chunks ([`insert_in_chunks`]), each reserving the room it
    /// may need first: it takes effect, or fails and leaves the map as it was, as one.
    fn insert(&self, keys: &[K], values: &[V]) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        if keys.len() > self.host_insert_chunk() {
            return insert_in_chunks(self, keys, values);
        }
        self.table
            .run_host(None, GH_OP_INSERT, keys, Some(values), false)
            .map(drop)
    }
}

/// Upserts and `insert_or_find` run in the warp-cooperative kernel, where a key found has
/// its value combined by one atomic and a key not found is claimed as an insert claims it
/// (see the crate docs, *Combining*).
impl<K: Key, V: Key> CombiningMap for SlabHashMap<K, V> {
    fn upsert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        combine: Combine,
    ) -> Result<()> {
        let batch = Batch::uniform(upsert_op(combine), keys, Some(values));
        self.table.queue(stream, &batch, None, None)
    }

    fn insert_or_find_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        candidates: &DeviceBuffer<V>,
        values_out: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        check_values_out(keys.len(), values_out.len())?;
        let batch = Batch::uniform(GH_OP_INSERT_OR_FIND, keys, Some(candidates));
        self.table.queue(stream, &batch, Some(values_out), None)
    }

    /// Upserts each pair; as [`Map::insert`], a batch of one chunk runs whole, upserts that
    /// find no free slab running again once the table has made room, or
    /// [`crate::SlabHashError::NotInserted`] naming them; a larger batch runs in chunks
    /// ([`upsert_in_chunks`]), as one.
    fn upsert(&self, keys: &[K], values: &[V], combine: Combine) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        if keys.len() > self.host_insert_chunk() {
            return upsert_in_chunks(self, keys, values, combine);
        }
        self.table
            .run_host(None, upsert_op(combine), keys, Some(values), false)
            .map(drop)
    }

    /// The value each key holds after the batch; runs again what found no free slab, as
    /// [`CombiningMap::upsert`] does.
    fn insert_or_find(&self, keys: &[K], candidates: &[V]) -> Result<Vec<V>> {
        check_pairs(keys.len(), candidates.len())?;
        let (_, values) =
            self.table
                .run_host(None, GH_OP_INSERT_OR_FIND, keys, Some(candidates), true)?;
        Ok(values)
    }
}

/// The kernels' operation code of an upsert that combines so.
fn upsert_op(combine: Combine) -> u32 {
    match combine {
        Combine::Add => GH_OP_UPSERT_ADD,
        Combine::Min => GH_OP_UPSERT_MIN,
        Combine::Max => GH_OP_UPSERT_MAX,
    }
}
