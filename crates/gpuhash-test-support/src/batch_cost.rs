//! The fixed cost of one small batch: what a table charges a caller who sends few keys at
//! a time, the case where launch, copy and synchronization overheads dominate.

use std::time::Instant;

use gpuhash_core::table::Map;
use gpuhash_core::{DeviceBuffer, EventTimer, Stream};

use crate::inputs::{SeededRng, values_of};

/// Keys in the batch [`batch_cost`] times.
pub const BATCH_KEYS: usize = 1024;

/// What one batch of [`BATCH_KEYS`] new keys costs a map: the insert of the batch and a
/// lookup of the same keys, medians in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchCost {
    /// `insert` then `get` through the host forms, by the wall clock: copies, the lent
    /// stream and the waits included.
    pub host_us: f64,
    /// `insert_async` then `get_async` from device buffers on the caller's stream, between
    /// CUDA events: the device work and launch gaps only.
    pub device_us: f64,
}

/// Times one batch of [`BATCH_KEYS`] keys on `table`: `warm_up` untimed runs, then the
/// median of `runs` timed ones, each on the table cleared (untimed) so that every insert
/// adds new keys. Host form by the wall clock, device form with CUDA events on `stream`
/// (see [`BatchCost`]). For a benchmark command, as
/// `batch_cost(&map, &stream, 10, 101)?`.
pub fn batch_cost<M: Map>(
    table: &M,
    stream: &Stream,
    warm_up: usize,
    runs: usize,
) -> Result<BatchCost, M::Error> {
    let keys: Vec<M::Key> = SeededRng::new(BATCH_KEYS as u64).distinct_keys(BATCH_KEYS);
    let values: Vec<M::Value> = values_of(&keys);
    let host_us = median::<M::Error>(warm_up, runs, || {
        table.clear()?;
        let start = Instant::now();
        table.insert(&keys, &values)?;
        table.get(&keys)?;
        Ok(start.elapsed().as_secs_f64() * 1e6)
    })?;
    let (keys, values) = (
        DeviceBuffer::from_host(stream, &keys)?,
        DeviceBuffer::from_host(stream, &values)?,
    );
    let mut found = DeviceBuffer::zeroed(stream, BATCH_KEYS)?;
    let mut out = DeviceBuffer::zeroed(stream, BATCH_KEYS)?;
    let device_us = median::<M::Error>(warm_up, runs, || {
        table.clear_on(stream)?;
        let timer = EventTimer::start(stream)?;
        table.insert_async(stream, &keys, &values)?;
        table.get_async(stream, &keys, &mut found, &mut out)?;
        Ok(f64::from(timer.stop()?) * 1e3)
    })?;
    Ok(BatchCost { host_us, device_us })
}

/// The median of `runs` (at least one) results of `once`, after `warm_up` untimed calls.
fn median<E>(
    warm_up: usize,
    runs: usize,
    mut once: impl FnMut() -> Result<f64, E>,
) -> Result<f64, E> {
    for _ in 0..warm_up {
        once()?;
    }
    let mut times = (0..runs.max(1))
        .map(|_| once())
        .collect::<Result<Vec<_>, E>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_counts_only_the_timed_runs() {
        let mut next = [100.0, 100.0, 3.0, 1.0, 2.0].into_iter();
        let timed = median::<()>(2, 3, || Ok(next.next().unwrap()));
        assert_eq!(timed, Ok(2.0));
        assert_eq!(median::<()>(0, 0, || Ok(7.0)), Ok(7.0));
        assert_eq!(median(0, 3, || Err("failed")), Err("failed"));
    }
}
