//! `SlabHashMultiMap`: every inserted pair is kept, duplicates included.

use gpuhash_core::{DeviceBuffer, Stream};

use crate::Result;
use crate::layouts::{GH_OP_COUNT, GH_OP_INSERT, GH_OP_REMOVE};
use crate::map::check_pairs;
use crate::table::{Kind, SlabHashOptions, SlabTable};

/// A concurrent GPU multimap from `u32` to `u32` over slab lists: a key may hold many
/// values, and the same pair twice. Every `u32` is a valid key; batch calls take `&self`.
#[derive(Debug)]
pub struct SlabHashMultiMap {
    table: SlabTable,
}

impl SlabHashMultiMap {
    crate::table::housekeeping!("pairs");

    /// An empty multimap on the stream's device.
    pub fn new(stream: &Stream, options: SlabHashOptions) -> Result<Self> {
        Ok(Self {
            table: SlabTable::new(stream, Kind::MultiMap, options)?,
        })
    }

    /// Adds every pair, keeping what the keys held already.
    pub fn insert(&self, keys: &[u32], values: &[u32]) -> Result<()> {
        check_pairs(keys, values)?;
        self.table
            .run_host(GH_OP_INSERT, keys, Some(values), None)
            .map(drop)
    }

    /// How many values each key holds.
    pub fn count(&self, keys: &[u32]) -> Result<Vec<u32>> {
        Ok(self.table.run_host(GH_OP_COUNT, keys, None, None)?.results)
    }

    /// Whether each key holds a value.
    pub fn contains(&self, keys: &[u32]) -> Result<Vec<bool>> {
        Ok(self.count(keys)?.iter().map(|&c| c > 0).collect())
    }

    /// Every value of each key, in no particular order: a count pass, a prefix sum, and a
    /// pass that writes each key's values at its offset.
    pub fn get_all(&self, keys: &[u32]) -> Result<Vec<Vec<u32>>> {
        let counts = self.count(keys)?;
        let stream = self.table.stream()?;
        let device_keys = DeviceBuffer::from_host(&stream, keys)?;
        self.table.gather(&stream, &device_keys, &counts)
    }

    /// Removes every pair of each key; how many each had.
    pub fn remove_all(&self, keys: &[u32]) -> Result<Vec<u32>> {
        Ok(self.table.run_host(GH_OP_REMOVE, keys, None, None)?.results)
    }

    /// Every pair, in no particular order.
    pub fn export(&self) -> Result<Vec<(u32, u32)>> {
        let (keys, values) = self.table.export(&self.table.stream()?)?;
        Ok(keys.into_iter().zip(values).collect())
    }
}
