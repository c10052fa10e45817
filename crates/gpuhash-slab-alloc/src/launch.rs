//! The kernels of `cuda-src/slab_alloc/slab_alloc.cu`: the only place this crate hands raw
//! device pointers to the GPU.

use gpuhash_core::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use gpuhash_core::{DeviceBuffer, Stream};

use crate::layouts::{
    GhAllocateParams, GhDeallocateParams, GhDeviceMallocParams, GhPopcountParams,
    GhSlabAllocContext,
};

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take.
unsafe impl KernelParams for GhAllocateParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhDeallocateParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhPopcountParams {}
// SAFETY: as above.
unsafe impl KernelParams for GhDeviceMallocParams {}
// SAFETY: as above; it travels inside the others.
unsafe impl KernelParams for GhSlabAllocContext {}

static IMAGE: KernelImage = gpuhash_core::kernel_image!("slab_alloc");
static ALLOCATE: Kernel<GhAllocateParams> = Kernel::new(&IMAGE, "gh_slab_allocate");
static DEALLOCATE: Kernel<GhDeallocateParams> = Kernel::new(&IMAGE, "gh_slab_deallocate");
static POPCOUNT: Kernel<GhPopcountParams> = Kernel::new(&IMAGE, "gh_popcount_words");
static DEVICE_MALLOC: Kernel<GhDeviceMallocParams> = Kernel::new(&IMAGE, "gh_device_malloc");
static DEVICE_FREE: Kernel<GhDeviceMallocParams> = Kernel::new(&IMAGE, "gh_device_free");

const THREADS: u32 = 256;

fn shape(stream: &Stream, items: usize) -> LaunchShape {
    LaunchShape::grid_stride(stream.device(), items as u64, THREADS)
}

/// One slab per element of `addresses` that holds the invalid address (every element when
/// `overwrite`), a warp claiming up to 32 per atomic when `claim_runs`; decoded pointers
/// into `pointers` when given (same length, checked by the caller).
pub(crate) fn allocate(
    stream: &Stream,
    alloc: GhSlabAllocContext,
    addresses: &mut DeviceBuffer<u32>,
    pointers: Option<&mut DeviceBuffer<u64>>,
    overwrite: bool,
    claim_runs: bool,
) -> gpuhash_core::Result<()> {
    let count = addresses.len();
    if count == 0 {
        return Ok(());
    }
    let pointer_address = pointers.map(|p| p.address_mut(stream));
    let address_address = addresses.address_mut(stream);
    let params = GhAllocateParams {
        alloc,
        addresses: address_address.address as *mut u32,
        pointers: pointer_address
            .as_ref()
            .map_or(std::ptr::null_mut(), |p| p.address as *mut u64),
        count: count as u64,
        overwrite: u32::from(overwrite),
        claim_runs: u32::from(claim_runs),
    };
    // SAFETY: `alloc` comes from a live `AllocContext` whose guards the caller holds;
    // addresses (and pointers, same length) hold `count` values and stay borrowed until
    // the launch is queued; the kernel touches indices below count only.
    unsafe { ALLOCATE.launch(stream, shape(stream, count), params) }
}

/// Frees each valid address; counts into `rejected[0]` those that were not in use.
pub(crate) fn deallocate(
    stream: &Stream,
    alloc: GhSlabAllocContext,
    addresses: &DeviceBuffer<u32>,
    rejected: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    let count = addresses.len();
    if count == 0 {
        return Ok(());
    }
    let source = addresses.address(stream);
    let counter = rejected.address_mut(stream);
    let params = GhDeallocateParams {
        alloc,
        addresses: source.address as *const u32,
        count: count as u64,
        rejected: counter.address as *mut u64,
    };
    // SAFETY: `alloc` comes from a live `AllocContext`; the kernel checks every address
    // against the allocator's ranges before touching a bitmap, reads `count` addresses and
    // adds to one counter word.
    unsafe { DEALLOCATE.launch(stream, shape(stream, count), params) }
}

/// Adds the number of set bits of `words` to `total[0]`.
pub(crate) fn popcount(
    stream: &Stream,
    words: &DeviceBuffer<u32>,
    total: &mut DeviceBuffer<u64>,
) -> gpuhash_core::Result<()> {
    let source = words.address(stream);
    let target = total.address_mut(stream);
    let params = GhPopcountParams {
        words: source.address as *const u32,
        count: words.len() as u64,
        total: target.address as *mut u64,
    };
    // SAFETY: `words` holds `count` values, `total` at least one; both live until queued.
    unsafe { POPCOUNT.launch(stream, shape(stream, words.len()), params) }
}

/// Device-side `malloc` of one slab per element of `pointers`, or `free` of each.
pub(crate) fn device_malloc(
    stream: &Stream,
    pointers: &mut DeviceBuffer<u64>,
    free: bool,
) -> gpuhash_core::Result<()> {
    let count = pointers.len();
    let target = pointers.address_mut(stream);
    let params = GhDeviceMallocParams {
        pointers: target.address as *mut u64,
        count: count as u64,
    };
    let kernel = if free { &DEVICE_FREE } else { &DEVICE_MALLOC };
    // SAFETY: `pointers` holds `count` values; `free` is only asked for by
    // `DeviceMallocBaseline`, whose buffer holds what the malloc kernel returned.
    unsafe { kernel.launch(stream, shape(stream, count), params) }
}
