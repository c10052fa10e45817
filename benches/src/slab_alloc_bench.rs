//! SlabAlloc: one slab allocation per thread, as in the SlabHash paper, against device-side malloc.

use gpuhash_core::{Device, DeviceBuffer, Stream};
use gpuhash_slab_alloc::baseline::DeviceMallocBaseline;
use gpuhash_slab_alloc::{Claim, Fill, SlabAlloc, SlabAllocError, SlabAllocOptions, Variant};

use crate::measure::{Measurement, Runs, median_ms};

/// Allocation counts of the benchmark: 1M and 16M slabs.
pub const COUNTS: [usize; 2] = [1 << 20, 1 << 24];

/// Device malloc runs at 1M only: on the H100 1M calls take 1.2 s, and 16M did not finish
/// in 200 s (2026-11-23), so the larger count would only stall the benchmark.
pub const MALLOC_COUNT: usize = 1 << 20;

/// One allocation per thread for `count` threads, from an allocator reserving twice that
/// (so the run ends at half its capacity and never grows while timed); reset between runs.
pub fn slab_alloc(
    stream: &Stream,
    variant: Variant,
    claim: Claim,
    count: usize,
    runs: Runs,
) -> Result<Measurement, SlabAllocError> {
    let options = SlabAllocOptions {
        variant,
        initial_slabs: 2 * count as u64,
    };
    let mut alloc = SlabAlloc::new(stream, options)?;
    let mut addresses = DeviceBuffer::<u32>::zeroed(stream, count)?;
    // Exhaustion flags are read after timing: reading one waits for the stream.
    let mut flags = Vec::new();
    let ms = median_ms(
        stream,
        runs,
        &mut alloc,
        |alloc| alloc.reset(stream),
        |alloc| {
            flags.push(alloc.allocate_into(stream, &mut addresses, None, Fill::All, claim)?);
            Ok(())
        },
    )?;
    let mut exhausted = false;
    for flag in &flags {
        exhausted |= flag.happened(stream)?;
    }
    // Check the last run, so a broken allocator cannot post a fast time.
    let in_use = alloc.slabs_in_use(stream)?;
    if exhausted || in_use != count as u64 {
        return Err(gpuhash_core::Error::InvalidInput(format!(
            "SlabAlloc {variant:?} ran out or miscounted: {in_use} of {count} slabs in use"
        ))
        .into());
    }
    let name = format!(
        "SlabAlloc {variant:?}, claim {claim:?}, {} MiB reserved",
        alloc.bytes_reserved() >> 20
    );
    Ok(Measurement {
        name,
        items: count,
        bytes: None,
        ms,
    })
}

/// Sets the device-malloc heap to twice the slabs of [`MALLOC_COUNT`]: call once, before
/// [`device_malloc`], since the heap cannot change after a kernel has used it.
pub fn reserve_malloc_heap(device: &Device) -> Result<(), SlabAllocError> {
    DeviceMallocBaseline::reserve_heap(device, 2 * 128 * MALLOC_COUNT)
}

/// Device-side `malloc(128)` once per thread for `count` threads; freed between runs.
pub fn device_malloc(
    stream: &Stream,
    count: usize,
    runs: Runs,
) -> Result<Measurement, SlabAllocError> {
    let mut baseline = DeviceMallocBaseline::new(stream, count)?;
    let ms = median_ms(
        stream,
        runs,
        &mut baseline,
        |b| b.free(stream),
        |b| b.allocate(stream),
    )?;
    let failures = baseline.failures(stream)?;
    baseline.free(stream)?;
    if failures != 0 {
        return Err(gpuhash_core::Error::InvalidInput(format!(
            "device malloc returned null {failures} times"
        ))
        .into());
    }
    Ok(Measurement {
        name: "device malloc(128)".into(),
        items: count,
        bytes: None,
        ms,
    })
}
