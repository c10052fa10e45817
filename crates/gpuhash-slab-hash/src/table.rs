//! The engine under the three slab hash tables: bucket heads, the slab allocator, the
//! batch loop that grows the allocator and retries, and the per-bucket passes.

use std::sync::atomic::{AtomicBool, Ordering};

use gpuhash_core::hash::Universal32;
use gpuhash_core::last_copy::{self, DuplicateKeys};
use gpuhash_core::table::Key;
use gpuhash_core::{Device, DeviceBuffer, Stream};
use gpuhash_slab_alloc::{Exhaustion, SlabAlloc, SlabAllocError, SlabAllocOptions, Variant};
use parking_lot::RwLock;

use crate::launch::{self, BucketPass, OpsBuffers};
use crate::layouts::{
    GH_EMPTY_KEY, GH_OP_INSERT, GH_OP_REMOVE, GH_RESERVED_BUCKETS, GH_SLAB_KEYS, GH_STATUS_NO_SLAB,
    GH_STATUS_PENDING, GH_TABLE_MAP, GH_TABLE_MULTIMAP, GH_TABLE_SET, GhSlabTable,
};
use crate::{Result, SlabHashError, sizing};

/// Which table the slabs make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Map,
    Set,
    MultiMap,
}

impl Kind {
    fn code(self) -> u32 {
        match self {
            Kind::Map => GH_TABLE_MAP,
            Kind::Set => GH_TABLE_SET,
            Kind::MultiMap => GH_TABLE_MULTIMAP,
        }
    }
}

/// A key or value type a slab hash table stores: `u32` or `u64`, the contract's [`Key`]
/// types (its width is [`Key::WORDS`]).
pub trait SlabWord: Key {}

impl<T: Key> SlabWord for T {}

/// What a slab holds: the table kind and the widths of keys and values (0 for sets), in
/// 32-bit words, as the kernels are instantiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub kind: Kind,
    pub key_words: u32,
    pub value_words: u32,
}

impl Shape {
    pub(crate) fn of<K: SlabWord, V: SlabWord>(kind: Kind) -> Self {
        let value_words = if kind == Kind::Set { 0 } else { V::WORDS };
        Self {
            kind,
            key_words: K::WORDS,
            value_words,
        }
    }

    /// Lanes an entry takes: 3-word entries are padded to 4, so that 64-bit words stay
    /// 8-byte aligned.
    fn entry_lanes(self) -> u32 {
        match self.key_words + self.value_words {
            3 => 4,
            words => words,
        }
    }

    /// Entries one slab holds.
    fn per_slab(self) -> u64 {
        u64::from(GH_SLAB_KEYS / self.entry_lanes())
    }

    /// Bytes of one entry's key and value.
    fn entry_bytes(self) -> u64 {
        4 * u64::from(self.key_words + self.value_words)
    }
}

/// Options of a slab hash table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlabHashOptions {
    /// Entries the table is sized for; it holds more, with longer lists.
    pub expected_entries: u64,
    /// How full the head slabs should be at `expected_entries`, from 0 (exclusive) to 1:
    /// buckets = expected_entries / (entries per slab * load). Lower is faster, higher
    /// uses less memory.
    pub load: f64,
    /// A bucket count to use instead of the one `load` gives.
    pub buckets: Option<u32>,
    /// Addressing of the slab allocator.
    pub variant: Variant,
    /// Seed of the bucket hash function.
    pub seed: u64,
    /// Which value a map's insert keeps for a key its batch holds more than once: by
    /// default one whole value, unspecified which; [`DuplicateKeys::LastCopy`] keeps the
    /// last copy's. Sets have no values, and multimaps keep every copy.
    pub duplicate_keys: DuplicateKeys,
}

impl Default for SlabHashOptions {
    /// 2^20 entries at load 0.6, regular addressing.
    fn default() -> Self {
        Self {
            expected_entries: 1 << 20,
            load: 0.6,
            buckets: None,
            variant: Variant::Regular,
            seed: 0x5eed,
            duplicate_keys: DuplicateKeys::AnyCopy,
        }
    }
}

impl SlabHashOptions {
    /// Options for `expected_entries` entries, the rest as [`Default`].
    pub fn with_capacity(expected_entries: u64) -> Self {
        Self {
            expected_entries,
            ..Self::default()
        }
    }

    fn bucket_count(&self, shape: Shape) -> Result<u32> {
        if let Some(buckets) = self.buckets {
            return (buckets > 0)
                .then_some(buckets)
                .ok_or_else(|| invalid("buckets must be positive"));
        }
        if !(self.load > 0.0 && self.load <= 1.0) {
            return Err(invalid(format!(
                "load must be in (0, 1], not {}",
                self.load
            )));
        }
        let buckets = (self.expected_entries as f64 / (shape.per_slab() as f64 * self.load))
            .ceil()
            .max(1.0);
        u32::try_from(buckets as u64).map_err(|_| invalid("more than 2^32 buckets"))
    }
}

fn invalid(message: impl Into<String>) -> SlabHashError {
    gpuhash_core::Error::InvalidInput(message.into()).into()
}

/// Device memory of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes reserved: bucket heads and everything the slab allocator holds.
    pub bytes_reserved: u64,
    /// Bytes of slabs in use: bucket heads and allocated slabs.
    pub bytes_in_use: u64,
    /// Bytes the live entries themselves take (4 or 8 per key, and per value).
    pub entry_bytes: u64,
}

impl MemoryUsage {
    /// Entry bytes over bytes of slabs in use: seed 002's memory utilization.
    pub fn utilization(&self) -> f64 {
        self.entry_bytes as f64 / self.bytes_in_use as f64
    }
}

pub(crate) struct SlabTable {
    shape: Shape,
    device: Device,
    heads: DeviceBuffer<u32>,
    bucket_count: u32,
    hash: Universal32,
    /// Batches hold it for reading while they queue their kernels; growing the allocator
    /// and compacting the lists hold it for writing, after waiting for the device.
    alloc: RwLock<SlabAlloc>,
    /// Set when a batch that may remove entries is queued, cleared by a compaction: whether
    /// compacting could give slabs back.
    may_hold_tombstones: AtomicBool,
    duplicate_keys: DuplicateKeys,
}

impl std::fmt::Debug for SlabTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlabTable")
            .field("shape", &self.shape)
            .field("buckets", &self.bucket_count)
            .finish()
    }
}

/// The methods every slab hash table has in the same words, for a struct whose `table`
/// field is its [`SlabTable`]; `$entries` names what it holds ("pairs", "keys").
macro_rules! housekeeping {
    ($entries:literal) => {
        #[doc = concat!("Number of ", $entries, ".")]
        pub fn len(&self) -> Result<usize> {
            self.table.len(&self.table.stream()?)
        }

        #[doc = concat!("True when it holds no ", $entries, ".")]
        pub fn is_empty(&self) -> Result<bool> {
            Ok(self.len()? == 0)
        }

        #[doc = concat!("Removes all ", $entries, ", keeping the memory.")]
        pub fn clear(&mut self) -> Result<()> {
            let stream = self.table.stream()?;
            self.table.clear(&stream)
        }

        /// Compacts every bucket's list and returns the slabs it empties to the allocator.
        /// Inserts do this on their own when the allocator runs out of slabs and removals
        /// left tombstones, so memory holds steady under churn without this call; it is for
        /// a full compaction at a time of the caller's choosing. Takes `&self`: it waits
        /// for the batches queued before it (on any stream), and batches queued by other
        /// threads meanwhile wait for it.
        pub fn flush(&self) -> Result<()> {
            let stream = self.table.stream()?;
            self.table.flush(&stream)
        }

        /// Device memory reserved and in use.
        pub fn memory(&self) -> Result<crate::MemoryUsage> {
            self.table.memory(&self.table.stream()?)
        }
    };
}
pub(crate) use housekeeping;

/// `insert_async` and `insert_device` of device-resident pairs, the same for the map and
/// the multimap (whose `table` field is their [`SlabTable`]).
macro_rules! pair_inserts {
    () => {
        /// Queues inserts of device-resident pairs on `stream` and returns without waiting.
        /// `status` (one per pair) must start zeroed; inserts that found no free slab end as
        /// [`crate::layouts::GH_STATUS_NO_SLAB`] and the returned flag says so: then
        /// `insert_device` with the same buffers finishes the batch.
        pub fn insert_async(
            &self,
            stream: &gpuhash_core::Stream,
            keys: &gpuhash_core::DeviceBuffer<K>,
            values: &gpuhash_core::DeviceBuffer<V>,
            status: &mut gpuhash_core::DeviceBuffer<u32>,
        ) -> Result<gpuhash_slab_alloc::Exhaustion> {
            let batch =
                crate::table::Batch::uniform(crate::layouts::GH_OP_INSERT, keys, Some(values));
            self.table.pass(stream, &batch, None, status)
        }

        /// Inserts device-resident pairs, growing the allocator as needed; waits. `status`
        /// (one per pair) must start zeroed, or hold what `insert_async` left.
        pub fn insert_device(
            &self,
            stream: &gpuhash_core::Stream,
            keys: &gpuhash_core::DeviceBuffer<K>,
            values: &gpuhash_core::DeviceBuffer<V>,
            status: &mut gpuhash_core::DeviceBuffer<u32>,
        ) -> Result<()> {
            let batch =
                crate::table::Batch::uniform(crate::layouts::GH_OP_INSERT, keys, Some(values));
            self.table.run(stream, &batch, None, status)
        }
    };
}
pub(crate) use pair_inserts;

/// Status and result of each element of a batch.
pub(crate) struct Answers<V> {
    pub status: Vec<u32>,
    pub results: Vec<V>,
}

/// What one batch asks: `ops` per element or `uniform_op` for all, on `keys` (and
/// `values`), answering into `results` and `status`.
pub(crate) struct Batch<'a, K, V> {
    pub ops: Option<&'a DeviceBuffer<u32>>,
    pub uniform_op: u32,
    pub keys: &'a DeviceBuffer<K>,
    pub values: Option<&'a DeviceBuffer<V>>,
}

impl<'a, K: SlabWord, V: SlabWord> Batch<'a, K, V> {
    /// Every element the same operation `op`, with `values` for inserts.
    pub(crate) fn uniform(
        op: u32,
        keys: &'a DeviceBuffer<K>,
        values: Option<&'a DeviceBuffer<V>>,
    ) -> Self {
        Self {
            ops: None,
            uniform_op: op,
            keys,
            values,
        }
    }
}

impl SlabTable {
    pub(crate) fn new(stream: &Stream, shape: Shape, options: SlabHashOptions) -> Result<Self> {
        let bucket_count = options.bucket_count(shape)?;
        let hash = Universal32::from_seed(options.seed, bucket_count)?;
        let head_words = (u64::from(bucket_count) + u64::from(GH_RESERVED_BUCKETS)) * 32;
        let mut heads = DeviceBuffer::zeroed(stream, head_words as usize)?;
        launch::fill(stream, &mut heads, GH_EMPTY_KEY)?;
        // Slabs past the heads that `expected_entries` need under a uniform hash, and a
        // quarter more for the spread between lists; the allocator grows past that if it
        // must.
        let all =
            sizing::expected_slabs(options.expected_entries, bucket_count, shape.per_slab()) as u64;
        let beyond_heads = all.saturating_sub(u64::from(bucket_count));
        let initial_slabs = beyond_heads + beyond_heads / 4 + 1024;
        let alloc = SlabAlloc::new(
            stream,
            SlabAllocOptions {
                variant: options.variant,
                initial_slabs,
            },
        )?;
        Ok(Self {
            shape,
            device: stream.device().clone(),
            heads,
            bucket_count,
            hash,
            alloc: RwLock::new(alloc),
            may_hold_tombstones: AtomicBool::new(false),
            duplicate_keys: options.duplicate_keys,
        })
    }

    /// Head slabs, the reserved-key buckets included.
    fn all_buckets(&self) -> u32 {
        self.bucket_count + GH_RESERVED_BUCKETS
    }

    /// Calls `launch` with the table as a kernel parameter, holding the allocator's read
    /// lock and the stream ordering of the table's memory until it has queued its kernel.
    /// Warps that find no free slab raise `exhaustion`.
    fn with_table<R>(
        &self,
        stream: &Stream,
        exhaustion: &mut Exhaustion,
        launch: impl FnOnce(GhSlabTable) -> Result<R>,
    ) -> Result<R> {
        self.with_table_of(&self.alloc.read(), stream, exhaustion, launch)
    }

    /// [`SlabTable::with_table`] with the allocator's lock held by the caller.
    fn with_table_of<R, E>(
        &self,
        alloc: &SlabAlloc,
        stream: &Stream,
        exhaustion: &mut Exhaustion,
        launch: impl FnOnce(GhSlabTable) -> Result<R, E>,
    ) -> Result<R, E> {
        let context = alloc.context(stream, exhaustion);
        let heads = self.heads.address(stream);
        launch(GhSlabTable {
            buckets: heads.address as *mut u32,
            bucket_count: self.bucket_count,
            kind: self.shape.kind.code(),
            hash: self.hash.layout(),
            alloc: context.params(),
        })
    }

    /// [`SlabTable::with_table`] for passes that never allocate.
    fn with_table_reading<R>(
        &self,
        stream: &Stream,
        launch: impl FnOnce(GhSlabTable) -> Result<R>,
    ) -> Result<R> {
        self.with_table(stream, &mut Exhaustion::new(stream)?, launch)
    }

    /// Queues one pass of `batch`; returns without waiting. Inserts that found no free slab
    /// end with status NO_SLAB, and the returned flag says so once the stream gets there.
    /// A map that keeps the last copy of each key first marks the earlier copies of an
    /// insert batch done, so that they are skipped.
    pub(crate) fn pass<K: SlabWord, V: SlabWord>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        results: Option<&mut DeviceBuffer<V>>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<Exhaustion> {
        check_lengths(batch, results.as_deref(), status)?;
        if self.keeps_last_copies(batch) {
            let mut repeated = DeviceBuffer::<u8>::unfilled(stream, batch.keys.len())?;
            last_copy::mark_repeated(stream, batch.keys, &mut repeated)?;
            launch::skip_repeated(stream, &repeated, status)?;
        }
        self.queue(stream, batch, results, status)
    }

    fn keeps_last_copies<K, V>(&self, batch: &Batch<'_, K, V>) -> bool {
        self.duplicate_keys == DuplicateKeys::LastCopy
            && self.shape.kind == Kind::Map
            && batch.ops.is_none()
            && batch.uniform_op == GH_OP_INSERT
    }

    /// [`SlabTable::pass`] without the marking of earlier copies.
    fn queue<K: SlabWord, V: SlabWord>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        results: Option<&mut DeviceBuffer<V>>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<Exhaustion> {
        if batch.ops.is_some() || batch.uniform_op == GH_OP_REMOVE {
            self.may_hold_tombstones.store(true, Ordering::Release);
        }
        let mut exhaustion = Exhaustion::new(stream)?;
        self.with_table(stream, &mut exhaustion, |table| {
            let buffers = OpsBuffers {
                ops: batch.ops,
                uniform_op: batch.uniform_op,
                keys: batch.keys,
                values: batch.values,
                results,
                status,
            };
            Ok(launch::ops(stream, self.shape, table, buffers)?)
        })?;
        Ok(exhaustion)
    }

    /// Runs `batch` to the end: when inserts find no free slab the allocator grows and they
    /// run again. If it cannot grow, every other operation has taken effect and the error
    /// names the inserts that did not. `status` must start PENDING.
    pub(crate) fn run<K: SlabWord, V: SlabWord>(
        &self,
        stream: &Stream,
        batch: &Batch<'_, K, V>,
        mut results: Option<&mut DeviceBuffer<V>>,
        status: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let mut reserved = self.alloc.read().slabs_reserved();
        let mut exhaustion = self.pass(stream, batch, results.as_deref_mut(), status)?;
        while exhaustion.happened(stream)? {
            let mut codes = status.to_host(stream)?;
            let failed: Vec<usize> = (0..codes.len())
                .filter(|&i| codes[i] == GH_STATUS_NO_SLAB)
                .collect();
            if let Err(cause) = self.make_room(stream, reserved) {
                return Err(SlabHashError::NotInserted {
                    not_inserted: failed,
                    cause,
                });
            }
            for &i in &failed {
                codes[i] = GH_STATUS_PENDING;
            }
            status.copy_from_host(stream, &codes)?;
            reserved = self.alloc.read().slabs_reserved();
            exhaustion = self.queue(stream, batch, results.as_deref_mut(), status)?;
        }
        Ok(())
    }

    /// Makes room for inserts that found no free slab, unless another batch did since the
    /// allocator held `reserved` slabs: if removals may have left tombstones, compacts the
    /// lists first, and grows the allocator (doubling it) only when a quarter of its slabs
    /// are not free after that. So a table whose keys come and go reuses its memory, and
    /// one that only grows pays for no compaction. Waits for every kernel on the device
    /// first: compaction moves entries, and growing replaces the super block table (and the
    /// light variant's arrays) that running kernels read.
    fn make_room(&self, stream: &Stream, reserved: u64) -> Result<(), SlabAllocError> {
        let mut alloc = self.alloc.write();
        if alloc.slabs_reserved() != reserved {
            return Ok(());
        }
        self.device.synchronize()?;
        if self.may_hold_tombstones.load(Ordering::Acquire) {
            self.compact(&alloc, stream)?;
            if alloc.slabs_in_use(stream)? * 4 <= reserved * 3 {
                return Ok(());
            }
        }
        alloc.grow(stream)
    }

    /// Compacts every list and gives emptied slabs back; the caller holds the allocator's
    /// write lock and has waited for the device, so no other kernel uses the table.
    fn compact(&self, alloc: &SlabAlloc, stream: &Stream) -> Result<(), SlabAllocError> {
        self.may_hold_tombstones.store(false, Ordering::Release);
        self.with_table_of(alloc, stream, &mut Exhaustion::new(stream)?, |table| {
            launch::buckets::<u32, u32>(
                stream,
                self.shape,
                table,
                self.all_buckets(),
                BucketPass::Flush,
            )
        })?;
        Ok(stream.synchronize()?)
    }

    /// Runs one batch from host slices on a stream of its own, so batches from several
    /// host threads overlap; returns each element's status and result.
    pub(crate) fn run_host<K: SlabWord, V: SlabWord>(
        &self,
        uniform_op: u32,
        keys: &[K],
        values: Option<&[V]>,
        ops: Option<&[u32]>,
    ) -> Result<Answers<V>> {
        let stream = self.device.new_stream()?;
        let keys_buffer = DeviceBuffer::from_host(&stream, keys)?;
        let values_buffer = values
            .map(|v| DeviceBuffer::from_host(&stream, v))
            .transpose()?;
        let ops_buffer = ops
            .map(|o| DeviceBuffer::from_host(&stream, o))
            .transpose()?;
        let batch = Batch {
            ops: ops_buffer.as_ref(),
            uniform_op,
            keys: &keys_buffer,
            values: values_buffer.as_ref(),
        };
        let mut results = DeviceBuffer::zeroed(&stream, keys.len())?;
        let mut status = DeviceBuffer::zeroed(&stream, keys.len())?;
        self.run(&stream, &batch, Some(&mut results), &mut status)?;
        Ok(Answers {
            status: status.to_host(&stream)?,
            results: results.to_host(&stream)?,
        })
    }

    /// A stream of its own for one blocking call.
    pub(crate) fn stream(&self) -> Result<Stream> {
        Ok(self.device.new_stream()?)
    }

    /// Live entries of each bucket (the reserved-key buckets last), on the device.
    fn bucket_counts(&self, stream: &Stream) -> Result<DeviceBuffer<u64>> {
        let buckets = self.all_buckets();
        let mut counts = DeviceBuffer::zeroed(stream, buckets as usize)?;
        self.with_table_reading(stream, |table| {
            Ok(launch::buckets::<u32, u32>(
                stream,
                self.shape,
                table,
                buckets,
                BucketPass::Count {
                    counts: &mut counts,
                },
            )?)
        })?;
        Ok(counts)
    }

    /// Live entries in the table, summed on the device into one word.
    pub(crate) fn len(&self, stream: &Stream) -> Result<usize> {
        let mut total = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        self.with_table_reading(stream, |table| {
            Ok(launch::buckets::<u32, u32>(
                stream,
                self.shape,
                table,
                self.all_buckets(),
                BucketPass::Total { total: &mut total },
            )?)
        })?;
        Ok(total.to_host(stream)?[0] as usize)
    }

    /// Every live entry: keys, and values unless the table is a set.
    pub(crate) fn export<K: SlabWord, V: SlabWord>(
        &self,
        stream: &Stream,
    ) -> Result<(Vec<K>, Vec<V>)> {
        let counts = self.bucket_counts(stream)?.to_host(stream)?;
        let (offsets, total) = exclusive_prefix_sum(&counts);
        let offsets = DeviceBuffer::from_host(stream, &offsets)?;
        let mut keys = DeviceBuffer::<K>::zeroed(stream, total as usize)?;
        let mut values = DeviceBuffer::<V>::zeroed(
            stream,
            if self.shape.kind == Kind::Set {
                0
            } else {
                total as usize
            },
        )?;
        self.with_table_reading(stream, |table| {
            let values = (self.shape.kind != Kind::Set).then_some(&mut values);
            let pass = BucketPass::Export {
                offsets: &offsets,
                keys: &mut keys,
                values,
            };
            Ok(launch::buckets(
                stream,
                self.shape,
                table,
                self.all_buckets(),
                pass,
            )?)
        })?;
        Ok((keys.to_host(stream)?, values.to_host(stream)?))
    }

    /// Compacts every list and returns emptied slabs to the allocator, after the batches
    /// queued before it and before any queued after it.
    pub(crate) fn flush(&self, stream: &Stream) -> Result<()> {
        let alloc = self.alloc.write();
        self.device.synchronize()?;
        Ok(self.compact(&alloc, stream)?)
    }

    /// Removes everything, keeping the memory reserved.
    pub(crate) fn clear(&mut self, stream: &Stream) -> Result<()> {
        launch::fill(stream, &mut self.heads, GH_EMPTY_KEY)?;
        self.alloc.get_mut().reset(stream)?;
        Ok(stream.synchronize()?)
    }

    /// Device memory the table reserves and uses.
    pub(crate) fn memory(&self, stream: &Stream) -> Result<MemoryUsage> {
        let alloc = self.alloc.read();
        let head_bytes = self.heads.size_bytes() as u64;
        Ok(MemoryUsage {
            bytes_reserved: head_bytes + alloc.bytes_reserved() as u64,
            bytes_in_use: head_bytes + alloc.slabs_in_use(stream)? * 128,
            entry_bytes: self.len(stream)? as u64 * self.shape.entry_bytes(),
        })
    }

    /// Multimap: the values of each key laid end to end in key order, `counts[i]` of key
    /// i from `offsets[i]` on; `offsets` (on the host and on the device) has one more
    /// element, the total. A batch on another stream may remove values between the count
    /// and the gather: then the gather runs again with the counts it found, which only
    /// fall, so that no slot of the answer is left unwritten.
    pub(crate) fn gather<K: SlabWord, V: SlabWord>(
        &self,
        stream: &Stream,
        keys: &DeviceBuffer<K>,
        counts: &[u32],
    ) -> Result<(Vec<u64>, DeviceBuffer<u64>, DeviceBuffer<V>)> {
        let mut limits = counts.to_vec();
        loop {
            let wide: Vec<u64> = limits.iter().map(|&c| u64::from(c)).collect();
            let (mut offsets, total) = exclusive_prefix_sum(&wide);
            offsets.push(total);
            let mut device_counts = DeviceBuffer::from_host(stream, &limits)?;
            let device_offsets = DeviceBuffer::from_host(stream, &offsets)?;
            let mut out = DeviceBuffer::<V>::unfilled(stream, total as usize)?;
            self.with_table_reading(stream, |table| {
                Ok(launch::gather(
                    stream,
                    self.shape,
                    table,
                    keys,
                    &mut device_counts,
                    &device_offsets,
                    &mut out,
                )?)
            })?;
            let written = device_counts.to_host(stream)?;
            if written == limits {
                return Ok((offsets, device_offsets, out));
            }
            limits = written;
        }
    }
}

fn check_lengths<K, V>(
    batch: &Batch<'_, K, V>,
    results: Option<&DeviceBuffer<V>>,
    status: &DeviceBuffer<u32>,
) -> Result<()>
where
    K: SlabWord,
    V: SlabWord,
{
    let n = batch.keys.len();
    let others = [
        ("keys and operations", batch.ops.map(DeviceBuffer::len)),
        ("keys and values", batch.values.map(DeviceBuffer::len)),
        ("keys and results", results.map(DeviceBuffer::len)),
        ("keys and status", Some(status.len())),
    ];
    for (what, len) in others {
        if let Some(len) = len
            && len != n
        {
            return Err(gpuhash_core::Error::LengthMismatch {
                what,
                left: n,
                right: len,
            }
            .into());
        }
    }
    Ok(())
}

/// Offsets where each group starts when groups of `counts` are laid end to end, and the
/// total.
pub(crate) fn exclusive_prefix_sum(counts: &[u64]) -> (Vec<u64>, u64) {
    let mut total = 0;
    let offsets = counts
        .iter()
        .map(|&c| {
            let at = total;
            total += c;
            at
        })
        .collect();
    (offsets, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_lay_groups_end_to_end() {
        assert_eq!(exclusive_prefix_sum(&[3, 0, 2]), (vec![0, 3, 3], 5));
        assert_eq!(exclusive_prefix_sum(&[]), (vec![], 0));
    }

    #[test]
    fn bucket_count_follows_load_and_rejects_nonsense() {
        let options = SlabHashOptions {
            expected_entries: 15_000,
            load: 0.5,
            ..Default::default()
        };
        assert_eq!(
            options
                .bucket_count(Shape::of::<u32, u32>(Kind::Map))
                .unwrap(),
            2000
        );
        assert_eq!(
            options
                .bucket_count(Shape::of::<u32, u32>(Kind::Set))
                .unwrap(),
            1000
        );
        // 64-bit keys with 32-bit values are padded to 4 lanes: 7 to a slab.
        let wide = Shape::of::<u64, u32>(Kind::Map);
        assert_eq!(
            options.bucket_count(wide).unwrap(),
            15_000u32.div_ceil(7) * 2
        );
        for load in [0.0, -1.0, 1.5, f64::NAN] {
            assert!(
                SlabHashOptions { load, ..options }
                    .bucket_count(Shape::of::<u32, u32>(Kind::Map))
                    .is_err()
            );
        }
        assert!(
            SlabHashOptions {
                buckets: Some(0),
                ..options
            }
            .bucket_count(Shape::of::<u32, u32>(Kind::Map))
            .is_err()
        );
        assert_eq!(
            SlabHashOptions {
                buckets: Some(7),
                ..options
            }
            .bucket_count(Shape::of::<u32, u32>(Kind::Map))
            .unwrap(),
            7
        );
    }
}
