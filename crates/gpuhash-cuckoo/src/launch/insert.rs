//! The kernels of an insert batch (`cuda-src/cuckoo/insert.cu`, `partition.cu`): the sort
//! by partition, the lock-free place pass, the evicting insert pass, and the update of
//! keys already present.

use gpuhash_core::launch::LaunchShape;
use gpuhash_core::table::Key;
use gpuhash_core::{DeviceBuffer, Stream};

use super::{
    PARTITION_SCAN, check_counters, const_ptr, counter, counter_ptr, kernels, lane_shape,
    tile_shape,
};
use crate::Result;
use crate::layouts::{
    GH_CUCKOO_PARTITIONS, GH_CUCKOO_SORT_PER_THREAD, GH_CUCKOO_SORT_THREADS, GhCuckooHome,
    GhCuckooInsertParams, GhCuckooPartitionParams, GhCuckooPlaceParams, GhCuckooTable,
    GhCuckooUpdateParams,
};

/// A batch sorted by the partition of each pair's first bucket.
pub(crate) struct Partition<'a, K, V> {
    pub(crate) table: GhCuckooTable,
    pub(crate) home: GhCuckooHome,
    pub(crate) keys: &'a DeviceBuffer<K>,
    pub(crate) values: &'a DeviceBuffer<V>,
    /// The pairs to sort: the first `count` of `keys` and `values`.
    pub(crate) count: usize,
    pub(crate) sorted_keys: &'a mut DeviceBuffer<K>,
    pub(crate) sorted_values: &'a mut DeviceBuffer<V>,
    /// `GH_CUCKOO_PARTITIONS` counters, zeroed.
    pub(crate) offsets: &'a mut DeviceBuffer<u64>,
}

/// Queues the three passes of the sort: count, scan, scatter.
///
/// # Safety
/// Sound when `sort.table` describes live arrays (held until the launches are queued):
/// the kernels read its bucket counts and hash coefficients only. The inputs and sorted
/// outputs hold `count` pairs and `offsets` every partition (asserted); `offsets` must be
/// zeroed, so that the counts give each partition exactly the places its pairs fill and
/// the scatter writes every place below `count` once and nothing else.
pub(crate) fn partition<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    sort: Partition<'_, K, V>,
) -> Result<()> {
    let n = sort.count;
    assert!(sort.keys.len() >= n && sort.values.len() >= n);
    assert!(sort.sorted_keys.len() >= n && sort.sorted_values.len() >= n);
    assert!(sort.offsets.len() >= GH_CUCKOO_PARTITIONS as usize);
    let k = sort.keys.address(stream);
    let v = sort.values.address(stream);
    let ko = sort.sorted_keys.address_mut(stream);
    let vo = sort.sorted_values.address_mut(stream);
    let o = sort.offsets.address_mut(stream);
    let params = GhCuckooPartitionParams {
        home: sort.home,
        table: sort.table,
        keys: k.address as *const _,
        values: v.address as *const u32,
        keys_out: ko.address as *mut _,
        values_out: vo.address as *mut u32,
        offsets: o.address as *mut u64,
        count: n as u64,
    };
    let scan = LaunchShape {
        blocks: 1,
        threads_per_block: GH_CUCKOO_SORT_THREADS,
        shared_bytes: 0,
    };
    let scatter = LaunchShape::grid_stride(
        stream.device(),
        (n as u64).div_ceil(u64::from(GH_CUCKOO_SORT_PER_THREAD)),
        GH_CUCKOO_SORT_THREADS,
    );
    let kernels = kernels::<K>(params.table.layout);
    // SAFETY: the table's arrays are live (the caller's part); the buffers hold what the
    // kernels touch (asserted) and `offsets` is zeroed (the caller's part); the scan and
    // the scatter run blocks of GH_CUCKOO_SORT_THREADS, as they need. Every buffer is
    // borrowed until the launches are queued.
    unsafe {
        kernels
            .partition_count
            .launch(stream, lane_shape(stream, n as u64), params)?;
        PARTITION_SCAN.launch(stream, scan, params)?;
        kernels.partition_scatter.launch(stream, scatter, params)?;
    }
    Ok(())
}

/// New values for the keys of a batch flagged in `found`.
pub(crate) struct Update<'a, K, V> {
    pub(crate) table: GhCuckooTable,
    pub(crate) keys: &'a DeviceBuffer<K>,
    pub(crate) values: &'a DeviceBuffer<V>,
    pub(crate) found: &'a DeviceBuffer<u8>,
    /// The flag in `found` of the keys to update.
    pub(crate) select: u32,
}

/// Queues the update kernel over every key of `update.keys`.
///
/// # Safety
/// Sound when `update.table` describes live arrays (held until the launch is queued);
/// values and flags hold a place for every key (asserted).
pub(crate) fn update<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    update: Update<'_, K, V>,
) -> Result<()> {
    let count = update.keys.len();
    assert!(update.values.len() >= count && update.found.len() >= count);
    let k = update.keys.address(stream);
    let v = update.values.address(stream);
    let f = update.found.address(stream);
    let params = GhCuckooUpdateParams {
        table: update.table,
        keys: k.address as *const _,
        values: v.address as *const u32,
        found: f.address as *const u8,
        old_values: std::ptr::null_mut(),
        count: count as u64,
        select: update.select,
        pad: 0,
    };
    let shape = tile_shape(stream, count as u64);
    // SAFETY: the table's arrays are live (the caller's part); keys, values and flags hold
    // `count` entries (asserted), borrowed until the launch is queued.
    unsafe {
        kernels::<K>(params.table.layout)
            .update
            .launch(stream, shape, params)
    }?;
    Ok(())
}

/// The lock-free first pass of an insert batch.
pub(crate) struct Place<'a, K, V> {
    pub(crate) table: GhCuckooTable,
    pub(crate) home: GhCuckooHome,
    pub(crate) keys: &'a DeviceBuffer<K>,
    pub(crate) values: &'a DeviceBuffer<V>,
    /// The pairs to place: the first `count`.
    pub(crate) count: usize,
    /// Pairs flagged here are not this pass's to place.
    pub(crate) skip: Option<&'a DeviceBuffer<u8>>,
    /// What became of each pair (`GH_CUCKOO_DONE`, ...).
    pub(crate) status: &'a mut DeviceBuffer<u8>,
    /// The pairs left pending, for the insert kernel.
    pub(crate) pending_keys: &'a mut DeviceBuffer<K>,
    pub(crate) pending_values: &'a mut DeviceBuffer<V>,
    /// Gains [`counter::PENDING`] and [`counter::DUPLICATES`]; [`counter::CURSOR`], zero
    /// before, hands out the batch's chunks to blocks.
    pub(crate) counters: &'a mut DeviceBuffer<u64>,
    /// The pairs, from the first, that read their home quarter before their home half.
    pub(crate) quarter_until: u64,
}

/// Queues the place kernel.
///
/// # Safety
/// Sound when `place.table` describes live arrays (held until the launch is queued) that
/// no other batch writes meanwhile, and the cursor counter is zero. Inputs, status and the
/// pending lists hold `count` entries (asserted), each input adding at most one pending
/// pair.
pub(crate) fn place<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    place: Place<'_, K, V>,
) -> Result<()> {
    let count = place.count;
    assert!(place.keys.len() >= count && place.values.len() >= count);
    assert!(place.skip.is_none_or(|s| s.len() >= count));
    assert!(
        place.status.len() >= count
            && place.pending_keys.len() >= count
            && place.pending_values.len() >= count
    );
    check_counters(place.counters);
    let k = place.keys.address(stream);
    let v = place.values.address(stream);
    let s = place.skip.map(|b| b.address(stream));
    let status = place.status.address_mut(stream);
    let pending_keys = place.pending_keys.address_mut(stream);
    let pending_values = place.pending_values.address_mut(stream);
    let counters = place.counters.address_mut(stream);
    let params = GhCuckooPlaceParams {
        table: place.table,
        home: place.home,
        keys: k.address as *const _,
        values: v.address as *const u32,
        skip: const_ptr(s.as_ref()),
        status: status.address as *mut u8,
        pending_keys: pending_keys.address as *mut _,
        pending_values: pending_values.address as *mut u32,
        pending: counter_ptr(&counters, counter::PENDING),
        duplicates: counter_ptr(&counters, counter::DUPLICATES),
        cursor: counter_ptr(&counters, counter::CURSOR),
        count: count as u64,
        quarter_until: place.quarter_until,
    };
    let shape = lane_shape(stream, count as u64);
    // SAFETY: the table's arrays are live and this batch's (the caller's part); every
    // buffer holds what the kernel touches (asserted) and is borrowed until the launch is
    // queued.
    unsafe {
        kernels::<K>(params.table.layout)
            .place
            .launch(stream, shape, params)
    }?;
    Ok(())
}

/// The evicting pass of an insert batch.
pub(crate) struct Insert<'a, K, V> {
    pub(crate) table: GhCuckooTable,
    pub(crate) home: GhCuckooHome,
    pub(crate) keys: &'a DeviceBuffer<K>,
    pub(crate) values: &'a DeviceBuffer<V>,
    /// The pairs to insert: the first `count`.
    pub(crate) count: usize,
    /// When given, a counter of `counters` that an earlier kernel set: the pairs are then
    /// the first min(that counter, `count`), read on the device.
    pub(crate) count_from: Option<usize>,
    /// Pairs flagged here are not this pass's to insert.
    pub(crate) skip: Option<&'a DeviceBuffer<u8>>,
    /// Pairs homeless after the eviction bound.
    pub(crate) failed_keys: &'a mut DeviceBuffer<K>,
    pub(crate) failed_values: &'a mut DeviceBuffer<V>,
    /// Evicted keys, as many as it holds.
    pub(crate) log: &'a mut DeviceBuffer<K>,
    /// Gains [`counter::LOGGED`] and [`counter::FAILED`].
    pub(crate) counters: &'a mut DeviceBuffer<u64>,
    /// Varies the slots evictions take from launch to launch.
    pub(crate) salt: u32,
    pub(crate) max_evictions: u32,
    /// The subtable to pass over, or `GH_CUCKOO_NO_EXCLUDE`.
    pub(crate) exclude: u32,
}

/// Queues the insert kernel (its one-word-value instance for 4-byte values).
///
/// # Safety
/// Sound when `insert.table` describes live arrays (held until the launch is queued) that
/// no other batch writes meanwhile. Inputs and failed lists hold `count` entries
/// (asserted), each input adding at most one failed pair; the log is written below its
/// length only.
pub(crate) fn insert<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    insert: Insert<'_, K, V>,
) -> Result<()> {
    let count = insert.count;
    assert!(insert.keys.len() >= count && insert.values.len() >= count);
    assert!(insert.skip.is_none_or(|s| s.len() >= count));
    assert!(insert.failed_keys.len() >= count && insert.failed_values.len() >= count);
    check_counters(insert.counters);
    assert!(insert.count_from.is_none_or(|c| c < counter::WORDS));
    let log_capacity = insert.log.len() as u64;
    let k = insert.keys.address(stream);
    let v = insert.values.address(stream);
    let s = insert.skip.map(|b| b.address(stream));
    let counters = insert.counters.address_mut(stream);
    let fk = insert.failed_keys.address_mut(stream);
    let fv = insert.failed_values.address_mut(stream);
    let log = insert.log.address_mut(stream);
    let params = GhCuckooInsertParams {
        table: insert.table,
        keys: k.address as *const _,
        values: v.address as *const u32,
        skip: const_ptr(s.as_ref()),
        count: count as u64,
        count_at: insert
            .count_from
            .map_or(std::ptr::null(), |c| counter_ptr(&counters, c).cast_const()),
        failed_keys: fk.address as *mut _,
        failed_values: fv.address as *mut u32,
        failed_count: counter_ptr(&counters, counter::FAILED),
        log_keys: log.address as *mut _,
        log_count: counter_ptr(&counters, counter::LOGGED),
        log_capacity,
        home: insert.home,
        salt: insert.salt,
        max_evictions: insert.max_evictions,
        exclude: insert.exclude,
    };
    let kernels = kernels::<K>(params.table.layout);
    let kernel = if size_of::<V>() == 4 {
        &kernels.insert1
    } else {
        &kernels.insert
    };
    let shape = tile_shape(stream, count as u64);
    // SAFETY: the table's arrays are live and this batch's (the caller's part); every
    // buffer holds what the kernel touches (asserted; the log is written below its
    // capacity only) and is borrowed until the launch is queued.
    unsafe { kernel.launch(stream, shape, params) }?;
    Ok(())
}
