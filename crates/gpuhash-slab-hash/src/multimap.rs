//! `SlabHashMultiMap`: every inserted pair is kept, duplicates included.

use std::marker::PhantomData;

use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::layouts::{GH_OP_COUNT, GH_OP_INSERT, GH_OP_REMOVE};
use crate::map::check_pairs;
use crate::table::{Batch, Kind, Shape, SlabHashOptions, SlabTable, SlabWord};

/// A concurrent GPU multimap over slab lists, keys and values `u32` or `u64`: a key may
/// hold many values, and the same pair twice. Every key value is valid; batch calls take
/// `&self`.
#[derive(Debug)]
pub struct SlabHashMultiMap<K: SlabWord = u32, V: SlabWord = u32> {
    table: SlabTable,
    types: PhantomData<fn(K, V)>,
}

impl<K: SlabWord, V: SlabWord> SlabHashMultiMap<K, V> {
    crate::table::housekeeping!("pairs");
    crate::table::pair_inserts!();

    /// An empty multimap on the stream's device.
    pub fn new(stream: &Stream, options: SlabHashOptions) -> Result<Self> {
        Ok(Self {
            table: SlabTable::new(stream, Shape::of::<K, V>(Kind::MultiMap), options)?,
            types: PhantomData,
        })
    }

    /// Adds every pair, keeping what the keys held already.
    pub fn insert(&self, keys: &[K], values: &[V]) -> Result<()> {
        check_pairs(keys, values)?;
        self.table
            .run_host(GH_OP_INSERT, keys, Some(values), None)
            .map(drop)
    }

    /// How many values each key holds.
    pub fn count(&self, keys: &[K]) -> Result<Vec<u32>> {
        self.counted(GH_OP_COUNT, keys)
    }

    /// Whether each key holds a value.
    pub fn contains(&self, keys: &[K]) -> Result<Vec<bool>> {
        Ok(self.count(keys)?.iter().map(|&c| c > 0).collect())
    }

    /// Every value of each key, in no particular order: a count pass, a prefix sum, and a
    /// pass that writes each key's values at its offset.
    pub fn get_all(&self, keys: &[K]) -> Result<Vec<Vec<V>>> {
        let stream = self.table.stream()?;
        let device_keys = DeviceBuffer::from_host(&stream, keys)?;
        let counts = self.counted_device(&stream, GH_OP_COUNT, &device_keys)?;
        let (offsets, _, values) = self.table.gather::<K, V>(&stream, &device_keys, &counts)?;
        let values = values.to_host(&stream)?;
        Ok(offsets
            .windows(2)
            .map(|w| values[w[0] as usize..w[1] as usize].to_vec())
            .collect())
    }

    /// Removes every pair of each key; how many each had.
    pub fn remove_all(&self, keys: &[K]) -> Result<Vec<u32>> {
        self.counted(GH_OP_REMOVE, keys)
    }

    /// Every pair, in no particular order.
    pub fn export(&self) -> Result<Vec<(K, V)>> {
        let (keys, values) = self.table.export::<K, V>(&self.table.stream()?)?;
        Ok(keys.into_iter().zip(values).collect())
    }

    /// Queues counts of device-resident keys on `stream` and returns without waiting:
    /// `counts[i]` becomes how many values key i holds. `status` must start zeroed.
    pub fn count_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &mut DeviceBuffer<u32>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.counts_pass(stream, GH_OP_COUNT, keys, counts, status)
    }

    /// Queues removals of every pair of device-resident keys on `stream` and returns
    /// without waiting: `counts[i]` becomes how many pairs key i had. `status` must start
    /// zeroed.
    pub fn remove_all_async(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &mut DeviceBuffer<u32>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.counts_pass(stream, GH_OP_REMOVE, keys, counts, status)
    }

    /// Every value of each device-resident key, on the device: returns `offsets` (one more
    /// than the keys) and `values`, key i's values being `values[offsets[i]..offsets[i + 1]]`.
    /// Waits once, for the counts that size `values`.
    pub fn get_all_device(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
    ) -> Result<(DeviceBuffer<u64>, DeviceBuffer<V>)> {
        let counts = self.counted_device(stream, GH_OP_COUNT, keys)?;
        let (_, offsets, values) = self.table.gather(stream, keys, &counts)?;
        Ok((offsets, values))
    }

    fn counts_pass(
        &self,
        stream: &Stream,
        op: u32,
        keys: &DeviceBuffer<K>,
        counts: &mut DeviceBuffer<u32>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let batch = Batch::<K, u32>::uniform(op, keys, None);
        self.table
            .pass(stream, &batch, Some(counts), status)
            .map(drop)
    }

    /// Runs `op` (count or remove) on device keys and waits; the counts it answered.
    fn counted_device(&self, stream: &Stream, op: u32, keys: &DeviceBuffer<K>) -> Result<Vec<u32>> {
        let mut counts = DeviceBuffer::zeroed(stream, keys.len())?;
        let mut status = DeviceBuffer::zeroed(stream, keys.len())?;
        self.counts_pass(stream, op, keys, &mut counts, &mut status)?;
        Ok(counts.to_host(stream)?)
    }

    /// Runs `op` on every key; the counts it answered.
    fn counted(&self, op: u32, keys: &[K]) -> Result<Vec<u32>> {
        Ok(self.table.run_host::<K, u32>(op, keys, None, None)?.results)
    }
}
