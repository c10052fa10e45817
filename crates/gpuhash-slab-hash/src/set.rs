//! `SlabHashSet`: keys only, 30 to a slab.

use gpuhash_core::Stream;

use crate::Result;
use crate::layouts::{GH_OP_GET, GH_OP_INSERT, GH_OP_REMOVE, GH_STATUS_DONE};
use crate::table::{Kind, SlabHashOptions, SlabTable};

/// A concurrent GPU hash set of `u32` over slab lists of 30 keys. Every `u32` is a valid
/// key; batch calls take `&self`.
#[derive(Debug)]
pub struct SlabHashSet {
    table: SlabTable,
}

impl SlabHashSet {
    crate::table::housekeeping!("keys");

    /// An empty set on the stream's device.
    pub fn new(stream: &Stream, options: SlabHashOptions) -> Result<Self> {
        Ok(Self {
            table: SlabTable::new(stream, Kind::Set, options)?,
        })
    }

    /// Adds each key; true where it was not there before (for a key repeated in the
    /// batch, exactly one of its elements says true).
    pub fn insert(&self, keys: &[u32]) -> Result<Vec<bool>> {
        let answers = self.table.run_host(GH_OP_INSERT, keys, None, None)?;
        Ok(answers
            .status
            .iter()
            .map(|&s| s == GH_STATUS_DONE)
            .collect())
    }

    /// Whether each key is in the set.
    pub fn contains(&self, keys: &[u32]) -> Result<Vec<bool>> {
        let answers = self.table.run_host(GH_OP_GET, keys, None, None)?;
        Ok(answers
            .status
            .iter()
            .map(|&s| s == GH_STATUS_DONE)
            .collect())
    }

    /// Removes each key; true where it was there.
    pub fn remove(&self, keys: &[u32]) -> Result<Vec<bool>> {
        let answers = self.table.run_host(GH_OP_REMOVE, keys, None, None)?;
        Ok(answers
            .status
            .iter()
            .map(|&s| s == GH_STATUS_DONE)
            .collect())
    }

    /// Every key, in no particular order.
    pub fn export(&self) -> Result<Vec<u32>> {
        Ok(self.table.export(&self.table.stream()?)?.0)
    }
}
