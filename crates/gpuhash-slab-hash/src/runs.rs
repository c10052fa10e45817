//! Multimap insert batches whose keys have many copies: the host half of the grouped
//! appends (`cuda-src/slab_hash/slab_runs.cuh`).
//!
//! A multimap insert walked its key's list to the first empty spot, so c copies of one key
//! cost c^2 / 30 slab reads (a key-value slab holds 15 pairs), and every copy raced the
//! others for the same tail slab. Now a pass runs in two parts. The tiled pass stores each
//! pair in the first [`crate::policy::walk_slabs`] slabs of its list where they have room,
//! and defers the rest, never extending a list. The grouped appends then group the deferred
//! pairs by bucket on the device and walk each bucket's list once, with one warp, filling
//! its empty spots and linking chains of new slabs, filled before they are linked, at its
//! tail. So a batch costs at most `walk_slabs` slab reads a pair, one walk a bucket and one
//! slab write for every 15 pairs (7 of wider entries), linear in the batch however its keys
//! repeat, and a batch of short lists defers nothing and pays four near-empty launches and
//! the zeroing of its table of buckets.
//!
//! Everything a pass needs is allocated before its first kernel is queued, so that a batch
//! refused for want of device memory changes nothing: one word a pair for the grouped
//! batch indices, 12 bytes a slot of the table of buckets (2 to 4 slots a pair for a batch
//! smaller than the table's buckets, 2 to 4 a bucket for a larger one), and a status byte a
//! pair where the caller passes none. A batch of more than `u32::MAX` pairs is refused.

use gpuhash_core::table::Key;
use gpuhash_core::{DeviceBuffer, Stream};

use crate::launch::{self, RunBuffers};
use crate::layouts::GH_OP_INSERT;
use crate::policy;
use crate::shape::Kind;
use crate::table::{Batch, SlabTable};
use crate::{Result, SlabHashError};

/// The device memory of a multimap insert batch's grouped appends, for every pass of it.
#[derive(Debug)]
pub(crate) struct RunScratch {
    /// Its counters and table of buckets, zeroed before each pass.
    runs: DeviceBuffer<u32>,
    /// The batch indices of the deferred pairs, each bucket's together.
    grouped: DeviceBuffer<u32>,
    /// The batch's status, for a caller that keeps none.
    own_status: Option<DeviceBuffer<u8>>,
}

impl RunScratch {
    /// The scratch parts of a pass with walk limit `walk_slabs`, and the status the pass
    /// writes: `status` where the caller gives one, else the scratch's own.
    pub(crate) fn parts<'a>(
        &'a mut self,
        walk_slabs: u32,
        status: Option<&'a mut DeviceBuffer<u8>>,
    ) -> (Option<&'a mut DeviceBuffer<u8>>, RunBuffers<'a>) {
        let status = status.or(self.own_status.as_mut());
        let buffers = RunBuffers {
            walk_slabs,
            runs: &mut self.runs,
            grouped: &mut self.grouped,
        };
        (status, buffers)
    }
}

impl SlabTable {
    /// The scratch of `batch`'s grouped appends if it is a multimap's insert batch (with a
    /// status of its own unless the caller keeps one, `with_status`), else none.
    pub(crate) fn run_scratch<K: Key, V: Key>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        with_status: bool,
    ) -> Result<Option<RunScratch>> {
        if !self.groups_runs(batch) {
            return Ok(None);
        }
        let n = batch.keys.len();
        if u32::try_from(n).is_err() {
            return Err(SlabHashError::Device(gpuhash_core::Error::InvalidInput(
                format!(
                    "a multimap insert batch of {n} pairs is over the 2^32 - 1 its passes index"
                ),
            )));
        }
        let slots = policy::run_slots(n, u64::from(self.all_buckets()));
        Ok(Some(RunScratch {
            runs: DeviceBuffer::unfilled(stream, launch::run_table_words(slots))?,
            grouped: DeviceBuffer::unfilled(stream, n)?,
            own_status: (!with_status)
                .then(|| DeviceBuffer::unfilled(stream, n))
                .transpose()?,
        }))
    }

    /// Whether `batch` runs as a tiled pass and grouped appends: a multimap's inserts.
    pub(crate) fn groups_runs<K, V>(&self, batch: &Batch<'_, K, V>) -> bool {
        self.shape.kind == Kind::MultiMap && batch.ops.is_none() && batch.uniform_op == GH_OP_INSERT
    }

    /// Slabs of a list that the tiled pass of a multimap insert batch reads before it
    /// defers, for a table that holds at most `entries` entries with the batch.
    pub(crate) fn walk_slabs(&self, entries: u64) -> u32 {
        policy::walk_slabs(
            entries,
            u64::from(self.all_buckets()),
            self.shape.per_slab(),
        )
    }
}
