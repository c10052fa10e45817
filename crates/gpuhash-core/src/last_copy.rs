//! The last copy of each key in one batch, on the device.
//!
//! A batch may hold a key more than once. Tables whose inserts let any one copy win use
//! this to make the last one win: [`mark_repeated`] flags every element that a later
//! element of the batch repeats, and [`last_copies`] returns the batch without them, the
//! last copy of each key in input order, for tables that take such a batch.
//!
//! Method: a scratch open-addressing table on the device of [`scratch_slots`] slots (a
//! power of two at least twice the batch, so linear probing stays short and always finds
//! room), each slot a key and the highest batch index seen for it (raised with
//! `atomicMax`); then element `i` is repeated when its key's highest index is not `i`.
//! Every key value is usable: the scratch table marks empty slots with 0, and the key 0
//! keeps its index in a word of its own. The scratch space, `scratch_slots(n) *
//! (size_of::<K>() + 4)` bytes, lives for the call only; running out of device memory for
//! it is [`Error::OutOfDeviceMemory`], and nothing is written then.
//!
//! The same scratch table also reduces a batch for an upsert ([`reduce`]): each key once,
//! with its copies' values combined ([`Combine`]: Add wrapping, Min, Max, by atomics on
//! one accumulator a slot) or with its first copy's value, and afterwards spreads each
//! distinct key's result back to every copy ([`Reduced::spread`]).

use bytemuck::Pod;

use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::{
    GH_COMBINE_ADD, GH_COMBINE_KEEP, GH_COMBINE_MAX, GH_COMBINE_MIN, GH_LAST_COPY_PER_THREAD,
    GH_LAST_COPY_THREADS, GhCombineFoldParams, GhCombineParams, GhLastCopyCompactParams,
    GhLastCopyMarkParams, GhLastCopyTable,
};
use crate::table::{Combine, Key};
use crate::{DeviceAddress, DeviceBuffer, Error, Result, Stream};

static LAST_COPY_IMAGE: KernelImage = crate::kernel_image!("last_copy");
static COUNT: Kernel<GhLastCopyCompactParams> = Kernel::new(&LAST_COPY_IMAGE, "gh_last_copy_count");
static SCAN: Kernel<GhLastCopyCompactParams> = Kernel::new(&LAST_COPY_IMAGE, "gh_last_copy_scan");
static FOLD: Kernel<GhCombineFoldParams> = Kernel::new(&LAST_COPY_IMAGE, "gh_combine_fold");

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take, holding raw device
// pointers and integers only.
unsafe impl KernelParams for GhLastCopyMarkParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhLastCopyCompactParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCombineParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCombineFoldParams {}

/// Elements one block handles at a time in the compacting kernels.
const TILE: usize = (GH_LAST_COPY_THREADS * GH_LAST_COPY_PER_THREAD) as usize;
/// Batch indices are 32-bit on the device.
const MAX_BATCH: usize = 1 << 32;

/// The kernels of one key width.
#[derive(Debug)]
pub struct LastCopyKernels {
    record: Kernel<GhLastCopyMarkParams>,
    mark: Kernel<GhLastCopyMarkParams>,
    scatter: Kernel<GhLastCopyCompactParams>,
    combine_record: Kernel<GhCombineParams>,
    combine_mark: Kernel<GhCombineParams>,
    combine_store: Kernel<GhCombineParams>,
    combine_load: Kernel<GhCombineParams>,
}

macro_rules! last_copy_kernels {
    ($vis:vis $name:ident, $suffix:literal) => {
        $vis static $name: LastCopyKernels = LastCopyKernels {
            record: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_last_copy_record_", $suffix)),
            mark: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_last_copy_mark_", $suffix)),
            scatter: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_last_copy_scatter_", $suffix)),
            combine_record: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_combine_record_", $suffix)),
            combine_mark: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_combine_mark_", $suffix)),
            combine_store: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_combine_store_", $suffix)),
            combine_load: Kernel::new(&LAST_COPY_IMAGE, concat!("gh_combine_load_", $suffix)),
        };
    };
}

last_copy_kernels!(pub(crate) U32_KERNELS, "u32");
last_copy_kernels!(pub(crate) U64_KERNELS, "u64");

/// Which value an insert keeps for a key that its batch holds more than once, in every
/// table of unique keys.
///
/// Keys the table already holds are no different: their value is replaced by the one that
/// wins in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DuplicateKeys {
    /// One whole value of the key's copies, never a mix of two, but which one is not
    /// specified: it depends on the order in which the GPU's threads meet, and varies from
    /// run to run (measured on an H100: the last copy won for 90 to 95% of duplicated keys
    /// in the slab hash, 35 to 76% in DyHash). Costs nothing.
    #[default]
    AnyCopy,
    /// The value of the key's last copy in the batch, as inserting the pairs one by one
    /// in order would leave it. The batch's repeated copies are found on the device first
    /// ([`mark_repeated`], [`last_copies`]): a few passes over the batch and a scratch
    /// table of 2 to 4 slots a pair (a key and a 4-byte index each) while it runs. Its
    /// cost is in docs/benchmarks (W1, "LastCopy" beside the default's).
    LastCopy,
}

/// Slots of the scratch table for a batch of `count` keys: the smallest power of two at
/// least `2 * count` (at least 1). [`Error::InvalidInput`] for batches of more than 2^32
/// keys, whose indices the kernels do not hold.
pub fn scratch_slots(count: usize) -> Result<usize> {
    if count > MAX_BATCH {
        return Err(Error::InvalidInput(format!(
            "last_copy: a batch of {count} keys is over the 2^32 the kernels index"
        )));
    }
    count
        .checked_mul(2)
        .and_then(usize::checked_next_power_of_two)
        .ok_or_else(|| Error::InvalidInput(format!("last_copy: {count} keys overflow usize")))
}

/// Writes into `repeated` (of the keys' length) 1 for every element of `keys` that a
/// later element repeats and 0 for the last copy of each key. Queued on `stream`.
pub fn mark_repeated<K: Key>(
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    repeated: &mut DeviceBuffer<u8>,
) -> Result<()> {
    check_lengths("mark_repeated: keys and flags", keys.len(), repeated.len())?;
    if keys.is_empty() {
        return Ok(());
    }
    let mut scratch = ScratchTable::<K>::new(stream, keys.len())?;
    let mut guards = Vec::new();
    let table = scratch.layout(stream, &mut guards);
    let k = keys.address(stream);
    let r = repeated.address_mut(stream);
    let params = GhLastCopyMarkParams {
        keys: k.address as *const _,
        count: keys.len() as u64,
        table,
        repeated: r.address as *mut u8,
    };
    let shape = LaunchShape::grid_stride(stream.device(), keys.len() as u64, GH_LAST_COPY_THREADS);
    let kernels = K::last_copy_kernels();
    // SAFETY: `keys` and `repeated` hold `count` elements and the scratch table `mask + 1`
    // keys and `mask + 2` indices, zeroed, with `mask + 1` at least twice `count` (so
    // probing ends); every address guard is held until both launches are queued, and the
    // stream runs them in order, so the mark kernel reads what the record kernel wrote.
    unsafe {
        kernels.record.launch(stream, shape, params)?;
        kernels.mark.launch(stream, shape, params)
    }
}

/// The last copy of each key of the batch (`keys[i]`, `values[i]`), in input order, in new
/// buffers; waits for the device to count them. Values must be whole 4-byte words
/// ([`Error::InvalidInput`] otherwise); [`Error::LengthMismatch`] when the buffers differ in
/// length.
pub fn last_copies<K: Key, V: Pod>(
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    values: &DeviceBuffer<V>,
) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>)> {
    check_lengths("last_copies: keys and values", keys.len(), values.len())?;
    if !size_of::<V>().is_multiple_of(4) {
        return Err(Error::InvalidInput(format!(
            "last_copies: values of {} bytes are not whole 4-byte words",
            size_of::<V>()
        )));
    }
    if keys.is_empty() {
        return Ok((
            DeviceBuffer::zeroed(stream, 0)?,
            DeviceBuffer::zeroed(stream, 0)?,
        ));
    }
    let mut repeated = DeviceBuffer::<u8>::zeroed(stream, keys.len())?;
    mark_repeated(stream, keys, &mut repeated)?;
    let batch = Batch {
        keys,
        values,
        repeated: &repeated,
    };
    let mut offsets = DeviceBuffer::<u64>::zeroed(stream, keys.len().div_ceil(TILE))?;
    let kept = count_kept(stream, &batch, &mut offsets)?;
    let mut keys_out = DeviceBuffer::unfilled(stream, kept)?;
    let mut values_out = DeviceBuffer::unfilled(stream, kept)?;
    let mut outputs = Outputs {
        keys: &mut keys_out,
        values: &mut values_out,
    };
    scatter_kept(stream, &batch, &mut offsets, &mut outputs)?;
    Ok((keys_out, values_out))
}

/// Which value [`reduce`] keeps for each key of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// Its copies' values combined (an upsert's batch).
    Combined(Combine),
    /// Its first copy's value (an `insert_or_find`'s candidates).
    First,
}

impl Reduce {
    fn op(self) -> u32 {
        match self {
            Reduce::First => GH_COMBINE_KEEP,
            Reduce::Combined(c) => combine_op(c),
        }
    }
}

fn combine_op(combine: Combine) -> u32 {
    match combine {
        Combine::Add => GH_COMBINE_ADD,
        Combine::Min => GH_COMBINE_MIN,
        Combine::Max => GH_COMBINE_MAX,
    }
}

/// A batch reduced to one entry per key by [`reduce`]: `keys` distinct, `values` each
/// key's reduced value, in the input order of each key's last copy ([`Reduce::Combined`])
/// or first copy ([`Reduce::First`]). Keeps the scratch table, so that
/// [`spread`](Self::spread) can give every copy of the batch its key's result.
pub struct Reduced<K: Key, V: Key> {
    /// The batch's distinct keys.
    pub keys: DeviceBuffer<K>,
    /// Each distinct key's reduced value.
    pub values: DeviceBuffer<V>,
    table: ScratchTable<K>,
    /// One value a slot, and one for the key 0, in 4-byte words.
    acc: DeviceBuffer<u32>,
}

impl<K: Key, V: Key> std::fmt::Debug for Reduced<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reduced")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

/// Reduces the batch (`keys[i]`, `values[i]`) to one entry per key, on the device: a
/// scratch table as [`mark_repeated`]'s, whose slots also accumulate each key's value
/// (`atomicAdd`, `atomicMax`, and `atomicMax` of complements for Min, at the value's
/// width), then the batch compacted to the winning copy of each key. Values are `u32` or
/// `u64`. Queued on `stream`; waits once, to count the distinct keys. Scratch space while
/// the result lives: the scratch table (2 to 4 slots a pair, a key and a 4-byte index
/// each) and one value a slot; during the call, one more value a pair.
pub fn reduce<K: Key, V: Key>(
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    values: &DeviceBuffer<V>,
    how: Reduce,
) -> Result<Reduced<K, V>> {
    check_lengths("reduce: keys and values", keys.len(), values.len())?;
    let n = keys.len();
    let mut table = ScratchTable::<K>::new(stream, n)?;
    let words = V::WORDS as usize;
    let mut acc = DeviceBuffer::<u32>::zeroed(stream, (table.keys.len() + 1) * words)?;
    if n == 0 {
        return Ok(Reduced {
            keys: DeviceBuffer::zeroed(stream, 0)?,
            values: DeviceBuffer::zeroed(stream, 0)?,
            table,
            acc,
        });
    }
    let mut repeated = DeviceBuffer::<u8>::zeroed(stream, n)?;
    let mut combined = match how {
        Reduce::Combined(_) => Some(DeviceBuffer::<V>::unfilled(stream, n)?),
        Reduce::First => None,
    };
    {
        let mut guards = Vec::new();
        let layout = table.layout(stream, &mut guards);
        let k = keys.address(stream);
        let v = values.address(stream);
        let a = acc.address_mut(stream);
        let r = repeated.address_mut(stream);
        let c = combined.as_mut().map(|b| b.address_mut(stream));
        let params = GhCombineParams {
            keys: k.address as *const _,
            values: v.address as *const u32,
            count: n as u64,
            table: layout,
            acc: a.address as *mut u32,
            values_out: c
                .as_ref()
                .map_or(std::ptr::null_mut(), |c| c.address as *mut u32),
            repeated: r.address as *mut u8,
            op: how.op(),
            value_words: V::WORDS,
            first: u32::from(how == Reduce::First),
            pad: 0,
        };
        let shape = LaunchShape::grid_stride(stream.device(), n as u64, GH_LAST_COPY_THREADS);
        let kernels = K::last_copy_kernels();
        // SAFETY: `keys`, `values`, `repeated` and `combined` (when given) hold `n`
        // elements, the scratch table `mask + 1` keys and `mask + 2` indices and `acc`
        // `mask + 2` values, all zeroed, with `mask + 1` at least twice `n` (so probing
        // ends); `value_words` is V's width. Every guard is held until both launches are
        // queued, and the stream runs them in order.
        unsafe {
            kernels.combine_record.launch(stream, shape, params)?;
            kernels.combine_mark.launch(stream, shape, params)?;
        }
    }
    let batch = Batch {
        keys,
        values: combined.as_ref().unwrap_or(values),
        repeated: &repeated,
    };
    let mut offsets = DeviceBuffer::<u64>::zeroed(stream, n.div_ceil(TILE))?;
    let kept = count_kept(stream, &batch, &mut offsets)?;
    let mut keys_out = DeviceBuffer::unfilled(stream, kept)?;
    let mut values_out = DeviceBuffer::unfilled(stream, kept)?;
    let mut outputs = Outputs {
        keys: &mut keys_out,
        values: &mut values_out,
    };
    scatter_kept(stream, &batch, &mut offsets, &mut outputs)?;
    Ok(Reduced {
        keys: keys_out,
        values: values_out,
        table,
        acc,
    })
}

impl<K: Key, V: Key> Reduced<K, V> {
    /// Writes into `out[i]` the value of `batch_keys[i]` in `results` (one for each of
    /// [`keys`](Self::keys), in their order), for a batch whose keys are all among them
    /// (the one that was reduced). Queued on `stream`. [`Error::LengthMismatch`] when
    /// `results` is not one a distinct key or `out` not one a batch key.
    pub fn spread(
        &mut self,
        stream: &Stream,
        results: &DeviceBuffer<V>,
        batch_keys: &DeviceBuffer<K>,
        out: &mut DeviceBuffer<V>,
    ) -> Result<()> {
        check_lengths("spread: keys and results", self.keys.len(), results.len())?;
        check_lengths("spread: batch keys and out", batch_keys.len(), out.len())?;
        if batch_keys.is_empty() {
            return Ok(());
        }
        let kernels = K::last_copy_kernels();
        let mut guards = Vec::new();
        let layout = self.table.layout(stream, &mut guards);
        let a = self.acc.address_mut(stream);
        let distinct = self.keys.address(stream);
        let r = results.address(stream);
        let bk = batch_keys.address(stream);
        let o = out.address_mut(stream);
        let store = GhCombineParams {
            keys: distinct.address as *const _,
            values: r.address as *const u32,
            count: self.keys.len() as u64,
            table: layout,
            acc: a.address as *mut u32,
            values_out: std::ptr::null_mut(),
            repeated: std::ptr::null_mut(),
            op: GH_COMBINE_KEEP,
            value_words: V::WORDS,
            first: 0,
            pad: 0,
        };
        let load = GhCombineParams {
            keys: bk.address as *const _,
            values: std::ptr::null(),
            count: batch_keys.len() as u64,
            values_out: o.address as *mut u32,
            ..store
        };
        let shape = |count: u64| {
            LaunchShape::grid_stride(stream.device(), count.max(1), GH_LAST_COPY_THREADS)
        };
        // SAFETY: the scratch table and `acc` are the ones `reduce` filled (its keys are
        // placed, so lookups of them end); `results` holds one value per distinct key,
        // `out` one per batch key, each batch key is among the placed ones (the caller's
        // contract; `find_slot` of any other would not end, so the batch must be the one
        // reduced). Store writes the distinct keys' slots, each once; load then reads
        // them, after it on the stream. Every guard outlives both launches.
        unsafe {
            kernels
                .combine_store
                .launch(stream, shape(store.count), store)?;
            kernels
                .combine_load
                .launch(stream, shape(load.count), load)?;
        }
        Ok(())
    }
}

/// Folds what a table holds into a reduced batch: where `found[i]` is set, `values[i]`
/// becomes `held[i] combine values[i]` (`None`: `held[i]`); elsewhere it stays. Values are
/// `u32` or `u64`, Add wraps. Queued on `stream`.
pub fn fold_held<V: Key>(
    stream: &Stream,
    held: &DeviceBuffer<V>,
    found: &DeviceBuffer<u8>,
    values: &mut DeviceBuffer<V>,
    combine: Option<Combine>,
) -> Result<()> {
    check_lengths("fold_held: held and values", held.len(), values.len())?;
    check_lengths("fold_held: found and values", found.len(), values.len())?;
    if values.is_empty() {
        return Ok(());
    }
    let count = values.len() as u64;
    let h = held.address(stream);
    let f = found.address(stream);
    let v = values.address_mut(stream);
    let params = GhCombineFoldParams {
        held: h.address as *const u32,
        found: f.address as *const u8,
        values: v.address as *mut u32,
        count,
        op: combine.map_or(GH_COMBINE_KEEP, combine_op),
        value_words: V::WORDS,
    };
    let shape = LaunchShape::grid_stride(stream.device(), params.count, GH_LAST_COPY_THREADS);
    // SAFETY: the three buffers hold `count` elements of `value_words` words (V's width);
    // the kernel touches element i < count only. Every guard outlives the launch.
    unsafe { FOLD.launch(stream, shape, params) }
}

/// The scratch table of one batch.
struct ScratchTable<K> {
    keys: DeviceBuffer<K>,
    last: DeviceBuffer<u32>,
}

impl<K: Pod> ScratchTable<K> {
    fn new(stream: &Stream, count: usize) -> Result<Self> {
        let slots = scratch_slots(count)?;
        Ok(Self {
            keys: DeviceBuffer::zeroed(stream, slots)?,
            // One index a slot, and one for the key 0.
            last: DeviceBuffer::zeroed(stream, slots + 1)?,
        })
    }

    fn layout<'a>(
        &'a mut self,
        stream: &'a Stream,
        guards: &mut Vec<DeviceAddress<'a>>,
    ) -> GhLastCopyTable {
        let mask = self.keys.len() as u64 - 1;
        let keys = self.keys.address_mut(stream);
        let last = self.last.address_mut(stream);
        let table = GhLastCopyTable {
            keys: keys.address as *mut _,
            last: last.address as *mut u32,
            mask,
        };
        guards.extend([keys, last]);
        table
    }
}

/// A batch and its repeated flags, as the compacting kernels read them.
struct Batch<'a, K, V> {
    keys: &'a DeviceBuffer<K>,
    values: &'a DeviceBuffer<V>,
    repeated: &'a DeviceBuffer<u8>,
}

/// Where the compacted batch goes.
struct Outputs<'a, K, V> {
    keys: &'a mut DeviceBuffer<K>,
    values: &'a mut DeviceBuffer<V>,
}

/// Counts the last copies of each tile into `offsets`, turns the counts into each tile's
/// first place in the output, and returns the total; waits for it.
fn count_kept<K: Pod, V: Pod>(
    stream: &Stream,
    batch: &Batch<'_, K, V>,
    offsets: &mut DeviceBuffer<u64>,
) -> Result<usize> {
    let mut kept = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let tiles = offsets.len();
    {
        let k = batch.keys.address(stream);
        let v = batch.values.address(stream);
        let r = batch.repeated.address(stream);
        let o = offsets.address_mut(stream);
        let total = kept.address_mut(stream);
        let params = GhLastCopyCompactParams {
            keys: k.address as *const _,
            values: v.address as *const u32,
            repeated: r.address as *const u8,
            count: batch.keys.len() as u64,
            tile_offsets: o.address as *mut u64,
            tiles: tiles as u64,
            kept: total.address as *mut u64,
            keys_out: std::ptr::null_mut(),
            values_out: std::ptr::null_mut(),
            value_words: (size_of::<V>() / 4) as u32,
            pad: 0,
        };
        let one_block = LaunchShape {
            blocks: 1,
            threads_per_block: GH_LAST_COPY_THREADS,
            shared_bytes: 0,
        };
        // SAFETY: the batch's buffers hold `count` elements and `offsets` one entry a tile
        // of GH_LAST_COPY_THREADS * GH_LAST_COPY_PER_THREAD elements, `kept` one u64; both
        // kernels run blocks of GH_LAST_COPY_THREADS, as they need, and write below those
        // lengths only (the scatter outputs, null here, are not touched). Every guard is
        // held until both launches are queued.
        unsafe {
            COUNT.launch(stream, tile_shape(stream, tiles), params)?;
            SCAN.launch(stream, one_block, params)?;
        }
    }
    Ok(kept.to_host(stream)?[0] as usize)
}

/// Writes each last copy of the batch at its place in `outputs`, whose length is their
/// number, as counted by [`count_kept`] into `offsets`.
fn scatter_kept<K: Key, V: Pod>(
    stream: &Stream,
    batch: &Batch<'_, K, V>,
    offsets: &mut DeviceBuffer<u64>,
    outputs: &mut Outputs<'_, K, V>,
) -> Result<()> {
    let k = batch.keys.address(stream);
    let v = batch.values.address(stream);
    let r = batch.repeated.address(stream);
    let tiles = offsets.len();
    let o = offsets.address_mut(stream);
    let ko = outputs.keys.address_mut(stream);
    let vo = outputs.values.address_mut(stream);
    let params = GhLastCopyCompactParams {
        keys: k.address as *const _,
        values: v.address as *const u32,
        repeated: r.address as *const u8,
        count: batch.keys.len() as u64,
        tile_offsets: o.address as *mut u64,
        tiles: tiles as u64,
        kept: std::ptr::null_mut(),
        keys_out: ko.address as *mut _,
        values_out: vo.address as *mut u32,
        value_words: (size_of::<V>() / 4) as u32,
        pad: 0,
    };
    // SAFETY: the batch's buffers hold `count` elements, `offsets` each tile's first place
    // as the count and scan kernels wrote it over the same flags, and the outputs exactly
    // the elements not repeated, so every place written is below their length; the kernel
    // runs blocks of GH_LAST_COPY_THREADS, as it needs. Every guard outlives the launch.
    unsafe {
        K::last_copy_kernels()
            .scatter
            .launch(stream, tile_shape(stream, tiles), params)
    }
}

/// A launch of one block a tile (fewer when the device holds fewer at once: the kernels
/// loop over tiles).
fn tile_shape(stream: &Stream, tiles: usize) -> LaunchShape {
    LaunchShape::grid_stride(
        stream.device(),
        tiles as u64 * u64::from(GH_LAST_COPY_THREADS),
        GH_LAST_COPY_THREADS,
    )
}

fn check_lengths(what: &'static str, left: usize, right: usize) -> Result<()> {
    if left == right {
        Ok(())
    } else {
        Err(Error::LengthMismatch { what, left, right })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_a_power_of_two_at_least_twice_the_batch() {
        assert_eq!(scratch_slots(0).unwrap(), 1);
        assert_eq!(scratch_slots(1).unwrap(), 2);
        assert_eq!(scratch_slots(3).unwrap(), 8);
        assert_eq!(scratch_slots(4).unwrap(), 8);
        assert_eq!(scratch_slots(1 << 26).unwrap(), 1 << 27);
        assert_eq!(scratch_slots(MAX_BATCH).unwrap(), 1 << 33);
    }

    #[test]
    fn batches_past_32_bit_indices_are_refused() {
        assert!(matches!(
            scratch_slots(MAX_BATCH + 1),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            scratch_slots(usize::MAX),
            Err(Error::InvalidInput(_))
        ));
    }

    quickcheck::quickcheck! {
        fn scratch_slots_bound_the_batch(count: u32) -> bool {
            let count = count as usize;
            let slots = scratch_slots(count).unwrap();
            slots.is_power_of_two() && slots >= 2 * count && (count == 0 || slots < 4 * count)
        }
    }
}
