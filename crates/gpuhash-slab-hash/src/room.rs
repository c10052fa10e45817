//! Room for inserts, and the whole-table work that excludes every other kernel:
//! reservation, growth, compaction, flush and clear.
//!
//! Every insert batch first reserves the most slabs it may link: an insert links at most
//! one new slab, and a list that takes k new entries at most ceil(k / entries per slab),
//! so a batch of n at most ceil(n / entries per slab) + min(n, lists). The reservation is
//! the slab lists' ([`gpuhash_slab_list::room`]): an upper bound of the allocator's slabs
//! in use, kept on the host, lets a batch go with no wait while it stays within
//! [`safe_share`] of the slabs reserved. Only a batch that would pass it waits for the
//! device, measures the real use, and compacts (if removals left tombstones) or grows.

use std::sync::atomic::Ordering;

use gpuhash_core::Stream;
use gpuhash_slab_alloc::{SlabAlloc, SlabAllocError};
use gpuhash_slab_list::room::{self, safe_share};
use parking_lot::RwLockReadGuard;

use crate::Result;
use crate::launch::{self, BucketPass};
use crate::layouts::GH_EMPTY_KEY;
use crate::table::{SlabTable, Slabs};

/// How a batch that may insert asks for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// Room for every slab the batch may link, or an error and nothing queued: batches
    /// queued without waiting, which must finish on their own.
    Required,
    /// As much room as the device gives; inserts that find no slab are retried.
    BestEffort,
    /// A retry after inserts found no free slab: compact or grow, or fail.
    Retry,
}

impl SlabTable {
    /// The most slabs an insert batch of `n` elements may link.
    pub(crate) fn slabs_needed(&self, n: usize) -> u64 {
        let n = n as u64;
        n.div_ceil(self.shape.per_slab()) + n.min(u64::from(self.all_buckets()))
    }

    /// The slabs held for reading, with room for `needed` more slabs in use: at once when
    /// the bound of slabs in use leaves it, else after [`SlabTable::make_room`].
    pub(crate) fn with_room(
        &self,
        stream: &Stream,
        needed: u64,
        room: Room,
    ) -> Result<RwLockReadGuard<'_, Slabs>, SlabAllocError> {
        room::with_room(
            &self.slabs,
            &self.possibly_in_use,
            needed,
            room != Room::Retry,
            |slabs| slabs.alloc.slabs_reserved(),
            |slabs| self.make_room(slabs, stream, needed, room),
        )
    }

    /// Waits for every kernel on the device (compaction moves entries, and growth replaces
    /// what running kernels read), measures the slabs in use, and makes room for `needed`
    /// more: compacts first if removals may have left tombstones, then grows until they
    /// fit within the safe share. A retry after exhaustion compacts or grows at least once.
    /// Growth that fails is an error, except for [`Room::BestEffort`].
    fn make_room(
        &self,
        slabs: &mut Slabs,
        stream: &Stream,
        needed: u64,
        room: Room,
    ) -> Result<(), SlabAllocError> {
        self.device.synchronize()?;
        let mut in_use = slabs.alloc.slabs_in_use(stream)?;
        let fits =
            |in_use: u64, alloc: &SlabAlloc| in_use + needed <= safe_share(alloc.slabs_reserved());
        let mut compacted = false;
        if (room == Room::Retry || !fits(in_use, &slabs.alloc))
            && self.may_hold_tombstones.load(Ordering::Acquire)
        {
            in_use = self.compact(slabs, stream)?;
            compacted = true;
        }
        self.possibly_in_use.set(in_use + needed);
        let grown = grow_until(
            &mut slabs.alloc,
            stream,
            room == Room::Retry && !compacted,
            |alloc| fits(in_use, alloc),
        );
        match grown {
            Err(_) if room == Room::BestEffort => Ok(()),
            other => other,
        }
    }

    /// Compacts every list and gives emptied slabs back; returns the slabs in use after.
    /// The caller holds the write lock and has waited for the device, so no other kernel
    /// uses the table.
    pub(crate) fn compact(&self, slabs: &Slabs, stream: &Stream) -> Result<u64, SlabAllocError> {
        self.may_hold_tombstones.store(false, Ordering::Release);
        self.with_table(slabs, stream, None, |table| {
            launch::buckets::<u32, u32>(
                stream,
                self.shape,
                table,
                self.all_buckets(),
                BucketPass::Flush,
            )
        })?;
        slabs.alloc.slabs_in_use(stream)
    }

    /// Compacts every list and returns emptied slabs to the allocator, after the batches
    /// queued before it (on any stream) and before any queued after it.
    pub(crate) fn flush(&self) -> Result<()> {
        let stream = self.device.lend_stream()?;
        {
            let slabs = self.slabs.write();
            self.device.synchronize()?;
            let in_use = self.compact(&slabs, &stream)?;
            self.possibly_in_use.set(in_use);
        }
        self.check_lost(&stream)
    }

    /// Removes everything, keeping the memory reserved: after the work queued on `stream`
    /// and, like compaction, after every kernel queued before it on the device.
    pub(crate) fn clear(&self, stream: &Stream) -> Result<()> {
        let mut slabs = self.slabs.write();
        self.device.synchronize()?;
        launch::fill(stream, &mut slabs.heads, GH_EMPTY_KEY)?;
        slabs.alloc.reset(stream)?;
        slabs.lost.clear(stream)?;
        self.possibly_in_use.set(0);
        self.may_hold_tombstones.store(false, Ordering::Release);
        self.entries_bound.store(0, Ordering::Release);
        Ok(())
    }

    /// [`crate::SlabHashError::LostInserts`], once, if inserts queued without waiting
    /// before this call on `stream` found no free slab; waits for the stream.
    pub(crate) fn check_lost(&self, stream: &Stream) -> Result<()> {
        if !self.slabs.read().lost.happened(stream)? {
            return Ok(());
        }
        self.slabs.write().lost.clear(stream)?;
        Err(crate::SlabHashError::LostInserts)
    }
}

/// Grows `alloc` until `fits` says it does (at least once when `at_least_once`).
fn grow_until(
    alloc: &mut SlabAlloc,
    stream: &Stream,
    at_least_once: bool,
    fits: impl Fn(&SlabAlloc) -> bool,
) -> Result<(), SlabAllocError> {
    if at_least_once {
        alloc.grow(stream)?;
    }
    while !fits(alloc) {
        alloc.grow(stream)?;
    }
    Ok(())
}
