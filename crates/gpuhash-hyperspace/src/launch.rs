//! The kernels of `cuda-src/hyperspace/`: the only place this crate hands raw device
//! pointers to the GPU. Callers check lengths; each function states what it relies on.

use gpuhash_core::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use gpuhash_core::{DeviceAddress, DeviceBuffer, Stream};

use crate::layouts::{
    GhHsBucketsParams, GhHsBuildParams, GhHsCompactParams, GhHsCountParams, GhHsDeleteParams,
    GhHsExportParams, GhHsFillParams, GhHsGetParams, GhHsInsertParams, GhHsKeyFaultsParams,
    GhHsNodeCountsParams, GhHsPartitionParams, GhHsPermuteParams, GhHsRowsParams, GhHsSearchParams,
    GhHsSlotDeleteParams, GhHsSpace, GhHsSubtaskParams, GhHsTupleRowsParams, GhHsTuples,
    GhHsTuplesOut,
};
use crate::tuples::DeviceTuples;

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take.
unsafe impl KernelParams for GhHsBucketsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsInsertParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsGetParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsDeleteParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsSlotDeleteParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsSubtaskParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsSearchParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsCountParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsPartitionParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsPermuteParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsBuildParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsNodeCountsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsKeyFaultsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsTupleRowsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsFillParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsCompactParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsRowsParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhHsExportParams {}

static OPS: KernelImage = gpuhash_core::kernel_image!("hyperspace");
static SEARCH_IMAGE: KernelImage = gpuhash_core::kernel_image!("search");
static BUILD_IMAGE: KernelImage = gpuhash_core::kernel_image!("build");

static BUCKETS: Kernel<GhHsBucketsParams> = Kernel::new(&OPS, "gh_hs_buckets");
static INSERT: Kernel<GhHsInsertParams> = Kernel::new(&OPS, "gh_hs_insert");
static GET: Kernel<GhHsGetParams> = Kernel::new(&OPS, "gh_hs_get");
static DELETE: Kernel<GhHsDeleteParams> = Kernel::new(&OPS, "gh_hs_delete");
static DELETE_SLOTS: Kernel<GhHsSlotDeleteParams> = Kernel::new(&OPS, "gh_hs_delete_slots");
static COUNT: Kernel<GhHsCountParams> = Kernel::new(&OPS, "gh_hs_count");
static RECLAIM: Kernel<GhHsCountParams> = Kernel::new(&OPS, "gh_hs_reclaim");
static FILL: Kernel<GhHsFillParams> = Kernel::new(&OPS, "gh_hs_fill");
static EXPORT: Kernel<GhHsExportParams> = Kernel::new(&OPS, "gh_hs_export");
static SUBTASKS: Kernel<GhHsSubtaskParams> = Kernel::new(&SEARCH_IMAGE, "gh_hs_subtasks");
static SEARCH: Kernel<GhHsSearchParams> = Kernel::new(&SEARCH_IMAGE, "gh_hs_search");
static COMPACT: Kernel<GhHsCompactParams> = Kernel::new(&SEARCH_IMAGE, "gh_hs_compact");
static SETTLE_ROWS: Kernel<GhHsRowsParams> = Kernel::new(&SEARCH_IMAGE, "gh_hs_settle_rows");
static PARTITION: Kernel<GhHsPartitionParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_partition");
static PERMUTE: Kernel<GhHsPermuteParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_permute");
static BUILD: Kernel<GhHsBuildParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_build");
static BUILD_LINKS: Kernel<GhHsBuildParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_build_links");
static NODE_COUNTS: Kernel<GhHsNodeCountsParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_node_counts");
static KEY_FAULTS: Kernel<GhHsKeyFaultsParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_key_faults");
static TUPLE_ROWS: Kernel<GhHsTupleRowsParams> = Kernel::new(&BUILD_IMAGE, "gh_hs_tuple_rows");

const THREADS: u32 = 128;

fn grid(stream: &Stream, threads: u64) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), threads, THREADS)
}

/// Tuples as a kernel parameter, with the stream ordering of their buffers.
struct TuplesOn<'a> {
    params: GhHsTuples,
    _order: [DeviceAddress<'a>; 3],
}

fn tuples_on<'a>(stream: &'a Stream, tuples: &'a DeviceTuples) -> TuplesOn<'a> {
    let order = [
        tuples.keys.address(stream),
        tuples.attributes.address(stream),
        tuples.values.address(stream),
    ];
    TuplesOn {
        params: GhHsTuples {
            keys: order[0].address as *const u32,
            attributes: order[1].address as *const u32,
            values: order[2].address as *const u32,
            count: tuples.len() as u64,
        },
        _order: order,
    }
}

/// Tuples a kernel writes, with the stream ordering of their buffers.
struct TuplesOut<'a> {
    params: GhHsTuplesOut,
    _order: [DeviceAddress<'a>; 3],
}

fn tuples_out<'a>(stream: &'a Stream, tuples: &'a mut DeviceTuples) -> TuplesOut<'a> {
    let capacity = tuples.len() as u64;
    let order = [
        tuples.keys.address_mut(stream),
        tuples.attributes.address_mut(stream),
        tuples.values.address_mut(stream),
    ];
    TuplesOut {
        params: GhHsTuplesOut {
            keys: order[0].address as *mut u32,
            attributes: order[1].address as *mut u32,
            values: order[2].address as *mut u32,
            capacity,
        },
        _order: order,
    }
}

/// buckets[i] = the bucket of tuple i.
pub(crate) fn buckets(
    stream: &Stream,
    space: GhHsSpace,
    tuples: &DeviceTuples,
    buckets: &mut DeviceBuffer<u32>,
) -> gpuhash_core::Result<()> {
    let n = tuples.len() as u64;
    let input = tuples_on(stream, tuples);
    let out = buckets.address_mut(stream);
    let params = GhHsBucketsParams {
        space,
        tuples: input.params,
        buckets: out.address as *mut u32,
    };
    // SAFETY: `buckets` holds one word a tuple and the tuples hold p columns of n
    // attributes (checked by the caller, which built them); the kernel writes below n.
    unsafe { BUCKETS.launch(stream, grid(stream, n), params) }
}

/// One insert pass over the tuples whose status is PENDING; `slots` (zeroed by the
/// caller) receives each inserted tuple's key slot.
pub(crate) fn insert(
    stream: &Stream,
    space: GhHsSpace,
    tuples: &DeviceTuples,
    status: &mut DeviceBuffer<u8>,
    slots: Option<&mut DeviceBuffer<u64>>,
    unique: bool,
) -> gpuhash_core::Result<()> {
    let n = tuples.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let input = tuples_on(stream, tuples);
    let s = status.address_mut(stream);
    let k = slots.map(|k| k.address_mut(stream));
    let params = GhHsInsertParams {
        space,
        tuples: input.params,
        status: s.address as *mut u8,
        slots: k
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| a.address as *mut u64),
        unique: u32::from(unique),
    };
    // SAFETY: `space` comes from the live space and allocator the caller holds for
    // reading; status and slots hold one entry a tuple (checked by the caller); the kernel
    // touches items below n and slabs of the space only.
    unsafe { INSERT.launch(stream, grid(stream, n), params) }
}

/// What a lookup reads: keys, and the attributes (column-major, as [`DeviceTuples`]) of
/// the tuples whose copies it looks for, which a space with attribute dimensions needs to
/// find their buckets.
pub(crate) struct Lookup<'a> {
    pub keys: &'a DeviceBuffer<u32>,
    pub attributes: Option<&'a DeviceBuffer<u32>>,
}

/// Lookups: found flags, and optionally tuples and key slots.
pub(crate) fn get(
    stream: &Stream,
    space: GhHsSpace,
    lookup: Lookup<'_>,
    found: &mut DeviceBuffer<u8>,
    out: Option<&mut DeviceTuples>,
    slots: Option<&mut DeviceBuffer<u64>>,
) -> gpuhash_core::Result<()> {
    let n = lookup.keys.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let k = lookup.keys.address(stream);
    let a = lookup.attributes.map(|a| a.address(stream));
    let f = found.address_mut(stream);
    let o = out.map(|o| tuples_out(stream, o));
    let s = slots.map(|s| s.address_mut(stream));
    let params = GhHsGetParams {
        space,
        tuples: GhHsTuples {
            keys: k.address as *const u32,
            attributes: a
                .as_ref()
                .map_or(std::ptr::null(), |a| a.address as *const u32),
            values: std::ptr::null(),
            count: n,
        },
        found: f.address as *mut u8,
        out: o.as_ref().map_or(GhHsTuplesOut::default(), |o| o.params),
        slots: s
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| a.address as *mut u64),
    };
    // SAFETY: found, out (capacity n) and slots hold n entries, and the attributes p
    // columns of n whenever the space has an attribute dimension (checked by the caller);
    // the kernel reads only the fields of the space's dimensions and writes below n.
    unsafe { GET.launch(stream, grid(stream, n), params) }
}

/// Removes every live copy of each tuple's key from its bucket.
pub(crate) fn delete(
    stream: &Stream,
    space: GhHsSpace,
    tuples: &DeviceTuples,
    removed: Option<&mut DeviceBuffer<u32>>,
) -> gpuhash_core::Result<()> {
    let n = tuples.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let input = tuples_on(stream, tuples);
    let r = removed.map(|r| r.address_mut(stream));
    let params = GhHsDeleteParams {
        space,
        tuples: input.params,
        removed: r
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| a.address as *mut u32),
    };
    // SAFETY: removed (when given) holds one word a tuple (checked by the caller); the
    // kernel only swaps key words of the space's slabs for the removed word.
    unsafe { DELETE.launch(stream, grid(stream, n), params) }
}

/// Removes the copies whose key slot ids a lookup or an insert on this space found (0:
/// none).
pub(crate) fn delete_slots(
    stream: &Stream,
    space: GhHsSpace,
    slots: &DeviceBuffer<u64>,
    keys: &DeviceBuffer<u32>,
) -> gpuhash_core::Result<()> {
    let n = keys.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let s = slots.address(stream);
    let k = keys.address(stream);
    let params = GhHsSlotDeleteParams {
        space,
        slots: s.address as *const u64,
        keys: k.address as *const u32,
        count: n,
        removed: std::ptr::null_mut(),
    };
    // SAFETY: slots hold n ids of key slots of this space (or 0) that a lookup or an
    // insert wrote, and keys n words (checked by the caller); ids name slabs by address,
    // which growth keeps, and the caller holds the space for reading, so no clear has
    // freed them since the ids were taken in the same batch.
    unsafe { DELETE_SLOTS.launch(stream, grid(stream, n), params) }
}

/// `*total += ` the space's live tuples.
pub(crate) fn count(
    stream: &Stream,
    space: GhHsSpace,
    total: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    sum_over_buckets(&COUNT, stream, space, total)
}

/// The space's removed key slots made empty again, `*total += ` how many. The caller
/// makes sure that no write is in flight and no search that could have seen their tuples
/// live still runs (`reclaim.rs`).
pub(crate) fn reclaim(
    stream: &Stream,
    space: GhHsSpace,
    total: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    sum_over_buckets(&RECLAIM, stream, space, total)
}

/// A warp a bucket of the space, each adding what it counted into `*total`: COUNT or
/// RECLAIM.
fn sum_over_buckets(
    kernel: &Kernel<GhHsCountParams>,
    stream: &Stream,
    space: GhHsSpace,
    total: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    let t = total.address_mut(stream);
    let params = GhHsCountParams {
        space,
        total: t.address as *mut ::core::ffi::c_ulonglong,
        counts: std::ptr::null_mut(),
    };
    let warps = grid(stream, u64::from(space.bucket_count) * 32);
    // SAFETY: with counts null both kernels add into total, one word the buffer holds, and
    // touch only the space's own slabs: COUNT reads them, RECLAIM turns removed key words
    // to empty, which its caller orders after every write and every search that could
    // read them (`reclaim`).
    unsafe { kernel.launch(stream, warps, params) }
}

/// Every live tuple packed into `out` from 0, `cursor` counting them.
pub(crate) fn export(
    stream: &Stream,
    space: GhHsSpace,
    cursor: &mut DeviceBuffer<u64>,
    out: &mut DeviceTuples,
) -> gpuhash_core::Result<()> {
    let c = cursor.address_mut(stream);
    let o = tuples_out(stream, out);
    let params = GhHsExportParams {
        space,
        cursor: c.address as *mut ::core::ffi::c_ulonglong,
        out: o.params,
    };
    // SAFETY: the cursor is one word; the kernel writes tuple k of out only where
    // k < out's capacity, and only reads the space's slabs.
    unsafe {
        EXPORT.launch(
            stream,
            grid(stream, u64::from(space.bucket_count) * 32),
            params,
        )
    }
}

/// Sets every word of `words` to `value`.
pub(crate) fn fill(
    stream: &Stream,
    words: &mut DeviceBuffer<u32>,
    value: u32,
) -> gpuhash_core::Result<()> {
    let n = words.len() as u64;
    let w = words.address_mut(stream);
    let params = GhHsFillParams {
        words: w.address as *mut u32,
        count: n,
        value,
    };
    // SAFETY: the kernel writes the buffer's n words only.
    unsafe { FILL.launch(stream, grid(stream, n), params) }
}

/// The (query, bucket) subtasks of a group of a search batch, `members.len() * touched`
/// of them, naming the batch's queries.
pub(crate) struct Subtasks<'a> {
    /// GH_HS_MAX_FIELDS words a query of the batch.
    pub queries: &'a DeviceBuffer<u32>,
    /// The batch's indices of the group's queries.
    pub members: &'a DeviceBuffer<u32>,
    pub field_mask: u32,
    pub touched: u64,
    pub query_of: &'a mut DeviceBuffer<u32>,
    pub bucket_of: &'a mut DeviceBuffer<u32>,
}

pub(crate) fn subtasks(
    stream: &Stream,
    space: GhHsSpace,
    subtasks: Subtasks<'_>,
) -> gpuhash_core::Result<()> {
    let total = subtasks.query_of.len() as u64;
    if total == 0 {
        return Ok(());
    }
    let query_count = subtasks.members.len() as u64;
    if query_count.checked_mul(subtasks.touched) != Some(total) {
        return Err(gpuhash_core::Error::InvalidInput(
            "subtasks: not one subtask a query and bucket".into(),
        ));
    }
    let q = subtasks.queries.address(stream);
    let m = subtasks.members.address(stream);
    let qo = subtasks.query_of.address_mut(stream);
    let bo = subtasks.bucket_of.address_mut(stream);
    let params = GhHsSubtaskParams {
        space,
        queries: q.address as *const u32,
        members: m.address as *const u32,
        query_count,
        field_mask: subtasks.field_mask,
        touched: subtasks.touched,
        subtask_query: qo.address as *mut u32,
        subtask_bucket: bo.address as *mut u32,
    };
    // SAFETY: queries hold GH_HS_MAX_FIELDS words for each query of the batch, and every
    // member names one of them (the caller's group of the same batch); query_of and
    // bucket_of hold members * touched entries (checked above); the kernel writes below
    // that.
    unsafe { SUBTASKS.launch(stream, grid(stream, total), params) }
}

/// Where one search pass reads its subtasks and answers.
pub(crate) struct SearchPass<'a> {
    pub queries: &'a DeviceBuffer<u32>,
    pub query_of: &'a DeviceBuffer<u32>,
    pub bucket_of: &'a DeviceBuffer<u32>,
    pub field_mask: u32,
    pub scan_field: u32,
    pub grouped: bool,
    pub answers: SearchAnswers<'a>,
}

/// A count pass's or a write pass's outputs.
pub(crate) enum SearchAnswers<'a> {
    /// counts[q] += matches of query q.
    Count { counts: &'a mut DeviceBuffer<u64> },
    /// Matches of query q into out from offsets[q], at most limits[q], cursors[q] counting.
    Write {
        offsets: &'a DeviceBuffer<u64>,
        limits: &'a DeviceBuffer<u64>,
        cursors: &'a mut DeviceBuffer<u64>,
        out: &'a mut DeviceTuples,
    },
}

pub(crate) fn search(
    stream: &Stream,
    space: GhHsSpace,
    pass: SearchPass<'_>,
) -> gpuhash_core::Result<()> {
    let subtask_count = pass.query_of.len() as u64;
    if subtask_count == 0 {
        return Ok(());
    }
    let q = pass.queries.address(stream);
    let qo = pass.query_of.address(stream);
    let bo = pass.bucket_of.address(stream);
    let mut params = GhHsSearchParams {
        space,
        queries: q.address as *const u32,
        subtask_query: qo.address as *const u32,
        subtask_bucket: bo.address as *const u32,
        subtask_count,
        field_mask: pass.field_mask,
        scan_field: pass.scan_field,
        grouped: u32::from(pass.grouped),
        ..GhHsSearchParams::default()
    };
    // Grouped: a warp a subtask (those that lead a bucket's run serve it); ungrouped: a
    // warp 32 subtasks.
    let warps = match pass.grouped {
        true => subtask_count,
        false => subtask_count.div_ceil(32),
    };
    let shape = grid(stream, warps.saturating_mul(32));
    match pass.answers {
        SearchAnswers::Count { counts } => {
            let c = counts.address_mut(stream);
            params.counts = c.address as *mut u64;
            // SAFETY: counts hold one word a query, and every subtask names a query below
            // that count and a bucket below bucket_count (built by `subtasks` from the
            // same queries and space, checked by the caller); the kernel only reads slabs.
            unsafe { SEARCH.launch(stream, shape, params) }
        }
        SearchAnswers::Write {
            offsets,
            limits,
            cursors,
            out,
        } => {
            let o = offsets.address(stream);
            let l = limits.address(stream);
            let c = cursors.address_mut(stream);
            let w = tuples_out(stream, out);
            params.offsets = o.address as *const u64;
            params.limits = l.address as *const u64;
            params.cursors = c.address as *mut ::core::ffi::c_ulonglong;
            params.out = w.params;
            // SAFETY: as for the count pass; offsets, limits and cursors hold one word a
            // query (checked by the caller), and the kernel writes match k of query q only
            // where k < limits[q] and offsets[q] + k < out's capacity.
            unsafe { SEARCH.launch(stream, shape, params) }
        }
    }
}

/// Moves each query's matches from `source` (query q's from `from[q]`) to `out` (query
/// q's at `to[q]..to[q + 1]`), for the `to.len() - 1` queries (`from` may hold more).
pub(crate) fn compact(
    stream: &Stream,
    source: &DeviceTuples,
    from: &DeviceBuffer<u64>,
    to: &DeviceBuffer<u64>,
    out: &mut DeviceTuples,
    attribute_count: usize,
) -> gpuhash_core::Result<()> {
    let queries = to.len().saturating_sub(1) as u64;
    if queries == 0 || out.is_empty() {
        return Ok(());
    }
    if (from.len() as u64) < queries {
        return Err(gpuhash_core::Error::InvalidInput(
            "compact: fewer sources than queries".into(),
        ));
    }
    let answers = out.len() as u64;
    let input = tuples_on(stream, source);
    let f = from.address(stream);
    let t = to.address(stream);
    let o = tuples_out(stream, out);
    let params = GhHsCompactParams {
        source: input.params,
        out: o.params,
        from: f.address as *const u64,
        to: t.address as *const u64,
        query_count: queries,
        attribute_count: attribute_count as u32,
    };
    // SAFETY: `to` holds queries + 1 rising offsets ending at out's capacity; query q's
    // to[q + 1] - to[q] tuples lie in source from from[q] (a write pass found that many
    // within the capacity laid out for q there, checked by the caller); both hold
    // `attribute_count` attribute columns.
    unsafe { COMPACT.launch(stream, grid(stream, answers), params) }
}

/// How [`settle_rows`] judges and lays out the rows of a write pass.
pub(crate) struct SettleRows<'a> {
    /// What each query found (or counted).
    pub found: &'a DeviceBuffer<u64>,
    /// The room each query had; with `pad`, the room the next pass lays out.
    pub room: &'a mut DeviceBuffer<u64>,
    /// A query breaks its room by finding another number (else only by finding more).
    pub exact: bool,
    /// Whether room becomes found + found / 4 + 8.
    pub pad: bool,
    /// Raised (set nonzero) by a query that breaks its room, and by `total` past
    /// `capacity`; `None`: nothing is judged.
    pub flag: Option<&'a mut DeviceBuffer<u64>>,
    /// One word: the total of the rows, judged against `capacity`.
    pub total: Option<(&'a DeviceBuffer<u64>, usize)>,
    pub capacity: u64,
}

/// Settles the rows of a write pass (or pads counts into room), one thread a query.
pub(crate) fn settle_rows(stream: &Stream, rows: SettleRows<'_>) -> gpuhash_core::Result<()> {
    let n = rows.found.len();
    if rows.room.len() != n {
        return Err(gpuhash_core::Error::LengthMismatch {
            what: "settle_rows: found and room",
            left: n,
            right: rows.room.len(),
        });
    }
    if rows.flag.as_ref().is_some_and(|f| f.is_empty())
        || rows.total.is_some_and(|(t, at)| at >= t.len())
    {
        return Err(gpuhash_core::Error::InvalidInput(
            "settle_rows: no word for the flag or the total".into(),
        ));
    }
    let f = rows.found.address(stream);
    let r = rows.room.address_mut(stream);
    let g = rows.flag.map(|g| g.address_mut(stream));
    let t = rows.total.map(|(t, at)| (t.address(stream), at));
    let params = GhHsRowsParams {
        found: f.address as *const u64,
        room: r.address as *mut u64,
        count: n as u64,
        exact: u32::from(rows.exact),
        pad: u32::from(rows.pad),
        flag: g.as_ref().map_or(std::ptr::null_mut(), |g| {
            g.address as *mut ::core::ffi::c_ulonglong
        }),
        total: t.as_ref().map_or(std::ptr::null(), |(t, at)| {
            (t.address + *at as u64 * 8) as *const u64
        }),
        capacity: rows.capacity,
    };
    // SAFETY: found and room hold n words (checked above), the flag one word at least and
    // the total's word lies in its buffer (checked above); the kernel reads found, room
    // and the total below those bounds and writes room below n and the flag's first word.
    unsafe { SETTLE_ROWS.launch(stream, grid(stream, n.max(1) as u64), params) }
}

/// Counting-sort passes over `keys & mask`: the histogram (zeroed by the caller), or the
/// scatter of each item's index to `cursors[part]++`.
pub(crate) enum Partition<'a> {
    Histogram {
        histogram: &'a mut DeviceBuffer<u64>,
    },
    Scatter {
        cursors: &'a mut DeviceBuffer<u64>,
        order: &'a mut DeviceBuffer<u32>,
    },
}

pub(crate) fn partition(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    mask: u32,
    pass: Partition<'_>,
) -> gpuhash_core::Result<()> {
    let n = keys.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let k = keys.address(stream);
    let mut params = GhHsPartitionParams {
        keys: k.address as *const u32,
        count: n,
        mask,
        ..GhHsPartitionParams::default()
    };
    match pass {
        Partition::Histogram { histogram } => {
            let h = histogram.address_mut(stream);
            params.histogram = h.address as *mut ::core::ffi::c_ulonglong;
            // SAFETY: the histogram holds mask + 1 words (checked by the caller), and
            // every part is `key & mask`.
            unsafe { PARTITION.launch(stream, grid(stream, n), params) }
        }
        Partition::Scatter { cursors, order } => {
            let c = cursors.address_mut(stream);
            let o = order.address_mut(stream);
            params.cursors = c.address as *mut ::core::ffi::c_ulonglong;
            params.order = o.address as *mut u32;
            // SAFETY: cursors hold at least mask + 1 words, the exclusive prefix sums of
            // this batch's histogram, so every index lands below n, which `order` holds.
            unsafe { PARTITION.launch(stream, grid(stream, n), params) }
        }
    }
}

/// `values[i * width + c] = source[order[i] * width + c]`: the first `n = order.len()`
/// rows of `width` words of `values` gathered from rows of `source` by `order`.
pub(crate) fn permute(
    stream: &Stream,
    source: &DeviceBuffer<u32>,
    order: &DeviceBuffer<u32>,
    values: &mut DeviceBuffer<u32>,
    width: usize,
) -> gpuhash_core::Result<()> {
    let n = order.len();
    if n == 0 || width == 0 {
        return Ok(());
    }
    let words = n.checked_mul(width);
    if words.is_none_or(|words| words > source.len() || words > values.len()) {
        return Err(gpuhash_core::Error::InvalidInput(
            "permute: rows past their buffers".into(),
        ));
    }
    let s = source.address(stream);
    let o = order.address(stream);
    let v = values.address_mut(stream);
    let params = GhHsPermuteParams {
        source: s.address as *const u32,
        order: o.address as *const u32,
        values: v.address as *mut u32,
        count: n as u64,
        width: width as u32,
    };
    // SAFETY: both buffers hold n rows (checked above) and `order` holds indices of rows
    // of `source` below n (a permutation of 0..n, from a scatter, or a map into at least
    // n rows), so every read lands in its source row.
    unsafe { PERMUTE.launch(stream, grid(stream, n as u64), params) }
}

/// `rows` (`tuples.len()` rows of `p + 2` words) from the tuples' columns: the key, the
/// `p` attributes, the value, the order of a super node's chains.
pub(crate) fn tuple_rows(
    stream: &Stream,
    tuples: &DeviceTuples,
    p: usize,
    rows: &mut DeviceBuffer<u32>,
) -> gpuhash_core::Result<()> {
    let n = tuples.len();
    let fits =
        tuples.attributes.len() == n * p && tuples.values.len() == n && rows.len() == n * (p + 2);
    if !fits {
        return Err(gpuhash_core::Error::InvalidInput(
            "tuple_rows: columns or rows of the wrong length".into(),
        ));
    }
    if n == 0 {
        return Ok(());
    }
    let input = tuples_on(stream, tuples);
    let r = rows.address_mut(stream);
    let params = GhHsTupleRowsParams {
        tuples: input.params,
        attribute_count: p as u32,
        rows: r.address as *mut u32,
    };
    // SAFETY: the columns hold n keys, n values and p columns of n attributes, and rows
    // n rows of p + 2 words (checked above).
    unsafe { TUPLE_ROWS.launch(stream, grid(stream, n as u64), params) }
}

/// `nodes[b]`: the super nodes bucket b of `histogram` takes; `totals` (two words, zeroed)
/// gains the sum of them and the sum of those past the heads.
pub(crate) fn node_counts(
    stream: &Stream,
    histogram: &DeviceBuffer<u64>,
    nodes: &mut DeviceBuffer<u64>,
    totals: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    let buckets = histogram.len();
    let bucket_count = u32::try_from(buckets)
        .ok()
        .filter(|_| nodes.len() >= buckets);
    let (Some(bucket_count), true) = (bucket_count, totals.len() >= 2) else {
        return Err(gpuhash_core::Error::InvalidInput(
            "node_counts: buffers shorter than the histogram, or past 2^32 buckets".into(),
        ));
    };
    let h = histogram.address(stream);
    let o = nodes.address_mut(stream);
    let t = totals.address_mut(stream);
    let params = GhHsNodeCountsParams {
        histogram: h.address as *const ::core::ffi::c_ulonglong,
        nodes: o.address as *mut ::core::ffi::c_ulonglong,
        totals: t.address as *mut ::core::ffi::c_ulonglong,
        bucket_count,
    };
    // SAFETY: nodes holds a word a bucket and totals two (checked above); the kernel reads
    // and writes nothing else.
    unsafe { NODE_COUNTS.launch(stream, grid(stream, buckets as u64), params) }
}

/// Sets `fault` (zeroed) when some key is reserved or repeated, through `table`: zeroed, a
/// power of two of words, at least twice as many as the keys.
pub(crate) fn key_faults(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    table: &mut DeviceBuffer<u32>,
    seed: u32,
    fault: &mut DeviceBuffer<u32>,
) -> gpuhash_core::Result<()> {
    let n = keys.len();
    let mask = u32::try_from(table.len().wrapping_sub(1)).ok();
    let fits = table.len().is_power_of_two() && table.len() / 2 >= n && !fault.is_empty();
    let (Some(mask), true) = (mask, fits) else {
        return Err(gpuhash_core::Error::InvalidInput(
            "key_faults: a table not a power of two, past 2^32 words or under twice the keys"
                .into(),
        ));
    };
    if n == 0 {
        return Ok(());
    }
    let k = keys.address(stream);
    let t = table.address_mut(stream);
    let f = fault.address_mut(stream);
    let params = GhHsKeyFaultsParams {
        keys: k.address as *const u32,
        count: n as u64,
        table: t.address as *mut u32,
        mask,
        seed,
        fault: f.address as *mut u32,
    };
    // SAFETY: every slot probed is masked into the table; the table has more slots than
    // keys, so every probe run ends at an empty slot or the key's own mark.
    unsafe { KEY_FAULTS.launch(stream, grid(stream, n as u64), params) }
}

/// A bulk build's plan on the device: bucket b's tuples are `offsets[b]..offsets[b + 1]` of
/// the tuples sorted by bucket, its super nodes `node_starts[b]..node_starts[b + 1]` (both
/// `bucket_count + 1` rising words, the last the totals), and `links` (one word a super
/// node) the allocator addresses of the super nodes past the heads.
pub(crate) struct BuildPlan<'a> {
    pub(crate) offsets: &'a DeviceBuffer<u64>,
    pub(crate) node_starts: &'a DeviceBuffer<u64>,
    pub(crate) links: &'a mut DeviceBuffer<u32>,
}

/// Which pass of a bulk build runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BuildPass {
    /// Allocates a run of slabs for every super node past a head, into the links.
    Links,
    /// Writes every super node whole, linked through the links.
    Nodes,
}

/// One pass of a bulk build of an empty space from tuples sorted by bucket.
pub(crate) fn build(
    stream: &Stream,
    space: GhHsSpace,
    rows: &DeviceBuffer<u32>,
    plan: BuildPlan<'_>,
    pass: BuildPass,
) -> gpuhash_core::Result<()> {
    let node_count = plan.links.len() as u64;
    if node_count == 0 {
        return Ok(());
    }
    let r = rows.address(stream);
    let o = plan.offsets.address(stream);
    let starts = plan.node_starts.address(stream);
    let links = plan.links.address_mut(stream);
    let params = GhHsBuildParams {
        space,
        rows: r.address as *const u32,
        offsets: o.address as *const u64,
        node_starts: starts.address as *const u64,
        links: links.address as *mut u32,
        node_count,
    };
    let kernel = match pass {
        BuildPass::Links => &BUILD_LINKS,
        BuildPass::Nodes => &BUILD,
    };
    // SAFETY: `rows` holds the tuple count's rows of attribute_count + 2 words (the
    // caller's plan is of those tuples); offsets and node_starts hold bucket_count + 1
    // rising words ending at the tuple count and at node_count (links' length), the prefix sums of the tuples'
    // bucket histogram and of ceil(tuples / 31) a bucket, so every node maps to a bucket
    // and every tuple index read is below the count; the Nodes pass runs after a Links
    // pass that found a run for every node past a head. The caller holds the space for
    // writing and it is empty, so no other kernel touches its slabs.
    unsafe { kernel.launch(stream, grid(stream, node_count * 32), params) }
}

// The column scan (`src/scan.rs`, `cuda-src/hyperspace/column_scan.cu`).

// SAFETY: bindgen's repr(C) copy of the C struct the kernels take.
unsafe impl KernelParams for crate::layouts::GhHsScanParams {}

static SCAN_IMAGE: KernelImage = gpuhash_core::kernel_image!("column_scan");
static SCAN_COUNT: Kernel<crate::layouts::GhHsScanParams> =
    Kernel::new(&SCAN_IMAGE, "gh_hs_scan_count");
static SCAN_WRITE: Kernel<crate::layouts::GhHsScanParams> =
    Kernel::new(&SCAN_IMAGE, "gh_hs_scan_write");

/// One launch's entries: `count` (at most `GH_HS_SCAN_CHUNK`) distinct value lists of
/// `fields` (field 0 the key, 1 + a attribute a), entries `first..first + count` of the
/// batch, whose values lie from word `values_from` of the batch's entry values,
/// `fields.len()` an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScanChunk<'a> {
    pub fields: &'a [u32],
    pub values_from: usize,
    pub first: usize,
    pub count: usize,
}

/// Where the queries of each entry go in a write pass: entry e's are
/// `queries[query_offsets[e]..query_offsets[e + 1]]`, query q's row from `offsets[q]`.
pub(crate) struct ScanRows<'a> {
    pub query_offsets: &'a DeviceBuffer<u32>,
    pub queries: &'a DeviceBuffer<u32>,
    pub offsets: &'a DeviceBuffer<u64>,
}

/// A column scan pass's outputs, indexed by the batch's entries.
pub(crate) enum ScanAnswers<'a> {
    /// `counts[e] +=` the tuples meeting entry e.
    Count { counts: &'a mut DeviceBuffer<u32> },
    /// Tuples meeting entry e into each of its queries' rows, at most `counts[e]` (the
    /// count pass's), `cursors[e]` (zeroed) counting them.
    Write {
        counts: &'a DeviceBuffer<u32>,
        cursors: &'a mut DeviceBuffer<u32>,
        rows: ScanRows<'a>,
        out: &'a mut DeviceTuples,
    },
}

/// Fails unless the columns hold `p` attributes a tuple, fewer than 2^32 tuples, and the
/// chunk's fields, entries and values lie inside `entries` slots and `values`.
fn check_scan(
    tuples: &DeviceTuples,
    p: usize,
    values: &DeviceBuffer<u32>,
    chunk: &ScanChunk<'_>,
    entries: usize,
) -> gpuhash_core::Result<()> {
    let n = tuples.len();
    let fits = |end: Option<usize>, len: usize| end.is_some_and(|end| end <= len);
    let fields_ok = (1..=crate::layouts::GH_HS_MAX_FIELDS as usize).contains(&chunk.fields.len())
        && chunk.fields.iter().all(|&f| f as usize <= p);
    let ok = fields_ok
        && p <= crate::layouts::GH_HS_MAX_ATTRIBUTES as usize
        && u32::try_from(n).is_ok()
        && Some(tuples.attributes.len()) == p.checked_mul(n)
        && tuples.values.len() == n
        && chunk.count <= crate::layouts::GH_HS_SCAN_CHUNK as usize
        && fits(chunk.first.checked_add(chunk.count), entries)
        && fits(
            chunk
                .count
                .checked_mul(chunk.fields.len())
                .and_then(|words| words.checked_add(chunk.values_from)),
            values.len(),
        );
    if ok {
        Ok(())
    } else {
        Err(gpuhash_core::Error::InvalidInput(
            "column scan: columns or entries of the wrong shape".into(),
        ))
    }
}

/// One column scan pass over the tuples (`p` attributes each) for a chunk of the entries
/// whose values are `values`.
pub(crate) fn column_scan(
    stream: &Stream,
    tuples: &DeviceTuples,
    p: usize,
    values: &DeviceBuffer<u32>,
    chunk: ScanChunk<'_>,
    answers: ScanAnswers<'_>,
) -> gpuhash_core::Result<()> {
    let entries = match &answers {
        ScanAnswers::Count { counts } => counts.len(),
        ScanAnswers::Write {
            counts,
            cursors,
            rows,
            ..
        } => counts
            .len()
            .min(cursors.len())
            .min(rows.query_offsets.len().saturating_sub(1)),
    };
    check_scan(tuples, p, values, &chunk, entries)?;
    let n = tuples.len() as u64;
    if n == 0 || chunk.count == 0 {
        return Ok(());
    }
    let input = tuples_on(stream, tuples);
    let v = values.address(stream);
    let mut fields = [0u32; crate::layouts::GH_HS_MAX_FIELDS as usize];
    fields[..chunk.fields.len()].copy_from_slice(chunk.fields);
    let word = |address: u64, index: usize| address + index as u64 * 4;
    let mut params = crate::layouts::GhHsScanParams {
        tuples: input.params,
        attribute_count: p as u32,
        field_count: chunk.fields.len() as u32,
        fields,
        entry_values: word(v.address, chunk.values_from) as *const u32,
        entry_count: chunk.count as u32,
        ..Default::default()
    };
    let shape = LaunchShape::grid_stride(
        stream.device(),
        n.div_ceil(u64::from(crate::layouts::GH_HS_SCAN_UNROLL)),
        crate::layouts::GH_HS_SCAN_THREADS,
    );
    match answers {
        ScanAnswers::Count { counts } => {
            let c = counts.address_mut(stream);
            params.entry_counts = word(c.address, chunk.first) as *mut u32;
            // SAFETY: checked above: the columns hold p attributes of n < 2^32 tuples, the
            // fields are below p + 1, the chunk's values lie in their buffer and its
            // entries' counts in `counts`; the kernel reads the columns and values and
            // adds only to those counts.
            unsafe { SCAN_COUNT.launch(stream, shape, params) }
        }
        ScanAnswers::Write {
            counts,
            cursors,
            rows,
            out,
        } => {
            let c = counts.address(stream);
            let k = cursors.address_mut(stream);
            let qo = rows.query_offsets.address(stream);
            let q = rows.queries.address(stream);
            let o = rows.offsets.address(stream);
            let w = tuples_out(stream, out);
            params.entry_counts = word(c.address, chunk.first) as *mut u32;
            params.entry_cursors = word(k.address, chunk.first) as *mut u32;
            params.entry_query_offsets = word(qo.address, chunk.first) as *const u32;
            params.entry_queries = q.address as *const u32;
            params.offsets = o.address as *const u64;
            params.out = w.params;
            // SAFETY: the shapes as for the count pass, and the chunk's counts, cursors
            // and query offsets (one more) lie in their buffers (checked above). The
            // caller lays the rows out from the same count pass over the same columns:
            // the query offsets rise within `queries`, which name queries below
            // offsets.len() - 1, and each query's row, from offsets[q], holds its entry's
            // count, inside out's capacity; the kernel writes match k of an entry only
            // where k < its count, and reads `counts` only.
            unsafe { SCAN_WRITE.launch(stream, shape, params) }
        }
    }
}
