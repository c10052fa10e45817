//! gpuhash-core: the device's copy bandwidth, the standard workload generator, and the bus
//! (copies between host and device from pinned and from pageable memory).

use gpuhash_core::hash::fmix64;
use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{DeviceBuffer, Error, PinnedBuffer, Result, Stream};

use crate::measure::{Measurement, Runs, median_ms, no_setup};

/// A device-to-device copy of `n` key-value pairs: 8n bytes read and 8n written.
pub fn device_copy(stream: &Stream, n: usize, runs: Runs) -> Result<Measurement> {
    let source = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let mut target = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let ms = median_ms(stream, runs, &mut target, no_setup, |target| {
        target.copy_from(stream, &source)
    })?;
    Ok(Measurement {
        name: "device copy (read + write)".into(),
        items: n,
        bytes: Some(16 * n),
        ms,
    })
}

/// Copies `n` pairs back and forth until `duration` has passed on the host clock.
pub fn keep_busy(stream: &Stream, n: usize, duration: std::time::Duration) -> Result<()> {
    let source = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let mut target = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let start = std::time::Instant::now();
    while start.elapsed() < duration {
        for _ in 0..100 {
            target.copy_from(stream, &source)?;
        }
        stream.synchronize()?;
    }
    Ok(())
}

/// The workload generator writing `n` keys, and their values when `with_values`.
pub fn generator(stream: &Stream, n: usize, runs: Runs, with_values: bool) -> Result<Measurement> {
    let mut buffers = (
        DeviceBuffer::<u32>::zeroed(stream, n)?,
        DeviceBuffer::<u32>::zeroed(stream, n)?,
    );
    let ms = median_ms(stream, runs, &mut buffers, no_setup, |(keys, values)| {
        workload::generate(stream, KeySet::Hits, 0, keys, with_values.then_some(values))
    })?;
    let keys = buffers.0;
    // Check the output once, so a broken kernel cannot post a fast time.
    let written = keys.to_host(stream)?;
    if (0..n)
        .step_by((n / 4096).max(1))
        .any(|i| written[i] != KeySet::Hits.key(i as u32))
    {
        return Err(Error::InvalidInput("the generator wrote wrong keys".into()));
    }
    let (name, bytes_per_pair) = if with_values {
        ("generator keys + values", 8)
    } else {
        ("generator keys only", 4)
    };
    Ok(Measurement {
        name: name.into(),
        items: n,
        bytes: Some(bytes_per_pair * n),
        ms,
    })
}

/// Bytes each bus copy moves one way: 256 MiB.
pub const BUS_BYTES: usize = 256 << 20;

/// The bus: copies of [`BUS_BYTES`] host to device (H2D) and device to host (D2H), from and
/// to pinned memory and pageable memory (a `Vec`), and both directions at once from pinned
/// memory on two streams. Items are the u64 values copied; bytes count both directions.
pub fn bus(stream: &Stream, runs: Runs) -> Result<Vec<Measurement>> {
    let device = stream.device();
    let n = BUS_BYTES / size_of::<u64>();
    let pattern: Vec<u64> = (0..n as u64).map(fmix64).collect();
    let pinned_source = PinnedBuffer::from_slice(device, &pattern)?;
    let mut pinned_target = PinnedBuffer::<u64>::zeroed(device, n)?;
    let mut pageable_target = pattern.clone();
    let from_host = DeviceBuffer::from_host(stream, &pattern)?;
    let mut to_device = DeviceBuffer::<u64>::zeroed(stream, n)?;
    let row = |name: &str, ms: f64, directions: usize| Measurement {
        name: name.into(),
        items: n * directions,
        bytes: Some(BUS_BYTES * directions),
        ms,
    };
    let mut rows = Vec::new();

    let ms = median_ms(stream, runs, &mut to_device, no_setup, |to_device| {
        to_device.copy_from_pinned_async(stream, &pinned_source)
    })?;
    check_copy(&to_device.to_host(stream)?, &pattern, "H2D from pinned")?;
    rows.push(row("H2D 256 MiB from pinned", ms, 1));

    let ms = median_ms(stream, runs, &mut pinned_target, no_setup, |target| {
        from_host.copy_to_pinned_async(stream, target)
    })?;
    check_copy(&pinned_target, &pattern, "D2H to pinned")?;
    rows.push(row("D2H 256 MiB to pinned", ms, 1));

    to_device.fill_zero(stream)?;
    let ms = median_ms(stream, runs, &mut to_device, no_setup, |to_device| {
        to_device.copy_from_host(stream, &pattern)
    })?;
    check_copy(&to_device.to_host(stream)?, &pattern, "H2D from pageable")?;
    rows.push(row("H2D 256 MiB from pageable (Vec)", ms, 1));

    pageable_target.fill(0);
    let ms = median_ms(stream, runs, &mut pageable_target, no_setup, |target| {
        from_host.copy_to_host(stream, target)
    })?;
    check_copy(&pageable_target, &pattern, "D2H to pageable")?;
    rows.push(row("D2H 256 MiB to pageable (Vec)", ms, 1));

    // Both ways at once: `other` starts after the timer's start event, and the stop event
    // waits for `other`.
    let other = device.new_stream()?;
    to_device.fill_zero(stream)?;
    pinned_target.fill(0);
    let mut state = (to_device, pinned_target);
    let ms = median_ms(stream, runs, &mut state, no_setup, |(to_device, target)| {
        other.cuda_stream().join(stream.cuda_stream())?;
        to_device.copy_from_pinned_async(stream, &pinned_source)?;
        from_host.copy_to_pinned_async(&other, target)?;
        stream.cuda_stream().join(other.cuda_stream())?;
        Ok::<(), Error>(())
    })?;
    let (to_device, pinned_target) = state;
    check_copy(&to_device.to_host(stream)?, &pattern, "both ways, H2D")?;
    check_copy(&pinned_target, &pattern, "both ways, D2H")?;
    rows.push(row(
        "H2D + D2H 256 MiB each at once, pinned, two streams",
        ms,
        2,
    ));
    Ok(rows)
}

/// Checks a sample of a copy's output, so that a broken copy cannot post a fast time.
fn check_copy(got: &[u64], expected: &[u64], what: &str) -> Result<()> {
    let step = (expected.len() / 4096).max(1);
    if got.len() != expected.len() || (0..got.len()).step_by(step).any(|i| got[i] != expected[i]) {
        return Err(Error::InvalidInput(format!(
            "{what}: the copy wrote wrong values"
        )));
    }
    Ok(())
}
