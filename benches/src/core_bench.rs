//! gpuhash-core: the device's copy bandwidth and the standard workload generator.

use gpuhash_core::workload::{self, KeySet};
use gpuhash_core::{DeviceBuffer, Error, Result, Stream};

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
