//! The kernels of `cuda-src/swap/` (`partition.cu`, `filter.cu`): the only place this crate
//! hands raw device pointers to the GPU.

use std::ops::Range;

use bytemuck::Pod;
use gpuhash_core::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use gpuhash_core::{DeviceAddress, DeviceBuffer, Result, Stream};

use crate::layouts::{
    GH_SWAP_FILTER_BLOCK_WORDS, GH_SWAP_THREADS, GhSwapCountParams, GhSwapFilterAddParams,
    GhSwapGatherParams, GhSwapPlacesParams, GhSwapScatterParams,
};

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take, holding raw device
// pointers and integers only.
unsafe impl KernelParams for GhSwapCountParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSwapScatterParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSwapGatherParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSwapPlacesParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSwapFilterAddParams {}

static IMAGE: KernelImage = gpuhash_core::kernel_image!("partition");
static COUNT: Kernel<GhSwapCountParams> = Kernel::new(&IMAGE, "gh_swap_count");
static SCATTER: Kernel<GhSwapScatterParams> = Kernel::new(&IMAGE, "gh_swap_scatter");
static GATHER: Kernel<GhSwapGatherParams> = Kernel::new(&IMAGE, "gh_swap_gather");
static PLACES: Kernel<GhSwapPlacesParams> = Kernel::new(&IMAGE, "gh_swap_places");
static FILTER_IMAGE: KernelImage = gpuhash_core::kernel_image!("filter");
static FILTER_ADD: Kernel<GhSwapFilterAddParams> = Kernel::new(&FILTER_IMAGE, "gh_swap_filter_add");

fn shape(stream: &Stream, items: usize) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), items as u64, GH_SWAP_THREADS)
}

/// The address of element `at` of a buffer whose first element is at `base`.
fn element<T>(base: u64, at: usize) -> u64 {
    base + (at * size_of::<T>()) as u64
}

/// Words of a count a child: its keys, those its filter passed, those its filter ruled out.
pub(crate) const COUNT_WORDS: usize = 3;

/// Chooses the child of `keys[range]` (of `counts.len() / COUNT_WORDS` children, by the
/// spread of `seed`: [`crate::policy::Spread`]) into `child_of` (when given: a count alone
/// needs none, and then takes any range) and adds each child's keys
/// to `counts[child]`, and those its filter in `filters` passes (where it has one there) to
/// `counts[children + child]`: `counts` is zeroed by the caller, [`COUNT_WORDS`] words a
/// child. A key its filter rules out is left out (its child is `GH_SWAP_NO_CHILD`, and the
/// segment does not move it), counted in `counts[2 * children + child]` alone. With
/// `in_pass` (a byte a child), the keys of the children it marks 0 are left out too,
/// and nothing counts them.
#[allow(
    clippy::too_many_arguments,
    reason = "a count's keys, its scope (seed, filters, pass) and its two outputs"
)]
pub(crate) fn count<K: Pod>(
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    range: Range<usize>,
    seed: u64,
    filters: Option<&FilterSet<'_>>,
    in_pass: Option<&DeviceBuffer<u8>>,
    child_of: Option<&mut DeviceBuffer<u32>>,
    counts: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let items = range.len();
    if items == 0 {
        return Ok(());
    }
    let children = counts.len() / COUNT_WORDS;
    assert!(range.end <= keys.len());
    assert!(filters.is_none_or(|set| set.addresses.len() == children));
    assert!(in_pass.is_none_or(|marks| marks.len() == children));
    assert!(
        child_of
            .as_ref()
            .is_none_or(|child_of| child_of.len() >= items)
    );
    let table_at = filters.map(|set| set.addresses.address(stream));
    let in_pass_at = in_pass.map(|marks| marks.address(stream));
    let keys_at = keys.address(stream);
    let child_at = child_of.map(|child_of| child_of.address_mut(stream));
    let counts_at = counts.address_mut(stream);
    let params = GhSwapCountParams {
        keys: element::<K>(keys_at.address, range.start) as *const u32,
        count: items as u64,
        key_words: (size_of::<K>() / 4) as u32,
        children: children as u32,
        child_of: child_at
            .as_ref()
            .map_or(std::ptr::null_mut(), |c| c.address as *mut u32),
        counts: counts_at.address as *mut u32,
        filters: table_at
            .as_ref()
            .map_or(std::ptr::null(), |t| t.address as *const u64),
        blocks: filters.map_or(0, |set| set.blocks),
        reserved: 0,
        passed: element::<u32>(counts_at.address, children) as *mut u32,
        ruled_out: element::<u32>(counts_at.address, 2 * children) as *mut u32,
        in_pass: in_pass_at
            .as_ref()
            .map_or(std::ptr::null(), |m| m.address as *const u8),
        seed,
    };
    // SAFETY: `range` lies within `keys`, `child_of` (when given) holds `items` words and
    // `counts` three words a child (asserted or by construction), so every index the
    // kernel uses (below `items`, and child ids below `children`, plus `children` for the
    // passed counts and twice that for those ruled out) is in bounds; the filter set, when
    // given, holds one address a child (asserted), each 0 or a live filter of `blocks`
    // blocks, kept borrowed by its guards; `in_pass`, when given, holds a byte a child
    // (asserted); the buffers stay borrowed until the launch is queued and their frees are
    // ordered after it.
    unsafe { COUNT.launch(stream, shape(stream, items), params) }
}

/// Where the scatter writes: the partitioned keys, values (when there are values) and the
/// input place of each element.
pub(crate) struct ScatterTarget<'a, K, V> {
    pub keys: &'a mut DeviceBuffer<K>,
    pub values: Option<&'a mut DeviceBuffer<V>>,
    pub index: &'a mut DeviceBuffer<u32>,
}

/// Moves `keys[range]` (and `values[range]`) into their children's ranges, whose first
/// places `cursors` holds; records each element's place within `range`.
pub(crate) fn scatter<K: Pod, V: Pod>(
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    values: Option<&DeviceBuffer<V>>,
    range: Range<usize>,
    child_of: &DeviceBuffer<u32>,
    cursors: &mut DeviceBuffer<u32>,
    target: ScatterTarget<'_, K, V>,
) -> Result<()> {
    let items = range.len();
    if items == 0 {
        return Ok(());
    }
    let keys_at = keys.address(stream);
    let values_at = values.map(|v| v.address(stream));
    let child_at = child_of.address(stream);
    let children = cursors.len() as u32;
    let cursors_at = cursors.address_mut(stream);
    let out_keys = target.keys.address_mut(stream);
    let out_values = target.values.map(|v| v.address_mut(stream));
    let out_index = target.index.address_mut(stream);
    let params = GhSwapScatterParams {
        keys: element::<K>(keys_at.address, range.start) as *const u32,
        values: values_at.as_ref().map_or(std::ptr::null(), |v| {
            element::<V>(v.address, range.start) as *const u8
        }),
        child_of: child_at.address as *const u32,
        count: items as u64,
        key_words: (size_of::<K>() / 4) as u32,
        value_bytes: size_of::<V>() as u32,
        cursors: cursors_at.address as *mut u32,
        children,
        reserved: 0,
        out_keys: out_keys.address as *mut u32,
        out_values: out_values
            .as_ref()
            .map_or(std::ptr::null_mut(), |v| v.address as *mut u8),
        out_index: out_index.address as *mut u32,
    };
    // SAFETY: `range` lies within `keys` and `values` (same length, checked by the
    // caller); `child_of` holds `items` child ids from `count`, and `cursors` each child's
    // first place from the scan of its counts, so the places the kernel takes are the
    // `items` places of the targets, each of which holds `items` elements; values are
    // read and written only when both pointers are given.
    unsafe { SCATTER.launch(stream, shape(stream, items), params) }
}

/// `target[offset + index[i]] = source[i]` for every `i`, or only where `found[i] != 0`.
pub(crate) fn gather<T: Pod>(
    stream: &Stream,
    source: &DeviceBuffer<T>,
    index: &DeviceBuffer<u32>,
    found: Option<&DeviceBuffer<u8>>,
    target: &mut DeviceBuffer<T>,
    offset: usize,
) -> Result<()> {
    let items = source.len();
    if items == 0 {
        return Ok(());
    }
    let source_at = source.address(stream);
    let index_at = index.address(stream);
    let found_at = found.map(|f| f.address(stream));
    let target_at = target.address_mut(stream);
    let params = GhSwapGatherParams {
        source: source_at.address as *const u8,
        index: index_at.address as *const u32,
        found: found_at
            .as_ref()
            .map_or(std::ptr::null(), |f| f.address as *const u8),
        count: items as u64,
        element_bytes: size_of::<T>() as u32,
        reserved: 0,
        target: element::<T>(target_at.address, offset) as *mut u8,
    };
    // SAFETY: `index` and `found` hold `items` elements like `source` (one partition);
    // each index is a place within the segment that starts at `offset`, and the caller
    // checked that the segment lies within `target`.
    unsafe { GATHER.launch(stream, shape(stream, items), params) }
}

/// A new buffer holding `source[range]`.
pub(crate) fn copy_range<T: Pod>(
    stream: &Stream,
    source: &DeviceBuffer<T>,
    range: Range<usize>,
) -> Result<DeviceBuffer<T>> {
    let mut target = DeviceBuffer::unfilled(stream, range.len())?;
    target.copy_range_from(stream, 0, source, range)?;
    Ok(target)
}

/// Writes `offset + index[picked[i]]` for each `i` in `range` into `target` from element
/// `at` on: the places in the batch of elements picked (by their places in `index`, a
/// partition's input places within a segment that starts at `offset`). The caller keeps
/// `offset` plus every place of the segment within a `u32`.
pub(crate) fn places(
    stream: &Stream,
    index: &DeviceBuffer<u32>,
    picked: &DeviceBuffer<u32>,
    range: Range<usize>,
    offset: usize,
    target: &mut DeviceBuffer<u32>,
    at: usize,
) -> Result<()> {
    within("places: picked", &range, picked.len())?;
    within("places: target", &(at..at + range.len()), target.len())?;
    if range.is_empty() {
        return Ok(());
    }
    let index_at = index.address(stream);
    let picked_at = picked.address(stream);
    let target_at = target.address_mut(stream);
    let params = GhSwapPlacesParams {
        index: index_at.address as *const u32,
        picked: element::<u32>(picked_at.address, range.start) as *const u32,
        count: range.len() as u64,
        offset: offset as u64,
        target: element::<u32>(target_at.address, at) as *mut u32,
    };
    // SAFETY: `range` lies within `picked` and the writes within `target` (checked above);
    // each picked value is a place of the partition that `index` holds (the survivors'
    // places, [`iota`]'s below the partition's length), so every read of `index` is in
    // bounds.
    unsafe { PLACES.launch(stream, shape(stream, range.len()), params) }
}

/// Writes `i` at every place `i` of `target`.
pub(crate) fn iota(stream: &Stream, target: &mut DeviceBuffer<u32>) -> Result<()> {
    if target.is_empty() {
        return Ok(());
    }
    let count = target.len();
    let target_at = target.address_mut(stream);
    let params = GhSwapPlacesParams {
        index: std::ptr::null(),
        picked: std::ptr::null(),
        count: count as u64,
        offset: 0,
        target: target_at.address as *mut u32,
    };
    // SAFETY: with no index and nothing picked the kernel reads nothing and writes
    // `target[i]` for `i < count`, the buffer's length.
    unsafe { PLACES.launch(stream, shape(stream, count), params) }
}

/// An error unless `range` lies within `0..len`.
fn within(what: &str, range: &Range<usize>, len: usize) -> Result<()> {
    match range.end <= len {
        true => Ok(()),
        false => Err(gpuhash_core::Error::InvalidInput(format!(
            "{what}: {range:?} overruns a buffer of {len}"
        ))),
    }
}

/// Words of a filter of `blocks` blocks.
pub(crate) fn filter_words(blocks: u32) -> usize {
    blocks as usize * GH_SWAP_FILTER_BLOCK_WORDS as usize
}

/// Adds `keys` to `filter`, a filter of `blocks` blocks.
pub(crate) fn filter_add<K: Pod>(
    stream: &Stream,
    keys: &DeviceBuffer<K>,
    blocks: u32,
    filter: &mut DeviceBuffer<u32>,
) -> Result<()> {
    assert_eq!(filter.len(), filter_words(blocks), "a filter of its blocks");
    if keys.is_empty() {
        return Ok(());
    }
    let keys_at = keys.address(stream);
    let filter_at = filter.address_mut(stream);
    let params = GhSwapFilterAddParams {
        keys: keys_at.address as *const u32,
        count: keys.len() as u64,
        key_words: (size_of::<K>() / 4) as u32,
        blocks,
        filter: filter_at.address as *mut u32,
    };
    // SAFETY: the kernel reads `keys.len()` keys and writes words of blocks below `blocks`
    // of `filter`, which holds them all (asserted); both stay borrowed until the launch is
    // queued and their frees are ordered after it.
    unsafe { FILTER_ADD.launch(stream, shape(stream, keys.len()), params) }
}

/// The filters the partition's count consults: each child's filter
/// address in device memory (0 for a child not checked), with the guards that order the
/// filters' use on the stream they were taken on until the set is dropped.
pub(crate) struct FilterSet<'a> {
    _guards: Vec<Option<DeviceAddress<'a>>>,
    addresses: DeviceBuffer<u64>,
    blocks: u32,
}

impl<'a> FilterSet<'a> {
    /// The set of `filters` (each of `blocks` blocks, asserted), `None` for a child not
    /// checked, for kernels on `stream`.
    pub(crate) fn new(
        stream: &'a Stream,
        filters: impl IntoIterator<Item = Option<&'a DeviceBuffer<u32>>>,
        blocks: u32,
    ) -> Result<Self> {
        let guards: Vec<_> = filters
            .into_iter()
            .map(|f| {
                f.map(|f| {
                    assert_eq!(f.len(), filter_words(blocks), "a filter of its blocks");
                    f.address(stream)
                })
            })
            .collect();
        let addresses: Vec<u64> = guards
            .iter()
            .map(|g| g.as_ref().map_or(0, |g| g.address))
            .collect();
        Ok(Self {
            addresses: DeviceBuffer::from_host(stream, &addresses)?,
            _guards: guards,
            blocks,
        })
    }
}
