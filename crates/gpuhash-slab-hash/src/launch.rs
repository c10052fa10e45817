//! The kernels of `cuda-src/slab_hash/slab_hash.cu`: the only place this crate hands raw
//! device pointers to the GPU.

use bytemuck::Pod;
use gpuhash_core::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::layouts::{
    GH_OP_GET, GH_OP_INSERT, GH_RESERVED_BUCKETS, GH_SLAB_CHUNK_BUCKETS, GH_SLAB_RUN_COUNTERS,
    GhFillParams, GhSlabBucketsParams, GhSlabGatherParams, GhSlabMarkParams, GhSlabOpsParams,
    GhSlabRunsParams, GhSlabTable,
};
use crate::op::OpCode;
use crate::shape::{Kind, Shape};

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take.
unsafe impl KernelParams for GhSlabOpsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabBucketsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabGatherParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhFillParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabMarkParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabRunsParams {}
// SAFETY: bindgen's repr(C) copy of the view that the caller's kernels take by value
// (gpuhash/slab_hash_view.cuh): raw device pointers and integers only.
unsafe impl cudarc::driver::DeviceRepr for crate::layouts::GhSlabView {}

static IMAGE: KernelImage = gpuhash_core::kernel_image!("slab_hash");

/// The kernels of one slab shape.
struct ShapeKernels {
    /// Any operations, served by warp-cooperative work sharing.
    ops: Kernel<GhSlabOpsParams>,
    /// Lookups only, served by tiles of lanes (`cuda-src/slab_hash/slab_tile.cuh`).
    find: Kernel<GhSlabOpsParams>,
    /// Inserts only, served by tiles of lanes.
    insert: Kernel<GhSlabOpsParams>,
    count: Kernel<GhSlabBucketsParams>,
    export: Kernel<GhSlabBucketsParams>,
    flush: Kernel<GhSlabBucketsParams>,
}

macro_rules! shape_kernels {
    ($name:literal) => {
        ShapeKernels {
            ops: Kernel::new(&IMAGE, concat!("gh_slab_ops_", $name)),
            find: Kernel::new(&IMAGE, concat!("gh_slab_find_", $name)),
            insert: Kernel::new(&IMAGE, concat!("gh_slab_insert_", $name)),
            count: Kernel::new(&IMAGE, concat!("gh_slab_count_", $name)),
            export: Kernel::new(&IMAGE, concat!("gh_slab_export_", $name)),
            flush: Kernel::new(&IMAGE, concat!("gh_slab_flush_", $name)),
        }
    };
}

/// Kernels by (kind, key words, value words), as `cuda-src/slab_hash/slab_hash.cu`
/// instantiates them.
static SHAPES: [((Kind, u32, u32), ShapeKernels); 10] = [
    ((Kind::Map, 1, 1), shape_kernels!("map_k1v1")),
    ((Kind::Map, 1, 2), shape_kernels!("map_k1v2")),
    ((Kind::Map, 2, 1), shape_kernels!("map_k2v1")),
    ((Kind::Map, 2, 2), shape_kernels!("map_k2v2")),
    ((Kind::MultiMap, 1, 1), shape_kernels!("multimap_k1v1")),
    ((Kind::MultiMap, 1, 2), shape_kernels!("multimap_k1v2")),
    ((Kind::MultiMap, 2, 1), shape_kernels!("multimap_k2v1")),
    ((Kind::MultiMap, 2, 2), shape_kernels!("multimap_k2v2")),
    ((Kind::Set, 1, 0), shape_kernels!("set_k1v0")),
    ((Kind::Set, 2, 0), shape_kernels!("set_k2v0")),
];

static GATHERS: [((u32, u32), Kernel<GhSlabGatherParams>); 4] = [
    ((1, 1), Kernel::new(&IMAGE, "gh_slab_gather_k1v1")),
    ((1, 2), Kernel::new(&IMAGE, "gh_slab_gather_k1v2")),
    ((2, 1), Kernel::new(&IMAGE, "gh_slab_gather_k2v1")),
    ((2, 2), Kernel::new(&IMAGE, "gh_slab_gather_k2v2")),
];
/// The grouped appends of a multimap insert pass (`cuda-src/slab_hash/slab_runs.cuh`) at
/// one width.
struct RunKernels {
    count: Kernel<GhSlabRunsParams>,
    scatter: Kernel<GhSlabRunsParams>,
    append: Kernel<GhSlabRunsParams>,
}

macro_rules! run_kernels {
    ($name:literal) => {
        RunKernels {
            count: Kernel::new(&IMAGE, concat!("gh_slab_runs_count_", $name)),
            scatter: Kernel::new(&IMAGE, concat!("gh_slab_runs_scatter_", $name)),
            append: Kernel::new(&IMAGE, concat!("gh_slab_runs_append_", $name)),
        }
    };
}

static RUNS: [((u32, u32), RunKernels); 4] = [
    ((1, 1), run_kernels!("k1v1")),
    ((1, 2), run_kernels!("k1v2")),
    ((2, 1), run_kernels!("k2v1")),
    ((2, 2), run_kernels!("k2v2")),
];
static RESERVE_RUNS: Kernel<GhSlabRunsParams> = Kernel::new(&IMAGE, "gh_slab_runs_reserve");
static FILL: Kernel<GhFillParams> = Kernel::new(&IMAGE, "gh_slab_fill");
static MARK_PENDING: Kernel<GhSlabMarkParams> = Kernel::new(&IMAGE, "gh_slab_mark_pending");

const THREADS: u32 = 128;

fn kernels(shape: Shape) -> gpuhash_core::Result<&'static ShapeKernels> {
    let key = (shape.kind, shape.key_words, shape.value_words);
    Ok(&SHAPES
        .iter()
        .find(|(k, _)| *k == key)
        .ok_or_else(|| no_kernel(shape))?
        .1)
}

fn no_kernel(shape: Shape) -> gpuhash_core::Error {
    gpuhash_core::Error::InvalidInput(format!("no slab hash kernels for {shape:?}"))
}

fn grid(stream: &Stream, threads: u64) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), threads, THREADS)
}

/// Where the ops kernel reads and writes; every buffer has `keys.len()` elements.
pub(crate) struct OpsBuffers<'a, K, V> {
    pub ops: Option<&'a DeviceBuffer<OpCode>>,
    pub uniform_op: u32,
    pub keys: &'a DeviceBuffer<K>,
    pub values: Option<&'a DeviceBuffer<V>>,
    pub results: Option<&'a mut DeviceBuffer<V>>,
    /// Required unless `answer_all`.
    pub status: Option<&'a mut DeviceBuffer<u8>>,
    /// Serve every element; else only those whose status is PENDING.
    pub answer_all: bool,
    /// How bulk batches read slabs: one of the `GH_SLAB_READ_*` ways (chosen by the
    /// table's plan for the batch).
    pub reads: u32,
}

/// One pass of operations over the table.
pub(crate) fn ops<K: Pod, V: Pod>(
    stream: &Stream,
    shape: Shape,
    table: GhSlabTable,
    buffers: OpsBuffers<'_, K, V>,
) -> gpuhash_core::Result<()> {
    ops_deferring(stream, shape, table, buffers, None)
}

/// One pass of operations; with `deferring` (a multimap insert batch's walk limit and the
/// run table's first word, which counts what it defers), inserts past the limit end
/// DEFERRED for the grouped appends.
fn ops_deferring<K: Pod, V: Pod>(
    stream: &Stream,
    shape: Shape,
    table: GhSlabTable,
    buffers: OpsBuffers<'_, K, V>,
    deferring: Option<(u32, &mut DeviceBuffer<u32>)>,
) -> gpuhash_core::Result<()> {
    let count = buffers.keys.len();
    if count == 0 {
        return Ok(());
    }
    if buffers.status.is_none() && !buffers.answer_all {
        return Err(gpuhash_core::Error::InvalidInput(
            "a pass of pending elements needs their status".into(),
        ));
    }
    let (walk_slabs, deferred) = deferring.unzip();
    let ops = buffers.ops.map(|b| b.address(stream));
    let keys = buffers.keys.address(stream);
    let values = buffers.values.map(|b| b.address(stream));
    let results = buffers.results.map(|b| b.address_mut(stream));
    let status = buffers.status.map(|b| b.address_mut(stream));
    let deferred = deferred.map(|b| b.address_mut(stream));
    let params = GhSlabOpsParams {
        table,
        ops: ops
            .as_ref()
            .map_or(std::ptr::null(), |a| a.address as *const u32),
        keys: keys.address as *const u32,
        values: values
            .as_ref()
            .map_or(std::ptr::null(), |a| a.address as *const u32),
        results: results
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| a.address as *mut u32),
        status: status
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| a.address as *mut u8),
        deferred: deferred
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| a.address as *mut u32),
        count: count as u64,
        uniform_op: buffers.uniform_op,
        answer_all: u32::from(buffers.answer_all),
        reads: buffers.reads,
        walk_slabs: walk_slabs.unwrap_or(0),
    };
    let kernels = kernels(shape)?;
    let kernel = match (buffers.ops, buffers.uniform_op) {
        (None, GH_OP_GET) => &kernels.find,
        (None, GH_OP_INSERT) => &kernels.insert,
        _ => &kernels.ops,
    };
    // SAFETY: `table` comes from the live table and allocator context the caller holds;
    // every buffer holds `count` elements (checked by the caller) and stays borrowed until
    // the launch is queued; status is given unless every element is answered (checked
    // above), and the kernel touches elements below count only. A walk limit comes with
    // the run table, whose first word the kernel raises (`multimap_inserts` checks the
    // status it then writes DEFERRED into).
    unsafe { kernel.launch(stream, grid(stream, count as u64), params) }
}

/// The scratch of a multimap insert pass's grouped appends.
pub(crate) struct RunBuffers<'a> {
    /// Slabs of a list an insert reads in the tiled pass before it defers (at least 1).
    pub walk_slabs: u32,
    /// GH_SLAB_RUN_COUNTERS words and 3 words a slot, for a power of two of slots at least
    /// twice the buckets the batch can fall in ([`crate::policy::run_slots`]); zeroed here.
    pub runs: &'a mut DeviceBuffer<u32>,
    /// One word a batch element.
    pub grouped: &'a mut DeviceBuffer<u32>,
}

/// A multimap insert pass: the tiled pass, which stores each pair in the first
/// `walk_slabs` slabs of its list or defers it, then the grouped appends of the deferred
/// pairs (`cuda-src/slab_hash/slab_runs.cuh`), which write their final status. `buffers`
/// must be a uniform insert batch with values and status.
pub(crate) fn multimap_inserts<K: Pod, V: Pod>(
    stream: &Stream,
    shape: Shape,
    table: GhSlabTable,
    buffers: OpsBuffers<'_, K, V>,
    scratch: RunBuffers<'_>,
) -> gpuhash_core::Result<()> {
    let count = buffers.keys.len();
    let slots = run_table_slots(scratch.runs.len());
    let lists = u64::from(table.bucket_count) + u64::from(GH_RESERVED_BUCKETS);
    let invalid = |what: &str| {
        Err(gpuhash_core::Error::InvalidInput(format!(
            "multimap inserts: {what}"
        )))
    };
    if shape.kind != Kind::MultiMap || buffers.ops.is_some() || buffers.uniform_op != GH_OP_INSERT {
        return invalid("not a multimap's uniform insert batch");
    }
    if scratch.walk_slabs == 0 || buffers.values.is_none() || buffers.status.is_none() {
        return invalid("the pass needs a walk limit, values and status");
    }
    if u32::try_from(count).is_err() || scratch.grouped.len() < count {
        return invalid("a batch index per element of at most 32 bits");
    }
    let Some(slots) = slots.filter(|&s| s >= crate::policy::run_slots(count, lists) as u64) else {
        return invalid("too few slots for the buckets the batch can fall in");
    };
    if count == 0 {
        return Ok(());
    }
    scratch.runs.fill_zero(stream)?;
    let answer_all = buffers.answer_all;
    let keys = buffers.keys;
    let values = buffers.values.expect("checked above");
    let status = buffers.status.expect("checked above");
    let tiled = OpsBuffers {
        status: Some(&mut *status),
        ..buffers
    };
    ops_deferring(
        stream,
        shape,
        table,
        tiled,
        Some((scratch.walk_slabs, &mut *scratch.runs)),
    )?;
    let kernels = &RUNS
        .iter()
        .find(|(k, _)| *k == (shape.key_words, shape.value_words))
        .ok_or_else(|| no_kernel(shape))?
        .1;
    let k = keys.address(stream);
    let v = values.address(stream);
    let s = status.address_mut(stream);
    let r = scratch.runs.address_mut(stream);
    let g = scratch.grouped.address_mut(stream);
    let params = GhSlabRunsParams {
        table,
        keys: k.address as *const u32,
        values: v.address as *const u32,
        status: s.address as *mut u8,
        runs: r.address as *mut u32,
        grouped: g.address as *mut u32,
        count: count as u64,
        slot_mask: (slots - 1) as u32,
        answer_all: u32::from(answer_all),
    };
    let over_batch = grid(stream, count as u64);
    let over_slots = grid(stream, slots);
    // SAFETY: keys, values and status hold `count` elements, `grouped` at least that, and
    // `count` is below 2^32 (checked above); `runs` holds the counters and 3 words for
    // each of `slots` slots, a power of two at least twice the buckets the batch can fall
    // in (checked above), so probing for a bucket ends; it was zeroed before the tiled
    // pass, which counted its deferred pairs there. The stream runs the steps in order:
    // the count claims a slot a bucket, the reserve hands out disjoint ranges of at most
    // the deferred pairs, the scatter writes each pair once into its bucket's range, and
    // the append walks lists of the live table and allocator the caller holds. Every guard
    // lives until the last launch is queued.
    unsafe {
        kernels.count.launch(stream, over_batch, params)?;
        RESERVE_RUNS.launch(stream, over_slots, params)?;
        kernels.scatter.launch(stream, over_batch, params)?;
        kernels.append.launch(stream, over_slots, params)
    }
}

/// Slots of a run table of `words` words, if it has a whole power of two of them.
fn run_table_slots(words: usize) -> Option<u64> {
    let slot_words = words.checked_sub(GH_SLAB_RUN_COUNTERS as usize)?;
    let slots = (slot_words % 3 == 0).then_some(slot_words as u64 / 3)?;
    (slots.is_power_of_two() && slots <= 1 << 32).then_some(slots)
}

/// Words of a run table of `slots` slots.
pub(crate) fn run_table_words(slots: usize) -> usize {
    GH_SLAB_RUN_COUNTERS as usize + 3 * slots
}

/// Which per-bucket pass to run.
pub(crate) enum BucketPass<'a, K, V> {
    /// counts[c] = live entries of chunk c of [`chunks`] (the reserved-key buckets last).
    Count { counts: &'a mut DeviceBuffer<u64> },
    /// total[0] += live entries of every bucket (one word, whatever the table's size).
    Total { total: &'a mut DeviceBuffer<u64> },
    /// Entries of chunk c written from offsets[c] on, never past offsets[c + 1];
    /// `short_chunks` (one word, when given) set to 1 if a chunk found fewer.
    Export {
        offsets: &'a DeviceBuffer<u64>,
        keys: &'a mut DeviceBuffer<K>,
        values: Option<&'a mut DeviceBuffer<V>>,
        short_chunks: Option<&'a mut DeviceBuffer<u32>>,
    },
    /// Compact every bucket and free emptied slabs.
    Flush,
}

/// Chunks of buckets the count and export passes take, one warp each.
pub(crate) fn chunks(buckets: u32) -> usize {
    buckets.div_ceil(GH_SLAB_CHUNK_BUCKETS) as usize
}

/// One warp per bucket (flush) or per chunk of buckets (count, export), `buckets` of them
/// (the reserved-key buckets included).
pub(crate) fn buckets<K: Pod, V: Pod>(
    stream: &Stream,
    shape: Shape,
    table: GhSlabTable,
    buckets: u32,
    pass: BucketPass<'_, K, V>,
) -> gpuhash_core::Result<()> {
    let mut params = GhSlabBucketsParams {
        table,
        ..GhSlabBucketsParams::default()
    };
    let warps = match pass {
        BucketPass::Flush => buckets as usize,
        _ => chunks(buckets),
    };
    let launch_shape = grid(stream, warps as u64 * 32);
    let kernels = kernels(shape)?;
    match pass {
        BucketPass::Count { counts } => {
            let counts = counts.address_mut(stream);
            params.counts = counts.address as *mut u64;
            // SAFETY: `counts` holds one word per chunk (checked by the caller); the
            // table comes from the live table; the kernel only reads slabs.
            unsafe { kernels.count.launch(stream, launch_shape, params) }
        }
        BucketPass::Total { total } => {
            let total = total.address_mut(stream);
            params.total = total.address as *mut u64;
            // SAFETY: with `counts` null the kernel writes only `total`, one word that the
            // buffer holds; the kernel only reads slabs.
            unsafe { kernels.count.launch(stream, launch_shape, params) }
        }
        BucketPass::Export {
            offsets,
            keys,
            values,
            short_chunks,
        } => {
            if short_chunks.as_ref().is_some_and(|flag| flag.is_empty()) {
                return Err(gpuhash_core::Error::InvalidInput(
                    "export: the short-chunk flag needs one word".into(),
                ));
            }
            let offsets = offsets.address(stream);
            let keys = keys.address_mut(stream);
            let values = values.map(|v| v.address_mut(stream));
            let short_chunks = short_chunks.map(|f| f.address_mut(stream));
            params.offsets = offsets.address as *const u64;
            params.keys_out = keys.address as *mut u32;
            params.values_out = values
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u32);
            params.short_chunks = short_chunks
                .as_ref()
                .map_or(std::ptr::null_mut(), |a| a.address as *mut u32);
            // SAFETY: `offsets` holds one more word than there are chunks, rising, the
            // last at most the outputs' length (checked by the caller); a chunk writes
            // only between its offset and the next, so every write lands in the outputs
            // whatever batches changed the table since the offsets were counted. The flag,
            // when given, holds its word (checked above); the kernel skips a null one.
            unsafe { kernels.export.launch(stream, launch_shape, params) }
        }
        // SAFETY: the table and its allocator context are live; flush holds the
        // allocator's write lock and has waited for the device, so no other kernel walks
        // the lists meanwhile.
        BucketPass::Flush => unsafe { kernels.flush.launch(stream, launch_shape, params) },
    }
}

/// Where a multimap gather reads and writes.
pub(crate) struct GatherBuffers<'a, K, V> {
    pub keys: &'a DeviceBuffer<K>,
    /// The most values of each key to write; then how many were.
    pub counts: &'a mut DeviceBuffer<u32>,
    /// Where each key's values start: the prefix sums of `counts`.
    pub offsets: &'a DeviceBuffer<u64>,
    /// Room for the sum of `counts`.
    pub out: &'a mut DeviceBuffer<V>,
    /// One word, set to 1 if some key had fewer values than its count.
    pub short_rows: &'a mut DeviceBuffer<u32>,
}

/// Multimap: the values of each key into `out`, from its offset, at most its count.
pub(crate) fn gather<K: Pod, V: Pod>(
    stream: &Stream,
    shape: Shape,
    table: GhSlabTable,
    buffers: GatherBuffers<'_, K, V>,
) -> gpuhash_core::Result<()> {
    let count = buffers.keys.len();
    if count == 0 {
        return Ok(());
    }
    if buffers.counts.len() != count
        || buffers.offsets.len() < count
        || buffers.short_rows.is_empty()
    {
        return Err(gpuhash_core::Error::InvalidInput(
            "gather: counts, offsets or flag of the wrong length".into(),
        ));
    }
    let (k, c, o, w, s) = (
        buffers.keys.address(stream),
        buffers.counts.address_mut(stream),
        buffers.offsets.address(stream),
        buffers.out.address_mut(stream),
        buffers.short_rows.address_mut(stream),
    );
    let params = GhSlabGatherParams {
        table,
        keys: k.address as *const u32,
        counts: c.address as *mut u32,
        offsets: o.address as *const u64,
        out: w.address as *mut u32,
        short_rows: s.address as *mut u32,
        count: count as u64,
    };
    let key = (shape.key_words, shape.value_words);
    let kernel = &GATHERS
        .iter()
        .find(|(k, _)| *k == key)
        .ok_or_else(|| no_kernel(shape))?
        .1;
    // SAFETY: keys and counts hold `count` elements, offsets at least that, and
    // `short_rows` its one word (checked above); offsets are the prefix sums of counts and
    // `out` holds their total (the caller's promise, as `GatherBuffers` says); the kernel
    // writes at most counts[i] values from offsets[i], then counts[i] itself, never
    // raising it.
    unsafe { kernel.launch(stream, grid(stream, count as u64), params) }
}

/// Readies `status` for a pass of PENDING elements: DONE where `repeated` (when given)
/// flags an element, PENDING elsewhere.
pub(crate) fn mark_pending(
    stream: &Stream,
    repeated: Option<&DeviceBuffer<u8>>,
    status: &mut DeviceBuffer<u8>,
) -> gpuhash_core::Result<()> {
    let count = status.len();
    if let Some(repeated) = repeated
        && repeated.len() != count
    {
        return Err(gpuhash_core::Error::LengthMismatch {
            what: "repeated flags and status",
            left: repeated.len(),
            right: count,
        });
    }
    if count == 0 {
        return Ok(());
    }
    let r = repeated.map(|b| b.address(stream));
    let s = status.address_mut(stream);
    let params = GhSlabMarkParams {
        repeated: r
            .as_ref()
            .map_or(std::ptr::null(), |a| a.address as *const u8),
        status: s.address as *mut u8,
        count: count as u64,
    };
    // SAFETY: both buffers hold `count` elements (checked above); the kernel touches
    // elements below count only.
    unsafe { MARK_PENDING.launch(stream, grid(stream, count as u64), params) }
}

/// Sets every word of `words` to `value`.
pub(crate) fn fill(
    stream: &Stream,
    words: &mut DeviceBuffer<u32>,
    value: u32,
) -> gpuhash_core::Result<()> {
    let count = words.len();
    let target = words.address_mut(stream);
    let params = GhFillParams {
        words: target.address as *mut u32,
        count: count as u64,
        value,
    };
    // SAFETY: the kernel writes the buffer's `count` words only.
    unsafe { FILL.launch(stream, grid(stream, count as u64), params) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_tables_are_counters_and_three_words_a_slot() {
        for slots in [1usize, 2, 8, 1 << 22] {
            let words = run_table_words(slots);
            assert_eq!(words, 2 + 3 * slots);
            assert_eq!(run_table_slots(words), Some(slots as u64));
        }
        // Not a power of two of slots, not whole slots, or no room for the counters.
        for words in [0, 1, 2 + 3 * 3, 2 + 3 * 8 + 1, 2 + 3 * 8 - 1] {
            assert_eq!(run_table_slots(words), None, "{words} words");
        }
    }
}
