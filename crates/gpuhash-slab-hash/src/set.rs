//! `SlabHashSet`: keys only, 30 (or 15 of 64 bits) to a slab.

use std::marker::PhantomData;

use gpuhash_core::Stream;

use crate::Result;
use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_DONE};
use crate::table::{Kind, Shape, SlabHashOptions, SlabTable, SlabWord};

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
