//! The kernels of `cuda-src/cuckoo/*.cu`: the only place this crate hands raw device
//! pointers to the GPU. One parameter struct a kernel (or a pass of kernels), borrowing
//! the device buffers it names, and one launch function each. The functions are safe for
//! the rest of the crate to call, so that it holds no `unsafe` block: each checks the
//! lengths of the buffers it borrows, and its `# Safety` section says what else the
//! kernel relies on, which the caller upholds. Above all, the table comes in as a
//! [`GhCuckooTable`] or [`GhCuckooSubtable`] that the table module describes from arrays
//! it holds (read or write locked, their address guards alive) until the launch is
//! queued.
//!
//! The passes of an insert batch are in `insert`; find, export, remove, resize and fill
//! are here.

mod insert;

pub(crate) use insert::{Insert, Partition, Place, Update, insert, partition, place, update};

use std::ops::Range;

use gpuhash_core::image::Routed;
use gpuhash_core::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use gpuhash_core::table::Key;
use gpuhash_core::{DeviceAddress, DeviceBuffer, Stream};

use crate::Result;
use crate::layouts::{
    GH_CUCKOO_LAYOUT_PACKED, GH_CUCKOO_TILE, GhCuckooExportParams, GhCuckooFillParams,
    GhCuckooFindManyParams, GhCuckooFindParams, GhCuckooFindRoutedParams, GhCuckooHome,
    GhCuckooInsertParams, GhCuckooPartitionParams, GhCuckooPlaceParams, GhCuckooRemoveParams,
    GhCuckooResizeParams, GhCuckooSubtable, GhCuckooTable, GhCuckooUpdateParams, GhCuckooView,
};

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take, holding raw device
// pointers and integers only.
unsafe impl KernelParams for GhCuckooFindParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooFindManyParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooUpdateParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooPlaceParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooInsertParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooRemoveParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooResizeParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooExportParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooFillParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooPartitionParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhCuckooFindRoutedParams {}

// SAFETY: bindgen's repr(C) copy of the view that the caller's kernels take by value
// (gpuhash/cuckoo_view.cuh): raw device pointers and integers only.
unsafe impl cudarc::driver::DeviceRepr for crate::layouts::GhCuckooView {}
// SAFETY: bindgen's repr(C) copy of a find's parameters, which `find_many` reads from
// device memory: raw device pointers and integers only.
unsafe impl cudarc::driver::DeviceRepr for GhCuckooFindParams {}

/// One fat binary a phase, as `cuda-src/cuckoo/` splits its kernels.
static LOOKUP_IMAGE: KernelImage = gpuhash_core::kernel_image!("lookup");
static INSERT_IMAGE: KernelImage = gpuhash_core::kernel_image!("insert");
static PARTITION_IMAGE: KernelImage = gpuhash_core::kernel_image!("partition");
static REMOVE_IMAGE: KernelImage = gpuhash_core::kernel_image!("remove");
static SUBTABLE_IMAGE: KernelImage = gpuhash_core::kernel_image!("subtable");

static FILL: Kernel<GhCuckooFillParams> = Kernel::new(&SUBTABLE_IMAGE, "gh_cuckoo_fill");
/// The middle pass of sorting a batch by partition, the same for every key width.
static PARTITION_SCAN: Kernel<GhCuckooPartitionParams> =
    Kernel::new(&PARTITION_IMAGE, "gh_cuckoo_partition_scan");

/// The kernels of one key width and bucket layout.
#[derive(Debug)]
struct KeyKernels {
    find: Kernel<GhCuckooFindParams>,
    /// Several tables' finds in one launch.
    find_many: Kernel<GhCuckooFindManyParams>,
    /// A find whose keys each name their table.
    find_routed: Kernel<GhCuckooFindRoutedParams>,
    update: Kernel<GhCuckooUpdateParams>,
    /// The lock-free first pass of an insert batch.
    place: Kernel<GhCuckooPlaceParams>,
    insert: Kernel<GhCuckooInsertParams>,
    /// The insert kernel for one-word values, which needs fewer registers.
    insert1: Kernel<GhCuckooInsertParams>,
    remove: Kernel<GhCuckooRemoveParams>,
    resize: Kernel<GhCuckooResizeParams>,
    export: Kernel<GhCuckooExportParams>,
    /// The first and last passes of sorting an insert batch by partition.
    partition_count: Kernel<GhCuckooPartitionParams>,
    partition_scatter: Kernel<GhCuckooPartitionParams>,
}

/// `$suffix` names the layout's kernels; `$keys` those that read keys only (the sort by
/// partition), which the layouts of one key width share.
macro_rules! key_kernels {
    ($name:ident, $suffix:literal, $keys:literal) => {
        static $name: KeyKernels = KeyKernels {
            find: Kernel::new(&LOOKUP_IMAGE, concat!("gh_cuckoo_find_", $suffix)),
            find_many: Kernel::new(&LOOKUP_IMAGE, concat!("gh_cuckoo_find_many_", $suffix)),
            find_routed: Kernel::new(&LOOKUP_IMAGE, concat!("gh_cuckoo_find_routed_", $suffix)),
            update: Kernel::new(&INSERT_IMAGE, concat!("gh_cuckoo_update_", $suffix)),
            place: Kernel::new(&INSERT_IMAGE, concat!("gh_cuckoo_place_", $suffix)),
            insert: Kernel::new(&INSERT_IMAGE, concat!("gh_cuckoo_insert_", $suffix)),
            insert1: Kernel::new(&INSERT_IMAGE, concat!("gh_cuckoo_insert1_", $suffix)),
            remove: Kernel::new(&REMOVE_IMAGE, concat!("gh_cuckoo_remove_", $suffix)),
            resize: Kernel::new(&SUBTABLE_IMAGE, concat!("gh_cuckoo_resize_", $suffix)),
            export: Kernel::new(&LOOKUP_IMAGE, concat!("gh_cuckoo_export_", $suffix)),
            partition_count: Kernel::new(
                &PARTITION_IMAGE,
                concat!("gh_cuckoo_partition_count_", $keys),
            ),
            partition_scatter: Kernel::new(
                &PARTITION_IMAGE,
                concat!("gh_cuckoo_partition_scatter_", $keys),
            ),
        };
    };
}

key_kernels!(U32_KERNELS, "u32", "u32");
key_kernels!(U64_KERNELS, "u64", "u64");

/// Packed u32 pairs. Their values are 4 bytes, so the insert kernel of any width is the
/// one-word one (`insert1`) too.
static P32_KERNELS: KeyKernels = KeyKernels {
    find: Kernel::new(&LOOKUP_IMAGE, "gh_cuckoo_find_p32"),
    find_many: Kernel::new(&LOOKUP_IMAGE, "gh_cuckoo_find_many_p32"),
    find_routed: Kernel::new(&LOOKUP_IMAGE, "gh_cuckoo_find_routed_p32"),
    update: Kernel::new(&INSERT_IMAGE, "gh_cuckoo_update_p32"),
    place: Kernel::new(&INSERT_IMAGE, "gh_cuckoo_place_p32"),
    insert: Kernel::new(&INSERT_IMAGE, "gh_cuckoo_insert1_p32"),
    insert1: Kernel::new(&INSERT_IMAGE, "gh_cuckoo_insert1_p32"),
    remove: Kernel::new(&REMOVE_IMAGE, "gh_cuckoo_remove_p32"),
    resize: Kernel::new(&SUBTABLE_IMAGE, "gh_cuckoo_resize_p32"),
    export: Kernel::new(&LOOKUP_IMAGE, "gh_cuckoo_export_p32"),
    partition_count: Kernel::new(&PARTITION_IMAGE, "gh_cuckoo_partition_count_u32"),
    partition_scatter: Kernel::new(&PARTITION_IMAGE, "gh_cuckoo_partition_scatter_u32"),
};

/// The kernels compiled for the width of `K` and the bucket layout `layout`
/// (`GH_CUCKOO_LAYOUT_*`). Packed buckets hold u32 keys only (the table resolves no other
/// packed layout): asserted, since the packed kernels would read u64 keys as u32.
fn kernels<K: Key>(layout: u32) -> &'static KeyKernels {
    let packed = layout == GH_CUCKOO_LAYOUT_PACKED;
    assert!(!packed || K::WORDS == 1, "packed buckets hold u32 keys");
    match (packed, K::WORDS) {
        (true, _) => &P32_KERNELS,
        (false, 1) => &U32_KERNELS,
        (false, _) => &U64_KERNELS,
    }
}

/// The u64 counters a writing batch's scratch space holds (`Scratch::counters`), by the
/// word each kernel adds to.
pub(crate) mod counter {
    /// Evicted keys the insert kernel logged.
    pub(crate) const LOGGED: usize = 0;
    /// Homeless pairs the insert kernel set aside.
    pub(crate) const FAILED: usize = 1;
    /// Keys a lookup found; in the place pass, the pairs it left pending.
    pub(crate) const HITS: usize = 2;
    /// Pairs the place pass left pending (the word lookups count hits in).
    pub(crate) const PENDING: usize = 2;
    /// Pairs of the place pass whose key an equal pair of the batch placed.
    pub(crate) const DUPLICATES: usize = 3;
    /// The place pass's pairs handed out to blocks so far.
    pub(crate) const CURSOR: usize = 4;
    /// The first word of the report a batch's last remove launch writes
    /// (`GH_CUCKOO_REPORT_*` words from here: the table's counts and side flag).
    pub(crate) const REPORT: usize = 5;
    /// Words of the counters buffer.
    pub(crate) const WORDS: usize = REPORT + crate::layouts::GH_CUCKOO_REPORT_WORDS as usize;
}

/// Lanes a block.
const THREADS: u32 = 256;

/// A launch of one tile of `GH_CUCKOO_TILE` lanes per unit.
pub(crate) fn tile_shape(stream: &Stream, units: u64) -> LaunchShape {
    lane_shape(stream, units * u64::from(GH_CUCKOO_TILE))
}

/// A launch of one lane per unit.
pub(crate) fn lane_shape(stream: &Stream, units: u64) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), units.max(1), THREADS)
}

/// The address of word `index` of a counters buffer.
fn counter_ptr(counters: &DeviceAddress<'_>, index: usize) -> *mut u64 {
    (counters.address + 8 * index as u64) as *mut u64
}

fn const_ptr<T>(address: Option<&DeviceAddress<'_>>) -> *const T {
    address.map_or(std::ptr::null(), |a| a.address as *const T)
}

fn mut_ptr<T>(address: Option<&DeviceAddress<'_>>) -> *mut T {
    address.map_or(std::ptr::null_mut(), |a| a.address as *mut T)
}

/// Checks that a counters buffer holds every counter a kernel may add to.
fn check_counters(counters: &DeviceBuffer<u64>) {
    assert!(
        counters.len() >= counter::WORDS,
        "a counters buffer holds {} words",
        counter::WORDS
    );
}

/// A batch lookup: whether each key is present, its value, and the number of hits.
pub(crate) struct Find<'a, K, V> {
    pub(crate) table: GhCuckooTable,
    pub(crate) home: GhCuckooHome,
    pub(crate) keys: &'a DeviceBuffer<K>,
    /// found[i] = 1 where keys[i] is present, else 0.
    pub(crate) found: Option<&'a mut DeviceBuffer<u8>>,
    /// The value of keys[i] where found.
    pub(crate) values: Option<&'a mut DeviceBuffer<V>>,
    /// Counters whose [`counter::HITS`] word gains the hits.
    pub(crate) hits: Option<&'a mut DeviceBuffer<u64>>,
}

/// Queues the find kernel over every key of `find.keys`.
///
/// # Safety
/// Sound when `find.table` describes live arrays (held until the launch is queued) and
/// `home` is the table's; the kernel only reads them. The outputs must hold a place for
/// every key (asserted here).
pub(crate) fn find<K: Key, V: bytemuck::Pod>(stream: &Stream, find: Find<'_, K, V>) -> Result<()> {
    let count = find.keys.len();
    assert!(find.found.as_ref().is_none_or(|f| f.len() >= count));
    assert!(find.values.as_ref().is_none_or(|v| v.len() >= count));
    if let Some(hits) = &find.hits {
        check_counters(hits);
    }
    let k = find.keys.address(stream);
    let f = find.found.map(|b| b.address_mut(stream));
    let v = find.values.map(|b| b.address_mut(stream));
    let h = find.hits.map(|b| b.address_mut(stream));
    let params = GhCuckooFindParams {
        home: find.home,
        table: find.table,
        keys: k.address as *const _,
        values_out: mut_ptr(v.as_ref()),
        found_out: mut_ptr(f.as_ref()),
        hits: h
            .as_ref()
            .map_or(std::ptr::null_mut(), |a| counter_ptr(a, counter::HITS)),
        count: count as u64,
    };
    let shape = tile_shape(stream, count as u64);
    // SAFETY: the table's arrays are live and only read (the caller's part); keys and the
    // outputs, when given, hold `count` entries and `hits` every counter (asserted), all
    // borrowed until the launch is queued.
    unsafe {
        kernels::<K>(params.table.layout)
            .find
            .launch(stream, shape, params)
    }?;
    Ok(())
}

/// One table's part of a [`find_many`]: its keys and answers as ranges of buffers that
/// every part shares.
pub(crate) struct FindPart {
    pub(crate) table: GhCuckooTable,
    pub(crate) home: GhCuckooHome,
    /// The part's keys, found flags and values: `range` of the shared buffers.
    pub(crate) range: Range<usize>,
}

/// The buffers the parts of a [`find_many`] share: keys, and where the answers go, at the
/// keys' places.
pub(crate) struct FindShared<'a, K, V> {
    pub(crate) keys: &'a DeviceBuffer<K>,
    pub(crate) found: &'a mut DeviceBuffer<u8>,
    pub(crate) values: Option<&'a mut DeviceBuffer<V>>,
}

/// Queues one launch of the find kernel of layout `layout` for every part: the keys of
/// each part's range looked up in its table, the answers at the same places. Each part
/// gets the same number of blocks, as many as its largest needs (within the device's
/// resident blocks in all; a launch cut to fewer serves them in turn). Each part's `table`
/// must describe live arrays of a table of layout `layout` and the width of `K`, held until
/// the launch is queued (the caller's part, as for [`find`]).
pub(crate) fn find_many<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    layout: u32,
    parts: &[FindPart],
    shared: FindShared<'_, K, V>,
) -> Result<()> {
    let len = shared.keys.len();
    assert!(shared.found.len() >= len);
    assert!(shared.values.as_ref().is_none_or(|v| v.len() >= len));
    assert!(parts.iter().all(|part| part.range.end <= len));
    let Some(largest) = parts.iter().map(|part| part.range.len()).max() else {
        return Ok(());
    };
    let words = size_of::<V>() / 4;
    let k = shared.keys.address(stream);
    let f = shared.found.address_mut(stream);
    let v = shared.values.map(|b| b.address_mut(stream));
    let list: Vec<GhCuckooFindParams> = parts
        .iter()
        .map(|part| GhCuckooFindParams {
            table: part.table,
            home: part.home,
            keys: (k.address + (part.range.start * size_of::<K>()) as u64) as *const _,
            values_out: v.as_ref().map_or(std::ptr::null_mut(), |v| {
                (v.address + (part.range.start * words * 4) as u64) as *mut u32
            }),
            found_out: (f.address + part.range.start as u64) as *mut u8,
            hits: std::ptr::null_mut(),
            count: part.range.len() as u64,
        })
        .collect();
    let one = tile_shape(stream, largest as u64);
    let resident = tile_shape(stream, u64::MAX).blocks;
    let blocks_per_part = one.blocks.min((resident / parts.len() as u32).max(1));
    let shape = LaunchShape {
        blocks: blocks_per_part * parts.len() as u32,
        ..one
    };
    with_list(stream, &list, |list_at| {
        let params = GhCuckooFindManyParams {
            list: list_at as *const GhCuckooFindParams,
            parts: parts.len() as u32,
            blocks_per_part,
        };
        // SAFETY: each part's keys and answers lie within the shared buffers (asserted),
        // which stay borrowed, like the list, until the launch is queued (their frees are
        // ordered after it on the stream); the tables' arrays are live and only read (the
        // caller's part); the list holds `parts` entries, and the grid `parts *
        // blocks_per_part` blocks.
        unsafe { kernels::<K>(layout).find_many.launch(stream, shape, params) }
    })
}

/// Runs `launch` with the device address of a copy of `list`, made on `stream` (0 for an
/// empty list); the copy, and its place in the stream's order, last until `launch` returns,
/// so a kernel that `launch` queues reads it before it is freed.
fn with_list<T: cudarc::driver::DeviceRepr>(
    stream: &Stream,
    list: &[T],
    launch: impl FnOnce(u64) -> gpuhash_core::Result<()>,
) -> Result<()> {
    if list.is_empty() {
        return Ok(launch(0)?);
    }
    let on_device = stream
        .cuda_stream()
        .clone_htod(list)
        .map_err(gpuhash_core::Error::from)?;
    let (list_at, _list_order) =
        cudarc::driver::DevicePtr::device_ptr(&on_device, stream.cuda_stream());
    Ok(launch(list_at)?)
}

/// A [`find_routed`]'s buffers: the keys of a range, each with its route (past the routes:
/// left out), and where the answers go, at the keys' places.
pub(crate) struct FindRouted<'a, K, V> {
    pub(crate) batch: Routed<'a, K>,
    pub(crate) found: &'a mut DeviceBuffer<u8>,
    pub(crate) values: Option<&'a mut DeviceBuffer<V>>,
}

/// Queues one launch of the routed find kernel of layout `layout`: each key of the range
/// looked up in the table of `routes` its route names, each routed key's flag written,
/// values where found. Each route must describe live arrays of a table of layout `layout`
/// and the width of `K` (on the device, or mapped host memory), held until the launch is
/// queued (the caller's part, as for [`find`]).
pub(crate) fn find_routed<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    layout: u32,
    routes: &[GhCuckooView],
    buffers: FindRouted<'_, K, V>,
) -> Result<()> {
    let Routed {
        keys,
        range,
        route_of,
    } = buffers.batch;
    let count = range.len();
    assert!(keys.len() >= range.end && buffers.found.len() >= range.end);
    assert!(buffers.values.as_ref().is_none_or(|v| v.len() >= range.end));
    assert!(route_of.len() >= count);
    assert!(routes.iter().all(|r| r.table.layout == layout));
    let k = keys.address(stream);
    let r = route_of.address(stream);
    let f = buffers.found.address_mut(stream);
    let v = buffers.values.map(|b| b.address_mut(stream));
    let words = size_of::<V>() / 4;
    with_list(stream, routes, |list_at| {
        let params = GhCuckooFindRoutedParams {
            routes: list_at as *const GhCuckooView,
            route_of: r.address as *const u32,
            keys: (k.address + (range.start * size_of::<K>()) as u64) as *const _,
            values_out: v.as_ref().map_or(std::ptr::null_mut(), |v| {
                (v.address + (range.start * words * 4) as u64) as *mut u32
            }),
            found_out: (f.address + range.start as u64) as *mut u8,
            count: count as u64,
            route_count: routes.len() as u32,
            value_words: words as u32,
        };
        // SAFETY: keys, flags and values (when given) hold the range and `route_of` a route
        // for each of its keys (asserted), all borrowed, like the list, until the launch is
        // queued; a key whose route is past `route_count` reads no table (with no routes,
        // none does); the tables' arrays are live and only read (the caller's part).
        unsafe {
            kernels::<K>(layout).find_routed.launch(
                stream,
                tile_shape(stream, count as u64),
                params,
            )
        }
    })
}

/// Every pair of the subtables into flat arrays.
pub(crate) struct Export<'a, K, V> {
    pub(crate) table: GhCuckooTable,
    /// The most buckets of any subtable.
    pub(crate) buckets: u64,
    pub(crate) keys: &'a mut DeviceBuffer<K>,
    pub(crate) values: &'a mut DeviceBuffer<V>,
    /// One word: the pairs the kernel found, written or not.
    pub(crate) written: &'a mut DeviceBuffer<u64>,
    /// The pairs it may write: the first `capacity` places of `keys` and `values`.
    pub(crate) capacity: u64,
}

/// Queues the export kernel.
///
/// # Safety
/// Sound when `export.table` describes live arrays (held until the launch is queued);
/// the kernel only reads them, writes below `capacity` in the outputs (asserted to hold
/// that many) and counts every pair in `written`.
pub(crate) fn export<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    export: Export<'_, K, V>,
) -> Result<()> {
    let capacity = export.capacity as usize;
    assert!(export.keys.len() >= capacity && export.values.len() >= capacity);
    assert!(!export.written.is_empty());
    let k = export.keys.address_mut(stream);
    let v = export.values.address_mut(stream);
    let w = export.written.address_mut(stream);
    let params = GhCuckooExportParams {
        table: export.table,
        keys_out: k.address as *mut _,
        values_out: v.address as *mut u32,
        written: w.address as *mut u64,
        capacity: export.capacity,
    };
    let shape = tile_shape(stream, export.buckets);
    // SAFETY: the table's arrays are live (the caller's part); the outputs hold
    // `capacity` pairs and `written` one word (asserted), borrowed until the launch is
    // queued.
    unsafe {
        kernels::<K>(params.table.layout)
            .export
            .launch(stream, shape, params)
    }?;
    Ok(())
}

/// Removes of the first `count` keys.
pub(crate) struct Remove<'a, K> {
    pub(crate) table: GhCuckooTable,
    pub(crate) keys: &'a DeviceBuffer<K>,
    pub(crate) count: usize,
    /// Keys flagged here are not this launch's to remove.
    pub(crate) skip: Option<&'a DeviceBuffer<u8>>,
    /// Which copies of a key go (`GH_CUCKOO_REMOVE_*`).
    pub(crate) copies: u32,
    /// removed[i] = 1 where key i's slot was emptied, else 0.
    pub(crate) removed: Option<&'a mut DeviceBuffer<u8>>,
    /// When given, word `.1` of counters `.0`, which an earlier kernel of the stream set:
    /// the keys are then the first min(that counter, `count`), read on the device.
    pub(crate) count_from: Option<(&'a mut DeviceBuffer<u64>, usize)>,
    /// Whether the launch's last block writes the table's counts and side flag into the
    /// report words ([`counter::REPORT`]) of the counters of `count_from`.
    pub(crate) report: bool,
}

/// Queues the remove kernel.
///
/// # Safety
/// Sound when `remove.table` describes live arrays (held until the launch is queued) that
/// no other batch writes meanwhile; keys, skip flags and removed flags hold `count`
/// entries (asserted).
pub(crate) fn remove<K: Key>(stream: &Stream, remove: Remove<'_, K>) -> Result<()> {
    let count = remove.count;
    assert!(remove.keys.len() >= count);
    assert!(remove.skip.is_none_or(|s| s.len() >= count));
    assert!(remove.removed.as_ref().is_none_or(|r| r.len() >= count));
    let k = remove.keys.address(stream);
    let s = remove.skip.map(|b| b.address(stream));
    let r = remove.removed.map(|b| b.address_mut(stream));
    assert!(!remove.report || remove.count_from.is_some());
    let c = remove.count_from.map(|(counters, word)| {
        check_counters(counters);
        assert!(word < counter::WORDS);
        (counters.address_mut(stream), word)
    });
    let report = match (&c, remove.report) {
        (Some((counters, _)), true) => counter_ptr(counters, counter::REPORT),
        _ => std::ptr::null_mut(),
    };
    let params = GhCuckooRemoveParams {
        table: remove.table,
        keys: k.address as *const _,
        skip: const_ptr(s.as_ref()),
        removed_out: mut_ptr(r.as_ref()),
        count: count as u64,
        count_at: c.as_ref().map_or(std::ptr::null(), |(counters, word)| {
            counter_ptr(counters, *word).cast_const()
        }),
        report,
        copies: remove.copies,
        pad: 0,
    };
    let shape = tile_shape(stream, count as u64);
    // SAFETY: the table's arrays are live and this batch's alone (the caller's part);
    // every buffer holds `count` entries (asserted) and is borrowed until the launch is
    // queued.
    unsafe {
        kernels::<K>(params.table.layout)
            .remove
            .launch(stream, shape, params)
    }?;
    Ok(())
}

/// One subtable rebuilt at twice or half its buckets.
pub(crate) struct Resize<'a, K, V> {
    pub(crate) from: GhCuckooSubtable,
    pub(crate) to: GhCuckooSubtable,
    /// Pairs that find no room in `to`: room for every pair of `from` when downsizing.
    pub(crate) residual_keys: &'a mut DeviceBuffer<K>,
    pub(crate) residual_values: &'a mut DeviceBuffer<V>,
    /// Word 0 counts the residuals.
    pub(crate) residual_count: &'a mut DeviceBuffer<u64>,
    pub(crate) value_words: u32,
    /// The seed of the keys' home slots.
    pub(crate) seed: u32,
    /// The subtables' bucket layout (`GH_CUCKOO_LAYOUT_*`).
    pub(crate) layout: u32,
}

/// Queues the resize kernel.
///
/// # Safety
/// Sound when `from` and `to` describe live subtables (held until the launch is queued)
/// that nothing else touches meanwhile, `to` with twice or half the buckets of `from`
/// and its keys empty; the residual lists must hold every pair `from` holds when
/// downsizing (upsizing leaves no residual).
pub(crate) fn resize<K: Key, V: bytemuck::Pod>(
    stream: &Stream,
    resize: Resize<'_, K, V>,
) -> Result<()> {
    assert!(!resize.residual_count.is_empty());
    let up = resize.to.buckets > resize.from.buckets;
    let units = if up {
        resize.from.buckets
    } else {
        resize.to.buckets
    };
    let rk = resize.residual_keys.address_mut(stream);
    let rv = resize.residual_values.address_mut(stream);
    let rc = resize.residual_count.address_mut(stream);
    let params = GhCuckooResizeParams {
        from: resize.from,
        to: resize.to,
        residual_keys: rk.address as *mut _,
        residual_values: rv.address as *mut u32,
        residual_count: rc.address as *mut u64,
        value_words: resize.value_words,
        seed: resize.seed,
        layout: resize.layout,
        pad: 0,
    };
    // SAFETY: both subtables are live and this launch's alone, sized by their bucket
    // counts, and the residual lists hold every pair that can be residual (the caller's
    // part); the residual count holds its word (asserted); every buffer is borrowed until
    // the launch is queued.
    unsafe {
        kernels::<K>(params.layout)
            .resize
            .launch(stream, tile_shape(stream, units), params)
    }?;
    Ok(())
}

/// Writes `word` over every 4-byte word of `buffer`.
///
/// # Safety
/// Always sound: the kernel writes the buffer's whole words only, and the buffer is
/// borrowed until the launch is queued.
pub(crate) fn fill<T: bytemuck::Pod>(
    stream: &Stream,
    buffer: &mut DeviceBuffer<T>,
    word: u32,
) -> Result<()> {
    let count = (buffer.size_bytes() / 4) as u64;
    if count == 0 {
        return Ok(());
    }
    let target = buffer.address_mut(stream);
    let params = GhCuckooFillParams {
        words: target.address as *mut u32,
        count,
        value: word,
        pad: 0,
    };
    let shape = LaunchShape::grid_stride(stream.device(), count, THREADS);
    // SAFETY: the buffer is live (its guard is held across the launch) and holds `count`
    // whole 4-byte words; the kernel writes words[i] for i < count only.
    unsafe { FILL.launch(stream, shape, params) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_follow_the_key_width_and_layout() {
        use crate::layouts::GH_CUCKOO_LAYOUT_SPLIT;
        assert!(std::ptr::eq(
            kernels::<u32>(GH_CUCKOO_LAYOUT_SPLIT),
            &U32_KERNELS
        ));
        assert!(std::ptr::eq(
            kernels::<u64>(GH_CUCKOO_LAYOUT_SPLIT),
            &U64_KERNELS
        ));
        assert!(std::ptr::eq(
            kernels::<u32>(GH_CUCKOO_LAYOUT_PACKED),
            &P32_KERNELS
        ));
    }

    #[test]
    #[should_panic(expected = "packed buckets hold u32 keys")]
    fn no_packed_kernels_for_u64_keys() {
        kernels::<u64>(GH_CUCKOO_LAYOUT_PACKED);
    }

    #[test]
    fn counters_fit_their_buffer() {
        let all = [
            counter::LOGGED,
            counter::FAILED,
            counter::HITS,
            counter::PENDING,
            counter::DUPLICATES,
        ];
        assert!(all.iter().all(|&c| c < counter::WORDS));
    }
}
