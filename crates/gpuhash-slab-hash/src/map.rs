//! `SlabHashMap`: unique keys, an insert replaces the value.

use std::marker::PhantomData;

use gpuhash_core::{DeviceBuffer, Stream};
use gpuhash_slab_alloc::Exhaustion;

use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_DONE};
use crate::table::{Batch, Kind, Shape, SlabHashOptions, SlabTable, SlabWord};
use crate::{Op, Outcome, Result};

/// A concurrent GPU hash map over slab lists, keys and values `u32` or `u64`.
///
/// Batch calls take `&self`: several host threads may use one map at once, each call on a
/// stream of its own. Every key value is valid, the all-ones key included.
#[derive(Debug)]
pub struct SlabHashMap<K: SlabWord = u32, V: SlabWord = u32> {
    table: SlabTable,
    types: PhantomData<fn(K, V)>,
}

impl<K: SlabWord, V: SlabWord> SlabHashMap<K, V> {
    crate::table::housekeeping!("pairs");
    crate::table::pair_inserts!();

    /// An empty map on the stream's device.
    pub fn new(stream: &Stream, options: SlabHashOptions) -> Result<Self> {
        Ok(Self {
            table: SlabTable::new(stream, Shape::of::<K, V>(Kind::Map), options)?,
            types: PhantomData,
        })
    }

    /// Inserts each pair; an existing key gets the new value. Within one batch, of pairs
    /// with the same key exactly one whole value stays: the last copy's with
    /// [`crate::DuplicateKeys::LastCopy`], an unspecified one by default (see the crate
    /// docs).
    pub fn insert(&self, keys: &[K], values: &[V]) -> Result<()> {
        check_pairs(keys, values)?;
        self.table
            .run_host(GH_OP_INSERT, keys, Some(values), None)
            .map(drop)
    }

    /// The value of each key, or None.
    pub fn get(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let answers = self.table.run_host::<K, V>(GH_OP_GET, keys, None, None)?;
        Ok(answers
            .status
            .iter()
            .zip(&answers.results)
            .map(|(&s, &v)| (s == GH_STATUS_DONE).then_some(v))
            .collect())
    }

    /// Whether each key is in the map.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        Ok(self.get(keys)?.iter().map(Option::is_some).collect())
    }

    /// Removes each key; true where it was there.
    pub fn remove(&self, keys: &[K]) -> Result<Vec<bool>> {
        let answers = self
            .table
            .run_host::<K, V>(GH_OP_REMOVE, keys, None, None)?;
        Ok(answers
            .status
            .iter()
            .map(|&s| s == GH_STATUS_DONE)
            .collect())
    }

    /// Runs a batch of mixed operations in one launch, as concurrent work: operations on
    /// different keys do not wait for each other, and of operations on the same key any
    /// order may win.
    pub fn apply(&self, ops: &[Op<K, V>]) -> Result<Vec<Outcome<V>>> {
        let codes: Vec<u32> = ops.iter().map(Op::code).collect();
        let keys: Vec<K> = ops.iter().map(Op::key).collect();
        let values: Vec<V> = ops.iter().map(Op::value).collect();
        let answers = self
            .table
            .run_host(GH_OP_INSERT, &keys, Some(&values), Some(&codes))?;
        let answered = answers.status.iter().zip(&answers.results);
        Ok(ops
            .iter()
            .zip(answered)
            .map(|(op, (&s, &r))| op.outcome(s, r))
            .collect())
    }

    /// Every pair, in no particular order.
    pub fn export(&self) -> Result<Vec<(K, V)>> {
        let (keys, values) = self.table.export::<K, V>(&self.table.stream()?)?;
        Ok(keys.into_iter().zip(values).collect())
    }

    /// Queues lookups of device-resident keys on `stream` and returns without waiting:
    /// `status[i]` becomes [`crate::layouts::GH_STATUS_DONE`] with the value in
    /// `values[i]`, or [`crate::layouts::GH_STATUS_ABSENT`]. Every element is answered,
    /// whatever `status` held.
    pub fn get_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let batch = Batch::<K, V>::uniform(GH_OP_GET, keys, None);
        self.table
            .pass(stream, &batch, Some(values), status)
            .map(drop)
    }

    /// Queues removals of device-resident keys on `stream` and returns without waiting:
    /// `status[i]` becomes [`crate::layouts::GH_STATUS_DONE`] where the key was there,
    /// [`crate::layouts::GH_STATUS_ABSENT`] where not. `status` must start zeroed.
    pub fn remove_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let batch = Batch::<K, V>::uniform(GH_OP_REMOVE, keys, None);
        self.table.pass(stream, &batch, None, status).map(drop)
    }

    /// Queues a mixed batch of device-resident operations (codes `GH_OP_INSERT`,
    /// `GH_OP_GET`, `GH_OP_REMOVE` in `ops`) in one launch; like
    /// [`SlabHashMap::insert_async`] for inserts that find no slab.
    pub fn apply_async(
        &self,
        stream: &Stream,
        ops: &DeviceBuffer<u32>,
        keys: &DeviceBuffer<K>,
        values: &DeviceBuffer<V>,
        results: &mut DeviceBuffer<V>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<Exhaustion> {
        let batch = Batch {
            ops: Some(ops),
            uniform_op: GH_OP_INSERT,
            keys,
            values: Some(values),
        };
        self.table.pass(stream, &batch, Some(results), status)
    }
}

pub(crate) fn check_pairs<K, V>(keys: &[K], values: &[V]) -> Result<()> {
    if keys.len() == values.len() {
        Ok(())
    } else {
        Err(gpuhash_core::Error::LengthMismatch {
            what: "keys and values",
            left: keys.len(),
            right: values.len(),
        }
        .into())
    }
}
