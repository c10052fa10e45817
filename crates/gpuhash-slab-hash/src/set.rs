//! `SlabHashSet`: keys only, 30 (or 15 of 64 bits) to a slab.

use std::marker::PhantomData;

use gpuhash_core::{DeviceBuffer, Stream};
use gpuhash_slab_alloc::Exhaustion;

use crate::Result;
use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_DONE};
use crate::table::{Batch, Kind, Shape, SlabHashOptions, SlabTable, SlabWord};

/// A concurrent GPU hash set of `u32` or `u64` keys over slab lists. Every key value is
/// valid; batch calls take `&self`.
#[derive(Debug)]
pub struct SlabHashSet<K: SlabWord = u32> {
    table: SlabTable,
    types: PhantomData<fn(K)>,
}

impl<K: SlabWord> SlabHashSet<K> {
    crate::table::housekeeping!("keys");

    /// An empty set on the stream's device.
    pub fn new(stream: &Stream, options: SlabHashOptions) -> Result<Self> {
        Ok(Self {
            table: SlabTable::new(stream, Shape::of::<K, u32>(Kind::Set), options)?,
            types: PhantomData,
        })
    }

    /// Adds each key; true where it was not there before (for a key repeated in the
    /// batch, exactly one of its elements says true).
    pub fn insert(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.answered(GH_OP_INSERT, keys)
    }

    /// Whether each key is in the set.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.answered(GH_OP_GET, keys)
    }

    /// Removes each key; true where it was there.
    pub fn remove(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.answered(GH_OP_REMOVE, keys)
    }

    /// Every key, in no particular order.
    pub fn export(&self) -> Result<Vec<K>> {
        Ok(self.table.export::<K, u32>(&self.table.stream()?)?.0)
    }

    /// Queues inserts of device-resident keys on `stream` and returns without waiting:
    /// `status[i]` becomes [`crate::layouts::GH_STATUS_DONE`] where the key is new,
    /// [`crate::layouts::GH_STATUS_ABSENT`] where it was there. `status` must start zeroed;
    /// inserts that found no free slab end as [`crate::layouts::GH_STATUS_NO_SLAB`] and
    /// the returned flag says so: then [`SlabHashSet::insert_device`] finishes the batch.
    pub fn insert_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<Exhaustion> {
        self.queue(stream, GH_OP_INSERT, keys, status)
    }

    /// Inserts device-resident keys, growing the allocator as needed; waits. `status` must
    /// start zeroed, or hold what [`SlabHashSet::insert_async`] left.
    pub fn insert_device(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let batch = Batch::<K, u32>::uniform(GH_OP_INSERT, keys, None);
        self.table.run(stream, &batch, None, status)
    }

    /// Queues membership tests of device-resident keys on `stream` and returns without
    /// waiting: `status[i]` becomes [`crate::layouts::GH_STATUS_DONE`] where the key is
    /// there, [`crate::layouts::GH_STATUS_ABSENT`] where not, whatever it held.
    pub fn contains_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.queue(stream, GH_OP_GET, keys, status).map(drop)
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
        self.queue(stream, GH_OP_REMOVE, keys, status).map(drop)
    }

    fn queue(
        &self,
        stream: &Stream,
        op: u32,
        keys: &DeviceBuffer<K>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<Exhaustion> {
        let batch = Batch::<K, u32>::uniform(op, keys, None);
        self.table.pass(stream, &batch, None, status)
    }

    /// Runs `op` on every key; true where it answered DONE.
    fn answered(&self, op: u32, keys: &[K]) -> Result<Vec<bool>> {
        let answers = self.table.run_host::<K, u32>(op, keys, None, None)?;
        Ok(answers
            .status
            .iter()
            .map(|&s| s == GH_STATUS_DONE)
            .collect())
    }
}
