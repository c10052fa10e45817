//! The kernels of `cuda-src/slab_list/slab_list.cu`: the only place this crate hands raw
//! device pointers to the GPU.

use gpuhash_core::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::layouts::{
    GhSlabListAppendParams, GhSlabListFreeParams, GhSlabListRemoveParams, GhSlabListScanParams,
    GhSlabLists,
};

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take.
unsafe impl KernelParams for GhSlabListAppendParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabListScanParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabListRemoveParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhSlabListFreeParams {}

static IMAGE: KernelImage = gpuhash_core::kernel_image!("slab_list");
static APPEND: Kernel<GhSlabListAppendParams> = Kernel::new(&IMAGE, "gh_slab_list_append");
static SCAN: Kernel<GhSlabListScanParams> = Kernel::new(&IMAGE, "gh_slab_list_scan");
static REMOVE: Kernel<GhSlabListRemoveParams> = Kernel::new(&IMAGE, "gh_slab_list_remove");
static FREE: Kernel<GhSlabListFreeParams> = Kernel::new(&IMAGE, "gh_slab_list_free");

const THREADS: u32 = 128;

fn grid(stream: &Stream, threads: u64) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), threads, THREADS)
}

fn per_list(stream: &Stream, lists: &GhSlabLists) -> LaunchShape {
    grid(stream, u64::from(lists.list_count) * 32)
}

/// One append pass: words[i] to list lists_of[i] for every i whose status is 0, which
/// becomes 1 when the word is stored.
pub(crate) fn append(
    stream: &Stream,
    lists: GhSlabLists,
    lists_of: &DeviceBuffer<u32>,
    words: &DeviceBuffer<u32>,
    status: &mut DeviceBuffer<u8>,
) -> gpuhash_core::Result<()> {
    let count = words.len();
    if count == 0 {
        return Ok(());
    }
    let (l, w, s) = (
        lists_of.address(stream),
        words.address(stream),
        status.address_mut(stream),
    );
    let params = GhSlabListAppendParams {
        lists,
        lists_of: l.address as *const u32,
        words: w.address as *const u32,
        status: s.address as *mut u8,
        count: count as u64,
    };
    // SAFETY: `lists` comes from the live lists and allocator the caller holds; lists_of
    // and status hold `count` elements like words (checked by the caller) and every list
    // index is below list_count (checked on the host); the kernel touches elements below
    // count only.
    unsafe { APPEND.launch(stream, grid(stream, count as u64), params) }
}

/// counts[l] = live words of list l.
pub(crate) fn count(
    stream: &Stream,
    lists: GhSlabLists,
    counts: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    let c = counts.address_mut(stream);
    let params = GhSlabListScanParams {
        lists,
        counts: c.address as *mut u64,
        ..GhSlabListScanParams::default()
    };
    // SAFETY: `counts` holds list_count words (checked by the caller); the kernel only
    // reads slabs.
    unsafe { SCAN.launch(stream, per_list(stream, &lists), params) }
}

/// The live words of list l into `words` from offsets[l], never past offsets[l + 1].
pub(crate) fn collect(
    stream: &Stream,
    lists: GhSlabLists,
    offsets: &DeviceBuffer<u64>,
    words: &mut DeviceBuffer<u32>,
) -> gpuhash_core::Result<()> {
    let (o, w) = (offsets.address(stream), words.address_mut(stream));
    let params = GhSlabListScanParams {
        lists,
        offsets: o.address as *const u64,
        words_out: w.address as *mut u32,
        ..GhSlabListScanParams::default()
    };
    // SAFETY: offsets hold list_count + 1 rising entries and `words` holds the last of
    // them (checked by the caller); the kernel writes list l only below offsets[l + 1].
    unsafe { SCAN.launch(stream, per_list(stream, &lists), params) }
}

/// Removes every copy of words[i] from list lists_of[i]; removed[i] = copies removed.
pub(crate) fn remove(
    stream: &Stream,
    lists: GhSlabLists,
    lists_of: &DeviceBuffer<u32>,
    words: &DeviceBuffer<u32>,
    removed: &mut DeviceBuffer<u32>,
) -> gpuhash_core::Result<()> {
    let count = words.len();
    if count == 0 {
        return Ok(());
    }
    let (l, w, r) = (
        lists_of.address(stream),
        words.address(stream),
        removed.address_mut(stream),
    );
    let params = GhSlabListRemoveParams {
        lists,
        lists_of: l.address as *const u32,
        words: w.address as *const u32,
        removed: r.address as *mut u32,
        count: count as u64,
    };
    // SAFETY: as for append: every buffer holds `count` elements and every list index is
    // below list_count (checked by the caller); the kernel touches elements below count.
    unsafe { REMOVE.launch(stream, grid(stream, count as u64), params) }
}

/// Empties every list, returning its slabs to the allocator.
pub(crate) fn free(stream: &Stream, lists: GhSlabLists) -> gpuhash_core::Result<()> {
    let params = GhSlabListFreeParams { lists };
    // SAFETY: the lists and their allocator are live; the caller holds the write lock and
    // has waited for the device, so no other kernel walks the lists meanwhile.
    unsafe { FREE.launch(stream, per_list(stream, &lists), params) }
}
