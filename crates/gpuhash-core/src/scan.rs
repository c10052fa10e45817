//! Exclusive scans (prefix sums) on the device, so that passes which lay groups end to end
//! (an export's buckets, a multimap's rows) place them without a round trip of their
//! counts through the host: only the total travels.
//!
//! [`exclusive_scan`] takes 32- or 64-bit counts ([`ScanCount`]) and writes 64-bit
//! offsets, one more than the counts, the last being the total. `cuda-src/core/scan.cu`
//! scans tiles of [`TILE`] counts, a block at a time each; when the counts span several
//! tiles, the tiles' sums are scanned the same way (recursively, a level for every factor
//! of [`TILE`]: three levels reach 2^36 counts) and each tile adds its offset. Each block
//! loops over tiles a grid apart, as every gpuhash kernel loops over its work: a launch
//! runs at most the blocks the device keeps resident ([`Kernel::launch`]), often fewer
//! than the tiles.

use bytemuck::Pod;

use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::{GH_SCAN_THREADS, GH_SCAN_TILE, GhScanParams};
use crate::{DeviceBuffer, Error, Result, Stream};

static SCAN_IMAGE: KernelImage = crate::kernel_image!("scan");

// SAFETY: bindgen's repr(C) copy of the C struct the kernels take.
unsafe impl KernelParams for GhScanParams {}

/// Counts one block scans.
pub const TILE: usize = GH_SCAN_TILE as usize;

/// The two kernels of one count width.
#[doc(hidden)]
#[derive(Debug)]
pub struct ScanKernels {
    tiles: Kernel<GhScanParams>,
    tile_sums: Kernel<GhScanParams>,
}

static U32_KERNELS: ScanKernels = ScanKernels {
    tiles: Kernel::new(&SCAN_IMAGE, "gh_scan_tiles_u32"),
    tile_sums: Kernel::new(&SCAN_IMAGE, "gh_scan_tile_sums_u32"),
};
static U64_KERNELS: ScanKernels = ScanKernels {
    tiles: Kernel::new(&SCAN_IMAGE, "gh_scan_tiles_u64"),
    tile_sums: Kernel::new(&SCAN_IMAGE, "gh_scan_tile_sums_u64"),
};

/// A count the device scans: `u32` or `u64`.
pub trait ScanCount: Pod + sealed::Sealed {
    /// The kernels at this width.
    #[doc(hidden)]
    fn kernels() -> &'static ScanKernels;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

impl ScanCount for u32 {
    fn kernels() -> &'static ScanKernels {
        &U32_KERNELS
    }
}

impl ScanCount for u64 {
    fn kernels() -> &'static ScanKernels {
        &U64_KERNELS
    }
}

/// Queues `offsets[i] = counts[0] + ... + counts[i - 1]` for every `i <= counts.len()`:
/// `offsets` must hold one more value than `counts` ([`Error::LengthMismatch`] otherwise),
/// and its last is the total. Sums wrap past 2^64.
pub fn exclusive_scan<C: ScanCount>(
    stream: &Stream,
    counts: &DeviceBuffer<C>,
    offsets: &mut DeviceBuffer<u64>,
) -> Result<()> {
    if offsets.len() != counts.len() + 1 {
        return Err(Error::LengthMismatch {
            what: "exclusive_scan: counts plus one and offsets",
            left: counts.len() + 1,
            right: offsets.len(),
        });
    }
    let tiles = tiles(counts.len());
    if tiles == 1 {
        return launch(stream, &C::kernels().tiles, counts, None, offsets, tiles);
    }
    let mut sums = DeviceBuffer::<u64>::unfilled(stream, tiles)?;
    launch(
        stream,
        &C::kernels().tile_sums,
        counts,
        None,
        &mut sums,
        tiles,
    )?;
    let mut tile_offsets = DeviceBuffer::<u64>::unfilled(stream, tiles + 1)?;
    exclusive_scan(stream, &sums, &mut tile_offsets)?;
    launch(
        stream,
        &C::kernels().tiles,
        counts,
        Some(&tile_offsets),
        offsets,
        tiles,
    )
}

/// The total of an [`exclusive_scan`]: the last of its offsets, copied to the host once
/// the work queued on `stream` has run; waits for it.
pub fn scanned_total(stream: &Stream, offsets: &DeviceBuffer<u64>) -> Result<u64> {
    let last = offsets
        .len()
        .checked_sub(1)
        .ok_or_else(|| Error::InvalidInput("scanned_total: no offsets".into()))?;
    let mut total = stream.device().pinned_pool().take::<u64>(1)?;
    offsets.copy_to_pinned_range_async(stream, last..last + 1, &mut total, 0)?;
    // Reading the pinned buffer waits for the copy into it.
    Ok(total[0])
}

/// Tiles the kernels run for `count` counts: one past the last count too, whose thread
/// writes the total.
fn tiles(count: usize) -> usize {
    count / TILE + 1
}

/// One launch of `kernel`, a block a tile, over `counts` into `out`.
fn launch<C: ScanCount>(
    stream: &Stream,
    kernel: &Kernel<GhScanParams>,
    counts: &DeviceBuffer<C>,
    tile_offsets: Option<&DeviceBuffer<u64>>,
    out: &mut DeviceBuffer<u64>,
    tiles: usize,
) -> Result<()> {
    // The kernels loop over the tiles, so a grid of fewer blocks covers them too.
    let blocks = u32::try_from(tiles).unwrap_or(u32::MAX);
    let c = counts.address(stream);
    let t = tile_offsets.map(|b| b.address(stream));
    let o = out.address_mut(stream);
    let params = GhScanParams {
        counts: c.address as *const _,
        count: counts.len() as u64,
        tile_offsets: t
            .as_ref()
            .map_or(std::ptr::null(), |a| a.address as *const u64),
        out: o.address as *mut u64,
    };
    let shape = LaunchShape {
        blocks,
        threads_per_block: GH_SCAN_THREADS,
        shared_bytes: 0,
    };
    // SAFETY: `counts` holds `count` values of the kernel's width; `tile_offsets`, when
    // given, holds one offset a tile; `out` holds `count + 1` offsets for the tiles kernel
    // (checked by `exclusive_scan`) or one sum a tile for the tile sums kernel (the
    // caller sized it to `tiles`, which the kernel computes from `count` as `tiles` does
    // here); each tile is one block's, which touches only that tile's counts and outputs;
    // the guards live until the launch is queued.
    unsafe { kernel.launch(stream, shape, params) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tiles_reach_one_past_the_last_count() {
        assert_eq!(tiles(0), 1);
        assert_eq!(tiles(TILE - 1), 1);
        assert_eq!(tiles(TILE), 2);
        assert_eq!(tiles(3 * TILE + 5), 4);
    }
}
