//! `SlabHashMultiMap`: every inserted pair is kept, duplicates included.

use std::marker::PhantomData;

use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::layouts::{GH_OP_COUNT, GH_OP_INSERT, GH_OP_REMOVE};
use crate::map::check_pairs;
use crate::table::{Kind, Shape, SlabHashOptions, SlabTable, SlabWord};

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
        let counts = self.count(keys)?;
        let stream = self.table.stream()?;
        let device_keys = DeviceBuffer::from_host(&stream, keys)?;
        self.table.gather(&stream, &device_keys, &counts)
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

    /// Runs `op` on every key; the counts it answered (the kernels widen them to `V`).
    fn counted(&self, op: u32, keys: &[K]) -> Result<Vec<u32>> {
        let answers = self.table.run_host::<K, V>(op, keys, None, None)?;
        Ok(answers.results.iter().map(|c| c.widen() as u32).collect())
    }
}
