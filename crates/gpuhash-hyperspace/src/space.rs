//! [`Space`]: one grid of buckets on the device, its head super nodes and its allocator
//! behind one lock, and the kernels that run on it. Searches are in `search.rs`, the bulk
//! build in `build.rs`.
//!
//! Room for inserts follows the slab hash: an insert batch of n tuples links at most
//! ceil(n / 31) + min(n, buckets) super nodes of p + 2 slabs; the space keeps an upper
//! bound of the slabs in use (measured at its last device-wide wait, plus every
//! reservation since) and lets a batch go at once while that bound stays within 3/4 of the
//! slabs reserved. Otherwise the batch waits for the device, measures, and grows the
//! allocator first. Tuples that still find no super node stay pending; the space grows
//! and serves them again, or returns the growth's error.

use std::sync::atomic::{AtomicU64, Ordering};

use gpuhash_core::{Device, DeviceAddress, DeviceBuffer, Stream};
use gpuhash_slab_alloc::{Exhaustion, SlabAlloc, SlabAllocError, SlabAllocOptions, Variant};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::Result;
use crate::launch::{self, Lookup};
use crate::layouts::{GH_HS_MAX_FIELDS, GhHsSpace};
use crate::shape::{SpaceShape, field_seed};
use crate::tuples::DeviceTuples;
use gpuhash_slab_alloc::layouts::GH_SLAB_WORDS;
use gpuhash_slab_list::layouts::{GH_SLAB_DATA_LANES, GH_SLAB_EMPTY_WORD};

/// What kernels read: the head super nodes and the allocator of the others.
#[derive(Debug)]
pub(crate) struct Slabs {
    heads: DeviceBuffer<u32>,
    alloc: SlabAlloc,
    /// The flag kernels that never allocate get, made once so that they allocate nothing
    /// (a batch rolling back after running out of memory still runs).
    unused: Exhaustion,
}

/// One space of an index: a grid over some fields, each bucket a chain of super nodes.
#[derive(Debug)]
pub(crate) struct Space {
    shape: SpaceShape,
    seed: u32,
    attribute_count: u32,
    device: Device,
    slabs: RwLock<Slabs>,
    possibly_in_use: AtomicU64,
}

/// The share of the reserved slabs that may be in use, 3/4 of those runs of `width` can
/// take (a bitmap word of 32 slabs holds floor(32 / width) runs): the allocator gives up
/// after 64 full memory blocks in a row, and with a quarter of all runs free at least a
/// quarter of the blocks have room.
fn safe_share(reserved: u64, width: u64) -> u64 {
    let usable = reserved / 32 * (32 / width * width);
    usable / 4 * 3
}

impl Space {
    /// An empty space of `shape` for tuples of `p` attributes, its allocator sized for
    /// `capacity` tuples.
    pub(crate) fn new(
        device: &Device,
        shape: SpaceShape,
        seed: u32,
        p: usize,
        capacity: u64,
        variant: Variant,
    ) -> Result<Self> {
        let chains = p as u64 + 2;
        let stream = device.lend_stream()?;
        let head_words = shape.bucket_count() * chains * u64::from(GH_SLAB_WORDS);
        let mut heads = DeviceBuffer::unfilled(&stream, head_words as usize)?;
        launch::fill(&stream, &mut heads, GH_SLAB_EMPTY_WORD)?;
        // Slabs of super nodes past the heads: a node's worth of tuples for every 31,
        // less what half the heads hold (with buckets sized for about a node each, about
        // half the buckets overflow), and a quarter more for the spread between buckets.
        // The allocator grows past that when it must.
        let beyond_heads = capacity
            .div_ceil(u64::from(GH_SLAB_DATA_LANES))
            .saturating_sub(shape.bucket_count() / 2)
            * chains;
        let alloc = SlabAlloc::new(
            &stream,
            SlabAllocOptions {
                variant,
                initial_slabs: beyond_heads + beyond_heads / 4 + 1024,
            },
        )?;
        let unused = Exhaustion::new(&stream)?;
        stream.synchronize()?;
        Ok(Self {
            shape,
            seed,
            attribute_count: p as u32,
            device: device.clone(),
            slabs: RwLock::new(Slabs {
                heads,
                alloc,
                unused,
            }),
            possibly_in_use: AtomicU64::new(0),
        })
    }

    pub(crate) fn shape(&self) -> &SpaceShape {
        &self.shape
    }

    pub(crate) fn attribute_count(&self) -> usize {
        self.attribute_count as usize
    }

    fn chains(&self) -> u64 {
        u64::from(self.attribute_count) + 2
    }

    /// The most slabs an insert of `n` tuples may link.
    pub(crate) fn slabs_needed(&self, n: usize) -> u64 {
        let n = n as u64;
        let super_nodes =
            n.div_ceil(u64::from(GH_SLAB_DATA_LANES)) + n.min(self.shape.bucket_count());
        super_nodes * self.chains()
    }

    /// Calls `launch` with the space as a kernel parameter, keeping the stream ordering of
    /// its memory until the kernel is queued; warps that find no free super node raise
    /// the flag at `exhausted`.
    pub(crate) fn with_space<R>(
        &self,
        slabs: &Slabs,
        stream: &Stream,
        exhausted: DeviceAddress<'_>,
        launch: impl FnOnce(GhHsSpace) -> gpuhash_core::Result<R>,
    ) -> gpuhash_core::Result<R> {
        let context = slabs.alloc.context(stream, exhausted);
        let heads = slabs.heads.address(stream);
        let mut params = GhHsSpace {
            heads: heads.address as *mut u32,
            bucket_count: self.shape.bucket_count() as u32,
            attribute_count: self.attribute_count,
            dimension_count: self.shape.dimensions().len() as u32,
            alloc: context.params(),
            ..GhHsSpace::default()
        };
        for (d, &(field, bits)) in self.shape.dimensions().iter().enumerate() {
            params.dimension_field[d] = field.index();
            params.dimension_bits[d] = u32::from(bits);
            params.dimension_seed[d] = field_seed(self.seed, field);
        }
        debug_assert!(self.shape.dimensions().len() <= GH_HS_MAX_FIELDS as usize);
        launch(params)
    }

    /// Runs a kernel that never allocates.
    pub(crate) fn run<R>(
        &self,
        stream: &Stream,
        launch: impl FnOnce(GhHsSpace) -> gpuhash_core::Result<R>,
    ) -> Result<R> {
        let slabs = self.slabs.read();
        let exhausted = slabs.unused.shared_address(stream);
        Ok(self.with_space(&slabs, stream, exhausted, launch)?)
    }

    /// The slabs held for reading, with room for `needed` more slabs in use: at once when
    /// the bound of slabs in use leaves it, else after waiting for the device and growing.
    /// A `retry` (tuples found no super node) grows at least once.
    pub(crate) fn with_room(
        &self,
        stream: &Stream,
        needed: u64,
        retry: bool,
    ) -> Result<RwLockReadGuard<'_, Slabs>, SlabAllocError> {
        if !retry {
            let slabs = self.slabs.read();
            let limit = safe_share(slabs.alloc.slabs_reserved(), self.chains());
            let reserved =
                self.possibly_in_use
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                        used.checked_add(needed).filter(|&total| total <= limit)
                    });
            if reserved.is_ok() {
                return Ok(slabs);
            }
        }
        let mut slabs = self.slabs.write();
        self.device.synchronize()?;
        let in_use = slabs.alloc.slabs_in_use(stream)?;
        self.possibly_in_use
            .store(in_use + needed, Ordering::Release);
        if retry {
            slabs.alloc.grow(stream)?;
        }
        while in_use + needed > safe_share(slabs.alloc.slabs_reserved(), self.chains()) {
            slabs.alloc.grow(stream)?;
        }
        Ok(RwLockWriteGuard::downgrade(slabs))
    }

    /// Inserts the tuples whose status is PENDING, growing and serving again those that
    /// found no super node; `slots` (zeroed by the caller) receives each inserted tuple's
    /// key slot. On a growth error the tuples inserted stay, the others stay PENDING.
    pub(crate) fn insert(
        &self,
        stream: &Stream,
        tuples: &DeviceTuples,
        status: &mut DeviceBuffer<u8>,
        mut slots: Option<&mut DeviceBuffer<u64>>,
        unique: bool,
    ) -> Result<()> {
        let needed = self.slabs_needed(tuples.len());
        let mut retry = false;
        loop {
            let slabs = self.with_room(stream, needed, retry)?;
            let mut exhaustion = Exhaustion::new(stream)?;
            self.with_space(&slabs, stream, exhaustion.address(stream), |space| {
                launch::insert(stream, space, tuples, status, slots.as_deref_mut(), unique)
            })?;
            drop(slabs);
            if !exhaustion.happened(stream)? {
                return Ok(());
            }
            retry = true;
        }
    }

    /// Looks keys up (with the attributes of their tuples where the space has attribute
    /// dimensions): found flags, and optionally the tuples and their key slots.
    pub(crate) fn get(
        &self,
        stream: &Stream,
        lookup: Lookup<'_>,
        found: &mut DeviceBuffer<u8>,
        out: Option<&mut DeviceTuples>,
        slots: Option<&mut DeviceBuffer<u64>>,
    ) -> Result<()> {
        self.run(stream, |space| {
            launch::get(stream, space, lookup, found, out, slots)
        })
    }

    /// Removes every live copy of each tuple's key from the bucket the tuple hashes to.
    pub(crate) fn delete(&self, stream: &Stream, tuples: &DeviceTuples) -> Result<()> {
        self.run(stream, |space| launch::delete(stream, space, tuples, None))
    }

    /// Removes the copies whose key slot ids a lookup or an insert on this space found.
    pub(crate) fn delete_slots(
        &self,
        stream: &Stream,
        slots: &DeviceBuffer<u64>,
        keys: &DeviceBuffer<u32>,
    ) -> Result<()> {
        self.run(stream, |space| {
            launch::delete_slots(stream, space, slots, keys)
        })
    }

    /// The bucket of each tuple, as the kernels compute it, on the device.
    pub(crate) fn buckets(
        &self,
        stream: &Stream,
        tuples: &DeviceTuples,
    ) -> Result<DeviceBuffer<u32>> {
        let mut buckets = DeviceBuffer::unfilled(stream, tuples.len())?;
        self.run(stream, |space| {
            launch::buckets(stream, space, tuples, &mut buckets)
        })?;
        Ok(buckets)
    }

    /// Every live tuple, in no particular order, into new device buffers, after the work
    /// queued on `stream`: a count, then a pass that packs the tuples with one cursor. The
    /// caller keeps writes out meanwhile; should the pass still find another number, it
    /// runs again with that one.
    pub(crate) fn export(&self, stream: &Stream) -> Result<DeviceTuples> {
        let mut expected = self.len(stream)?;
        loop {
            let mut out =
                DeviceTuples::unfilled(stream, self.attribute_count(), expected as usize)?;
            let mut cursor = DeviceBuffer::<u64>::zeroed(stream, 1)?;
            self.run(stream, |space| {
                launch::export(stream, space, &mut cursor, &mut out)
            })?;
            let found = cursor.to_host(stream)?[0];
            if found == expected {
                return Ok(out);
            }
            expected = found;
        }
    }

    /// Live tuples once the work queued on `stream` has run.
    pub(crate) fn len(&self, stream: &Stream) -> Result<u64> {
        let mut total = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        self.run(stream, |space| launch::count(stream, space, &mut total))?;
        Ok(total.to_host(stream)?[0])
    }

    /// Makes the space's removed key slots empty again once the work queued on `stream`
    /// has run; how many.
    pub(crate) fn reclaim(&self, stream: &Stream) -> Result<u64> {
        let mut total = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        self.run(stream, |space| launch::reclaim(stream, space, &mut total))?;
        Ok(total.to_host(stream)?[0])
    }

    /// (bytes reserved, bytes in use): heads and allocator.
    pub(crate) fn memory(&self, stream: &Stream) -> Result<(u64, u64)> {
        let slabs = self.slabs.read();
        let heads = slabs.heads.size_bytes() as u64;
        let in_use = slabs.alloc.slabs_in_use(stream)? * u64::from(GH_SLAB_WORDS) * 4;
        Ok((heads + slabs.alloc.bytes_reserved() as u64, heads + in_use))
    }

    /// Removes every tuple, keeping the memory: after every kernel queued on the device.
    pub(crate) fn clear(&self, stream: &Stream) -> Result<()> {
        let mut slabs = self.slabs.write();
        self.device.synchronize()?;
        Self::clear_locked(&mut slabs, stream)?;
        self.possibly_in_use.store(0, Ordering::Release);
        Ok(())
    }

    pub(crate) fn clear_locked(slabs: &mut Slabs, stream: &Stream) -> Result<()> {
        launch::fill(stream, &mut slabs.heads, GH_SLAB_EMPTY_WORD)?;
        slabs.alloc.reset(stream)?;
        Ok(())
    }

    /// The slabs held for writing, after every kernel on the device, with room for
    /// `needed` slabs beyond those in use (growing the allocator).
    pub(crate) fn write_with_room(
        &self,
        stream: &Stream,
        needed: u64,
    ) -> Result<parking_lot::RwLockWriteGuard<'_, Slabs>> {
        let mut slabs = self.slabs.write();
        self.device.synchronize()?;
        let in_use = slabs.alloc.slabs_in_use(stream)?;
        while in_use + needed > safe_share(slabs.alloc.slabs_reserved(), self.chains()) {
            slabs.alloc.grow(stream)?;
        }
        self.possibly_in_use
            .store(in_use + needed, Ordering::Release);
        Ok(slabs)
    }

    /// Grows the allocator of slabs held for writing once.
    pub(crate) fn grow_locked(slabs: &mut Slabs, stream: &Stream) -> Result<()> {
        Ok(slabs.alloc.grow(stream)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_safe_share_is_three_quarters_of_what_runs_can_take() {
        assert_eq!(safe_share(1024, 4), 768);
        assert_eq!(safe_share(1024, 10), 720);
        assert_eq!(safe_share(0, 3), 0);
    }
}
